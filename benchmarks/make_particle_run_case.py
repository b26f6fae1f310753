"""Snapshots of an N = 10⁴ particle run of ``examples/metastability.toml`` at β = 100 (Q = I,
K = diag(0.1, 1, 1), V = diag(1, 0.5, 0.1); ρ₀ ∝ 1 + ½⟨x, a⟩, a = (0.6, 0.5, 0.3)/|·|): the
particle clouds a whole low-temperature run meets, from the diffuse start through the
concentration, the metastable two-point state and its exit (issue 23).  Writes
benchmarks/data/particles_beta100_run.npz (x (k, N, 3) at the times t (k,), seed, dt).

    python benchmarks/make_particle_run_case.py [--n 10000] [--dt 0.05]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.dynamics.attention import Attention  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "particles_beta100_run.npz"
TIMES = (0.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 24.0)
SEED = 2026


def sample_rho0(n: int, rng: np.random.Generator) -> np.ndarray:
    """n points of ρ₀ ∝ 1 + ½⟨x, a⟩ by rejection from the uniform measure (acceptance
    (1 + ½⟨x, a⟩)/1.5)."""
    a = np.array([0.6, 0.5, 0.3]) / np.linalg.norm([0.6, 0.5, 0.3])
    out = np.empty((0, 3))
    while out.shape[0] < n:
        x = rng.normal(size=(2 * n, 3))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        keep = rng.uniform(size=2 * n) * 1.5 < 1.0 + 0.5 * x @ a
        out = np.vstack([out, x[keep]])
    return out[:n]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--dt", type=float, default=0.05)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.diag([1.0, 0.5, 0.1]), 100.0)
    ode = ParticleODE(att)
    x = sample_rho0(args.n, np.random.default_rng(SEED))
    snaps, t, k, t0 = [x.copy()], 0.0, 0, time.perf_counter()
    for t_next in TIMES[1:]:
        while t < t_next - 1e-12:
            dt = min(args.dt, t_next - t)
            x = ode.step(x, t, dt)
            t += dt
            k += 1
        snaps.append(x.copy())
        print(f"t = {t:g}, {k} steps, {time.perf_counter() - t0:.0f} s", flush=True)
    np.savez_compressed(args.out, x=np.array(snaps), t=np.array(TIMES), seed=SEED, dt=args.dt,
                        n=args.n)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
