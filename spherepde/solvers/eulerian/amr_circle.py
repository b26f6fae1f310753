"""The leaf mesh of the adaptive finite volumes on S¹ (:mod:`.amr`), and its transfers.

Leaves are arcs of the raster of ``NX = 2·nlat0·2^lmax`` cells of Δθ_f = 2π/NX (θ from 0):
rows (x0, x1, 0, 1, level) — the S² layout with one raster row, so states, adapt passes and
the stepper are shared — base cells of width π/nlat0 (2·nlat0 of them), split in two per level.
Faces are the points between consecutive leaves (periodic): ``fa`` the leaf before (smaller θ),
``fb`` the leaf after, ``flen`` = 1, ``fnormal`` (F, 2) the unit tangent e_θ there, offsets
``off_a``/``off_b`` (F, 2) = (θ_face − θ_leaf, 0), ``fdist`` the centres' distance in θ.

Transfers to a :class:`~spherepde.grids.CircleGrid` (cells [(j − ½)Δ, (j + ½)Δ]) go through the
arc–cell overlaps, with the leaf density constant on each leaf: exact in mass to round-off,
positive.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids import CircleGrid
from spherepde.solvers.eulerian.amr_mesh import FaceMesh, _wrap, interval_overlaps


def circle_base_leaves(nlat0: int, lmax: int) -> np.ndarray:
    """The 2·nlat0 base arcs as rows (x0, x1, 0, 1, 0), int64."""
    S = 2**lmax
    i = np.arange(2 * nlat0, dtype=np.int64)
    return np.stack([i * S, (i + 1) * S, np.zeros_like(i), np.ones_like(i), np.zeros_like(i)], 1)


class CircleLeafMesh(FaceMesh):
    """Geometry of a set of arcs of the layout (nlat0, lmax) on S¹; see the module docstring."""

    nchildren = 2

    def __init__(self, nlat0: int, lmax: int, leaves: np.ndarray) -> None:
        self.nlat0, self.lmax = int(nlat0), int(lmax)
        self.S = 2**self.lmax
        self.NX, self.NY = 2 * self.nlat0 * self.S, 1
        self.dlon_f = 2 * math.pi / self.NX
        self.leaves = np.ascontiguousarray(leaves, dtype=np.int64)
        self.x0, self.x1, self.y0, self.y1, self.level = self.leaves.T
        order = np.argsort(self.x0, kind="stable")
        xs0, xs1 = self.x0[order], self.x1[order]
        if xs0[0] != 0 or xs1[-1] != self.NX or np.any(xs1[:-1] != xs0[1:]):
            raise ValueError("the arcs do not tile the circle")
        self.area = (self.x1 - self.x0) * self.dlon_f
        self.lonc = 0.5 * (self.x0 + self.x1) * self.dlon_f
        self.xc = np.stack([np.cos(self.lonc), np.sin(self.lonc)], 1)
        self.fa, self.fb = order, np.roll(order, -1)
        th = self.x1[self.fa] * self.dlon_f
        self.flen = np.ones(self.fa.size)
        self.fnormal = np.stack([-np.sin(th), np.cos(th)], 1)
        self.fkind = np.zeros(self.fa.size, np.int64)
        zero = np.zeros(self.fa.size)
        self.off_a = np.stack([_wrap(th - self.lonc[self.fa]), zero], 1)
        self.off_b = np.stack([_wrap(th - self.lonc[self.fb]), zero], 1)
        self.fdist = _wrap(self.lonc[self.fb] - self.lonc[self.fa])

    def children(self, fi: np.ndarray, rho: np.ndarray, sl: np.ndarray):
        """The two halves of the arcs ``fi`` (k,): (rows (2k, 5), leaf by leaf; masses (2, k) of
        the limited linear reconstruction, clipped at 0, not yet rescaled)."""
        x0, x1, lev = self.x0[fi], self.x1[fi], self.level[fi]
        h = (x1 - x0) // 2
        kids, cm = [], []
        one, zero = np.ones_like(x0), np.zeros_like(x0)
        for da in (0, 1):
            c0 = x0 + da * h
            kids.append(np.stack([c0, c0 + h, zero, one, lev + 1], 1))
            dth = (c0 + 0.5 * h) * self.dlon_f - self.lonc[fi]
            cm.append(h * self.dlon_f * np.maximum(rho[fi] + sl[fi, 0] * dth, 0.0))
        return np.stack(kids, 1).reshape(-1, 5), np.array(cm)


def _overlaps(mesh: CircleLeafMesh, grid: CircleGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arc (P,), CircleGrid cell (P,), overlap length (P,)) of every arc–cell pair that meets."""
    d = grid.dtheta
    # shifted by Δ/2: the grid cells become [jΔ, (j + 1)Δ], j = 0..n (j = n is j = 0)
    arc, cell, ln = interval_overlaps(mesh.x0 * mesh.dlon_f + 0.5 * d, mesh.x1 * mesh.dlon_f + 0.5 * d,
                                      np.arange(grid.n + 2) * d)
    return arc, cell % grid.n, ln


def arcs_to_circle(mesh: CircleLeafMesh, m: np.ndarray, grid: CircleGrid) -> np.ndarray:
    """Masses (n,) of the arcs' masses m on the CircleGrid cells."""
    arc, cell, ln = _overlaps(mesh, grid)
    return np.bincount(cell, weights=(m / mesh.area)[arc] * ln, minlength=grid.n)


def circle_to_arcs(grid: CircleGrid, rho: np.ndarray, mesh: CircleLeafMesh) -> np.ndarray:
    """Arc masses (n_leaves,) of the CircleGrid density ρ (n,), constant on its cells."""
    arc, cell, ln = _overlaps(mesh, grid)
    return np.bincount(arc, weights=np.asarray(rho, float)[cell] * ln, minlength=mesh.n)


def arc_integrals(mesh: CircleLeafMesh, func, npts: int = 4) -> np.ndarray:
    """∫_arc f dθ (n,) by an npts-point Gauss–Legendre rule; ``func`` maps points (k, 2) to (k,)."""
    g, w = np.polynomial.legendre.leggauss(npts)
    a, b = mesh.x0 * mesh.dlon_f, mesh.x1 * mesh.dlon_f
    out = np.zeros(mesh.n)
    for gi, wi in zip(g, w):
        th = 0.5 * (a + b) + 0.5 * (b - a) * gi
        out += wi * np.asarray(func(np.stack([np.cos(th), np.sin(th)], 1)), float).reshape(-1)
    return out * 0.5 * (b - a)
