"""GPU driver (device machine): LQ runs with the torch float64 attention sums, the energy by the
package's formula in torch (checked against spherepde.validation.metrics.interaction_energy
first); everything into $OUT/gpu_results.json (rewritten after every run) and snapshot .npz.
  python gpu_runs.py PLAN   (PLAN: comma list of beta:nlat:t_end[:snap])"""
import json
import os
import sys
import time

import numpy as np
import torch

from lq_core import run
from spherepde.validation.metrics import interaction_energy

OUT = os.environ.get("OUT", ".")
dev = "cuda" if torch.cuda.is_available() else "cpu"


def energy_torch(x, w, beta, block=8192):
    X = torch.as_tensor(x, dtype=torch.float64, device=dev)
    W = torch.as_tensor(w, dtype=torch.float64, device=dev)
    tot = torch.zeros((), dtype=torch.float64, device=dev)
    for s in range(0, X.shape[0], block):
        c = torch.clamp(X[s:s + block] @ X.T - 1.0, max=0.0)   # cos - 1 (cosine_minus_one clamps too)
        tot += (W[s:s + block, None] * W[None] * (-torch.expm1(beta * c))).sum()
    return 0.5 * float(tot)


rng = np.random.default_rng(0)
xc = rng.standard_normal((3000, 3)); xc /= np.linalg.norm(xc, axis=1, keepdims=True)
wc = rng.random(3000); wc /= wc.sum()
check = {b: (energy_torch(xc, wc, b), interaction_energy(xc, wc, b)) for b in (100.0, 1000.0)}
print("energy check", check, flush=True)
results = {"device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
           "energy_check": {str(k): v for k, v in check.items()}, "runs": []}
def particles(beta, n, seed, t_end, dt=0.05, every=0.5):
    """Monte Carlo reference: n tokens drawn from ρ_0 (sample_initial), the package's ParticleODE
    (RK4, torch float64 sums), diagnostics every 0.5."""
    from common import INITIAL, Diagnostics, attention
    from spherepde.runs.initial import sample_initial
    from spherepde.solvers.lagrangian.particles import ParticleODE
    x = sample_initial(INITIAL, 3, n, seed)
    w = np.full(n, 1.0 / n)
    diag = Diagnostics(beta, x, w)
    ode = ParticleODE(attention(beta), method="rk4", weights=w, attention_method="torch")
    out = {"kind": "particles", "beta": beta, "n": n, "seed": seed, "dt": dt, "times": [],
           "series": {}, "a_own": diag.a_own, "a_exact": diag.a_exact}
    t0, k, spo = time.perf_counter(), 0, round(every / dt)
    while True:
        t = k * dt
        if k % spo == 0:
            out["times"].append(round(t, 10))
            for key, v in {"energy": energy_torch(x, w, beta), **diag.light(x, w)}.items():
                out["series"].setdefault(key, []).append(v)
        if t >= t_end - 1e-9:
            break
        x = ode.step(x, t, dt)
        k += 1
    out["wall_s"] = time.perf_counter() - t0
    print("particles", beta, n, seed, out["series"]["energy"][-1], out["wall_s"], flush=True)
    return out


for item in sys.argv[1].split(","):
    parts = item.split(":")
    if parts[0] == "p":
        results["runs"].append(particles(float(parts[1]), int(parts[2]), int(parts[3]), float(parts[4])))
        json.dump(results, open(os.path.join(OUT, "gpu_results.json"), "w"))
        continue
    beta, nlat, t_end = float(parts[0]), int(parts[1]), float(parts[2])
    snap = len(parts) > 3 and parts[3] == "snap"
    snaps = [0, 2, 4, 6, 8, 10, 12, 16, 20, 24] if snap else []
    t0 = time.perf_counter()
    out, (st, sx, w) = run(beta, nlat, 0.05, t_end, method="torch", tol=1e-8,
                           snap_times=[s for s in snaps if s <= t_end], energy=energy_torch,
                           log=lambda s: print(s, flush=True))
    out["gpu_mem_peak_MB"] = torch.cuda.max_memory_allocated() / 2**20 if dev == "cuda" else None
    results["runs"].append(out)
    json.dump(results, open(os.path.join(OUT, "gpu_results.json"), "w"))
    if snap:
        np.savez_compressed(os.path.join(OUT, f"snaps_b{beta:g}_n{nlat}.npz"), t=st, x=sx, w=w)
    print("done", beta, nlat, time.perf_counter() - t0, flush=True)
