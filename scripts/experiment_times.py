"""Issue 20, item 3: how long the Paper 1 experiments take with their defaults (``amr``).

Runs ``spherepde experiment metastability --betas 1000 --json`` and ``spherepde experiment
terminal-phase --json`` as a user would (their default two dask workers), each in a fresh
process, and records the wall seconds, the CPU seconds of the process and its children
(``resource.getrusage(RUSAGE_CHILDREN)``), the load average around each, and what each says of
its own resolution (``resolution_check``: ``max_relative_change``, ``resolved``,
``switch_time_change``).

    python3 scripts/experiment_times.py OUT_FOLDER --out docs/data/experiment_times.json

``--amr-pole`` (e.g. ``off``: the raster's own poles, the default before) and ``--check-nlat N``
(e.g. 24 on the base 32: the coarser check of before; by default the check is the refined run)
are passed on to both commands; ``--only NAME`` runs one of the two.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "metastability_beta1000": ["experiment", "metastability", "--betas", "1000"],
    "terminal_phase": ["experiment", "terminal-phase"],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="where the experiments write (one sub-folder each)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--amr-pole", nargs="+", help="passed on to both experiments (e.g. off)")
    ap.add_argument("--only", choices=sorted(COMMANDS), help="run this experiment alone")
    ap.add_argument("--check-nlat", type=int, help="passed on to both experiments")
    args = ap.parse_args(argv)
    extra = ["--amr-pole", *args.amr_pole] if args.amr_pole else []
    extra += ["--check-nlat", str(args.check_nlat)] if args.check_nlat is not None else []
    out = {"script": "scripts/experiment_times.py", "machine": platform.platform(),
           "cpus": os.cpu_count(), "python": platform.python_version(), "runs": {}}
    for name, cmd in COMMANDS.items():
        if args.only and name != args.only:
            continue
        cmd = [*cmd, *extra]
        full = [sys.executable, "-m", "spherepde", *cmd, "--output", str(Path(args.folder) / name),
                "--overwrite", "--json"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        res = subprocess.run(full, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if res.returncode != 0:
            sys.exit(f"{name} failed ({res.returncode}):\n{res.stderr[-3000:]}")
        summary = json.loads(res.stdout)
        check = summary.get("resolution_check") or {}
        out["runs"][name] = {
            "command": "spherepde " + " ".join(cmd) + " --json", "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "loadavg_start": load0, "loadavg_end": os.getloadavg()[0],
            "betas": [r["beta"] for r in summary["runs"]], "amr_pole": summary.get("amr_pole"),
            "check": {k: check.get(k) for k in ("beta", "nlat", "max_relative_change", "resolved",
                                                 "switch_time", "switch_time_change", "worst")}}
        print(name, f"wall {wall:.0f} s", json.dumps(out["runs"][name]["check"]), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
