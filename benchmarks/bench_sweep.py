"""Speed-up of ``spherepde sweep`` with 2 dask workers against 1, measured side by side.

A sweep of 4 equal-cost members (S¹, Q = K = V = I, density + particles, β in 4 values) runs
into fresh folders with ``workers=1`` and ``workers=2``, alternating, ``--reps`` times each; the
wall times include starting the LocalCluster and collecting sweep.nc, as a user sees them.
The ratio is the median of the per-repetition ratios t(1 worker) / t(2 workers) (ideal: 2 on
an idle 2-core machine).  The load average is recorded: other jobs on the machine take cores
away from the workers and lower the ratio.

    python benchmarks/bench_sweep.py [--reps 2] [--out benchmarks/results/sweep.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from spherepde.runs.sweep import run_sweep

I2 = [[1.0, 0.0], [0.0, 1.0]]
SWEEP = {
    "grid": {"kind": "circle", "n": 256},
    "initial": {"kind": "low-mode", "amplitude": 0.3, "max_degree": 4, "seed": 0},
    "dynamics": {"attention": {"Q": I2, "K": I2, "V": I2, "beta": 10.0}},
    "representations": {"density": True, "particles": {"n": 1024, "seed": 0}},
    "stepping": {"t_end": 12.0, "courant": 0.8, "output_every": 0.5},
    "outputs": {"diagnostics": ["mass", "energy"]},
    "sweep": {"dynamics.attention.beta": [5.0, 10.0, 20.0, 40.0]},
}


def timed(workers: int, root: Path) -> float:
    out = root / f"w{workers}"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    s = run_sweep(SWEEP, out, workers=workers, progress=False)
    assert s["completed"] == s["members"] == 4
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        load0 = os.getloadavg()
        for _ in range(args.reps):
            t1 = timed(1, root)
            t2 = timed(2, root)
            rows.append({"one_worker_s": round(t1, 2), "two_workers_s": round(t2, 2),
                         "ratio": round(t1 / t2, 3)})
            print(rows[-1], flush=True)
        load1 = os.getloadavg()
    out = {"benchmark": "bench_sweep", "members": 4, "repetitions": rows,
           "speedup_median": statistics.median(r["ratio"] for r in rows),
           "load_average_at_start": load0, "load_average_at_end": load1,
           "cpu_count": os.cpu_count(), "python": platform.python_version(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    print(json.dumps({k: out[k] for k in ("speedup_median", "load_average_at_start", "load_average_at_end")}))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
