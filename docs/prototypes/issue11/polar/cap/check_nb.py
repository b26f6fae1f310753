"""numpy vs numba swept-face (CAP_MODE=flux) cap fluxes on one step (Williamson α = π/2 velocity)."""
import sys, time
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cap as capmod
from spherepde.grids import GaussGrid
from spherepde.validation.transport_cases import make_case
g = GaussGrid(int(sys.argv[1]) if len(sys.argv) > 1 else 32)
case = make_case("williamson1", np.pi / 2)
rng = np.random.default_rng(1)
capmod.MODE = "flux"  # this check compares the swept-face (flux) kernels
c = capmod._CapC(g, 4, 3, +1)
cellA = (np.asarray(g.weights) * g.dlon)[:, None]
mass = (rng.random(g.shape) * cellA)[c.rows].reshape(-1)
ta = cellA[c.rows].repeat(g.nlon, 1).reshape(-1)
for dt in (0.05, 0.15):
    vel = lambda x: case.velocity(0.3, x)
    out = {}
    for be in ("numpy", "numba", "numba"):
        capmod.BACKEND = be
        t = time.perf_counter(); F, E, L = c.fluxes(mass, vel, dt, ta); out[be] = (F, E, L)
        print(be, "%.3fs" % (time.perf_counter() - t))
    for a, b, nm in zip(out["numpy"], out["numba"], "FEL"):
        print(dt, nm, np.abs(a - b).max() / np.abs(a).max(), "min", b.min())
