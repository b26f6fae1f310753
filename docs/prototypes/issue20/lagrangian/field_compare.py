"""Field L1 of the LQ density (field_tophat, kfac 8, on the output GaussGrid of the ffsl-ppm run)
against an independent field of another kind: ffsl-ppm at nlat 64 (spherepde run, β = 100, to
t = 6: run.nc given as argv[1]); and LQ level against LQ level (self-convergence, labelled so).
-> field_l1.json"""
import json
import sys

import netCDF4
import numpy as np

from lagq import field_tophat
from spherepde.grids.gauss import GaussGrid

ds = netCDF4.Dataset(sys.argv[1])
names = [v for v in ds.variables if ds.variables[v].ndim == 3]
var = "density" if "density" in ds.variables else names[0]
T = np.array(ds["time"][:], float)
rho_ff = np.array(ds[var][:], float)
nlat_ff = rho_ff.shape[1]
out = GaussGrid(nlat_ff)
from common import rho0_cell_averages
lat = np.array(ds["lat"][:], float)
assert np.allclose(lat, out.lat_deg if np.abs(lat).max() > 2 else out.lat), "grid orientation"
snaps = {24: "lq_beta100_n24_dt0.05.npz", 32: "lq_beta100_n32_dt0.05.npz",
         48: "lq_beta100_n48_dt0.05.npz", 64: "gpu/snaps_b100_n64.npz", 96: "gpu/snaps_b100_n96.npz"}
res = {"ffsl_nlat": nlat_ff, "variable": var, "rows": [],
       "ffsl_t0_L1_vs_exact": float(np.sum(np.abs(rho_ff[0] - rho0_cell_averages(out)) * out.cell_area))}
print("ffsl t=0 L1 vs exact cell averages", res["ffsl_t0_L1_vs_exact"])
fields = {}
for n, f in snaps.items():
    d = np.load(f)
    g = GaussGrid(int(n))
    for k, t in enumerate(d["t"]):
        if any(abs(t - tt) < 1e-9 for tt in T) or t in (10.0, 12.0, 16.0):
            fields[(n, float(t))] = field_tophat(d["x"][k], d["w"], g, out, kfac=8.0)[0]
for t in sorted({t for (_, t) in fields}):
    row = {"t": t}
    i = [j for j, tt in enumerate(T) if abs(tt - t) < 1e-9]
    for n in snaps:
        if (n, t) not in fields:
            continue
        r = fields[(n, t)]
        row[f"n{n}"] = {"mass": float(np.sum(r * out.cell_area)), "min": float(r.min()),
                        "max": float(r.max())}
        if i:
            row[f"n{n}"]["L1_vs_ffsl"] = float(np.sum(np.abs(r - rho_ff[i[0]]) * out.cell_area))
        if (96, t) in fields and n != 96:
            row[f"n{n}"]["L1_vs_lq96"] = float(np.sum(np.abs(r - fields[(96, t)]) * out.cell_area))
    if i:
        row["ffsl_max"] = float(rho_ff[i[0]].max())
    res["rows"].append(row)
    print(json.dumps(row))
json.dump(res, open("field_l1.json", "w"), indent=1)
