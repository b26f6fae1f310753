"""t = 0 check of the field reconstruction: LQ field of the initial points on an output grid vs
the exact cell averages of ρ_0 (GaussGrid.cell_average); L1 error and mass."""
import json, sys
import numpy as np
from common import rho0, rho0_cell_averages
from lagq import field, initial_points
from spherepde.grids.gauss import GaussGrid
res = []
for nl in (24, 32, 48, 64):
    x, w, g = initial_points(nl)
    for no in (32, 64):
        out = GaussGrid(no)
        ex = rho0_cell_averages(out)
        for k in (4.0, 8.0, 16.0):
            rho, st = field(x, w, g, out, kfac=k)
            l1 = float(np.sum(np.abs(rho - ex) * out.cell_area))
            res.append({"nlat_L": nl, "nlat_out": no, "kfac": k, "L1": l1,
                        "mass_err": float(np.sum(rho * out.cell_area) - 1), **st})
            print(res[-1])
json.dump(res, open("field_t0.json", "w"), indent=1)
