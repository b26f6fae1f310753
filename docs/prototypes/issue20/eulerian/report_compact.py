"""The report's compact tables: relative error (%) per run and time, from data/summary_beta*.json
(compare.py). python report_compact.py > data/compact_tables.md"""
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
SETS = {100: ["amr_beta100_n16_l2_k0.83_mc_auto.json", "amr_beta100_n24_l2_k0.83_mc_auto.json",
              "amr_beta100_n32_l2_k0.83_mc_auto.json", "amr_beta100_n16_l3_k13.2_mc_auto.json",
              "amr_beta100_n16_l4_k52.8_mc_auto.json", "amr_beta100_n16_l5_k211.2_mc_auto.json",
              "amr_beta100_n16_l4_k3.3_mc_auto.json", "amr_beta100_n32_l3_k3.3_mc_auto.json",
              "ffsl_beta100_nlat32_t24.json",
              "ffsl_beta100_nlat48_t10.json"],
        1000: ["amr_beta1000_n16_l3_k0.83_mc_compiled.json", "amr_beta1000_n16_l4_k3.3_mc_compiled.json",
               "amr_beta1000_n16_l5_k13.2_mc_compiled.json"]}
for beta, files in SETS.items():
    s = json.loads((DATA / f"summary_beta{beta}.json").read_text())
    runs = {r["file"]: r for r in s["runs"]}
    print(f"\n## beta = {beta}; columns: " + ", ".join(files))
    for key in ("energy", "w2_projection", "dist_eigenspace", "dist_eigenspace_V"):
        print(f"\n{key}: | t | reference ± stderr | " + " | ".join(f"r{i}" for i in range(len(files))) + " |")
        for t in (4, 8, 10, 12, 16, 20, 24):
            row0, cells = None, []
            for f in files:
                row = next((x for x in runs[f]["rows"] if x["t"] == t), None)
                if row:
                    row0 = row
                cells.append(f"{100 * row[key]['rel_error']:+.1f}" if row else "–")
            se = row0[key]["stderr"]
            print(f"| {t} | {row0[key]['ref']:.4f} ± {se if se else float('nan'):.4f} | " + " | ".join(cells) + " |")
