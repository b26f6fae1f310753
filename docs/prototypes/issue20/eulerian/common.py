"""Shared set-up of the issue-20 prototype: examples/metastability.toml's head (Q = I,
K = diag(0.1, 1, 1), V = diag(1, 0.5, 0.1)), rho_0 ∝ 1 + ½<x, â>, and the diagnostics of
spherepde (validation/metrics.py, as experiments/run.py uses them).

w2_projection here targets the EXACT Π#ρ_0 = a δ_e + (1 − a) δ_{−e}, e = e_y,
a = ρ_0({y > 0}) = ½ + â_y/8 (∫_{y>0} y dσ = π), for the density and the particles alike
(the issue's point 6: no grid- or draw-dependent target)."""
from __future__ import annotations

import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.validation.metrics import (dist_to_subspace, interaction_energy, top_eigenspace,
                                          w2_two_point)

Q = np.eye(3)
K = np.diag([0.1, 1.0, 1.0])
V = np.diag([1.0, 0.5, 0.1])
DIRECTION = np.array([0.6, 0.5, 0.3]) / np.linalg.norm([0.6, 0.5, 0.3])
AMPLITUDE = 0.5


def attention(beta: float) -> Attention:
    return Attention(Q, K, V, beta)


def rho0(x: np.ndarray) -> np.ndarray:
    """ρ_0 at unit points x (n, 3), normalised on S²."""
    return (1.0 + AMPLITUDE * (x @ DIRECTION)) / (4 * np.pi)


def rho0_cell_mass(lon0, lon1, lat0, lat1) -> np.ndarray:
    """Exact ∫_cell ρ_0 dσ on lon-lat rectangles (vectorised): ∫ (1 + A⟨x, â⟩)/(4π)."""
    dl = lon1 - lon0
    s0, s1 = np.sin(lat0), np.sin(lat1)
    area = dl * (s1 - s0)
    # ∫ cosφ cosλ cosφ dφ dλ = (sinλ1 − sinλ0)·∫cos²φ dφ ; ∫ sinφ cosφ dφ = (s1² − s0²)/2
    c2 = 0.5 * (lat1 - lat0) + 0.25 * (np.sin(2 * lat1) - np.sin(2 * lat0))
    ix = (np.sin(lon1) - np.sin(lon0)) * c2
    iy = (np.cos(lon0) - np.cos(lon1)) * c2
    iz = dl * 0.5 * (s1 ** 2 - s0 ** 2)
    return (area + AMPLITUDE * (DIRECTION[0] * ix + DIRECTION[1] * iy + DIRECTION[2] * iz)) / (4 * np.pi)


A_MAT = V @ K.T
E_TOP = top_eigenspace(A_MAT).basis            # e_y
E_V = top_eigenspace(V, by_magnitude=True).basis  # e_x
A_EXACT = 0.5 + DIRECTION[1] / 8.0


def diagnostics(x: np.ndarray, w: np.ndarray, beta: float) -> dict:
    """The package's diagnostics of a measure Σ w_j δ_{x_j} (w summing to 1)."""
    return {"energy": interaction_energy(x, w, beta),
            "w2_projection": w2_two_point(x, w, E_TOP[:, 0], A_EXACT),
            "dist_eigenspace": dist_to_subspace(x, w, E_TOP),
            "dist_eigenspace_V": dist_to_subspace(x, w, E_V)}


KEYS = ("energy", "w2_projection", "dist_eigenspace", "dist_eigenspace_V")
