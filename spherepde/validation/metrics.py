"""Diagnostics of measures on the sphere: Wasserstein distances, eigenspace distances,
interaction energy, spherical-harmonic moments.

A measure is handled as weighted points ``(x, w)``: x (n, d) unit vectors, w (n,) ≥ 0.
A density on a grid becomes the cell centres with masses ρ_j |cell_j| (:func:`as_measure`),
a midpoint quadrature whose error is O(h²) for smooth densities.  Distances use the
**chordal** cost |x − y|² = 2 − 2⟨x, y⟩ (SPEC.md), within a factor π/2 of the geodesic one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spherepde.dynamics.attention import nonnegative_weights

#: largest n·m for which :func:`w2` builds the dense cost matrix (8 bytes each: 800 MB)
MAX_EMD_ENTRIES = 10**8


def as_measure(grid, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A density on a GaussGrid/CircleGrid as weighted points (cell centres, masses)."""
    if hasattr(grid, "xyz"):
        return grid.xyz.reshape(-1, 3), (rho * grid.cell_area).reshape(-1)
    return np.asarray(grid.xy), rho * grid.cell_length


def _check(x, w):
    x = np.asarray(x, float)
    w = np.asarray(w, float).reshape(-1)
    if x.ndim != 2 or x.shape[0] != w.shape[0]:
        raise ValueError(f"points (n, d) and weights (n,) must match, got {x.shape} and {w.shape}")
    w = nonnegative_weights(w, "weights")
    return x, w


# ---- eigenspaces and the projection map of Paper 1 ------------------------------------------
@dataclass(frozen=True)
class TopEigenspace:
    """Top eigenspace E of a symmetric matrix A: orthonormal basis (d, k), eigenvalues
    (descending), the spectral gap γ = μ₁ − μ_{k+1} (0 if E is everything)."""

    basis: np.ndarray
    eigenvalues: np.ndarray
    gap: float

    @property
    def dim(self) -> int:
        return self.basis.shape[1]


def top_eigenspace(A: np.ndarray, *, rtol: float = 1e-9, by_magnitude: bool = False) -> TopEigenspace:
    """Eigenspace of the largest eigenvalue of symmetric A (eigenvalues within ``rtol·‖A‖`` of
    the top one are grouped).  ``by_magnitude`` ranks by |μ| (for the terminal phase, where the
    dominant eigenvalue of V may be negative).  Refuses a non-symmetric A."""
    A = np.asarray(A, float)
    if not np.allclose(A, A.T, rtol=1e-10, atol=1e-12 * max(np.abs(A).max(), 1e-300)):
        raise ValueError("A must be symmetric (the projection map Π is defined for symmetric A = VBᵀ)")
    mu, U = np.linalg.eigh(0.5 * (A + A.T))
    key = np.abs(mu) if by_magnitude else mu
    order = np.argsort(key)[::-1]
    mu, U, key = mu[order], U[:, order], key[order]
    tol = rtol * max(np.abs(mu).max(), 1e-300)
    k = int(np.sum(key >= key[0] - tol))
    gap = float(key[0] - key[k]) if k < len(mu) else 0.0
    return TopEigenspace(U[:, :k], mu, gap)


def dist_to_subspace(x, w, basis: np.ndarray) -> float:
    """dist_E(ρ) = (∫ |P_{E⊥} x|² dρ)^{1/2} for E spanned by the orthonormal columns of basis."""
    x, w = _check(x, w)
    proj = (x @ basis) @ basis.T
    return float(np.sqrt(np.sum(w * np.sum((x - proj) ** 2, axis=1))))


def projection_pushforward(x, w, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Π_# ρ with Π(x) = P_E x/|P_E x|, as weighted points (mass on P_E x = 0 is dropped)."""
    x, w = _check(x, w)
    p = (x @ basis) @ basis.T
    n = np.linalg.norm(p, axis=1)
    keep = n > 0
    return p[keep] / n[keep, None], w[keep]


def two_point_weight(x, w, e: np.ndarray) -> float:
    """a = ρ({⟨x, e⟩ > 0}) / ρ(S), so that Π_#ρ = a δ_e + (1 − a) δ_{−e} when E = span(e)."""
    x, w = _check(x, w)
    return float(np.sum(w[x @ e > 0]) / np.sum(w))


def w2_two_point(x, w, e: np.ndarray, a: float) -> float:
    """Exact W₂ (chordal) from ρ = Σ w_j δ_{x_j} (normalised) to a δ_e + (1 − a) δ_{−e}.

    The cost difference c(x, e) − c(x, −e) = −4⟨x, e⟩ is monotone in ⟨x, e⟩, so the optimal
    plan sends the mass fraction a with the largest ⟨x, e⟩ to e (splitting one atom).
    """
    x, w = _check(x, w)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"a must be in [0, 1], got {a}")
    w = w / w.sum()
    s = x @ e
    order = np.argsort(-s)
    s, w = s[order], w[order]
    cum = np.cumsum(w)
    to_e = np.clip(a - (cum - w), 0.0, w)  # mass of each atom sent to e
    cost = np.sum(to_e * (2 - 2 * s) + (w - to_e) * (2 + 2 * s))
    return float(np.sqrt(max(cost, 0.0)))


def w2(xa, wa, xb, wb, *, max_entries: int = MAX_EMD_ENTRIES) -> float:
    """Exact W₂ (chordal cost) between two discrete measures by network simplex (POT ``emd2``).

    Both are normalised to mass 1.  Refuses (ValueError) problems with more than
    ``max_entries`` cost entries: coarsen or subsample first (the error of doing so must be
    stated by the caller).
    """
    import ot

    xa, wa = _check(xa, wa)
    xb, wb = _check(xb, wb)
    if xa.shape[0] * xb.shape[0] > max_entries:
        raise ValueError(f"{xa.shape[0]}×{xb.shape[0]} cost matrix exceeds max_entries={max_entries}")
    M = np.maximum(2.0 - 2.0 * (xa @ xb.T), 0.0)
    val = ot.emd2(wa / wa.sum(), wb / wb.sum(), M, numItermax=10**7)
    return float(np.sqrt(max(val, 0.0)))


# ---- energy and moments ---------------------------------------------------------------------
def interaction_energy(x, w, beta: float, *, block: int = 4096) -> float:
    """Scaled interaction energy e^{−β} E_β(ρ) = ½ ∬ (1 − e^{β(⟨x,y⟩−1)}) dρ dρ (Paper 2).

    Zero exactly at a single Dirac mass; the e^{−β} scaling keeps it finite at large β.
    """
    x, w = _check(x, w)
    total = 0.0
    for s in range(0, x.shape[0], block):
        k = np.exp(beta * (x[s:s + block] @ x.T - 1.0))
        total += float(np.sum(w[s:s + block, None] * w[None, :] * (1.0 - k)))
    return 0.5 * total


def harmonic_moments(x, w, lmax: int) -> np.ndarray:
    """Moments ∫ conj(Y_lm) dρ, 0 ≤ m ≤ l ≤ lmax, of a measure on S² (orthonormal complex
    harmonics, no Condon–Shortley phase), in the order (l, m) with m fastest, as a flat
    complex array.  For a density this is the spectral analysis of ρ; for particles the
    empirical average — a smooth, dimension-free observable for convergence studies."""
    from scipy.special import sph_harm_y

    x, w = _check(x, w)
    if x.shape[1] != 3:
        raise ValueError("harmonic moments are defined on S² (points with d = 3)")
    theta = np.arccos(np.clip(x[:, 2], -1, 1))
    phi = np.arctan2(x[:, 1], x[:, 0])
    out = []
    for l in range(lmax + 1):
        for m in range(l + 1):
            y = sph_harm_y(l, m, theta, phi) * (-1) ** m  # remove the Condon–Shortley phase
            out.append(np.sum(w * np.conj(y)))
    return np.asarray(out)
