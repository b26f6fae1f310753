"""Measure docs/paper2.md's sync-path table: ``spherepde validate sync-path --json`` with its
defaults (nlat 48, t_end 6, seed 0, realisation 0) for both density schemes, and the default run at
nlat 96 (for the reference's E_β on a finer quadrature), into ``docs/data/sync_path.json``.

    python scripts/paper2_sync_path.py [--out docs/data/sync_path.json]
    python scripts/paper2_sync_path.py --refinement   # docs/data/sync_path_refinement.json

``--refinement`` instead runs ``ffsl-ppm`` to t = 0.5 at nlat 16 / 32 / 48 (what
tests/experiments/test_sync_path.py pins: the ratio density / reference converging to 1) and
stores |ratio − 1| at t = 0.5 for each.

Each run is the command line itself (a subprocess), so the numbers are what a user gets. The
derived values the page quotes (the ratio at t = 1.5 and t = 6, the relative change of the
reference's E_β at t = 6 on the finer quadrature) are computed here and stored beside the runs.
Run it from the repository root; each run's wall seconds and load are stored (the nlat-96 run is
the longest: 1647 s at load 10-17 when first measured).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sync_path(*args: str) -> dict:
    cmd = [sys.executable, "-m", "spherepde", "validate", "sync-path", "--json", *args]
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    result["command"] = "python3 -m spherepde validate sync-path --json " + " ".join(args)
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    result["load_after"] = list(os.getloadavg())
    return result


def at(result: dict, key: str, t: float) -> float:
    i = min(range(len(result["times"])), key=lambda j: abs(result["times"][j] - t))
    return result[key][i]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--refinement", action="store_true")
    args = ap.parse_args(argv)
    if args.refinement:
        rows = []
        for nlat in (16, 32, 48):
            r = sync_path("--scheme", "ffsl-ppm", "--nlat", str(nlat), "--t-end", "0.5")
            rows.append({"nlat": nlat, "command": r["command"], "ratio_t0_5": r["ratio"][-1],
                         "abs_ratio_minus_1": abs(r["ratio"][-1] - 1)})
        out = args.out or str(ROOT / "docs" / "data" / "sync_path_refinement.json")
        Path(out).write_text(json.dumps({"script": "scripts/paper2_sync_path.py --refinement",
                                         "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                         "rows": rows}, indent=1) + "\n")
        return 0
    args.out = args.out or str(ROOT / "docs" / "data" / "sync_path.json")
    data: dict = {"script": "scripts/paper2_sync_path.py",
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for scheme in ("lagrangian-remap", "ffsl-ppm"):
        r = sync_path("--scheme", scheme)
        r["ratio_t1_5"] = at(r, "ratio", 1.5)
        r["ratio_t6"] = at(r, "ratio", 6.0)
        data[scheme.replace("-", "_")] = r
        print(scheme, r["wall_seconds"], "s", file=sys.stderr)
    fine = sync_path("--scheme", "lagrangian-remap", "--nlat", "96")
    coarse = data["lagrangian_remap"]
    data["fine_quadrature"] = {
        "nlat": 96, "command": fine["command"], "wall_seconds": fine["wall_seconds"],
        "energy_reference_t6": at(fine, "energy_reference", 6.0),
        "relative_change_reference_t6": abs(at(fine, "energy_reference", 6.0)
                                            / at(coarse, "energy_reference", 6.0) - 1)}
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
