"""Timing helpers shared by the benchmarks (``from _common import …``: each benchmark runs as a
script from this folder, which Python puts first on ``sys.path``).

* :func:`timed`: one call, its wall-clock and CPU seconds and its result;
* :func:`batch`: seconds per call over a batch of calls with the garbage collector off (CPU
  seconds and minor page faults per call collected on request), the inner loop of the
  interleaved measurements of ``bench_transport`` and ``bench_spde``;
* :func:`page_faults`: minor page faults of this process so far.

Each benchmark keeps its own output format; these only measure.
"""
from __future__ import annotations

import gc
import resource
import time


def timed(fn):
    """Call ``fn()`` once: (wall-clock seconds, CPU seconds of this process, its result)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def page_faults() -> int:
    """Minor page faults of this process so far (``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def batch(fn, n: int, faults: list | None = None, cpu: list | None = None) -> float:
    """Wall-clock seconds per call over a batch of n calls (CPU seconds and page faults per
    call appended to ``cpu`` / ``faults`` when given)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        f0 = page_faults()
        c = time.process_time()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = (time.perf_counter() - t) / n
        if cpu is not None:
            cpu.append((time.process_time() - c) / n)
        if faults is not None:
            faults.append((page_faults() - f0) / n)
        return dt
    finally:
        if gc_was:
            gc.enable()


__all__ = ["batch", "page_faults", "timed"]
