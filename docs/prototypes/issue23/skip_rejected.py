"""The first spectral pass of the any-B path skipping the targets its certification must reject
(density.SKIP_SURELY_REJECTED, grid_sums._TargetBessel.upper_bound) against synthesising every
target, side by side in one run, for the concentrated density of bench_attention.py (von
Mises–Fisher κ = 50 + 1e-12 floor) on GaussGrid(NLAT) face points, the B classes that take the
any-B path, β = 100, tol 1e-8:

* ``predicted``: for tiles of 16, 32, 64 cells (grid_sums.BOUND_TILE), how many of the targets
  the first pass rejects the bound finds (never one it accepts: ``violations``), and the time
  of the bound over all targets (best of 3);
* times of DensityAttention.mean with the skip on and off (interleaved, REPS each, one process),
  the ratio off/on per pair, and the error of both against the float64 reference on 512 targets
  (with the skip on, the split pass also tries the quantiles density._SPLIT_QUANTILES_MORE; the
  other switches of the session at their defaults).

    python docs/prototypes/issue23/skip_rejected.py [NLAT] [REPS]     # writes skip_rejected.json
"""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.dynamics.attention import density as dm  # noqa: E402
from spherepde.dynamics.attention import grid_sums  # noqa: E402
from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: E402
from bench_attention import TOL, density, errors, matrices  # noqa: E402

nlat = int(sys.argv[1]) if len(sys.argv) > 1 else 128
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
grid = GaussGrid(nlat)
pts = FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points
sub = np.sort(np.random.default_rng(2026).choice(pts.shape[0], 512, replace=False))
rho = density("concentrated", grid.xyz)
y, w = grid.xyz.reshape(-1, 3), (rho * grid.cell_area).reshape(-1)
rows = []
for bname, B in matrices().items():
    att = Attention(np.eye(3), B, np.eye(3), 100.0)
    da = DensityAttention(att, grid, tol=TOL)
    spec = da._spec
    if not isinstance(spec, grid_sums._TargetBessel):
        continue
    wn = (w / w.sum()).reshape(grid.shape)
    den = spec.sums(wn, pts)[3]
    eta = spec.err
    theta = (8.0 / TOL - 1.0) * eta
    rejected = ~(eta <= TOL / 8.0 * den)
    pred = {}
    bound_tile = grid_sums.BOUND_TILE
    for size in (16, 32, 64):
        grid_sums.BOUND_TILE = size
        spec._bound_tiles = None
        spec.upper_bound(wn, pts, theta)  # (the tiles, built once per object)
        tb = []
        for _ in range(3):
            t0 = time.perf_counter()
            sure = spec.upper_bound(wn, pts, theta) < theta
            tb.append(time.perf_counter() - t0)
        pred[size] = {"predicted": int(sure.sum()), "violations": int((sure & ~rejected).sum()),
                      "t_bound_best_of_3": min(tb)}
    grid_sums.BOUND_TILE = bound_tile
    spec._bound_tiles = None
    m_ref = att.mean(pts[sub], y, w, method="reference")
    out = {}
    t: dict = {True: [], False: []}
    for v in (True, False):
        dm.SKIP_SURELY_REJECTED = v
        m, st = da.mean_and_stats(pts, rho)
        out[v] = {"stats": st, "error": errors(m[sub], m_ref, density("concentrated", pts[sub]))}
    for r in range(reps):
        for v in ((True, False) if r % 2 == 0 else (False, True)):
            dm.SKIP_SURELY_REJECTED = v
            t0 = time.perf_counter()
            da.mean(pts, rho)
            t[v].append(time.perf_counter() - t0)
    dm.SKIP_SURELY_REJECTED = True
    ratio = [b / a for a, b in zip(t[True], t[False])]
    row = {"B": bname, "beta": 100.0, "targets": int(pts.shape[0]), "degree": spec.L,
           "rejected_first_pass": int(rejected.sum()), "bound_tiles": pred,
           "t_skip": float(np.median(t[True])), "t_all": float(np.median(t[False])),
           "all_over_skip": float(np.median(ratio)), "ratios": ratio,
           "error_skip": out[True]["error"], "error_all": out[False]["error"],
           "stats_skip": out[True]["stats"], "stats_all": out[False]["stats"]}
    print(json.dumps({k: v for k, v in row.items() if not k.startswith("stats")}), flush=True)
    rows.append(row)
res = {"script": "python docs/prototypes/issue23/skip_rejected.py " + " ".join(sys.argv[1:]),
       "nlat": nlat, "reps": reps, "tol": TOL, "rows": rows,
       "threads": {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")},
       "loadavg_end": list(os.getloadavg())}
Path(__file__).with_suffix(".json").write_text(json.dumps(res, indent=1))
