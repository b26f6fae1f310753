"""Diagnostics of measures on the sphere: Wasserstein distances, eigenspace distances,
interaction energy, spherical-harmonic moments.

A measure is handled as weighted points ``(x, w)``: x (n, d) unit vectors, w (n,) ≥ 0.
A density on a grid becomes the cell centres with masses ρ_j |cell_j| (:func:`as_measure`),
a midpoint quadrature whose error is O(h²) for smooth densities.  Distances use the
**chordal** cost |x − y|² = 2 − 2⟨x, y⟩ (docs/equations.md), within a factor π/2 of the geodesic one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spherepde.dynamics.attention import nonnegative_weights
from spherepde.dynamics.energy import scaled_interaction_energy

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


def two_point_weight_cells(grid, rho: np.ndarray, e: np.ndarray, sub: int = 16) -> float:
    """a = ρ({⟨x, e⟩ > 0}) / ρ(S) of a finite-volume density ρ on a GaussGrid (nlat, nlon) or
    CircleGrid (n,), with ρ constant on each cell: every cell counts with the fraction of its area
    (length on S¹) on the positive side, estimated by ``sub`` × ``sub`` points of equal area
    (``sub`` on S¹) — not by the side of its centre, which puts a whole cell that straddles the
    plane on one side (an error O(h) in a, and in W₂ to Π_#ρ like sqrt(h))."""
    rho = np.asarray(rho, float)
    e = np.asarray(e, float)
    k = (np.arange(sub) + 0.5) / sub
    if hasattr(grid, "xyz"):
        lon = np.asarray(grid.lon_faces)[:-1, None] + grid.dlon * k[None, :]          # (nlon, sub)
        mf = np.asarray(grid.mu_faces)
        mu = mf[:-1, None] + (mf[1:] - mf[:-1])[:, None] * k[None, :]                  # (nlat, sub)
        c = np.sqrt(np.clip(1.0 - mu * mu, 0.0, None))
        horizontal = e[0] * np.cos(lon) + e[1] * np.sin(lon)                           # (nlon, sub)
        # ⟨x, e⟩ at the sub-points of one row of cells at a time: (sub, nlon, sub) floats
        frac = np.array([np.mean(c[j][:, None, None] * horizontal[None] + e[2] * mu[j][:, None, None] > 0,
                                 axis=(0, 2)) for j in range(mu.shape[0])])
        m = rho * np.asarray(grid.cell_area)
    else:
        th = np.asarray(grid.theta)[:, None] + grid.dtheta * (k[None, :] - 0.5)
        frac = np.mean(e[0] * np.cos(th) + e[1] * np.sin(th) > 0, axis=1)
        m = rho * grid.cell_length
    m = nonnegative_weights(m.reshape(-1), "rho")
    return float(np.sum(m * frac.reshape(-1)) / np.sum(m))


def two_point_weight_function(density, e: np.ndarray, n: int = 256) -> float:
    """a = ρ({⟨x, e⟩ > 0}) / ρ(S) of a density given by its formula ``density(x) -> (k,)`` at
    points x (k, d), on S² (d = 3) or S¹ (d = 2, e (2,)): each side by an n-point Gauss–Legendre
    rule in μ = ⟨x, e⟩ times 2n equally spaced longitudes about e (S²), or in the angle from e
    (S¹) — spectrally accurate for smooth ρ, with no grid cell straddling the plane (the cell
    rule :func:`two_point_weight_cells` is O(h²) off for a density varying inside its cells)."""
    e = np.asarray(e, float)
    if e.ndim != 1 or e.size not in (2, 3) or not np.all(np.isfinite(e)) or not np.linalg.norm(e) > 0:
        raise ValueError(f"e must be a non-zero direction with 2 (S¹) or 3 (S²) components, got {e!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer ≥ 2, got {n!r}")
    e = e / np.linalg.norm(e)
    t, wt = np.polynomial.legendre.leggauss(int(n))
    if e.size == 3:
        u = np.cross(e, [1.0, 0.0, 0.0] if abs(e[0]) < 0.9 else [0.0, 1.0, 0.0])
        u /= np.linalg.norm(u)
        v = np.cross(e, u)
        phi = 2 * np.pi * np.arange(2 * n) / (2 * n)
        ring = np.cos(phi)[:, None] * u + np.sin(phi)[:, None] * v               # (2n, 3)
        mu = 0.5 * (t + 1.0)                                                        # (0, 1)

        def side(sign: float) -> float:
            x = (sign * mu[:, None, None] * e + np.sqrt(1.0 - mu * mu)[:, None, None] * ring[None])
            f = np.asarray(density(x.reshape(-1, 3)), float).reshape(mu.size, -1)
            return float(0.5 * wt @ f.mean(axis=1))
    else:
        perp = np.array([-e[1], e[0]])
        th = 0.5 * np.pi * t                                                        # (−π/2, π/2)

        def side(sign: float) -> float:
            x = sign * (np.cos(th)[:, None] * e + np.sin(th)[:, None] * perp)
            return float(0.5 * np.pi * wt @ np.asarray(density(x), float).reshape(-1))
    plus, minus = side(1.0), side(-1.0)
    if not (plus >= 0 and minus >= 0 and plus + minus > 0):
        raise ValueError("the density must be non-negative with positive mass")
    return plus / (plus + minus)


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
    stated by the caller) — :func:`w2_with_bound` does that, with a rigorous error bound.
    """
    import ot

    xa, wa = _check(xa, wa)
    xb, wb = _check(xb, wb)
    if xa.shape[0] * xb.shape[0] > max_entries:
        raise ValueError(f"{xa.shape[0]}×{xb.shape[0]} cost matrix exceeds max_entries={max_entries}")
    M = np.maximum(2.0 - 2.0 * (xa @ xb.T), 0.0)
    val = ot.emd2(wa / wa.sum(), wb / wb.sum(), M, numItermax=10**7)
    return float(np.sqrt(max(val, 0.0)))


# ---- W₂ beyond the dense limit: coarsening with a stated error bound --------------------------
@dataclass(frozen=True)
class W2Estimate:
    """W₂ (chordal) between two measures with a rigorous error bound: |W₂(μ, ν) − value| ≤
    error_bound.

    Attributes
    ----------
    value : float
        W₂(μ̃, ν̃) of the measures actually solved (μ̃ = μ when ``method == "exact"``).
    error_bound : float
        ε_a + ε_b with ε = (Σ_j w_j |x_j − p_c(j)|²)^{1/2} (normalised weights, p_c the atom a
        point was moved to): the cost of an explicit coupling of μ and μ̃, hence ≥ W₂(μ, μ̃); by
        the triangle inequality |W₂(μ, ν) − W₂(μ̃, ν̃)| ≤ W₂(μ, μ̃) + W₂(ν, ν̃) ≤ error_bound.
        0 when exact.
    radius_bound : float
        r_a + r_b with r = max_j |x_j − p_c(j)| (the largest distance a point moved: the realised
        cell radius) — a cruder bound, ≥ error_bound.
    method : str
        "exact" (POT network simplex on the given atoms) or "coarsened".
    grid : str or None
        The partition used, e.g. "GaussGrid(64)" (cells of the Gauss grid, d = 3) or
        "CircleGrid(512)" (equal arcs, d = 2); None when exact.
    atoms : tuple of int
        Sizes of the two measures solved (after coarsening).
    """

    value: float
    error_bound: float
    radius_bound: float
    method: str
    grid: str | None
    atoms: tuple[int, int]

    @property
    def lower(self) -> float:
        """A lower bound on W₂(μ, ν): max(0, value − error_bound)."""
        return max(0.0, self.value - self.error_bound)

    @property
    def upper(self) -> float:
        """An upper bound on W₂(μ, ν): value + error_bound (the chordal W₂ is also ≤ 2)."""
        return min(2.0, self.value + self.error_bound)


def coarsen_measure(x, w, level: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Aggregate a measure on S² (d = 3) onto the cells of GaussGrid(level), or on S¹ (d = 2) onto
    ``level`` equal arcs (CircleGrid(level)): the mass of each occupied cell goes to the projected
    barycentre p_c = b_c/|b_c|, b_c = Σ_{j ∈ c} w_j x_j, which minimises Σ_{j∈c} w_j |x_j − p|² over
    the sphere (chordal cost: Σ w_j (2 − 2⟨x_j, p⟩)).

    Returns (points (k, d), masses (k,), ε, r) with, for the weights normalised to 1,
    ε = (Σ_j w_j |x_j − p_c(j)|²)^{1/2} ≥ W₂(μ, μ̃) and r = max_j |x_j − p_c(j)| ≥ ε.
    Points with zero weight are dropped.
    """
    x, w = _check(x, w)
    keep = w > 0
    x, w = x[keep], w[keep] / w[keep].sum()
    d = x.shape[1]
    if d == 3:
        from spherepde.grids import GaussGrid  # noqa: PLC0415

        g = GaussGrid(level)
        mu = np.clip(x[:, 2] / np.linalg.norm(x, axis=1), -1.0, 1.0)
        j = np.clip(np.searchsorted(-g.mu_faces, -mu, side="right") - 1, 0, g.nlat - 1)
        lon = np.mod(np.arctan2(x[:, 1], x[:, 0]) + 0.5 * g.dlon, 2 * np.pi)
        i = np.minimum((lon / g.dlon).astype(int), g.nlon - 1)
        cell = j * g.nlon + i
    elif d == 2:
        dth = 2 * np.pi / level
        th = np.mod(np.arctan2(x[:, 1], x[:, 0]) + 0.5 * dth, 2 * np.pi)
        cell = np.minimum((th / dth).astype(int), level - 1)
    else:
        raise ValueError(f"coarsening is implemented on S¹ and S² (d = 2, 3), got d = {d}")
    ids, inv = np.unique(cell, return_inverse=True)
    b = np.zeros((ids.size, d))
    np.add.at(b, inv, w[:, None] * x)
    m = np.bincount(inv, weights=w, minlength=ids.size)
    nb = np.linalg.norm(b, axis=1)
    p = b / np.where(nb > 0, nb, 1.0)[:, None]
    if np.any(nb == 0):  # b_c = 0: every p costs the same (2 Σ w); take a member of the cell
        first = np.empty(ids.size, int)
        first[inv[::-1]] = np.arange(x.shape[0])[::-1]
        p[nb == 0] = x[first[nb == 0]]
    disp2 = np.maximum(2.0 - 2.0 * np.sum(x * p[inv], axis=1), 0.0)
    return p, m, float(np.sqrt(np.sum(w * disp2))), float(np.sqrt(disp2.max(initial=0.0)))


def _emd_w2(xa, wa, xb, wb) -> float:
    """W₂ (chordal) of two small discrete measures by POT's network simplex; RuntimeError if the
    solver stops before optimality (its value would not be W₂)."""
    import ot

    M = np.maximum(2.0 - 2.0 * (xa @ xb.T), 0.0)
    val, log = ot.emd2(wa / wa.sum(), wb / wb.sum(), M, numItermax=10**9, log=True)
    if log.get("result_code", 1) != 1:
        raise RuntimeError(f"exact EMD did not reach optimality: {log.get('warning')}")
    return float(np.sqrt(max(val, 0.0)))


def w2_with_bound(xa, wa, xb, wb, *, max_entries: int = MAX_EMD_ENTRIES) -> W2Estimate:
    """W₂ (chordal cost) between two discrete measures on S¹ or S², exact when it fits, else
    approximated with a rigorous error bound (:class:`W2Estimate`).

    When na·nb ≤ ``max_entries`` this is :func:`w2` (method "exact", error bound 0).  Otherwise
    both measures are aggregated onto the cells of one coarse partition (:func:`coarsen_measure`:
    GaussGrid(level) cells on S², ``level`` equal arcs on S¹), each cell's mass at its projected
    barycentre — a measure is left as it is where coarsening would not reduce its atoms — and
    the coarse problem is solved exactly.  The level is the finest (from a doubling search, then
    bisection) whose coarse problem has ≤ ``max_entries`` cost entries.  Error bound:
    |W₂(μ, ν) − W₂(μ̃, ν̃)| ≤ W₂(μ, μ̃) + W₂(ν, ν̃) ≤ ε_a + ε_b (the displacement costs of the
    aggregation, computed from the data; see :class:`W2Estimate`).  On GaussGrid(level) a point
    moves at most about a cell diagonal, ≈ π·sqrt(2)/level for mid-latitude cells, so the bound
    falls like 1/level ∝ max_entries^{−1/4}.

    Cost: exact EMD on ≤ max_entries entries (POT 0.9.7: ~15 s at 8000 × 8000 atoms; memory
    8·max_entries bytes for the cost matrix), plus O((na + nb) log) for the binning.
    ValueError when even the coarsest level (32 cells on S², 8 arcs on S¹) does not fit.
    """
    xa, wa = _check(xa, wa)
    xb, wb = _check(xb, wb)
    if xa.shape[1] != xb.shape[1]:
        raise ValueError(f"the measures live in different dimensions: {xa.shape[1]} and {xb.shape[1]}")
    if not (wa.sum() > 0 and wb.sum() > 0):
        raise ValueError("both measures need positive total mass")
    xa, wa, xb, wb = xa[wa > 0], wa[wa > 0], xb[wb > 0], wb[wb > 0]
    na, nb = xa.shape[0], xb.shape[0]
    if na * nb <= max_entries:
        return W2Estimate(_emd_w2(xa, wa, xb, wb), 0.0, 0.0, "exact", None, (na, nb))
    d = xa.shape[1]
    if d not in (2, 3):
        raise ValueError(f"coarsening is implemented on S¹ and S² (d = 2, 3), got d = {d}")
    lo_level, step = (4, 2) if d == 3 else (8, 1)

    def coarse(level):
        ca = coarsen_measure(xa, wa, level)
        cb = coarsen_measure(xb, wb, level)
        # keep a measure as it is where its cells are not fewer than its atoms
        if ca[0].shape[0] >= na:
            ca = (xa, wa / wa.sum(), 0.0, 0.0)
        if cb[0].shape[0] >= nb:
            cb = (xb, wb / wb.sum(), 0.0, 0.0)
        return ca, cb

    def fits(level):
        ca, cb = coarse(level)
        return ca[0].shape[0] * cb[0].shape[0] <= max_entries

    if not fits(lo_level):
        raise ValueError(f"even the coarsest level ({'GaussGrid' if d == 3 else 'CircleGrid'}"
                         f"({lo_level})) exceeds max_entries={max_entries}")
    # doubling, then bisection on the largest level that fits (levels on S² are even)
    hi = lo_level
    cap = 4096 if d == 3 else 1 << 22
    while hi < cap and fits(min(2 * hi, cap)):
        hi = min(2 * hi, cap)
    lo, top = hi, min(2 * hi, cap)
    if top > lo:
        while top - lo > step:
            mid = (lo + top) // 2
            mid -= mid % step
            if mid <= lo:
                break
            if fits(mid):
                lo = mid
            else:
                top = mid
    level = lo
    (pa, ma, ea, ra), (pb, mb, eb, rb) = coarse(level)
    val = _emd_w2(pa, ma, pb, mb)
    name = f"GaussGrid({level})" if d == 3 else f"CircleGrid({level})"
    return W2Estimate(val, ea + eb, ra + rb, "coarsened", name, (pa.shape[0], pb.shape[0]))


# ---- energy and moments ---------------------------------------------------------------------
def interaction_energy(x, w, beta: float, *, block: int = 4096) -> float:
    """Scaled interaction energy e^{−β} E_β(ρ) = ½ ∬ (1 − e^{β(⟨x,y⟩−1)}) dρ dρ (Paper 2) of
    the weighted points (x, w): :func:`spherepde.dynamics.energy.scaled_interaction_energy`,
    the one implementation, after checking the shapes and weights."""
    x, w = _check(x, w)
    return scaled_interaction_energy(x, w, beta, block=block)


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


def moment_degrees(d: int, lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """(l, m) of the moments :func:`moments` returns: on S² (d = 3) 0 ≤ m ≤ l ≤ lmax in the order
    of :func:`harmonic_moments`; on S¹ (d = 2) l = m = k = 0..lmax.  Two int arrays."""
    if d == 3:
        lm = [(l, m) for l in range(lmax + 1) for m in range(l + 1)]
        return np.array([a for a, _ in lm]), np.array([b for _, b in lm])
    if d == 2:
        return np.arange(lmax + 1), np.arange(lmax + 1)
    raise ValueError(f"moments are defined on S² or S¹ (d = 3 or 2), got d = {d}")


def moments(x, w, lmax: int) -> np.ndarray:
    """The harmonic moments of a measure (x, w): on S² :func:`harmonic_moments`, on S¹ the
    Fourier moments ∫ e^{−ikθ} dρ = Σ_i w_i e^{−ikθ_i}, k = 0..lmax (θ_i = atan2(x_i2, x_i1)).
    Complex array in the order of :func:`moment_degrees`."""
    x, w = _check(x, w)
    if x.shape[1] == 3:
        return harmonic_moments(x, w, lmax)
    moment_degrees(x.shape[1], lmax)  # the error for d ≥ 4
    theta = np.arctan2(x[:, 1], x[:, 0])
    return np.array([np.sum(w * np.exp(-1j * k * theta)) for k in range(lmax + 1)])
