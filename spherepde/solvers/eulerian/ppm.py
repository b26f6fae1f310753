"""Piecewise-parabolic reconstruction (Colella & Woodward 1984) on 1-D lines of cells.

Every function works on a batch of independent lines: cell values have shape (nrows, n).
A cell's parabola in the local coordinate s ∈ [0, 1] is

    p(s) = qL + s (Δq + q6 (1 − s)),   Δq = qR − qL,   q6 = 6 (q̄ − (qL + qR)/2),

so that ∫₀¹ p ds = q̄ (the cell mean).  Edge values come from the derivative of the quartic
that interpolates the cumulative mass at five faces (fourth order on any smooth non-uniform
grid; on a uniform grid it is the classic 7/12, −1/12 formula).

Limiters (``limiter`` argument):
* ``"none"``      — the unlimited parabola (third order, may undershoot below zero);
* ``"positive"``  — the extremum-preserving limiter of Colella & Sekora (2008) (its sign
                    test, without their curvature bound) followed by the
                    positivity-preserving scaling p → q̄ + θ (p − q̄) with the largest θ ≤ 1
                    such that min p ≥ 0 (Zhang & Shu 2010); keeps the cell mean and the order
                    of accuracy for smooth positive data (smooth extrema are not clipped), and
                    adds no grid-scale oscillation where the data are not resolved;
* ``"monotone"``  — the CW84 monotonicity limiter (no new extrema; clips smooth peaks).

Why ``"positive"`` is more than the scaling.  The scaling alone only bounds each parabola's
minimum.  Where a profile is a few cells wide — a collapsing cluster — the unlimited edge values
ring: the peak's −1/12 weight makes the edge value at the second face from it negative, so the
scaled parabola of the cell next to the peak holds its mass at the peak side and that of the
cell after it holds its mass at the far side.  In a converging flow the first
drains into the peak and the second does not, and the pattern feeds itself: an odd–even
oscillation (…0.84 8.9 6.7 49 230 6.8 16 4…) that only positivity bounds (the unlimited scheme
makes the same one, with negative values).  Its damping per step by PPM is O(C²) for Courant
number C while the compression grows it by O(C), so no time step removes it.  The Colella–Sekora
sign test (:func:`extremum_limit_edges`, :func:`extremum_limit_cells`) flattens a cell that is
an extremum only where the second differences around it change sign (not at a smooth peak), and
keeps the other parabolas monotone: the ringing is gone, smooth data keep third order.
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
    """Fourth-order edge values at every face of periodic uniform lines.

    q : (nrows, n) cell means  →  (nrows, n+1) values at faces i − 1/2 for i = 0..n:

        e_{i−1/2} = 7/12 (q_i + q_{i−1}) − 1/12 (q_{i+1} + q_{i−2})   (indices mod n).

    The last column repeats the first (face n − 1/2 is face −1/2), so that cell i has left
    edge ``e[:, i]`` and right edge ``e[:, i + 1]`` without a roll.
    """
    nrows, n = q.shape
    # pad two ghost cells on each side (q_{n−2}, q_{n−1} | q | q_0, q_1) and use slices
    qp = np.empty((nrows, n + 4))
    qp[:, 2:n + 2] = q
    qp[:, :2] = q[:, n - 2:]
    qp[:, n + 2:] = q[:, :2]
    # column i of each slice holds q_{i}, q_{i−1}, q_{i+1}, q_{i−2} for faces i = 0..n
    return (7.0 / 12.0) * (qp[:, 2:n + 3] + qp[:, 1:n + 2]) - (1.0 / 12.0) * (
        qp[:, 3:n + 4] + qp[:, 0:n + 1]
    )


def edges_nonuniform(mass: np.ndarray, start: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Edge values at all n+1 faces from cell masses (nrows, n), with :func:`edge_weights`:

        e_f = Σ_{k=0..3} w[f, k] · mass[:, start[f] + k]      → (nrows, n+1).

    ``start`` must be the stencil start of :func:`edge_weights` (f − 2 for the interior faces
    2 ≤ f ≤ n − 2, one-sided at the two faces of each end), so that the interior faces are
    computed from column slices instead of a gathered (nrows, n+1, 4) copy.
    """
    nrows, n = mass.shape
    e = np.empty((nrows, n + 1))
    # interior faces f = 2..n−2: cells f−2..f+1, i.e. the slices mass[:, k : n−3+k]
    mid = e[:, 2:n - 1]
    np.multiply(mass[:, 0:n - 3], w[2:n - 1, 0], out=mid)
    for k in range(1, 4):
        mid += mass[:, k:n - 3 + k] * w[2:n - 1, k]
    # faces 0, 1 (cells 0..3) and n−1, n (cells n−4..n−1): one-sided stencils
    for f in (0, 1, n - 1, n):
        cells = mass[:, start[f]:start[f] + 4]
        e[:, f] = ((cells[:, 0] * w[f, 0] + cells[:, 1] * w[f, 1]) + cells[:, 2] * w[f, 2]) \
            + cells[:, 3] * w[f, 3]
    # the terms are added in order as in einsum("rfk,fk->rf"), which starts from +0: adding
    # +0 turns a −0 sum (all four terms −0) into +0 too, so results are bitwise einsum's
    e += 0.0
    return e


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
    # q6 = 6 (q̄ − 0.5 (qL + qR)), evaluated in place (same operations, fewer temporaries)
    q6 = qL + qR
    q6 *= 0.5
    np.subtract(qbar, q6, out=q6)
    q6 *= 6.0
    if limiter == "positive":
        qL, dq, q6 = _scale_positive(qbar, qL, qR, dq, q6)
    return qL, dq, q6


#: pre-filter margin of :func:`_scale_positive`, in units of eps × the scale of the data
_ROUNDING_MARGIN = 64.0


def _span(x: np.ndarray) -> float:
    """max(x, 0) − min(x, 0) ≥ max |x| (NaN if x holds a NaN), without an |x| temporary."""
    return float(np.max(x, initial=0.0) - np.min(x, initial=0.0))


def _scale_positive(qbar, qL, qR, dq, q6):
    """Positivity-preserving scaling (Zhang & Shu 2010) of the parabolas (qL, Δq, q6).

    Cells whose minimum over s ∈ [0, 1] (at an end, or at the vertex when it lies inside) is
    negative are scaled towards their mean, p → q̄ + θ (p − q̄) with θ = q̄ / (q̄ − min p).
    ``dq`` and ``q6`` must be arrays the caller owns: they are scaled in place; ``qL`` is copied
    before it is changed.
    """
    # Pre-filter.  p(s) = (1 − s) qL + s qR + q6 s (1 − s) ≥ min(qL, qR) + min(q6, 0)/4 on
    # [0, 1].  The exact floating-point test below is run only on the cells where this bound is
    # not safely positive.  The margin, 64 eps · scale (scale ≥ 2 max|qL| + 2 max|qR| + max|q6|)
    # plus the smallest normal number (against underflow), is far above the rounding error of
    # the floating-point minimum (a few ulps of |qL| + |Δq| + |q6| ≤ 2|qL| + |qR| + |q6|), so
    # every other cell would pass that test anyway: the results are bitwise those of testing
    # every cell.  With inf or NaN anywhere the bound says nothing: every cell is tested.
    lower = np.minimum(q6, 0.0)
    lower *= 0.25
    lower += np.minimum(qL, qR)
    scale = 2.0 * (_span(qL) + _span(qR)) + _span(q6)
    if np.isfinite(scale):
        eps = np.finfo(float)
        cand = lower < _ROUNDING_MARGIN * eps.eps * scale + eps.tiny
    else:
        cand = np.ones(qL.shape, dtype=bool)
    if not cand.any():
        return qL, dq, q6
    cqL, cqR, cdq, cq6 = qL[cand], qR[cand], dq[cand], q6[cand]

    # minimum of the parabola on [0, 1]: at an end or at the interior vertex
    pmin = np.minimum(cqL, cqR)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(cq6 != 0.0, 0.5 * (cdq + cq6) / cq6, -1.0)
    inside = (s > 0.0) & (s < 1.0)
    pv = cqL + s * (cdq + cq6 * (1.0 - s))
    pmin = np.where(inside, np.minimum(pmin, pv), pmin)
    bad_c = pmin < 0.0
    if not bad_c.any():
        return qL, dq, q6
    bad = np.zeros(qL.shape, dtype=bool)
    bad[cand] = bad_c
    qb = qbar[bad]
    denom = qb - pmin[bad_c]
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.where(denom > 0.0, np.clip(qb / denom, 0.0, 1.0), 0.0)
    qL = qL.copy()
    qL[bad] = qb + theta * (qL[bad] - qb)
    dq[bad] *= theta
    q6[bad] *= theta
    return qL, dq, q6


def periodic_pad(q: np.ndarray) -> np.ndarray:
    """(nrows, n+4) copy of periodic lines q (nrows, n) with two ghost cells on each side:
    column k holds q_{k−2 mod n} (q_{n−2}, q_{n−1} | q | q_0, q_1)."""
    nrows, n = q.shape
    qp = np.empty((nrows, n + 4))
    qp[:, 2:n + 2] = q
    qp[:, :2] = q[:, n - 2:]
    qp[:, n + 2:] = q[:, :2]
    return qp


def _one_sign(d2, *others):
    """Where d2 and every other second difference have one strict sign (False with NaN)."""
    pos = d2 > 0.0
    neg = d2 < 0.0
    for o in others:
        pos &= o > 0.0
        neg &= o < 0.0
    return pos | neg


def extremum_limit_edges(e, qm2, qm1, q0, qp1):
    """Edge values at the faces between means qm1 (left) and q0 (right), with qm2 left of qm1
    and qp1 right of q0 (all the same shape) — the face step of Colella & Sekora (2008) with
    their sign test alone (the limit C → ∞ of their curvature bound).

    An edge value outside [min(qm1, q0), max(qm1, q0)] is kept where the second differences
    of (qm1, e, q0), (qm2, qm1, q0) and (qm1, q0, qp1) have one sign (a smooth extremum lies
    at the face) and replaced by ½(qm1 + q0) where they do not (ringing next to an unresolved
    peak).  Returns a new array.
    """
    out = (e - qm1) * (q0 - e) < 0.0
    smooth = _one_sign(qm1 - 2.0 * e + q0, qm2 - 2.0 * qm1 + q0, qm1 - 2.0 * q0 + qp1)
    return np.where(out & ~smooth, 0.5 * (qm1 + q0), e)


def extremum_limit_cells(qL, qR, qm2, qm1, q, qp1, qp2):
    """Limited edge values (qL, qR) of cells with means q and neighbours qm2, qm1 | q | qp1, qp2
    (all the same shape) — the cell step of Colella & Sekora (2008) with their sign test
    alone.  Returns new (qL, qR).

    * a cell at an extremum — of its edge values or of the means — keeps its parabola where
      the parabola's curvature 6(qL + qR) − 12q and the second differences of the means at
      the cell and at both neighbours have one sign (a smooth peak or trough), and is
      flattened (qL = qR = q) where they do not (a spike, an odd–even pattern);
    * any other cell is made monotone (CW84): an edge more than twice as far from the mean as
      the other is pulled in to 3q − 2·(the other edge).

    Colella & Sekora also bound the kept curvature by C = 1.25 times the neighbouring second
    differences.  Measured here that bound clipped resolved smooth peaks (the S¹ exact-solution
    test: l2 +32 % at n = 64; Lauritzen's divergent flow, Gaussian hills at 3°: +43 %) and was
    not needed against the oscillation, so it is left out.
    """
    ext = ((qR - q) * (q - qL) <= 0.0) | ((qm1 - q) * (q - qp1) <= 0.0)
    smooth = _one_sign(6.0 * (qL + qR) - 12.0 * q, qm1 - 2.0 * q + qp1, qm2 - 2.0 * qm1 + q,
                       q - 2.0 * qp1 + qp2)
    flat = ext & ~smooth
    dl = qL - q
    dr = qR - q
    big_r = np.abs(dr) >= 2.0 * np.abs(dl)
    big_l = np.abs(dl) >= 2.0 * np.abs(dr)
    newL = np.where(ext, np.where(flat, q, qL), np.where(big_l, q - 2.0 * dr, qL))
    newR = np.where(ext, np.where(flat, q, qR), np.where(big_r, q - 2.0 * dl, qR))
    return newL, newR


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
    # one expression on purpose: numpy reuses its temporaries for large arrays (elision), which
    # allocates fewer fresh arrays than spelling the in-place steps out by hand
    return qL * s + dq * s * s / 2.0 + q6 * (s * s / 2.0 - s * s * s / 3.0)
