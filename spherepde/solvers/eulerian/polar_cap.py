"""Positive, mass-exact polar cap for the FFSL–PPM sphere transport (``FFSLSphere``'s default
``polar="auto"`` from nlat 8 on, or ``polar="cap"``).

The dimension-split step (Z M Z) piles mass up in the sliver cells next to the poles when the
flow crosses a pole (Williamson 1 at α = π/2: first-to-second order only, l2 0.063 / 0.020 at
nlat 64 / 128).  The cap treatment (issue 11; prototype and measurements in
``docs/prototypes/issue11/polar/cap/CAP.md``, variant ``overlap-scale`` with ``interp`` tracing)
keeps the split step on the whole sphere and then **overwrites the first K rings around each
pole** ("cap", ring index j = 0..K−1 counted from the pole) by an unsplit departure-cell remap:

1. Chart.  Lambert azimuthal equal-area coordinates about the pole (sign s = +1 north, −1 south)

       X = (x, y) · sqrt(2 / (1 + s z)),        r = |X| = sqrt(2 (1 − s z)),

   are area preserving, so cell masses are integrals of a density over chart polygons.  Ring
   face j (cosine of colatitude μ_j) has radius r_j = sqrt(2 (1 − s μ_j)); the vertices are
   V[j, i] = r_j (cos λ_i, sin λ_i), λ_i the cell faces in longitude, j = 0..J with J = K + B
   (B buffer rings outside the cap that departure cells may reach).  Cell (j, i) is the convex
   chord polygon V[j,i] → V[j+1,i] → V[j+1,i+1] → V[j,i+1] (a triangle at j = 0); these
   polygons tile the disc of radius r_J exactly.  Arrays are flat over cells c = j·nl + i.

2. Reconstruction.  q_c = m_c / a_c (a_c the true cell area w_j Δλ) and a linear profile
   q_c + g_c · (X − X̄_c) (X̄_c the polygon centroid), g_c by least squares over 8 neighbours,
   scaled by θ_c ∈ [0, 1] so the profile is ≥ 0 at every vertex of the cell (so on the cell).

3. Departure cells.  The cap vertices (rings 0..K) are traced back over Δt by the classical
   RK4 rule with every stage projected onto the sphere, k₁ = u(x), k₂ = ũ(N(x − Δt/2 k₁)),
   k₃ = ũ(N(x − Δt/2 k₂)), k₄ = ũ(N(x − Δt k₃)), x_d = N(x − Δt (k₁ + 2k₂ + 2k₃ + k₄)/6)
   (N: normalise to the sphere), with ũ the bilinear interpolant in (r, λ) of the velocity at
   the vertices of rings 0..J (one call of the velocity per step, at ``vertices_xyz``).  The
   midpoint rule of the prototype moved points circling the pole outwards by θ²/2 per step.

4. Remap.  New mass of cap cell c = ∫_{D_c} profile + q_c (a_c − |P_c|), D_c the departure
   polygon (straight chart edges between the traced vertices) and |P_c| the chord polygon's
   area.  The integral is exact (to round-off): it is the sum over the edges of D_c of the
   signed integrals over the triangles (pole, edge).  Each such triangle is cut by the face
   rays (one triangle with a vertex at the pole per longitude wedge) and by the chord lines
   (in wedge i the cells are the slabs chord_j ≤ X·bisector_i < chord_{j+1}), and the profile
   is integrated over each piece from its area and first moments in closed form.  Each
   departure edge is shared by two departure cells and integrated once.  The exact integral
   is ≥ 0 while D_c is not folded (checked); a computed sum in [−1e-12·Σ|terms|, 0) is the
   round-off of the signed sum and set to 0.  (Until 2026-12 D_c was clipped against every
   candidate cell, Sutherland–Hodgman: the same integral to round-off at about 4× the cost;
   next to the pole a departure cell overlaps up to ~nlon/4 sliver cells of ring 0.)

5. Coupling (in :class:`~spherepde.solvers.eulerian.transport.FFSLSphere`): the remapped
   masses are rescaled to the cap mass the split step produced (the split decides how much
   mass the cap holds — its boundary fluxes are fine — the remap where in the cap it sits).
   Values in [−1e-14·max, 0) are round-off (of the remap, or of the split's sweeps); they
   are set to exactly 0 before the rescale, which puts their mass back (:func:`fit_cap_mass`).
   So the cap is ≥ 0 and the global mass is conserved to round-off.

Kernels are numba-compiled (``cache=True``), sequential (the bits do not depend on the
thread count); numba is a package dependency.
"""
from __future__ import annotations

import numba as nb
import numpy as np

#: treatments of the polar rings in FFSLSphere: "auto" (the default: the cap where the grid has
#: room for it, see transport.resolve_polar), the split step everywhere, or the polar cap
POLAR = ("auto", "split", "cap")

#: a departure cell's signed-triangle sum in [−ROUND_BAND·Σ|terms|, 0) is round-off (set to 0)
ROUND_BAND = 1e-12
#: a departure cell whose chart area is below this fraction of its cell's is "folded"
FOLD_RATIO = 0.05
#: remapped cap masses in [−ZERO_CLIP·max, 0) are round-off and set to 0 (mass put back by the rescale)
ZERO_CLIP = 1e-14


class CapDepartureError(RuntimeError):
    """A cap departure point left the buffer rings or a departure cell folded: reduce Δt."""


# ---- kernels -------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _tri_moments(v1x, v1y, v2x, v2y):
    """(area, ∫x, ∫y) of the triangle (origin, v1, v2) (signed)."""
    cr = v1x * v2y - v1y * v2x
    return 0.5 * cr, cr * (v1x + v2x) / 6.0, cr * (v1y + v2y) / 6.0


@nb.njit(cache=True)
def _below(px, py, qx, qy, a, b, c):
    """(area, ∫x, ∫y) of the CCW triangle (origin, p, q) ∩ {s ≤ c}, s linear with s(origin) = 0,
    s(p) = a, s(q) = b, min(a, b) < c < max(a, b)."""
    t = (c - a) / (b - a)  # the point r of p → q with s = c
    rx = px + t * (qx - px); ry = py + t * (qy - py)
    if a < c:  # origin, p, r, q·c/b
        ux = qx * (c / b); uy = qy * (c / b)
        A1, X1, Y1 = _tri_moments(px, py, rx, ry)
        A2, X2, Y2 = _tri_moments(rx, ry, ux, uy)
    else:  # origin, p·c/a, r, q
        ux = px * (c / a); uy = py * (c / a)
        A1, X1, Y1 = _tri_moments(ux, uy, rx, ry)
        A2, X2, Y2 = _tri_moments(rx, ry, qx, qy)
    return A1 + A2, X1 + X2, Y1 + Y2


@nb.njit(cache=True)
def _fan(ax, ay, aang, bx, by, bang, lam0, dl, nl, J, ray, bis, chord, q, grad, cent, wmag):
    """(signed ∫ of the limited linear profile over the triangle (origin, a, b), + if it is
    counter-clockwise; a bound Σ wmag_c·|piece areas| on the magnitude of its terms).  Summed
    over the edges of a polygon the first is the ∫ over the polygon.

    The triangle is cut by the face rays into one triangle (origin, p, p') per longitude wedge
    it spans (p, p' on the segment a → b), and each of those by the chord lines
    X·bis_i = chord_j into the pieces in rings 0, 1, ...: piece j has the moments of
    {s ≤ chord_{j+1}} minus those of {s ≤ chord_j} (closed form: a triangle, a scaled
    triangle, or a quadrilateral).  Beyond chord_J (outside ring J−1) nothing is counted.
    aang, bang: the longitudes of a and b.
    """
    cr = ax * by - ay * bx
    if cr == 0.0:
        return 0.0, 0.0
    sig = 1.0
    if cr < 0.0:  # integrate (origin, b, a) and change the sign
        sig = -1.0
        ax, ay, aang, bx, by, bang = bx, by, bang, ax, ay, aang
    span = bang - aang
    if span < 0.0:
        span += 2.0 * np.pi
    if span > np.pi:
        span = np.pi
    klo = int(np.floor((aang - lam0) / dl))
    khi = int(np.floor((aang + span - lam0) / dl))
    px = ax; py = ay
    acc = 0.0; mag = 0.0
    c1 = chord[1]
    for k in range(klo, khi + 1):
        i = k % nl
        if k < khi:  # where a → b crosses the ray λ_{i+1}
            i1 = i + 1 if i + 1 < nl else 0
            ux = ray[i1, 0]; uy = ray[i1, 1]
            wa = ux * ay - uy * ax; wb = ux * by - uy * bx
            t = wa / (wa - wb) if wa != wb else 0.0
            t = min(1.0, max(0.0, t))
            qx = ax + t * (bx - ax); qy = ay + t * (by - ay)
        else:
            qx = bx; qy = by
        nx = bis[i, 0]; ny = bis[i, 1]
        sa = px * nx + py * ny; sb = qx * nx + qy * ny
        smin = min(sa, sb); smax = max(sa, sb)
        crw = px * qy - py * qx
        FA = 0.5 * crw; FX = crw * (px + qx) / 6.0; FY = crw * (py + qy) / 6.0
        kap = 0.0; gx = 0.0; gy = 0.0
        if smin >= c1:  # {s ≤ c} for c ≤ smin: the triangle scaled by c/s on each ray
            kap = crw / (6.0 * sa * sb); gx = px / sa + qx / sb; gy = py / sa + qy / sb
        pA = 0.0; pX = 0.0; pY = 0.0
        for j in range(J):
            c = chord[j + 1]
            last = c >= smax
            if last:
                A = FA; X = FX; Y = FY
            elif c <= smin:
                c2 = kap * c * c
                A = 3.0 * c2; X = c2 * c * gx; Y = c2 * c * gy
            else:
                A, X, Y = _below(px, py, qx, qy, sa, sb, c)
            cell = j * nl + i
            dA = A - pA
            acc += q[cell] * dA + grad[cell, 0] * ((X - pX) - dA * cent[cell, 0]) \
                + grad[cell, 1] * ((Y - pY) - dA * cent[cell, 1])
            mag += wmag[cell] * (abs(A) + abs(pA))
            if last:
                break
            pA = A; pX = X; pY = Y
        px = qx; py = qy
    return sig * acc, mag


@nb.njit(cache=True)
def departure_remap(Vd, K, J, lam0, dl, nl, q, grad, cent, ray, bis, chord):
    """New cap masses (K·nl,): ∫ of the profile over each departure cell.

    Vd (K+1, nl, 2): departure points of the cap vertices (chart); q (J·nl,) densities, grad
    (J·nl, 2) limited gradients, cent (J·nl, 2) centroids of the chord polygons; ray (nl, 2)
    the unit vectors of the face longitudes, bis (nl, 2) of the wedge bisectors, chord (J+1,)
    the chord distances r_j cos(Δλ/2) (the cells of wedge i are {chord_j ≤ X·bis_i < chord_j+1}).

    A polygon's integral is the sum over its edges of the signed integrals over the triangles
    (origin, edge) (:func:`_fan`).  Each departure edge is shared by two departure cells, so it
    is integrated once: with R[j, i] the edge Vd[j, i] → Vd[j+1, i] and Z[j, i] the edge
    Vd[j, i] → Vd[j, i+1] (Z[0] = 0: ring 0's inner vertices are the one traced pole),
    cell (j, i) = R[j, i] + Z[j+1, i] − R[j, i+1] − Z[j, i].
    """
    # |profile| ≤ wmag_c over the disc, so |∫ over a piece of cell c| ≤ wmag_c·|area|
    rJ = chord[J] / np.cos(0.5 * dl)
    wmag = np.empty(J * nl)
    for c in range(J * nl):
        wmag[c] = abs(q[c]) + abs(grad[c, 0]) * (rJ + abs(cent[c, 0])) + abs(grad[c, 1]) * (rJ + abs(cent[c, 1]))
    ang = np.empty((K + 1, nl))
    for j in range(K + 1):
        for i in range(nl):
            ang[j, i] = np.arctan2(Vd[j, i, 1], Vd[j, i, 0])
    R = np.empty((K, nl)); RM = np.empty((K, nl))
    Z = np.zeros((K + 1, nl)); ZM = np.zeros((K + 1, nl))
    for j in range(K + 1):
        for i in range(nl):
            if j < K:
                R[j, i], RM[j, i] = _fan(Vd[j, i, 0], Vd[j, i, 1], ang[j, i], Vd[j + 1, i, 0], Vd[j + 1, i, 1],
                               ang[j + 1, i], lam0, dl, nl, J, ray, bis, chord, q, grad, cent, wmag)
            if j > 0:
                i1 = i + 1 if i + 1 < nl else 0
                Z[j, i], ZM[j, i] = _fan(Vd[j, i, 0], Vd[j, i, 1], ang[j, i], Vd[j, i1, 0], Vd[j, i1, 1],
                               ang[j, i1], lam0, dl, nl, J, ray, bis, chord, q, grad, cent, wmag)
    newm = np.empty(K * nl)
    for j in range(K):
        for i in range(nl):
            i1 = i + 1 if i + 1 < nl else 0
            v = R[j, i] + Z[j + 1, i] - R[j, i1] - Z[j, i]
            if v < 0.0 and v >= -ROUND_BAND * (RM[j, i] + ZM[j + 1, i] + RM[j, i1] + ZM[j, i]):
                v = 0.0  # the exact value is ≥ 0: this is the round-off of the signed sum
            newm[j * nl + i] = v
    return newm


@nb.njit(cache=True)
def _interp(x, y, z, sign, r, lam0, dl, nl, J, Vv):
    """Velocity (3 floats) at the unit vector (x, y, z), bilinear in (r, λ) from Vv (J+1, nl, 3)."""
    s = np.sqrt(2.0 / (1.0 + sign * z))
    X = x * s; Y = y * s
    rr = np.sqrt(X * X + Y * Y)
    j = 0  # the ring: the largest j ≤ J − 1 with r[j] ≤ rr
    while j < J - 1 and r[j + 1] <= rr:
        j += 1
    a = (rr - r[j]) / (r[j + 1] - r[j])
    u = (np.arctan2(Y, X) - lam0) / dl
    i = int(np.floor(u))
    b = u - i
    i = i % nl
    i1 = (i + 1) % nl
    vx = (1 - a) * ((1 - b) * Vv[j, i, 0] + b * Vv[j, i1, 0]) + a * ((1 - b) * Vv[j + 1, i, 0] + b * Vv[j + 1, i1, 0])
    vy = (1 - a) * ((1 - b) * Vv[j, i, 1] + b * Vv[j, i1, 1]) + a * ((1 - b) * Vv[j + 1, i, 1] + b * Vv[j + 1, i1, 1])
    vz = (1 - a) * ((1 - b) * Vv[j, i, 2] + b * Vv[j, i1, 2]) + a * ((1 - b) * Vv[j + 1, i, 2] + b * Vv[j + 1, i1, 2])
    return vx, vy, vz


@nb.njit(cache=True)
def _stage(x, y, z, kx, ky, kz, h):
    """N(x − h k): a point h·k back along the velocity k, projected onto the sphere."""
    px, py, pz = x - h * kx, y - h * ky, z - h * kz
    n = np.sqrt(px * px + py * py + pz * pz)
    return px / n, py / n, pz / n


@nb.njit(cache=True)
def trace(Vxyz, Vv, dt, sign, r, lam0, dl, nl, J, nvert):
    """Departure points (chart, (nvert, 2)) of the first nvert vertices: the backward
    trajectory of the frozen, interpolated velocity by the classical RK4 rule with each stage
    projected onto the sphere.

    Vxyz ((J+1)·nl, 3) vertex positions, Vv (J+1, nl, 3) the velocity there.  The midpoint
    rule it replaces moves points on a circle about the pole outwards by a relative θ²/2 per
    step (θ the angle the flow turns them through in Δt: at Courant 2.5 near the pole, 24 % of
    a ring-0 cell's area); RK4's error there is O(θ⁶).
    """
    out = np.empty((nvert, 2))
    for p in range(nvert):
        x, y, z = Vxyz[p, 0], Vxyz[p, 1], Vxyz[p, 2]
        jv = p // nl; iv = p - jv * nl
        ax, ay, az = _stage(x, y, z, Vv[jv, iv, 0], Vv[jv, iv, 1], Vv[jv, iv, 2], 0.5 * dt)
        k2x, k2y, k2z = _interp(ax, ay, az, sign, r, lam0, dl, nl, J, Vv)
        ax, ay, az = _stage(x, y, z, k2x, k2y, k2z, 0.5 * dt)
        k3x, k3y, k3z = _interp(ax, ay, az, sign, r, lam0, dl, nl, J, Vv)
        ax, ay, az = _stage(x, y, z, k3x, k3y, k3z, dt)
        k4x, k4y, k4z = _interp(ax, ay, az, sign, r, lam0, dl, nl, J, Vv)
        dx, dy, dz = _stage(x, y, z,
                            (Vv[jv, iv, 0] + 2.0 * (k2x + k3x) + k4x) / 6.0,
                            (Vv[jv, iv, 1] + 2.0 * (k2y + k3y) + k4y) / 6.0,
                            (Vv[jv, iv, 2] + 2.0 * (k2z + k3z) + k4z) / 6.0, dt)
        s = np.sqrt(2.0 / (1.0 + sign * dz))
        out[p, 0] = dx * s; out[p, 1] = dy * s
    return out


@nb.njit(cache=True)
def reconstruct(q, pinv, stencil, cells, ncell, cent):
    """Least-squares gradients (n, 2), scaled so the profile is ≥ 0 at every cell vertex.

    pinv (n, 2, 8) pseudo-inverses of the centroid offsets to the stencil (n, 8) neighbours.
    """
    n = q.shape[0]
    grad = np.empty((n, 2))
    for c in range(n):
        gx = 0.0; gy = 0.0
        for m in range(stencil.shape[1]):
            dq = q[stencil[c, m]] - q[c]
            gx += pinv[c, 0, m] * dq; gy += pinv[c, 1, m] * dq
        dmin = 0.0
        for k in range(ncell[c]):
            dv = (cells[c, k, 0] - cent[c, 0]) * gx + (cells[c, k, 1] - cent[c, 1]) * gy
            if dv < dmin:
                dmin = dv
        th = 1.0
        if dmin < 0:
            th = min(1.0, max(0.0, q[c] / max(-dmin, 1e-300)))
        grad[c, 0] = gx * th; grad[c, 1] = gy * th
    return grad


@nb.njit(cache=True)
def fold_check(Vd, area, K, nl):
    """(max departure radius, min departure-cell area / chord-polygon area) over the cap;
    (nan, nan) if a departure point is not finite."""
    rmax = 0.0
    for j in range(K + 1):
        for i in range(nl):
            rv = np.hypot(Vd[j, i, 0], Vd[j, i, 1])
            if not np.isfinite(rv):  # (max() would drop a NaN)
                return np.nan, np.nan
            rmax = max(rmax, rv)
    amin = 1e300
    for j in range(K):
        for i in range(nl):
            i1 = (i + 1) % nl
            ax, ay = Vd[j, i, 0], Vd[j, i, 1]; bx, by = Vd[j, i1, 0], Vd[j, i1, 1]
            cx, cy = Vd[j + 1, i1, 0], Vd[j + 1, i1, 1]; dx, dy = Vd[j + 1, i, 0], Vd[j + 1, i, 1]
            s = 0.5 * ((ax * dy - ay * dx) + (dx * cy - dy * cx) + (cx * by - cy * bx) + (bx * ay - by * ax))
            amin = min(amin, s / area[j * nl + i])
    return rmax, amin


@nb.njit(cache=True)
def remap_kernel(mass, vel, dt, sign, K, J, nl, r, lam0, dl, true_area, area, pinv, stencil,
                 cells, ncell, cent, ray, bis, chord, Vxyz):
    """One cap's remap in one call: (new cap masses (K·nl,), max departure radius, min
    departure-area ratio).  mass (J·nl,) of rings 0..J−1, vel ((J+1)·nl, 3) at Vxyz.  If a
    departure point leaves the buffer or a departure cell folds (or NaN), the masses are not
    computed (zeros) and the caller raises from the two numbers."""
    q = mass / true_area
    grad = reconstruct(q, pinv, stencil, cells, ncell, cent)
    Vd = trace(Vxyz, vel.reshape(J + 1, nl, 3), dt, sign, r, lam0, dl, nl, J, (K + 1) * nl).reshape(K + 1, nl, 2)
    rmax, amin = fold_check(Vd, area, K, nl)
    if not (rmax <= r[J] and amin >= FOLD_RATIO):
        return np.zeros(K * nl), rmax, amin
    newm = departure_remap(Vd, K, J, lam0, dl, nl, q, grad, cent, ray, bis, chord)
    for c in range(K * nl):
        newm[c] += q[c] * (true_area[c] - area[c])
    return newm, rmax, amin


# ---- geometry and the remap of one cap -----------------------------------------------------------
class PolarCap:
    """Cap geometry of one pole (sign +1 north, −1 south): K cap rings, B buffer rings.

    ``rows`` (K+B,) are the grid rows of rings 0..K+B−1 (ring 0 at the pole);
    ``vertices_xyz`` ((K+B+1)·nl, 3) the points where :meth:`remap` needs the velocity.
    """

    def __init__(self, grid, K: int, B: int, sign: int):
        self.K, self.B, self.sign = K, B, float(sign)
        nl = grid.nlon
        J = K + B
        self.nl, self.J = nl, J
        mu_f = np.asarray(grid.mu_faces) if sign > 0 else -np.asarray(grid.mu_faces)[::-1]
        r = np.sqrt(np.clip(2.0 * (1.0 - mu_f[:J + 1]), 0.0, None))
        r[0] = 0.0
        self.r = np.ascontiguousarray(r)
        lamf = np.asarray(grid.lon_faces)
        self.lam0, self.dl = float(lamf[0]), float(lamf[1] - lamf[0])
        self.rows = np.arange(J) if sign > 0 else grid.nlat - 1 - np.arange(J)
        R, L = np.meshgrid(r, lamf[:nl], indexing="ij")
        V = np.stack([R * np.cos(L), R * np.sin(L)], -1)  # (J+1, nl, 2)
        cells = np.zeros((J, nl, 4, 2))
        ncell = np.full((J, nl), 4)
        ip = (np.arange(nl) + 1) % nl
        for j in range(J):
            a, b, c, d = V[j], V[j][ip], V[j + 1][ip], V[j + 1]
            if j == 0:
                cells[j] = np.stack([a, d, c, c], 1); ncell[j] = 3
            else:
                cells[j] = np.stack([a, d, c, b], 1)
        self.cells = np.ascontiguousarray(cells.reshape(-1, 4, 2))
        self.ncell = np.ascontiguousarray(ncell.reshape(-1))
        # chord-polygon areas and centroids (shoelace)
        P = self.cells
        Q = np.roll(P, -1, axis=1)
        Q[ncell.reshape(-1) == 3, 2] = P[ncell.reshape(-1) == 3, 0]  # triangles: close after vertex 2
        valid = (np.arange(4)[None, :] < self.ncell[:, None])
        cr = (P[..., 0] * Q[..., 1] - Q[..., 0] * P[..., 1]) * valid
        self.area = 0.5 * cr.sum(1)
        if not np.all(self.area > 0):
            raise RuntimeError("polar cap: degenerate cap cell (chord polygon area <= 0)")
        self.cent = np.ascontiguousarray(np.stack([((P[..., 0] + Q[..., 0]) * cr).sum(1),
                                                   ((P[..., 1] + Q[..., 1]) * cr).sum(1)], 1)
                                         / (6.0 * self.area[:, None]))
        # wedge geometry of departure_remap: face rays, wedge bisectors, chord distances (in wedge
        # i the chord polygons are the slabs chord_j ≤ X·bis_i < chord_{j+1})
        u = np.stack([np.cos(lamf[:nl]), np.sin(lamf[:nl])], -1)
        b = u + u[ip]
        self.ray = np.ascontiguousarray(u)
        self.bis = np.ascontiguousarray(b / np.linalg.norm(b, axis=1)[:, None])
        self.chord = np.ascontiguousarray(r * np.cos(0.5 * self.dl))
        # least-squares gradient stencil: 2 ring neighbours, 3 inside (across the pole in
        # ring 0), 3 outside (the inner three again in the last buffer ring)
        st = np.zeros((J, nl, 8), dtype=np.int64)
        i = np.arange(nl)
        for j in range(J):
            nb_ = [j * nl + (i - 1) % nl, j * nl + (i + 1) % nl]
            inner = [(j - 1) * nl + (i + d) % nl for d in (-1, 0, 1)] if j > 0 else \
                [(i + nl // 2 + d) % nl for d in (-1, 0, 1)]
            outer = [(j + 1) * nl + (i + d) % nl for d in (-1, 0, 1)] if j + 1 < J else \
                [(j - 1) * nl + (i + d) % nl for d in (-1, 0, 1)]
            st[j] = np.stack(nb_ + inner + outer, 1)
        self.stencil = np.ascontiguousarray(st.reshape(-1, 8))
        self.pinv = np.ascontiguousarray(np.linalg.pinv(self.cent[self.stencil] - self.cent[:, None, :]))
        rr = np.sqrt(np.sum(V.reshape(-1, 2) ** 2, -1))
        h = np.sqrt(np.clip(1.0 - rr ** 2 / 4.0, 0.0, None))
        X = V.reshape(-1, 2)
        self.vertices_xyz = np.ascontiguousarray(
            np.stack([X[:, 0] * h, X[:, 1] * h, self.sign * (1.0 - 0.5 * rr ** 2)], -1))
        true_area = (np.asarray(grid.weights) * grid.dlon)[self.rows]
        self.true_area = np.ascontiguousarray(np.repeat(true_area, nl))  # (J·nl,)

    def remap(self, mass: np.ndarray, vel: np.ndarray, dt: float) -> np.ndarray:
        """Cap masses (K, nl) after dt from the masses ``mass`` (K+B, nl) of rings 0..J−1 and
        the velocity ``vel`` ((K+B+1)·nl, 3) at :attr:`vertices_xyz` (frozen over dt).

        ≥ 0 up to round-off for mass ≥ 0; raises :class:`CapDepartureError` if a departure
        point leaves the buffer or a departure cell folds.
        """
        K, nl, J = self.K, self.nl, self.J
        newm, rmax, amin = remap_kernel(
            np.ascontiguousarray(mass, dtype=float).reshape(-1), np.ascontiguousarray(vel, dtype=float),
            float(dt), self.sign, K, J, nl, self.r, self.lam0, self.dl, self.true_area, self.area,
            self.pinv, self.stencil, self.cells, self.ncell, self.cent,
            self.ray, self.bis, self.chord, self.vertices_xyz)
        if not rmax <= self.r[J]:  # also catches NaN
            raise CapDepartureError(
                f"polar cap: a departure point left the {self.B} buffer rings (radius {rmax:.3g} > "
                f"{self.r[J]:.3g}); reduce the time step (courant)")
        if not amin >= FOLD_RATIO:
            raise CapDepartureError(
                f"polar cap: a departure cell folded (area ratio {amin:.3g} < {FOLD_RATIO}); "
                "reduce the time step (courant)")
        return newm.reshape(K, nl)


def _clip_roundoff(m: np.ndarray, scale: float) -> np.ndarray:
    """m with the values in [−ZERO_CLIP·scale, 0) set to exactly 0 (a copy)."""
    m = np.array(m, dtype=float)
    m[(m < 0.0) & (m >= -ZERO_CLIP * scale)] = 0.0
    return m


def fit_cap_mass(remapped: np.ndarray, split: np.ndarray, scale: float) -> np.ndarray:
    """Cap masses (K, nl) with the remap's shape and the split step's total Σ split.

    ``scale``: the largest |cell mass| of the start state.  Values in [−ZERO_CLIP·scale, 0)
    (round-off of the clipped integrals, or of the split's sweeps) are set to exactly 0, and
    the rescale to Σ split puts their mass back:

        m = clip(remapped),   result = m · Σ split / Σ m.

    If the remap is empty (Σ m ≤ 0) the split's own cap values are used in its place (clipped
    and rescaled the same way).  If Σ split ≤ 0 the cap is empty to round-off: it is set to 0,
    which changes the mass by |Σ split| (the split's round-off, ≤ ZERO_CLIP·scale per cell).
    """
    target = float(split.sum())
    if not target > 0.0:
        return np.zeros_like(split)
    m = _clip_roundoff(remapped, scale)
    tot = float(m.sum())
    if not tot > 0.0:
        m = _clip_roundoff(split, scale)
        tot = float(m.sum())
    return m * (target / tot)
