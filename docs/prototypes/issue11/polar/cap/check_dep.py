"""departure-cell form against the flux form (same step): new cap masses, E, L."""
import sys
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cap as capmod
from spherepde.grids import GaussGrid
from spherepde.validation.transport_cases import make_case
import time
g = GaussGrid(int(sys.argv[1])); case = make_case("williamson1", np.pi / 2)
rng = np.random.default_rng(1)
for dt in (0.05, 0.15):
    outs = {}
    for mode in ("flux", "dep", "dep"):
        capmod.MODE = mode; capmod.HANDOVER = "source"
        s = capmod.CapFFSL(g, case.velocity, K=4, B=3)
        rho = rng.random(g.shape) if mode == "flux" else rho0
        rho0 = rho
        mass = rho * s._cellA
        t = time.process_time(); m = mass.copy(); E = s._cap_update(m, lambda x: case.velocity(0.3, x), dt); t = time.process_time() - t
        outs[mode] = (m, E)
        print(mode, "%.4f s" % t)
    a, b = outs["flux"], outs["dep"]
    print(dt, "mass diff", np.abs(a[0] - b[0]).max() / np.abs(a[0]).max(), "E diff", max(np.abs(x - y).max() for x, y in zip(a[1], b[1])),
          "total", a[0].sum() + sum(x.sum() for x in a[1]) - mass.sum(), b[0].sum() + sum(x.sum() for x in b[1]) - mass.sum())
