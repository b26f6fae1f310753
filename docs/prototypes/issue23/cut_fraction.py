"""Issue 23, eighth session: why the diffuse particle clouds gain less than the concentrated ones.
For bench_particles' four N = 10⁴ clouds at β = 100 (targets = sources, tol = 1e-8): the share of
(target, source) pairs the compiled culled sums evaluate one by one (with and without the
expansions of dense groups), against the share an exact per-pair cut keeps (per target, drop the
smallest terms while they sum to ≤ tol·den; 400 sampled targets, long rows in float64), and the
number of particles in a disc of one kernel width's radius, N·β⁻¹/4 (a cap of angular radius
β^{−1/2} holds the fraction (1 − cos β^{−1/2})/2 ≈ 1/(4β) of a uniform cloud).

    python docs/prototypes/issue23/cut_fraction.py      # → docs/prototypes/issue23/cut_fraction.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_particles import cloud  # noqa: E402

from spherepde.dynamics.attention import compiled  # noqa: E402

N, BETA, TOL = 10000, 100.0, 1e-8


def main() -> int:
    rng = np.random.default_rng(2026)
    q1 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    q2 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    rows = []
    for bname, K in (("diag-0.5", np.diag([0.5, 1.0, 1.0])),
                     ("general-random", q1 @ np.diag([1.2, 0.7, 0.4]) @ q2)):
        for cname in ("diffuse", "concentrated"):
            x = cloud(cname, N, np.random.default_rng(2026))
            z = x @ K  # Bᵀx for B = QᵀK, Q = I
            lw = np.full(N, -np.log(N))
            kept = {}
            for expand in (False, True):
                compiled.CULL_EXPAND = expand
                kept[expand] = compiled.sums(z, x, lw, BETA, TOL)[3] / N ** 2
            compiled.CULL_EXPAND = True
            idx = np.random.default_rng(0).choice(N, 400, replace=False)
            lg = BETA * z[idx] @ x.T
            e = np.sort(np.exp(lg - lg.max(axis=1, keepdims=True)), axis=1)
            cs = np.cumsum(e, axis=1)
            dropped = np.sum(cs <= TOL * cs[:, -1:], axis=1)
            rows.append({"B": bname, "cloud": cname,
                         "kept_fraction_without_expansions": kept[False],
                         "kept_fraction": kept[True],
                         "exact_cut_fraction": float(1.0 - dropped.mean() / N)})
            print(rows[-1], flush=True)
    out = {"script": "python docs/prototypes/issue23/cut_fraction.py", "n": N, "beta": BETA, "tol": TOL,
           "points_per_kernel_disc": N / (4 * BETA), "rows": rows}
    (Path(__file__).with_suffix(".json")).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
