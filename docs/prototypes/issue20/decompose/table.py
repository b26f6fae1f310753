"""The README's table from decompose.json: per variant, the largest change against R0 and
against R1 of each quantity (% @ its time), CPU s (user + sys), amr (sub-)steps, leaves at
the end; and the candidates' own --refine 1.5 pairs.

    python3 table.py decompose.json
"""
from __future__ import annotations

import json
import sys

Q = (("energy", "E_β"), ("w2_projection", "W₂"), ("dist_eigenspace", "dist E(VBᵀ)"),
     ("dist_eigenspace_V", "dist E(V)"), ("w2_a_exact", "W₂ (exact a)"))


def _cell(row: dict | None, q: str) -> str:
    if row is None:
        return "–"
    if q not in row:
        return "–"
    v = row[q]
    return f"{100 * v['change']:.2f} @ {v['t']:g}"


def main(path: str) -> None:
    d = json.load(open(path))
    runs, vs0, vs1 = d["runs"], d["vs_R0"], d["vs_R1"]
    head = " | ".join(f"{name} vs R0 | vs R1" for _, name in Q)
    print(f"| run | {head} | CPU s | amr steps | leaves (end) |")
    print("|---" * (2 + 2 * len(Q) + 2) + "|")
    for n, r in runs.items():
        cells = " | ".join(f"{_cell(vs0.get(n), q)} | {_cell(vs1.get(n), q)}" for q, _ in Q)
        cpu = "–" if r["cpu_s"] is None else f"{r['cpu_s']:.0f}"
        print(f"| {n} | {cells} | {cpu} | {r['amr_steps']} | {r['leaves_end']} |")
    if d.get("pairs"):
        print()
        print("| pair (run → its --refine 1.5) | " + " | ".join(name for _, name in Q) + " | CPU s |")
        print("|---" * (2 + len(Q)) + "|")
        for name, p in d["pairs"].items():
            a, b = p["runs"]
            cpu = " + ".join("–" if runs[x]["cpu_s"] is None else f"{runs[x]['cpu_s']:.0f}" for x in (a, b))
            print(f"| {a} → {b} | " + " | ".join(_cell(p["change"], q) for q, _ in Q) + f" | {cpu} |")


if __name__ == "__main__":
    main(sys.argv[1])
