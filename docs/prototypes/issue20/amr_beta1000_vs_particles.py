"""The amr density at β = 1000 (examples/metastability.toml, base nlat 32, max_level 3,
mass_per_cell 3.3, to t = 24) against the GPU particle reference of reference/data/
metastability_beta1000.json (N = 2000 × 16 seeds, mean ± SE; N = 20 000, one seed, below the
documented need 4πβ(2–3)², so not a converged reference) at a few output times.

The run:  OMP_NUM_THREADS=1 python3 -m spherepde run examples/metastability.toml \\
    --set dynamics.attention.beta=1000 --set representations.density.scheme=amr \\
    --set representations.density.max_level=3 --set grid.nlat=32 --output DIR
then:     python docs/prototypes/issue20/amr_beta1000_vs_particles.py DIR/run.nc [OUT.json]
(default OUT: amr_beta1000_vs_particles.json beside this script).  The experiment's default run
at β = 1000 (base 48, max_level 5, pole [1, 1, 1]; ``spherepde experiment metastability --betas
1000``, its member run.nc) → amr_beta1000_base48_vs_particles.json.
"""
import json
import sys
from pathlib import Path

import netCDF4
import numpy as np

HERE = Path(__file__).resolve().parent
ref = json.loads((HERE / "reference" / "data" / "metastability_beta1000.json").read_text())
run = netCDF4.Dataset(sys.argv[1])
t_run = np.asarray(run["time"][:])
out = {"script": "docs/prototypes/issue20/amr_beta1000_vs_particles.py",
       "run_config": json.loads(run.getncattr("config_json")), "rows": []}
keys = {"energy": "energy", "dist_eigenspace": "dist_eigenspace", "dist_eigenspace_V": "dist_eigenspace_V",
        "w2_projection": "w2_projection_exact"}
for t in (4.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0):
    i = int(np.argmin(np.abs(t_run - t)))
    row = {"t": t}
    for name, rk in keys.items():
        row[name] = {"amr": float(run[name][i])}
        for e in ref["ensembles"]:
            j = int(np.argmin(np.abs(np.asarray(e["times"]) - t)))
            row[name][f"particles_N{e['N']}"] = [e["mean"][rk][j], e["stderr"][rk][j]]
    out["rows"].append(row)
w = np.asarray(run["w2_projection"][:])
out["amr_w2_min"] = [float(w.min()), float(t_run[w.argmin()])]
out["particles_w2_min_own"] = {e["N"]: [e["scalars_mean"]["w2_min_own"], e["scalars_stderr"]["w2_min_own"]]
                               for e in ref["ensembles"]}
target = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "amr_beta1000_vs_particles.json"
target.write_text(json.dumps(out, indent=1) + "\n")
for r in out["rows"]:
    print(r["t"], {k: (round(v["amr"], 4), [round(x, 4) if x == x else x for x in v["particles_N2000"]],
                       round(v["particles_N20000"][0], 4)) for k, v in r.items() if k != "t"})
print("w2 min amr", out["amr_w2_min"], "particles", out["particles_w2_min_own"])
