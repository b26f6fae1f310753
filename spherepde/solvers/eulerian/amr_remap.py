"""Conservative transfers between the AMR leaves (:mod:`.amr_mesh`) and a regular GaussGrid, and
the leaves' cell integrals of a function.

In (λ, μ = sin φ) every leaf and every GaussGrid cell is a rectangle, and area on the unit sphere
is dλ·dμ, so a leaf and a cell overlap in a rectangle of area Δλ_overlap·Δμ_overlap.
:func:`overlaps` lists, for every leaf, the GaussGrid rows and columns its rectangle meets (a leaf
smaller than a cell meets at most 2 × 2 cells):

* :func:`leaves_to_gauss` — the leaf density is taken constant in (λ, μ) on each leaf (the
  finite-volume density), so the cell receives m_leaf·|overlap|/|leaf|.  The overlaps of a leaf
  add up to its area, so the total mass is kept to round-off, and masses stay ≥ 0.
* :func:`gauss_to_leaves` — the reverse: the GaussGrid density is constant on its cells; each
  leaf receives the mass of its overlaps.

Cost and memory O(P) for P leaf–cell overlaps (see :func:`remap_bytes`).
"""
from __future__ import annotations


import numpy as np

from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.solvers.eulerian.amr_mesh import LeafMesh, interval_overlaps

#: bytes per leaf–cell overlap while it is built (indices and widths, a few copies)
_BYTES_PER_OVERLAP = 8 * 12


def remap_bytes(max_cells: int, nlat_out: int) -> int:
    """Bytes a remap needs at most: a leaf meets at most 2 × 2 cells unless it is wider or
    taller than a cell, and the wide ones are few, so P ≤ 4·(max_cells + 2·nlat_out²) overlaps
    is the bound used."""
    return _BYTES_PER_OVERLAP * 4 * (max_cells + 2 * nlat_out * nlat_out)


def overlaps(mesh: LeafMesh, grid: GaussGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(leaf (P,), flat GaussGrid cell index (P,), overlap area (P,)) of every leaf–cell pair
    that meets; the areas of a leaf add up to its area to round-off."""
    if not isinstance(grid, GaussGrid):
        raise TypeError(f"the output grid must be a GaussGrid, got {type(grid).__name__}")
    mu0, mu1 = np.sin(mesh.lat0), np.sin(mesh.lat1)
    mu0[mesh.y0 == 0], mu1[mesh.y1 == mesh.NY] = -1.0, 1.0
    mf = np.asarray(grid.mu_faces)[::-1]  # ascending from −1
    li, row, dmu = interval_overlaps(mu0, mu1, mf)
    row = grid.nlat - 1 - row  # GaussGrid rows run from the north
    # shift by Δ/2: the GaussGrid columns become [kΔ, (k + 1)Δ], k = 0..nlon (k = nlon is k = 0)
    d = grid.dlon
    edges = np.arange(grid.nlon + 2) * d
    lc, col, dlon = interval_overlaps(mesh.lon0 + 0.5 * d, mesh.lon1 + 0.5 * d, edges)
    col = col % grid.nlon
    # pair every row overlap of a leaf with every column overlap of the same leaf
    nr = np.bincount(li, minlength=mesh.n)
    nc = np.bincount(lc, minlength=mesh.n)
    rstart = np.cumsum(nr) - nr
    cstart = np.cumsum(nc) - nc
    leaf = np.repeat(np.arange(mesh.n), nr * nc)
    k = np.arange(leaf.size) - np.repeat(np.cumsum(nr * nc) - nr * nc, nr * nc)
    r = rstart[leaf] + k // nc[leaf]
    c = cstart[leaf] + k % nc[leaf]
    return leaf, row[r] * grid.nlon + col[c], dmu[r] * dlon[c]


def leaves_to_gauss(mesh: LeafMesh, m: np.ndarray, grid: GaussGrid) -> np.ndarray:
    """Masses (nlat, nlon) of the leaves' masses m (n,) on the GaussGrid cells (divide by
    ``grid.cell_area`` for the density)."""
    leaf, cell, area = overlaps(mesh, grid)
    out = np.bincount(cell, weights=(m / mesh.area)[leaf] * area, minlength=grid.nlat * grid.nlon)
    return out.reshape(grid.shape)


def gauss_to_leaves(grid: GaussGrid, rho: np.ndarray, mesh: LeafMesh) -> np.ndarray:
    """Leaf masses (n,) of the GaussGrid density ρ (nlat, nlon), constant on its cells."""
    leaf, cell, area = overlaps(mesh, grid)
    return np.bincount(leaf, weights=np.asarray(rho, float).reshape(-1)[cell] * area,
                       minlength=mesh.n)


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
