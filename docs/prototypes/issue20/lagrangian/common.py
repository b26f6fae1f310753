"""Shared set-up of the issue-20 Lagrangian prototype: examples/metastability.toml at a given β,
and the package's diagnostics (spherepde.validation.metrics, as experiments/run.py uses them)
for a weighted point measure (x, w)."""
from __future__ import annotations

import math
import types

import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.validation.metrics import (dist_to_subspace, interaction_energy, top_eigenspace,
                                          two_point_weight, w2_two_point)

Q = np.eye(3)
K = np.diag([0.1, 1.0, 1.0])
V = np.diag([1.0, 0.5, 0.1])
INITIAL = types.SimpleNamespace(kind="cosine", direction=[0.6, 0.5, 0.3], amplitude=0.5)


def attention(beta: float) -> Attention:
    return Attention(Q, K, V, beta)


def rho0(x: np.ndarray) -> np.ndarray:
    """ρ_0(x) = (1 + ½⟨x, â⟩)/(4π) (mass 1), the metastability.toml initial density."""
    a = np.asarray(INITIAL.direction, float)
    a = a / np.linalg.norm(a)
    return (1.0 + INITIAL.amplitude * (x @ a)) / (4.0 * math.pi)


def exact_split(e: np.ndarray) -> float:
    """ρ_0({⟨x, e⟩ > 0}) exactly: ½ + amplitude·⟨â, e⟩/4."""
    a = np.asarray(INITIAL.direction, float)
    a = a / np.linalg.norm(a)
    return 0.5 + INITIAL.amplitude * float(a @ e) / 4.0


class Diagnostics:
    """energy (e^{-β}E_β), dist_eigenspace (A = VBᵀ), dist_eigenspace_V, w2_projection against
    the exact Π#ρ_0 (split a from ρ_0 analytically) and w2_own against the projection of the
    measure's own initial state (issue 20, item 6)."""

    def __init__(self, beta: float, x0: np.ndarray, w0: np.ndarray) -> None:
        att = attention(beta)
        self.beta = beta
        self.E = top_eigenspace(att.A).basis
        self.EV = top_eigenspace(att.V, by_magnitude=True).basis
        self.e = self.E[:, 0]
        self.a_exact = exact_split(self.e)
        self.a_own = two_point_weight(x0, w0, self.e)

    def __call__(self, x: np.ndarray, w: np.ndarray) -> dict:
        return {"energy": interaction_energy(x, w, self.beta), **self.light(x, w)}

    def light(self, x: np.ndarray, w: np.ndarray) -> dict:
        """Everything but the O(N²) energy."""
        return {"dist_eigenspace": dist_to_subspace(x, w, self.E),
                "dist_eigenspace_V": dist_to_subspace(x, w, self.EV),
                "w2_projection": w2_two_point(x, w, self.e, self.a_exact),
                "w2_own": w2_two_point(x, w, self.e, self.a_own),
                "mass": float(np.sum(w))}


def rho0_cell_averages(grid) -> np.ndarray:
    """Exact cell averages of ρ_0 on a GaussGrid (closed form of ∫_cell x dσ), grid.shape."""
    a = np.asarray(INITIAL.direction, float)
    a = a / np.linalg.norm(a)
    mu1, mu2 = grid.mu_faces[1:], grid.mu_faces[:-1]            # mu2 > mu1
    lf = np.asarray(grid.lon_faces)
    l1, l2 = lf[:-1][:grid.nlon], lf[1:][:grid.nlon]
    S = lambda m: 0.5 * (m * np.sqrt(np.clip(1 - m * m, 0, None)) + np.arcsin(m))
    r = (S(mu2) - S(mu1))[:, None]
    ix = r * (np.sin(l2) - np.sin(l1))[None]
    iy = r * (np.cos(l1) - np.cos(l2))[None]
    iz = (0.5 * (mu2 ** 2 - mu1 ** 2))[:, None] * (l2 - l1)[None]
    area = (mu2 - mu1)[:, None] * (l2 - l1)[None]
    return (area + INITIAL.amplitude * (a[0] * ix + a[1] * iy + a[2] * iz)) / (4 * math.pi * area)
