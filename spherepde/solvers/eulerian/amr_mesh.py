"""The leaf mesh of the adaptive finite volumes on S² (:mod:`.amr`): geometry, faces, slopes.

Base grid.  ``nlat0`` equiangular latitude rows of height π/nlat0 from the south pole and
``nlon0 = 2·nlat0`` longitudes; near the poles a row's cells are merged in longitude by the
largest power of two ≤ 1/cos φ (at most nlon0/4, and at most the stepper's ``polar_merge``), so
no base cell is much thinner than tall (a reduced grid).  Merged cells never refine.

Leaves.  Every leaf is a lon-lat rectangle of the *raster*, the grid refined ``lmax`` times:
``NX = nlon0·2^lmax`` columns of Δλ_f = 2π/NX and ``NY = nlat0·2^lmax`` rows of Δφ_f = π/NY.
A leaf is stored as integers (x0, x1, y0, y1, level): columns [x0, x1), rows [y0, y1) of the
raster (rows counted northwards from the south pole).  A level-l leaf is a base cell split l
times into 2×2 children.  The leaves tile the sphere; neighbours differ by at most one level
(2:1 balance, kept by :func:`~spherepde.solvers.eulerian.amr_adapt.adapt`).

Faces.  Found by sorted edge keys, without painting the raster: a leaf's east neighbours are
the leaves whose west edge lies on its east edge line (periodic in λ) and overlaps it in rows,
its north neighbours those whose south edge lies on its north edge line and overlaps it in
columns (binary searches in the leaves sorted by (x0, y0) and by (y0, x0)).  Each overlap is one
face with its exact length, so a coarse–fine interface is a set of fine faces and the coarse
leaf receives exactly the sum of the fine fluxes (Berger–Colella refluxing, with one time step
for all levels).  Arrays of the F faces: ``fa``/``fb`` (F,) the
leaves west/south and east/north of the face, ``flen`` (F,) its length on the unit sphere,
``fnormal`` (F, 3) the unit normal pointing from a to b at its midpoint, ``off_a``/``off_b``
(F, 2) the (λ, φ) offset of the midpoint from each leaf centre, ``fdist`` (F,) the distance of
the centres in the face's normal coordinate (λ for east–west faces, φ for north–south faces).
Cost O(n log n) time and O(n) memory for n leaves, whatever ``lmax``; that the leaves tile the
sphere is checked (cell count and every edge covered).
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids.geometry import lonlat_to_xyz


def merge_factors(nlat0: int, max_merge: int | None = None) -> np.ndarray:
    """Longitude merge factor of each base row (nlat0,): the largest power of 2 ≤ 1/cos φ_row,
    capped at nlon0/4, at the largest power of 2 that divides nlon0 and at ``max_merge`` (a
    power of 2; 1: no merging)."""
    latc = -0.5 * math.pi + (np.arange(nlat0) + 0.5) * math.pi / nlat0
    nlon0 = 2 * nlat0
    kmax = min(int(math.log2(nlon0 // 4)), (nlon0 & -nlon0).bit_length() - 1)
    if max_merge is not None:
        kmax = min(kmax, int(math.log2(max_merge)))
    return np.array([2 ** min(kmax, int(math.floor(math.log2(1.0 / math.cos(p)) + 1e-9)))
                     for p in latc], dtype=np.int64)


def base_leaves(nlat0: int, lmax: int, max_merge: int | None = None) -> np.ndarray:
    """The level-0 leaves of the reduced base grid as rows (x0, x1, y0, y1, level), int64
    (polar rows merged by at most ``max_merge``: :func:`merge_factors`)."""
    S = 2**lmax
    rows = []
    for j, f in enumerate(merge_factors(nlat0, max_merge)):
        w = int(f) * S
        i = np.arange(2 * nlat0 // int(f), dtype=np.int64)
        rows.append(np.stack([i * w, (i + 1) * w, np.full_like(i, j * S),
                              np.full_like(i, (j + 1) * S), np.zeros_like(i)], 1))
    return np.concatenate(rows)


def interval_overlaps(lo: np.ndarray, hi: np.ndarray, edges: np.ndarray):
    """For intervals [lo_i, hi_i] and ascending edges (k + 1,): (interval i, bin j, overlap
    length) of every bin j = [edges_j, edges_{j+1}] the interval meets (length ≥ 0)."""
    j0 = np.clip(np.searchsorted(edges, lo, side="right") - 1, 0, edges.size - 2)
    j1 = np.clip(np.searchsorted(edges, hi, side="left") - 1, 0, edges.size - 2)
    cnt = j1 - j0 + 1
    i = np.repeat(np.arange(lo.size), cnt)
    j = np.repeat(j0 - np.cumsum(cnt) + cnt, cnt) + np.arange(i.size)
    ln = np.maximum(0.0, np.minimum(hi[i], edges[j + 1]) - np.maximum(lo[i], edges[j]))
    return i, j, ln


def _wrap(d: np.ndarray) -> np.ndarray:
    return np.mod(d + math.pi, 2 * math.pi) - math.pi


class FaceMesh:
    """What the fluxes and the adapt pass need of any leaf mesh (S²: :class:`LeafMesh`, S¹:
    :class:`~spherepde.solvers.eulerian.amr_circle.CircleLeafMesh`): leaves (n, 5) int64 rows
    (x0, x1, y0, y1, level) with ``level``, ``area`` (n,), ``xc`` (n, d); faces ``fa``, ``fb``,
    ``flen``, ``fnormal`` (F, d), ``off_a``, ``off_b`` (F, 2), ``fdist``, ``fkind`` (F,); the raster
    (finest-level) sizes ``S``, ``NX``, ``NY``; :meth:`children` of split leaves."""

    nchildren = 4
    leaves: np.ndarray
    x0: np.ndarray
    x1: np.ndarray
    y0: np.ndarray
    y1: np.ndarray
    level: np.ndarray
    area: np.ndarray
    xc: np.ndarray
    fa: np.ndarray
    fb: np.ndarray
    flen: np.ndarray
    fnormal: np.ndarray
    off_a: np.ndarray
    off_b: np.ndarray
    fdist: np.ndarray
    fkind: np.ndarray
    nlat0: int
    lmax: int
    S: int
    NX: int
    NY: int

    @property
    def n(self) -> int:
        return int(self.leaves.shape[0])

    def refinable(self) -> np.ndarray:
        """(n,) bool: below lmax and not a merged polar cell."""
        return (self.level < self.lmax) & (self.x1 - self.x0 == (self.S >> self.level))

    def children(self, fi: np.ndarray, rho: np.ndarray, sl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows (c·k, 5) of the children of the leaves ``fi``, leaf by leaf; their unscaled
        reconstruction masses (c, k)), c = ``nchildren``."""
        raise NotImplementedError

    def slopes(self, rho: np.ndarray, limiter) -> np.ndarray:
        """Limited slopes (n, 2) of the leaf densities ρ (n,) in (λ, φ): on each side the
        length-weighted mean of the difference quotients across that side's faces, combined by
        ``limiter(forward, backward)``; 0 where a side has no face (a polar row)."""
        n = self.n
        out = np.zeros((n, 2))
        for kind in (0, 1):
            s = self.fkind == kind
            a, b, ln = self.fa[s], self.fb[s], self.flen[s]
            g = (rho[b] - rho[a]) / self.fdist[s]
            lp = np.bincount(a, weights=ln, minlength=n)
            gp = np.bincount(a, weights=ln * g, minlength=n)
            lm = np.bincount(b, weights=ln, minlength=n)
            gm = np.bincount(b, weights=ln * g, minlength=n)
            has = (lp > 0) & (lm > 0)
            gp = np.where(lp > 0, gp / np.where(lp > 0, lp, 1.0), 0.0)
            gm = np.where(lm > 0, gm / np.where(lm > 0, lm, 1.0), 0.0)
            out[:, kind] = np.where(has, limiter(gp, gm), 0.0)
        return out

    def neighbour_max(self, values: np.ndarray) -> np.ndarray:
        """(n,) the largest of ``values`` over each leaf's face neighbours."""
        out = np.full(self.n, -np.inf)
        np.maximum.at(out, self.fa, values[self.fb])
        np.maximum.at(out, self.fb, values[self.fa])
        return out


class LeafMesh(FaceMesh):
    """Geometry of a leaf set of the layout (nlat0, lmax); see the module docstring.

    Parameters
    ----------
    nlat0, lmax : int
        The layout (validated by the caller, :class:`~spherepde.solvers.eulerian.amr.AMRDensity`).
    leaves : (n, 5) int64
        Rows (x0, x1, y0, y1, level) that tile the raster.

    Attributes: ``n``; per leaf (n,): ``area`` (on the unit sphere), ``lon0, lon1, lat0, lat1``
    (bounds), ``lonc, latc`` (centre in λ, φ), ``xc`` (n, 3) Cartesian centres; the face arrays
    of the module docstring.
    """

    def __init__(self, nlat0: int, lmax: int, leaves: np.ndarray) -> None:
        self.nlat0, self.lmax = int(nlat0), int(lmax)
        self.S = 2**self.lmax
        self.NX, self.NY = 2 * self.nlat0 * self.S, self.nlat0 * self.S
        self.dlon_f, self.dlat_f = 2 * math.pi / self.NX, math.pi / self.NY
        self.lat_faces_f = -0.5 * math.pi + self.dlat_f * np.arange(self.NY + 1)
        self.leaves = np.ascontiguousarray(leaves, dtype=np.int64)
        self.x0, self.x1, self.y0, self.y1, self.level = self.leaves.T
        self._cells()
        self._faces()

    # ------------------------------------------------------------------------------------
    def _cells(self) -> None:
        self.lon0, self.lon1 = self.x0 * self.dlon_f, self.x1 * self.dlon_f
        self.lat0, self.lat1 = self.lat_faces_f[self.y0], self.lat_faces_f[self.y1]
        self.area = (self.lon1 - self.lon0) * (np.sin(self.lat1) - np.sin(self.lat0))
        self.lonc, self.latc = 0.5 * (self.lon0 + self.lon1), 0.5 * (self.lat0 + self.lat1)
        self.xc = lonlat_to_xyz(self.lonc, self.latc)

    @staticmethod
    def _edge_pairs(own_key: np.ndarray, lo_key: np.ndarray, hi_key: np.ndarray,
                    other_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Candidate pairs (i, j): for each leaf i every leaf j whose sort key lies in
        [lo_key_i, hi_key_i), plus the one just below lo_key_i (it may reach over the start);
        ``other_key`` (n,) are the leaves' keys.  The caller keeps the pairs that touch."""
        order = np.argsort(other_key, kind="stable")
        ks = other_key[order]
        lo = np.maximum(np.searchsorted(ks, lo_key, side="right") - 1, 0)
        hi = np.searchsorted(ks, hi_key, side="left")
        cnt = np.maximum(hi - lo, 0)
        i = np.repeat(np.arange(own_key.size), cnt)
        first = np.repeat(lo - np.cumsum(cnt) + cnt, cnt)
        return i, order[first + np.arange(i.size)]

    def _faces(self) -> None:
        """The faces by sorted edge keys (no raster): a leaf's east (north) neighbours are the
        leaves whose west (south) edge lies on its east (north) edge line and overlaps it."""
        x0, x1, y0, y1, n = self.x0, self.x1, self.y0, self.y1, self.n
        NX, NY = self.NX, self.NY
        # east-west faces: a = west leaf, b = east leaf (periodic in λ)
        col = x1 % NX
        a, b = self._edge_pairs(col, col * (NY + 1) + y0, col * (NY + 1) + y1, x0 * (NY + 1) + y0)
        ylo, yhi = np.maximum(y0[a], y0[b]), np.minimum(y1[a], y1[b])
        keep = (x0[b] == col[a]) & (yhi > ylo)
        a, b, ylo, yhi = a[keep], b[keep], ylo[keep], yhi[keep]
        o = np.argsort(a * n + b, kind="stable")
        a_ew, b_ew, ylo, yhi = a[o], b[o], ylo[o], yhi[o]
        ln_ew = (yhi - ylo) * self.dlat_f
        lat_ew = 0.5 * (ylo + yhi) * self.dlat_f - 0.5 * math.pi
        lon_ew = col[a_ew] * self.dlon_f
        # north-south faces: a = south leaf, b = north leaf
        a, b = self._edge_pairs(y1, y1 * (NX + 1) + x0, y1 * (NX + 1) + x1, y0 * (NX + 1) + x0)
        xlo, xhi = np.maximum(x0[a], x0[b]), np.minimum(x1[a], x1[b])
        keep = (y0[b] == y1[a]) & (xhi > xlo) & (y1[a] < NY)
        a, b, xlo, xhi = a[keep], b[keep], xlo[keep], xhi[keep]
        o = np.argsort(a * n + b, kind="stable")
        a_ns, b_ns, xlo, xhi = a[o], b[o], xlo[o], xhi[o]
        lat_ns = self.lat_faces_f[y1[a_ns]]
        ln_ns = np.cos(lat_ns) * (xhi - xlo) * self.dlon_f
        lon_ns = 0.5 * (xlo + xhi) * self.dlon_f
        self._check_tiling(a_ew, b_ew, yhi - ylo, a_ns, b_ns, xhi - xlo)
        self.fa, self.fb = np.concatenate([a_ew, a_ns]), np.concatenate([b_ew, b_ns])
        self.flen = np.concatenate([ln_ew, ln_ns])
        lon, lat = np.concatenate([lon_ew, lon_ns]), np.concatenate([lat_ew, lat_ns])
        self.fkind = np.concatenate([np.zeros(a_ew.size, np.int64), np.ones(a_ns.size, np.int64)])
        e_lon = np.stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)], 1)
        e_lat = np.stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)], 1)
        self.fnormal = np.where(self.fkind[:, None] == 0, e_lon, e_lat)
        fa, fb = self.fa, self.fb
        self.off_a = np.stack([_wrap(lon - self.lonc[fa]), lat - self.latc[fa]], 1)
        self.off_b = np.stack([_wrap(lon - self.lonc[fb]), lat - self.latc[fb]], 1)
        self.fdist = np.where(self.fkind == 0, _wrap(self.lonc[fb] - self.lonc[fa]),
                              self.latc[fb] - self.latc[fa])

    def _check_tiling(self, a_ew, b_ew, rows, a_ns, b_ns, cols) -> None:
        """ValueError unless the leaves tile the raster: their cells add up to NX·NY and every
        edge of every leaf is covered by its neighbours' edges (the poles excepted)."""
        n, h, w = self.n, self.y1 - self.y0, self.x1 - self.x0
        east = np.bincount(a_ew, weights=rows, minlength=n)
        west = np.bincount(b_ew, weights=rows, minlength=n)
        north = np.bincount(a_ns, weights=cols, minlength=n)
        south = np.bincount(b_ns, weights=cols, minlength=n)
        if (int(np.sum(h * w)) != self.NX * self.NY or np.any(east != h) or np.any(west != h)
                or np.any(north != np.where(self.y1 < self.NY, w, 0))
                or np.any(south != np.where(self.y0 > 0, w, 0))):
            raise ValueError("the leaves do not tile the sphere")

    def children(self, fi: np.ndarray, rho: np.ndarray, sl: np.ndarray):
        """The 2×2 children of the leaves ``fi`` (k,): (rows (4k, 5), leaf by leaf; masses (4, k)
        of the limited linear reconstruction ρ + s·(x_child − x_parent), clipped at 0, times the
        child areas — not yet rescaled to the parent's mass)."""
        x0, x1, y0, y1, lev = (a[fi] for a in (self.x0, self.x1, self.y0, self.y1, self.level))
        hx, hy = (x1 - x0) // 2, (y1 - y0) // 2
        kids, cm = [], []
        for da in (0, 1):
            for db in (0, 1):
                cx0, cy0 = x0 + da * hx, y0 + db * hy
                kids.append(np.stack([cx0, cx0 + hx, cy0, cy0 + hy, lev + 1], 1))
                lat_lo, lat_hi = self.lat_faces_f[cy0], self.lat_faces_f[cy0 + hy]
                area = hx * self.dlon_f * (np.sin(lat_hi) - np.sin(lat_lo))
                dlon = (cx0 + 0.5 * hx) * self.dlon_f - self.lonc[fi]
                dlat = 0.5 * (lat_lo + lat_hi) - self.latc[fi]
                cm.append(area * np.maximum(rho[fi] + sl[fi, 0] * dlon + sl[fi, 1] * dlat, 0.0))
        return np.stack(kids, 1).reshape(-1, 5), np.array(cm)


def minmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a * b > 0, np.sign(a) * np.minimum(np.abs(a), np.abs(b)), 0.0)


def monotonized_central(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MC limiter: minmod(2a, 2b, (a + b)/2)."""
    return np.where(a * b > 0, np.sign(a) * np.minimum(np.minimum(2 * np.abs(a), 2 * np.abs(b)),
                                                       0.5 * np.abs(a + b)), 0.0)


LIMITERS = {"mc": monotonized_central, "minmod": minmod}
