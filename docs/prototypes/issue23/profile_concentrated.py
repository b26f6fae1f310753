"""Where the time of bench_attention's concentrated β = 100 rows goes: one DensityAttention.mean
per B class on GaussGrid(NLAT) face points (after an untimed call that compiles), under
cProfile, on the numba threads of the environment; the compiled kernels' own times (tottime of
bessel_synthesis, sums3_culled, below_bound, kd_order, …) and the call's total.  ``--before``
also profiles each call with bench_attention.BEFORE's switches off (issue 23's fifth session).
Writes profile_concentrated.json.

    NUMBA_NUM_THREADS=1 python docs/prototypes/issue23/profile_concentrated.py [NLAT] [--before]
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

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: E402
from bench_attention import TOL, _before, density, matrices  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
nlat = int(args[0]) if args else 128
variants = ("after", "before") if "--before" in sys.argv else ("after",)
grid = GaussGrid(nlat)
pts = FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points
rho = density("concentrated", grid.xyz)
rows = []
for bname, B in matrices().items():
    da = DensityAttention(Attention(np.eye(3), B, np.eye(3), 100.0), grid, tol=TOL)
    for v in variants:
        call = (lambda: da.mean_and_stats(pts, rho)) if v == "after" else (
            lambda: _before(lambda: da.mean_and_stats(pts, rho)))
        call()
        pr = cProfile.Profile()
        t0 = time.perf_counter()
        pr.enable()
        _, st = call()
        pr.disable()
        total = time.perf_counter() - t0
        funcs = {}
        for (file, _, name), (_, _, tt, _, _) in pstats.Stats(pr).stats.items():
            if file.endswith(("compiled_numba.py", "expsum.py")) or tt > 0.02 * total:
                key = f"{Path(file).name}:{name}"
                funcs[key] = funcs.get(key, 0.0) + tt
        rows.append({"B": bname, "variant": v, "total_s": total, "stats": st,
                     "tottime_s": dict(sorted(funcs.items(), key=lambda kv: -kv[1]))})
        print(bname, v, f"{total:.2f} s", {k: round(t, 2) for k, t in list(rows[-1]["tottime_s"].items())[:4]},
              flush=True)
res = {"script": "python docs/prototypes/issue23/profile_concentrated.py " + " ".join(sys.argv[1:]),
       "nlat": nlat, "tol": TOL, "rows": rows,
       "threads": {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")},
       "loadavg_end": list(os.getloadavg())}
Path(__file__).with_suffix(".json").write_text(json.dumps(res, indent=1))
