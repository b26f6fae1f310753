"""The README's tables from the JSON files of this folder: ``python table.py``."""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
TIMES = [2.0 + 0.25 * k for k in range(13)]  # 2 … 5


def fmt(r):
    return "—" if r is None else (f"{r:.4f}" if r < 10 else f"{r:.1f}")


def load(name):
    return json.loads((HERE / f"{name}.json").read_text())


def table(plain_file: str, cases: list[tuple[str, str]]) -> None:
    """Ratios at t = 2 … 5 of the stored plain run and of each frame run, then one row per summary."""
    p = json.loads((ROOT / plain_file).read_text())
    ds = [load(n) for n, _ in cases]
    cols = [dict(zip((round(t, 9) for t in p["times"]), p["ratio"]))]
    cols += [dict(zip((round(t, 9) for t in d["times"]), d["ratio"])) for d in ds]
    print("| t | plain (`" + plain_file.split("/")[-1] + "`) | " + " | ".join(f"{lab} (`{n}.json`)" for n, lab in cases)
          + " |")
    print("|---" * (len(cases) + 2) + "|")
    for t in TIMES:
        print(f"| {t:g} | " + " | ".join(fmt(c.get(round(t, 9))) for c in cols) + " |")
    pin = ds[0]["plain"]

    def row(label, plain, f):
        print(f"| {label} | {plain} | " + " | ".join(f(d) for d in ds) + " |")

    row("reached t", f"{p['times'][-1]:g}" + (" (limit)" if p.get("interrupted") else ""),
        lambda d: f"{d['times'][-1]:g}" + (" (limit)" if d["interrupted"] else ""))
    row("ratio at the last t", fmt(p["ratio"][-1]), lambda d: fmt(d["ratio"][-1]))
    row("last t in band", f"{pin['last_time_in_band']:g}", lambda d: f"{d['last_time_in_band']:g}")
    row("decades in band", f"{pin['decades_in_band']:.2f}", lambda d: f"{d['decades_in_band']:.2f}")
    row("sub-steps", f"{p['amr_steps']}", lambda d: f"{d['substeps']}")
    row("density step s", f"{p['seconds']['density']:.0f}", lambda d: f"{d['seconds']['density']:.0f}")
    row("CPU s / wall s (whole run)", f"— / {p['wall_seconds']:.0f}",
        lambda d: f"{d['cpu_seconds']:.0f} / {d['wall_seconds']:.0f}")
    row("leaves at the end (finest level)", f"{p['leaves']} ({p['finest_level']})",
        lambda d: f"{d['leaves']} ({d['finest_level']})")
    row("noise evaluations (s)", "—",
        lambda d: f"{d['frame']['noise_evaluations']} ({d['frame']['noise_seconds']:.0f})")
    row("frame angle Σ|ω|h / net (rad)", "—",
        lambda d: f"{d['frame']['angle_path']:.1f} / {d['frame']['angle_net']:.2f}")
    row("mass error", f"{p['mass_error']:.1e}", lambda d: f"{d['mass_error']:.1e}")
    row("min leaf mass", f"{p['min_density']:.1e}", lambda d: f"{d['min_density']:.1e}")
    print()


if __name__ == "__main__":
    one = "docs/data/amr_sync_path/one_cluster.json"
    print("### One cluster\n")
    table(one, [("one_cluster", "frame L4"), ("one_cluster_level5_courant09", "frame L5 c0.9"),
                ("one_cluster_level6_mpc40_courant09", "frame L6 mpc40 c0.9"),
                ("one_cluster_level7_mpc160_courant09", "frame L7 mpc160 c0.9")])
    print("### One cluster, variants at level 4 and 5\n")
    table(one, [("one_cluster_omega_step", "L4 ω per step"), ("one_cluster_regrid1", "L4 adapt every sub-step"),
                ("one_cluster_courant09", "L4 c0.9"), ("one_cluster_level5", "L5 c0.5"),
                ("one_cluster_level5_mpc5_courant09", "L5 mpc5 c0.9")])
    print("### Two clusters\n")
    table("docs/data/amr_sync_path/two_clusters.json", [("two_clusters", "frame L4")])
    for n in ("one_cluster", "one_cluster_level5_courant09", "one_cluster_level6_mpc40_courant09",
              "one_cluster_level7_mpc160_courant09"):
        f = load(n)["frame"]
        print(f"{n}: sub-steps bound by a leaf of level {f['bound_leaf_levels']}, "
              f"mean mass of that leaf {f['bound_leaf_mass_sum'] / sum(f['bound_leaf_levels'].values()):.1e}")
