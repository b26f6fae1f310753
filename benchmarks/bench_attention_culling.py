"""The culled compiled attention sums (compiled.sums with tol) at concentrated densities: this
tree's kernel against a baseline commit's, side by side in one process (issue 23).

    python benchmarks/bench_attention_culling.py [--baseline 1eedc8b] [--reps 7] [--threads 1,2]
                                                 [--out benchmarks/results/attention_culling.json]

Cases (targets = sources, as the adaptive density and particle solvers call it, tol = 1e-8):

* ``amr-beta1000``: the leaves of an adaptive density at β = 1000, t = 8
  (benchmarks/data/amr_beta1000_points.npz, made by make_amr_attention_case.py): B =
  diag(0.1, 1, 1), sources the leaf centres weighted by their masses;
* ``vmf-beta100-<B>`` / ``vmf-beta1000-diag-0.1``: the cells of GaussGrid(64) weighted by a von
  Mises–Fisher density (κ = 50, floor 1e-12, bench_attention's "concentrated"), every class of B;
* ``particles-<B>-<cloud>``: one RK4 step of ParticleODE, N = 10⁴, β = 100 (bench_particle_kernels'
  set-up: B = diag(0.5, 1, 1) or its general random matrix, the diffuse and the concentrated
  cloud), the velocity by "auto" (which takes the compiled sums there);
* ``particles-run-t<T>``: one RK4 step (Δt = 0.05) of ParticleODE from the snapshot at time T of
  an N = 10⁴ particle run of examples/metastability.toml at β = 100 (benchmarks/data/
  particles_beta100_run.npz, made by make_particle_run_case.py; T = 0 … 24, from the diffuse start
  through the two-point state and its exit).  ``particles_run`` in the output weighs the rows by
  the time each snapshot stands for (the trapezoid rule over T): the whole run's time per step,
  baseline over new, per repetition;
* ``density128-<B>``: DensityAttention.mean of bench_attention's concentrated row at β = 100
  (GaussGrid(128), 65 792 face-point targets, certified spectral sums where they certify, the
  compiled culled sums for the rest).

The last two call the package's solvers; their ``baseline`` is the same call with
``compiled.sums`` replaced by the baseline's (the function every compiled path goes through), and
they report no ``all-pairs`` contender.

Contenders, timed in turn within each repetition (the order rotates): ``baseline`` (the commit's
compiled.py and compiled_numba.py, loaded as separate modules from ``git show``), ``new`` (this
tree), ``all-pairs`` (this tree without culling, tol = None).  For each case and thread count:
the medians, the per-repetition ratio baseline/new (median, min, max: the spread), the pairs
each summed, and each one's largest deviation from the all-pairs mean (the culling's tolerance is
2·tol).  The machine's own limits (yardstick.py) and its load are recorded beside them.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention, compiled  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE  # noqa: E402

from bench_particles import cloud  # noqa: E402  (this folder)
from yardstick import machine_limits  # noqa: E402  (this folder)

DATA = ROOT / "benchmarks" / "data" / "amr_beta1000_points.npz"
RUN = ROOT / "benchmarks" / "data" / "particles_beta100_run.npz"
OUT = ROOT / "benchmarks" / "results" / "attention_culling.json"
TOL = 1e-8
A_DIR = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])
KAPPA, FLOOR = 50.0, 1e-12


def _spread(values) -> dict:
    """median, min and max of a list of ratios."""
    return {"median": float(np.median(values)), "min": float(np.min(values)), "max": float(np.max(values))}


def interleaved(fns: dict, reps: int) -> dict[str, list[float]]:
    """Seconds of each call in ``fns`` over ``reps`` rounds, the order rotated every round so
    that no call always runs first (for two calls: alternately reversed)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(reps):
        keys = list(fns)
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    return times


def matrices() -> dict[str, np.ndarray]:
    """bench_attention's classes of B (the same seeds)."""
    rng = np.random.default_rng(2026)
    q1 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    q2 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return {"identity": np.eye(3), "diag-0.1": np.diag([0.1, 1.0, 1.0]),
            "spd-random": q1 @ np.diag([1.5, 0.8, 0.3]) @ q1.T,
            "general-random": q1 @ np.diag([1.2, 0.7, 0.4]) @ q2}


def cases() -> list[dict]:
    out = []
    d = np.load(DATA)
    out.append({"name": "amr-beta1000", "x": d["x"], "w": d["w"], "B": np.diag([0.1, 1.0, 1.0]),
                "beta": 1000.0, "source": f"{DATA.name} (t = {float(d['t']):.3f})"})
    g = GaussGrid(64)
    p = g.xyz.reshape(-1, 3)
    c = KAPPA / (2 * np.pi * (1 - np.exp(-2 * KAPPA)))
    w = ((c * np.exp(KAPPA * (g.xyz @ A_DIR - 1.0)) + FLOOR) * g.cell_area).reshape(-1)
    for bname, B in matrices().items():
        out.append({"name": f"vmf-beta100-{bname}", "x": p, "w": w, "B": B, "beta": 100.0,
                    "source": "GaussGrid(64) cells, vMF kappa 50 + 1e-12"})
    out.append({"name": "vmf-beta1000-diag-0.1", "x": p, "w": w, "B": matrices()["diag-0.1"],
                "beta": 1000.0, "source": "GaussGrid(64) cells, vMF kappa 50 + 1e-12"})
    return out


def step_cases() -> list[dict]:
    """The particle steps and the density means (module docstring): name and a call."""
    out = []
    rng = np.random.default_rng(2026)
    q1 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    q2 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    for bname, K in (("diag-0.5", np.diag([0.5, 1.0, 1.0])),
                     ("general-random", q1 @ np.diag([1.2, 0.7, 0.4]) @ q2)):
        for cname in ("diffuse", "concentrated"):
            x = cloud(cname, 10000, np.random.default_rng(2026))
            ode = ParticleODE(Attention(np.eye(3), K, np.diag([1.0, 0.8, 0.2]), 100.0))
            out.append({"name": f"particles-{bname}-{cname}", "beta": 100.0, "n": 10000,
                        "m": 10000, "call": (lambda ode=ode, x=x: ode.step(x, 0.0, 0.05)),
                        "source": "ParticleODE RK4 step, N = 1e4, dt = 0.05"})
    if RUN.exists():
        run = np.load(RUN)
        ode = ParticleODE(Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.diag([1.0, 0.5, 0.1]),
                                    100.0))
        for t, x in zip(run["t"], run["x"]):
            out.append({"name": f"particles-run-t{t:g}", "beta": 100.0, "n": x.shape[0],
                        "m": x.shape[0], "t": float(t),
                        "call": (lambda x=np.ascontiguousarray(x): ode.step(x, 0.0, 0.05)),
                        "source": "ParticleODE RK4 step, N = 1e4, dt = 0.05, metastability "
                                  f"β = 100 run at t = {t:g}"})
    g = GaussGrid(128)
    pts = FFSL_POINTS(g)
    c = KAPPA / (2 * np.pi * (1 - np.exp(-2 * KAPPA)))
    rho = c * np.exp(KAPPA * (g.xyz @ A_DIR - 1.0)) + FLOOR
    for bname, B in matrices().items():
        da = DensityAttention(Attention(np.eye(3), B, np.eye(3), 100.0), g, tol=TOL)
        out.append({"name": f"density128-{bname}", "beta": 100.0, "n": pts.shape[0],
                    "m": g.xyz[..., 0].size, "call": (lambda da=da: da.mean(pts, rho)),
                    "source": "DensityAttention.mean, GaussGrid(128) vMF kappa 50, FFSL face points"})
    return out


def FFSL_POINTS(grid):
    """bench_attention's targets: the face points of the FFSL transport."""
    from spherepde.solvers.eulerian.transport import FFSLSphere

    return FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points


def baseline_module(commit: str):
    """The commit's compiled.py, importing the commit's compiled_numba.py (both from git show,
    in a folder of the temp dir that keeps numba's cache between runs)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    folder = Path(tempfile.gettempdir()) / f"spherepde_attention_baseline_{sha}"
    folder.mkdir(exist_ok=True)
    files = {}
    for name in ("compiled", "compiled_numba"):
        src = subprocess.run(["git", "-C", str(ROOT), "show",
                              f"{sha}:spherepde/dynamics/attention/{name}.py"],
                             check=True, capture_output=True, text=True).stdout
        src = src.replace("from spherepde.dynamics.attention import compiled_numba as K",
                          f"import baseline_numba_{sha} as K")
        path = folder / f"baseline_{name.replace('compiled_', '')}_{sha}.py"
        if not path.exists() or path.read_text() != src:
            path.write_text(src)
        files[name] = path
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(files["compiled"].stem, files["compiled"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, sha


def particles_run(rows: list[dict]) -> list[dict]:
    """Per thread count, the particles-run-t<T> rows weighed by the trapezoid rule over T: the
    whole run's time per step for baseline and new in each repetition, and their ratio."""
    out = []
    for nt in sorted({r["threads"] for r in rows if "t" in r}):
        rs = sorted((r for r in rows if "t" in r and r["threads"] == nt), key=lambda r: r["t"])
        t = np.array([r["t"] for r in rs])
        if t.size < 2:
            continue
        w = np.zeros(t.size)
        w[:-1] += np.diff(t) / 2
        w[1:] += np.diff(t) / 2
        w /= w.sum()
        per = {k: np.array([r["times"][k] for r in rs]) for k in ("baseline", "new")}
        total = {k: w @ v for k, v in per.items()}  # (reps,) the weighted step time per repetition
        out.append({"threads": nt, "times_T": t.tolist(), "weights": w.tolist(),
                    "step_s": {k: float(np.median(v)) for k, v in total.items()},
                    "baseline_over_new": _spread(list(total["baseline"] / total["new"]))})
    return out


def _with_sums(sums, call):
    """call() with compiled.sums replaced by ``sums`` (then restored)."""
    own = compiled.sums
    compiled.sums = sums
    try:
        return call()
    finally:
        compiled.sums = own


def main(argv=None) -> int:
    import numba

    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="1eedc8b")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default=None, help="comma-separated case names")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    t_start = time.time()
    limits = machine_limits()
    base, sha = baseline_module(args.baseline)
    threads = [int(t) for t in args.threads.split(",")]
    nthreads0 = numba.get_num_threads()
    rows = []
    for case in cases():
        if args.only and case["name"] not in args.only.split(","):
            continue
        z, y, lw, beta = case["x"] @ case["B"], case["x"], np.log(case["w"]), case["beta"]
        n, m = z.shape[0], y.shape[0]
        fns = {"baseline": lambda: base.sums(z, y, lw, beta, TOL),
               "new": lambda: compiled.sums(z, y, lw, beta, TOL),
               "all-pairs": lambda: compiled.sums(z, y, lw, beta, None)}
        res = {k: f() for k, f in fns.items()}  # compiles / loads every kernel, the results
        mean = {k: r[0] / r[1][:, None] for k, r in res.items()}
        dev = {k: float(np.max(np.abs(mean[k] - mean["all-pairs"]))) for k in fns}
        for nt in threads:
            if nt > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(nt)
            times = interleaved(fns, args.reps)
            ratio = [a / b for a, b in zip(times["baseline"], times["new"])]
            ratio_all = [a / b for a, b in zip(times["all-pairs"], times["new"])]
            row = {"case": case["name"], "source": case["source"], "beta": beta, "n": n, "m": m,
                   "threads": nt, "tol": TOL,
                   "t_median": {k: float(np.median(v)) for k, v in times.items()},
                   "times": times,
                   "baseline_over_new": _spread(ratio),
                   "all_pairs_over_new": _spread(ratio_all),
                   "pairs_fraction": {k: res[k][3] / (n * m) for k in fns},
                   "max_deviation_from_all_pairs": dev,
                   "within_2tol": all(v <= 2 * TOL + 1e-12 for v in dev.values())}
            rows.append(row)
            print(f"{case['name']:26s} threads {nt}: baseline {row['t_median']['baseline']:.3f} s, "
                  f"new {row['t_median']['new']:.3f} s, all-pairs {row['t_median']['all-pairs']:.3f} s;"
                  f" baseline/new {row['baseline_over_new']['median']:.2f} "
                  f"[{row['baseline_over_new']['min']:.2f}, {row['baseline_over_new']['max']:.2f}], "
                  f"pairs {row['pairs_fraction']['baseline']:.3f} -> {row['pairs_fraction']['new']:.3f},"
                  f" dev {dev['new']:.1e}", flush=True)
    for case in step_cases():
        if args.only and case["name"] not in args.only.split(","):
            continue
        fns = {"baseline": lambda: _with_sums(base.sums, case["call"]), "new": case["call"]}
        res = {k: f() for k, f in fns.items()}
        dev = float(np.max(np.abs(np.asarray(res["baseline"]) - np.asarray(res["new"]))))
        for nt in threads:
            if nt > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(nt)
            times = interleaved(fns, args.reps)
            ratio = [a / b for a, b in zip(times["baseline"], times["new"])]
            row = {"case": case["name"], "source": case["source"], "beta": case["beta"],
                   "n": case["n"], "m": case["m"], "threads": nt, "tol": TOL,
                   **({"t": case["t"]} if "t" in case else {}),
                   "t_median": {k: float(np.median(v)) for k, v in times.items()},
                   "times": times,
                   "baseline_over_new": _spread(ratio),
                   "max_deviation_baseline_new": dev}
            rows.append(row)
            print(f"{case['name']:26s} threads {nt}: baseline {row['t_median']['baseline']:.3f} s, "
                  f"new {row['t_median']['new']:.3f} s; baseline/new "
                  f"{row['baseline_over_new']['median']:.2f} [{row['baseline_over_new']['min']:.2f}, "
                  f"{row['baseline_over_new']['max']:.2f}], |baseline - new| {dev:.1e}", flush=True)
    numba.set_num_threads(nthreads0)
    run_summary = particles_run(rows)
    for r in run_summary:
        print(f"particles run (threads {r['threads']}): baseline/new {r['baseline_over_new']['median']:.2f} "
              f"[{r['baseline_over_new']['min']:.2f}, {r['baseline_over_new']['max']:.2f}]")
    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                          capture_output=True, text=True).stdout.strip()
    out = {"benchmark": "attention_culling", "baseline_commit": sha, "commit": head,
           "attention_exp": compiled.path_info(),
           "layout": {"new": {"tiles": compiled.CULL_TILES, "runs": compiled.CULL_RUNS,
                              "tile": compiled.TILE, "target_block": compiled.TARGET_BLOCK,
                              "max_fraction": compiled.CULL_MAX_FRACTION,
                              "expand": getattr(compiled, "CULL_EXPAND", None)}},
           "rows": rows, "particles_run": run_summary,
           "meta": {"yardstick": limits, "reps": args.reps, "elapsed_s": time.time() - t_start,
                    "loadavg_end": list(os.getloadavg()),
                    "numba_threads_max": int(numba.config.NUMBA_NUM_THREADS)}}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
