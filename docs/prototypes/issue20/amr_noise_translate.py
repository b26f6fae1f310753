"""Issue 20, item 5: why `validate sync-path --scheme amr` leaves its band once the cluster moves.

A narrow vMF cluster (κ = 2500, width κ^(−1/2) = 0.02 rad) is carried by a solid-body rotation
(|ω| = 4, the speed at which the noise path of the slow tests carries the cluster 55° in a
quarter time unit) through an angle D on the amr mesh of the sync-path case (base 24,
mass_per_cell 10) at lmax 4, 5, 6.  The exact spread 1 − |∫x ρ| stays constant; its growth is
the scheme's numerical diffusion of a translation.

    python3 docs/prototypes/issue20/amr_noise_translate.py docs/prototypes/issue20/amr_noise_translate.json
"""
import json
import math
import sys
import time

import numpy as np
from spherepde.grids import GaussGrid
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian.amr import AMRDensity

axis = np.array([0.3, 0.5, 0.81])
axis /= np.linalg.norm(axis)
c0 = np.cross(axis, [0, 0, 1.0])
c0 /= np.linalg.norm(c0)   # on the great circle of the rotation


def spread(st, s):
    x, w = st.measure(s)
    return 1 - np.linalg.norm((w[:, None] * x).sum(0)) / w.sum()


rows = []
for kappa in (2500.0,):
    for lmax in (4, 5, 6):
        for D in (0.25, 1.0):
            st = AMRDensity(lambda t, x: 4.0 * np.cross(axis, x), GaussGrid(24), nlat0=24, lmax=lmax,
                            mass_per_cell=10.0, max_cells=200000)
            s0 = st.initial_state(lambda x: np.exp(kappa * (x @ c0 - 1)))
            t0 = time.process_time()
            res = Controller(st).run(s0, (0.0, D / 4.0))
            r = {"kappa": kappa, "lmax": lmax, "h": st.h, "width_over_h": 1 / math.sqrt(kappa) / st.h, "D": D,
                 "spread0": float(spread(st, s0)), "spread": float(spread(st, res.state)),
                 "steps": res.n_steps, "cpu_s": time.process_time() - t0}
            r["ratio"] = r["spread"] / r["spread0"]
            print(r, flush=True)
            rows.append(r)
json.dump({"script": "docs/prototypes/issue20/amr_noise_translate.py", "rows": rows},
          open(sys.argv[1], "w"), indent=1)
