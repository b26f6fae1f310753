"""Markdown tables of tail.json (analyze.py's output) for README.md.

    python3 docs/prototypes/issue20/tail/table.py docs/prototypes/issue20/tail/tail.json
"""
from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    d = json.loads(open(path).read())
    runs = d["runs"]
    print("| run | β | base | max_level | polar_merge | variant | t_end | CPU s | leaves max |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in runs.items():
        cpu = "–" if r["cpu_s"] is None else f"{r['cpu_s']:.0f}"
        pm = r.get("polar_merge") or "–"
        print(f"| {name} | {r['beta']:g} | {r['base_nlat']} | {r['max_level']} | {pm} | "
              f"{r['proto'] or '–'} | {r['times'][-1]:g} | {cpu} | {r['leaves_max']} |")
    print()
    print("| pair (run → refined/varied) | max ΔW₂ (t) | max Δdist (t) | max ΔE | ΔW₂² of [0,.5) / all, at max |")
    print("|---|---|---|---|---|")
    for key, c in d["pairs"].items():
        m = c["own"]["max"]
        row = next(r for r in c["own"]["rows"] if r["t"] == m["w2"]["t"])
        tail = row["d_own_cost"]["[0,.1)"] + row["d_own_cost"]["[.1,.5)"]
        print(f"| {key} | {m['w2']['change']:.1%} ({m['w2']['t']:g}) | "
              f"{m['dist']['change']:.1%} ({m['dist']['t']:g}) | "
              f"{m['energy']['change']:.1%} | {tail:+.1e} / {row['d_w2sq']:+.1e} |")
    for name, r in d.get("beta100_vs_particles", {}).items():
        s = r["summary"]
        print(f"\n{name} vs particles (N = 20 000, 8 seeds): " + "; ".join(
            f"{q} " + ", ".join(f"{w} {v['max_relative']:.1%} ({v['max_in_se']:.1f} SE)" for w, v in s[q].items())
            for q in s))


if __name__ == "__main__":
    main(sys.argv[1])
