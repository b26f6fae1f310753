"""End-to-end cost to reach a given accuracy: density solver versus N-particle baseline.

Same system (Paper 1 metastability set-up, β = 10), same observable (harmonic moments of the
token distribution up to degree 4 at t = T), same final time.  The reference is the density
solver on a fine grid (nlat_ref).  Density runs on coarser grids and particle runs with several
N (averaged over seeds) give error-versus-wall-time curves; a power law fitted to each curve
gives the time to reach the target error (1e-3 by default), and their ratio is the speed-up.
Particle errors are Monte Carlo (∝ N^(-1/2)) and their cost ∝ N² per step, so the time to
reach ε grows like ε^(-4); the density error falls like h² with cost ∝ h^(-3)·(pairs) —
see the printed fit.  Timings are wall clock in this process, run one after another (the
machine is shared: compare ratios, not absolute seconds).

    python benchmarks/bench_density_vs_particles.py [--quick] [--target 1e-3]
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import GaussGrid
from spherepde.grids.sampling import sample_density
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.lagrangian import ParticleODE
from spherepde.validation.metrics import as_measure, harmonic_moments
from spherepde.experiments.metastability import MetastabilityConfig, initial_density


def density_run(nlat, att, cfg, T, lmax):
    g = GaussGrid(nlat)
    rho0 = initial_density(g, cfg.init_a)
    st = make_stepper("meanfield-ffsl", g, DensityAttention(att, g), courant=cfg.courant)
    t0 = time.perf_counter()
    res = Controller(st, dt=cfg.courant * g.dlon / float(np.linalg.norm(att.V, 2))).run(rho0, (0.0, T))
    sec = time.perf_counter() - t0
    x, w = as_measure(g, res.state)
    return harmonic_moments(x, w, lmax), sec


def particle_run(n, seed, att, cfg, T, lmax, dt, g0, rho0):
    x0 = sample_density(g0, rho0, n, seed=seed)
    t0 = time.perf_counter()
    res = ParticleODE(att).run(x0, (0.0, T), dt=dt)
    sec = time.perf_counter() - t0
    return harmonic_moments(res.positions[-1], np.full(n, 1.0 / n), lmax), sec


def time_to_reach(times, errors, target):
    """Fit log(time) = a + b log(error) and return exp(a + b log(target))."""
    b, a = np.polyfit(np.log(errors), np.log(times), 1)
    return float(math.exp(a + b * math.log(target))), float(b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--target", type=float, default=1e-3)
    args = p.parse_args()
    cfg = MetastabilityConfig()
    Q, K, V = (np.asarray(m, float) for m in (cfg.Q, cfg.K, cfg.V))
    beta, T, lmax = 10.0, 2.0, 4
    att = Attention(Q, K, V, beta)
    nref = 48 if args.quick else 64
    ref, ref_sec = density_run(nref, att, cfg, T, lmax)
    dens_n = (8, 12, 16) if args.quick else (8, 12, 16, 24, 32)
    drows = []
    for n in dens_n:
        m, sec = density_run(n, att, cfg, T, lmax)
        drows.append({"nlat": n, "seconds": sec, "error": float(np.linalg.norm(m - ref))})
    g0 = GaussGrid(nref)
    rho0 = initial_density(g0, cfg.init_a)
    part_n = (100, 300, 1000) if args.quick else (100, 300, 1000, 3000)
    seeds = (0, 1) if args.quick else (0, 1, 2)
    prows = []
    for n in part_n:
        errs, secs = [], []
        for s in seeds:
            m, sec = particle_run(n, s, att, cfg, T, lmax, 0.05, g0, rho0)
            errs.append(float(np.linalg.norm(m - ref)))
            secs.append(sec)
        prows.append({"N": n, "seconds": float(np.mean(secs)), "error": float(np.sqrt(np.mean(np.square(errs))))})
    td, bd = time_to_reach([r["seconds"] for r in drows], [r["error"] for r in drows], args.target)
    tp, bp = time_to_reach([r["seconds"] for r in prows], [r["error"] for r in prows], args.target)
    out = {"benchmark": "density_vs_particles", "beta": beta, "T": T, "lmax_moments": lmax,
           "reference_nlat": nref, "reference_seconds": ref_sec, "target_error": args.target,
           "density": drows, "particles": prows,
           "density_time_to_target_s": td, "density_time_vs_error_exponent": bd,
           "particle_time_to_target_s": tp, "particle_time_vs_error_exponent": bp,
           "speedup_at_target": tp / td, "aim": 100.0, "quick": args.quick,
           "note": "times to target come from power-law fits (extrapolated when the target lies "
                   "outside the measured range)"}
    print(f"{'run':>14} {'seconds':>9} {'error':>10}")
    for r in drows:
        print(f"{'nlat ' + str(r['nlat']):>14} {r['seconds']:9.2f} {r['error']:10.2e}")
    for r in prows:
        print(f"{'N ' + str(r['N']):>14} {r['seconds']:9.2f} {r['error']:10.2e}")
    print(f"time to error {args.target:g}: density {td:.3g} s (time ∝ err^{bd:.2f}), particles {tp:.3g} s "
          f"(time ∝ err^{bp:.2f}); speed-up {tp / td:.3g}× (aim ≥ 100×)")
    if not args.quick:
        Path(__file__).with_name("results").mkdir(exist_ok=True)
        (Path(__file__).with_name("results") / "density_vs_particles.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
