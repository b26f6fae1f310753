"""Where the amr density of `validate sync-path --scheme amr --realisation 1` (nlat 48, base 24,
lmax 4, mass_per_cell 10) is when its energy leaves the reference's (t ≈ 3-3.5 in
docs/data/amr_sync_path/one_cluster.json): the density alone on the same path, at every 0.25 the
mass-weighted mean direction, its latitude, the mass within 5° of a pole, the leaves and the
level of the leaves that hold the mass, into docs/prototypes/issue20/amr_noise_pole.json.

    OMP_NUM_THREADS=1 python docs/prototypes/issue20/amr_noise_pole.py [T_END]
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from spherepde.experiments.sync_path import SyncPathConfig
from spherepde.runs.build import build
from spherepde.runs.config import RunConfig


def main() -> int:
    t_end = float(sys.argv[1]) if len(sys.argv) > 1 else 3.75
    cfg = SyncPathConfig(scheme="amr", realisation=1, t_end=6.0)
    model = build(RunConfig.from_dict(cfg.run_config()))
    st, s = model.density, model.density_rep.state0
    dt, rows, k, start = cfg.dt, [], 0, time.perf_counter()
    while True:
        t = k * dt
        if k % 25 == 0:
            x, m = st.measure(s)
            mean = m @ x
            lat = np.degrees(np.arcsin(np.clip(x[:, 2], -1, 1)))
            mesh = st.unpack(s)[0]
            heavy = m > 1e-3
            rows.append({"t": round(t, 6), "mean_norm": float(np.linalg.norm(mean)),
                         "mean_latitude_deg": float(math.degrees(math.asin(mean[2] / np.linalg.norm(mean)))),
                         "mass_within_5deg_of_a_pole": float(m[np.abs(lat) > 85].sum()),
                         "leaves": int(m.size),
                         "levels_of_leaves_over_1e-3": sorted({int(v) for v in mesh.level[heavy]})})
            print(rows[-1], flush=True)
        if t >= t_end - 1e-9:
            break
        s = st.step(s, t, (k + 1) * dt - t)
        k += 1
    out = Path(__file__).with_suffix(".json")
    out.write_text(json.dumps({"script": "docs/prototypes/issue20/amr_noise_pole.py", "config": cfg.run_config(),
                               "seconds": round(time.perf_counter() - start, 1), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
