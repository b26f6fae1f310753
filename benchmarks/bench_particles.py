"""Attention velocity of N particles on S² (d = 3): ``Attention.velocity(x, x, w)`` with the default
method "auto" (spectral point sums where B ∝ orthogonal and its cost model says so, else the
culled/reference/float32 choice) against the float64 log-domain reference, side by side in one run;
and one RK4 step of ``ParticleODE`` at N = 10⁴ (four velocity evaluations), auto vs reference.

    python benchmarks/bench_particles.py            # 3 repetitions; writes results/particles.json
    python benchmarks/bench_particles.py --quick    # 1 repetition, β ∈ {10, 100}, no RK4 step;
                                                    # prints only (unless --out)
    python benchmarks/bench_particles.py --out PATH

Set-up: N ∈ {10³, 10⁴} particles, weights 1/N, targets = the particles; clouds "diffuse" (uniform
on S²) and "concentrated" (two blobs of angular width 0.05 and 0.15 holding 70/30 % of the mass,
seed 2026); β ∈ {1, 10, 100, 1000}; Q = V = I and K = I (B = I), K = R (B = R, a fixed random
rotation: c = 1) and K = diag(0.5, 1, 1) (the Paper-1 kind of B, not ∝ orthogonal: no spectral
path — that row shows what "auto" costs there).  tol = 1e-8 (the default).
Timed per case, interleaved in a shuffled order within each repetition: ``ref`` (method
"reference") and ``auto``; the table gives medians of the wall times and of the per-repetition
ratio ref/auto, and the weighted relative error Σ w_i|m_i − m_ref,i| / Σ w_i|m_ref,i| of the
attention mean and its maximum over targets with |m_ref| ≥ 1e-3.  For the spectral path the
degree L and how many targets were settled spectrally / exactly (certification fallback).
The machines are shared: compare ratios within one run; OPENBLAS_NUM_THREADS and the load are
recorded (threaded OpenBLAS on the loaded 2-core machine slowed both sides by 2–3×).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.dynamics.attention import Attention  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE  # noqa: E402

from _common import timed  # noqa: E402  (this folder: the timing helpers of every benchmark)

BETAS = (1.0, 10.0, 100.0, 1000.0)
NS = (1000, 10000)
MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])


def unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def cloud(name, n, rng):
    if name == "diffuse":
        return unit(rng.normal(size=(n, 3)))
    k = int(0.7 * n)
    other = unit(np.array([-0.5, 0.2, -0.8]))
    return unit(np.vstack([MU + 0.05 * rng.normal(size=(k, 3)),
                           other + 0.15 * rng.normal(size=(n - k, 3))]))


def rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] *= -1
    return q


def errors(m, ref, w):
    dm, nr = np.linalg.norm(m - ref, axis=1), np.linalg.norm(ref, axis=1)
    big = nr >= 1e-3
    return float(np.sum(w * dm) / np.sum(w * nr)), float(np.max(dm[big] / nr[big]))


def run_interleaved(calls, reps):
    """Median wall/CPU time of each call and the median per-repetition ratio ref/auto."""
    got = {k: [] for k in calls}
    for _ in range(reps):
        keys = list(calls)
        random.shuffle(keys)
        for k in keys:
            got[k].append(timed(calls[k])[:2])
    t = {k: float(np.median([g[0] for g in v])) for k, v in got.items()}
    c = {k: float(np.median([g[1] for g in v])) for k, v in got.items()}
    ratio = float(np.median([a[0] / b[0] for a, b in zip(got["ref"], got["auto"])]))
    return t, c, ratio


def velocity_case(n, bname, K, beta, cname, reps):
    rng = np.random.default_rng(2026)
    x = cloud(cname, n, rng)
    w = np.full(n, 1.0 / n)
    att = Attention(np.eye(3), K, np.eye(3), beta)
    m, stats = att.mean_and_stats(x, x, w)  # untimed: accuracy and the path taken
    ref = att.mean(x, x, w, method="reference")
    wrel, mrel = errors(m, ref, w)
    calls = {"ref": lambda: att.velocity(x, x, w, method="reference"),
             "auto": lambda: att.velocity(x, x, w)}
    t, c, ratio = run_interleaved(calls, reps)
    return {"N": n, "B": bname, "beta": beta, "cloud": cname, "stats": stats,
            "wrel_m": wrel, "maxrel_m": mrel, "t_ref": t["ref"], "t_auto": t["auto"],
            "cpu_ref": c["ref"], "cpu_auto": c["auto"], "ratio": ratio}


def rk4_case(n, bname, K, beta, cname, reps, dt=0.05):
    rng = np.random.default_rng(2026)
    x = cloud(cname, n, rng)
    att = Attention(np.eye(3), K, np.diag([1.0, 0.8, 0.2]), beta)
    auto = ParticleODE(att)
    ref = ParticleODE(att)
    ref.velocity = lambda p: att.velocity(p, p, np.full(n, 1.0 / n), method="reference")
    x_auto = auto.step(x, 0.0, dt)
    stats = dict(auto.last_stats)  # the last of the four stages
    x_ref = ref.step(x, 0.0, dt)
    diff = float(np.max(np.linalg.norm(x_auto - x_ref, axis=1)))
    calls = {"ref": lambda: ref.step(x, 0.0, dt), "auto": lambda: auto.step(x, 0.0, dt)}
    t, c, ratio = run_interleaved(calls, reps)
    return {"N": n, "B": bname, "beta": beta, "cloud": cname, "dt": dt, "stats": stats,
            "max_position_diff": diff, "t_ref": t["ref"], "t_auto": t["auto"],
            "cpu_ref": c["ref"], "cpu_auto": c["auto"], "ratio": ratio}


def how(st):
    if st.get("method") == "spectral":
        return f"spectral L={st['degree']} ({st['spectral']}/{st['exact']})"
    return st.get("method", "?")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--out", type=str, default=None)
    args = ap.parse_args(argv)
    reps = args.reps or (1 if args.quick else 3)
    betas = (10.0, 100.0) if args.quick else BETAS
    random.seed(0)
    R = rotation(np.random.default_rng(7))
    Bs = {"I": np.eye(3), "R": R, "diag": np.diag([0.5, 1.0, 1.0])}
    load0 = list(os.getloadavg())
    t_start = time.perf_counter()
    print(f"particle attention velocity, tol 1e-8, {reps} repetition(s), medians; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print(f"{'N':>6} {'B':>5} {'beta':>6} {'cloud':>12}  {'ref[s]':>8} {'auto[s]':>8} "
          f"{'ref/auto':>8}  {'wrel(m)':>8} {'max(m)':>8}  path (spectral: targets spectral/exact)")
    results = []
    for n in NS:
        for bname, K in Bs.items():
            for beta in betas:
                for cname in ("diffuse", "concentrated"):
                    r = velocity_case(n, bname, K, beta, cname, reps)
                    results.append(r)
                    print(f"{n:6d} {bname:>5} {beta:6.0f} {cname:>12}  {r['t_ref']:8.3f} "
                          f"{r['t_auto']:8.3f} {r['ratio']:8.1f}  {r['wrel_m']:8.1e} "
                          f"{r['maxrel_m']:8.1e}  {how(r['stats'])}", flush=True)
    steps = []
    if not args.quick:
        print("\none RK4 step of ParticleODE (4 velocity evaluations), N = 10⁴, V = diag(1, .8, .2)")
        for bname in ("I", "R"):
            for beta in (10.0, 100.0):
                for cname in ("diffuse", "concentrated"):
                    r = rk4_case(10000, bname, Bs[bname], beta, cname, reps)
                    steps.append(r)
                    print(f"{10000:6d} {bname:>5} {beta:6.0f} {cname:>12}  {r['t_ref']:8.3f} "
                          f"{r['t_auto']:8.3f} {r['ratio']:8.1f}  max|Δx| {r['max_position_diff']:.1e}"
                          f"  {how(r['stats'])}", flush=True)
    elapsed = time.perf_counter() - t_start
    print(f"total {elapsed:.0f} s")
    out = args.out or (None if args.quick else str(ROOT / "benchmarks" / "results" / "particles.json"))
    if out:
        meta = {"reps": reps, "tol": 1e-8, "machine": platform.platform(),
                "python": platform.python_version(), "numpy": np.__version__,
                "cpus": os.cpu_count(), "elapsed_s": elapsed,
                "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                "loadavg_start": load0, "loadavg_end": list(os.getloadavg()),
                "rotation_R": R.tolist()}
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps({"meta": meta, "velocity": results, "rk4_step": steps},
                                        indent=1))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
