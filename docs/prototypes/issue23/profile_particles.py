"""Where the time of one ParticleODE RK4 step at N = 10⁴, β = 100 goes (issue 23, seventh
session; bench_attention_culling's particle cases: B = diag(0.5, 1, 1) or its general random
matrix, the diffuse and the concentrated cloud): after an untimed step (compiles), the best of
three steps under cProfile, the functions with ≥ 1 % of the step's time (own time), the method
"auto" chose and the pairs it summed; beside it the first stage's compiled sums alone, culled
(tol = 1e-8) and over all pairs, with their rates per pair.  Writes profile_particles.json.

    NUMBA_NUM_THREADS=1 python docs/prototypes/issue23/profile_particles.py
"""
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from spherepde.dynamics.attention import Attention, compiled  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE  # noqa: E402
from bench_particles import cloud  # noqa: E402

rng0 = np.random.default_rng(2026)
q1 = np.linalg.qr(rng0.normal(size=(3, 3)))[0]
q2 = np.linalg.qr(rng0.normal(size=(3, 3)))[0]
rows = []
for bname, K in (("diag-0.5", np.diag([0.5, 1.0, 1.0])),
                 ("general-random", q1 @ np.diag([1.2, 0.7, 0.4]) @ q2)):
    for cname in ("diffuse", "concentrated"):
        x = cloud(cname, 10000, np.random.default_rng(2026))
        ode = ParticleODE(Attention(np.eye(3), K, np.diag([1.0, 0.8, 0.2]), 100.0))
        ode.step(x, 0.0, 0.05)
        best = None
        for _ in range(3):
            stats = []
            orig = ode.velocity

            def vel(p, orig=orig, stats=stats):
                v = orig(p)
                stats.append(dict(ode.last_stats))
                return v
            ode.velocity = vel
            pr = cProfile.Profile()
            t0 = time.perf_counter()
            pr.enable()
            ode.step(x, 0.0, 0.05)
            pr.disable()
            total = time.perf_counter() - t0
            ode.velocity = orig
            if best is None or total < best["total_s"]:
                funcs = {}
                for (file, _, name), (_, _, tt, _, _) in pstats.Stats(pr).stats.items():
                    if tt > 0.01 * total:
                        key = f"{Path(file).name}:{name}"
                        funcs[key] = funcs.get(key, 0.0) + tt
                best = {"B": bname, "cloud": cname, "total_s": total, "stage_stats": stats,
                        "tottime_s": dict(sorted(funcs.items(), key=lambda kv: -kv[1]))}
        # the first stage's sums alone: culled (what the step does) against all pairs, the
        # rate per pair of each (best of three)
        z, lw = x @ K, np.full(x.shape[0], -np.log(x.shape[0]))
        for key, tol in (("culled", 1e-8), ("all_pairs", None)):
            compiled.sums(z, x, lw, 100.0, tol)
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                pairs = compiled.sums(z, x, lw, 100.0, tol)[3]
                ts.append(time.perf_counter() - t0)
            best[f"sums_{key}"] = {"s": min(ts), "pairs": int(pairs), "pairs_per_s": pairs / min(ts)}
        rows.append(best)
        st = best["stage_stats"][0]
        print(bname, cname, f"{best['total_s']:.3f} s", st.get("method"), st.get("pairs"),
              {k: round(best[f"sums_{k}"]["pairs_per_s"] / 1e8, 2) for k in ("culled", "all_pairs")},
              {k: round(t, 3) for k, t in list(best["tottime_s"].items())[:6]}, flush=True)
res = {"script": "python docs/prototypes/issue23/profile_particles.py", "rows": rows,
       "note": "cProfile adds its overhead to the Python parts; best (least total) of 3 steps",
       "threads": {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")},
       "loadavg_end": list(os.getloadavg())}
Path(__file__).with_suffix(".json").write_text(json.dumps(res, indent=1, default=str))
