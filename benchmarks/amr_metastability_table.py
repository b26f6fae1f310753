"""The accuracy/cost table of docs/amr.md from the JSON files of bench_amr_metastability.py:
energy error against the particle reference at t = 8, 10, 12 (with the reference's ± SE), CPU
and wall seconds of the stepping to t = 12, largest leaf count.  Prints it, and with ``--out``
writes it (``markdown_table``, with its inputs) to the data file docs/amr.md renders it from.

``same_accuracy``: the fixed grid at the accuracy of each adaptive run, from the ``ffsl-ppm``
runs of the same files.  The error of a run is max_t |relative energy error| over t = 8, 10, 12;
least squares on the ffsl runs fit err ≈ C·nlat^(−p) and CPU ≈ D·nlat^q, and give the nlat at
which ffsl-ppm would reach the adaptive run's error and its CPU seconds there.  That nlat lies
beyond the measured ones, so it is an extrapolation along the fitted power laws (stated as such
in docs/amr.md), not a run.

    python benchmarks/amr_metastability_table.py benchmarks/results/amr_metastability_*.json \
        --out docs/data/amr_metastability_table.json
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

TIMES = (8.0, 10.0, 12.0)


def _reached(paths: list[str]) -> dict:
    """{spec: (run, its outputs by time)} of the runs in ``paths`` compared with the reference
    at every one of :data:`TIMES`."""
    out = {}
    for p in paths:
        for spec, r in json.load(open(p))["runs"].items():
            by_t = {s["t"]: s for s in r["series"]}
            if all(t in by_t and "rel_error" in by_t[t] for t in TIMES):
                out[spec] = (r, by_t)
    return out


def table(paths: list[str]) -> str:
    """The Markdown table of the runs in ``paths`` that reached t = 12, cheapest first."""
    ref = None
    rows = []
    for r, by_t in _reached(paths).values():
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


def _fit(x, y) -> tuple[float, float]:
    """(slope, intercept) of log y against log x by least squares."""
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(intercept)


def same_accuracy(paths: list[str]) -> dict:
    """For every adaptive run of ``paths`` that reached t = 12: its error and CPU seconds, and the
    ``ffsl-ppm`` nlat and CPU seconds at the same error from the fitted power laws (module
    docstring).  Needs ≥ 2 ffsl runs at different nlat; {} otherwise."""
    reached = _reached(paths)
    runs = {spec: r for spec, (r, _) in reached.items()}
    err = {spec: max(abs(by_t[t]["rel_error"]) for t in TIMES) for spec, (_, by_t) in reached.items()}
    amr = [spec for spec, r in runs.items() if r["scheme"] == "amr-fv"]
    ffsl = [spec for spec, r in runs.items() if r["scheme"] != "amr-fv"]
    if len({runs[s]["nlat"] for s in ffsl}) < 2:
        return {}
    nlat = np.array([runs[s]["nlat"] for s in ffsl], float)
    slope_e, c_e = _fit(nlat, [err[s] for s in ffsl])
    slope_c, c_c = _fit(nlat, [runs[s]["cpu_s"] for s in ffsl])
    out = {"error": "max over t = 8, 10, 12 of |e^(-beta)E_beta / reference - 1|",
           "ffsl_runs": {s: {"nlat": runs[s]["nlat"], "error": err[s], "cpu_s": runs[s]["cpu_s"]} for s in ffsl},
           "ffsl_error_order": -slope_e, "ffsl_cpu_exponent": slope_c, "amr": []}
    for s in amr:
        n_same = math.exp((math.log(err[s]) - c_e) / slope_e)
        cpu_same = math.exp(c_c + slope_c * math.log(n_same))
        out["amr"].append({"spec": s, "error": err[s], "cpu_s": runs[s]["cpu_s"], "ffsl_nlat_same_error": n_same,
                         "ffsl_cpu_s_same_error": cpu_same, "cpu_ratio": cpu_same / runs[s]["cpu_s"]})
    return out


def main(argv: list[str]) -> None:
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        out, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    text = table(argv)
    print(text)
    if out is not None:
        data = {"benchmark": "benchmarks/amr_metastability_table.py",
                "inputs": [Path(p).as_posix() for p in argv], "markdown_table": text,
                "same_accuracy": same_accuracy(argv)}
        Path(out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
