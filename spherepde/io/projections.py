"""Map projections and where to look, for the figures (:mod:`spherepde.io.maps`).

With (λ, φ) longitude and latitude:

* **orthographic** about a view centre c (unit vector) with basis (e, n, c), e = east, n = north
  at c:  (x, y) = (⟨p, e⟩, ⟨p, n⟩), visible where ⟨p, c⟩ ≥ 0; the disc x² + y² ≤ 1.
* **Mollweide** about a central longitude λ₀:  2θ + sin 2θ = π sin φ,
  x = (2√2/π)(λ − λ₀) cos θ,  y = √2 sin θ, with λ − λ₀ wrapped into [−π, π); the ellipse
  |x| ≤ 2√2, |y| ≤ √2.

The view centre of an orthographic panel is the mass's mean direction, or for two antipodal
clusters the heavier end of its principal axis (:func:`mass_centre`); the Mollweide map puts its
edge at the longitude holding the least mass (:func:`quiet_longitude`).
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz

SQRT2 = math.sqrt(2.0)


# ---- projections ------------------------------------------------------------------------------
def view_basis(centre) -> np.ndarray:
    """Rows (e, n, c) of the orthographic view about ``centre`` (3,), shape (3, 3).

    c = centre/|centre|; e = ẑ × c normalised (east; x̂-based when c is at a pole); n = c × e."""
    c = np.asarray(centre, float)
    c = c / np.linalg.norm(c)
    e = np.cross([0.0, 0.0, 1.0], c)
    if np.linalg.norm(e) < 1e-9:  # at a pole: "up" is −x̂ seen from +ẑ
        e = np.cross(c, [1.0, 0.0, 0.0]) if c[2] > 0 else np.cross([1.0, 0.0, 0.0], c)
        e = np.array([0.0, 1.0, 0.0]) if np.linalg.norm(e) < 1e-9 else e
    e = e / np.linalg.norm(e)
    return np.stack([e, np.cross(c, e), c])


def orthographic(xyz, centre) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthographic projection of points ``xyz`` (..., 3) about ``centre`` (3,).

    Returns x, y (...,) in the unit disc and ``visible`` (...,), ⟨p, c⟩ ≥ 0 (the near side)."""
    b = view_basis(centre)
    p = np.asarray(xyz, float) @ b.T
    return p[..., 0], p[..., 1], p[..., 2] >= 0.0


def orthographic_inverse(x, y, centre) -> tuple[np.ndarray, np.ndarray]:
    """Points (..., 3) of the near side that project to (x, y), and ``inside`` (x² + y² ≤ 1)."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    r2 = x**2 + y**2
    z = np.sqrt(np.clip(1.0 - r2, 0.0, None))
    return np.stack([x, y, z], axis=-1) @ view_basis(centre), r2 <= 1.0


def _wrap(dlon):
    """Angles wrapped into [−π, π)."""
    return np.mod(np.asarray(dlon, float) + np.pi, 2.0 * np.pi) - np.pi


def mollweide(lon, lat, lon0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mollweide projection of (λ, φ) in radians (broadcast shapes) about λ₀; returns x, y.

    θ solves 2θ + sin 2θ = π sin φ (monotone in θ: bisection to machine precision)."""
    lon, lat = np.broadcast_arrays(np.asarray(lon, float), np.asarray(lat, float))
    target = np.pi * np.sin(lat)
    lo, hi = np.full(lat.shape, -np.pi / 2), np.full(lat.shape, np.pi / 2)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = 2 * mid + np.sin(2 * mid) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    theta = 0.5 * (lo + hi)
    theta = np.where(np.abs(target) >= np.pi, np.sign(target) * np.pi / 2, theta)  # the poles exactly
    return 2 * SQRT2 / np.pi * _wrap(lon - lon0) * np.cos(theta), SQRT2 * np.sin(theta)


def mollweide_inverse(x, y, lon0: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(λ, φ) in radians of map points (x, y), and ``inside`` (the ellipse), each (...)."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    theta = np.arcsin(np.clip(y / SQRT2, -1.0, 1.0))
    lat = np.arcsin(np.clip((2 * theta + np.sin(2 * theta)) / np.pi, -1.0, 1.0))
    cos_t = np.cos(theta)
    with np.errstate(divide="ignore", invalid="ignore"):
        dlon = np.where(cos_t > 1e-12, np.pi * x / (2 * SQRT2 * np.where(cos_t > 1e-12, cos_t, 1.0)), 0.0)
    inside = (x / (2 * SQRT2))**2 + (y / SQRT2)**2 <= 1.0
    return np.mod(lon0 + dlon, 2 * np.pi), lat, inside


def cell_index(grid: GaussGrid, lon, lat) -> tuple[np.ndarray, np.ndarray]:
    """Indices (j, i) of the cells of ``grid`` holding the points (λ, φ) (radians, (...))."""
    j = np.searchsorted(-grid.lat_faces, -np.asarray(lat, float), side="right") - 1
    i = np.floor((np.asarray(lon, float) - grid.lon_faces[0]) / grid.dlon).astype(int)
    return np.clip(j, 0, grid.nlat - 1), np.mod(i, grid.nlon)


# ---- where to look ----------------------------------------------------------------------------
def mass_centre(xyz, w) -> np.ndarray:
    """A view centre (3,) for the measure Σ w_i δ_{x_i} (``xyz`` (n, 3), ``w`` (n,)).

    The mean direction m/|m|, m = Σ w_i x_i, when the mass is mostly on one side (|m| > 1/2:
    all clusters in one hemisphere).  Otherwise the principal axis of the second moment
    M = Σ w_i x_i x_iᵀ signed towards m, when M has a clear top eigenvalue (gap > 0.05): it
    points at the heavier of two antipodal clusters.  Otherwise m/|m|, and (lon 0, lat 30°) for a
    measure with neither."""
    xyz, w = np.asarray(xyz, float).reshape(-1, 3), np.asarray(w, float).ravel()
    w = w / w.sum()
    m = w @ xyz
    if np.linalg.norm(m) > 0.5:
        return m / np.linalg.norm(m)
    vals, vecs = np.linalg.eigh((xyz * w[:, None]).T @ xyz)
    if vals[2] - vals[1] > 0.05:
        v = vecs[:, 2]
        return -v if v @ m < 0 else v
    if np.linalg.norm(m) > 1e-3:
        return m / np.linalg.norm(m)
    return lonlat_to_xyz(0.0, math.radians(30.0))


def quiet_longitude(lon, w, bins: int = 72) -> float:
    """The longitude (radians) farthest inside the emptiest stretch of Σ w_i δ at ``lon`` (...):
    a histogram of ``bins`` bins, smoothed over ±2 bins around the circle; of the bins within
    1 % of the largest bin of the lightest one, the middle of the longest circular run."""
    h, _ = np.histogram(np.mod(np.ravel(lon), 2 * np.pi), bins=bins, range=(0, 2 * np.pi),
                        weights=np.ravel(w))
    smooth = np.zeros_like(h)
    for s in range(-2, 3):
        smooth += np.roll(h, s)
    light = smooth <= smooth.min() + 0.01 * (smooth.max() - smooth.min())
    if light.all():
        return math.pi
    start = int(np.argmin(light))  # a heavy bin: runs of light bins start after it
    best, run, best_mid = 0, 0, 0.0
    for k in range(1, bins + 1):
        b = (start + k) % bins
        run = run + 1 if light[b] else 0
        if run > best:
            best, best_mid = run, b - (run - 1) / 2
    return (best_mid % bins + 0.5) * 2 * np.pi / bins


__all__ = ["SQRT2", "cell_index", "mass_centre", "mollweide", "mollweide_inverse", "orthographic",
           "orthographic_inverse", "quiet_longitude", "view_basis"]
