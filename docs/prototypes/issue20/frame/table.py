"""The README's tables from the JSON files of this folder: ``python table.py``."""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMES = [2.0 + 0.25 * k for k in range(13)]  # 2 … 5


def fmt(r):
    return "—" if r is None else (f"{r:.4f}" if r < 10 else f"{r:.1f}")


def case(name: str, label: str) -> None:
    d = json.loads((HERE / f"{name}.json").read_text())
    p = d["plain"]
    plain = {round(t, 9): r for t, r in zip(p["times"], json.loads((HERE.parents[3] / p["file"]).read_text())["ratio"])}
    frame = {round(t, 9): r for t, r in zip(d["times"], d["ratio"])}
    print(f"### {label} (`{name}.json`)\n")
    print("| t | ratio plain | ratio frame |\n|---|---|---|")
    for t in TIMES:
        if round(t, 9) in plain or round(t, 9) in frame:
            print(f"| {t:g} | {fmt(plain.get(round(t, 9)))} | {fmt(frame.get(round(t, 9)))} |")
    f = d["frame"]
    print("\n| | plain | frame |\n|---|---|---|")
    print(f"| last t in band (decades) | {p['last_time_in_band']:g} ({p['decades_in_band']:.2f}) | "
          f"{d['last_time_in_band']:g} ({d['decades_in_band']:.2f}) |")
    print(f"| reached t (interrupted) | {p['times'][-1]:g} ({p['interrupted']}) | "
          f"{d['times'][-1]:g} ({d['interrupted']}) |")
    print(f"| sub-steps | {p['substeps']} | {d['substeps']} |")
    print(f"| density step s | {p['seconds']['density']:.0f} | {d['seconds']['density']:.0f} |")
    print(f"| frame run CPU s / wall s | | {d['cpu_seconds']:.0f} / {d['wall_seconds']:.0f} |")
    print(f"| leaves at the end | {p['leaves']} | {d['leaves']} |")
    print(f"| frame angle Σ|ω|h, net | | {f['angle_path']:.1f} rad, {f['angle_net']:.2f} rad |")
    print(f"| noise evaluations, s | | {f['noise_evaluations']}, {f['noise_seconds']:.0f} |")
    print(f"| mass error, min leaf mass | | {d['mass_error']:.1e}, {d['min_density']:.1e} |")
    if "bound_leaf_levels" in f:
        print(f"| sub-steps bound by a leaf of level | | {f['bound_leaf_levels']} |")
    print()


if __name__ == "__main__":
    case("one_cluster", "One cluster, max_level 4")
    case("one_cluster_omega_step", "One cluster, max_level 4, ω once per run step")
    case("one_cluster_regrid1", "One cluster, max_level 4, adapt after every sub-step")
    case("two_clusters", "Two clusters, max_level 4")
    case("one_cluster_level5", "One cluster, max_level 5 (plain column: max_level 4)")
