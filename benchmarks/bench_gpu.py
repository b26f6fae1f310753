"""The PyTorch/Triton attention backend on a GPU: accuracy, speed against the numpy float64
reference in the same run, N-particle RK4 steps up to N = 10⁶, and the particle side of the
density-versus-particles comparison measured as far as the budget allows (down to 2.5e-3 at
N = 3·10⁵ in the recorded runs; 1e-3 needs N ≈ 2·10⁶).

The recorded runs (results/gpu_run1..3.json) were made while the kernel was developed: run 1 used
a one-pass kernel, run 2 tuned a per-coordinate variant, run 3 the two-pass kernel now in
torch_sums (its numpy RK4 reference at N = 10⁵ came from an earlier version of this script
that timed numpy at the first size; ``--numpy-max-n`` does it now).

    python benchmarks/bench_gpu.py reference          # CPU, here: the density reference (≈ 1–2 min)
    python benchmarks/bench_gpu.py run [--budget S]   # on the GPU machine (or --quick on a CPU)
    python benchmarks/bench_gpu.py summary results/gpu_run*.json [--out F]   # merge convergence runs

``reference`` runs the density solver on GaussGrid(64) for the `bench_density_vs_particles.py`
set-up (Paper-1 metastability Q, K, V, β = 10, t = 2) and writes its harmonic moments (l ≤ 4)
to ``results/gpu_reference.json``; ``run`` needs that file (the GPU machine has no shtns).

``run`` sections, each appended to ``results/gpu.json`` (or ``--out``) as soon as it finishes,
so an interrupted or timed-out run keeps what it measured:

1. ``tune``      — fused-kernel block sizes, n = m = 2¹⁶, fastest kept for the rest of the run.
2. ``accuracy``  — fused/blocked × float64/float32 against the numpy reference: density on
   GaussGrid(64) (diffuse and vMF κ = 200 + 1e-12 floor), 2048 targets, β ∈ {1, 10, 100, 10³,
   10⁴}, B = I and diag(0.1, 1, 1), softmax and usa: density-weighted relative error of the mean
   and the worst relative error.
3. ``velocity``  — the `bench_attention.py` problem: GaussGrid(128) (32 768 sources), the 65 792
   FFSL face points as targets, β ∈ {1, 10, 100, 1000}, B = diag(0.1, 1, 1) and I: the numpy
   reference on a 4096-target subset (scaled to all targets, as there) against "auto" (fused
   float64 at tol 1e-8, float32 at 1e-4), medians of interleaved repetitions.
4. ``particles`` — one RK4 step of ParticleODE (Paper-1 set-up, β = 10) at N = 10⁴ (numpy
   reference timed too, up to NUMPY_MAX_N), 10⁵, 10⁶: float64 and float32.
5. ``convergence`` — particles sampled from the initial density, run to t = 2 (dt = 0.05, RK4) on
   the GPU, harmonic-moment error against the density reference: N = 10³ … 10⁶ (float64 up to
   10⁵, float32 from 10⁵ on: its error ~1e-6 is far below the sampling error), seeds as the
   budget allows.  Items whose predicted time (from the measured pair rate) would overrun
   ``--budget`` are skipped and listed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import torch_sums  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.grids.sampling import sample_density  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE  # noqa: E402
from spherepde.validation.metrics import harmonic_moments  # noqa: E402
from spherepde.experiments.metastability import MetastabilityConfig, initial_density  # noqa: E402

RESULTS = Path(__file__).with_name("results")
REFERENCE = RESULTS / "gpu_reference.json"
BETA, T_END, LMAX, DT, NREF = 10.0, 2.0, 4, 0.05, 64
#: the numpy reference RK4 step is timed only up to this N (231 s at N = 10⁵ on 16 cores)
NUMPY_MAX_N = 20_000  # (--numpy-max-n)


def paper1_attention(beta: float = BETA) -> Attention:
    cfg = MetastabilityConfig()
    return Attention(*(np.asarray(m, float) for m in (cfg.Q, cfg.K, cfg.V)), beta)


# ---- reference (CPU) -----------------------------------------------------------------------------
def make_reference() -> None:
    from spherepde.solvers import make_stepper  # noqa: PLC0415
    from spherepde.solvers.controller import Controller  # noqa: PLC0415
    from spherepde.validation.metrics import as_measure  # noqa: PLC0415

    cfg, att = MetastabilityConfig(), paper1_attention()
    g = GaussGrid(NREF)
    t0 = time.perf_counter()
    st = make_stepper("meanfield-ffsl", g, DensityAttention(att, g), courant=cfg.courant)
    res = Controller(st, dt=cfg.courant * g.dlon / float(np.linalg.norm(att.V, 2))).run(
        initial_density(g, cfg.init_a), (0.0, T_END))
    mom = harmonic_moments(*as_measure(g, res.state), LMAX)
    RESULTS.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps({
        "what": "harmonic moments (l <= 4) of the meanfield-ffsl density at t_end",
        "nlat": NREF, "beta": BETA, "t_end": T_END, "lmax": LMAX, "config": cfg.to_dict(),
        "seconds": round(time.perf_counter() - t0, 1),
        "moments_real": mom.real.tolist(), "moments_imag": mom.imag.tolist()}, indent=1))
    print(f"wrote {REFERENCE} ({time.perf_counter() - t0:.0f} s)")


# ---- GPU run -------------------------------------------------------------------------------------
class Report:
    """results JSON, rewritten after every section (nothing measured is lost on a timeout)."""

    def __init__(self, path: Path, budget: float) -> None:
        self.path, self.t0, self.budget = path, time.perf_counter(), budget
        self.data = {"benchmark": "gpu", "env": env_info(), "budget_s": budget, "skipped": []}

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.t0)

    def save(self, key=None, value=None) -> None:
        if key is not None:
            self.data[key] = value
        self.data["elapsed_s"] = round(time.perf_counter() - self.t0, 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=float))
        tmp.replace(self.path)

    def skip(self, what: str, need: float) -> None:
        self.data["skipped"].append({"item": what, "predicted_s": round(need, 1),
                                     "left_s": round(self.left(), 1)})
        print(f"skip {what}: needs ≈ {need:.0f} s, {self.left():.0f} s left", flush=True)


def env_info() -> dict:
    import torch  # noqa: PLC0415

    info = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
            "device": str(torch_sums.device()), "cpus": os.cpu_count(),
            "fused_kernel": torch_sums.fused_available()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    try:
        import triton  # noqa: PLC0415
        info["triton"] = triton.__version__
    except ImportError:
        pass
    return info


def unit(rng, n, d=3):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(fn, reps=3):
    """(median seconds, last result) of ``reps`` calls after one warm-up call."""
    out = fn()
    secs = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t)
    return statistics.median(secs), out


def tune(rep: Report, quick: bool) -> None:
    """Time the fused kernel's block configurations at n = m = 2¹⁶ and keep the fastest."""
    if not torch_sums.fused_available():
        rep.save("tune", {"note": "no fused kernel here (no CUDA/Triton): blocked path only"})
        return
    rng = np.random.default_rng(0)
    n = 2**8 if quick else 2**16
    z, y = 10.0 * unit(rng, n), unit(rng, n)
    lw = np.full(n, -math.log(n))
    cands = {"float32": [(64, 32, 4), (128, 32, 8), (64, 64, 8), (128, 16, 4), (256, 16, 8)],
             "float64": [(32, 32, 4), (64, 16, 4), (32, 16, 2), (64, 32, 8)]}
    out = {"n": n, "configs": [], "chosen": {}}
    for prec, cs in cands.items():
        best = (math.inf, cs[0])
        for c in cs:
            torch_sums.FUSED_BLOCKS[prec] = c
            row = {"precision": prec, "blocks": c}
            try:
                sec, _ = timed(lambda: torch_sums.sums(z, y, lw, 1.0, precision=prec,
                                                            fused=True), reps=3)
                row.update(seconds=sec, pairs_per_s=n * n / sec)
                best = min(best, (sec, c))
            except Exception as exc:  # noqa: BLE001  (a configuration the compiler refuses)
                row["error"] = repr(exc)[:300]
            out["configs"].append(row)
            print("tune", row, flush=True)
        torch_sums.FUSED_BLOCKS[prec] = out["chosen"][prec] = best[1]
        rep.save("tune", out)
    print("tune chosen:", out["chosen"], flush=True)


def accuracy(rep: Report, quick: bool) -> None:
    grid = GaussGrid(32 if quick else 64)
    y = grid.xyz.reshape(-1, 3)
    a = np.array([1.0, 2.0, 0.5]) / np.linalg.norm([1.0, 2.0, 0.5])
    dens = {"diffuse": 1.0 + 0.5 * grid.xyz[..., 0],
            "concentrated": np.exp(200.0 * (grid.xyz @ a - 1.0)) + 1e-12}
    idx = np.random.default_rng(1).choice(y.shape[0], min(2048, y.shape[0]), replace=False)
    fused_ok = torch_sums.fused_available()
    rows = []
    for Bname, B in (("I", np.eye(3)), ("diag(0.1,1,1)", np.diag([0.1, 1.0, 1.0]))):
        for beta in (1.0, 10.0, 100.0, 1e3, 1e4):
            for kind in ("softmax", "usa"):
                if kind == "usa" and beta > 100:
                    continue  # e^{β(|Bᵀx| − 1)} spans more than float64 far from the mass
                att = Attention(np.eye(3), B, np.eye(3), beta, kind=kind)
                for dname, rho in dens.items():
                    w = (rho * grid.cell_area).reshape(-1)
                    x, wt = y[idx], w[idx]
                    ref = att.mean(x, y, w, method="reference")
                    z = x @ att.B
                    keep = w > 0
                    for prec in ("float64", "float32"):
                        for fused in ((True, False) if fused_ok else (False,)):
                            m = torch_sums.mean_direct(z, y[keep], np.log(w[keep]), beta, kind,
                                                            precision=prec, fused=fused)
                            e = np.linalg.norm(m - ref, axis=1)
                            r = np.linalg.norm(ref, axis=1)
                            rows.append({"B": Bname, "beta": beta, "kind": kind, "density": dname,
                                         "precision": prec, "fused": fused,
                                         "weighted_rel": float(np.sum(wt * e) / np.sum(wt * r)),
                                         "max_rel": float(np.max(np.where(r > 0, e / np.where(r > 0, r, 1), 0)))})
        rep.save("accuracy", rows)
    worst = {}
    for r in rows:
        k = f"{r['precision']}/{'fused' if r['fused'] else 'blocked'}"
        worst[k] = max(worst.get(k, 0.0), r["weighted_rel"] / max(1.0, r["beta"]))
    rep.save("accuracy_worst_per_unit_beta", worst)
    print("accuracy (worst weighted rel / max(1, β)):", worst, flush=True)


def velocity(rep: Report, quick: bool) -> None:
    from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: PLC0415

    grid = GaussGrid(32 if quick else 128)
    pts = FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points
    sub = np.random.default_rng(0).choice(pts.shape[0], min(4096, pts.shape[0]), replace=False)
    a = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    dens = {"diffuse": 1.0 + 0.5 * (grid.xyz @ a),
            "concentrated": np.exp(50.0 * (grid.xyz @ a - 1.0)) + 1e-12}
    rows = []
    for Bname, B in (("diag(0.1,1,1)", np.diag([0.1, 1.0, 1.0])), ("I", np.eye(3))):
        for beta in (1.0, 10.0, 100.0, 1000.0):
            att = Attention(np.eye(3), B, np.eye(3), beta)
            for dname, rho in dens.items():
                ref_fn = lambda: att.velocity(pts[sub], grid.xyz.reshape(-1, 3),  # noqa: E731
                                              (rho * grid.cell_area).reshape(-1), method="reference")
                runs = {"ref_subset": ref_fn}
                for tol in (1e-8, 1e-4):
                    da = DensityAttention(att, grid, tol=tol)
                    runs[f"auto@{tol:g}"] = (lambda da=da: da(0.0, pts, rho))
                secs = {k: [] for k in runs}
                outs = {}
                for k, f in runs.items():  # warm-up (compiles the kernel once)
                    outs[k] = f()
                for _ in range(2 if quick else 3):
                    order = list(runs)
                    random.shuffle(order)
                    for k in order:
                        t = time.perf_counter()
                        outs[k] = runs[k]()
                        secs[k].append(time.perf_counter() - t)
                ref_full = statistics.median(secs["ref_subset"]) * pts.shape[0] / len(sub)
                row = {"B": Bname, "beta": beta, "density": dname, "targets": int(pts.shape[0]),
                       "sources": int(grid.xyz.reshape(-1, 3).shape[0]), "ref_s_scaled": ref_full}
                for tol in (1e-8, 1e-4):
                    k = f"auto@{tol:g}"
                    sec = statistics.median(secs[k])
                    v, vr = outs[k][sub], outs["ref_subset"]  # face points: unweighted errors
                    row[k] = {"seconds": sec, "speedup": ref_full / sec,
                              "max_abs_err_velocity": float(np.max(np.abs(v - vr))),
                              "rel_err_velocity": float(np.sum(np.linalg.norm(v - vr, axis=1))
                                                        / np.sum(np.linalg.norm(vr, axis=1)))}
                rows.append(row)
                print(f"velocity B={Bname} β={beta:g} {dname}: ref {ref_full:.2f} s, "
                      f"auto@1e-8 {row['auto@1e-08']['seconds'] * 1e3:.1f} ms "
                      f"({row['auto@1e-08']['speedup']:.0f}×), auto@1e-4 "
                      f"{row['auto@0.0001']['seconds'] * 1e3:.1f} ms", flush=True)
            rep.save("velocity", rows)


def particles(rep: Report, quick: bool, sizes=None, numpy_max_n: int = NUMPY_MAX_N) -> dict:
    """RK4 step times; returns measured pair rates (pairs per second per evaluation)."""
    att = paper1_attention()
    rng = np.random.default_rng(2)
    sizes = sizes or ((1000, 4000, 16000) if quick else (10**4, 10**5, 10**6))
    rows, rates = [], {}
    for n in sizes:
        x = unit(rng, n)
        plans = [("torch", "float64"), ("torch-float32", "float32")]
        if n <= numpy_max_n:
            plans.insert(0, ("reference", "numpy float64"))
        for method, label in plans:
            pairs = 4.0 * n * n
            rate = rates.get(method)
            need = 2 * pairs / rate if rate else 0.0
            if need > 0.25 * rep.left():
                rep.skip(f"rk4 step N={n} {method}", need)
                continue
            ode = ParticleODE(att, attention_method=method)
            ode.step(x[: min(n, 1000)], 0.0, DT)  # warm-up / compile
            t = time.perf_counter()
            ode.step(x, 0.0, DT)
            sec = time.perf_counter() - t
            rates[method] = pairs / sec
            rows.append({"N": n, "method": method, "precision": label, "rk4_step_s": sec,
                         "pairs_per_s": pairs / sec})
            print(f"rk4 step N={n} {method}: {sec:.3f} s ({pairs / sec:.3g} pairs/s)", flush=True)
            rep.save("particles", rows)
    ref = {r["N"]: r["rk4_step_s"] for r in rows if r["method"] == "reference"}
    for r in rows:
        if r["N"] in ref and r["method"] != "reference":
            r["speedup_vs_numpy"] = ref[r["N"]] / r["rk4_step_s"]
    rep.save("particles", rows)
    return rates


def convergence(rep: Report, quick: bool, rates: dict, plan_arg=None) -> None:
    if not REFERENCE.exists():
        rep.save("convergence", {"error": f"{REFERENCE} missing: run `bench_gpu.py reference` first"})
        return
    refd = json.loads(REFERENCE.read_text())
    ref = np.asarray(refd["moments_real"]) + 1j * np.asarray(refd["moments_imag"])
    cfg, att = MetastabilityConfig(), paper1_attention()
    g0 = GaussGrid(refd["nlat"])
    rho0 = initial_density(g0, cfg.init_a)
    steps = math.ceil(T_END / DT - 1e-9)
    # largest N early (one seed), second seeds afterwards; N = 10⁵ in both precisions with the
    # same seed shows what float32 changes in the observable
    plan = ([(1000, "torch", 3), (4000, "torch", 1), (4000, "torch-float32", 1)] if quick else
            [(1000, "torch", 3), (10**4, "torch", 3), (10**5, "torch", 2), (10**5, "torch-float32", 1),
             (10**6, "torch-float32", 1), (3 * 10**5, "torch-float32", 2), (10**6, "torch-float32", 2)])
    if plan_arg:
        plan = [(int(float(a)), b, int(c)) for a, b, c in (item.split(":") for item in plan_arg)]
    rows, first = [], {}
    for n, method, nseeds in plan:
        rate = rates.get(method) or rates.get("torch") or 1e9
        per_run = 4.0 * steps * n * n / rate * 1.1 + 0.5
        done = next((r for r in rows if (r["N"], r["method"]) == (n, method)), None)
        errs, secs = (done["errors"], done["seconds"]) if done else ([], [])
        for seed in range(len(errs), nseeds):
            if per_run > rep.left() - 5:
                rep.skip(f"convergence N={n} {method} seed {seed}", per_run)
                break
            x0 = sample_density(g0, rho0, n, seed=seed)
            t = time.perf_counter()
            res = ParticleODE(att, attention_method=method).run(x0, (0.0, T_END), dt=DT)
            secs.append(time.perf_counter() - t)
            mom = harmonic_moments(res.state, np.full(n, 1.0 / n), LMAX)
            errs.append(float(np.linalg.norm(mom - ref)))
            if seed == 0:
                first[(n, method)] = mom
            print(f"convergence N={n} {method} seed {seed}: error {errs[-1]:.3e}, {secs[-1]:.1f} s",
                  flush=True)
            if errs:
                row = {"N": n, "method": method, "seeds": len(errs), "errors": errs,
                       "rms_error": float(np.sqrt(np.mean(np.square(errs)))), "seconds": secs,
                       "mean_seconds": float(np.mean(secs))}
                rows = [r for r in rows if (r["N"], r["method"]) != (n, method)] + [row]
                diffs = {f"N={k[0]}": float(np.linalg.norm(first[k] - first[(k[0], "torch-float32")]))
                         for k in first if k[1] == "torch" and (k[0], "torch-float32") in first}
                rep.save("convergence", {"beta": BETA, "t_end": T_END, "dt": DT, "lmax": LMAX,
                                         "reference_nlat": refd["nlat"], "runs": rows,
                                         "float64_vs_float32_same_seed": diffs})


def run(args) -> None:
    out = Path(args.out) if args.out else RESULTS / ("gpu_quick.json" if args.quick else "gpu.json")
    rep = Report(out, args.budget)
    print("env:", rep.data["env"], flush=True)
    rep.save()
    for name, fn in (("tune", tune), ("accuracy", accuracy), ("velocity", velocity)):
        if name in args.skip:
            continue
        t = time.perf_counter()
        try:
            fn(rep, args.quick)
        except Exception as exc:  # noqa: BLE001  (keep the other sections)
            rep.save(f"{name}_error", repr(exc)[:2000])
            print(f"{name} failed: {exc!r}", flush=True)
        print(f"[{name}: {time.perf_counter() - t:.0f} s, {rep.left():.0f} s left]", flush=True)
    rates = {}
    try:
        if "particles" not in args.skip:
            rates = particles(rep, args.quick, [int(float(v)) for v in args.particle_sizes or []],
                              args.numpy_max_n)
    except Exception as exc:  # noqa: BLE001
        rep.save("particles_error", repr(exc)[:2000])
        print(f"particles failed: {exc!r}", flush=True)
    try:
        if "convergence" not in args.skip:
            convergence(rep, args.quick, rates, args.plan)
    except Exception as exc:  # noqa: BLE001
        rep.save("convergence_error", repr(exc)[:2000])
        print(f"convergence failed: {exc!r}", flush=True)
    rep.save()
    print(f"wrote {out} ({rep.data['elapsed_s']} s)")


def summary(paths) -> dict:
    """Merge the convergence runs of several result files (same seeds give the same paths, so
    repeated (N, method, seed) runs are counted once) and fit error ∝ N^p over the float64 and
    float32 runs together (float32 changes the observable by ≈ 1e-10 at N = 10⁵, far below the
    sampling error)."""
    from spherepde.validation.fits import fit_order  # noqa: PLC0415

    per = {}
    for path in paths:
        d = json.loads(Path(path).read_text())
        for r in (d.get("convergence") or {}).get("runs", []):
            for seed, (e, sec) in enumerate(zip(r["errors"], r["seconds"])):
                per.setdefault(r["N"], {}).setdefault(seed, (e, sec, r["method"], Path(path).name))
    rows = []
    for n in sorted(per):
        errs = [v[0] for v in per[n].values()]
        rows.append({"N": n, "seeds": len(errs), "rms_error": float(np.sqrt(np.mean(np.square(errs)))),
                     "errors": errs, "seconds_per_run": [v[1] for v in per[n].values()],
                     "methods": sorted({v[2] for v in per[n].values()}),
                     "files": sorted({v[3] for v in per[n].values()})})
    p, se = fit_order([r["N"] for r in rows], [r["rms_error"] for r in rows])
    out = {"what": "particle harmonic-moment error (l <= 4, t = 2, beta = 10) against the nlat-64 "
                   "density, GPU particle runs merged from " + ", ".join(Path(x).name for x in paths),
           "runs": rows, "rate": {"exponent": p, "stderr": se, "monte_carlo": -0.5}}
    for r in rows:
        print(f"N = {r['N']:>7}: rms error {r['rms_error']:.3e} over {r['seeds']} seeds "
              f"({', '.join(r['methods'])}); {np.mean(r['seconds_per_run']):.1f} s per run")
    print(f"error ∝ N^({p:.3f} ± {se:.3f})")
    return out


def plot_summary(out: dict, path: Path) -> Path:
    """Error against N (log–log), each seed and the RMS, with the fitted power law."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = out["runs"]
    ns = np.array([r["N"] for r in rows], float)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for r in rows:
        ax.plot([r["N"]] * len(r["errors"]), r["errors"], "o", color="0.7", ms=4)
    ax.plot(ns, [r["rms_error"] for r in rows], "o-", color="C0", label="RMS over seeds (GPU particles)")
    rate = out["rate"]
    errs = np.array([r["rms_error"] for r in rows])
    c = math.exp(np.mean(np.log(errs) - rate["exponent"] * np.log(ns)))  # least-squares intercept
    ax.plot(ns, c * ns ** rate["exponent"], "--", color="C1",
            label=f"fit N^({rate['exponent']:.3f} ± {rate['stderr']:.3f})")
    ax.axhline(1e-3, color="C3", lw=0.8, label="target 1e-3 (density: nlat 32 in 8.8 s)")
    ax.set(xscale="log", yscale="log", xlabel="N particles", ylabel="harmonic-moment error (l ≤ 4)",
           title="particles vs density, β = 10, t = 2")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("reference", help="density reference moments (CPU)")
    sm = sub.add_parser("summary", help="merge the convergence runs of result files")
    sm.add_argument("files", nargs="+")
    sm.add_argument("--out", help="write the merged JSON here")
    sm.add_argument("--plot", help="write a PNG of error against N here")
    r = sub.add_parser("run", help="the GPU benchmark")
    r.add_argument("--quick", action="store_true", help="small sizes (a CPU check of the script)")
    r.add_argument("--budget", type=float, default=420.0, help="seconds; later items are skipped")
    r.add_argument("--skip", nargs="*", default=[],
                   choices=["tune", "accuracy", "velocity", "particles", "convergence"])
    r.add_argument("--particle-sizes", nargs="*", help="N for the RK4 step timings (those up "
                   "to NUMPY_MAX_N also timed with numpy)")
    r.add_argument("--numpy-max-n", type=int, default=NUMPY_MAX_N,
                   help="time the numpy RK4 reference up to this N (default %(default)s)")
    r.add_argument("--plan", nargs="*", help="convergence runs as N:method:seeds, e.g. "
                   "1e6:torch-float32:1")
    r.add_argument("--out")
    args = p.parse_args()
    if args.cmd == "reference":
        make_reference()
    elif args.cmd == "summary":
        out = summary(args.files)
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=1))
        if args.plot:
            print("wrote", plot_summary(out, Path(args.plot)))
    else:
        run(args)


if __name__ == "__main__":
    main()
