"""Issue 20: is W₂(ρ_t, Π#ρ₀) at β = 1000 a well-conditioned function of ρ₀?

The `amr` density of `examples/metastability.toml` at β = 1000 (base 32, max_level 5,
mass_per_cell 105.6: `levels_for_beta`; the run pipeline's fixed step 0.0785398) from
ρ₀·(1 + ε cos(k⟨x, u⟩ + 1)), u a fixed random direction (seed 0), ε = 0 and 1e-3, k = 3 (smooth)
and k = 15 (wavelength 0.42 rad, four base cells; the kernel width is β^{−1/2} = 0.032 rad).
Recorded every 2 time units: e^{−β}E_β, W₂ to a δ_{e_y} + (1 − a) δ_{−e_y} with a the run's own
initial split (`metrics.w2_two_point`), the distance to span(e_y), and the mass on the separatrix
band |y| < 0.1 between the two metastable clusters.  A change of W₂ much larger than ε under a
relative perturbation ε of ρ₀ says that no discretisation error of that size can be resolved.

With a third field C the mesh also resolves the kernel wherever there is mass
(run_kernel_floor.py, floor 1e-3·m_split), and the stepper is built with polar_merge = 1 as in
those runs: at C = 2.5 the spread mass sits on leaves of width 0.049 rad, so kernel-scale
perturbations (k = 60: wavelength 0.10 rad, about three kernel widths) can be represented.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python3 conditioning.py OUT.json EPS:K[:C] ...
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.dynamics.energy import scaled_interaction_energy
from spherepde.grids import GaussGrid
from spherepde.solvers.eulerian.amr import AMRDensity
from spherepde.validation.metrics import w2_two_point

import run_kernel_floor

BETA, NLAT0, LMAX, MPC, DT, T_END = 1000.0, 32, 5, 105.6, 0.0785398, 14.0
A = np.array([0.6, 0.5, 0.3]) / np.linalg.norm([0.6, 0.5, 0.3])
_u = np.random.default_rng(0).standard_normal(3)
U = _u / np.linalg.norm(_u)
EY = np.array([0.0, 1.0, 0.0])


def rho0(eps: float, k: float):
    return lambda x: (1 + 0.5 * x @ A) * (1 + eps * np.cos(k * x @ U + 1))


def run(eps: float, k: float, c: float | None = None) -> dict:
    att = Attention(np.eye(3), np.diag([0.1, 1, 1]), np.diag([1, 0.5, 0.1]), beta=BETA)
    kw = {}
    if c is not None:
        run_kernel_floor.install(c, 1e-3)
        kw = {"polar_merge": 1, "max_cells": 200_000}
    st = AMRDensity(att, GaussGrid(NLAT0), nlat0=NLAT0, lmax=LMAX, mass_per_cell=MPC, **kw)
    s = st.initial_state(rho0(eps, k))
    x, w = st.measure(s)
    a = float(w[x[:, 1] > 0].sum() / w.sum())
    rows, t, c0 = [], 0.0, time.process_time()
    n_end, every = round(T_END / DT), round(2.0 / DT)
    for n in range(n_end + 1):
        if n % every == 0 or n == n_end:
            x, w = st.measure(s)
            rows.append({"t": round(n * DT, 6), "energy": scaled_interaction_energy(x, w, BETA),
                         "w2": w2_two_point(x, w, EY, a),
                         "dist": float(np.sqrt(np.sum(w * (1 - x[:, 1] ** 2)) / w.sum())),
                         "separatrix_mass": float(w[np.abs(x[:, 1]) < 0.1].sum()),
                         "leaves": int(s[0, 0])})
            print(eps, k, rows[-1], flush=True)
        if n == n_end:
            break
        s = st.step(s, t, DT)
        t = (n + 1) * DT
    return {"eps": eps, "k": k, "kernel_floor_C": c, "a": a, "cpu_s": time.process_time() - c0, "rows": rows}


if __name__ == "__main__":
    out, res = sys.argv[1], []
    for spec in sys.argv[2:]:
        e, k, *c = spec.split(":")
        res.append(run(float(e), float(k), float(c[0]) if c else None))
        json.dump({"script": "docs/prototypes/issue20/w2_change/conditioning.py",
                   "setup": {"beta": BETA, "nlat0": NLAT0, "lmax": LMAX, "mass_per_cell": MPC,
                             "dt": DT, "u": U.tolist()}, "runs": res}, open(out, "w"), indent=1)
