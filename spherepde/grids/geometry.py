"""Point geometry on S²: lon/lat ↔ Cartesian, tangent-vector bases, tangent projection.

All functions broadcast over leading dimensions; Cartesian vectors have a trailing axis of 3.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def lonlat_to_xyz(lon: ArrayLike, lat: ArrayLike) -> np.ndarray:
    """``(λ, φ) → (cos φ cos λ, cos φ sin λ, sin φ)``, shape ``broadcast(lon, lat) + (3,)``."""
    lon, lat = np.broadcast_arrays(np.asarray(lon, float), np.asarray(lat, float))
    c = np.cos(lat)
    return np.stack([c * np.cos(lon), c * np.sin(lon), np.sin(lat)], axis=-1)


def xyz_to_lonlat(xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cartesian (…, 3) → (lon in [0, 2π), lat in [−π/2, π/2]); points need not be unit."""
    xyz = np.asarray(xyz, float)
    r = np.linalg.norm(xyz, axis=-1)
    lat = np.arcsin(np.clip(xyz[..., 2] / r, -1.0, 1.0))
    lon = np.mod(np.arctan2(xyz[..., 1], xyz[..., 0]), 2.0 * np.pi)
    return lon, lat


def east_north_basis(lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit east and north vectors at (lon, lat), each of shape ``broadcast + (3,)``."""
    lon, lat = np.broadcast_arrays(np.asarray(lon, float), np.asarray(lat, float))
    sl, cl = np.sin(lon), np.cos(lon)
    sp, cp = np.sin(lat), np.cos(lat)
    east = np.stack([-sl, cl, np.zeros_like(sl)], axis=-1)
    north = np.stack([-sp * cl, -sp * sl, cp], axis=-1)
    return east, north


def tangent_to_cartesian(u_east, v_north, lon, lat) -> np.ndarray:
    """``u e + v n`` as Cartesian vectors (…, 3)."""
    east, north = east_north_basis(lon, lat)
    return np.asarray(u_east)[..., None] * east + np.asarray(v_north)[..., None] * north


def check_tangent(vec: np.ndarray, x: np.ndarray, radial_tol: float) -> None:
    """ValueError if vectors ``vec`` at unit points ``x`` (both (…, d)) have a radial part
    larger than ``radial_tol`` × max|vec|: a velocity on the sphere must be tangent."""
    radial = np.abs(np.sum(vec * x, axis=-1))
    scale = max(float(np.max(np.linalg.norm(vec, axis=-1), initial=0.0)), 1e-300)
    worst = float(np.max(radial, initial=0.0)) / scale
    if worst > radial_tol:
        raise ValueError(
            f"velocity has a radial component (max |v·x|/max|v| = {worst:.2e} > "
            f"radial_tol={radial_tol:g}); a velocity on the sphere must be tangent"
        )


def cartesian_to_tangent(vec, xyz, lon, lat, *, radial_tol: float | None = 1e-10):
    """Cartesian vectors at points ``xyz`` → (east, north) components.

    ``radial_tol``: if not None, a radial component larger than ``radial_tol × max|vec|``
    raises ``ValueError`` (a velocity on the sphere must be tangent); None projects silently.
    """
    vec = np.asarray(vec, float)
    if radial_tol is not None:
        check_tangent(vec, xyz, radial_tol)
    east, north = east_north_basis(lon, lat)
    return np.sum(vec * east, axis=-1), np.sum(vec * north, axis=-1)


def project_tangent(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``P_x v = v − ⟨x, v⟩ x`` for unit points x (…, d) and vectors v (…, d).

    ⟨x, v⟩ is summed coordinate by coordinate (for d < 8 the order of ``np.sum(x * v, axis=-1)``,
    so the same bits; numpy sums longer axes pairwise): 2.8–3× faster than that sum at 65 792
    points on S², more so when v is a transposed view."""
    dot = x[..., 0] * v[..., 0]
    for k in range(1, x.shape[-1]):
        dot += x[..., k] * v[..., k]
    return v - dot[..., None] * x


def great_circle_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic distance between unit vectors (…, d), robust for near and antipodal points."""
    cross = np.linalg.norm(np.cross(a, b), axis=-1) if a.shape[-1] == 3 else None
    dot = np.sum(a * b, axis=-1)
    if cross is None:
        return np.arccos(np.clip(dot, -1.0, 1.0))
    return np.arctan2(cross, dot)


#: pairs with ⟨a, b⟩ − 1 above −NEAR_PAIR (closer than ~1.4e-3 rad) are recomputed exactly
NEAR_PAIR = 1e-6


def cosine_minus_one(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """⟨a_i, b_j⟩ − 1 for unit vectors a (..., n, d) and b (..., m, d): shape (..., n, m).

    The product is rounded (a point with itself gives ±a few ulps, which e^{β(·)} turns into
    ±β·ulps); the pairs closer than ~1.4e-3 rad are recomputed as −½|a_i − b_j|², the same
    number on S^{d−1} and exactly 0 for identical points.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    g = np.matmul(a, np.swapaxes(b, -1, -2)) - 1.0
    near = g > -NEAR_PAIR
    if np.any(near):
        lead = g.shape[:-2]
        A = np.broadcast_to(a, lead + a.shape[-2:])
        B = np.broadcast_to(b, lead + b.shape[-2:])
        *ix, i, j = np.nonzero(near)
        diff = A[(*ix, i)] - B[(*ix, j)]
        g[near] = -0.5 * np.einsum("kd,kd->k", diff, diff)
    return g


def kd_tiles(p: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Group points p (n, k) into tiles of at most ``size`` points by recursive halving: each
    tile with more than ``size`` points is split at its median along the coordinate of largest
    extent (a k-d tree's leaves, in tree order).  Unlike :func:`lat_lon_tiles` the tiles follow
    the points: where they crowd, the tiles are small, so a concentrated set gets compact tiles
    and neighbouring tiles sit next to each other in the order.  Deterministic (stable sorts);
    returns (order, tile start offsets into order with n appended, int64)."""
    p = np.asarray(p, float)
    n = p.shape[0]
    order = np.arange(n)
    if n == 0:
        return order, np.zeros(1, np.int64)
    bounds = np.array([0, n], np.int64)
    size = max(1, int(size))
    while int(np.max(np.diff(bounds))) > size:
        lens = np.diff(bounds)
        seg = np.repeat(np.arange(lens.size), lens)
        q = p[order]
        ext = (np.maximum.reduceat(q, bounds[:-1], axis=0)
               - np.minimum.reduceat(q, bounds[:-1], axis=0))
        split = lens > size
        # (tiles already small enough keep their order: key 0 under a stable sort)
        key = np.where(split[seg], q[np.arange(n), np.argmax(ext, axis=1)[seg]], 0.0)
        order = order[np.lexsort((key, seg))]
        bounds = np.sort(np.r_[bounds, bounds[:-1][split] + lens[split] // 2])
    return order, bounds.astype(np.int64)


def lat_lon_tiles(p: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Group unit points p (n, 3) into about n/size lat–lon tiles: (order, tile start offsets
    into order with n appended, int64)."""
    n = p.shape[0]
    nlat = max(1, int(round(np.sqrt(max(1, n // size) / 2))))
    nlon = 2 * nlat
    lat = np.arcsin(np.clip(p[:, 2], -1, 1))
    lon = np.arctan2(p[:, 1], p[:, 0]) + np.pi
    ib = np.minimum((lat + np.pi / 2) / np.pi * nlat, nlat - 1).astype(np.int64)
    jb = np.minimum(lon / (2 * np.pi) * nlon, nlon - 1).astype(np.int64)
    key = ib * nlon + jb
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(key[order]) != 0])
    return order, np.r_[starts, n].astype(np.int64)
