"""Regenerate docs/data/transport_suite.json and the table of docs/transport-validation.md.

    PYTHONPATH=. python scripts/transport_suite.py [--nlat 60 120] [--polar auto]

Runs ``run_transport`` (what ``spherepde validate transport --json`` prints) for the standard
cases at each nlat and prints the markdown table rows; about 15 minutes on 2 cores. The table of
docs/transport-validation.md is rendered from the file by scripts/docs_numbers.py.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from spherepde.experiments.transport import TransportConfig, run_transport

HALF_PI = math.pi / 2
ALPHA_LABEL = {0.0: "0", 0.05: "0.05", HALF_PI - 0.05: "π/2−0.05", HALF_PI: "π/2"}
RUNS = ([("williamson1", "cosine-bell", "positive", a) for a in (0.0, 0.05, HALF_PI - 0.05, HALF_PI)]
        + [(c, "cosine-bells", "positive", 0.0) for c in ("nl-case1", "nl-case2", "nl-case3", "nl-case4")]
        + [("nl-case4", "slotted-cylinders", "positive", 0.0),
           ("l2012-divergent", "gaussian-hills", "positive", 0.0),
           ("l2012-divergent", "cosine-bells", "positive", 0.0)]
        + [("nl-case4", "gaussian-hills", lim, 0.0) for lim in ("none", "positive", "monotone")])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nlat", type=int, nargs="+", default=[60, 120])
    ap.add_argument("--polar", default="auto")
    ap.add_argument("--output", default="docs/data/transport_suite.json")
    args = ap.parse_args()
    rows = []
    for nlat in args.nlat:
        for case, field, limiter, alpha in RUNS:
            r = run_transport(TransportConfig(case=case, field=field, nlat=nlat, alpha=alpha,
                                              limiter=limiter, polar=args.polar), progress=False)
            rows.append({k: v for k, v in r.items() if k != "config"})
            print(f"| {case} | {field} | {limiter} | {r['polar']} | {ALPHA_LABEL[alpha]} | {nlat} | "
                  f"{r['steps']} | {r['l1']:.3e} | {r['l2']:.3e} | {r['linf']:.3e} | {r['lmax']:.2e} | "
                  f"{r['lmin']:.2e} | {r['mass_error']:.1e} | {r['min_value']:.2e} |", flush=True)
    data = {"script": "scripts/transport_suite.py", "command": "PYTHONPATH=. python scripts/transport_suite.py",
            "runs": rows}
    Path(args.output).write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
