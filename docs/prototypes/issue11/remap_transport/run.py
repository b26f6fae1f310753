"""lagrangian-remap on the standard transport cases (issue 11 "done means": Williamson at α = 0,
π/2 − 0.05, π/2, the divergent flow).  Weighted points from the cell averages of the initial
field, moved by RK4 on the case's analytic velocity, remapped every REMAP steps onto the
adapted grid (spherepde.solvers.lagrangian.remap), then after one period compared with the
exact field (the initial one) in two ways:

* field: l2 of the points' mass per Gauss cell / area (the `density` a run writes) against the
  exact cell averages;
* weak: l2 of the spherical-harmonic projection to degree ≤ L_W = 8 (a smooth test-function
  norm) of the same comparison — the error a diagnostic integral sees.

For divergent flows the points carry mass (the density is transported in flux form; weights are
invariant).  Usage: PYTHONPATH=/work/main python3 run.py CASE ALPHA NLAT [NLAT ...] [--remap K]
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from spherepde.grids import GaussGrid
from spherepde.solvers.lagrangian import retract
from spherepde.solvers.lagrangian.remap import LagrangianRemap, deposit_on_grid, points_from_density
from spherepde.validation.transport_cases import error_norms, initial_field, make_case


class VelocityPoints:
    """RK4 of dx/dt = u(t, x) (tangent), retracted."""

    def __init__(self, case):
        self.case = case

    def step(self, x, t, dt):
        f = self.case.velocity
        k1 = f(t, x)
        k2 = f(t + dt / 2, retract(x + dt / 2 * k1))
        k3 = f(t + dt / 2, retract(x + dt / 2 * k2))
        k4 = f(t + dt, retract(x + dt * k3))
        return x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def weak_l2(grid, a, b, lmax=8):
    from spherepde.grids.sht import SphericalHarmonics

    sht = SphericalHarmonics(grid, lmax=lmax)
    d = sht.synthesise(sht.analyse(a - b))
    e = sht.synthesise(sht.analyse(b))
    return float(np.sqrt(grid.integrate(d * d) / grid.integrate(e * e)))


def one(case_name, alpha, nlat, remap_every, courant=0.8):
    g = GaussGrid(nlat)
    case = make_case(case_name, alpha)
    field = initial_field(case.default_field if case_name != "williamson1" else "cosine-bell")
    rho0 = g.cell_average(field)
    mass0 = g.integrate(rho0)
    x, w = points_from_density(g, rho0 / mass0, drop=0.0)
    umax = float(np.abs(case.velocity(0.0, g.xyz.reshape(-1, 3))).max())
    n = math.ceil(case.period / (courant * g.dlon / umax))
    dt = case.period / n
    rm = LagrangianRemap(VelocityPoints(case), grid_nlat=nlat, remap_every=remap_every)
    t0 = time.perf_counter()
    for k in range(n):
        x, w = rm.step(x, w, k * dt, dt)
    sec = time.perf_counter() - t0
    rho = deposit_on_grid(g, x, w) * mass0
    out = {"case": case_name, "alpha": alpha, "nlat": nlat, "steps": n, "remaps": rm.remaps,
           "points": int(w.size), "seconds": round(sec, 2),
           "field_l2": error_norms(g, rho, rho0)["l2"],
           "mass_error": float(w.sum() - 1.0), "min": float(w.min())}
    try:
        out["weak_l2_deg8"] = weak_l2(g, rho, rho0)
    except Exception as exc:  # noqa: BLE001
        out["weak_error"] = repr(exc)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("alpha", type=float)
    ap.add_argument("nlat", type=int, nargs="+")
    ap.add_argument("--remap", type=int, default=25)
    a = ap.parse_args()
    for nl in a.nlat:
        print(json.dumps(one(a.case, a.alpha, nl, a.remap)), flush=True)
