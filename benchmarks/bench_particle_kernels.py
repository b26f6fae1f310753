"""One RK4 step of ParticleODE at N = 10⁴ on each exponential path of the compiled attention sums
(issue 23): "cody-waite" (spherepde/dynamics/attention/expsum.py, the default) against "legacy"
(the previous kernel), side by side in one run.

    python benchmarks/bench_particle_kernels.py                 # 3 repetitions; writes
                                                                # results/particles_kernels.json
    python benchmarks/bench_particle_kernels.py --reps 1 --out PATH

Set-up: N = 10⁴ particles, weights 1/N, Q = I, V = diag(1, 0.8, 0.2), Δt = 0.05, tol = 1e-8 (the
default), velocity method "auto"; B = K ∈ {diag(0.5, 1, 1) (Paper 1's kind, no spectral path),
a seeded general random matrix (singular values 1.2, 0.7, 0.4)}; clouds "diffuse" (uniform)
and "concentrated" (two blobs, 70/30 % of the mass, widths 0.05 and 0.15, as bench_particles);
β ∈ {10, 100}.  The path is switched with ``SPHEREPDE_ATTENTION_EXP`` between calls; each
repetition times both paths in a shuffled order, and ``ratio`` is the median over repetitions
of t_legacy / t_cody_waite (> 1: the new path is faster).  ``max_position_diff``: largest
|x_cw − x_legacy| after the step.  ``meta.yardstick``: the machine's own limits (yardstick.py).
The machine is shared: compare the ratios, which are measured within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.dynamics.attention import Attention, compiled  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE  # noqa: E402

from _common import timed  # noqa: E402
from bench_particles import cloud  # noqa: E402
from yardstick import machine_limits  # noqa: E402

N = 10000
BETAS = (10.0, 100.0)


def matrices() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2026)
    q1 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    q2 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return {"diag": np.diag([0.5, 1.0, 1.0]), "general-random": q1 @ np.diag([1.2, 0.7, 0.4]) @ q2}


def step_with(path: str, ode: ParticleODE, x: np.ndarray, dt: float):
    os.environ[compiled.PATH_ENV] = path
    return ode.step(x, 0.0, dt)


def case(bname, K, beta, cname, reps, dt=0.05) -> dict:
    x = cloud(cname, N, np.random.default_rng(2026))
    att = Attention(np.eye(3), K, np.diag([1.0, 0.8, 0.2]), beta)
    ode = ParticleODE(att)
    xs = {p: step_with(p, ode, x, dt) for p in compiled.PATHS}  # untimed: compile, accuracy
    stats = dict(ode.last_stats)
    got: dict = {p: [] for p in compiled.PATHS}
    for _ in range(reps):
        order = list(compiled.PATHS)
        random.shuffle(order)
        for p in order:
            got[p].append(timed(lambda: step_with(p, ode, x, dt))[:2])
    t = {p: float(np.median([g[0] for g in v])) for p, v in got.items()}
    c = {p: float(np.median([g[1] for g in v])) for p, v in got.items()}
    ratio = float(np.median([a[0] / b[0] for a, b in zip(got["legacy"], got["cody-waite"])]))
    return {"N": N, "B": bname, "beta": beta, "cloud": cname, "dt": dt, "stats": stats,
            "max_position_diff": float(np.max(np.linalg.norm(xs["cody-waite"] - xs["legacy"], axis=1))),
            "t_cody_waite": t["cody-waite"], "t_legacy": t["legacy"],
            "cpu_cody_waite": c["cody-waite"], "cpu_legacy": c["legacy"], "ratio": ratio,
            "ratios": [a[0] / b[0] for a, b in zip(got["legacy"], got["cody-waite"])]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=str, default=str(ROOT / "benchmarks" / "results" / "particles_kernels.json"))
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error(f"--reps must be ≥ 1, got {args.reps}")
    random.seed(0)
    env0 = os.environ.get(compiled.PATH_ENV)
    load0 = list(os.getloadavg())
    t0 = time.perf_counter()
    limits = machine_limits()
    print(f"one RK4 step, N = {N}, {args.reps} repetition(s); {limits['cpu']['model']}, "
          f"{limits['cpu']['numba_threads']} numba thread(s)")
    print(f"{'B':>15} {'beta':>6} {'cloud':>12}  {'legacy[s]':>9} {'cw[s]':>7} {'legacy/cw':>9}  "
          f"{'max|dx|':>8}  method")
    rows = []
    try:
        for bname, K in matrices().items():
            for beta in BETAS:
                for cname in ("diffuse", "concentrated"):
                    r = case(bname, K, beta, cname, args.reps)
                    rows.append(r)
                    print(f"{bname:>15} {beta:6g} {cname:>12}  {r['t_legacy']:9.3f} "
                          f"{r['t_cody_waite']:7.3f} {r['ratio']:9.2f}  {r['max_position_diff']:8.1e}"
                          f"  {r['stats'].get('method')}", flush=True)
    finally:
        if env0 is None:
            os.environ.pop(compiled.PATH_ENV, None)
        else:
            os.environ[compiled.PATH_ENV] = env0
    ratios = [r["ratio"] for r in rows]
    out = {"benchmark": "python benchmarks/bench_particle_kernels.py "
                        + " ".join(sys.argv[1:] if argv is None else argv),
           "rows": rows, "summary": {"median_ratio": float(np.median(ratios)),
                                     "min_ratio": float(np.min(ratios)),
                                     "max_ratio": float(np.max(ratios))},
           "meta": {"yardstick": limits, "attention_exp": compiled.path_info(), "reps": args.reps,
                    "elapsed_s": time.perf_counter() - t0, "loadavg_start": load0,
                    "loadavg_end": list(os.getloadavg()),
                    "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}}
    print(f"legacy / cody-waite: median {out['summary']['median_ratio']:.2f} "
          f"(min {out['summary']['min_ratio']:.2f}, max {out['summary']['max_ratio']:.2f})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
