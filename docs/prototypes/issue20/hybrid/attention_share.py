"""Issue 20: where the attention of the demo's amr run goes (base 24, max_level 2, mass_per_cell
0.83, no points).  At t = 8, 12, 16: the mass on leaves coarser than the finest level and the
share of the mass-weighted attention they receive, Σ_{j coarse} R_j with R_j = Σ_i m_i a_ij
(a_ij the softmax weight of leaf j for a token at leaf i; Σ_j R_j = 1), and the same for the leaves
lighter than 1e-4.

    python3 attention_share.py attention_share.json
"""
from __future__ import annotations

import json
import sys


from attention_refine import received
from hybrid import demo_attention, rho0

from spherepde.grids import GaussGrid
from spherepde.solvers.eulerian.amr import AMRDensity

att = demo_attention()
st = AMRDensity(att, GaussGrid(24), nlat0=24, lmax=2, mass_per_cell=0.83, max_cells=200000)
s, t, dt, rows = st.initial_state(rho0), 0.0, 0.1, []
for k in range(1, 161):
    s = st.step(s, t, dt)
    t = k * dt
    if k in (80, 120, 160):
        mesh, m, _ = st.unpack(s)
        R = received(att, mesh.xc, m)
        coarse, light = mesh.level < mesh.lmax, m < 1e-4
        rows.append({"t": round(t, 6), "leaves": int(m.size),
                     "coarse_mass": float(m[coarse].sum()), "coarse_attention": float(R[coarse].sum()),
                     "light_mass": float(m[light].sum()), "light_attention": float(R[light].sum())})
        print(rows[-1], flush=True)
with open(sys.argv[1], "w") as f:
    json.dump({"script": "docs/prototypes/issue20/hybrid/attention_share.py", "rows": rows}, f, indent=1)
