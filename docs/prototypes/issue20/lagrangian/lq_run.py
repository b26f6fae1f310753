"""Run the LQ prototype (lagq.py) on examples/metastability.toml at β:
  python lq_run.py BETA NLAT DT T_END [ATTENTION_METHOD] [TOL]
-> lq_beta{B}_n{NLAT}_dt{DT}.json (diagnostics every 0.5, wall time, memory, lattice stretch)
   and .npz (positions at t = 0, 1, 2, ..., for the field analysis)."""
import json
import math
import resource
import sys
import time

import numpy as np

from common import Diagnostics
from lagq import initial_points, lattice_stretch, stepper

beta, nlat, dt, t_end = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
method = sys.argv[5] if len(sys.argv) > 5 else "auto"
tol = float(sys.argv[6]) if len(sys.argv) > 6 else 1e-8
every, snap_every = 0.5, 1.0
rot = None
if len(sys.argv) > 7 and sys.argv[7] == "rotated":   # a fixed rotation of the lattice (seeded)
    from scipy.spatial.transform import Rotation
    rot = Rotation.random(random_state=20).as_matrix()
x, w, g = initial_points(nlat, rot)
diag = Diagnostics(beta, x, w)
ode = stepper(beta, w, attention_method=method, tol=tol)
tag = f"lq_beta{beta:g}_n{nlat}_dt{dt:g}" + ("" if method == "auto" else f"_{method}") + ("" if rot is None else "_rotated")
out = {"beta": beta, "nlat": nlat, "points": int(w.size), "dt": dt, "method": method, "tol": tol,
       "times": [], "series": {}, "stretch": [], "attention_stats": []}
snaps, snap_t = [], []
spo, sps = round(every / dt), round(snap_every / dt)
t0 = time.perf_counter()
k = 0
while True:
    t = k * dt
    if k % spo == 0:
        out["times"].append(round(t, 10))
        for key, v in diag(x, w).items():
            out["series"].setdefault(key, []).append(v)
        out["stretch"].append(lattice_stretch(x, w, g, beta))
        out["attention_stats"].append(dict(ode.last_stats))
        print(f"t={t:.2f} E={out['series']['energy'][-1]:.6f} W2={out['series']['w2_projection'][-1]:.4f} "
              f"stretch={out['stretch'][-1]:.2f} {time.perf_counter() - t0:.0f}s", flush=True)
    if k % sps == 0:
        snaps.append(x.copy()); snap_t.append(t)
    if t >= t_end - 1e-9:
        break
    x = ode.step(x, t, dt)
    k += 1
out["wall_s"] = time.perf_counter() - t0
out["maxrss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["mass_error"] = float(abs(w.sum() - 1.0))
out["min_weight"] = float(w.min())
json.dump(out, open(tag + ".json", "w"))
np.savez_compressed(tag + ".npz", t=np.array(snap_t), x=np.array(snaps), w=w, nlat=nlat)
print("wall", out["wall_s"], "rss MB", out["maxrss_MB"])
