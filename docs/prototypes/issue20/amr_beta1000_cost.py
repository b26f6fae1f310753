"""Cost of the AMR density (representations.density.scheme = "amr") at β = 1000 on Paper 1's
metastability set-up: leaves and CPU seconds per step over the first time units, one thread.

For each (base nlat, max_level, mass_per_cell) the stepper is built as in
benchmarks/bench_amr_metastability.py (β = 1000 instead of 100), stepped from t = 0 to
``--t`` with its own CFL step, and the process CPU time, the steps and the leaves are recorded;
``cpu_s_to_t24_at_this_rate`` = 24 / t × cpu_s is what the same rate would cost to t = 24
(the leaves change as the mass concentrates, so it is an order of magnitude, not a forecast).

    python docs/prototypes/issue20/amr_beta1000_cost.py 32:2:3.3 32:3:3.3 [--t 0.25]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from spherepde import __version__  # noqa: E402
from spherepde.grids import GaussGrid  # noqa: E402
from spherepde.runs.build import build  # noqa: E402
from spherepde.runs.config import RunConfig, apply_set, read_raw  # noqa: E402
from spherepde.solvers.controller import Controller  # noqa: E402
from spherepde.solvers.eulerian.amr import AMRDensity  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def measure(nlat0: int, lmax: int, mpc: float, t: float) -> dict:
    raw = read_raw(ROOT / "examples" / "metastability.toml")
    raw = apply_set(raw, "dynamics.attention.beta=1000.0")
    model = build(RunConfig.from_dict(raw))
    cfg = model.config
    a = np.asarray(cfg.initial.direction, float)
    a /= np.linalg.norm(a)
    amp = cfg.initial.amplitude
    st = AMRDensity(model.attention, GaussGrid(32), nlat0=nlat0, lmax=lmax, mass_per_cell=mpc)
    state0 = st.initial_state(lambda x: 1.0 + amp * (x @ a))
    ctl = Controller(st)
    ctl.run(state0, (0.0, 1e-4))  # compile the kernels before timing
    c0, w0 = time.process_time(), time.perf_counter()
    res = ctl.run(state0, (0.0, t))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"nlat0": nlat0, "lmax": lmax, "mass_per_cell": mpc, "h_finest": st.h,
            "leaves_t0": int(state0[0, 0]), "leaves_end": int(res.state[0, 0]), "t": t,
            "steps": res.n_steps, "cpu_s": cpu, "wall_s": wall, "cpu_s_per_step": cpu / max(res.n_steps, 1),
            "cpu_s_to_t24_at_this_rate": 24.0 / t * cpu, "loadavg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--t", type=float, default=0.25)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args()
    out = {"script": "docs/prototypes/issue20/amr_beta1000_cost.py", "version": __version__,
           "command": " ".join(["python", *sys.argv]), "runs": []}
    for spec in args.configs:
        n0, lm, mpc = spec.split(":")
        out["runs"].append(measure(int(n0), int(lm), float(mpc), args.t))
        print(json.dumps(out["runs"][-1]), flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
