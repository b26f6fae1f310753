"""Piecewise-parabolic reconstruction (Colella & Woodward 1984) on 1-D lines of cells.

Every function works on a batch of independent lines: cell values have shape (nrows, n).
A cell's parabola in the local coordinate s ∈ [0, 1] is

    p(s) = qL + s (Δq + q6 (1 − s)),   Δq = qR − qL,   q6 = 6 (q̄ − (qL + qR)/2),

so that ∫₀¹ p ds = q̄ (the cell mean).  Edge values come from the derivative of the quartic
that interpolates the cumulative mass at five faces (fourth order on any smooth non-uniform
grid; on a uniform grid it is the classic 7/12, −1/12 formula).

Limiters (``limiter`` argument):
* ``"none"``      — the unlimited parabola (third order, may undershoot below zero);
* ``"positive"``  — positivity-preserving scaling p → q̄ + θ (p − q̄) with the largest θ ≤ 1
                    such that min p ≥ 0 (Zhang & Shu 2010); keeps the cell mean and the order
                    of accuracy for smooth positive data;
* ``"monotone"``  — the CW84 monotonicity limiter (no new extrema; clips smooth peaks).
"""
from __future__ import annotations

import numpy as np

LIMITERS = ("none", "positive", "monotone")


def check_limiter(limiter: str) -> str:
    if limiter not in LIMITERS:
        raise ValueError(f"limiter must be one of {LIMITERS}, got {limiter!r}")
    return limiter


def edge_weights(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights giving the edge values at every face from the masses of four cells.

    Parameters
    ----------
    faces : (n+1,) increasing face coordinates of a non-periodic line of n ≥ 4 cells.

    Returns
    -------
    start : (n+1,) int — first cell of each face's stencil (cells start..start+3)
    w     : (n+1, 4) — edge value at face f = Σ_k w[f, k] · mass[start[f] + k]
    """
    x = np.asarray(faces, float)
    n = x.size - 1
    if n < 4:
        raise ValueError(f"a line needs at least 4 cells for PPM, got {n}")
    f = np.arange(n + 1)
    start = np.clip(f - 2, 0, n - 4)
    w = np.empty((n + 1, 4))
    for i in range(n + 1):
        xs = x[start[i] : start[i] + 5]
        # derivative at x[i] of the Lagrange basis on the five stencil faces
        dl = np.empty(5)
        for k in range(5):
            others = np.delete(xs, k)
            denom = np.prod(xs[k] - others)
            # d/dx Π_{j≠k}(x − x_j) at x[i]
            terms = [np.prod(np.delete(x[i] - others, j)) for j in range(4)]
            dl[k] = np.sum(terms) / denom
        # cumulative mass M_k = Σ_{j<k} m_j  ⇒  weight of cell j is Σ_{k>j} dl_k
        w[i] = np.cumsum(dl[::-1])[::-1][1:]
    return start, w


def edges_periodic_uniform(q: np.ndarray) -> np.ndarray:
    """Fourth-order edge values at the left face of every cell of periodic uniform lines.

    q : (nrows, n) cell means  →  (nrows, n) values at faces i − 1/2.
    """
    return (7.0 / 12.0) * (q + np.roll(q, 1, axis=-1)) - (1.0 / 12.0) * (
        np.roll(q, -1, axis=-1) + np.roll(q, 2, axis=-1)
    )


def edges_nonuniform(mass: np.ndarray, start: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Edge values at all n+1 faces from cell masses (nrows, n), with :func:`edge_weights`."""
    idx = start[:, None] + np.arange(4)[None, :]  # (n+1, 4)
    return np.einsum("rfk,fk->rf", mass[:, idx], w)


def parabola(qbar: np.ndarray, qL: np.ndarray, qR: np.ndarray, limiter: str,
             extremum: np.ndarray | None = None):
    """Limited parabola coefficients (qL, Δq, q6) for cells with means ``qbar``.

    ``qL``/``qR`` are the left/right edge values, all of shape (nrows, n).  For the monotone
    limiter they must already be bounded by the neighbouring means (:func:`bound_edges`);
    ``extremum`` (bool, same shape) marks the cells to flatten — by default those where the
    bounded edge values do not bracket the mean.
    """
    if limiter == "monotone":
        qL = qL.copy()
        qR = qR.copy()
        if extremum is None:
            extremum = (qR - qbar) * (qbar - qL) <= 0.0
        qL[extremum] = qbar[extremum]
        qR[extremum] = qbar[extremum]
        dq = qR - qL
        q6 = 6.0 * (qbar - 0.5 * (qL + qR))
        over_l = dq * q6 > dq * dq
        qL[over_l] = 3.0 * qbar[over_l] - 2.0 * qR[over_l]
        over_r = -dq * dq > dq * q6
        qR[over_r] = 3.0 * qbar[over_r] - 2.0 * qL[over_r]
    dq = qR - qL
    q6 = 6.0 * (qbar - 0.5 * (qL + qR))
    if limiter == "positive":
        # minimum of the parabola on [0, 1]: at an end or at the interior vertex
        pmin = np.minimum(qL, qR)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(q6 != 0.0, 0.5 * (dq + q6) / q6, -1.0)
        inside = (s > 0.0) & (s < 1.0)
        pv = qL + s * (dq + q6 * (1.0 - s))
        pmin = np.where(inside, np.minimum(pmin, pv), pmin)
        bad = pmin < 0.0
        if np.any(bad):
            qb = qbar[bad]
            denom = qb - pmin[bad]
            with np.errstate(divide="ignore", invalid="ignore"):
                theta = np.where(denom > 0.0, np.clip(qb / denom, 0.0, 1.0), 0.0)
            qL = qL.copy()
            qL[bad] = qb + theta * (qL[bad] - qb)
            dq = dq.copy()
            dq[bad] *= theta
            q6 = q6.copy()
            q6[bad] *= theta
    return qL, dq, q6


def bound_edges(edges_left: np.ndarray, edges_right: np.ndarray, qprev, q, qnext):
    """CW84 step 1 for the monotone limiter: each edge value lies between the two means
    that meet at that face."""
    qL = np.clip(edges_left, np.minimum(qprev, q), np.maximum(qprev, q))
    qR = np.clip(edges_right, np.minimum(q, qnext), np.maximum(q, qnext))
    return qL, qR


def partial_mass_right(qL, dq, q6, s):
    """∫_s^1 p ds′ (per unit width) for parabolas (qL, Δq, q6) at fractions s ∈ [0, 1]."""
    def prim(x):
        return qL * x + dq * x * x / 2.0 + q6 * (x * x / 2.0 - x * x * x / 3.0)

    return prim(np.ones_like(s)) - prim(s)


def partial_mass_left(qL, dq, q6, s):
    """∫_0^s p ds′ (per unit width)."""
    return qL * s + dq * s * s / 2.0 + q6 * (s * s / 2.0 - s * s * s / 3.0)
