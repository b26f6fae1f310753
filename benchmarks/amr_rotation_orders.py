"""Convergence of ``amr-fv`` transport against an exact solution: solid-body rotation of a smooth
bump (e^{κ(⟨x, c⟩ − 1)}, κ = 20) by half a turn, S² (axis tilted 45°: the path crosses latitude
±45°) and S¹ (X = e_θ).  Field L1 error of the leaf masses against the exact leaf integrals,
refining the whole adaptive mesh (nlat0 up, lmax 1 and mass_per_cell 0.5 fixed), fitted order.
The same set-up as tests/solvers/test_amr.py, on longer sequences.

    python benchmarks/amr_rotation_orders.py [--out benchmarks/results/amr_rotation_orders.json]
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian.amr import AMRDensity
from spherepde.solvers.eulerian.amr_circle import arc_integrals
from spherepde.solvers.eulerian.amr_remap import leaf_integrals

KAPPA, T = 20.0, math.pi
AXIS = np.array([0.0, -math.sqrt(0.5), math.sqrt(0.5)])


def _rot(v, a):
    return v * math.cos(a) + np.cross(AXIS, v) * math.sin(a) + AXIS * (AXIS @ v) * (1 - math.cos(a))


def sphere_case(nlat0):
    bump = lambda c: (lambda x: np.exp(KAPPA * (x @ c - 1.0)))  # noqa: E731
    c0 = np.array([1.0, 0.0, 0.0])
    st = AMRDensity(lambda t, x: np.cross(AXIS, x), GaussGrid(16), nlat0=nlat0, lmax=1,
                    mass_per_cell=0.5)
    return st, bump(c0), bump(_rot(c0, T)), leaf_integrals


def circle_case(nlat0):
    bump = lambda t0: (lambda x: np.exp(KAPPA * (x[:, 0] * math.cos(t0)  # noqa: E731
                                                 + x[:, 1] * math.sin(t0) - 1.0)))
    st = AMRDensity(lambda t, x: np.stack([-x[:, 1], x[:, 0]], 1), CircleGrid(32), nlat0=nlat0,
                    lmax=1, mass_per_cell=0.5)
    return st, bump(0.3), bump(0.3 + T), arc_integrals


def ladder(case, sizes):
    rows = []
    for nlat0 in sizes:
        st, f0, f1, integrals = case(nlat0)
        s0 = st.initial_state(f0)
        scale = integrals(st.unpack(s0)[0], f0).sum()
        t0 = time.process_time()
        res = Controller(st).run(s0, (0.0, T))
        mesh, m, _ = st.unpack(res.state)
        rows.append({"nlat0": nlat0, "h": st.h, "leaves": mesh.n, "steps": res.n_steps,
                     "l1_error": float(np.abs(m - integrals(mesh, f1) / scale).sum()),
                     "mass_error": float(m.sum() - 1.0), "min_mass": float(m.min()),
                     "cpu_s": time.process_time() - t0})
        print(rows[-1], flush=True)
    h, e = np.log([r["h"] for r in rows]), np.log([r["l1_error"] for r in rows])
    (p, c), cov = np.polyfit(h, e, 1, cov=True)
    return {"runs": rows, "fitted_order": float(p), "fitted_order_se": float(np.sqrt(cov[0, 0])),
            "pairwise_orders": (np.diff(e) / np.diff(h)).tolist()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "amr_rotation_orders.json"))
    args = ap.parse_args()
    out = {"script": "benchmarks/amr_rotation_orders.py", "what": __doc__.split("\n\n")[0], "kappa": KAPPA, "T": T,
           "sphere": ladder(sphere_case, (8, 12, 16, 24)),
           "circle": ladder(circle_case, (8, 16, 32, 64))}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("S2 order", out["sphere"]["fitted_order"], "S1 order", out["circle"]["fitted_order"])


if __name__ == "__main__":
    main()
