"""Prototype: polar rings split into K sub-rings for the zonal sweep (face-weighted flux)."""
import sys, time, numpy as np
from spherepde.solvers.eulerian.transport import FFSLSphere
from spherepde.grids.geometry import east_north_basis, lonlat_to_xyz
from spherepde.experiments import transport as tr

P = int(sys.argv[1]); K = int(sys.argv[2])

def _mc(dl, dr):
    s = 0.5 * (dl + dr)
    lim = 2 * np.minimum(np.abs(dl), np.abs(dr))
    return np.where(dl * dr > 0, np.sign(s) * np.minimum(np.abs(s), lim), 0.0)

def setup(self):
    g = self.grid
    n = g.nlat
    rings = list(range(P)) + list(range(n - P, n))
    phi_f = g.lat_faces
    mu_f = g.mu_faces
    # area centroid in latitude of each ring: ∫φ cosφ dφ / w = [φ sinφ + cosφ] / w
    F = lambda p: p * np.sin(p) + np.cos(p)
    wj = mu_f[:-1] - mu_f[1:]
    cent = (F(phi_f[:-1]) - F(phi_f[1:])) / wj
    subs = []
    for j in rings:
        edges = np.linspace(phi_f[j], phi_f[j + 1], K + 1)
        ws = np.sin(edges[:-1]) - np.sin(edges[1:])
        cs = (F(edges[:-1]) - F(edges[1:])) / ws
        mids = 0.5 * (edges[:-1] + edges[1:])
        dphi = edges[:-1] - edges[1:]
        subs.append((j, ws, cs, mids, dphi))
    self._sub = subs
    self._cent = cent
    # velocity points: sub-ring mid-latitudes at west faces
    lon = g.lon_faces[:-1]
    pts, east, fac = [], [], []
    for j, ws, cs, mids, dphi in subs:
        for k in range(K):
            la = np.full_like(lon, mids[k])
            pts.append(lonlat_to_xyz(lon, la)); east.append(east_north_basis(lon, la)[0])
            fac.append(dphi[k] / (ws[k] * g.dlon))
    self._sub_pts = np.concatenate(pts); self._sub_east = np.concatenate(east)
    self._sub_fac = np.repeat(np.array(fac), g.nlon).reshape(-1, g.nlon)

def slopes(self, rho):
    g = self.grid; n = g.nlat; c = self._cent
    # extended ring means with the ring across each pole (λ + π)
    half = g.nlon // 2
    ext = np.concatenate([np.roll(rho[:1], half, axis=1), rho, np.roll(rho[-1:], half, axis=1)])
    cx = np.concatenate([[np.pi - c[0]], c, [-np.pi - c[-1]]])
    dl = (ext[1:-1] - ext[:-2]) / (cx[1:-1] - cx[:-2])[:, None]
    dr = (ext[2:] - ext[1:-1]) / (cx[2:] - cx[1:-1])[:, None]
    return _mc(dl, dr)   # per unit latitude (latitude decreasing with index: signs consistent)

def zonal_sub(self, rho, az, asub, tau):
    g = self.grid; s = slopes(self, rho)
    rows, arows, where = [], [], []
    sub = {j: (ws, cs) for j, ws, cs, *_ in self._sub}
    r = 0
    for j in range(g.nlat):
        if j in sub:
            ws, cs = sub[j]
            for k in range(K):
                rows.append(rho[j] + s[j] * (cs[k] - self._cent[j]))
                arows.append(asub[r]); r += 1
            where.append((j, K))
        else:
            rows.append(rho[j]); arows.append(az[j]); where.append((j, 1))
    q = np.array(rows); a = np.array(arows)
    q = np.maximum(q, 0.0)  # MC-limited: only round-off negatives
    plan = self._zonal_plan(a, tau)
    q = self._zonal(q, plan)
    out = np.empty_like(rho); i = 0
    for j, m in where:
        if m == 1:
            out[j] = q[i]
        else:
            ws, _ = sub[j]
            out[j] = (ws[:, None] * q[i:i + m]).sum(0) / ws.sum()
        i += m
    return out

def step(self, rho, t, dt):
    if not hasattr(self, "_sub"): setup(self)
    th = t + 0.5 * dt
    az, am, _ = self._face_velocities(th)
    v = self.velocity(th, self._sub_pts)
    asub = np.sum(v * self._sub_east, axis=-1).reshape(-1, self.grid.nlon) * self._sub_fac
    rho = zonal_sub(self, rho, az, asub, 0.5 * dt)
    rho = self._meridional(rho, am, dt)
    return zonal_sub(self, rho, az, asub, 0.5 * dt)

if P > 0: FFSLSphere.step = step
for alpha in [float(a) for a in sys.argv[4].split(',')]:
  for n in [int(x) for x in sys.argv[3].split(',')]:
    t = time.time()
    r = tr.run_transport(tr.TransportConfig(case="williamson1", field="cosine-bell", nlat=n, alpha=alpha), progress=False)
    print(P, K, alpha, n, "l2 %.4g linf %.4g min %.3g mass %.2g  %.1fs" % (r["l2"], r["linf"], r["min_value"], r["mass_error"], time.time() - t), flush=True)
