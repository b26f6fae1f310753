"""Put the S² density part measured on the current Brownian path into the synchronization
experiment's summary, and redraw its figure.

    python scripts/paper2_sync_merge.py [--check]

``docs/data/synchronization.json`` is the summary of ``spherepde experiment synchronization``:
particle cases, Lyapunov pairs and the S² ``density`` part.  Only the density part uses the
grid's Brownian path (issue 22.10 made it horizon-free); ``scripts/paper2_sync_density.py`` re-runs
that part alone (the experiment's own ``synchronization._sync_density``, with the configuration
stored in the summary) into ``docs/data/synchronization_density.json``.  This script checks that
the two files hold the same density configuration, replaces the summary's ``density`` by that
file's, records where it came from (``density_from``), and redraws ``docs/figures/synchronization.png``
with the experiment's ``plot_synchronization`` from the merged summary (the figure is drawn from
the summary alone).  ``--check`` exits 1 when the summary's ``density`` differs from that file's.
Seconds; run it from the repository root after ``scripts/paper2_sync_density.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = ROOT / "docs" / "data" / "synchronization.json"
DENSITY = ROOT / "docs" / "data" / "synchronization_density.json"
FIGURE = ROOT / "docs" / "figures" / "synchronization.png"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether the summary is merged")
    args = ap.parse_args(argv)

    summary = json.loads(SUMMARY.read_text())
    part = json.loads(DENSITY.read_text())
    config = summary["config"]
    differ = {k: (config.get(k), v) for k, v in part["config"].items()
              if k != "workers" and config.get(k) != v}
    if differ:
        raise SystemExit(f"{DENSITY.name} was run with another density configuration: {differ}")
    if args.check:
        same = summary["density"] == part["density"]
        print("merged" if same else f"{SUMMARY.name}'s density is not {DENSITY.name}'s")
        return 0 if same else 1

    from spherepde.experiments.synchronization import plot_synchronization

    summary["density"] = part["density"]
    summary["density_from"] = {
        "data": str(DENSITY.relative_to(ROOT)), "script": part["script"],
        "regenerated": part["regenerated"],
        "merged_by": "scripts/paper2_sync_merge.py",
        "merged": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "note": "the density part on the current (horizon-free) Brownian path; the particle cases "
                "and Lyapunov pairs (exact Gaussian increments at the tokens) are the experiment's run"}
    summary["plot"] = str(FIGURE.relative_to(ROOT))
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
    plot_synchronization(summary, FIGURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
