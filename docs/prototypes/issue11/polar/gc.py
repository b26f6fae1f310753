"""Prototype: meridional sweeps along whole great circles (meridian i and i + nlon/2), periodic,
in index space, so flow over the pole crosses in the M sweep."""
import sys, time, numpy as np
from spherepde.solvers.eulerian.transport import FFSLSphere
from spherepde.solvers.eulerian import ffsl
from spherepde.experiments import transport as tr

def _meridional_gc(self, rho, a, tau):
    g = self.grid; w = g.weights; nlat, nlon = rho.shape; half = nlon // 2
    th = np.pi / 2 - g.lat_faces
    h = np.diff(th)
    H = np.concatenate([h, h[::-1]])
    hface = 0.5 * (H + np.roll(H, 1))
    m = (rho * w[:, None]).T
    line = np.concatenate([m[:half], m[half:, ::-1]], axis=1)          # (half, 2 nlat)
    ds = np.concatenate([a[:half, :nlat], -a[half:, nlat:0:-1]], axis=1)  # left faces
    aidx = ds / hface
    nsub = max(1, int(np.ceil(tau * ffsl.lipschitz_periodic(aidx).max() / self.max_lipschitz)))
    self.substeps += nsub - 1
    for _ in range(nsub):
        line = ffsl.sweep_periodic(line, aidx, tau / nsub, self.limiter)
    out = np.empty_like(m)
    out[:half] = line[:, :nlat]; out[half:] = line[:, nlat:][:, ::-1]
    return out.T / w[:, None]

if sys.argv[1] == "gc": FFSLSphere._meridional = _meridional_gc
for alpha in [float(a) for a in sys.argv[3].split(',')]:
  for n in [int(x) for x in sys.argv[2].split(',')]:
    t = time.time()
    r = tr.run_transport(tr.TransportConfig(case="williamson1", field="cosine-bell", nlat=n, alpha=alpha), progress=False)
    print(sys.argv[1], alpha, n, "l2 %.4g linf %.4g min %.3g mass %.2g  %.1fs" % (r["l2"], r["linf"], r["min_value"], r["mass_error"], time.time() - t), flush=True)
