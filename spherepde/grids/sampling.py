"""Exact random sampling of points from a piecewise-constant density on a grid.

A density on a grid is the piecewise-constant function ρ(x) = ρ_j for x in cell_j.  Its
probability measure is

    P(cell_j) = ρ_j |cell_j| / Σ_k ρ_k |cell_k|,

and, given the cell, the point is uniform (with respect to surface measure) in it.  On the
Gauss grid the area element is dλ dμ in the equal-area coordinates (λ, μ = sin φ), and a cell
is the rectangle [λ_{i−1/2}, λ_{i+1/2}] × [μ_{j+1/2}, μ_{j−1/2}]; so "uniform in the cell" is
λ and μ independent and uniform on those intervals.  On the circle a cell is an arc and θ is
uniform on [θ_{i−1/2}, θ_{i+1/2}].  Sampling is therefore *exact*: the points are iid draws
from the piecewise-constant density, with no binning or rejection error.

Randomness comes only from ``numpy.random.default_rng(seed)`` (no global state).  Point ``k``
uses row ``k`` of one ``(n, 3)`` (sphere) or ``(n, 2)`` (circle) block of uniforms, so with the
same seed the first ``n`` points of a draw of ``n' > n`` points are the draw of ``n`` points.
"""
from __future__ import annotations

import numpy as np

from spherepde.checks import check_seed
from spherepde.grids.circle import CircleGrid
from spherepde.grids.gauss import GaussGrid


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"n must be an int >= 1 (the number of points), got {n!r}")
    if n < 1:
        raise ValueError(f"n must be an int >= 1 (the number of points), got {n}")
    return int(n)


def _cell_probabilities(rho, measure: np.ndarray) -> np.ndarray:
    """Masses ρ_j |cell_j|, flattened, after validating ``rho``."""
    if np.iscomplexobj(rho):
        raise ValueError("rho must be real, got a complex array")
    try:
        r = np.asarray(rho, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"rho must be a real array of shape {measure.shape}") from None
    if r.shape != measure.shape:
        raise ValueError(f"rho has shape {r.shape}, the grid needs {measure.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rho must be finite (it contains NaN or inf)")
    if np.any(r < 0):
        raise ValueError(f"rho must be non-negative, its minimum is {r.min():.3g}")
    mass = (r * measure).reshape(-1)
    if not mass.sum() > 0:
        raise ValueError("rho must have positive total mass (it is zero everywhere)")
    return mass


def _pick_cells(mass: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse CDF: cell index ``k`` with probability ``mass[k] / Σ mass`` for ``u ~ U[0, 1)``.

    Cells of zero mass are never picked (their CDF interval is empty; rounding at the top
    end is clipped to the last cell with positive mass).
    """
    cdf = np.cumsum(mass)
    cdf /= cdf[-1]
    idx = np.searchsorted(cdf, u, side="right")
    last = int(np.flatnonzero(mass > 0)[-1])
    return np.minimum(idx, last)


def sample_density(grid: GaussGrid | CircleGrid, rho, n: int, seed: int | None = None) -> np.ndarray:
    r"""Draw ``n`` iid points from the piecewise-constant density ``rho`` on ``grid``.

    The cell is chosen with probability :math:`\rho_j |\mathrm{cell}_j| / \sum_k \rho_k
    |\mathrm{cell}_k|` (inverse CDF of the flattened cumulative masses), then the point is
    uniform in the cell:

    * :class:`GaussGrid`: :math:`\lambda \sim U[\lambda_{i-1/2}, \lambda_{i+1/2}]`,
      :math:`\mu \sim U[\mu_{j+1/2}, \mu_{j-1/2}]` (equal-area coordinates,
      :math:`dA = d\lambda\, d\mu`), and
      :math:`x = (\sqrt{1-\mu^2}\cos\lambda, \sqrt{1-\mu^2}\sin\lambda, \mu)`;
    * :class:`CircleGrid`: :math:`\theta \sim U[\theta_{i-1/2}, \theta_{i+1/2}]`,
      :math:`x = (\cos\theta, \sin\theta)`.

    ``rho`` need not be normalised (only ratios matter).

    Parameters
    ----------
    grid : GaussGrid or CircleGrid
    rho : array_like
        Non-negative, finite cell values, shape ``grid.shape`` ((nlat, nlon) north to south,
        or (n_cells,)), with positive total mass.
    n : int
        Number of points, ``>= 1``.
    seed : int or None
        Seed of ``numpy.random.default_rng``; the result depends on nothing else.  None draws
        fresh entropy (not reproducible).

    Returns
    -------
    ndarray
        Shape ``(n, 3)`` on a GaussGrid, ``(n, 2)`` on a CircleGrid; unit vectors (to
        round-off).

    Raises
    ------
    ValueError
        Bad ``rho`` (shape, NaN/inf, negative values, zero mass), ``n`` or ``seed``.
    TypeError
        ``grid`` is not a GaussGrid or CircleGrid.
    """
    if isinstance(grid, GaussGrid):
        measure = grid.cell_area
    elif isinstance(grid, CircleGrid):
        measure = grid.cell_length
    else:
        raise TypeError(f"grid must be a GaussGrid or CircleGrid, got {type(grid).__name__}")
    mass = _cell_probabilities(rho, measure)
    n = _check_n(n)
    rng = np.random.default_rng(check_seed(seed, none_ok=True))

    if isinstance(grid, GaussGrid):
        u = rng.random((n, 3))
        k = _pick_cells(mass, u[:, 0])
        j, i = np.divmod(k, grid.nlon)
        lon = grid.lon_faces[i] + u[:, 1] * grid.dlon
        mf = grid.mu_faces
        mu = mf[j + 1] + u[:, 2] * (mf[j] - mf[j + 1])
        c = np.sqrt(np.clip(1.0 - mu * mu, 0.0, None))
        return np.stack([c * np.cos(lon), c * np.sin(lon), mu], axis=-1)

    u = rng.random((n, 2))
    k = _pick_cells(mass, u[:, 0])
    theta = grid.theta_faces[k] + u[:, 1] * grid.dtheta
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


__all__ = ["sample_density"]
