"""Collect the decomposition runs (README.md): each variant against R0 and against R1 with
``spherepde validate resolution``'s comparison (:func:`spherepde.runs.compare.compare_runs`: the
largest change of every diagnostic over the output times, relative to max(|second run|, 0.05),
and the time of the largest), and per run what ../w2_change/pairs.py collects (min W₂, leaves,
CPU user + sys from runs/NAME.log, separatrix mass every 2 time units) plus the outer steps,
amr's (sub-)steps and finest level (runs/NAME/summary.json), the split mass m_split and the
weight a of Π#ρ₀, and W₂ at the last output recomputed
with R0's and with R1's a (``w2_end_a_R0``, ``w2_end_a_R1``: how much of a change is the weight) and with the
exact a of the cosine ρ₀ (``pi_rho0_a_exact``, ``w2_end_a_exact``).

    python3 pairs.py decompose.json R0 R1 T S B ... [--pair RUN:REFINED ...]   (folders under runs/)

``--pair RUN:REFINED``: also RUN against its own refined run (a candidate's ``--refine 1.5`` pair).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import xarray as xr

from spherepde.runs.build import build
from spherepde.runs.compare import compare_runs
from spherepde.runs.config import RunConfig
from spherepde.validation.metrics import w2_two_point

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "w2_change"))
from pairs import _run  # noqa: E402

QUANTITIES = ("energy", "w2_projection", "dist_eigenspace", "dist_eigenspace_V")


def _info(name: str) -> dict:
    d = HERE / "runs" / name
    out = _run(str(d))
    out.pop("config")
    summary = json.loads((d / "summary.json").read_text())
    dens, cfg = summary["density"], summary["config"]
    rep = cfg["representations"]["density"]
    nlat = cfg["grid"]["nlat"]
    base = rep.get("base_nlat") or nlat
    h = math.pi / (base * 2 ** rep["max_level"])
    with xr.open_dataset(d / "run.nc") as ds:
        config = RunConfig.from_dict(json.loads(ds.attrs["config_json"]))
        leaves_t, times = ds["density_leaves"].values, ds["time"].values
        last = leaves_t[-1]
    model = build(config)
    proj = next(m for m in model.measures if m.name == "w2_projection")  # Π#ρ₀ = a δ_e + (1 − a) δ_−e
    a = proj.a
    x, w = model.density_rep.stepper.measure(last)
    out["_end"] = (x, w, proj.e)  # for W₂ at t_end against another run's a (main)
    ini = config.initial  # ρ₀ ∝ 1 + c⟨x, â⟩: ρ₀(⟨x, e⟩ > 0) = ½ + c⟨â, e⟩/4 exactly
    if ini.kind == "cosine":
        d_hat = np.asarray(ini.direction, float) / np.linalg.norm(ini.direction)
        a_exact = 0.5 + ini.amplitude * float(d_hat @ proj.e) / 4
        series = [w2_two_point(*model.density_rep.stepper.measure(s), proj.e, a_exact) for s in leaves_t]
        out.update(pi_rho0_a_exact=a_exact, w2_end_a_exact=float(series[-1]),
                   w2_a_exact=[float(v) for v in series], times=[float(t) for t in times])
    out.update(outer_dt=summary["dt"], outer_steps=dens["steps"], amr_steps=dens.get("amr_steps"),
               finest_level=dens.get("finest_level"), grid_nlat=nlat, base_nlat=base,
               max_level=rep["max_level"], mass_per_cell=rep["mass_per_cell"], h_finest=h,
               m_split=rep["mass_per_cell"] * h * h, pi_rho0_a=float(a))
    return out


def _compare(a: str, b: str, runs: dict) -> dict:
    """compare_runs(a, b) per quantity, and ``w2_a_exact``: the same for W₂ to Π#ρ₀ with the
    exact weight a of ρ₀ in both runs (not each output grid's estimate)."""
    check = compare_runs(HERE / "runs" / a / "run.nc", HERE / "runs" / b / "run.nc")
    out = {q: {"change": check["per_quantity"][q]["change"], "t": check["per_quantity"][q]["t"]}
           for q in QUANTITIES if q in check["per_quantity"]}
    if "w2_a_exact" in runs[a] and "w2_a_exact" in runs[b]:
        u, v = np.array(runs[a]["w2_a_exact"]), np.array(runs[b]["w2_a_exact"])
        rel = np.abs(u - v) / np.maximum(np.abs(v), 0.05)
        i = int(np.argmax(rel))
        out["w2_a_exact"] = {"change": float(rel[i]), "t": runs[b]["times"][i]}
    return out


def main(argv: list[str]) -> None:
    out, rest = argv[0], argv[1:]
    specs = [rest[i + 1] for i, a in enumerate(rest) if a == "--pair"]
    names = [a for i, a in enumerate(rest) if a != "--pair" and (i == 0 or rest[i - 1] != "--pair")]
    runs = {n: _info(n) for n in names}
    for n, r in runs.items():  # W₂ at t_end to a δ_e + (1 − a) δ_−e with R0's and R1's a
        x, w, e = r.pop("_end")
        r.update({f"w2_end_a_{ref}": float(w2_two_point(x, w, e, runs[ref]["pi_rho0_a"]))
                  for ref in ("R0", "R1") if ref in runs})
    vs = {ref: {n: _compare(n, ref, runs) for n in names if n != ref} for ref in ("R0", "R1") if ref in names}
    for ref, rows in vs.items():
        for n, row in rows.items():
            print(f"{n} vs {ref}:", {q: f"{v['change']:.4f}@{v['t']:g}" for q, v in row.items()}, flush=True)
    pairs = {}
    for spec in specs:
        a, b = spec.split(":")
        pairs[f"{a}:{b}"] = {"runs": [a, b], "change": _compare(a, b, runs)}
        print(f"{a} vs {b}:", {q: f"{v['change']:.4f}@{v['t']:g}" for q, v in pairs[f"{a}:{b}"]["change"].items()})
    json.dump({"script": "docs/prototypes/issue20/decompose/pairs.py", "runs": runs,
               "vs_R0": vs.get("R0", {}), "vs_R1": vs.get("R1", {}), "pairs": pairs},
              open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
