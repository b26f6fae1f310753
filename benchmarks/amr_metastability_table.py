"""The accuracy/cost table of docs/amr.md from the JSON files of bench_amr_metastability.py:
energy error against the particle reference at t = 8, 10, 12 (with the reference's ± SE), CPU
and wall seconds of the stepping to t = 12, largest leaf count.  Prints it, and with ``--out``
writes it (``markdown_table``, with its inputs) to the data file docs/amr.md renders it from.

    python benchmarks/amr_metastability_table.py benchmarks/results/amr_metastability_*.json \
        --out docs/data/amr_metastability_table.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

TIMES = (8.0, 10.0, 12.0)


def table(paths: list[str]) -> str:
    """The Markdown table of the runs in ``paths`` that reached t = 12, cheapest first."""
    runs = {}
    for p in paths:
        runs.update(json.load(open(p))["runs"])
    ref = None
    rows = []
    for spec, r in runs.items():
        by_t = {s["t"]: s for s in r["series"]}
        if not all(t in by_t and "rel_error" in by_t[t] for t in TIMES):
            continue
        ref = ref or {t: (by_t[t]["ref_energy"], 100 * by_t[t]["rel_stderr"]) for t in TIMES}
        name = (f"amr nlat0 {r['nlat0']}, lmax {r['lmax']}, mass_per_cell {r['mass_per_cell']:g}"
                if r["scheme"] == "amr-fv" else f"ffsl-ppm nlat {r['nlat']}")
        errs = " | ".join(f"{100 * by_t[t]['rel_error']:+.1f} %" for t in TIMES)
        mass = max(abs(s["mass_error"]) for s in r["series"])
        rows.append((r["cpu_s"], f"| {name} | {errs} | {r['cpu_s']:.0f} | {r['wall_s']:.0f} | "
                                 f"{r['max_cells']} | {mass:.1e} |"))
    if ref is None:
        sys.exit("no run reached t = 12")
    head = " | ".join(f"t = {t:g} (ref {ref[t][0]:.4f} ± {ref[t][1]:.2f} %)" for t in TIMES)
    return "\n".join([f"| configuration | {head} | CPU s | wall s | cells (max) | max mass error |",
                      "|---|---|---|---|---|---|---|---|", *(line for _, line in sorted(rows))])


def main(argv: list[str]) -> None:
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        out, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    text = table(argv)
    print(text)
    if out is not None:
        data = {"benchmark": "benchmarks/amr_metastability_table.py",
                "inputs": [Path(p).as_posix() for p in argv], "markdown_table": text}
        Path(out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
