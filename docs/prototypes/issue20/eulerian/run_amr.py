"""One run of the AMR prototype (amr.py) on the issue-20 set-up; writes a JSON of diagnostics.

python run_amr.py BETA NLAT0 LMAX KAPPA T_END [ATTENTION_METHOD] [OUTPUT_EVERY] [LIMITER]
m_split = KAPPA·h², h = π/(NLAT0·2^LMAX) the finest cell width: refining NLAT0 by a factor r at
fixed LMAX, KAPPA refines the whole adaptive mesh (finest cells and equidistributed mass) by r.
"""
from __future__ import annotations

import json
import os
import math
import resource
import sys
import time
from pathlib import Path

import numpy as np

from amr import AMRSphere
from common import attention, diagnostics, rho0_cell_mass

HERE = Path(__file__).parent
DATA = Path(os.environ.get("OUT_DIR", HERE / "data"))


def main() -> None:
    beta, nlat0, lmax, kappa, t_end = (float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                       float(sys.argv[4]), float(sys.argv[5]))
    method = sys.argv[6] if len(sys.argv) > 6 else "auto"
    every = float(sys.argv[7]) if len(sys.argv) > 7 else 0.5
    limiter = sys.argv[8] if len(sys.argv) > 8 else "mc"
    h = math.pi / (nlat0 * 2 ** lmax)
    g = AMRSphere(nlat0, lmax, kappa * h * h, attention(beta), attention_method=method,
                  limiter=limiter)
    m = g.init_mass(rho0_cell_mass)
    rows, t0, c0 = [], time.perf_counter(), time.process_time()
    t_diag = [0.0]

    def cb(t, g, m):
        s = time.perf_counter()
        d = diagnostics(g.xc, m, beta)
        t_diag[0] += time.perf_counter() - s
        rows.append({"t": round(t, 9), **d, "cells": int(g.n), "steps": int(g.steps),
                     "levels": np.bincount(g.level, minlength=lmax + 1).tolist(),
                     "mass_error": float(m.sum() - 1.0), "min_mass": float(m.min()),
                     "max_density": float(np.max(m / g.area)),
                     "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0})
        print(f"t={t:6.2f} n={g.n} steps={g.steps} E={d['energy']:.5f} W2={d['w2_projection']:.4f} "
              f"dA={d['dist_eigenspace']:.4f} dV={d['dist_eigenspace_V']:.4f} "
              f"mass-1={m.sum() - 1:.1e} min={m.min():.1e} wall={time.perf_counter() - t0:.0f}",
              flush=True)

        write(rows, finished=False)

    def write(rows, finished):
        wall = time.perf_counter() - t0
        out = {"beta": beta, "nlat0": nlat0, "lmax": lmax, "kappa": kappa, "m_split": g.m_split,
               "h_finest": h, "courant": g.courant, "regrid_every": g.regrid_every,
               "attention_method": method, "limiter": limiter, "finished": finished, "t_end": t_end,
               "wall_s": wall, "cpu_s": time.process_time() - c0, "diagnostics_wall_s": t_diag[0],
               "solver_wall_s": wall - t_diag[0], "steps": g.steps,
               "max_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "max_cells": max(r["cells"] for r in rows), "series": rows}
        DATA.mkdir(parents=True, exist_ok=True)
        (DATA / name).write_text(json.dumps(out, indent=1))

    name = f"amr_beta{int(beta)}_n{nlat0}_l{lmax}_k{kappa:g}_{limiter}_{method}.json"
    g.run(m, np.arange(0.0, t_end + 1e-9, every), cb)
    write(rows, finished=True)
    wall = time.perf_counter() - t0
    print("wrote", name, f"{wall:.0f} s")


if __name__ == "__main__":
    main()
