"""Cost of the SPDE (common transport noise) against the deterministic mean-field step, where the
noise's time goes, and how many ensemble realisations an hour this machine gives with w workers.

    python benchmarks/bench_spde.py             # nlat 32, 64, 128 + ensembles at 32, 64 (≈ 45 min
                                                # on the shared 2-core box); writes results/spde.json
    python benchmarks/bench_spde.py --quick     # nlat 32, 64, few repetitions, ensemble at 32 with
                                                # w = 0, 1, 2 only; prints only (unless --out)
    python benchmarks/bench_spde.py --out PATH  # write the JSON somewhere else (also with --quick)
    python benchmarks/bench_spde.py --skip-ensemble | --skip-steps   # one part only (--merge: keep
                                                # the other part of the existing JSON)
    python benchmarks/bench_spde.py --ensemble-passes 2              # each worker count twice
    python benchmarks/bench_spde.py --blas-threads N                 # default 1, see below

Part 1 — one step, per GaussGrid(nlat), all on the same density (the ensemble's initial vMF
density, concentration 3), interleaved in a shuffled order within each repetition:

* ``mf@dt``          — ONE ``MeanFieldFFSL(grid, drift).step`` (midpoint rule: two drift
                       evaluations at the face points, two FFSL–PPM transports);
* ``spde[n]@dt``     — ONE ``SPDEFFSL(grid, drift, noise=NoiseField, path=BrownianPath,
                       scheme="stratonovich").step`` with the same drift: the same two drift
                       evaluations and transports plus the noise velocity (path increment, field
                       at the face points) and whatever sub-steps the rough increment adds;
  drifts: ``DensityAttention(Attention(Q, K, V, β=10), grid)`` with the Paper-1 set Q = I,
  K = diag(0.1, 1, 1), V = diag(1, 0.5, 0.1) (``paper1``: not ∝ orthogonal, Attention's
  culled/reference sums) and with K = I (``B=I``: the spectral Funk–Hecke path);
  noise: ``NoiseField(NoiseKernel("relu", d=3, σ_u=0.5, σ_w=0.5), variance_fraction=0.999)``
  (n = ``auto``: n_max = 4) and n_max = 16, 32;
  dt: the Courant-0.8 step of the drift at the initial density (``mf.stable_dt``) and 0.01.
  A drift whose mean-field step (two evaluations) takes more than ``--slow`` seconds (paper1 at
  nlat 128: tens of seconds) is timed for mf and spde[auto] at the Courant step only, 2 calls each.
  ``spde_before[auto]@courant`` (B = I only) is the SPDE step with the two fixes below undone
  (noise-field basis cache off, the path emulating the old BrownianPath): before/after side by side.

* the noise alone, against a pure transport step:
  ``transport@dt``    — ``ffsl_ppm(...).advance`` with the paper1 drift's face velocities frozen
                        (what one stage of the mean-field step costs without the drift evaluation);
  ``noise_step[n]@dt``— ``SPDEFFSL(grid, None, noise=…, path=…).step`` (drift off): the whole
                        noise overhead of a step; ``noise_step_before[n]@dt`` the same before the
                        fixes;
  and its parts: ``increment[n]@dt`` (``BrownianPath.increment`` of the step, the path advancing
  as in a run; ``increment_before`` the old path), ``field[n]`` (``NoiseField.tangent_values`` at
  the face points; ``field_uncached`` with the basis cache off, i.e. ``SphericalHarmonics.evaluate``
  every call as before the fix), ``project`` (Cartesian face velocities → FFSL face components),
  ``advance_noise[n]@dt`` (the transport by frozen noise face velocities, cycling over 8
  increments: includes the sub-steps forced by the increment's deformation number).
  Sub-steps (``stepper.substeps``: extra sweeps of one ring in the zonal sweeps plus extra
  meridional sweeps) are counted per step over the timed calls.

The path of each timed stepper runs on [0, 1024 dt] and the step time advances by dt with every
call (as in a run, so the increment descends the Brownian tree to fresh nodes); the density is
not advanced (every call does the same work).  Each sample is a batch of calls lasting
≥ ``min_sample``; reported: medians over repetitions, ratios = median over repetitions of the
ratio measured within one repetition (wall clock; process CPU time recorded too).  A cProfile
summary (top functions by cumulative time) of a few steps is stored in the JSON.

Part 2 — ensembles: ``run_ensemble(ensemble_raw(nlat, t_end = n_steps·dt), R, folder,
workers=w)`` (the sweep over the realisations of a run configuration with Paper 1's attention and
the noise, dt = 0.02; a dask LocalCluster of w single-threaded processes;
w = 0 runs serially in this process), w = 0, 1, 2, 3, 4, plus w = 1, 2 with the workers started
without dask's default ``MALLOC_TRIM_THRESHOLD_=65536`` (``--ensemble-passes`` passes, each in a
shuffled order; medians).  n_steps is chosen from a calibration run so that one realisation takes
~``--target`` seconds.  Reported: wall time, realisations/hour, steps/hour, speed-up against w = 1
and against w = 0, parallel efficiency (speed-up vs w = 1, divided by w), the fixed cost of the
cluster (wall(w = 1) − wall(w = 0), and LocalCluster + Client start, first tiny task and close
timed alone), and the CPU seconds this process and its worker processes used (``cores_used`` =
CPU / wall: how much of the shared machine a run actually got; ``realisations_per_core_hour``).

BLAS threads: ``--blas-threads`` (default 1) sets OPENBLAS/OMP/MKL_NUM_THREADS before numpy is
imported — the ensemble workers run single-threaded, and on the loaded 2-core machine OpenBLAS'
threads made small matrix products 10–30× slower and erratic (see benchmarks/README.md).
The machine is shared: only ratios measured in the same run mean anything.
"""
from __future__ import annotations

import os
import sys

_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _blas_threads(argv) -> str:
    for i, a in enumerate(argv):
        if a == "--blas-threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--blas-threads="):
            return a.split("=", 1)[1]
    return "1"


if __name__ == "__main__":  # before numpy is imported (dask workers re-import this module)
    for _v in _THREAD_VARS:
        os.environ[_v] = _blas_threads(sys.argv[1:])

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import spherepde.noise.field as noise_field  # noqa: E402
from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.noise import BrownianPath, NoiseField, NoiseKernel  # noqa: E402
from spherepde.noise.brownian import CHUNK  # noqa: E402
from spherepde.solvers.eulerian.meanfield import MeanFieldFFSL  # noqa: E402
from spherepde.solvers.eulerian.spde import SPDEFFSL  # noqa: E402
from spherepde.runs.config import RunConfig  # noqa: E402
from spherepde.runs.ensemble import run_ensemble  # noqa: E402
from spherepde.runs.execute import run  # noqa: E402
from spherepde.runs.sweep import _run_member  # noqa: E402

from _common import batch  # noqa: E402  (this folder: the timing helpers of every benchmark)

AIM = 1.5  # issue target: SPDE step <= AIM x the deterministic step on the same grid
BETA = 10.0
Q = np.eye(3)
V = np.diag([1.0, 0.5, 0.1])
DRIFTS = {"paper1": np.diag([0.1, 1.0, 1.0]), "B=I": np.eye(3)}
KERNEL = dict(activation="relu", d=3, sigma_u=0.5, sigma_w=0.5)
VARIANCE_FRACTION = 0.999
TRUNCATIONS = ("auto", 16, 32)
DT_FIXED = 0.01
ENSEMBLE_DT = 0.02
ENSEMBLE_OUTPUTS = 4
PATH_STEPS = 1024  # the timed paths run on [0, PATH_STEPS dt]


# ---- helpers ---------------------------------------------------------------------------------
class LegacyPath(BrownianPath):
    """BrownianPath without the fix of its cost (same numbers bitwise): CHUNK normals drawn per
    chunk and sliced, and every query descends the tree (no memory of the last B(t)).  Since
    issue 22.10 on the horizon-free path (unit-interval increments, a bridge tree in each)."""

    def _normals(self, k: int, level: int, index: int) -> np.ndarray:
        out = np.empty(self.size)
        code = 2 * k if k >= 0 else -2 * k - 1
        for c, a in enumerate(range(0, self.size, CHUNK)):
            b = min(self.size, a + CHUNK)
            ss = np.random.SeedSequence(self.seed, spawn_key=(self.realisation, code, level, index, c))
            out[a:b] = np.random.Generator(np.random.PCG64(ss)).standard_normal(CHUNK)[: b - a]
        return self._sign * out

    def __call__(self, t: float) -> np.ndarray:
        self._last = None
        return super().__call__(t)


class _NoBasisCache:
    """Context: NoiseField evaluates through SphericalHarmonics.evaluate every call (as before)."""

    def __enter__(self):
        self._saved = noise_field.BASIS_CACHE_BYTES
        noise_field.BASIS_CACHE_BYTES = 0

    def __exit__(self, *exc):
        noise_field.BASIS_CACHE_BYTES = self._saved


def _uncached(fn):
    def run():
        with _NoBasisCache():
            fn()
    return run


class Clock:
    """Step times t_k = (k mod PATH_STEPS) dt, advancing with every call."""

    def __init__(self, dt: float):
        self.dt, self.k = dt, 0

    def __call__(self) -> float:
        t = (self.k % PATH_STEPS) * self.dt
        self.k += 1
        return t


def make_noise(n) -> NoiseField:
    k = NoiseKernel(KERNEL["activation"], d=KERNEL["d"], sigma_u=KERNEL["sigma_u"], sigma_w=KERNEL["sigma_w"])
    if n == "auto":
        return NoiseField(k, variance_fraction=VARIANCE_FRACTION)
    return NoiseField(k, nmax=n)


def make_path(noise: NoiseField, dt: float, legacy: bool = False) -> BrownianPath:
    cls = LegacyPath if legacy else BrownianPath
    return cls(noise.shape, seed=0)  # no horizon (issue 22.10); dt kept for the callers


class Counted:
    """A timed variant: fn() plus the stepper (or transport) whose sub-steps are counted per call
    (around each call: several variants may share one transport)."""

    def __init__(self, fn, stepper=None):
        self.fn, self.stepper, self.calls, self.sub = fn, stepper, 0, 0

    def __call__(self):
        if self.stepper is None:
            self.fn()
        else:
            s0 = self.stepper.substeps
            self.fn()
            self.sub += self.stepper.substeps - s0
        self.calls += 1

    def substeps_per_call(self):
        if self.stepper is None or not self.calls:
            return None
        return self.sub / self.calls


def step_variant(stepper, rho, dt) -> Counted:
    clock = Clock(dt)
    return Counted(lambda: stepper.step(rho, clock(), dt), stepper)


def measure(fns: dict, reps: int, min_sample: float, rng, slow: float = 5.0):
    """Interleaved, shuffled repetitions; batches >= min_sample.  The first call of each variant
    is a warm-up, except that a call longer than ``slow`` seconds counts as a sample (the caller
    asks for one repetition then: 2 samples)."""
    inner, samples, cpu = {}, {k: [] for k in fns}, {k: [] for k in fns}
    for k, fn in fns.items():
        c = []
        one = batch(fn, 1, cpu=c)  # warm-up (caches, basis tables, numba kernels)
        if one > slow:
            inner[k] = 1
            samples[k].append(one)
            cpu[k].append(c[0])
            continue
        if one < min_sample:
            one = min(one, min(batch(fn, 1) for _ in range(2)))
        inner[k] = max(1, int(math.ceil(min_sample / max(one, 1e-9))))
    names = list(fns)
    for _ in range(reps):
        for k in rng.permutation(names):
            samples[k].append(batch(fns[k], inner[k], cpu=cpu[k]))
    return ({k: np.array(v) for k, v in samples.items()}, inner,
            {k: np.array(v) for k, v in cpu.items()})


def _ratio(samples, a, b):
    """Median of the per-repetition ratios a/b (over the repetitions both have)."""
    if a not in samples or b not in samples:
        return None
    n = min(len(samples[a]), len(samples[b]))
    return float(np.median(samples[a][:n] / samples[b][:n]))


def profile_lines(fn, n: int, top: int = 14) -> dict:
    """cProfile of n calls: total seconds and the top functions by cumulative time."""
    pr = cProfile.Profile()
    t = time.perf_counter()
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    wall = time.perf_counter() - t
    s = io.StringIO()
    pstats.Stats(pr, stream=s).strip_dirs().sort_stats("cumulative").print_stats(top)
    lines = [ln.rstrip() for ln in s.getvalue().splitlines()
             if ln.strip() and "bench_spde.py" not in ln]  # drop this script's wrappers
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    return {"calls": n, "wall_s": wall, "ms_per_call": wall / n * 1e3, "lines": lines[start:]}


# ---- part 1: one step ------------------------------------------------------------------------
def vmf_density(grid) -> np.ndarray:
    """The ensemble's initial density: von Mises–Fisher, concentration 3 about (1, 0, 0), mass 1."""
    rho = grid.cell_average(lambda x: np.exp(3.0 * (x[..., 0] - 1.0)))
    return rho / grid.integrate(rho)


def bench_steps(nlat: int, reps: int, min_sample: float, rng, slow: float, quick: bool):
    grid = GaussGrid(nlat)
    rho = vmf_density(grid)
    noises = {n: make_noise(n) for n in TRUNCATIONS}
    out = {"nlat": nlat, "nlon": grid.nlon, "cells": grid.nlat * grid.nlon,
           "face_points": None, "nmax": {str(n): f.nmax for n, f in noises.items()},
           "noise_coefficients": {str(n): f.n_coefficients for n, f in noises.items()},
           "noise_variance_kappa_nmax_1": {str(n): f.variance for n, f in noises.items()},
           "drifts": {}, "noise_only": None, "profiles": {}}
    profiles = out["profiles"]
    paper1_faces = None
    for dname, K in DRIFTS.items():
        da = DensityAttention(Attention(Q, K, V, beta=BETA), grid)
        mf = MeanFieldFFSL(grid, da)
        t = time.perf_counter()
        dtc = float(mf.stable_dt(rho, 0.0))  # one drift evaluation (cached for the step at t = 0)
        one_eval = time.perf_counter() - t
        method = dict(da.last_stats)
        if dname == "paper1":
            paper1_faces = (dtc, mf._faces(0.0, rho))
        out["face_points"] = int(mf.transport.points.shape[0])
        is_slow = 2 * one_eval > slow
        dts = {"courant": dtc} if is_slow else {"courant": dtc, "0.01": DT_FIXED}
        truncs = ("auto",) if is_slow else TRUNCATIONS
        if quick and dname == "paper1" and nlat >= 64:
            truncs = ("auto",)
        fns = {}
        for lab, dt in dts.items():
            fns[f"mf@{lab}"] = step_variant(MeanFieldFFSL(grid, da), rho, dt)
            for n in truncs:
                sp = SPDEFFSL(grid, da, noise=noises[n], path=make_path(noises[n], dt))
                fns[f"spde[{n}]@{lab}"] = step_variant(sp, rho, dt)
        if dname == "B=I":
            sp = SPDEFFSL(grid, da, noise=noises["auto"], path=make_path(noises["auto"], dtc, legacy=True))
            v = step_variant(sp, rho, dtc)
            fns["spde_before[auto]@courant"] = Counted(_uncached(v.fn), sp)
        print(f"  nlat {nlat} drift {dname}: path {method.get('method')}, one drift evaluation "
              f"{one_eval:.3g} s, Courant-0.8 dt {dtc:.4g}; timing {len(fns)} variants"
              + (" (slow: 2 calls each)" if is_slow else ""), flush=True)
        s, inner, cpu = measure(fns, 1 if is_slow else reps, min_sample, rng, slow)
        med = {k: float(np.median(v)) for k, v in s.items()}
        rows = []
        for lab, dt in dts.items():
            for n in truncs:
                k = f"spde[{n}]@{lab}"
                rows.append({
                    "dt_label": lab, "dt": dt, "noise": str(n), "nmax": noises[n].nmax,
                    "mf_s": med[f"mf@{lab}"], "spde_s": med[k],
                    "ratio_spde_to_mf": _ratio(s, k, f"mf@{lab}"),
                    "cpu_ratio_spde_to_mf": _ratio(cpu, k, f"mf@{lab}"),
                    "ratio_of_medians": med[k] / med[f"mf@{lab}"],
                    "meets_aim": _ratio(s, k, f"mf@{lab}") <= AIM,
                    "noise_displacement_rad": math.sqrt(2.0 * noises[n].variance * dt),
                    "substeps_per_step_spde": fns[k].substeps_per_call(),
                    "substeps_per_step_mf": fns[f"mf@{lab}"].substeps_per_call(),
                })
        before = None
        if "spde_before[auto]@courant" in s:
            kb = "spde_before[auto]@courant"
            before = {"spde_before_s": med[kb], "spde_after_s": med["spde[auto]@courant"],
                      "ratio_before_to_mf": _ratio(s, kb, "mf@courant"),
                      "ratio_after_to_mf": _ratio(s, "spde[auto]@courant", "mf@courant"),
                      "speedup_after_vs_before": _ratio(s, kb, "spde[auto]@courant")}
        out["drifts"][dname] = {
            "attention_path": method, "one_drift_evaluation_s": one_eval, "dt_courant": dtc,
            "slow": is_slow, "seconds_median": med, "batch_calls": inner,
            "samples": {k: len(v) for k, v in s.items()},
            "cpu_seconds_median": {k: float(np.median(v)) for k, v in cpu.items()},
            "rows": rows, "before_after_fix": before,
        }
        for r in rows:
            print(f"    {dname:6} dt {r['dt_label']:>7} ({r['dt']:.4f}) n_max {r['nmax']:2d}: mf "
                  f"{r['mf_s']*1e3:9.2f} ms  spde {r['spde_s']*1e3:9.2f} ms  spde/mf "
                  f"{r['ratio_spde_to_mf']:5.2f} {'ok' if r['meets_aim'] else 'MISS':4}  substeps/step "
                  f"{r['substeps_per_step_spde']:.0f} (mf {r['substeps_per_step_mf']:.0f})", flush=True)
        if before:
            print(f"    {dname:6} before the fixes: spde[auto]@courant {before['spde_before_s']*1e3:.2f} ms, "
                  f"spde/mf {before['ratio_before_to_mf']:.2f} (after {before['ratio_after_to_mf']:.2f})",
                  flush=True)
        if dname == "B=I" and nlat in (64, 128):
            nprof = 3 if nlat == 128 else 10
            profiles["spde[auto]@courant B=I"] = profile_lines(fns["spde[auto]@courant"], nprof)
            if nlat == 128:
                profiles["spde[16]@courant B=I"] = profile_lines(fns["spde[16]@courant"], nprof)
    out["noise_only"] = bench_noise_only(grid, rho, noises, paper1_faces, reps, min_sample, rng, profiles)
    return out


def bench_noise_only(grid, rho, noises, paper1_faces, reps, min_sample, rng, profiles):
    dtc, faces = paper1_faces
    dts = {"courant": dtc, "0.01": DT_FIXED}
    probe = SPDEFFSL(grid, None, noise=noises["auto"], path=make_path(noises["auto"], 1.0))
    tr = probe.transport
    points = probe._points
    fns = {}
    for lab, dt in dts.items():
        fns[f"transport@{lab}"] = Counted(lambda dt=dt: tr.advance(rho, faces[0], faces[1], dt), tr)
    for n, nf in noises.items():
        dw = make_path(nf, 1.0).increment(0.0, 0.01)
        fns[f"field[{n}]"] = Counted(lambda nf=nf, dw=dw: nf.tangent_values(dw, points))
        fns[f"field_uncached[{n}]"] = Counted(_uncached(lambda nf=nf, dw=dw: nf.tangent_values(dw, points)))
        for lab, dt in dts.items():
            sp = SPDEFFSL(grid, None, noise=nf, path=make_path(nf, dt))
            fns[f"noise_step[{n}]@{lab}"] = step_variant(sp, rho, dt)
            if n == "auto":
                spb = SPDEFFSL(grid, None, noise=nf, path=make_path(nf, dt, legacy=True))
                v = step_variant(spb, rho, dt)
                fns[f"noise_step_before[{n}]@{lab}"] = Counted(_uncached(v.fn), spb)
            for legacy in (False, True):
                if legacy and lab != "courant":
                    continue
                path = make_path(nf, dt, legacy=legacy)
                clock = Clock(dt)

                def inc(path=path, clock=clock, dt=dt):
                    t = clock()
                    path.increment(t, t + dt)
                fns[f"increment{'_before' if legacy else ''}[{n}]@{lab}"] = Counted(inc)
            # frozen noise face velocities of 8 increments, cycled
            path = make_path(nf, dt)
            fv = [tr.face_velocities(nf.tangent_values(path.increment(k * dt, (k + 1) * dt), points) / dt)
                  for k in range(8)]
            cyc = [0]

            def adv(fv=fv, cyc=cyc, dt=dt):
                f = fv[cyc[0] % len(fv)]
                cyc[0] += 1
                tr.advance(rho, f[0], f[1], dt)
            fns[f"advance_noise[{n}]@{lab}"] = Counted(adv, tr)
    u = noises["auto"].tangent_values(make_path(noises["auto"], 1.0).increment(0.0, 0.01), points) / 0.01
    fns["project"] = Counted(lambda: tr.face_velocities(u))
    print(f"  nlat {grid.nlat} noise alone: timing {len(fns)} variants", flush=True)
    s, inner, cpu = measure(fns, reps, min_sample, rng)
    med = {k: float(np.median(v)) for k, v in s.items()}
    rows = []
    for n in noises:
        for lab, dt in dts.items():
            tk, nk = f"transport@{lab}", f"noise_step[{n}]@{lab}"
            parts = {"increment": med[f"increment[{n}]@{lab}"], "field": med[f"field[{n}]"],
                     "project": med["project"], "advance": med[f"advance_noise[{n}]@{lab}"]}
            row = {
                "noise": str(n), "nmax": noises[n].nmax, "dt_label": lab, "dt": dt,
                "transport_s": med[tk], "noise_step_s": med[nk],
                "ratio_noise_step_to_transport": _ratio(s, nk, tk),
                "parts_s": parts,
                "parts_share_of_noise_step": {k: v / med[nk] for k, v in parts.items()},
                "ratio_advance_noise_to_transport": _ratio(s, f"advance_noise[{n}]@{lab}", tk),
                "substeps_per_step_noise": fns[nk].substeps_per_call(),
                "substeps_per_step_transport": fns[tk].substeps_per_call(),
                "field_uncached_s": med[f"field_uncached[{n}]"],
                "field_speedup_basis_cache": _ratio(s, f"field_uncached[{n}]", f"field[{n}]"),
                "field_basis_cached": noises[n]._basis is not None and noises[n]._basis.shape[-1] == points.shape[0],
            }
            if f"increment_before[{n}]@{lab}" in med:
                row["increment_before_s"] = med[f"increment_before[{n}]@{lab}"]
                row["increment_speedup"] = _ratio(s, f"increment_before[{n}]@{lab}", f"increment[{n}]@{lab}")
            if f"noise_step_before[{n}]@{lab}" in med:
                row["noise_step_before_s"] = med[f"noise_step_before[{n}]@{lab}"]
                row["ratio_noise_step_before_to_transport"] = _ratio(s, f"noise_step_before[{n}]@{lab}", tk)
            rows.append(row)
            p = {k: v * 1e3 for k, v in parts.items()}
            print(f"    n_max {row['nmax']:2d} dt {lab:>7}: transport {med[tk]*1e3:7.2f} ms  noise step "
                  f"{med[nk]*1e3:7.2f} ms ({row['ratio_noise_step_to_transport']:5.2f}x) = increment "
                  f"{p['increment']:.2f} + field {p['field']:.2f} + project {p['project']:.2f} + advance "
                  f"{p['advance']:.2f} (substeps/step {row['substeps_per_step_noise']:.0f}); field uncached "
                  f"{row['field_uncached_s']*1e3:.2f} ms"
                  + (f"; before fixes {row['noise_step_before_s']*1e3:.2f} ms "
                     f"({row['ratio_noise_step_before_to_transport']:.2f}x)" if "noise_step_before_s" in row else ""),
                  flush=True)
    if grid.nlat == 64:
        profiles["noise_step[auto]@courant"] = profile_lines(fns["noise_step[auto]@courant"], 20)
        profiles["noise_step_before[auto]@courant (before the fixes)"] = profile_lines(
            fns["noise_step_before[auto]@courant"], 20)
    return {"dt_courant_paper1": dtc, "seconds_median": med, "batch_calls": inner,
            "cpu_seconds_median": {k: float(np.median(v)) for k, v in cpu.items()}, "rows": rows}


# ---- part 2: ensembles ---------------------------------------------------------------------
def paper1_attention() -> dict:
    return {"Q": Q.tolist(), "K": DRIFTS["paper1"].tolist(), "V": V.tolist(), "beta": BETA}


def ensemble_raw(nlat: int, t_end: float, attention: dict | None = None) -> dict:
    """The run configuration of one realisation: density on GaussGrid(nlat), the vMF start, ReLU
    noise (σ_U = σ_W = 0.5, 99.9 % of κ), the attention if given, dt = ENSEMBLE_DT to t_end with
    ENSEMBLE_OUTPUTS outputs of mass, E_β and moments, fields in float32."""
    dyn = {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5,
                     "variance_fraction": VARIANCE_FRACTION, "seed": 0}}
    if attention is not None:
        dyn["attention"] = attention
    return {"grid": {"kind": "sphere", "nlat": nlat},
            "initial": {"kind": "vmf", "centres": [[1.0, 0.0, 0.0]], "kappas": [3.0]},
            "dynamics": dyn, "representations": {"density": True},
            "stepping": {"t_end": t_end, "dt": ENSEMBLE_DT, "output_every": t_end / ENSEMBLE_OUTPUTS},
            "outputs": {"diagnostics": ["mass", "energy", "moments"], "precision": "float32"}}


def cluster_startup(w: int) -> dict:
    from dask.distributed import Client, LocalCluster

    t = time.perf_counter()
    cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None,
                           env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"})
    client = Client(cluster)
    client.wait_for_workers(w)
    start = time.perf_counter() - t
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_spde_") as tmp:
        client.submit(_run_member, RunConfig.from_dict(ensemble_raw(16, 4 * ENSEMBLE_DT)).to_dict(),
                      tmp, pure=False).result()
    first_task = time.perf_counter() - t
    t = time.perf_counter()
    client.close()
    cluster.close()
    return {"workers": w, "start_s": start, "first_tiny_task_s": first_task,
            "close_s": time.perf_counter() - t}


class _NoMallocTrim:
    """Context: LocalCluster workers start WITHOUT dask's default MALLOC_TRIM_THRESHOLD_=65536
    (``distributed.nanny.pre-spawn-environ``), which glibc reads at start-up: with it set, freed
    memory above 64 kB goes back to the OS and numpy temporaries page-fault afresh every time."""

    KEY = "MALLOC_TRIM_THRESHOLD_"

    def __enter__(self):
        import dask
        import distributed  # noqa: F401  (registers the distributed config defaults)

        self._env = os.environ.pop(self.KEY, None)  # the nanny copies it into os.environ
        self._cfg = dask.config.set({f"distributed.nanny.pre-spawn-environ.{self.KEY}": None})
        self._cfg.__enter__()

    def __exit__(self, *exc):
        self._cfg.__exit__(*exc)
        if self._env is not None:
            os.environ[self.KEY] = self._env


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its finished children (the dask
    workers, reaped when the cluster closes)."""
    import resource

    t = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        t += r.ru_utime + r.ru_stime
    return t


def bench_ensemble(nlat: int, R: int, workers: list, target: float, rng, passes: int,
                   no_trim_workers: list) -> dict:
    att = paper1_attention()
    # calibrate: seconds per step of one realisation in this process
    cal = RunConfig.from_dict(ensemble_raw(nlat, ENSEMBLE_OUTPUTS * ENSEMBLE_DT, att))
    with tempfile.TemporaryDirectory(prefix="bench_spde_") as tmp:
        run(cal, tmp, progress=False)  # warm-up (numba kernels, caches)
        t = time.perf_counter()
        o = run(cal, tmp, progress=False)
        cal_wall = time.perf_counter() - t
    per_step = o["density"]["seconds"] / ENSEMBLE_OUTPUTS
    setup = cal_wall - o["density"]["seconds"]  # grid, noise field, drift, files, initial density
    n_steps = ENSEMBLE_OUTPUTS * max(1, round(target / per_step / ENSEMBLE_OUTPUTS))
    raw = ensemble_raw(nlat, n_steps * ENSEMBLE_DT, att)
    config = RunConfig.from_dict(raw)
    t_end = config.stepping.t_end
    variants = [(w, True) for w in workers] + [(w, False) for w in no_trim_workers]
    print(f"  ensemble nlat {nlat}: calibration {per_step:.3g} s/step (+ {setup:.2f} s set-up and "
          f"outputs) -> {n_steps} steps (t_end {t_end:g}), R = {R}, workers {workers}"
          + (f", and {no_trim_workers} without MALLOC_TRIM_THRESHOLD_" if no_trim_workers else "")
          + f"; {passes} pass(es)", flush=True)
    walls = {v: [] for v in variants}
    loads = {v: [] for v in variants}
    cpus = {v: [] for v in variants}
    orders = []
    with tempfile.TemporaryDirectory(prefix="bench_spde_") as tmp:
        for _ in range(passes):
            order = [variants[i] for i in rng.permutation(len(variants))]
            orders.append([[w, trim] for w, trim in order])
            for w, trim in order:
                la = os.getloadavg()[0]
                f = Path(tmp) / f"ens_w{w}_{int(trim)}"
                c0 = _cpu_seconds()
                if trim:
                    res = run_ensemble(raw, R, f, workers=w, progress=False)
                else:
                    with _NoMallocTrim():
                        res = run_ensemble(raw, R, f, workers=w, progress=False)
                cpu_s = _cpu_seconds() - c0
                shutil.rmtree(f)
                if res["completed"] != R:
                    raise AssertionError(f"ensemble with {w} workers completed {res['completed']} of {R}")
                res_wall = res["seconds"]
                walls[(w, trim)].append(res_wall)
                loads[(w, trim)].append(la)
                cpus[(w, trim)].append(cpu_s)
                print(f"    w = {w}{'' if trim else ' (no malloc trim)'}: {res_wall:7.1f} s  "
                      f"{R / res_wall * 3600:7.0f} realisations/h  CPU {cpu_s:6.1f} s = "
                      f"{cpu_s / res_wall:4.2f} cores  (load {la:.1f})", flush=True)
    med = {v: float(np.median(x)) for v, x in walls.items()}
    cpu_med = {v: float(np.median(x)) for v, x in cpus.items()}
    base1, base0 = med.get((1, True)), med.get((0, True))
    runs = []
    for (w, trim), wall in sorted(med.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
        runs.append({
            "workers": w, "dask_malloc_trim": trim if w else None, "wall_s": wall,
            "wall_s_all": walls[(w, trim)], "load_average_before": loads[(w, trim)],
            "realisations_per_hour": R / wall * 3600.0, "steps_per_hour": R * n_steps / wall * 3600.0,
            "seconds_per_realisation": wall / R,
            "cpu_s": cpu_med[(w, trim)], "cpu_s_all": cpus[(w, trim)],
            "cores_used": cpu_med[(w, trim)] / wall,
            "cpu_s_per_realisation": cpu_med[(w, trim)] / R,
            "realisations_per_core_hour": 3600.0 * R / cpu_med[(w, trim)],
            "speedup_vs_w1": base1 / wall if base1 else None,
            "parallel_efficiency_vs_w1": base1 / wall / w if base1 and w else None,
            "speedup_vs_serial": base0 / wall if base0 else None,
        })
    return {"nlat": nlat, "R": R, "n_steps": n_steps, "dt": ENSEMBLE_DT, "t_end": t_end,
            "passes": passes, "calibration_s_per_step": per_step, "calibration_wall_s": cal_wall,
            "calibration_setup_s": setup, "config": config.to_dict(), "orders": orders, "runs": runs,
            "fixed_cost_w1_minus_w0_s": (base1 - base0) if base0 and base1 else None}


# ---- main ----------------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="nlat 32, 64; few repetitions; ensemble "
                   "at nlat 32 with w = 0, 1, 2; prints only unless --out")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON output (default benchmarks/results/spde.json for a full run)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per step variant")
    p.add_argument("--slow", type=float, default=5.0,
                   help="a mean-field step longer than this (s) is timed only twice")
    p.add_argument("--target", type=float, default=None,
                   help="seconds per realisation in the ensembles (default 5; quick 2)")
    p.add_argument("--skip-steps", action="store_true")
    p.add_argument("--skip-ensemble", action="store_true")
    p.add_argument("--ensemble-passes", type=int, default=1,
                   help="run every worker count this many times (shuffled order per pass; medians)")
    p.add_argument("--merge", action="store_true",
                   help="keep the parts of the existing output JSON that this run skips")
    p.add_argument("--blas-threads", default="1",
                   help="OPENBLAS/OMP/MKL_NUM_THREADS of this process (set before numpy loads)")
    args = p.parse_args(argv)

    quick = args.quick
    sizes = (32, 64) if quick else (32, 64, 128)
    reps = args.reps or (3 if quick else 9)
    min_sample = 0.05 if quick else 0.15
    target = args.target or (2.0 if quick else 5.0)
    ens_sizes = (32,) if quick else (32, 64)
    workers = [0, 1, 2] if quick else [0, 1, 2, 3, 4]
    R = 4 if quick else 12
    out = args.out
    if out is None and not quick:
        out = ROOT / "benchmarks" / "results" / "spde.json"
    rng = np.random.default_rng(0)
    load_start = list(os.getloadavg())
    t_start = time.perf_counter()
    steps, ensembles, startup = [], [], []
    if not args.skip_steps:
        print(f"Part 1: one SPDE step vs one mean-field step (aim spde/mf <= {AIM}); {reps} interleaved "
              f"repetitions, medians; BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS')}", flush=True)
        for nlat in sizes:
            steps.append(bench_steps(nlat, reps, min_sample, rng, args.slow, quick))
    if not args.skip_ensemble:
        print(f"Part 2: ensembles (paper1 attention + noise, dt {ENSEMBLE_DT}), R = {R}", flush=True)
        for w in ([1, 2] if quick else [1, 2, 4]):
            startup.append(cluster_startup(w))
            print(f"  LocalCluster({w}) start {startup[-1]['start_s']:.2f} s, first tiny task "
                  f"{startup[-1]['first_tiny_task_s']:.2f} s, close {startup[-1]['close_s']:.2f} s", flush=True)
        for nlat in ens_sizes:
            ensembles.append(bench_ensemble(nlat, R, workers, target, rng, args.ensemble_passes,
                                            [1, 2]))
            e = ensembles[-1]
            print(f"    fixed cost wall(w=1) - wall(w=0) = {e['fixed_cost_w1_minus_w0_s']:.1f} s", flush=True)

    if out is not None:
        try:
            import dask
            dask_version = dask.__version__
        except ImportError:
            dask_version = None
        try:
            import numba
            numba_version = numba.__version__
        except ImportError:
            numba_version = None
        result = {
            "benchmark": "bench_spde",
            "description": "one SPDE (spde-ffsl, Stratonovich) step vs one mean-field step with the "
                           "same attention drift; the noise-only step vs a frozen-velocity FFSL "
                           "transport step, with its parts and cProfile summaries; ensemble "
                           "realisations per hour vs dask workers",
            "aim_ratio": AIM, "quick": quick, "repetitions": reps, "min_sample_s": min_sample,
            "noise_kernel": KERNEL, "variance_fraction": VARIANCE_FRACTION, "beta": BETA,
            "Q": Q.tolist(), "V": V.tolist(), "K": {k: v.tolist() for k, v in DRIFTS.items()},
            "dt_fixed": DT_FIXED, "path_steps": PATH_STEPS,
            "basis_cache_bytes": noise_field.BASIS_CACHE_BYTES,
            "timing": "interleaved shuffled repetitions, medians; ratio = median of per-repetition "
                      "ratios (wall clock, perf_counter); cpu_* from process_time",
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "load_average_at_start": load_start, "load_average_at_end": list(os.getloadavg()),
            "elapsed_s": time.perf_counter() - t_start,
            "environment": {
                "python": platform.python_version(), "numpy": np.__version__, "numba": numba_version,
                "dask": dask_version, "machine": platform.machine(), "cpu_count": os.cpu_count(),
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            "steps": steps, "cluster_startup": startup, "ensembles": ensembles,
        }
        if args.merge and out.exists():
            old = json.loads(out.read_text())
            kept = {"steps": args.skip_steps, "cluster_startup": args.skip_ensemble,
                    "ensembles": args.skip_ensemble}
            for k, skipped in kept.items():
                if skipped and k in old:
                    result[k] = old[k]
            result["merged"] = {"parts_from_previous_run": [k for k, v in kept.items() if v],
                                "previous_run": {k: old.get(k) for k in
                                                 ("load_average_at_start", "load_average_at_end",
                                                  "elapsed_s", "environment", "merged")}}
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=float) + "\n")
        tmp.replace(out)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
