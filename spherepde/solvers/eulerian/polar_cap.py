"""Positive, mass-exact polar cap for the FFSL–PPM sphere transport (``FFSLSphere(polar="cap")``).

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

3. Departure cells.  The cap vertices (rings 0..K) are traced back over Δt by the midpoint
   rule x_m = N(x − Δt/2 u(x)), x_d = N(x − Δt ũ(x_m)) (N: normalise to the sphere), with ũ
   the bilinear interpolant in (r, λ) of the velocity at the vertices of rings 0..J (one call
   of the velocity per step, at ``vertices_xyz``).

4. Remap.  New mass of cap cell c = ∫_{D_c} profile + q_c (a_c − |P_c|), D_c the departure
   polygon (straight chart edges between the traced vertices) and |P_c| the chord polygon's
   area.  The integral is exact: D_c is clipped against every candidate grid cell
   (Sutherland–Hodgman) and the linear profile integrated over each piece from its area and
   first moments.  It is ≥ 0 by construction while D_c is not folded (checked).

5. Coupling (in :class:`~spherepde.solvers.eulerian.transport.FFSLSphere`): the remapped
   masses are rescaled to the cap mass the split step produced (the split decides how much
   mass the cap holds — its boundary fluxes are fine — the remap where in the cap it sits).
   Values in [−1e-14·max, 0) are round-off of the clipped integrals over empty regions; they
   are set to exactly 0 before the rescale, which puts their mass back (:func:`fit_cap_mass`).
   So the cap is ≥ 0 and the global mass is conserved to round-off.

Kernels are numba-compiled (``cache=True``); numba is a package dependency.
"""
from __future__ import annotations

import numba as nb
import numpy as np

#: treatments of the polar rings in FFSLSphere: the split step everywhere, or the polar cap
POLAR = ("split", "cap")

#: most vertices a clipped polygon can have (4-gon clipped by ≤ 4 half-planes)
MAXP = 12
#: a departure cell whose chart area is below this fraction of its cell's is "folded"
FOLD_RATIO = 0.05
#: remapped cap masses in [−ZERO_CLIP·max, 0) are round-off and set to 0 (mass put back by the rescale)
ZERO_CLIP = 1e-14


class CapDepartureError(RuntimeError):
    """A cap departure point left the buffer rings or a departure cell folded: reduce Δt."""


# ---- kernels -------------------------------------------------------------------------------------
@nb.njit(cache=True)
def _clip_edge(px, py, n, e0x, e0y, e1x, e1y, ox, oy):
    """Clip polygon (px, py)[:n] by the half-plane left of e0 → e1 into (ox, oy); returns its size."""
    dx, dy = e1x - e0x, e1y - e0y
    m = 0
    for k in range(n):
        k1 = k + 1 if k + 1 < n else 0
        s0 = dx * (py[k] - e0y) - dy * (px[k] - e0x)
        s1 = dx * (py[k1] - e0y) - dy * (px[k1] - e0x)
        if s0 >= 0:
            ox[m] = px[k]; oy[m] = py[k]; m += 1
        if (s0 >= 0) != (s1 >= 0):
            t = s0 / (s0 - s1)
            ox[m] = px[k] + t * (px[k1] - px[k]); oy[m] = py[k] + t * (py[k1] - py[k]); m += 1
    return m


@nb.njit(cache=True)
def _poly_range(sx, sy, n, r, lam0, dl, nl, J):
    """Candidate rings j0..j1 and longitude indices i0 .. i0+ni−1 (mod nl) of polygon (sx, sy)[:n]."""
    rmx = 0.0; kmax = 0
    for k in range(n):
        rk = np.hypot(sx[k], sy[k])
        if rk > rmx:
            rmx = rk; kmax = k
    inside = False  # origin inside (crossing number)
    rmn = 1e300  # distance from the origin to the boundary
    for k in range(n):
        k1 = k + 1 if k + 1 < n else 0
        x0, y0, x1, y1 = sx[k], sy[k], sx[k1], sy[k1]
        if (y0 > 0) != (y1 > 0):
            xc = x0 + (0.0 - y0) * (x1 - x0) / (y1 - y0)
            if xc > 0:
                inside = not inside
        dx, dy = x1 - x0, y1 - y0
        L2 = dx * dx + dy * dy
        tt = 0.0
        if L2 > 0:
            tt = min(1.0, max(0.0, -(x0 * dx + y0 * dy) / L2))
        d = np.hypot(x0 + tt * dx, y0 + tt * dy)
        if d < rmn:
            rmn = d
    if inside:
        rmn = 0.0
    j0 = np.searchsorted(r, rmn, side="right") - 1
    j1 = np.searchsorted(r, rmx / np.cos(0.5 * dl), side="right") - 1
    if j0 < 0:
        j0 = 0
    if j1 > J - 1:
        j1 = J - 1
    full = inside
    i0 = 0; ni = nl
    if not full:
        tiny = 1e-13 * rmx
        a0 = np.arctan2(sy[kmax], sx[kmax])
        lo = 0.0; hi = 0.0
        for k in range(n):
            if np.hypot(sx[k], sy[k]) > tiny:
                rel = np.arctan2(sy[k], sx[k]) - a0
                rel = (rel + np.pi) % (2 * np.pi) - np.pi
                lo = min(lo, rel); hi = max(hi, rel)
        if hi - lo > np.pi - 1e-9:
            full = True
        else:
            i0 = int(np.floor((a0 + lo - lam0) / dl)) - 1
            i1 = int(np.floor((a0 + hi - lam0) / dl)) + 1
            ni = min(i1 - i0 + 1, nl)
    return j0, j1, i0, ni


@nb.njit(cache=True)
def _edge_separates(ax, ay, na, bx, by, nb_):
    """Whether some edge of the CCW polygon (ax, ay)[:na] has every vertex of (bx, by)[:nb_]
    strictly on its outer side (then the two do not overlap)."""
    for k in range(na):
        k1 = k + 1 if k + 1 < na else 0
        ex = ax[k1] - ax[k]; ey = ay[k1] - ay[k]
        allout = True
        for m in range(nb_):
            if ex * (by[m] - ay[k]) - ey * (bx[m] - ax[k]) > 0:
                allout = False
                break
        if allout:
            return True
    return False


@nb.njit(cache=True)
def _integrate(sx, sy, n0, j0, j1, i0, ni, nl, cells, ncell, blo, bhi, q, grad, cent, px, py, ox, oy):
    """∫ of the limited linear profile over the CCW polygon (sx, sy)[:n0] (exact clipping)."""
    tlox = sx[0]; thix = sx[0]; tloy = sy[0]; thiy = sy[0]
    for k in range(1, n0):
        tlox = min(tlox, sx[k]); thix = max(thix, sx[k]); tloy = min(tloy, sy[k]); thiy = max(thiy, sy[k])
    convex = True
    for k in range(n0):
        k1 = k + 1 if k + 1 < n0 else 0
        k2 = k1 + 1 if k1 + 1 < n0 else 0
        if (sx[k1] - sx[k]) * (sy[k2] - sy[k1]) - (sy[k1] - sy[k]) * (sx[k2] - sx[k1]) < 0:
            convex = False
    acc = 0.0
    for j in range(j0, j1 + 1):
        for ii in range(ni):
            i = (i0 + ii) % nl
            c = j * nl + i
            if tlox > bhi[c, 0] or thix < blo[c, 0] or tloy > bhi[c, 1] or thiy < blo[c, 1]:
                continue
            # separating axes: a cell edge with every polygon vertex outside, or (convex
            # polygon) a polygon edge with every cell vertex outside
            nc = ncell[c]
            if _edge_separates(cells[c, :, 0], cells[c, :, 1], nc, sx, sy, n0):
                continue
            if convex and _edge_separates(sx, sy, n0, cells[c, :, 0], cells[c, :, 1], nc):
                continue
            for m in range(n0):
                px[m] = sx[m]; py[m] = sy[m]
            n = n0
            for k in range(nc):
                k1 = k + 1 if k + 1 < nc else 0
                n = _clip_edge(px, py, n, cells[c, k, 0], cells[c, k, 1], cells[c, k1, 0], cells[c, k1, 1], ox, oy)
                for m in range(n):
                    px[m] = ox[m]; py[m] = oy[m]
                if n < 3:
                    break
            if n < 3:
                continue
            A = 0.0; Mx = 0.0; My = 0.0
            for m in range(n):
                m1 = m + 1 if m + 1 < n else 0
                cr = px[m] * py[m1] - px[m1] * py[m]
                A += cr; Mx += (px[m] + px[m1]) * cr; My += (py[m] + py[m1]) * cr
            A *= 0.5; Mx /= 6.0; My /= 6.0
            acc += A * q[c] + grad[c, 0] * (Mx - A * cent[c, 0]) + grad[c, 1] * (My - A * cent[c, 1])
    return acc


#: scratch size of the sliced polygons (a departure quad cut by ≤ 2 lines per piece stays far below)
NSCR = 32


@nb.njit(cache=True)
def _cut(px, py, f, n, lx, ly, ux, uy):
    """Split polygon (px, py)[:n] by the sign of the linear function with vertex values f[:n]:
    the part f ≤ 0 into (lx, ly), the part f ≥ 0 into (ux, uy); returns their sizes."""
    nlo = 0; nup = 0
    for k in range(n):
        k1 = k + 1 if k + 1 < n else 0
        f0 = f[k]; f1 = f[k1]
        if f0 <= 0:
            lx[nlo] = px[k]; ly[nlo] = py[k]; nlo += 1
        if f0 >= 0:
            ux[nup] = px[k]; uy[nup] = py[k]; nup += 1
        if (f0 < 0 and f1 > 0) or (f0 > 0 and f1 < 0):
            t = f0 / (f0 - f1)
            x = px[k] + t * (px[k1] - px[k]); y = py[k] + t * (py[k1] - py[k])
            lx[nlo] = x; ly[nlo] = y; nlo += 1
            ux[nup] = x; uy[nup] = y; nup += 1
    return nlo, nup


@nb.njit(cache=True)
def _profile_integral(px, py, n, c, q, grad, cent):
    """∫ of cell c's linear profile over the polygon (px, py)[:n] (area and first moments)."""
    A = 0.0; Mx = 0.0; My = 0.0
    for m in range(n):
        m1 = m + 1 if m + 1 < n else 0
        cr = px[m] * py[m1] - px[m1] * py[m]
        A += cr; Mx += (px[m] + px[m1]) * cr; My += (py[m] + py[m1]) * cr
    A *= 0.5; Mx /= 6.0; My /= 6.0
    return A * q[c] + grad[c, 0] * (Mx - A * cent[c, 0]) + grad[c, 1] * (My - A * cent[c, 1])


@nb.njit(cache=True)
def _integrate_sliced(sx, sy, n0, ilo, ihi, nl, J, ray, bis, chord, q, grad, cent, w):
    """∫ of the limited linear profile over the polygon (sx, sy)[:n0], which lies in the
    longitude wedges ilo..ihi (unwrapped indices, ihi − ilo < nl/2) and not around the pole.

    The cells of wedge i are the wedge ∩ {chord_j ≤ X·bis_i < chord_{j+1}} (the chord
    polygons), so the polygon is cut into exact pieces by lines, never clipped cell by cell:
    one cut by the ray λ_{i+1} per wedge, then one cut by a chord line per ring boundary the
    piece crosses.  ray (nl, 2) unit vectors of the faces λ_i, bis (nl, 2) of the wedge
    bisectors, chord (J+1,) the chord distances r_j cos(Δλ/2); w (9, NSCR) scratch.
    """
    rx = w[0]; ry = w[1]; px = w[2]; py = w[3]; ux = w[4]; uy = w[5]; f = w[6]; cx = w[7]; cy = w[8]
    nr = n0
    for k in range(n0):
        rx[k] = sx[k]; ry[k] = sy[k]
    acc = 0.0
    for iu in range(ilo, ihi + 1):
        i = iu % nl
        if iu < ihi:  # cut off the part right of the ray λ_{i+1}: the piece in wedge i
            i1 = i + 1 if i + 1 < nl else 0
            ca = ray[i1, 0]; sa = ray[i1, 1]
            for k in range(nr):
                f[k] = ca * ry[k] - sa * rx[k]
            npc, nup = _cut(rx, ry, f, nr, px, py, ux, uy)
            for k in range(nup):
                rx[k] = ux[k]; ry[k] = uy[k]
            nr = nup
        else:
            npc = nr
            for k in range(nr):
                px[k] = rx[k]; py[k] = ry[k]
        if npc < 3:
            if nr < 3:
                break
            continue
        bx = bis[i, 0]; by = bis[i, 1]
        smin = 1e300; smax = -1e300
        for k in range(npc):
            s = px[k] * bx + py[k] * by
            f[k] = s
            smin = min(smin, s); smax = max(smax, s)
        j = 0
        while j < J - 1 and chord[j + 1] <= smin:
            j += 1
        while j < J and npc >= 3:
            c = j * nl + i
            if smax > chord[j + 1]:  # the piece crosses chord j+1: cut off the part inside
                cj = chord[j + 1]
                for k in range(npc):
                    f[k] -= cj
                nlo, nup = _cut(px, py, f, npc, cx, cy, ux, uy)
                if nlo >= 3:
                    acc += _profile_integral(cx, cy, nlo, c, q, grad, cent)
                # the outer part goes on; s − chord_{j+1} ≥ 0 there (recomputed from the cut)
                for k in range(nup):
                    px[k] = ux[k]; py[k] = uy[k]
                    f[k] = px[k] * bx + py[k] * by
                npc = nup
            else:
                acc += _profile_integral(px, py, npc, c, q, grad, cent)
                break
            j += 1
        if nr < 3 and iu < ihi:
            break
    return acc


@nb.njit(cache=True)
def _wedge_range(sx, sy, sa, sr, n, lam0, dl):
    """(around, ilo, ihi): whether the polygon (sx, sy)[:n] (vertex longitudes sa, radii sr)
    contains the pole or spans ≥ π in longitude; else its wedges ilo..ihi (unwrapped face
    indices, floor((λ − λ0)/Δλ))."""
    rmx = 0.0; kmax = 0
    inside = False  # origin inside (crossing number)
    for k in range(n):
        if sr[k] > rmx:
            rmx = sr[k]; kmax = k
        k1 = k + 1 if k + 1 < n else 0
        x0, y0, x1, y1 = sx[k], sy[k], sx[k1], sy[k1]
        if (y0 > 0) != (y1 > 0):
            if x0 + (0.0 - y0) * (x1 - x0) / (y1 - y0) > 0:
                inside = not inside
    if inside:
        return True, 0, 0
    tiny = 1e-13 * rmx
    a0 = sa[kmax]
    lo = 0.0; hi = 0.0
    for k in range(n):
        if sr[k] > tiny:
            rel = sa[k] - a0
            if rel > np.pi:
                rel -= 2 * np.pi
            elif rel < -np.pi:
                rel += 2 * np.pi
            lo = min(lo, rel); hi = max(hi, rel)
    if hi - lo > np.pi - 1e-9:
        return True, 0, 0
    return False, int(np.floor((a0 + lo - lam0) / dl)), int(np.floor((a0 + hi - lam0) / dl))


@nb.njit(cache=True)
def departure_remap(Vd, K, J, r, lam0, dl, nl, cells, ncell, blo, bhi, q, grad, cent, ray, bis, chord):
    """New cap masses (K·nl,): ∫ of the profile over each departure cell.

    Vd (K+1, nl, 2): departure points of the cap vertices (chart); cells (J·nl, 4, 2) with
    ncell (J·nl,) vertices (3 in ring 0), blo/bhi (J·nl, 2) bounding boxes, q (J·nl,)
    densities, grad (J·nl, 2) limited gradients, cent (J·nl, 2) centroids; ray, bis, chord
    the wedge geometry of :func:`_integrate_sliced`.  A departure cell around the pole (or
    spanning ≥ π in longitude) is clipped cell by cell (:func:`_integrate`), every other one
    sliced by the wedge and chord lines.
    """
    newm = np.zeros(K * nl)
    sx = np.empty(MAXP); sy = np.empty(MAXP)
    nb_ = 4 * MAXP
    px = np.empty(nb_); py = np.empty(nb_); ox = np.empty(nb_); oy = np.empty(nb_)
    w = np.empty((9, NSCR))
    sa = np.empty(4); sr = np.empty(4)
    ang = np.empty((K + 1, nl)); rad = np.empty((K + 1, nl))
    for j in range(K + 1):
        for i in range(nl):
            ang[j, i] = np.arctan2(Vd[j, i, 1], Vd[j, i, 0])
            rad[j, i] = np.hypot(Vd[j, i, 0], Vd[j, i, 1])
    for j in range(K):
        for i in range(nl):
            i1 = (i + 1) % nl
            sx[0] = Vd[j, i, 0]; sy[0] = Vd[j, i, 1]; sa[0] = ang[j, i]; sr[0] = rad[j, i]
            sx[1] = Vd[j + 1, i, 0]; sy[1] = Vd[j + 1, i, 1]; sa[1] = ang[j + 1, i]; sr[1] = rad[j + 1, i]
            sx[2] = Vd[j + 1, i1, 0]; sy[2] = Vd[j + 1, i1, 1]; sa[2] = ang[j + 1, i1]; sr[2] = rad[j + 1, i1]
            n0 = 3
            if j > 0:
                sx[3] = Vd[j, i1, 0]; sy[3] = Vd[j, i1, 1]; sa[3] = ang[j, i1]; sr[3] = rad[j, i1]
                n0 = 4
            around, ilo, ihi = _wedge_range(sx, sy, sa, sr, n0, lam0, dl)
            if around:
                j0, j1, i0, ni = _poly_range(sx, sy, n0, r, lam0, dl, nl, J)
                newm[j * nl + i] = _integrate(sx, sy, n0, j0, j1, i0, ni, nl, cells, ncell, blo, bhi,
                                              q, grad, cent, px, py, ox, oy)
            else:
                newm[j * nl + i] = _integrate_sliced(sx, sy, n0, ilo, ihi, nl, J, ray, bis, chord,
                                                     q, grad, cent, w)
    return newm


@nb.njit(cache=True)
def _interp(x, y, z, sign, r, lam0, dl, nl, J, Vv):
    """Velocity (3 floats) at the unit vector (x, y, z), bilinear in (r, λ) from Vv (J+1, nl, 3)."""
    s = np.sqrt(2.0 / (1.0 + sign * z))
    X = x * s; Y = y * s
    rr = np.hypot(X, Y)
    j = np.searchsorted(r, rr, side="right") - 1
    if j > J - 1:
        j = J - 1
    if j < 0:
        j = 0
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
def trace(Vxyz, Vv, dt, sign, r, lam0, dl, nl, J, nvert):
    """Midpoint-rule departure points (chart, (nvert, 2)) of the first nvert vertices.

    Vxyz ((J+1)·nl, 3) vertex positions, Vv (J+1, nl, 3) the velocity there.
    """
    out = np.empty((nvert, 2))
    for p in range(nvert):
        x, y, z = Vxyz[p, 0], Vxyz[p, 1], Vxyz[p, 2]
        jv = p // nl; iv = p - jv * nl
        mx = x - 0.5 * dt * Vv[jv, iv, 0]; my = y - 0.5 * dt * Vv[jv, iv, 1]; mz = z - 0.5 * dt * Vv[jv, iv, 2]
        n = np.sqrt(mx * mx + my * my + mz * mz)
        mx /= n; my /= n; mz /= n
        vx, vy, vz = _interp(mx, my, mz, sign, r, lam0, dl, nl, J, Vv)
        dx, dy, dz = x - dt * vx, y - dt * vy, z - dt * vz
        n = np.sqrt(dx * dx + dy * dy + dz * dz)
        dx /= n; dy /= n; dz /= n
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
    """(max departure radius, min departure-cell area / chord-polygon area) over the cap."""
    rmax = 0.0
    for j in range(K + 1):
        for i in range(nl):
            rmax = max(rmax, np.hypot(Vd[j, i, 0], Vd[j, i, 1]))
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
                 cells, ncell, cent, blo, bhi, ray, bis, chord, Vxyz):
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
    newm = departure_remap(Vd, K, J, r, lam0, dl, nl, cells, ncell, blo, bhi, q, grad, cent, ray, bis, chord)
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
        # wedge geometry of the sliced integration: face rays, wedge bisectors, chord distances
        u = np.stack([np.cos(lamf[:nl]), np.sin(lamf[:nl])], -1)
        b = u + u[ip]
        self.ray = np.ascontiguousarray(u)
        self.bis = np.ascontiguousarray(b / np.linalg.norm(b, axis=1)[:, None])
        self.chord = np.ascontiguousarray(r * np.cos(0.5 * self.dl))
        self.blo = np.ascontiguousarray(self.cells.min(1))
        self.bhi = np.ascontiguousarray(self.cells.max(1))
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
            self.pinv, self.stencil, self.cells, self.ncell, self.cent, self.blo, self.bhi,
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
