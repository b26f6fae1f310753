import sys, numpy as np
from scipy.spatial.transform import Rotation
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.validation.transport_cases import make_case, initial_field, error_norms
from spherepde.experiments.transport import fixed_dt
n = int(sys.argv[1]); alpha = float(sys.argv[2]); cour = float(sys.argv[3]) if len(sys.argv) > 3 else 0.8
g = GaussGrid(n); case = make_case("williamson1", alpha); f = initial_field("cosine-bell")
x = np.random.default_rng(0).normal(size=(20, 3)); x /= np.linalg.norm(x, axis=1)[:, None]
v = case.velocity(0.0, x)
# v = w × x  -> linear system for w
A = np.concatenate([np.cross(np.eye(3)[i], x)[..., None] for i in range(3)], axis=-1).reshape(-1, 3)
w = np.linalg.lstsq(A, v.reshape(-1), rcond=None)[0]
rho = g.cell_average(f); rho0 = rho.copy()
st = make_stepper("ffsl-ppm", g, case.velocity, courant=cour)
dt, N = fixed_dt(st, case.period, cour)
checks = set(int(round(N * k / 16)) for k in range(1, 17))
t = 0.0
for k in range(1, N + 1):
    rho = st.step(rho, t, dt); t += dt
    if k in checks:
        R = Rotation.from_rotvec(-w * t)
        ex = g.cell_average(lambda y: f(R.apply(y.reshape(-1, 3)).reshape(y.shape)))
        e = error_norms(g, rho, ex)
        err = rho - ex
        lat = np.degrees(g.lat)
        band = np.sqrt((err**2 * g.cell_area).sum(1))
        xyz = g.xyz if hasattr(g, "xyz") else None
        c1 = np.einsum("ij,ijk->k", rho * g.cell_area, xyz); c0 = np.einsum("ij,ijk->k", ex * g.cell_area, xyz)
        ang = np.degrees(np.arccos(np.clip(c1 @ c0 / np.linalg.norm(c1) / np.linalg.norm(c0), -1, 1)))
        along = np.degrees(np.dot(np.cross(c0, c1), w) / np.linalg.norm(w) / np.linalg.norm(c0)**2)
        print("   centroid offset %.3f deg (along-track %.3f), max ratio %.3f" % (ang, along, rho.max() / ex.max()))
        print("t/T=%.3f l2 %.4g  polar-rings(|lat|>80) share %.2f" % (t / case.period, e["l2"],
              np.sqrt((band[np.abs(lat) > 80]**2).sum()) / np.sqrt((band**2).sum())), flush=True)
