"""cost of one step: split FFSL (advance) vs cap (advance_with), CPU time, warm (after JIT).
python bench.py NLAT K B STEPS   (Williamson α = π/2 velocity at Courant 0.8, the bell near the pole)"""
import sys, time, json
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cap as capmod
from spherepde.grids import GaussGrid
from spherepde.validation.transport_cases import make_case, initial_field
from spherepde.solvers.eulerian.transport import FFSLSphere
n, K, B, N = (int(a) for a in sys.argv[1:5])
g = GaussGrid(n); case = make_case("williamson1", np.pi / 2)
sp = FFSLSphere(g, case.velocity); cp = capmod.CapFFSL(g, case.velocity, K=K, B=B)
dt = 0.8 * g.dlon / sp._face_velocities(0.0)[-1]
rho = g.cell_average(initial_field("cosine-bell"))
az, am, _ = sp._face_velocities(0.0)
vel = lambda x: case.velocity(0.0, x)
sp.advance(rho, az, am, dt); cp.advance_with(rho, vel, az, am, dt)
for c in cp.caps: c.vel_time = 0.0
cp.cap_time = cp.outer_time = 0.0
best = {}
for name, f in (("split", lambda r: sp.advance(r, az, am, dt)), ("cap", lambda r: cp.advance_with(r, vel, az, am, dt))):
    ts = []
    for rep in range(3):
        r = rho; t = time.process_time()
        for k in range(N):
            r = f(r)
        ts.append((time.process_time() - t) / N)
    best[name] = min(ts)
velt = sum(c.vel_time for c in cp.caps) / (3 * N)
print(json.dumps(dict(nlat=n, K=K, B=B, trace=capmod.TRACE, split_ms=1e3 * best["split"], cap_ms=1e3 * best["cap"],
                      ratio=best["cap"] / best["split"], cap_velocity_eval_ms=1e3 * velt,
                      ratio_without_velocity_eval=(best["cap"] - velt) / best["split"],
                      cap_part_ms=1e3 * cp.cap_time / (3 * N), outer_part_ms=1e3 * cp.outer_time / (3 * N))))
