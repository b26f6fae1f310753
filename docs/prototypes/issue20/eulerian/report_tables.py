"""Compact markdown tables for the report, from data/summary_beta{B}.json (compare.py) and
data/transport_rotation_*.json.  python report_tables.py BETA [TIMES...]"""
from __future__ import annotations

import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"


def main():
    beta = int(sys.argv[1])
    times = [int(t) for t in sys.argv[2:]] or [4, 8, 10, 12, 16]
    s = json.loads((DATA / f"summary_beta{beta}.json").read_text())
    ref = s["reference"]
    print(f"reference {ref['file']} N={ref['N']} ({ref['n_seeds']} seeds)")
    print("| run | h | max/end cells | CPU s | wall s | RSS MB | max|Δmass| | min mass | "
          + " | ".join(f"E t={t}" for t in times) + " | " + " | ".join(f"W2 t={t}" for t in times)
          + " | W2min (t) | exit |")
    for r in s["runs"]:
        rows = {row["t"]: row for row in r["rows"]}
        name = (f"ffsl nlat{r['nlat']}" if r["scheme"] == "ffsl-ppm"
                else f"amr {r['nlat0']},{r['lmax']},{r['file'].split('_k')[1].split('_')[0]},{r['limiter']}")
        e = [f"{100 * rows[t]['energy']['rel_error']:+.1f}" if t in rows else "–" for t in times]
        w = [f"{100 * rows[t]['w2_projection']['rel_error']:+.1f}" if t in rows else "–" for t in times]
        sc = r["scalars"]
        cpu = f"{r['cpu_s']:.0f}" if r.get("cpu_s") else "–"
        rss = f"{r['max_rss_MB']:.0f}" if r.get("max_rss_MB") else "–"
        print(f"| {name} (t≤{r['t_reached']:g}) | {r['h_finest']:.4f} | {r['max_cells']}/{r['final_cells']} | {cpu} | "
              f"{r['wall_s']:.0f} | {rss} | {r['max_abs_mass_error']:.1e} | {r['min_mass']:.0e} | "
              + " | ".join(e) + " | " + " | ".join(w)
              + f" | {sc['w2_min']:.4f} ({sc['t_w2_min']:g}) | {sc['exit_time']:.2f} |")
    print("reference values:", {t: round(next(row for row in s["runs"][0]["rows"] if row["t"] == t)["energy"]["ref"], 4)
                                for t in times if any(row["t"] == t for row in s["runs"][0]["rows"])})
    for lim in ("mc", "minmod"):
        p = DATA / f"transport_rotation_{lim}.json"
        if p.exists():
            d = json.loads(p.read_text())
            for case in ("equator", "pole"):
                c = d[case]
                print(f"transport {lim} {case}: L1 " + ", ".join(f"h={x['h_finest']:.4f}: {x['l1_cell_average_error']:.3f}"
                                                           for x in c["runs"]) + f"; fitted order {c['fitted_order']:.2f}")


if __name__ == "__main__":
    main()
