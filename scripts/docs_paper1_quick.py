"""Run Paper 1's experiments with --quick (and circle-clusters at full size) through the command
line and write their summaries, wall times and load averages to
docs/data/paper1_quick.json, which docs/paper1.md quotes (≈ 5 min on 2 busy cores).

    PYTHONPATH=. python3 scripts/docs_paper1_quick.py
    PYTHONPATH=. python3 scripts/docs_derived.py       # the derived numbers
    python3 scripts/docs_numbers.py                     # then re-render the pages

Each entry: the command (output folder written DIR), its wall time in seconds, the 1-minute load
average when it started, and the summary.json the command wrote. metastability and
particles-vs-density run twice, with the default 2 dask workers and with --workers 0.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNS = {
    "metastability": ["experiment", "metastability", "--quick"],
    "metastability_workers0": ["experiment", "metastability", "--quick", "--workers", "0"],
    "terminal_phase": ["experiment", "terminal-phase", "--quick"],
    "particles_vs_density": ["experiment", "particles-vs-density", "--quick"],
    "particles_vs_density_workers0": ["experiment", "particles-vs-density", "--quick", "--workers", "0"],
    "circle_clusters": ["experiment", "circle-clusters"],
}


def main() -> int:
    out: dict = {"script": "scripts/docs_paper1_quick.py",
                 "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
                 "runs": {}}
    path = ROOT / "docs" / "data" / "paper1_quick.json"
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in RUNS.items():
            load, t0 = os.getloadavg()[0], time.perf_counter()
            folder = Path(tmp) / name
            res = subprocess.run([sys.executable, "-m", "spherepde", *args, "--output", str(folder), "--json"],
                                 cwd=ROOT, check=True, capture_output=True, text=True).stdout
            seconds = time.perf_counter() - t0
            printed = json.loads(res)
            # the summary.json the command wrote holds the series and per-N tables that --json leaves out
            summary = json.loads(Path(printed.get("summary") or folder / "summary.json").read_text())
            summary.pop("config", None)
            out["runs"][name] = {"command": "python3 -m spherepde " + " ".join(args) + " --output DIR --json",
                                 "seconds": round(seconds, 1), "load_average": round(load, 2),
                                 "summary": summary}
            print(f"{name}: {seconds:.1f} s at load {load:.1f}", flush=True)
            # written after every run, so an interrupted script keeps what it measured
            path.write_text(json.dumps(out, indent=1, ensure_ascii=False, default=str) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
