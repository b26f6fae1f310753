"""LQ with coarsened sources ("cost follows the mass"): the targets are all N Lagrangian points,
the sources of the attention sums are the points binned on a GaussGrid whose cells are
``delta`` kernel widths (δ·β^{-1/2}) wide, one source per non-empty cell at its unit mass
centroid carrying the cell's mass (conservative, positive).  The velocity is the package's
(Attention.mean + velocity_from_mean) for that source measure; RK4 with retraction as
ParticleODE.step.
  python lq_coarse.py BETA NLAT DELTA T_END [DT]  -> lqc_beta{B}_n{N}_d{DELTA}[_dt{DT}].json"""
import json
import math
import sys
import time

import numpy as np

from common import Diagnostics, attention
from lagq import initial_points, lattice_stretch
from spherepde.grids.gauss import GaussGrid
from spherepde.solvers.lagrangian.particles import retract
from spherepde.solvers.lagrangian.remap import deposit_on_grid  # noqa: F401 (same binning rule)


class CoarseSources:
    def __init__(self, beta, delta):
        n = max(4, math.ceil(math.pi * math.sqrt(beta) / delta))
        self.grid = GaussGrid(n + n % 2)   # GaussGrid needs an even nlat
        self.counts = []

    def __call__(self, x, w):
        g = self.grid
        mu = np.clip(x[:, 2], -1.0, 1.0)
        j = np.clip(np.searchsorted(-g.mu_faces, -mu, side="right") - 1, 0, g.nlat - 1)
        lon = np.mod(np.arctan2(x[:, 1], x[:, 0]) + 0.5 * g.dlon, 2.0 * math.pi)
        i = np.minimum((lon / g.dlon).astype(np.int64), g.nlon - 1)
        idx = j * g.nlon + i
        cells, inv = np.unique(idx, return_inverse=True)
        m = np.bincount(inv, weights=w)
        c = np.stack([np.bincount(inv, weights=w * x[:, k]) for k in range(3)], axis=1)
        self.counts.append(len(cells))
        return retract(c), m


def run(beta, nlat, delta, t_end, dt=0.05, every=0.5):
    att = attention(beta)
    x, w, g = initial_points(nlat)
    diag = Diagnostics(beta, x, w)
    src = CoarseSources(beta, delta)

    def f(z):
        z = retract(z)
        ys, ws = src(z, w)
        return att.velocity_from_mean(z, att.mean(z, ys, ws, method="auto", tol=1e-8))

    out = {"beta": beta, "nlat": nlat, "points": int(w.size), "delta_widths": delta,
           "coarse_nlat": src.grid.nlat, "dt": dt, "times": [], "series": {}, "sources": [],
           "stretch": []}
    t0, k, spo = time.perf_counter(), 0, round(every / dt)
    while True:
        t = k * dt
        if k % spo == 0:
            out["times"].append(round(t, 10))
            for key, v in diag(x, w).items():
                out["series"].setdefault(key, []).append(v)
            out["sources"].append(src.counts[-1] if src.counts else None)
            out["stretch"].append(lattice_stretch(x, w, g, beta))
            print(f"t={t:.2f} E={out['series']['energy'][-1]:.6f} W2={out['series']['w2_projection'][-1]:.4f} "
                  f"M={out['sources'][-1]} {time.perf_counter() - t0:.0f}s", flush=True)
        if t >= t_end - 1e-9:
            break
        k1 = f(x); k2 = f(x + 0.5 * dt * k1); k3 = f(x + 0.5 * dt * k2); k4 = f(x + dt * k3)
        x = retract(x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4))
        k += 1
    out["wall_s"] = time.perf_counter() - t0
    out["mass_error"] = float(abs(w.sum() - 1.0))
    return out


if __name__ == "__main__":
    beta, nlat, delta, t_end = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    dt = float(sys.argv[5]) if len(sys.argv) > 5 else 0.05
    out = run(beta, nlat, delta, t_end, dt=dt)
    json.dump(out, open(f"lqc_beta{beta:g}_n{nlat}_d{delta:g}" + ("" if dt == 0.05 else f"_dt{dt:g}") + ".json", "w"))
    print("wall", out["wall_s"])
