"""Culling by tile mass (compiled.CULL_BY_TILE_MASS) against culling by the tile's largest weight,
side by side in one run: the (target, source) pairs the exact part of DensityAttention sums, its
time (best of 3, interleaved) and the error against the float64 reference on 512 targets, for the
concentrated density of bench_attention.py (von Mises–Fisher κ = 50 + 1e-12 floor) on
GaussGrid(NLAT) face points, every B class, β = 100 and 1000, tol 1e-8.  Writes cull_mass.json.

    python docs/prototypes/issue23/cull_mass.py [NLAT]
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention, compiled  # noqa: E402
from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: E402
from bench_attention import density, errors, matrices  # noqa: E402

nlat = int(sys.argv[1]) if len(sys.argv) > 1 else 64
grid = GaussGrid(nlat)
pts = FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points
sub = np.sort(np.random.default_rng(2026).choice(pts.shape[0], 512, replace=False))
rows = []
for bname, B in matrices().items():
    for beta in (100.0, 1000.0):
        rho = density("concentrated", grid.xyz)
        y, w = grid.xyz.reshape(-1, 3), (rho * grid.cell_area).reshape(-1)
        att = Attention(np.eye(3), B, np.eye(3), beta)
        ref = att.mean(pts[sub], y, w, method="reference")
        row = {"B": bname, "beta": beta}
        times = {True: [], False: []}
        for rep in range(4):
            for flag in (True, False):
                compiled.CULL_BY_TILE_MASS = flag
                da = DensityAttention(att, grid, tol=1e-8)
                t0 = time.perf_counter()
                m, st = da.mean_and_stats(pts, rho)
                times[flag].append(time.perf_counter() - t0)
                if rep == 0:
                    wr, mr = errors(m[sub], ref, density("concentrated", pts[sub]))
                    row["mass" if flag else "max"] = {"pairs": st.get("pairs"), "method": st.get("method"),
                                                      "weighted_error": wr, "max_error": mr}
        for flag in (True, False):  # first call of each compiles / builds tables: dropped
            row["mass" if flag else "max"]["t_best"] = min(times[flag][1:])
        row["pairs_ratio"] = (row["mass"]["pairs"] / row["max"]["pairs"]
                              if row["max"]["pairs"] else None)
        row["time_ratio"] = row["mass"]["t_best"] / row["max"]["t_best"]
        rows.append(row)
        print(row, flush=True)
compiled.CULL_BY_TILE_MASS = True
Path(__file__).with_suffix(".json").write_text(json.dumps({"nlat": nlat, "rows": rows}, indent=1))
