"""Conservative transfers between the AMR leaves (:mod:`.amr_mesh`) and a regular GaussGrid, and
the leaves' cell integrals of a function.

Both transfers go through the raster (NY, NX) of the leaf mesh, which refines every leaf and,
in (λ, μ = sin φ), overlaps every GaussGrid cell in rectangles:

* :func:`leaves_to_gauss` — the leaf density is taken constant in (λ, μ) on each leaf (the
  finite-volume density), so a raster cell (J, I) holds m_leaf·|cell_JI|/|leaf|; the raster
  masses are then summed onto the GaussGrid cells by the overlap fractions in μ and in λ
  (separable, dense matrices (nlat, NY) and (nlon, NX)).  Every fraction row sums to 1, so the
  total mass is kept to round-off, and masses stay ≥ 0.
* :func:`gauss_to_leaves` — the reverse: the GaussGrid density is constant on its cells; each
  leaf receives the mass of its overlaps.

Cost O(nlat·NY·NX + NX·NY·nlon/…) flops, memory a few rasters of float64 (see
:func:`remap_bytes`).
"""
from __future__ import annotations

import numpy as np

from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.solvers.eulerian.amr_mesh import LeafMesh


def remap_bytes(nlat0: int, lmax: int, nlat_out: int) -> int:
    """Bytes a remap needs at most: three float64 rasters and the two overlap matrices."""
    NY, NX = nlat0 * 2**lmax, 2 * nlat0 * 2**lmax
    return 8 * (3 * NY * NX + nlat_out * NY + (2 * nlat_out + 1) * NX + nlat_out * NX)


def _overlap(a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """(len(b), len(a)) lengths of [b0, b1] ∩ [a0, a1]."""
    return np.maximum(0.0, np.minimum(b1[:, None], a1[None, :]) - np.maximum(b0[:, None], a0[None, :]))


def _mu_overlap(mesh: LeafMesh, grid: GaussGrid) -> tuple[np.ndarray, np.ndarray]:
    """(μ-overlaps (nlat, NY) of the GaussGrid rows with the raster rows, raster Δμ (NY,))."""
    mu_f = np.sin(mesh.lat_faces_f)
    mu_f[0], mu_f[-1] = -1.0, 1.0
    mf = np.asarray(grid.mu_faces)  # descending from +1
    return _overlap(mu_f[:-1], mu_f[1:], mf[1:], mf[:-1]), np.diff(mu_f)


def _lon_overlap(mesh: LeafMesh, grid: GaussGrid) -> np.ndarray:
    """λ-overlaps (nlon, NX) of the GaussGrid columns [(k − ½)Δ, (k + ½)Δ] with the raster columns
    (periodic)."""
    d = grid.dlon
    # shift by Δ/2: the GaussGrid columns become [kΔ, (k + 1)Δ], k = 0..nlon (k = nlon is k = 0)
    a0 = np.arange(mesh.NX) * mesh.dlon_f + 0.5 * d
    ov = _overlap(a0, a0 + mesh.dlon_f, np.arange(grid.nlon + 1) * d, np.arange(1, grid.nlon + 2) * d)
    ov[0] += ov[-1]
    return ov[:-1]


def leaves_to_gauss(mesh: LeafMesh, m: np.ndarray, grid: GaussGrid) -> np.ndarray:
    """Masses (nlat, nlon) of the leaves' masses m (n,) on the GaussGrid cells (divide by
    ``grid.cell_area`` for the density)."""
    if not isinstance(grid, GaussGrid):
        raise TypeError(f"the output grid must be a GaussGrid, got {type(grid).__name__}")
    omu, dmu = _mu_overlap(mesh, grid)
    dens = (m / (mesh.area))[mesh.raster]  # leaf density per raster cell (NY, NX)
    fine = dens * (dmu[:, None] * mesh.dlon_f)
    wmu = omu / dmu[None, :]
    wlon = _lon_overlap(mesh, grid) / mesh.dlon_f
    return (wmu @ fine) @ wlon.T


def gauss_to_leaves(grid: GaussGrid, rho: np.ndarray, mesh: LeafMesh) -> np.ndarray:
    """Leaf masses (n,) of the GaussGrid density ρ (nlat, nlon), constant on its cells."""
    omu, _ = _mu_overlap(mesh, grid)
    olon = _lon_overlap(mesh, grid)
    fine = omu.T @ np.asarray(rho, float) @ olon  # (NY, NX) masses
    return np.bincount(mesh.raster.reshape(-1), weights=fine.reshape(-1), minlength=mesh.n)


def leaf_integrals(mesh: LeafMesh, func, npts: int = 4) -> np.ndarray:
    """∫_leaf f dσ (n,) by an npts × npts Gauss–Legendre rule in (λ, μ) per leaf; ``func`` maps
    Cartesian points (k, 3) to values (k,)."""
    g, w = np.polynomial.legendre.leggauss(npts)
    s0, s1 = np.sin(mesh.lat0), np.sin(mesh.lat1)
    out = np.zeros(mesh.n)
    for gi, wi in zip(g, w):
        lam = 0.5 * (mesh.lon0 + mesh.lon1) + 0.5 * (mesh.lon1 - mesh.lon0) * gi
        for gj, wj in zip(g, w):
            mu = 0.5 * (s0 + s1) + 0.5 * (s1 - s0) * gj
            lat = np.arcsin(np.clip(mu, -1.0, 1.0))
            out += wi * wj * np.asarray(func(lonlat_to_xyz(lam, lat)), float).reshape(-1)
    return out * 0.25 * (mesh.lon1 - mesh.lon0) * (s1 - s0)
