"""Issue-20 prototype: characteristics carrying weights ("Lagrangian quadrature", LQ).

State: the exact Gauss quadrature of ρ_0 on GaussGrid(nlat) — the Gauss nodes y_j (cell centres)
with weights w_j = ρ_0(y_j)|cell_j| (Gauss–Legendre × trapezoid: spectral for smooth integrands),
moved by the package's particle path (ParticleODE: RK4 with retraction, the weighted attention
velocity X_β[Σ w δ_x](x_i) of spherepde.dynamics.attention).  The weights never change, so mass is
Σ w_j exactly (to round-off) and positive; the diagnostics integrate the measure exactly.

The points keep the logical (ring, sector) lattice of the grid they started on, so each point
owns a Lagrangian cell whose moved corners are estimated from the neighbours (normalised mean of
the 4 points around a corner; the poles: the mean of the polar ring).  The density field on any
output GaussGrid is the conservative pushforward of ρ_0 under the cell-wise bilinear map
(corners + a bubble through the moved node): each Lagrangian cell is cut into s×s sub-cells in
its initial (μ, λ) coordinates, sub-masses ∫ρ_0 by the midpoint rule renormalised to w_j
(conservative to round-off), placed at the mapped sub-centres and binned.  s follows the moved
cell's size (kfac sub-points per output cell), so compressed cells cost one sub-point.
"""
from __future__ import annotations

import math

import numpy as np

from common import attention, rho0
from spherepde.grids.gauss import GaussGrid
from spherepde.solvers.lagrangian.particles import ParticleODE, retract


def initial_points(nlat: int, rotation: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, GaussGrid]:
    """Gauss nodes of GaussGrid(nlat) (rotated by ``rotation`` (3, 3) if given: a test of how
    much the lattice's orientation seeds the dynamics) with weights ρ_0(node)|cell|, Σ w = 1."""
    g = GaussGrid(nlat)
    x = g.xyz.reshape(-1, 3).copy()
    if rotation is not None:
        x = x @ np.asarray(rotation, float).T
    w = rho0(x) * np.broadcast_to(g.cell_area, g.shape).reshape(-1)
    return x, w / w.sum(), g


def _extended(x: np.ndarray, g: GaussGrid) -> tuple[np.ndarray, np.ndarray]:
    """The moved node lattice with the poles added: colatitudes (nlat+2,) and rows
    (nlat+2, nlon, 3); a moved pole is the retracted mean of its moved polar ring."""
    X = x.reshape(g.nlat, g.nlon, 3)
    th = np.r_[0.0, np.arccos(np.clip(g.mu, -1, 1)), math.pi]
    PN = retract(X[0].sum(axis=0)[None])[0]
    PS = retract(X[-1].sum(axis=0)[None])[0]
    E = np.concatenate([np.broadcast_to(PN, (1, g.nlon, 3)), X,
                        np.broadcast_to(PS, (1, g.nlon, 3))])
    return th, E


def flow_map(x: np.ndarray, g: GaussGrid, th: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Φ_t at initial points (colatitude th, longitude lam) (any equal shapes): bilinear in
    (θ, λ) between the four surrounding moved nodes (poles added), retracted; shape (..., 3)."""
    thn, E = _extended(x, g)
    j = np.clip(np.searchsorted(thn, th, side="right") - 1, 0, len(thn) - 2)
    a = ((th - thn[j]) / (thn[j + 1] - thn[j]))[..., None]
    s = np.mod(lam, 2 * math.pi) / g.dlon
    i = np.minimum(np.floor(s).astype(np.int64), g.nlon - 1)
    b = (s - i)[..., None]
    i1 = (i + 1) % g.nlon
    p = ((1 - a) * ((1 - b) * E[j, i] + b * E[j, i1]) + a * ((1 - b) * E[j + 1, i] + b * E[j + 1, i1]))
    return retract(p.reshape(-1, 3)).reshape(p.shape)


def _bin(out: GaussGrid, p: np.ndarray, m: np.ndarray) -> np.ndarray:
    mu = np.clip(p[:, 2], -1.0, 1.0)
    j = np.clip(np.searchsorted(-out.mu_faces, -mu, side="right") - 1, 0, out.nlat - 1)
    lon = np.mod(np.arctan2(p[:, 1], p[:, 0]) + 0.5 * out.dlon, 2.0 * math.pi)
    i = np.minimum((lon / out.dlon).astype(np.int64), out.nlon - 1)
    return np.bincount(j * out.nlon + i, weights=m, minlength=out.nlat * out.nlon)


def cell_size(x: np.ndarray, g: GaussGrid) -> np.ndarray:
    """Size of each moved Lagrangian cell (nlat, nlon): the largest distance to a ring or sector
    neighbour."""
    X = x.reshape(g.nlat, g.nlon, 3)
    d = np.maximum(np.linalg.norm(X - np.roll(X, -1, axis=1), axis=-1),
                   np.linalg.norm(X - np.roll(X, 1, axis=1), axis=-1))
    dr = np.linalg.norm(X[1:] - X[:-1], axis=-1)
    d[:-1] = np.maximum(d[:-1], dr)
    d[1:] = np.maximum(d[1:], dr)
    return d


def field(x: np.ndarray, w: np.ndarray, g: GaussGrid, out: GaussGrid, *, kfac: float = 8.0,
          smax: int = 64) -> tuple[np.ndarray, dict]:
    """Cell averages of the LQ density on ``out`` (out.shape) and stats (sub-points used): each
    Lagrangian cell cut into s×s sub-cells in its initial (μ, λ) coordinates, midpoint masses of
    ρ_0 renormalised to the cell's weight w_j (conservative), moved by :func:`flow_map`, binned."""
    h_out = math.pi / out.nlat
    s = np.clip(np.ceil(kfac * cell_size(x, g) / h_out), 1, smax).astype(int)
    mass = np.zeros(out.nlat * out.nlon)
    W = w.reshape(g.nlat, g.nlon)
    mu_f, lonf = g.mu_faces, np.asarray(g.lon_faces)[:g.nlon]
    nsub = 0
    for sv in np.unique(s):
        jj, ii = np.nonzero(s == sv)
        u = (np.arange(sv) + 0.5) / sv
        U, Vv = (a.reshape(-1) for a in np.meshgrid(u, u, indexing="ij"))
        mu = mu_f[jj, None] + (mu_f[jj + 1, None] - mu_f[jj, None]) * U[None]
        lam = lonf[ii, None] + g.dlon * Vv[None]
        r = np.sqrt(np.clip(1 - mu ** 2, 0, None))
        y = np.stack([r * np.cos(lam), r * np.sin(lam), mu], axis=-1)
        m = rho0(y)
        m *= (W[jj, ii] / m.sum(axis=1))[:, None]
        p = flow_map(x, g, np.arccos(np.clip(mu, -1, 1)), lam)
        mass += _bin(out, p.reshape(-1, 3), m.reshape(-1))
        nsub += m.size
    rho = mass.reshape(out.shape) / out.cell_area
    return rho, {"subpoints": int(nsub), "max_s": int(s.max())}


def lattice_stretch(x: np.ndarray, w: np.ndarray, g: GaussGrid, beta: float) -> float:
    """Largest neighbour distance (ring and sector neighbours) over the kernel width β^{-1/2},
    among cells carrying ≥ 1e-8 of the mass: > 1 means the lattice no longer resolves the kernel
    where the mass is (the remeshing trigger this prototype reports but does not act on)."""
    X = x.reshape(g.nlat, g.nlon, 3)
    live = (w.reshape(g.nlat, g.nlon) > 1e-8 * w.max())
    d1 = np.linalg.norm(X - np.roll(X, -1, axis=1), axis=-1)
    d2 = np.zeros_like(d1)
    d2[:-1] = np.linalg.norm(X[1:] - X[:-1], axis=-1)
    return float(np.max(np.maximum(d1, d2)[live]) * math.sqrt(beta))


def stepper(beta: float, w: np.ndarray, **kw) -> ParticleODE:
    return ParticleODE(attention(beta), method="rk4", weights=w, **kw)


def _tophat_1d(c, h, faces, periodic):
    """Overlap fractions of [c − h, c + h] with the two cells around it: (cell index a, fraction
    in a, cell a+1); ``faces`` ascending cell faces (n+1,).  Footprints wider than a cell are
    clipped to the two cells around the centre (their mass fractions still sum to 1)."""
    n = len(faces) - 1
    lo = c - h
    a = np.searchsorted(faces, lo, side="right") - 1
    if periodic:
        a = np.mod(a, n)
        right = faces[a + 1] + np.where(lo < faces[0], -(faces[-1] - faces[0]), 0.0)
    else:
        a = np.clip(a, 0, n - 1)
        right = faces[a + 1]
    f = np.clip((right - lo) / (2 * h), 0.0, 1.0)
    if not periodic:
        last = a == n - 1
        f = np.where(last, 1.0, f)
    return a, f, (a + 1) % n if periodic else np.minimum(a + 1, n - 1)


def field_tophat(x, w, g, out, *, kfac=4.0, smax=64):
    """As :func:`field`, but each sub-point deposits its mass with a top-hat footprint of its own
    size (the moved cell size / s) split over the 2×2 output cells it overlaps, in the output
    grid's (μ, λ) coordinates: conservative, positive, and free of the aliasing of nearest-cell
    binning."""
    h_out = math.pi / out.nlat
    size = cell_size(x, g)
    s = np.clip(np.ceil(kfac * size / h_out), 1, smax).astype(int)
    mass = np.zeros(out.nlat * out.nlon)
    W = w.reshape(g.nlat, g.nlon)
    mu_f, lonf = g.mu_faces, np.asarray(g.lon_faces)[:g.nlon]
    muf_out = out.mu_faces[::-1]                       # ascending
    lonf_out = np.asarray(out.lon_faces)               # ascending, nlon+1, starts at −dlon/2
    nsub = 0
    for sv in np.unique(s):
        jj, ii = np.nonzero(s == sv)
        u = (np.arange(sv) + 0.5) / sv
        U, Vv = (a.reshape(-1) for a in np.meshgrid(u, u, indexing="ij"))
        mu = mu_f[jj, None] + (mu_f[jj + 1, None] - mu_f[jj, None]) * U[None]
        lam = lonf[ii, None] + g.dlon * Vv[None]
        r = np.sqrt(np.clip(1 - mu ** 2, 0, None))
        y = np.stack([r * np.cos(lam), r * np.sin(lam), mu], axis=-1)
        m = rho0(y)
        m *= (W[jj, ii] / m.sum(axis=1))[:, None]
        p = flow_map(x, g, np.arccos(np.clip(mu, -1, 1)), lam).reshape(-1, 3)
        h = np.repeat(0.5 * size[jj, ii] / sv, sv * sv)          # angular half-size
        pm = np.clip(p[:, 2], -1.0, 1.0)
        rp = np.sqrt(np.clip(1 - pm ** 2, 1e-30, None))
        hm = np.maximum(h * rp, 1e-15)
        hl = np.minimum(np.maximum(h / rp, 1e-15), math.pi)
        pl = np.mod(np.arctan2(p[:, 1], p[:, 0]) - lonf_out[0], 2 * math.pi) + lonf_out[0]
        a, fa, b = _tophat_1d(pm, hm, muf_out, False)
        c, fc, d = _tophat_1d(pl, hl, lonf_out, True)
        ja, jb = out.nlat - 1 - a, out.nlat - 1 - b     # back to north-to-south ring index
        mm = m.reshape(-1)
        for jr, fj in ((ja, fa), (jb, 1 - fa)):
            for ic, fi in ((c, fc), (d, 1 - fc)):
                mass += np.bincount(jr * out.nlon + ic, weights=mm * fj * fi, minlength=mass.size)
        nsub += mm.size
    rho = mass.reshape(out.shape) / out.cell_area
    return rho, {"subpoints": int(nsub), "max_s": int(s.max())}
