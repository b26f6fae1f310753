"""The tables of README.md from hybrid.json, attention_refine.json and attention_share.json.

    python3 table.py
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
TIMES = (10.0, 14.0, 16.0, 17.0, 18.0)


def _rows(run):
    return {round(r["t"], 6): r for r in run["rows"]}


def main() -> None:
    runs = []
    for r in json.loads((HERE / "hybrid.json").read_text())["runs"]:
        if r.get("amplitude", 0.5) == 0.5 and not r.get("eps"):
            runs.append(("amr" if r["conv"] is None else f"amr + points (conv {r['conv']:g})", r))
    for r in json.loads((HERE / "attention_refine.json").read_text())["runs"]:
        name = {"attention": "amr, attention-refined", "hybrid-attention": "amr + points, attention-refined",
                "mass": "amr"}[r["mode"]]
        if r.get("r_factor", 1.0) != 1.0:
            name += f" (R × {r['r_factor']:g})"
        runs.append((name, r))
    print("| representation | base:levels | CPU s | " + " | ".join(f"t = {t:g}" for t in TIMES) + " |")
    print("|---|---|---|" + "---|" * len(TIMES))
    for name, r in sorted(runs, key=lambda p: (p[0], p[1]["nlat0"] * 2 ** p[1]["lmax"], p[1]["nlat0"])):
        rows = _rows(r)
        cells = [f"{rows[t]['energy']:.3f} / {rows[t]['dist_V']:.3f}" if t in rows else "–" for t in TIMES]
        print(f"| {name} | {r['nlat0']}:{r['lmax']} | {r['cpu_s']:.0f} | " + " | ".join(cells) + " |")
    print()
    runs = json.loads((HERE / "hybrid.json").read_text())["runs"]
    base = next(r for r in runs if r["conv"] is None and r["nlat0"] == 24 and r["lmax"] == 2
                and r.get("amplitude", 0.5) == 0.5 and not r.get("eps"))
    print("| perturbation of ρ₀ (relative size ε) | " + " | ".join(f"t = {t:g}" for t in TIMES) + " |")
    print("|---|" + "---|" * len(TIMES))
    for r in runs:
        a, e = r.get("amplitude", 0.5), r.get("eps", 0.0)
        if r is base or r["conv"] is not None or r["nlat0"] != 24:
            continue
        eps, what = (e, f"generic, ε = {e:g}") if e else (a / 0.5 - 1, f"amplitude {a:g} (ε = {a / 0.5 - 1:g})")
        rb, rp = _rows(base), _rows(r)
        cells = [f"{(rp[t]['energy'] / rb[t]['energy'] - 1) / eps:+.1f} / "
                 f"{(rp[t]['dist_V'] / rb[t]['dist_V'] - 1) / eps:+.1f}" for t in TIMES]
        print(f"| {what} | " + " | ".join(cells) + " |")
    print()
    share = json.loads((HERE / "attention_share.json").read_text())["rows"]
    print("| t | leaves | mass on coarser leaves | attention they receive | mass on leaves < 1e-4 "
          "| attention they receive |")
    print("|---|---|---|---|---|---|")
    for s in share:
        print(f"| {s['t']:g} | {s['leaves']} | {s['coarse_mass']:.1%} | {s['coarse_attention']:.1%} | "
              f"{s['light_mass']:.1%} | {s['light_attention']:.1%} |")


if __name__ == "__main__":
    main()
