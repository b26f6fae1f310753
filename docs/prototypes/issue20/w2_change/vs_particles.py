"""β = 100 runs against the particle reference (tests/data/particles_metastability_beta100.json:
N = 20 000, 8 seeds, mean ± one standard error of e^{−β}E_β and of the distance to E(VBᵀ)):
for each run, the largest |run − mean| relative to max(|mean|, 0.05) and in standard errors, over
t ∈ (0, 12], (12, 18] and (18, 24] (the run interpolated at the reference's output times).

    python3 vs_particles.py OUT.json RUN_DIR ...
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr

REF = Path(__file__).resolve().parents[4] / "tests/data/particles_metastability_beta100.json"


def compare(run_dir: str, ref: dict) -> dict:
    t = np.array(ref["times"])
    out: dict = {}
    with xr.open_dataset(Path(run_dir) / "run.nc") as ds:
        for q in ("energy", "dist_eigenspace"):
            mean, se = np.array(ref["mean"][q]), np.array(ref["stderr"][q])
            a = np.interp(t, ds["time"].values, ds[q].values)
            rel = np.abs(a - mean) / np.maximum(np.abs(mean), 0.05)
            z = np.abs(a - mean) / se
            out[q] = {f"{lo:g}-{hi:g}": {"max_relative": float(rel[(t > lo) & (t <= hi)].max()),
                                         "max_se": float(z[(t > lo) & (t <= hi)].max())}
                      for lo, hi in ((0, 12), (12, 18), (18, 24))}
    return out


def main(out: str, runs: list[str]) -> None:
    ref = json.loads(REF.read_text())
    res = {Path(r).name: compare(r, ref) for r in runs}
    json.dump({"script": "docs/prototypes/issue20/w2_change/vs_particles.py",
               "reference": "tests/data/particles_metastability_beta100.json", "runs": res},
              open(out, "w"), indent=1)
    for name, r in res.items():
        print(name, {q: {k: (round(v["max_relative"], 4), round(v["max_se"], 1)) for k, v in x.items()}
                     for q, x in r.items()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
