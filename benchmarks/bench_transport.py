"""Cost of one ``ffsl-ppm`` transport step against a first-order upwind baseline.

    python benchmarks/bench_transport.py            # nlat = 64, 128, 256; writes results/transport.json
    python benchmarks/bench_transport.py --quick    # nlat = 64, 128, fewer repetitions; prints only
    python benchmarks/bench_transport.py --out PATH # write the JSON somewhere else (also with --quick)
    python benchmarks/bench_transport.py --mallopt  # diagnostic: glibc never returns freed memory to
                                                    # the OS (no page faults on fresh temporaries);
                                                    # prints only unless --out

What is timed, per grid (GaussGrid(nlat), nlon = 2 nlat), all on the same density field (the
case's default initial condition, gaussian hills) and the same step dt (Courant 0.8 for the
largest speed of the nl-case4 velocity over its period, step starting at t = 0):

* ``upwind``      — ONE unsplit first-order donor-cell finite-volume step in plain vectorised
                    numpy, fluxes through all four faces of every cell with the frozen face
                    velocities of the ffsl stepper (same numbers), the face lengths
                    ``grid.meridian_face_length`` / ``parallel_face_length`` and ``grid.cell_area``.
                    A cost baseline only (it is not stable at this dt near the poles).
* ``ffsl_frozen`` — ONE ``stepper.step`` of ``ffsl-ppm`` (limiter "positive", courant 0.8) with the
                    face velocities already cached (the stepper caches per time; the cache is
                    primed before timing), i.e. the three sweeps Z(dt/2) M(dt) Z(dt/2).
* ``ffsl_full``   — the same step with the cache cleared first, so it includes evaluating and
                    projecting the velocity at all face points.
* ``velocity``    — the velocity evaluation alone (``stepper._face_velocities`` on a cleared cache).

Timing: the variants are interleaved within each repetition (in a shuffled order) and each
sample runs a batch of calls long enough (>= ``min_sample`` seconds) to swamp timer noise;
the table reports medians over repetitions (wall clock; process CPU time is recorded too,
since on a shared machine it is less sensitive to being descheduled).  Ratios are the median over repetitions of the
ratio measured side by side within one repetition (``ratio``), with the ratio of the medians
alongside as a cross-check.  Throughput is cell-updates per second = nlat * nlon / time.
The machine is shared: only ratios measured in the same run are meaningful.

Minor page faults per call are recorded too: numpy temporaries of a few hundred kB are
served by fresh mmap'd / trimmed pages under glibc's default malloc settings, and zero-filling
them can be a large, history-dependent part of the ffsl step (``--mallopt`` shows the step
without that cost).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde import GaussGrid  # noqa: E402
from spherepde.solvers import make_stepper  # noqa: E402
from spherepde.validation.transport_cases import initial_field, make_case  # noqa: E402

CASE = "nl-case4"
LIMITER = "positive"
COURANT = 0.8
AIM = 4.0  # issue target: ffsl-ppm step <= AIM x upwind step


class Upwind:
    """Unsplit first-order donor-cell step on a GaussGrid with frozen face velocities.

    ``u`` (nlat, nlon): eastward velocity at the west (meridian) face of every cell, at the
    stepper's zonal face points; ``v`` (nlat+1, nlon): northward velocity at the parallel faces
    (λ_i, φ_{j∓1/2}), row j being the north face of cell row j.
    """

    def __init__(self, grid: GaussGrid, u: np.ndarray, v: np.ndarray):
        self.Uz = u * grid.meridian_face_length[:, None]            # volume flux / density
        self.Vm = (v * grid.parallel_face_length[:, None])[1:-1]    # interior faces only
        self.inv_area = 1.0 / grid.cell_area
        self.nlat, self.nlon = grid.shape

    def step(self, rho: np.ndarray, dt: float) -> np.ndarray:
        Uz, Vm = self.Uz, self.Vm
        # eastward flux through the west face of cell i (between cells i−1 and i)
        Fz = Uz * np.where(Uz > 0.0, np.roll(rho, 1, axis=1), rho)
        # northward flux through the interior parallel faces (between rows j−1 and j)
        Fm = np.zeros((self.nlat + 1, self.nlon))
        Fm[1:-1] = Vm * np.where(Vm > 0.0, rho[1:], rho[:-1])
        # net outflow: east face − west face + north face − south face (poles closed)
        out = (np.roll(Fz, -1, axis=1) - Fz) + (Fm[:-1] - Fm[1:])
        return rho - dt * out * self.inv_area


def setup(nlat: int):
    grid = GaussGrid(nlat)
    case = make_case(CASE)
    rho0 = grid.cell_average(initial_field(case.default_field))
    st = make_stepper("ffsl-ppm", grid, case.velocity, limiter=LIMITER, courant=COURANT)
    vmax = max(st._face_velocities(t)[-1] for t in np.linspace(0.0, case.period, 21))
    dt = COURANT * grid.dlon / vmax
    t0 = 0.0
    tm = t0 + 0.5 * dt
    az, am, _ = st._face_velocities(tm)  # primes the stepper's cache at the step's midpoint
    # the very same face velocities, back in physical units for the finite-volume baseline
    u = az / st._zfac          # eastward speed at the zonal faces (nlat, nlon)
    v = -am.T                  # northward speed at the parallel faces (nlat+1, nlon)
    up = Upwind(grid, u, v)

    # sanity: both steps conserve mass to round-off, ffsl stays positive
    mass0 = grid.integrate(rho0)
    r_up = up.step(rho0, dt)
    st.substeps = 0
    r_ff = st.step(rho0, t0, dt)
    for name, r in (("upwind", r_up), ("ffsl", r_ff)):
        rel = abs(grid.integrate(r) - mass0) / mass0
        if rel > 1e-12:
            raise AssertionError(f"{name} step does not conserve mass at nlat={nlat}: {rel:.2e}")
    if r_ff.min() < 0.0:
        raise AssertionError("ffsl-ppm 'positive' step produced negative density")

    def ffsl_frozen():
        st.step(rho0, t0, dt)

    def ffsl_full():
        st._cache = None
        st.step(rho0, t0, dt)

    def velocity():
        st._cache = None
        st._face_velocities(tm)

    def upwind():
        up.step(rho0, dt)

    info = {"dt": dt, "courant": st.courant_number(tm, dt), "substeps": st.substeps}
    return grid, st, {"upwind": upwind, "ffsl_frozen": ffsl_frozen,
                      "ffsl_full": ffsl_full, "velocity": velocity}, info


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _batch(fn, n: int, faults: list | None = None, cpu: list | None = None) -> float:
    """Wall-clock seconds per call over a batch of n calls (CPU seconds and page faults per
    call appended to ``cpu`` / ``faults`` when given)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        f0 = _faults()
        c = time.process_time()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = (time.perf_counter() - t) / n
        if cpu is not None:
            cpu.append((time.process_time() - c) / n)
        if faults is not None:
            faults.append((_faults() - f0) / n)
        return dt
    finally:
        if gc_was:
            gc.enable()


def _mallopt() -> None:
    """Keep freed memory in the process (glibc only): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = 1 GiB."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    if not (libc.mallopt(-1, 1 << 30) and libc.mallopt(-3, 1 << 30)):
        raise RuntimeError("mallopt failed")


def measure(fns: dict, reps: int, min_sample: float, rng) -> dict:
    # calibrate the batch size of each variant (warm-up included)
    inner = {}
    for k, fn in fns.items():
        fn()
        one = min(_batch(fn, 1) for _ in range(3))
        inner[k] = max(1, int(np.ceil(min_sample / max(one, 1e-9))))
    samples = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    faults = {k: [] for k in fns}
    names = list(fns)
    for _ in range(reps):
        for k in rng.permutation(names):
            samples[k].append(_batch(fns[k], inner[k], faults[k], cpu[k]))
    return ({k: np.array(v) for k, v in samples.items()}, inner,
            {k: float(np.median(v)) for k, v in faults.items()},
            {k: np.array(v) for k, v in cpu.items()})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="nlat 64 and 128 only, fewer repetitions; does not write JSON unless --out")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON output (default benchmarks/results/transport.json for a full run)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per variant")
    p.add_argument("--mallopt", action="store_true",
                   help="diagnostic: raise glibc's trim/mmap thresholds first (Linux/glibc only); "
                        "does not write JSON unless --out")
    args = p.parse_args(argv)
    if args.mallopt:
        _mallopt()

    sizes = (64, 128) if args.quick else (64, 128, 256)
    reps = args.reps or (5 if args.quick else 21)
    min_sample = 0.02 if args.quick else 0.05
    out = args.out
    if out is None and not (args.quick or args.mallopt):
        out = ROOT / "benchmarks" / "results" / "transport.json"
    rng = np.random.default_rng(0)
    load_start = list(os.getloadavg())

    rows = []
    hdr = (f"{'nlat':>5} {'nlon':>5} {'cells':>7} | {'upwind ms':>9} {'ffsl ms':>8} "
           f"{'full ms':>8} {'vel ms':>7} | {'upwind Mc/s':>11} {'ffsl Mc/s':>9} "
           f"{'full Mc/s':>9} | {'ffsl/up':>7} {'full/up':>7} {'aim':>5} | {'cpu ratio':>9} {'faults/step':>11}")
    print(f"ffsl-ppm ({LIMITER}, courant {COURANT}, {CASE}) vs first-order upwind; "
          f"{reps} interleaved repetitions, medians"
          + ("; allocator: mallopt (no trimming)" if args.mallopt else ""))
    print(hdr)
    print("-" * len(hdr))
    for nlat in sizes:
        grid, st, fns, info = setup(nlat)
        s, inner, faults, cpu = measure(fns, reps, min_sample, rng)
        cells = grid.nlat * grid.nlon
        med = {k: float(np.median(v)) for k, v in s.items()}
        q = {k: [float(x) for x in np.percentile(v, [25, 75])] for k, v in s.items()}
        ratio_frozen = float(np.median(s["ffsl_frozen"] / s["upwind"]))
        ratio_full = float(np.median(s["ffsl_full"] / s["upwind"]))
        row = {
            "nlat": nlat, "nlon": grid.nlon, "cells": cells,
            "dt": info["dt"], "courant": info["courant"], "substeps_per_step": info["substeps"],
            "seconds_median": med, "seconds_iqr": q, "batch_calls": inner,
            "minor_page_faults_per_call": faults,
            "cell_updates_per_s": {k: cells / med[k] for k in ("upwind", "ffsl_frozen", "ffsl_full")},
            "ratio_ffsl_frozen_to_upwind": ratio_frozen,
            "ratio_ffsl_full_to_upwind": ratio_full,
            "ratio_of_medians_frozen": med["ffsl_frozen"] / med["upwind"],
            "ratio_of_medians_full": med["ffsl_full"] / med["upwind"],
            "cpu_seconds_median": {k: float(np.median(v)) for k, v in cpu.items()},
            "cpu_ratio_ffsl_frozen_to_upwind": float(np.median(cpu["ffsl_frozen"] / cpu["upwind"])),
            "cpu_ratio_ffsl_full_to_upwind": float(np.median(cpu["ffsl_full"] / cpu["upwind"])),
            "velocity_share_of_full_step": float(np.median(s["velocity"] / s["ffsl_full"])),
            "meets_aim": ratio_frozen <= AIM,
        }
        rows.append(row)
        cu = row["cell_updates_per_s"]
        print(f"{nlat:5d} {grid.nlon:5d} {cells:7d} | {med['upwind']*1e3:9.3f} "
              f"{med['ffsl_frozen']*1e3:8.2f} {med['ffsl_full']*1e3:8.2f} "
              f"{med['velocity']*1e3:7.2f} | {cu['upwind']/1e6:11.1f} "
              f"{cu['ffsl_frozen']/1e6:9.2f} {cu['ffsl_full']/1e6:9.2f} | "
              f"{ratio_frozen:7.1f} {ratio_full:7.1f} {'ok' if row['meets_aim'] else 'MISS':>5} | "
              f"{row['cpu_ratio_ffsl_frozen_to_upwind']:9.1f} {faults['ffsl_frozen']:11.0f}")
    print(f"aim: ffsl-ppm step (frozen velocities) <= {AIM:g} x upwind step; "
          "ratios = median of per-repetition ratios (wall clock; 'cpu ratio' = the same from "
          "process CPU time); faults/step = minor page faults per frozen ffsl step")

    if out is not None:
        result = {
            "benchmark": "bench_transport",
            "description": "one ffsl-ppm step vs one first-order upwind FV step, same grid, "
                           "same frozen face velocities",
            "case": CASE, "limiter": LIMITER, "courant": COURANT, "aim_ratio": AIM,
            "quick": bool(args.quick), "repetitions": reps, "min_sample_s": min_sample,
            "allocator": ("glibc mallopt(M_TRIM_THRESHOLD=M_MMAP_THRESHOLD=1GiB)" if args.mallopt
                          else "default"),
            "timing": "interleaved shuffled repetitions, medians; ratio = median of "
                      "per-repetition ratios (wall clock, perf_counter); cpu_* = the same from "
                      "process_time",
            "load_average_at_start": load_start,
            "load_average_at_end": list(os.getloadavg()),
            "environment": {
                "python": platform.python_version(), "numpy": np.__version__,
                "machine": platform.machine(), "processor": platform.processor(),
                "cpu_count": os.cpu_count(),
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            "results": rows,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        tmp.replace(out)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
