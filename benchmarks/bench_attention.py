"""Attention velocity of a density on GaussGrid(128) for every class of B: the "auto" path of
DensityAttention against the float64 log-domain reference, side by side in one run.

    python benchmarks/bench_attention.py --quick --out FILE.json   # 1 repetition (< 15 min)
    python benchmarks/bench_attention.py                           # 3 repetitions; writes
                                                                   # results/attention.json
    options: --reps N, --subset K (reference targets), --out PATH, --skip-steps, --skip-kernel,
             --skip-rows, --only 'density=concentrated,beta=100' (rows to run),
             --compare-legacy (each row's auto path also timed on the legacy exponential),
             --compare-before (each row's auto path also timed with the switches of BEFORE
             off: ``t_auto_before``, ``before_over_after``, ``before_ratios``, errors),
             --before-set sixth|seventh|eighth (--compare-before turns back BEFORE_SIXTH,
             BEFORE_SEVENTH or BEFORE_EIGHTH instead)

Set-up: density on GaussGrid(128) (32 768 cells = sources), targets the 65 792 face points of the
FFSL transport (what the mean-field stepper asks for, twice a step), tol = 1e-8 (the default).
B = QᵀK with Q = I: ``identity``; ``diag-0.1`` = diag(0.1, 1, 1) and ``diag-0.5`` (Paper 1's
matrices in the package); ``spd-random`` (seeded, singular values 1.5, 0.8, 0.3, not
axisymmetric); ``general-random`` (seeded, singular values 1.2, 0.7, 0.4, not symmetric).
β ∈ {1, 10, 100, 1000}.  Densities: ``diffuse`` 1 + ½⟨x, a⟩ and ``concentrated`` a von
Mises–Fisher density with κ = 50 plus a floor of 1e-12.

One row per (B, β, density), the keys of the issue's contract: ``B``, ``beta``, ``density``,
``nlat``, ``speedup`` (reference time / auto time, measured side by side in the same run; the
reference on a FIXED random subset of ``ref_subset`` targets, scaled linearly to all targets —
it costs the same per target — and auto on ALL targets), ``weighted_error`` (density-weighted
relative error Σ ρ(x)|m − m_ref| / Σ ρ(x)|m_ref| of the attention mean on the subset),
``max_error`` (largest relative error where |m_ref| > 1e-3·max), ``method`` (what auto did),
plus times, CPU times and the path's statistics.  Repetitions interleave reference and auto;
medians.  Also written:

* ``kernel``: pairs/s of the compiled direct kernel (all pairs, no culling, GaussGrid(64) face
  points, B = diag(0.1, 1, 1), β = 30) and of the numpy reference, against the rate of ``np.exp``
  on float64 arrays of the same size as one logit block, all measured in this run;
* ``meta.yardstick``: the machine's limits measured in this run (``yardstick.py``: CPU model,
  SIMD, numba's SVML state and threads, np.exp per core, dgemm GFLOP/s, copy bandwidth), and
  ``kernel.compiled_per_core_over_np_exp`` / each row's ``pairs_per_core_over_np_exp``: the
  rates per core as fractions of one core's np.exp rate, which mean the same on any CPU;
* ``steps``: one ``meanfield-ffsl`` step for B = diag(0.1, 1, 1), β = 30, V = diag(1, 0.8, 0.2),
  a diffuse density, at nlat 32, 48, 64, 96, 128, with the least-squares exponent of
  time ∝ nlat^p (aim: p ≤ 3).

The machine is shared: compare ratios within one run only (load averages are in the JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import compiled  # noqa: E402
from spherepde.dynamics.attention import density as density_module  # noqa: E402
from spherepde.dynamics.attention import grid_sums  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.solvers import make_stepper  # noqa: E402
from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: E402

from _common import timed  # noqa: E402  (this folder: the timing helpers of every benchmark)
from yardstick import machine_limits  # noqa: E402  (this folder: the machine's own limits)

NLAT = 128
BETAS = (1.0, 10.0, 100.0, 1000.0)
TOL = 1e-8
AIM, AIM_DIFFUSE = 20.0, 100.0
A_DIR = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])
KAPPA, FLOOR = 50.0, 1e-12
STEP_NLATS = (32, 48, 64, 96, 128)
#: short calls per contender in the kernel line's best-of figures
BEST_OF = 25


def matrices() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2026)
    q1 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    q2 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return {"identity": np.eye(3), "diag-0.1": np.diag([0.1, 1.0, 1.0]),
            "diag-0.5": np.diag([0.5, 1.0, 1.0]),
            "spd-random": q1 @ np.diag([1.5, 0.8, 0.3]) @ q1.T,
            "general-random": q1 @ np.diag([1.2, 0.7, 0.4]) @ q2}


def density(name: str, p: np.ndarray) -> np.ndarray:
    if name == "diffuse":
        return 1.0 + 0.5 * (p @ A_DIR)
    c = KAPPA / (2 * np.pi * (1 - np.exp(-2 * KAPPA)))
    return c * np.exp(KAPPA * (p @ A_DIR - 1.0)) + FLOOR


def errors(m, ref, weight) -> tuple[float, float]:
    dm = np.linalg.norm(m - ref, axis=1)
    nr = np.linalg.norm(ref, axis=1)
    big = nr > 1e-3 * nr.max()
    return float(np.sum(weight * dm) / np.sum(weight * nr)), float(np.max(dm[big] / nr[big]))


def _legacy(fn):
    """fn() with the compiled sums on their legacy exponential path (then the path restored)."""
    env0 = os.environ.get(compiled.PATH_ENV)
    os.environ[compiled.PATH_ENV] = "legacy"
    try:
        return fn()
    finally:
        if env0 is None:
            os.environ.pop(compiled.PATH_ENV)
        else:
            os.environ[compiled.PATH_ENV] = env0


#: the switches of issue 23's fifth session (module, name, value before it): --compare-before
#: times each row's auto path with them at these values as well
BEFORE = ((density_module, "SKIP_SURELY_REJECTED", False),
          (density_module, "SPLIT_CULL_BY_TOTAL", False),
          (density_module, "_SPLIT_QUANTILES_MORE", ()),
          (compiled, "CULL_CUMULATIVE", False),
          (compiled, "CULL_SHIFT_BY_BOUND", False),
          (grid_sums, "PER_TARGET_DEGREE", False))


#: the switches of issue 23's sixth session (``--before-set sixth``): the any-B series truncated
#: at SERIES_TAIL again, every target synthesised alone (no mirror pairs), and the first pass's
#: upper bounds target by target, by the tiles alone
BEFORE_SIXTH = ((grid_sums, "TARGET_TAIL_SHARE", 0.0), (compiled, "MIRROR_PAIRS", False),
                (grid_sums, "BOUND_RUN", 0), (grid_sums, "WINDOW_HALF", 0))
#: the switches of issue 23's seventh session (``--before-set seventh``): one recurrence per
#: target (or mirror pair) again, not per group sharing |u₃| and κ, the first pass's upper
#: bounds without the smallest density's lower bound, and the kernel's degrees alone (not the
#: density's spectrum's)
BEFORE_SEVENTH = ((compiled, "GROUP_TARGETS", False), (grid_sums, "FLOOR_BOUND", False),
                  (grid_sums, "DATA_DEGREE", False))
#: the switch of issue 23's eighth session (``--before-set eighth``): the culled sums without the
#: expansions of dense groups
BEFORE_EIGHTH = ((compiled, "CULL_EXPAND", False),)
#: --before-set: which switches --compare-before turns back
BEFORE_SETS = {"fifth": BEFORE, "sixth": BEFORE_SIXTH, "seventh": BEFORE_SEVENTH,
               "eighth": BEFORE_EIGHTH}
_BEFORE_SET = ["fifth"]


def _before(fn):
    """fn() with the switches of the chosen set (BEFORE_SETS, ``--before-set``) at their
    earlier values (then restored).  Objects built before (DensityAttention's spectral plan)
    are rebuilt by the caller where a switch acts at construction (TARGET_TAIL_SHARE)."""
    switches = BEFORE_SETS[_BEFORE_SET[0]]
    old = [getattr(mod, name) for mod, name, _ in switches]
    try:
        for mod, name, value in switches:
            setattr(mod, name, value)
        return fn()
    finally:
        for (mod, name, _), value in zip(switches, old):
            setattr(mod, name, value)


def run_row(grid, pts, sub, bname, B, beta, dname, reps, compare_legacy=False,
            compare_before=False) -> dict:
    rho = density(dname, grid.xyz)
    y, w = grid.xyz.reshape(-1, 3), (rho * grid.cell_area).reshape(-1)
    att = Attention(np.eye(3), B, np.eye(3), beta)
    da = DensityAttention(att, grid, tol=TOL)
    xs = pts[sub]
    scale = pts.shape[0] / sub.size
    m_auto, stats = da.mean_and_stats(pts, rho)  # untimed first call: compiles/caches, errors
    m_ref = att.mean(xs, y, w, method="reference")
    wrel, mrel = errors(m_auto[sub], m_ref, density(dname, xs))
    t_ref, c_ref, t_auto, c_auto, ratio, t_leg = [], [], [], [], [], []
    if compare_legacy:
        _legacy(lambda: da.mean(pts, rho))  # compiles the legacy kernels
    t_bef, extra_before = [], {}
    if compare_before:
        # (an object of its own, built with the switches back: some act at construction)
        da_bef = _before(lambda: DensityAttention(att, grid, tol=TOL))
        m_bef, st_bef = _before(lambda: da_bef.mean_and_stats(pts, rho))
        wb, mb = errors(m_bef[sub], m_ref, density(dname, xs))
        extra_before = {"weighted_error_before": wb, "max_error_before": mb, "stats_before": st_bef}
    for r in range(reps):
        order = [0, 1] if r % 2 == 0 else [1, 0]
        got = {}
        for k in order:
            if k == 0:
                got[0] = timed(lambda: att.mean(xs, y, w, method="reference"))
            else:
                got[1] = timed(lambda: da.mean(pts, rho))
                if compare_legacy:  # right after: the same load, the other exponential path
                    t_leg.append(timed(lambda: _legacy(lambda: da.mean(pts, rho)))[0])
                if compare_before:  # right after: the same load, the switches as before
                    t_bef.append(timed(lambda: _before(lambda: da_bef.mean(pts, rho)))[0])
        t_ref.append(got[0][0] * scale)
        c_ref.append(got[0][1] * scale)
        t_auto.append(got[1][0])
        c_auto.append(got[1][1])
        ratio.append(t_ref[-1] / t_auto[-1])
    pairs = pts.shape[0] * y.shape[0]
    extra = {} if not compare_legacy else {
        "t_auto_legacy": float(np.median(t_leg)),
        "legacy_over_cody_waite": float(np.median([a / b for a, b in zip(t_leg, t_auto)]))}
    if compare_before:
        rb = [a / b for a, b in zip(t_bef, t_auto)]
        extra_before |= {"t_auto_before": float(np.median(t_bef)), "before_ratios": rb,
                         "before_over_after": float(np.median(rb))}
    return extra | extra_before | {"B": bname, "beta": beta, "density": dname, "nlat": grid.nlat, "tol": TOL,
            "speedup": float(np.median(ratio)), "weighted_error": wrel, "max_error": mrel,
            "method": stats.get("method"), "stats": stats,
            "pairs_fraction": (stats["pairs"] / pairs if "pairs" in stats else None),
            "ref_subset": int(sub.size), "t_ref": float(np.median(t_ref)),
            "t_auto": float(np.median(t_auto)), "cpu_ref": float(np.median(c_ref)),
            "cpu_auto": float(np.median(c_auto)), "ratios": ratio}


def kernel_rates(reps: int, limits: dict) -> dict:
    """pairs/s of the compiled kernel (no culling) and the reference, np.exp's rate; the compiled
    rate per core (÷ numba's threads) as a fraction of one core's np.exp rate (the yardstick's
    ``np_exp_per_s_per_core``): a pair costs one exp, so 1.0 is exp-bound on every core.

    Both exponential paths of the compiled sums (``compiled.PATHS``) are measured side by side:
    ``paths[p]`` holds, for each, the all-pairs rate on all numba threads (one call over every
    target, median of ``reps``) and the best of BEST_OF short calls (512 targets) on all threads
    and on one thread, against np.exp's best over calls interleaved with them (the short calls
    are the least disturbed by other jobs on a loaded machine)."""
    import numba

    g = GaussGrid(64)
    pts = FFSLSphere(g, lambda t, x: np.zeros_like(x)).points
    y = g.xyz.reshape(-1, 3)
    w = (density("diffuse", g.xyz) * g.cell_area).reshape(-1)
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.eye(3), 30.0)
    z, logw = pts @ att.B, np.log(w)
    for p in compiled.PATHS:
        compiled.sums(z[:8], y, logw, att.beta, path=p)  # compile / load
    block = np.random.default_rng(0).uniform(-30.0, 0.0, size=(256, y.shape[0]))
    out = np.empty_like(block)
    sub = pts[:: 8]
    zs = z[:512]
    threads = limits["cpu"]["numba_threads"] or 1
    per_core = limits["np_exp_per_s_per_core"]
    rates: dict = {"reference": [], "np_exp": []}
    rates.update({p: [] for p in compiled.PATHS})
    for _ in range(reps):
        for p in compiled.PATHS:
            t, _, _ = timed(lambda: compiled.sums(z, y, logw, att.beta, path=p))
            rates[p].append(pts.shape[0] * y.shape[0] / t)
        t, _, _ = timed(lambda: att.mean(sub, y, w, method="reference"))
        rates["reference"].append(sub.shape[0] * y.shape[0] / t)
        t, _, _ = timed(lambda: [np.exp(block, out=out) for _ in range(20)])
        rates["np_exp"].append(20 * block.size / t)
    med = {k: float(np.median(v)) for k, v in rates.items()}
    short_pairs = zs.shape[0] * y.shape[0]
    exp_short = out[:64]
    calls = {p: (lambda p=p: compiled.sums(zs, y, logw, att.beta, path=p)) for p in compiled.PATHS}
    calls["np_exp"] = lambda: np.exp(block[:64], out=exp_short)
    work = dict.fromkeys(compiled.PATHS, short_pairs) | {"np_exp": 64 * y.shape[0]}
    best: dict = {}
    for nthreads in (threads, 1):
        numba.set_num_threads(nthreads)
        try:
            t_min = dict.fromkeys(calls, float("inf"))
            for k in calls:
                calls[k]()
            for _ in range(BEST_OF):  # interleaved: a burst of load hits every contender alike
                for k, fn in calls.items():
                    t_min[k] = min(t_min[k], timed(fn)[0])
        finally:
            numba.set_num_threads(threads)
        best[nthreads] = {k: work[k] / t_min[k] for k in calls}
    paths = {}
    for p in compiled.PATHS:
        paths[p] = {"pairs_per_s": med[p], "per_core_over_np_exp": med[p] / threads / per_core,
                    "best_pairs_per_s": best[threads][p],
                    "best_pairs_per_s_one_thread": best[1][p],
                    "best_per_core_over_np_exp": best[threads][p] / threads / best[threads]["np_exp"],
                    "best_one_thread_over_np_exp": best[1][p] / best[1]["np_exp"]}
    new, old = paths[compiled.PATHS[0]], paths["legacy"]
    default = compiled.kernel_path()
    return {"path": default, "path_info": compiled.path_info(), "paths": paths,
            "cody_waite_over_legacy": new["pairs_per_s"] / old["pairs_per_s"],
            "cody_waite_over_legacy_best_one_thread": (new["best_pairs_per_s_one_thread"]
                                                       / old["best_pairs_per_s_one_thread"]),
            "pairs_per_s_compiled": med[default], "pairs_per_s_reference": med["reference"],
            "np_exp_per_s": med["np_exp"], "compiled_over_np_exp": med[default] / med["np_exp"],
            "threads": threads,
            "compiled_per_core_over_np_exp": med[default] / threads / per_core,
            "reference_over_np_exp": med["reference"] / per_core,
            "compiled_over_reference": med[default] / med["reference"],
            "setup": "GaussGrid(64) face points × cells, B = diag(0.1, 1, 1), β = 30, no culling; "
                     "np.exp on a 256 × 8192 float64 block, in place; best-of-25 figures: 512 "
                     "targets × 8192 sources per call, np.exp on 64 × 8192"}


def step_scaling(reps: int) -> dict:
    """One meanfield-ffsl step at several nlat for Paper 1's B at β = 30; fitted exponent."""
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.diag([1.0, 0.8, 0.2]), 30.0)
    rows = []
    for nlat in STEP_NLATS:
        g = GaussGrid(nlat)
        stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g))
        rho = density("diffuse", g.xyz) / (4 * np.pi)
        dt = 0.05
        for _ in range(2):  # compile, build and keep the target tables
            stepper.step(rho, 0.0, dt)
        ts = [timed(lambda: stepper.step(rho, 0.0, dt))[0] for _ in range(max(reps, 3))]
        rows.append({"nlat": nlat, "t_step": float(np.median(ts))})
        print(f"  step nlat {nlat:4d}: {rows[-1]['t_step']:.3f} s", flush=True)
    lx = np.log([r["nlat"] for r in rows])
    ly = np.log([r["t_step"] for r in rows])
    p, c = np.polyfit(lx, ly, 1)
    res = ly - (p * lx + c)
    se = float(np.sqrt(np.sum(res**2) / max(1, len(lx) - 2) / np.sum((lx - lx.mean()) ** 2)))
    return {"rows": rows, "exponent": float(p), "exponent_se": se, "aim": 3.0,
            "setup": "B = diag(0.1, 1, 1), V = diag(1, 0.8, 0.2), β = 30, density 1 + ½⟨x, a⟩, "
                     "Δt = 0.05"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 repetition")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--subset", type=int, default=2048, help="reference targets (default 2048)")
    ap.add_argument("--out", type=str, default=None)
    ap.add_argument("--skip-steps", action="store_true")
    ap.add_argument("--skip-kernel", action="store_true")
    ap.add_argument("--skip-rows", action="store_true", help="only the kernel line and the yardstick")
    ap.add_argument("--only", type=str, default=None,
                    help="rows to run, e.g. 'density=concentrated,beta=100' (keys B, beta, density)")
    ap.add_argument("--compare-legacy", action="store_true",
                    help="also time each row's auto path on the legacy exponential (issue 23)")
    ap.add_argument("--compare-before", action="store_true",
                    help="also time each row's auto path with the switches of BEFORE as they "
                         "were (issue 23, fifth session)")
    ap.add_argument("--before-set", choices=sorted(BEFORE_SETS), default="fifth",
                    help="the switches --compare-before turns back: 'fifth' (BEFORE, default) "
                         "'sixth' (BEFORE_SIXTH), 'seventh' (BEFORE_SEVENTH) or 'eighth' "
                         "(BEFORE_EIGHTH)")
    args = ap.parse_args(argv)
    _BEFORE_SET[0] = args.before_set
    if args.reps is not None and args.reps < 1:
        ap.error(f"--reps must be ≥ 1, got {args.reps}")
    reps = args.reps or (1 if args.quick else 3)
    grid = GaussGrid(NLAT)
    pts = FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points
    if not 16 <= args.subset <= pts.shape[0]:
        ap.error(f"--subset must be in [16, {pts.shape[0]}], got {args.subset}")
    sub = np.sort(np.random.default_rng(2026).choice(pts.shape[0], args.subset, replace=False))
    load0 = list(os.getloadavg())
    t0 = time.perf_counter()
    limits = machine_limits()
    threads = limits["cpu"]["numba_threads"] or 1
    print(f"yardstick: {limits['cpu']['model']}, np.exp {limits['np_exp_per_s_per_core']:.3g}/s per "
          f"core, dgemm {limits['dgemm_gflops_per_core']:.3g} GFLOP/s per core, copy "
          f"{limits['copy_gb_per_s']:.3g} GB/s; numba SVML {limits['cpu']['numba_svml']}, "
          f"{threads} thread(s)")
    print(f"GaussGrid({NLAT}): {grid.nlat * grid.nlon} sources, {pts.shape[0]} targets; reference "
          f"on {sub.size} targets, scaled ×{pts.shape[0] / sub.size:.1f}; {reps} repetition(s)")
    print(f"{'B':>15} {'beta':>6} {'density':>12}  {'ref[s]':>7} {'auto[s]':>8} {'speedup':>8}"
          f"  {'w.err':>8} {'max.err':>8}  method")
    only = dict(kv.split("=", 1) for kv in args.only.split(",")) if args.only else {}
    rows = []
    for bname, B in ({} if args.skip_rows else matrices()).items():
        for beta in BETAS:
            for dname in ("diffuse", "concentrated"):
                want = {"B": bname, "beta": f"{beta:g}", "density": dname}
                if any(want.get(k) != v for k, v in only.items()):
                    continue
                r = run_row(grid, pts, sub, bname, B, beta, dname, reps, args.compare_legacy,
                            args.compare_before)
                if r["stats"].get("pairs"):  # the pairs the path summed, per core, against exp
                    r["pairs_per_core_over_np_exp"] = (r["stats"]["pairs"] / r["t_auto"] / threads
                                                       / limits["np_exp_per_s_per_core"])
                aim = AIM_DIFFUSE if (dname == "diffuse" and beta <= 100.0 and bname in
                                      ("identity", "diag-0.1", "diag-0.5")) else AIM  # issue 23
                flag = "" if r["speedup"] >= aim and r["weighted_error"] <= TOL else f"  < aim {aim:g}"
                pf = "" if r["pairs_fraction"] is None else f" pairs {r['pairs_fraction']:.3f}"
                leg = ("" if not args.compare_legacy else
                       f"  legacy {r['t_auto_legacy']:.3f} s (×{r['legacy_over_cody_waite']:.2f})")
                if args.compare_before:
                    leg += (f"  before {r['t_auto_before']:.3f} s (×{r['before_over_after']:.2f} "
                            f"[{min(r['before_ratios']):.2f}, {max(r['before_ratios']):.2f}])")
                print(f"{bname:>15} {beta:6g} {dname:>12}  {r['t_ref']:7.2f} {r['t_auto']:8.3f} "
                      f"{r['speedup']:8.1f}  {r['weighted_error']:8.1e} {r['max_error']:8.1e}  "
                      f"{r['method']}{pf}{flag}{leg}", flush=True)
                rows.append(r)
    out = {"rows": rows}
    if not args.skip_kernel:
        out["kernel"] = kernel_rates(max(reps, 2), limits)
        k = out["kernel"]
        print(f"kernel ({k['path']}): compiled {k['pairs_per_s_compiled']:.3g} pairs/s, reference "
              f"{k['pairs_per_s_reference']:.3g} pairs/s, np.exp {k['np_exp_per_s']:.3g}/s "
              f"(compiled/np.exp {k['compiled_over_np_exp']:.2f}; per core against one core's "
              f"np.exp {k['compiled_per_core_over_np_exp']:.2f})")
        for p, v in k["paths"].items():
            print(f"  {p:>10}: per core / np.exp {v['per_core_over_np_exp']:.2f} (median), best "
                  f"{v['best_per_core_over_np_exp']:.2f} on {k['threads']} thread(s), "
                  f"{v['best_one_thread_over_np_exp']:.2f} on one")
    if not args.skip_steps:
        out["steps"] = step_scaling(reps)
        print(f"mean-field step ∝ nlat^{out['steps']['exponent']:.2f} "
              f"± {out['steps']['exponent_se']:.2f} (aim ≤ 3)")
    out["benchmark"] = "python benchmarks/bench_attention.py " + " ".join(sys.argv[1:] if argv is None
                                                                         else argv)
    out["meta"] = {"yardstick": limits, "attention_exp": compiled.path_info(),
                   "grid": f"GaussGrid({NLAT})", "sources": grid.nlat * grid.nlon,
                   "targets": int(pts.shape[0]), "tol": TOL, "reps": reps,
                   "aims": {"every_row": AIM, "diffuse_identity_diag": AIM_DIFFUSE},
                   "vmf_kappa": KAPPA, "floor": FLOOR, "a": A_DIR.tolist(),
                   "before_set": (None if not args.compare_before else
                                  {"name": args.before_set,
                                   "switches": [[m.__name__, n, v] for m, n, v
                                                in BEFORE_SETS[args.before_set]]}),
                   "machine": platform.platform(), "python": platform.python_version(),
                   "numpy": np.__version__, "cpus": os.cpu_count(),
                   "elapsed_s": time.perf_counter() - t0,
                   "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                   "loadavg_start": load0, "loadavg_end": list(os.getloadavg())}
    print(f"total {out['meta']['elapsed_s']:.0f} s")
    path = args.out or (None if args.quick else str(ROOT / "benchmarks" / "results" / "attention.json"))
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(out, indent=1))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
