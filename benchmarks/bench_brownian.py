"""Cost of BrownianPath in a stepping loop: the horizon-free path (unit-interval increments and a
bridge tree per interval, issue 22.10) against the horizon tree it replaced (read from git,
commit 56ee637), interleaved, CPU seconds per increment.

    cd benchmarks && python bench_brownian.py [--steps 300] [--repeats 3]

Shape (1089, 3) (a sphere noise field of n_max = 32), Δt = 0.02 from t = 0, horizon 10 for the
old path.  Writes results/brownian.json.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
OLD_COMMIT = "56ee637"


def _old_class():
    src = subprocess.check_output(["git", "show", f"{OLD_COMMIT}:spherepde/noise/brownian.py"], cwd=HERE)
    tmp = Path(tempfile.mkdtemp()) / "old_brownian.py"
    tmp.write_bytes(src)
    spec = importlib.util.spec_from_file_location("old_brownian", tmp)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.BrownianPath


def loop(path, steps: int, dt: float) -> float:
    c = time.process_time()
    t = 0.0
    for _ in range(steps):
        path.increment(t, t + dt)
        t += dt
    return (time.process_time() - c) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from spherepde.noise.brownian import BrownianPath

    Old = _old_class()
    shape, dt = (1089, 3), 0.02
    rows: dict = {"old_horizon_tree": [], "new_unit_intervals": []}
    for _ in range(args.repeats):
        rows["old_horizon_tree"].append(loop(Old(shape, seed=1, t1=10.0), args.steps, dt))
        rows["new_unit_intervals"].append(loop(BrownianPath(shape, seed=1), args.steps, dt))
    med = {k: sorted(v)[len(v) // 2] for k, v in rows.items()}
    out = {"what": __doc__.split("\n\n")[0], "shape": list(shape), "dt": dt, "steps": args.steps,
           "cpu_seconds_per_increment": rows, "median": med,
           "ratio_new_over_old": med["new_unit_intervals"] / med["old_horizon_tree"],
           "machine": platform.processor() or platform.machine(), "python": platform.python_version()}
    (HERE / "results" / "brownian.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"median": med, "ratio_new_over_old": out["ratio_new_over_old"]}))


if __name__ == "__main__":
    main()
