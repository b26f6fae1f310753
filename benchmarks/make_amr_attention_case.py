"""The weighted points of an adaptive density at β = 1000 (two tight clusters): the case the
culled attention sums meet in low-temperature AMR runs (issue 23).  Writes
benchmarks/data/amr_beta1000_points.npz (x (n, 3) leaf centres, w (n,) masses, t).

    python benchmarks/make_amr_attention_case.py [--t-end 8]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import Attention  # noqa: E402
from spherepde.solvers.eulerian import AMRDensity  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "amr_beta1000_points.npz"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--t-end", type=float, default=8.0)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.diag([1.0, 0.5, 0.1]), 1000.0)
    st = AMRDensity(att, GaussGrid(32), nlat0=32, lmax=5, mass_per_cell=52.8)
    a = np.array([0.6, 0.5, 0.3]) / np.linalg.norm([0.6, 0.5, 0.3])
    s = st.initial_state(lambda x: 1 + 0.5 * x @ a)
    t, steps, t0 = 0.0, 0, time.perf_counter()
    while t < args.t_end:
        dt = min(st.stable_dt(s, t), args.t_end - t)
        s = st.step(s, t, dt)
        t += dt
        steps += 1
        if steps % 20 == 0:
            x, w = st.measure(s)
            print(f"t = {t:.3f}, steps {steps}, leaves {x.shape[0]}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    x, w = st.measure(s)
    np.savez_compressed(args.out, x=x, w=w, t=t, steps=steps)
    print(f"wrote {args.out}: {x.shape[0]} points at t = {t:.3f} after {steps} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
