"""The machine's own limits, measured in the same run as a benchmark, so that a speed figure can be
quoted as a fraction of what this CPU can do, not only as a ratio to a reference whose speed
depends on the CPU (issue 23):

* ``cpu``: model, logical cores, the SIMD features numpy found at run time and those it was
  built for, numba's SVML state and thread count, the BLAS library and its threads, the load
  average;
* ``np_exp_per_s_per_core``: float64 exponentials per second of ``np.exp`` on one core (a
  1 M-element array, in place; numpy's exp is single-threaded);
* ``dgemm_gflops_per_core`` and ``dgemm_gflops``: float64 matrix product (n = 1024, 2n³ flops)
  on one BLAS thread and on all of them;
* ``copy_gb_per_s``: a STREAM-like copy (``np.copyto`` of 16 M float64, 16 bytes moved per
  element), one core.

    python benchmarks/yardstick.py            # prints the JSON
    from yardstick import machine_limits      # in a benchmark of this folder

Each figure is the best of ``reps`` timings (the least disturbed by other jobs on a shared
machine); the load averages are recorded beside them.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np


def _best(fn, reps: int) -> float:
    fn()  # warm up (page faults, BLAS threads)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_info() -> dict:
    """What this CPU and these libraries are: model, cores, SIMD (numpy's run-time report),
    numba's SVML state and threads, BLAS and its threads, load average."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor() or "unknown"
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as mu
    features = getattr(mu, "__cpu_features__", {})
    info = {"model": model, "logical_cores": os.cpu_count(), "machine": platform.machine(),
            "numpy": np.__version__,
            "simd_found": sorted(k for k, v in features.items() if v),
            "simd_baseline": list(getattr(mu, "__cpu_baseline__", [])),
            "simd_dispatch": list(getattr(mu, "__cpu_dispatch__", [])),
            "loadavg": list(os.getloadavg())}
    try:
        import numba

        info.update(numba=numba.__version__, numba_svml=bool(numba.config.USING_SVML),
                    numba_threads=int(numba.get_num_threads()))
        # why SVML is off where it is: numba needs both Intel's libsvml (e.g. the
        # intel-cmplr-lib-rt wheel) and an llvmlite whose LLVM carries the SVML patch (conda's;
        # PyPI's llvmlite wheels do not)
        import llvmlite.binding as llb

        has = getattr(llb.targets, "has_svml", None)
        info["llvmlite_svml_patched"] = bool(has()) if has is not None else None
    except ImportError:
        info.update(numba=None, numba_svml=None, numba_threads=None)
    try:
        from threadpoolctl import threadpool_info

        blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
        info["blas"] = [{"library": p.get("internal_api"), "version": p.get("version"),
                         "threads": p.get("num_threads")} for p in blas]
    except ImportError:
        info["blas"] = None
    return info


def machine_limits(reps: int = 5) -> dict:
    """:func:`cpu_info` plus the measured rates (the module docstring)."""
    info = {"cpu": cpu_info()}
    x = np.random.default_rng(0).uniform(-30.0, 0.0, 1 << 20)
    out = np.empty_like(x)
    info["np_exp_per_s_per_core"] = x.size / _best(lambda: np.exp(x, out=out), reps)
    n = 1024
    a = np.random.default_rng(1).normal(size=(n, n))
    c = np.empty_like(a)
    flops = 2.0 * n**3
    info["dgemm_gflops"] = flops / _best(lambda: np.matmul(a, a, out=c), reps) / 1e9
    try:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, user_api="blas"):
            info["dgemm_gflops_per_core"] = flops / _best(lambda: np.matmul(a, a, out=c), reps) / 1e9
    except ImportError:
        info["dgemm_gflops_per_core"] = None
    src = np.ones(1 << 24)
    dst = np.empty_like(src)
    info["copy_gb_per_s"] = 16.0 * src.size / _best(lambda: np.copyto(dst, src), reps) / 1e9
    info["reps"] = reps
    info["loadavg_end"] = list(os.getloadavg())
    return info


if __name__ == "__main__":
    print(json.dumps(machine_limits(), indent=1))
