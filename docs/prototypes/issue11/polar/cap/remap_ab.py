"""CPU time of one PolarCap.remap (north cap, K = 4) for several versions of polar_cap.py,
interleaved in one process (60 repetitions of 20 calls each; min, median, and the median ratio
to the first file).  Case: Williamson 1, α = π/2, Courant 0.8, cosine bell after T/4 (on the pole).

    git show c7b23b4:spherepde/solvers/eulerian/polar_cap.py > /tmp/pc_old.py
    python remap_ab.py 64 /tmp/pc_old.py spherepde/solvers/eulerian/polar_cap.py
"""
import math, os, sys, tempfile, time, importlib.util
import numpy as np
from spherepde.experiments.transport import fixed_dt
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.validation.transport_cases import initial_field, make_case
nlat = int(sys.argv[1]); files = sys.argv[2:]
mods = []
for k, f in enumerate(files):
    src = open(f).read().replace("@nb.njit(cache=True)", "@nb.njit")
    p = os.path.join(tempfile.mkdtemp(), f"ab_{k}.py"); open(p, "w").write(src)
    spec = importlib.util.spec_from_file_location(f"ab_{k}", p); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); mods.append(m)
g = GaussGrid(nlat); case = make_case("williamson1", math.pi / 2)
s = make_stepper("ffsl-ppm", g, case.velocity, polar="cap")
dt, n = fixed_dt(s, case.period, 0.8)
rho = g.cell_average(initial_field("cosine-bell"))
for k in range(n // 4):
    rho = s.step(rho, k * dt, dt)
t = (n // 4) * dt; tm = t + 0.5 * dt
v = case.velocity(tm, s._cap_points)
mass = rho * (g.weights * g.dlon)[:, None]
caps = [m.PolarCap(g, 4, s._caps[0].B, 1) for m in mods]
nv = caps[0].vertices_xyz.shape[0]
mm = mass[caps[0].rows]; vv = v[:nv]
fs = [lambda c=c: c.remap(mm, vv, dt) for c in caps]
for f in fs: f()
N = 20
samples = [[] for _ in fs]
for rep in range(60):
    for k, f in enumerate(fs):
        t0 = time.process_time()
        for _ in range(N): f()
        samples[k].append(1e3 * (time.process_time() - t0) / N)
S = np.array(samples)
print(nlat, "min ms", np.round(S.min(1), 4), "median ms", np.round(np.median(S, 1), 4), "median ratio to first", np.round(np.median(S / S[0], 1), 3))
