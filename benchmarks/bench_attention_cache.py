"""Point-table cache of DensityAttention's spectral path: repeated calls with the same targets,
with the cache on and off, side by side in one run.

    python benchmarks/bench_attention_cache.py              # writes results/attention_cache.json
    python benchmarks/bench_attention_cache.py --quick      # fewer repetitions, prints only
    python benchmarks/bench_attention_cache.py --out PATH   # write the JSON somewhere else

``DensityAttention`` is evaluated by the mean-field stepper twice per step at the same points (the
FFSL face points).  On the spectral path the point synthesis needs tables that depend only on the
points (longitudes and their e^{imλ}, the latitude rings and their Legendre table); the module
flag ``spherepde.dynamics.attention.grid_sums.TARGET_CACHE`` switches keeping them between calls on or off.

What is timed, for Q = K = V = I, β ∈ {10, 100}, densities "diffuse" 1 + ½x and "concentrated"
(von Mises–Fisher, κ = 50, plus a floor of 1e-12), on GaussGrid(64) and GaussGrid(128):
* ``call`` — one ``DensityAttention(att, grid)(0.0, points, rho)`` call, ``points`` the face
  points of ``FFSLSphere(grid, …)``, the same object called again and again;
* ``step`` — one step of ``make_stepper("meanfield-ffsl", grid, DensityAttention(att, grid),
  courant=0.8)`` run by ``Controller`` (dt = 0.8·Δλ), from the same density each time (two
  attention evaluations at the face points, the second at a new density, and the transport).
Cache off and on alternate within each repetition (which comes first alternates too); the table
gives medians of the wall times and the median of the per-repetition ratios off/on, whether every
result (velocities; densities after the step) was bitwise the same, and how many targets the
spectral pass / split pass / exact fallback settled.  The machine may be shared: compare the
ratios, not the absolute times.  GaussGrid(64) at β = 100 is not spectral (the kernel series
needs degree 76 > lmax = 63): the cache cannot matter there.  Without the flag (the code before
the cache) both columns time the same code: results/attention_cache_before.json is such a run,
made before the cache was written (by an earlier version of this script, without the
``bitwise_equal`` entries).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from spherepde.dynamics.attention import grid_sums
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian.transport import FFSLSphere

MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])


def density(grid, name):
    if name == "diffuse":
        return 1.0 + 0.5 * grid.xyz[..., 0]
    kappa = 50.0
    return (kappa / (2 * np.pi * (1 - np.exp(-2 * kappa))) * np.exp(kappa * (grid.xyz @ MU - 1.0))
            + 1e-12)


def set_cache(on: bool) -> None:
    grid_sums.TARGET_CACHE = on  # an unknown attribute before the cache existed: then nothing changes


def side_by_side(fn, reps: int) -> dict:
    """Median wall times of fn() with the cache off and on, interleaved, the median of their
    ratio, and whether the results of all calls were bitwise the same."""
    for on in (False, True, True):  # warm-up; the cache is built on the second call in a row
        set_cache(on)
        first = fn()
    times = {False: [], True: []}
    same = True
    for r in range(reps):
        for flag in ((False, True) if r % 2 == 0 else (True, False)):
            set_cache(flag)
            t0 = time.perf_counter()
            res = fn()
            times[flag].append(time.perf_counter() - t0)
            same = same and np.array_equal(res, first)
    set_cache(True)
    off, on = np.array(times[False]), np.array(times[True])
    return {"off_s": float(np.median(off)), "on_s": float(np.median(on)),
            "ratio": float(np.median(off / on)), "reps": reps, "bitwise_equal": bool(same)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    rows = []
    for nlat in (64, 128):
        g = GaussGrid(nlat)
        points = FFSLSphere(g, lambda t, x: 0 * x).points
        dt = 0.8 * g.dlon
        for beta in (10.0, 100.0):
            att = Attention(np.eye(3), np.eye(3), np.eye(3), beta)
            for dname in ("diffuse", "concentrated"):
                rho = density(g, dname)
                da = DensityAttention(att, g)
                reps = 3 if args.quick else (9 if nlat == 64 else 5)
                call = side_by_side(lambda: da(0.0, points, rho), reps)
                stats = dict(da.last_stats)
                st = make_stepper("meanfield-ffsl", g, DensityAttention(att, g), courant=0.8)
                step = side_by_side(lambda: Controller(st, dt=dt).run(rho, (0.0, dt)).state,
                                    max(3, reps - 2))
                row = {"nlat": nlat, "beta": beta, "density": dname, "call": call, "step": step,
                       "stats": stats}
                rows.append(row)
                print(f"nlat {nlat:3d}  β {beta:5.0f}  {dname:12s}  "
                      f"call off {1e3 * call['off_s']:7.1f} ms  on {1e3 * call['on_s']:7.1f} ms  "
                      f"×{call['ratio']:.2f}   step off {1e3 * step['off_s']:7.1f} ms  "
                      f"on {1e3 * step['on_s']:7.1f} ms  ×{step['ratio']:.2f}  "
                      f"bitwise {call['bitwise_equal'] and step['bitwise_equal']}  "
                      f"passes {stats.get('spectral')}/{stats.get('split')}/{stats.get('exact')}",
                      flush=True)
    out = {"benchmark": "attention_cache", "cache_flag_present": hasattr(grid_sums, "TARGET_CACHE"),
           "quick": args.quick, "load_average": list(os.getloadavg()),
           "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "rows": rows}
    path = args.out
    if path is None and not args.quick:
        path = Path(__file__).with_name("results") / "attention_cache.json"
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1))
        print("wrote", path)


if __name__ == "__main__":
    main()
