"""Prototype (issue 20): cell-based adaptive finite volumes on a reduced lon-lat grid of S².

Design (candidate (a) of the issue, without subcycling):
* base grid: nlat0 equiangular latitude rows, nlon0 = 2·nlat0 longitudes; rows near the poles are
  merged in longitude by powers of 2 (reduced grid) so no cell is much thinner than the others;
* leaves: lon-lat rectangles, refined by 2×2 splitting up to ``lmax`` levels; the leaf set is
  painted into an integer raster at the finest level, from which every face (conforming or
  coarse–fine) is found with its exact length — a coarse–fine face is a set of fine sub-faces, so
  the coarse cell receives exactly the sum of the fine fluxes (Berger–Colella refluxing with one
  time step for every level: no subcycling, no flux register needed);
* state: cell masses; update: SSP-RK2 of a MUSCL upwind flux (MC-limited slopes in λ and φ, or
  minmod; face values clipped at 0), fluxes antisymmetric, so mass is conserved to rounding; the step is the
  largest with dt·(outflow of every cell) ≤ courant·(its mass) at both stages (positivity);
* velocity: the package's Attention.mean at the cell centres with the cells' masses as weighted
  points (the midpoint quadrature of as_measure), projected (P_x V m), averaged to the faces;
* regrid (every ``regrid_every`` steps): a leaf is split when its mass, or the mass it would have
  at a neighbour's density, exceeds ``m_split`` (equidistribution of mass: cost follows the mass);
  four sibling leaves are merged when their total is below m_split/8; mass is moved by a limited
  linear reconstruction, rescaled to the parent's mass exactly (conservative, positive).
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids.geometry import project_tangent


def _minmod(a, b):
    return np.where(a * b > 0, np.sign(a) * np.minimum(np.abs(a), np.abs(b)), 0.0)


def _mc(a, b):
    """Monotonized-central limiter: minmod(2a, 2b, (a + b)/2)."""
    return np.where(a * b > 0, np.sign(a) * np.minimum(np.minimum(2 * np.abs(a), 2 * np.abs(b)),
                                                       0.5 * np.abs(a + b)), 0.0)


LIMITERS = {"minmod": _minmod, "mc": _mc}


class AMRSphere:
    def __init__(self, nlat0: int, lmax: int, m_split: float, attention, *,
                 courant: float = 0.5, regrid_every: int = 4, attention_method: str = "auto",
                 max_cells: int = 200_000, limiter: str = "mc"):
        if nlat0 % 2 or nlat0 < 4:
            raise ValueError(f"nlat0 must be even and ≥ 4, got {nlat0}")
        if not 0 <= lmax <= 8:
            raise ValueError(f"lmax must be in [0, 8], got {lmax}")
        self.nlat0, self.nlon0, self.lmax = nlat0, 2 * nlat0, lmax
        self.S = 2 ** lmax
        self.NX, self.NY = self.nlon0 * self.S, self.nlat0 * self.S
        if self.NX * self.NY * 8 > 2e9:
            raise ValueError(f"raster {self.NX}×{self.NY} would need > 2 GB")
        self.m_split, self.att, self.courant = float(m_split), attention, float(courant)
        self.regrid_every, self.method, self.max_cells = regrid_every, attention_method, max_cells
        if limiter not in LIMITERS:
            raise ValueError(f"limiter must be one of {sorted(LIMITERS)}, got {limiter!r}")
        self.limiter = LIMITERS[limiter]
        self.dlon_f = 2 * np.pi / self.NX
        self.dlat_f = np.pi / self.NY
        self.lat_faces_f = -0.5 * np.pi + self.dlat_f * np.arange(self.NY + 1)
        # reduced base grid: merge factor per base row, the largest power of 2 ≤ 1/cos(φ_row)
        # (capped at nlon0/4), so polar cells are about as wide as they are tall
        latc = -0.5 * np.pi + (np.arange(nlat0) + 0.5) * np.pi / nlat0
        kmax = int(math.log2(self.nlon0 // 4))
        f = np.array([2 ** min(kmax, int(math.floor(math.log2(1.0 / math.cos(p)) + 1e-9)))
                      for p in latc])
        self.merge = f
        # leaves: raster rectangles x0, x1, y0, y1 (finest units) and level
        x0, x1, y0, y1 = [], [], [], []
        for j in range(nlat0):
            w = f[j] * self.S
            for i in range(self.nlon0 // f[j]):
                x0.append(i * w); x1.append((i + 1) * w)
                y0.append(j * self.S); y1.append((j + 1) * self.S)
        self.x0, self.x1 = np.array(x0), np.array(x1)
        self.y0, self.y1 = np.array(y0), np.array(y1)
        self.level = np.zeros(self.x0.size, int)
        self.steps = 0
        self._geometry()

    # ---------------------------------------------------------------- geometry
    @property
    def n(self) -> int:
        return self.x0.size

    def _geometry(self) -> None:
        lon0, lon1 = self.x0 * self.dlon_f, self.x1 * self.dlon_f
        lat0, lat1 = self.lat_faces_f[self.y0], self.lat_faces_f[self.y1]
        self.lon0, self.lon1, self.lat0, self.lat1 = lon0, lon1, lat0, lat1
        self.area = (lon1 - lon0) * (np.sin(lat1) - np.sin(lat0))
        self.lonc, self.latc = 0.5 * (lon0 + lon1), 0.5 * (lat0 + lat1)
        cl = np.cos(self.latc)
        self.xc = np.stack([cl * np.cos(self.lonc), cl * np.sin(self.lonc), np.sin(self.latc)], 1)
        # raster of leaf ids
        R = np.empty((self.NY, self.NX), np.int64)
        for lev in np.unique(self.level):
            sel = np.flatnonzero(self.level == lev)
            for k in sel if lev == 0 else ():
                R[self.y0[k]:self.y1[k], self.x0[k]:self.x1[k]] = k
            if lev > 0:
                s = self.S >> lev
                coarse = np.full((self.NY // s, self.NX // s), -1, np.int64)
                coarse[self.y0[sel] // s, self.x0[sel] // s] = sel
                big = np.repeat(np.repeat(coarse, s, 0), s, 1)
                R = np.where(big >= 0, big, R)
        self.raster = R
        n = self.n
        # east-west faces: a = west cell, b = east cell (periodic)
        Rb = np.roll(R, -1, axis=1)
        jj, ii = np.nonzero(R != Rb)
        a, b = R[jj, ii], Rb[jj, ii]
        key = a * n + b
        uk, inv = np.unique(key, return_inverse=True)
        ln = np.bincount(inv, minlength=uk.size) * self.dlat_f
        latm = np.bincount(inv, weights=(jj + 0.5) * self.dlat_f - 0.5 * np.pi, minlength=uk.size) \
            * self.dlat_f / ln
        lonf = ((ii + 1) % self.NX) * self.dlon_f
        lonm = np.bincount(inv, weights=lonf, minlength=uk.size) * self.dlat_f / ln
        ew = (uk // n, uk % n, ln, lonm, latm)
        # north-south faces: a = south cell, b = north cell
        A, Bn = R[:-1], R[1:]
        jj, ii = np.nonzero(A != Bn)
        a, b = A[jj, ii], Bn[jj, ii]
        key = a * n + b
        uk, inv = np.unique(key, return_inverse=True)
        latf = self.lat_faces_f[jj + 1]
        segl = np.cos(latf) * self.dlon_f
        ln = np.bincount(inv, weights=segl, minlength=uk.size)
        latm = np.bincount(inv, weights=latf * segl, minlength=uk.size) / ln
        # longitude midpoint: circular mean of the segment longitudes (faces span < π)
        lonseg = (ii + 0.5) * self.dlon_f
        cx = np.bincount(inv, weights=np.cos(lonseg) * segl, minlength=uk.size)
        cy = np.bincount(inv, weights=np.sin(lonseg) * segl, minlength=uk.size)
        lonm = np.mod(np.arctan2(cy, cx), 2 * np.pi)
        ns = (uk // n, uk % n, ln, lonm, latm)
        fa = np.concatenate([ew[0], ns[0]]); fb = np.concatenate([ew[1], ns[1]])
        self.fa, self.fb = fa, fb
        self.flen = np.concatenate([ew[2], ns[2]])
        self.flon = np.concatenate([ew[3], ns[3]])
        self.flat = np.concatenate([ew[4], ns[4]])
        self.fkind = np.concatenate([np.zeros(ew[0].size, int), np.ones(ns[0].size, int)])
        lon, lat = self.flon, self.flat
        e_lon = np.stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)], 1)
        e_lat = np.stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)], 1)
        self.fnormal = np.where(self.fkind[:, None] == 0, e_lon, e_lat)
        # offsets (face point − cell centre) in (λ, φ) for both sides; λ wrapped
        wrap = lambda d: np.mod(d + np.pi, 2 * np.pi) - np.pi  # noqa: E731
        self.off_a = np.stack([wrap(lon - self.lonc[fa]), lat - self.latc[fa]], 1)
        self.off_b = np.stack([wrap(lon - self.lonc[fb]), lat - self.latc[fb]], 1)
        # centre distance across the face along its normal coordinate (λ for E-W, φ for N-S)
        self.fdist = np.where(self.fkind == 0, wrap(self.lonc[fb] - self.lonc[fa]),
                              self.latc[fb] - self.latc[fa])

    # ---------------------------------------------------------------- reconstruction
    def slopes(self, rho: np.ndarray) -> np.ndarray:
        """Minmod slopes (n, 2) of ρ in (λ, φ) from the length-weighted neighbour means."""
        n = self.n
        out = np.zeros((n, 2))
        for kind in (0, 1):
            s = self.fkind == kind
            a, b, ln, d = self.fa[s], self.fb[s], self.flen[s], self.fdist[s]
            g = (rho[b] - rho[a]) / d  # difference quotient across each face
            lp = np.bincount(a, weights=ln, minlength=n)     # faces on the + side of a cell
            gp = np.bincount(a, weights=ln * g, minlength=n)
            lm = np.bincount(b, weights=ln, minlength=n)     # faces on the − side
            gm = np.bincount(b, weights=ln * g, minlength=n)
            has = (lp > 0) & (lm > 0)
            gp = np.where(lp > 0, gp / np.where(lp > 0, lp, 1), 0.0)
            gm = np.where(lm > 0, gm / np.where(lm > 0, lm, 1), 0.0)
            out[:, kind] = np.where(has, self.limiter(gp, gm), 0.0)
        return out

    # ---------------------------------------------------------------- dynamics
    def velocity(self, m: np.ndarray) -> np.ndarray:
        """X = P_x V m_β at the cell centres, from the cells as weighted points."""
        mean = self.att.mean(self.xc, self.xc, m, method=self.method)
        return project_tangent(self.xc, mean @ self.att.V.T)

    def rhs(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dm/dt, outflow per cell) for masses m."""
        rho = m / self.area
        X = self.velocity(m)
        un = 0.5 * np.sum((X[self.fa] + X[self.fb]) * self.fnormal, axis=1)
        sl = self.slopes(rho)
        ra = np.maximum(rho[self.fa] + np.sum(sl[self.fa] * self.off_a, 1), 0.0)
        rb = np.maximum(rho[self.fb] + np.sum(sl[self.fb] * self.off_b, 1), 0.0)
        F = self.flen * np.where(un > 0, un * ra, un * rb)  # flux a → b
        n = self.n
        dm = np.bincount(self.fb, weights=F, minlength=n) - np.bincount(self.fa, weights=F, minlength=n)
        out = np.bincount(self.fa, weights=np.maximum(F, 0), minlength=n) \
            + np.bincount(self.fb, weights=np.maximum(-F, 0), minlength=n)
        return dm, out

    @staticmethod
    def _dt_pos(m, out):
        pos = out > 0
        return float(np.min(m[pos] / out[pos])) if np.any(pos) else np.inf

    def step(self, m: np.ndarray, dt_max: float) -> tuple[np.ndarray, float]:
        """One SSP-RK2 step of at most dt_max; returns (new masses, dt)."""
        L0, o0 = self.rhs(m)
        dt = min(dt_max, self.courant * self._dt_pos(m, o0))
        while True:
            m1 = m + dt * L0
            L1, o1 = self.rhs(m1)
            if dt <= self.courant * self._dt_pos(m1, o1) * (1 + 1e-12) or dt < 1e-10:
                break
            dt *= 0.5
        m2 = 0.5 * m + 0.5 * (m1 + dt * L1)
        self.steps += 1
        return m2, dt

    # ---------------------------------------------------------------- regridding
    def init_mass(self, cell_mass) -> np.ndarray:
        """Exact cell masses of ρ_0 (cell_mass(lon0, lon1, lat0, lat1)), refined until stable."""
        m = cell_mass(self.lon0, self.lon1, self.lat0, self.lat1)
        for _ in range(self.lmax + 2):
            changed = self._adapt(m, exact=cell_mass)
            m = cell_mass(self.lon0, self.lon1, self.lat0, self.lat1)
            if not changed:
                break
        return m

    def _refinable(self) -> np.ndarray:
        width = self.x1 - self.x0
        return (self.level < self.lmax) & (width == (self.S >> self.level))

    def regrid(self, m: np.ndarray) -> np.ndarray:
        m_new = self._adapt(m, exact=None, return_mass=True)
        return m_new

    def _adapt(self, m, exact=None, return_mass=False):
        n = self.n
        rho = m / self.area
        # split criterion: own mass, or the mass at the densest neighbour's density
        nbr = np.zeros(n)
        np.maximum.at(nbr, self.fa, rho[self.fb])
        np.maximum.at(nbr, self.fb, rho[self.fa])
        flag = self._refinable() & (np.maximum(rho, nbr) * self.area > self.m_split)
        # 2:1 balance: a leaf next to one two levels finer (after splitting) splits too
        for _ in range(4):
            newlev = self.level + flag
            bad = np.zeros(n, bool)
            np.logical_or.at(bad, self.fa, newlev[self.fb] > newlev[self.fa] + 1)
            np.logical_or.at(bad, self.fb, newlev[self.fa] > newlev[self.fb] + 1)
            add = bad & self._refinable() & ~flag
            if not add.any():
                break
            flag |= add
        # merge criterion: four sibling leaves, none flagged, total below m_split/8, and the
        # parent would not be two levels coarser than a neighbour
        parent_key = None
        merge = np.zeros(n, bool)
        cand = (self.level > 0) & ~flag
        if cand.any():
            s2 = 2 * (self.S >> self.level)
            parent_key = (self.level * (self.NY + 1) + self.y0 // s2) * (self.NX + 1) + self.x0 // s2
            keys, inv, cnt = np.unique(np.where(cand, parent_key, -1), return_inverse=True,
                                       return_counts=True)
            tot = np.bincount(inv, weights=m, minlength=keys.size)
            nflag = np.bincount(inv, weights=flag, minlength=keys.size)
            # highest neighbour level of each group
            lev_nb = np.zeros(n, int)
            np.maximum.at(lev_nb, self.fa, self.level[self.fb] + flag[self.fb])
            np.maximum.at(lev_nb, self.fb, self.level[self.fa] + flag[self.fa])
            gmax = np.zeros(keys.size, int)
            np.maximum.at(gmax, inv, lev_nb)
            ok_g = (keys >= 0) & (cnt == 4) & (nflag == 0) & (tot < self.m_split / 8)
            # the parent is at level − 1: every neighbour must then be at most one level finer
            glev = np.zeros(keys.size, int)
            np.maximum.at(glev, inv, self.level)
            ok_g &= gmax <= glev
            merge = cand & ok_g[inv]
        if not flag.any() and not merge.any():
            return m if return_mass else False
        if self.n + 3 * int(flag.sum()) > self.max_cells:
            raise MemoryError(f"refinement would exceed max_cells = {self.max_cells}")
        sl = self.slopes(rho)
        keep = ~flag & ~merge
        # children of flagged cells
        fi = np.flatnonzero(flag)
        cx0, cx1, cy0, cy1, cl, cm = [], [], [], [], [], []
        for da in (0, 1):
            for db in (0, 1):
                hx = (self.x1[fi] - self.x0[fi]) // 2
                hy = (self.y1[fi] - self.y0[fi]) // 2
                x0 = self.x0[fi] + da * hx
                y0 = self.y0[fi] + db * hy
                cx0.append(x0); cx1.append(x0 + hx); cy0.append(y0); cy1.append(y0 + hy)
                cl.append(self.level[fi] + 1)
                lonc = (x0 + 0.5 * hx) * self.dlon_f
                latc = 0.5 * (self.lat_faces_f[y0] + self.lat_faces_f[y0 + hy])
                area = hx * self.dlon_f * (np.sin(self.lat_faces_f[y0 + hy]) - np.sin(self.lat_faces_f[y0]))
                r = rho[fi] + sl[fi, 0] * (lonc - self.lonc[fi]) + sl[fi, 1] * (latc - self.latc[fi])
                cm.append(area * np.maximum(r, 0.0))
        cm = np.array(cm)
        tot = cm.sum(0)
        cm = np.where(tot > 0, cm * (m[fi] / np.where(tot > 0, tot, 1)), m[fi] / 4)
        # parents of merged groups
        mi = np.flatnonzero(merge)
        if mi.size:
            pk, pinv = np.unique(parent_key[mi], return_inverse=True)
            pm = np.bincount(pinv, weights=m[mi])
            px0 = np.full(pk.size, np.iinfo(np.int64).max); np.minimum.at(px0, pinv, self.x0[mi])
            py0 = np.full(pk.size, np.iinfo(np.int64).max); np.minimum.at(py0, pinv, self.y0[mi])
            px1 = np.zeros(pk.size, np.int64); np.maximum.at(px1, pinv, self.x1[mi])
            py1 = np.zeros(pk.size, np.int64); np.maximum.at(py1, pinv, self.y1[mi])
            plev = np.zeros(pk.size, int); np.maximum.at(plev, pinv, self.level[mi] - 1)
        else:
            pm = px0 = py0 = px1 = py1 = plev = np.zeros(0, int)
        self.x0 = np.concatenate([self.x0[keep], *cx0, px0])
        self.x1 = np.concatenate([self.x1[keep], *cx1, px1])
        self.y0 = np.concatenate([self.y0[keep], *cy0, py0])
        self.y1 = np.concatenate([self.y1[keep], *cy1, py1])
        self.level = np.concatenate([self.level[keep], *cl, plev])
        m_new = np.concatenate([m[keep], cm.reshape(-1), pm])
        self._geometry()
        return m_new if return_mass else True

    # ---------------------------------------------------------------- run
    def run(self, m: np.ndarray, times, callback) -> np.ndarray:
        """Integrate to each output time; callback(t, self, m) at each."""
        t = 0.0
        callback(t, self, m)
        for t_out in times[1:]:
            while t < t_out - 1e-12:
                m, dt = self.step(m, t_out - t)
                t = t_out if t_out - t - dt < 1e-12 else t + dt
                if self.steps % self.regrid_every == 0:
                    m = self.regrid(m)
            callback(t, self, m)
        return m
