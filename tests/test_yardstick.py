"""benchmarks/yardstick.py: every benchmark can record the machine's own limits beside its speed
figures (issue 23), so the record has every field, each a rate (positive and finite)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_machine_limits_record_the_cpu_and_its_measured_rates():
    sys.path.insert(0, str(BENCH))
    try:
        from yardstick import machine_limits
    finally:
        sys.path.remove(str(BENCH))
    lim = machine_limits(reps=1)
    cpu = lim["cpu"]
    assert cpu["model"] and cpu["logical_cores"] >= 1 and len(cpu["loadavg"]) == 3
    assert "SSE2" in cpu["simd_found"] or cpu["machine"] != "x86_64"  # numpy's run-time report
    assert cpu["numba_svml"] in (True, False) and cpu["numba_threads"] >= 1
    for key in ("np_exp_per_s_per_core", "dgemm_gflops", "dgemm_gflops_per_core", "copy_gb_per_s"):
        assert math.isfinite(lim[key]) and lim[key] > 0, key
