import sys, numpy as np
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.validation.transport_cases import make_case
n = int(sys.argv[1]); g = GaussGrid(n); case = make_case("williamson1", np.pi/2)
np.set_printoptions(precision=3, linewidth=150, suppress=True)
for lim in ("positive", "none"):
  st = make_stepper("ffsl-ppm", g, case.velocity, courant=0.8, limiter=lim)
  vmax = 2*np.pi/12
  for C in (0.8, 0.2, 0.05):
    dt = C * g.dlon / vmax; ns = int(round(1.0/dt)); dt = 1.0/ns
    r = np.ones((g.nlat, g.nlon)); t = 0.0
    for k in range(ns): r = st.step(r, t, dt); t += dt
    j = np.unravel_index(np.argmax(abs(r-1)), r.shape)
    print(lim, "C", C, "steps", ns, "max|rho-1| %.3g at" % abs(r-1).max(), j, "ring0 min/max %.3f %.3f ring1 %.3f %.3f" % (r[0].min(), r[0].max(), r[1].min(), r[1].max()))
