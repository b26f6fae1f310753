import sys, numpy as np
from scipy.spatial.transform import Rotation
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.validation.transport_cases import make_case, initial_field
n = int(sys.argv[1]); alpha = np.pi / 2
g = GaussGrid(n); case = make_case("williamson1", alpha); f = initial_field("cosine-bell")
x = np.random.default_rng(0).normal(size=(20, 3)); x /= np.linalg.norm(x, axis=1)[:, None]
A = np.concatenate([np.cross(np.eye(3)[i], x)[..., None] for i in range(3)], axis=-1).reshape(-1, 3)
w = np.linalg.lstsq(A, case.velocity(0.0, x).reshape(-1), rcond=None)[0]
def exact(t):
    R = Rotation.from_rotvec(-w * t)
    return g.cell_average(lambda y: f(R.apply(y.reshape(-1, 3)).reshape(y.shape)))
T = case.period; t0 = T / 4 - 0.3
st = make_stepper("ffsl-ppm", g, case.velocity, courant=0.8, limiter=sys.argv[2])
vmax = np.linalg.norm(w)
r0 = exact(t0)
for C in (0.8, 0.4, 0.2, 0.1, 0.05):
    dt = C * g.dlon / vmax
    nsteps = int(round(0.6 / dt)); dt = 0.6 / nsteps
    r = r0.copy(); t = t0
    for k in range(nsteps):
        r = st.step(r, t, dt); t += dt
    e = r - exact(t)
    print("C %.2f steps %d  err l2(abs) %.4g  max %.4g   polar rings 0-3 l2 %.4g" % (C, nsteps,
          np.sqrt((e**2 * g.cell_area).sum()), abs(e).max(), np.sqrt((e[:4]**2 * g.cell_area[:4]).sum())), flush=True)
