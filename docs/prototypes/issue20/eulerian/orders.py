"""Fitted orders of the AMR ladders against the particle reference (data/summary_beta{B}.json):
|value − ref| ∝ h^p by least squares (spherepde.validation.fits.fit_order) per diagnostic and
time, for each ladder whose runs all reached t.  → data/orders_beta{B}.json; prints a table.
The errors include the reference's own stderr (≤ 0.4 % for E at t ≤ 16, β = 100), so orders of
errors below ~1 % are not meaningful.

python orders.py BETA"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from spherepde.validation.fits import fit_order

DATA = Path(__file__).parent / "data"
LADDERS = {
    100: {"uniform (nlat0 16/24/32, lmax 2, kappa 0.83, mc)":
              ["amr_beta100_n16_l2_k0.83_mc_auto.json", "amr_beta100_n24_l2_k0.83_mc_auto.json",
               "amr_beta100_n32_l2_k0.83_mc_auto.json"],
          "uniform minmod (nlat0 16/24/32, lmax 2)":
              ["amr_beta100_n16_l2_k0.83_minmod_auto.json", "amr_beta100_n24_l2_k0.83_minmod_auto.json",
               "amr_beta100_n32_l2_k0.83_minmod_auto.json"],
          "lmax 2..5 at fixed m_split 7.95e-3 (coarse tail)":
              ["amr_beta100_n16_l2_k3.3_mc_auto.json", "amr_beta100_n16_l3_k13.2_mc_auto.json",
               "amr_beta100_n16_l4_k52.8_mc_auto.json", "amr_beta100_n16_l5_k211.2_mc_auto.json"],
          "ffsl-ppm nlat 32/48 (two levels only)":
              ["ffsl_beta100_nlat32_t10.json", "ffsl_beta100_nlat48_t10.json"]},
    1000: {"lmax 3..5 at fixed m_split 5e-4":
               ["amr_beta1000_n16_l3_k0.83_mc_compiled.json", "amr_beta1000_n16_l4_k3.3_mc_compiled.json",
                "amr_beta1000_n16_l5_k13.2_mc_compiled.json"]},
}
TIMES = (4, 6, 8, 10, 12, 14, 16)


def main():
    beta = int(sys.argv[1])
    s = json.loads((DATA / f"summary_beta{beta}.json").read_text())
    runs = {r["file"]: r for r in s["runs"]}
    out = {}
    for name, files in LADDERS[beta].items():
        have = [runs[f] for f in files if f in runs]
        res = {"files": [r["file"] for r in have], "h": [r["h_finest"] for r in have], "orders": {}}
        for key in ("energy", "w2_projection", "dist_eigenspace"):
            for t in TIMES:
                rows = [next((row for row in r["rows"] if row["t"] == t), None) for r in have]
                pts = [(r["h_finest"], abs(row[key]["value"] - row[key]["ref"])) for r, row in zip(have, rows) if row]
                if len(pts) >= 2:
                    p, se = fit_order([a for a, _ in pts], [b for _, b in pts])
                    res["orders"][f"{key}@{t}"] = {"p": p, "se": se, "levels": len(pts),
                                                   "rel_errors": [row[key]["rel_error"] for row in rows if row]}
        out[name] = res
        print(f"{name}: levels {len(have)}")
        for k, v in res["orders"].items():
            print(f"   {k}: p = {v['p']:.2f} ± {v['se']:.2f} ({v['levels']} levels; rel errors "
                  + ", ".join(f"{100 * e:+.1f}%" for e in v["rel_errors"]) + ")")
    (DATA / f"orders_beta{beta}.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
