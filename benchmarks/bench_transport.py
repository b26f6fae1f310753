"""Cost of one ``ffsl-ppm`` transport step (numpy and numba backends) against a first-order
upwind baseline.

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
* ``ffsl_numpy``  — ONE ``stepper.step`` of ``ffsl-ppm`` (limiter "positive", courant 0.8) with the
                    face velocities already cached (the stepper caches per time; the cache is
                    primed before timing), i.e. the three sweeps Z(dt/2) M(dt) Z(dt/2), with the
                    numpy backend of the sweeps (``ffsl.BACKEND = "numpy"``, the reference).
* ``ffsl_numba``  — the same step with the compiled backend (``ffsl.BACKEND = "numba"``,
                    spherepde/solvers/eulerian/ffsl_numba.py; same results bitwise, checked
                    before timing).  Kernels are compiled / loaded from numba's cache before
                    timing; the first-call time is recorded in the JSON.
* ``ffsl_full``   — the numba step with the cache cleared first, so it includes evaluating and
                    projecting the velocity at all face points.
* ``velocity``    — the velocity evaluation alone (``stepper._face_velocities`` on a cleared cache).

Without numba only ``upwind``, ``ffsl_numpy``, ``ffsl_full`` (numpy then) and ``velocity`` run.

Timing: the variants are interleaved within each repetition (in a shuffled order) and each
sample runs a batch of calls long enough (>= ``min_sample`` seconds) to swamp timer noise;
the table reports medians over repetitions (wall clock; process CPU time is recorded too,
since on a shared machine it is less sensitive to being descheduled).  Ratios are the median over repetitions of the
ratio measured side by side within one repetition (``ratio``), with the ratio of the medians
alongside as a cross-check.  Throughput is cell-updates per second = nlat * nlon / time.
The machine is shared: only ratios measured in the same run are meaningful.

Minor page faults per call are recorded too: numpy temporaries of a few hundred kB are
served by fresh mmap'd / trimmed pages under glibc's default malloc settings, and zero-filling
them can be a large, history-dependent part of the numpy ffsl step (``--mallopt`` shows the
step without that cost).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde import GaussGrid  # noqa: E402
from spherepde.solvers import make_stepper  # noqa: E402
from spherepde.solvers.eulerian import ffsl  # noqa: E402
from spherepde.validation.transport_cases import initial_field, make_case  # noqa: E402

from _common import batch  # noqa: E402  (this folder: the timing helpers of every benchmark)

CASE = "nl-case4"
LIMITER = "positive"
COURANT = 0.8
AIM = 4.0  # issue target: ffsl-ppm step <= AIM x upwind step


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _numba_version():
    try:
        import numba
    except ImportError:
        return None
    return numba.__version__


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint64)


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

    # sanity: the steps conserve mass to round-off, ffsl stays positive, both backends agree
    have_numba = numba_available()
    backends = ("numpy", "numba") if have_numba else ("numpy",)
    mass0 = grid.integrate(rho0)
    steps = {"upwind": up.step(rho0, dt)}
    first_call = None
    for backend in backends:
        ffsl.BACKEND = backend
        st.substeps = 0
        t = time.perf_counter()
        steps[backend] = st.step(rho0, t0, dt)
        if backend == "numba":
            first_call = time.perf_counter() - t  # kernels compiled or loaded from the cache
    for name, r in steps.items():
        rel = abs(grid.integrate(r) - mass0) / mass0
        if rel > 1e-12:
            raise AssertionError(f"{name} step does not conserve mass at nlat={nlat}: {rel:.2e}")
        if name != "upwind" and r.min() < 0.0:
            raise AssertionError(f"ffsl-ppm 'positive' step ({name}) produced negative density")
    if have_numba and not np.array_equal(_bits(steps["numpy"]), _bits(steps["numba"])):
        raise AssertionError(f"numba and numpy ffsl steps differ at nlat={nlat}")

    def on(backend, fn):
        def run():
            ffsl.BACKEND = backend
            fn()
        return run

    def ffsl_step():
        st.step(rho0, t0, dt)

    def ffsl_full():
        st._cache = None
        st.step(rho0, t0, dt)

    def velocity():
        st._cache = None
        st._face_velocities(tm)

    def upwind():
        up.step(rho0, dt)

    fast = backends[-1]
    fns = {"upwind": upwind, "ffsl_numpy": on("numpy", ffsl_step)}
    if have_numba:
        fns["ffsl_numba"] = on("numba", ffsl_step)
    fns["ffsl_full"] = on(fast, ffsl_full)
    fns["velocity"] = velocity
    info = {"dt": dt, "courant": st.courant_number(tm, dt), "substeps": st.substeps,
            "full_backend": fast, "numba_first_call_s": first_call,
            "backends_bitwise_equal": have_numba}
    return grid, st, fns, info


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
        one = min(batch(fn, 1) for _ in range(3))
        inner[k] = max(1, int(np.ceil(min_sample / max(one, 1e-9))))
    samples = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    faults = {k: [] for k in fns}
    names = list(fns)
    for _ in range(reps):
        for k in rng.permutation(names):
            samples[k].append(batch(fns[k], inner[k], faults[k], cpu[k]))
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
    hdr = (f"{'nlat':>5} {'nlon':>5} {'cells':>7} | {'upwind':>7} {'numpy':>7} {'numba':>7} "
           f"{'full':>7} {'vel':>6} | {'upwind':>7} {'numba':>7} | {'numpy/up':>8} {'numba/up':>8} "
           f"{'aim':>4} {'np/nb':>6} | {'cpu np/up':>9} {'cpu nb/up':>9} | {'faults np':>9} {'nb':>4}")
    print(f"ffsl-ppm ({LIMITER}, courant {COURANT}, {CASE}) vs first-order upwind; "
          f"{reps} interleaved repetitions, medians"
          + ("; allocator: mallopt (no trimming)" if args.mallopt else "")
          + ("" if numba_available() else "; numba NOT importable: numba columns empty"))
    print(f"{'':19} | {'ms per step':^38} | {'Mcells/s':^15} | {'ratio to upwind, speed-up':^29} |")
    print(hdr)
    print("-" * len(hdr))
    nan = float("nan")
    for nlat in sizes:
        grid, st, fns, info = setup(nlat)
        s, inner, faults, cpu = measure(fns, reps, min_sample, rng)
        cells = grid.nlat * grid.nlon
        med = {k: float(np.median(v)) for k, v in s.items()}
        q = {k: [float(x) for x in np.percentile(v, [25, 75])] for k, v in s.items()}

        def ratio(a, b, samples=s):
            return float(np.median(samples[a] / samples[b])) if a in samples and b in samples else nan

        have_nb = "ffsl_numba" in s
        fast = "ffsl_numba" if have_nb else "ffsl_numpy"
        row = {
            "nlat": nlat, "nlon": grid.nlon, "cells": cells,
            "dt": info["dt"], "courant": info["courant"], "substeps_per_step": info["substeps"],
            "full_step_backend": info["full_backend"],
            "numba_first_call_s": info["numba_first_call_s"],
            "backends_bitwise_equal": info["backends_bitwise_equal"],
            "seconds_median": med, "seconds_iqr": q, "batch_calls": inner,
            "minor_page_faults_per_call": faults,
            "cell_updates_per_s": {k: cells / med[k] for k in med if k != "velocity"},
            "ratio_ffsl_numpy_to_upwind": ratio("ffsl_numpy", "upwind"),
            "ratio_ffsl_numba_to_upwind": ratio("ffsl_numba", "upwind"),
            "ratio_ffsl_full_to_upwind": ratio("ffsl_full", "upwind"),
            "speedup_numba_vs_numpy": ratio("ffsl_numpy", "ffsl_numba"),
            "ratio_of_medians": {k: med[k] / med["upwind"] for k in med if k != "upwind"},
            "cpu_seconds_median": {k: float(np.median(v)) for k, v in cpu.items()},
            "cpu_ratio_ffsl_numpy_to_upwind": ratio("ffsl_numpy", "upwind", cpu),
            "cpu_ratio_ffsl_numba_to_upwind": ratio("ffsl_numba", "upwind", cpu),
            "cpu_ratio_ffsl_full_to_upwind": ratio("ffsl_full", "upwind", cpu),
            "velocity_share_of_full_step": ratio("velocity", "ffsl_full"),
            "meets_aim": ratio(fast, "upwind") <= AIM,
            "meets_aim_numpy": ratio("ffsl_numpy", "upwind") <= AIM,
        }
        rows.append(row)
        cu = row["cell_updates_per_s"]
        ms = {k: med.get(k, nan) * 1e3 for k in fns}
        print(f"{nlat:5d} {grid.nlon:5d} {cells:7d} | {ms['upwind']:7.3f} {ms['ffsl_numpy']:7.2f} "
              f"{med.get('ffsl_numba', nan)*1e3:7.3f} {ms['ffsl_full']:7.2f} {ms['velocity']:6.2f} | "
              f"{cu['upwind']/1e6:7.1f} {cu.get('ffsl_numba', nan)/1e6:7.2f} | "
              f"{row['ratio_ffsl_numpy_to_upwind']:8.1f} {row['ratio_ffsl_numba_to_upwind']:8.2f} "
              f"{'ok' if row['meets_aim'] else 'MISS':>4} {row['speedup_numba_vs_numpy']:6.1f} | "
              f"{row['cpu_ratio_ffsl_numpy_to_upwind']:9.1f} {row['cpu_ratio_ffsl_numba_to_upwind']:9.2f} | "
              f"{faults['ffsl_numpy']:9.0f} {faults.get('ffsl_numba', nan):4.0f}")
    print(f"aim: ffsl-ppm step (frozen velocities) <= {AIM:g} x upwind step, judged on the numba "
          "backend when available ('aim'); ratios = median of per-repetition ratios (wall clock; "
          "'cpu' = the same from process CPU time); np/nb = speed-up of numba over numpy; "
          f"'full' = {fast.split('_')[1]} step including the velocity evaluation; faults = minor "
          "page faults per step")

    if out is not None:
        result = {
            "benchmark": "bench_transport",
            "description": "one ffsl-ppm step (numpy and numba backends of the sweeps) vs one "
                           "first-order upwind FV step, same grid, same frozen face velocities",
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
                "numba": _numba_version(),
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
