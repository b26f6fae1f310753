"""Measure ``spherepde validate sync-path --scheme amr`` (issue 20, item 5): the noise-only
collapse of the adaptive density against the reference (the weighted cell centres of ρ₀ on the
nlat Gauss grid, moved by the particle SDE on the same Brownian path), one case per call, into
one JSON per case under docs/data/amr_sync_path/.

    python scripts/amr_sync_path.py NAME [validate sync-path options...]

e.g. ``python scripts/amr_sync_path.py one_cluster --t-end 8 --max-level 4``.  Each run is the
command line itself (a subprocess), one thread, so the numbers are what a user gets; the wall
seconds and the load are stored beside the result.  A run longer than LIMIT seconds is
interrupted like Ctrl-C: the JSON then holds the outputs both representations reached.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: wall seconds a run may take; then it is interrupted (Ctrl-C) and keeps the outputs both the
#: density and the reference reached ("interrupted": true in the JSON)
LIMIT = float(os.environ.get("AMR_SYNC_PATH_LIMIT", "560"))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name, opts = argv[0], argv[1:]
    cmd = [sys.executable, "-m", "spherepde", "validate", "sync-path", "--json", "--scheme", "amr", *opts]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        out, err = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:  # Ctrl-C: the command prints the outputs both runs reached
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
    if proc.returncode not in (0, 130):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    result = json.loads(out)
    result["limit_seconds"] = LIMIT
    result["command"] = "python3 -m spherepde validate sync-path --json --scheme amr " + " ".join(opts)
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    result["load_after"] = list(os.getloadavg())
    result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ratio = result["ratio"]
    result["ratio_t_end"] = ratio[-1]
    result["max_abs_ratio_minus_1"] = max(abs(r - 1) for r in ratio)
    folder = ROOT / "docs" / "data" / "amr_sync_path"
    folder.mkdir(parents=True, exist_ok=True)
    result = {"script": "scripts/amr_sync_path.py", **result}
    (folder / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(name, result["wall_seconds"], "s, decades", round(result["decades"], 3), "ratio",
          [round(r, 4) for r in result["ratio_range"]], file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
