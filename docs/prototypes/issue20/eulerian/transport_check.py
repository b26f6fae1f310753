"""Exact-solution check of the AMR transport alone (no attention): solid-body rotation (ω = 1) of
a von Mises–Fisher blob ρ ∝ exp(κ⟨x, c⟩), κ = 200 (width ≈ 0.07), c(0) = e_y:
  "equator": about e_z, one full turn (t = 2π), along the equator (where the attention's mass is);
  "pole":    about e_x to t = π, through the north pole (the merged, unrefinable polar rows).
Field L1 error of the cell masses against the exact cell integrals (Gauss–Legendre 6×6), mass,
positivity; limiter as given.

python transport_check.py [LIMITER] → data/transport_rotation_{LIMITER}.json"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from amr import AMRSphere
from common import attention

HERE = Path(__file__).parent
KAPPA_VMF = 200.0
OMEGA = np.array([1.0, 0.0, 0.0])


def vmf(x, c):
    return KAPPA_VMF / (4 * np.pi * np.sinh(KAPPA_VMF)) * np.exp(KAPPA_VMF * (x @ c) - 0.0) if KAPPA_VMF < 300 else None


CASES = {"equator": (np.array([0.0, 0.0, 1.0]), 2 * math.pi,
                     lambda t: np.array([-math.sin(t), math.cos(t), 0.0])),
         "pole": (np.array([1.0, 0.0, 0.0]), math.pi,
                  lambda t: np.array([0.0, math.cos(t), math.sin(t)]))}


def centre(t):
    return np.array([0.0, math.cos(t), math.sin(t)])


class Rotation(AMRSphere):
    def velocity(self, m):
        return np.cross(OMEGA, self.xc)


def cell_mass_exact(lon0, lon1, lat0, lat1, c=None, q=6):
    """∫_cell ρ_vmf by q×q Gauss–Legendre in (λ, sin φ)."""
    c = centre(0.0) if c is None else c
    g, w = np.polynomial.legendre.leggauss(q)
    s0, s1 = np.sin(lat0), np.sin(lat1)
    tot = np.zeros_like(lon0, dtype=float)
    for gi, wi in zip(g, w):
        lam = 0.5 * (lon0 + lon1) + 0.5 * (lon1 - lon0) * gi
        for gj, wj in zip(g, w):
            s = 0.5 * (s0 + s1) + 0.5 * (s1 - s0) * gj
            cphi = np.sqrt(np.maximum(1 - s * s, 0))
            x = np.stack([cphi * np.cos(lam), cphi * np.sin(lam), s], -1)
            tot += wi * wj * vmf(x, c)
    return tot * 0.25 * (lon1 - lon0) * (s1 - s0)


def main():
    import sys
    global OMEGA
    limiter = sys.argv[1] if len(sys.argv) > 1 else "mc"
    res = {"limiter": limiter}
    for case, (axis, T, cen) in CASES.items():
        OMEGA = axis
        res[case] = one_case(limiter, T, cen)
    (HERE / "data" / f"transport_rotation_{limiter}.json").write_text(json.dumps(res, indent=1))


def one_case(limiter, T, cen):
    out = []
    for nlat0, lmax in ((16, 2), (24, 2), (32, 2), (48, 2)):
        h = math.pi / (nlat0 * 2 ** lmax)
        g = Rotation(nlat0, lmax, 0.83 * h * h, attention(100.0), limiter=limiter)
        m = g.init_mass(cell_mass_exact)
        t = 0.0
        t0 = time.perf_counter()
        mass0, minm = m.sum(), m.min()
        while t < T - 1e-12:
            m, dt = g.step(m, T - t)
            t = T if T - t - dt < 1e-12 else t + dt
            if g.steps % g.regrid_every == 0:
                m = g.regrid(m)
            minm = min(minm, m.min())
        wall = time.perf_counter() - t0
        exact = cell_mass_exact(g.lon0, g.lon1, g.lat0, g.lat1, c=cen(T))
        l1 = float(np.sum(np.abs(m - exact)))  # = ∫|ρ_h − Π_h ρ| (cell averages)
        out.append({"nlat0": nlat0, "lmax": lmax, "h_finest": h, "cells_end": int(g.n), "steps": g.steps,
                    "l1_cell_average_error": l1, "mass_error": float(m.sum() - mass0),
                    "min_mass": float(minm), "peak_ratio": float(np.max(m / g.area) / np.max(exact / g.area)),
                    "wall_s": wall})
        print(out[-1], flush=True)
    hs = np.array([o["h_finest"] for o in out]); e = np.array([o["l1_cell_average_error"] for o in out])
    orders = (np.log(e[:-1] / e[1:]) / np.log(hs[:-1] / hs[1:])).tolist()
    fit = float(np.polyfit(np.log(hs), np.log(e), 1)[0])
    print("orders", orders, "fit", fit, flush=True)
    return {"T": T, "runs": out, "pairwise_orders": orders, "fitted_order": fit}


if __name__ == "__main__":
    main()
