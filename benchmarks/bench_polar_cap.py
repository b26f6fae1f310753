"""Cost of one ``ffsl-ppm`` step with the opt-in polar cap (``polar="cap"``, K = 4) against the
default split step (``polar="split"``), side by side in one run.

    python benchmarks/bench_polar_cap.py            # nlat = 64, 128; writes results/polar_cap.json
    python benchmarks/bench_polar_cap.py --quick    # fewer repetitions; prints only
    python benchmarks/bench_polar_cap.py --out PATH

Case: Williamson 1, α = π/2, Courant 0.8, limiter "positive"; the density is the cosine bell
after a quarter period (on the north pole, where the cap matters), the step starts there.
Two timings per stepper:

* ``cached``: ``stepper.step`` with the velocities already cached for that time (the sweeps
  alone; with the cap the velocity at its 2·(K+B+1)·nlon vertices is evaluated in the same
  call as at the face points and cached with them, so this is the split sweeps against the
  split sweeps plus the two caps' remaps.  Until 2026-12 the cap step evaluated its vertex
  velocities in a call of their own, which this column then included);
* ``full``: the velocity cache cleared before each call, so both include evaluating the
  velocity callable (what a run pays per step).

The variants are interleaved in each repetition; each sample is a batch of calls of at least
``min_sample`` seconds; the ratio is the median over repetitions of cap / split measured in the
same repetition, in CPU seconds of this process (the machine is shared: only ratios are
meaningful, the absolute times are recorded for reference).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np

from _common import batch
from spherepde.experiments.transport import fixed_dt
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.validation.transport_cases import initial_field, make_case


def _calls(nlat: int):
    g = GaussGrid(nlat)
    case = make_case("williamson1", math.pi / 2)
    steppers = {p: make_stepper("ffsl-ppm", g, case.velocity, polar=p) for p in ("split", "cap")}
    dt, n = fixed_dt(steppers["cap"], case.period, 0.8)
    rho = g.cell_average(initial_field("cosine-bell"))
    for k in range(n // 4):  # bring the bell onto the north pole (and compile the kernels)
        rho = steppers["cap"].step(rho, k * dt, dt)
    t = (n // 4) * dt
    calls = {}
    for p, st in steppers.items():
        st.step(rho, t, dt)  # prime the cache

        def cached(st=st):
            st.step(rho, t, dt)

        def full(st=st):
            st._cache = None
            st.step(rho, t, dt)

        calls[(p, "cached")] = cached
        calls[(p, "full")] = full
    return calls


def measure(nlat: int, reps: int, min_sample: float, rng) -> dict:
    calls = _calls(nlat)
    # batch size so that one sample lasts ≥ min_sample
    sizes = {}
    for key, fn in calls.items():
        c = time.process_time()
        fn()
        one = max(time.process_time() - c, 1e-5)
        sizes[key] = max(1, int(math.ceil(min_sample / one)))
    samples = {key: [] for key in calls}
    for _ in range(reps):
        for i in rng.permutation(len(calls)):
            key = list(calls)[i]
            cpu = []
            batch(calls[key], sizes[key], cpu=cpu)
            samples[key].append(cpu[0])
    out = {"nlat": nlat}
    for mode in ("cached", "full"):
        s, c = np.array(samples[("split", mode)]), np.array(samples[("cap", mode)])
        out[mode] = {"split_ms": 1e3 * float(np.median(s)), "cap_ms": 1e3 * float(np.median(c)),
                     "ratio": float(np.median(c / s)),
                     "ratio_of_medians": float(np.median(c) / np.median(s)),
                     "ratio_min": float(np.min(c / s)), "ratio_max": float(np.max(c / s))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    reps, min_sample = (3, 0.1) if args.quick else (7, 0.3)
    rng = np.random.default_rng(0)
    rows = [measure(n, reps, min_sample, rng) for n in (64, 128)]
    for r in rows:
        print(f"nlat {r['nlat']}: cap/split {r['cached']['ratio']:.2f} (cached face velocities), "
              f"{r['full']['ratio']:.2f} (with the velocity evaluation)")
    res = {"benchmark": "polar_cap", "case": "williamson1 alpha=pi/2, cosine bell at T/4, courant 0.8",
           "cap_rings": 4, "clock": "process CPU time", "repetitions": reps, "min_sample_s": min_sample,
           "machine": platform.platform(), "rows": rows}
    out = args.out or (None if args.quick else Path(__file__).parent / "results" / "polar_cap.json")
    if out is not None:
        Path(out).write_text(json.dumps(res, indent=2) + "\n")
        print("wrote", out)


if __name__ == "__main__":
    main()
