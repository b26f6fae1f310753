"""CPU particle reference (Monte Carlo): N tokens drawn from ρ_0 (spherepde sample_initial),
the package's ParticleODE (RK4, dt, attention "auto"), diagnostics every 0.5.
  python particle_ref.py BETA N SEED T_END  -> particles_beta{B}_N{N}_s{SEED}.json"""
import json
import sys
import time

import numpy as np

from common import INITIAL, Diagnostics, attention
from spherepde.runs.initial import sample_initial
from spherepde.solvers.lagrangian.particles import ParticleODE

beta, n, seed, t_end = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
dt, every = 0.05, 0.5
x = sample_initial(INITIAL, 3, n, seed)
w = np.full(n, 1.0 / n)
diag = Diagnostics(beta, x, w)
ode = ParticleODE(attention(beta), method="rk4", weights=w)
out = {"beta": beta, "n": n, "seed": seed, "dt": dt, "times": [], "series": {}}
t0 = time.perf_counter()
steps_per = round(every / dt)
k = 0
while True:
    t = k * dt
    if k % steps_per == 0:
        out["times"].append(round(t, 10))
        for key, v in diag(x, w).items():
            out["series"].setdefault(key, []).append(v)
        print(f"t={t:.2f} E={out['series']['energy'][-1]:.5f} {time.perf_counter() - t0:.0f}s", flush=True)
    if t >= t_end - 1e-9:
        break
    x = ode.step(x, t, dt)
    k += 1
out["wall_s"] = time.perf_counter() - t0
out["a_own"], out["a_exact"] = diag.a_own, diag.a_exact
json.dump(out, open(f"particles_beta{beta:g}_N{n}_s{seed}.json", "w"))
