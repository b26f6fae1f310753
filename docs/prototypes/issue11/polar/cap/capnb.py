"""numba kernel for the cap: integral of the limited linear reconstruction over every swept
triangle ∩ cap/buffer cell (exact Sutherland–Hodgman clipping, one triangle at a time)."""
import numpy as np
import numba as nb

MAXP = 12


@nb.njit(cache=True)
def _clip_edge(px, py, n, e0x, e0y, e1x, e1y, ox, oy):
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
def swept_integrals(T, tface, r, lam0, dl, nl, J, cells, ncell, blo, bhi, q, grad, cent,
                    nfaces, nK_faces0, nKcells, B):
    """T (nt, 3, 2) signed triangles (any orientation).  Returns F (nfaces), E (nl), L (B·nl)."""
    F = np.zeros(nfaces)
    E = np.zeros(nl)
    L = np.zeros(B * nl)
    px = np.empty(MAXP); py = np.empty(MAXP); ox = np.empty(MAXP); oy = np.empty(MAXP)
    rmaxall = r[J]
    for t in range(T.shape[0]):
        ax, ay = T[t, 0, 0], T[t, 0, 1]
        bx, by = T[t, 1, 0], T[t, 1, 1]
        cx, cy = T[t, 2, 0], T[t, 2, 1]
        sa = 0.5 * ((bx - ax) * (cy - ay) - (cx - ax) * (by - ay))
        if sa == 0.0:
            continue
        sgn = 1.0
        if sa < 0:
            sgn = -1.0
            bx, by, cx, cy = cx, cy, bx, by
        # radial range
        ra = np.hypot(ax, ay); rb = np.hypot(bx, by); rc = np.hypot(cx, cy)
        rmx = max(ra, max(rb, rc))
        cab = ax * by - ay * bx; cbc = bx * cy - by * cx; cca = cx * ay - cy * ax
        inside = (cab > 0) and (cbc > 0) and (cca > 0)  # origin strictly inside
        if inside:
            rmn = 0.0
        else:
            rmn = 1e300
            for (p0x, p0y, p1x, p1y) in ((ax, ay, bx, by), (bx, by, cx, cy), (cx, cy, ax, ay)):
                dx, dy = p1x - p0x, p1y - p0y
                L2 = dx * dx + dy * dy
                tt = 0.0
                if L2 > 0:
                    tt = min(1.0, max(0.0, -(p0x * dx + p0y * dy) / L2))
                d = np.hypot(p0x + tt * dx, p0y + tt * dy)
                if d < rmn:
                    rmn = d
        j0 = np.searchsorted(r, rmn, side="right") - 2
        j1 = np.searchsorted(r, rmx, side="right")
        if j0 < 0:
            j0 = 0
        if j1 > J - 1:
            j1 = J - 1
        # angular range: the triangle lies in the cone of its vertices off the origin unless
        # the origin is strictly inside
        full = inside
        i0 = 0; ni = nl
        if not full:
            tiny = 1e-13 * rmx
            if ra >= rb and ra >= rc:
                a0 = np.arctan2(ay, ax)
            elif rb >= rc:
                a0 = np.arctan2(by, bx)
            else:
                a0 = np.arctan2(cy, cx)
            lo = 0.0; hi = 0.0
            for (x, y, rr) in ((ax, ay, ra), (bx, by, rb), (cx, cy, rc)):
                if rr > tiny:
                    rel = np.arctan2(y, x) - a0
                    rel = (rel + np.pi) % (2 * np.pi) - np.pi
                    lo = min(lo, rel); hi = max(hi, rel)
            if hi - lo > np.pi - 1e-9:
                full = True
            else:
                i0 = int(np.floor((a0 + lo - lam0) / dl)) - 1
                i1 = int(np.floor((a0 + hi - lam0) / dl)) + 1
                ni = min(i1 - i0 + 1, nl)
        tlox = min(ax, min(bx, cx)); thix = max(ax, max(bx, cx))
        tloy = min(ay, min(by, cy)); thiy = max(ay, max(by, cy))
        f = tface[t]
        acc = 0.0
        for j in range(j0, j1 + 1):
            for ii in range(ni):
                i = (i0 + ii) % nl
                c = j * nl + i
                if tlox > bhi[c, 0] or thix < blo[c, 0] or tloy > bhi[c, 1] or thiy < blo[c, 1]:
                    continue
                px[0] = ax; py[0] = ay; px[1] = bx; py[1] = by; px[2] = cx; py[2] = cy
                n = 3
                nc = ncell[c]
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
                val = sgn * (A * q[c] + grad[c, 0] * (Mx - A * cent[c, 0]) + grad[c, 1] * (My - A * cent[c, 1]))
                acc += val
                if f >= nK_faces0:
                    if c < nKcells:
                        E[f - nK_faces0] += val
                    else:
                        L[c - nKcells] -= val
        F[f] += acc
    return F, E, L


@nb.njit(cache=True)
def _poly_range(sx, sy, n, r, lam0, dl, nl, J):
    """candidate ring and longitude-index ranges of the polygon (sx, sy)[:n] (chart)."""
    rmx = 0.0; kmax = 0
    for k in range(n):
        rk = np.hypot(sx[k], sy[k])
        if rk > rmx:
            rmx = rk; kmax = k
    # origin inside? (crossing number) or on the boundary: distance
    inside = False
    rmn = 1e300
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
def _integrate(sx, sy, n0, j0, j1, i0, ni, nl, cells, ncell, blo, bhi, q, grad, cent,
               px, py, ox, oy, pieces_c, pieces_v, merge0, poly0, rec0):
    """∫ over polygon (sx, sy)[:n0] (CCW) of the reconstruction; the per-cell pieces are written
    to pieces_c / pieces_v; returns (integral, number of pieces).  merge0: ring 0 is one source
    cell, the convex nl-gon poly0 with the linear profile rec0 = (q, gx, gy, cx, cy)."""
    tlox = sx[0]; thix = sx[0]; tloy = sy[0]; thiy = sy[0]
    for k in range(1, n0):
        tlox = min(tlox, sx[k]); thix = max(thix, sx[k]); tloy = min(tloy, sy[k]); thiy = max(thiy, sy[k])
    acc = 0.0; npc = 0
    if merge0 and j0 == 0:
        j0 = 1
        for m in range(n0):
            px[m] = sx[m]; py[m] = sy[m]
        n = n0
        for k in range(nl):
            k1 = k + 1 if k + 1 < nl else 0
            e0x, e0y = poly0[k, 0], poly0[k, 1]
            ex, ey = poly0[k1, 0] - e0x, poly0[k1, 1] - e0y
            allin = True
            for m in range(n):
                if ex * (py[m] - e0y) - ey * (px[m] - e0x) < 0:
                    allin = False
                    break
            if allin:
                continue
            n = _clip_edge(px, py, n, e0x, e0y, poly0[k1, 0], poly0[k1, 1], ox, oy)
            for m in range(n):
                px[m] = ox[m]; py[m] = oy[m]
            if n < 3:
                break
        if n >= 3:
            A = 0.0; Mx = 0.0; My = 0.0
            for m in range(n):
                m1 = m + 1 if m + 1 < n else 0
                cr = px[m] * py[m1] - px[m1] * py[m]
                A += cr; Mx += (px[m] + px[m1]) * cr; My += (py[m] + py[m1]) * cr
            A *= 0.5; Mx /= 6.0; My /= 6.0
            val = A * rec0[0] + rec0[1] * (Mx - A * rec0[3]) + rec0[2] * (My - A * rec0[4])
            acc += val
            pieces_c[npc] = 0; pieces_v[npc] = val; npc += 1
    convex = True
    for k in range(n0):
        k1 = k + 1 if k + 1 < n0 else 0
        k2 = k1 + 1 if k1 + 1 < n0 else 0
        if (sx[k1] - sx[k]) * (sy[k2] - sy[k1]) - (sy[k1] - sy[k]) * (sx[k2] - sx[k1]) < 0:
            convex = False
    for j in range(j0, j1 + 1):
        for ii in range(ni):
            i = (i0 + ii) % nl
            c = j * nl + i
            if tlox > bhi[c, 0] or thix < blo[c, 0] or tloy > bhi[c, 1] or thiy < blo[c, 1]:
                continue
            # separating axes: an edge of the (convex) cell with every polygon vertex outside,
            # or, for a convex polygon, an edge of the polygon with every cell vertex outside
            nc = ncell[c]
            sep = False
            for k in range(nc):
                k1 = k + 1 if k + 1 < nc else 0
                ex = cells[c, k1, 0] - cells[c, k, 0]; ey = cells[c, k1, 1] - cells[c, k, 1]
                allout = True
                for m in range(n0):
                    if ex * (sy[m] - cells[c, k, 1]) - ey * (sx[m] - cells[c, k, 0]) > 0:
                        allout = False
                        break
                if allout:
                    sep = True
                    break
            if sep:
                continue
            if convex:
                for k in range(n0):
                    k1 = k + 1 if k + 1 < n0 else 0
                    ex = sx[k1] - sx[k]; ey = sy[k1] - sy[k]
                    allout = True
                    for m in range(nc):
                        if ex * (cells[c, m, 1] - sy[k]) - ey * (cells[c, m, 0] - sx[k]) > 0:
                            allout = False
                            break
                    if allout:
                        sep = True
                        break
                if sep:
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
            val = A * q[c] + grad[c, 0] * (Mx - A * cent[c, 0]) + grad[c, 1] * (My - A * cent[c, 1])
            acc += val
            pieces_c[npc] = c; pieces_v[npc] = val; npc += 1
    return acc, npc


@nb.njit(cache=True)
def departure_remap(Vd, V, K, B, r, lam0, dl, nl, cells, ncell, blo, bhi, q, grad, cent, merge0, poly0, rec0, handover=True, jstart=0):
    """Cap cells: ∫ over the departure cell; hand-over: the swept quads of the cap boundary
    (chord K) split into two signed triangles → E (nl, leaving the cap), L (B·nl, per buffer cell)."""
    J = K + B
    newm = np.zeros(K * nl)
    E = np.zeros(nl); L = np.zeros(B * nl); Lf = np.zeros(nl)
    sx = np.empty(MAXP); sy = np.empty(MAXP)
    nb_ = 4 * MAXP + nl
    px = np.empty(nb_); py = np.empty(nb_); ox = np.empty(nb_); oy = np.empty(nb_)
    pc = np.empty(J * nl, np.int64); pv = np.empty(J * nl)
    for j in range(jstart, K):
        for i in range(nl):
            i1 = (i + 1) % nl
            if j == 0:
                sx[0] = Vd[0, i, 0]; sy[0] = Vd[0, i, 1]
                sx[1] = Vd[1, i, 0]; sy[1] = Vd[1, i, 1]
                sx[2] = Vd[1, i1, 0]; sy[2] = Vd[1, i1, 1]
                n0 = 3
            else:
                sx[0] = Vd[j, i, 0]; sy[0] = Vd[j, i, 1]
                sx[1] = Vd[j + 1, i, 0]; sy[1] = Vd[j + 1, i, 1]
                sx[2] = Vd[j + 1, i1, 0]; sy[2] = Vd[j + 1, i1, 1]
                sx[3] = Vd[j, i1, 0]; sy[3] = Vd[j, i1, 1]
                n0 = 4
            j0, jj1, i0, ni = _poly_range(sx, sy, n0, r, lam0, dl, nl, J)
            acc, npc = _integrate(sx, sy, n0, j0, jj1, i0, ni, nl, cells, ncell, blo, bhi, q, grad, cent,
                                  px, py, ox, oy, pc, pv, merge0, poly0, rec0)
            newm[j * nl + i] = acc
    nKc = K * nl
    for i in range(nl if handover else 0):
        i1 = (i + 1) % nl
        # face from A = V[K, i] to Bp = V[K, i1]; departures Ad, Bd; triangles (A, Bp, Bd), (A, Bd, Ad)
        for tri in range(2):
            if tri == 0:
                x0, y0, x1, y1, x2, y2 = V[K, i, 0], V[K, i, 1], V[K, i1, 0], V[K, i1, 1], Vd[K, i1, 0], Vd[K, i1, 1]
            else:
                x0, y0, x1, y1, x2, y2 = V[K, i, 0], V[K, i, 1], Vd[K, i1, 0], Vd[K, i1, 1], Vd[K, i, 0], Vd[K, i, 1]
            sa = 0.5 * ((x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0))
            if sa == 0.0:
                continue
            sgn = 1.0
            if sa < 0:
                sgn = -1.0
                x1, y1, x2, y2 = x2, y2, x1, y1
            sx[0] = x0; sy[0] = y0; sx[1] = x1; sy[1] = y1; sx[2] = x2; sy[2] = y2
            j0, jj1, i0, ni = _poly_range(sx, sy, 3, r, lam0, dl, nl, J)
            acc, npc = _integrate(sx, sy, 3, j0, jj1, i0, ni, nl, cells, ncell, blo, bhi, q, grad, cent,
                                  px, py, ox, oy, pc, pv, merge0, poly0, rec0)
            for k in range(npc):
                c = pc[k]
                if c < nKc:
                    E[i] += sgn * pv[k]
                else:
                    L[c - nKc] -= sgn * pv[k]
                    Lf[i] -= sgn * pv[k]
    return newm, E, L, Lf


@nb.njit(cache=True)
def _interp(x, y, z, sign, r, lam0, dl, nl, J, Vv):
    """velocity (3,) at the unit vector (x, y, z) from vertex values Vv (J+1, nl, 3) on the
    LAEA polar grid (r_j, λ_i): bilinear in (r, λ) (the j = 0 row is the pole)."""
    s = np.sqrt(2.0 / (1.0 + sign * z))
    X = x * s; Y = y * s
    rr = np.hypot(X, Y)
    j = np.searchsorted(r, rr, side="right") - 1
    if j > J - 1:
        j = J - 1
    if j < 0:
        j = 0
    a = (rr - r[j]) / (r[j + 1] - r[j])
    lam = np.arctan2(Y, X)
    u = (lam - lam0) / dl
    i = int(np.floor(u))
    b = u - i
    i = i % nl
    i1 = (i + 1) % nl
    out = np.empty(3)
    for k in range(3):
        lo = (1 - b) * Vv[j, i, k] + b * Vv[j, i1, k]
        hi = (1 - b) * Vv[j + 1, i, k] + b * Vv[j + 1, i1, k]
        out[k] = (1 - a) * lo + a * hi
    return out


@nb.njit(cache=True)
def trace(Vxyz, Vv, dt, sign, r, lam0, dl, nl, J, nvert, nsub=1):
    """midpoint-rule departure points (chart coordinates) of the first nvert vertices, with
    the velocity interpolated from the vertex values Vv."""
    out = np.empty((nvert, 2))
    tau = dt / nsub
    for p in range(nvert):
        x, y, z = Vxyz[p, 0], Vxyz[p, 1], Vxyz[p, 2]
        for it in range(nsub):
            if it == 0:
                v = Vv.reshape(-1, 3)[p]
            else:
                v = _interp(x, y, z, sign, r, lam0, dl, nl, J, Vv)
            mx, my, mz = x - 0.5 * tau * v[0], y - 0.5 * tau * v[1], z - 0.5 * tau * v[2]
            n = np.sqrt(mx * mx + my * my + mz * mz)
            mx /= n; my /= n; mz /= n
            vm = _interp(mx, my, mz, sign, r, lam0, dl, nl, J, Vv)
            dx, dy, dz = x - tau * vm[0], y - tau * vm[1], z - tau * vm[2]
            n = np.sqrt(dx * dx + dy * dy + dz * dz)
            x, y, z = dx / n, dy / n, dz / n
        dx, dy, dz = x, y, z
        s = np.sqrt(2.0 / (1.0 + sign * dz))
        out[p, 0] = dx * s; out[p, 1] = dy * s
    return out


@nb.njit(cache=True)
def reconstruct(q, pinv, stencil, cells, ncell, cent):
    """least-squares gradient, scaled so the linear profile is ≥ 0 at every cell vertex."""
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
    """max departure radius and min (departure-cell area / cell area) of the cap cells."""
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
def sl_remap(Vd, K, nl, rc, lam0, dl, q, qpole, ratio):
    """semi-Lagrangian cap: new mass of cap cell c = q̃(centroid of D_c) · area(D_c) · ratio_c,
    q̃ the bilinear interpolant in (r, λ) of the cell densities at the cell centroids
    (r = rc_j, λ = λ_i + dl/2), with the pole value qpole inside the first centroid ring.
    A convex combination of non-negative values: ≥ 0.  Not conservative (the caller rescales)."""
    J = rc.shape[0]
    newm = np.zeros(K * nl)
    sx = np.empty(4); sy = np.empty(4)
    for j in range(K):
        for i in range(nl):
            i1 = (i + 1) % nl
            if j == 0:
                sx[0] = Vd[0, i, 0]; sy[0] = Vd[0, i, 1]
                sx[1] = Vd[1, i, 0]; sy[1] = Vd[1, i, 1]
                sx[2] = Vd[1, i1, 0]; sy[2] = Vd[1, i1, 1]
                n = 3
            else:
                sx[0] = Vd[j, i, 0]; sy[0] = Vd[j, i, 1]
                sx[1] = Vd[j + 1, i, 0]; sy[1] = Vd[j + 1, i, 1]
                sx[2] = Vd[j + 1, i1, 0]; sy[2] = Vd[j + 1, i1, 1]
                sx[3] = Vd[j, i1, 0]; sy[3] = Vd[j, i1, 1]
                n = 4
            A = 0.0; Mx = 0.0; My = 0.0
            for m in range(n):
                m1 = m + 1 if m + 1 < n else 0
                cr = sx[m] * sy[m1] - sx[m1] * sy[m]
                A += cr; Mx += (sx[m] + sx[m1]) * cr; My += (sy[m] + sy[m1]) * cr
            A *= 0.5
            if A <= 0:
                continue
            X = Mx / (6 * A); Y = My / (6 * A)
            rr = np.hypot(X, Y)
            u = (np.arctan2(Y, X) - lam0) / dl - 0.5
            ii = int(np.floor(u)); b = u - ii
            ia = ii % nl; ib = (ii + 1) % nl
            if rr < rc[0]:
                a = rr / rc[0]
                qv = (1 - a) * qpole + a * ((1 - b) * q[ia] + b * q[ib])
            else:
                jj = np.searchsorted(rc, rr, side="right") - 1
                if jj >= J - 1:
                    qv = (1 - b) * q[(J - 1) * nl + ia] + b * q[(J - 1) * nl + ib]
                else:
                    a = (rr - rc[jj]) / (rc[jj + 1] - rc[jj])
                    lo = (1 - b) * q[jj * nl + ia] + b * q[jj * nl + ib]
                    hi = (1 - b) * q[(jj + 1) * nl + ia] + b * q[(jj + 1) * nl + ib]
                    qv = (1 - a) * lo + a * hi
            newm[j * nl + i] = qv * A * ratio[j * nl + i]
    return newm


@nb.njit(cache=True)
def integrate_polygon(P, r, lam0, dl, nl, J, cells, ncell, blo, bhi, q, grad, cent, merge0, poly0, rec0):
    """∫ of the reconstruction over one CCW polygon P (n, 2) (n ≤ MAXP)."""
    n0 = P.shape[0]
    sx = np.empty(MAXP); sy = np.empty(MAXP)
    for k in range(n0):
        sx[k] = P[k, 0]; sy[k] = P[k, 1]
    nb_ = 4 * MAXP + nl
    px = np.empty(nb_); py = np.empty(nb_); ox = np.empty(nb_); oy = np.empty(nb_)
    pc = np.empty(J * nl, np.int64); pv = np.empty(J * nl)
    j0, j1, i0, ni = _poly_range(sx, sy, n0, r, lam0, dl, nl, J)
    acc, npc = _integrate(sx, sy, n0, j0, j1, i0, ni, nl, cells, ncell, blo, bhi, q, grad, cent,
                          px, py, ox, oy, pc, pv, merge0, poly0, rec0)
    return acc
