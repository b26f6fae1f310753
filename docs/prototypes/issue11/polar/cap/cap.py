"""Positive unsplit polar cap for the FFSL–PPM sphere transport (issue 11 prototype, helper-d).

Rings 0..K−1 around each pole are advanced by a departure-cell remap (CSLAM-like) in Lambert
azimuthal equal-area (LAEA) coordinates; rings K.. by the split Z(Δt/2) M Z(Δt/2) of
FFSLSphere with a closed wall at the cap boundary face (ring face K).  Started from the first
session's swept-area prototype (/work/shared/prototypes/polar_cap_remap.py, copied here and
kept as the ``CAP_MODE=flux`` path).

Geometry.  Every cap/buffer cell (rings 0..K+B−1) is the convex chord polygon of its annular
sector in the LAEA chart; these polygons tile the disc exactly.  Density q = mass / true cell
area; a least-squares linear profile per cell, its gradient scaled so the profile is ≥ 0 at
every vertex of the cell (so ≥ 0 on the cell) and integrating to q·(polygon area).

Step (velocity frozen over the step).
  1. Trace the cap vertices (rings 0..K) back with the midpoint rule (``CAP_TRACE=direct``:
     the velocity callable at the midpoints; ``interp``: velocities only at the vertices of
     rings 0..K+B, bilinear in (r, λ) — what the package would do with extra face points).
  2. Cap cell c gets ∫_{D_c} ρ̃ + q_c (true area − polygon area): ≥ 0 whenever the departure
     cells are not folded (checked; a folded cell or a departure point beyond the buffer
     sub-steps the cap).  Integrals by exact Sutherland–Hodgman clipping of D_c against the
     convex cells (numba kernel capnb.departure_remap).
  3. Hand-over at the cap boundary: its swept quads (face, departure face; two signed
     triangles each) give per face E (the part inside the cap: mass leaving) and Lf (the part
     outside: mass entering), per buffer cell L.  Conservation: Σ new cap mass − Σ old =
     Σ Lf − Σ E exactly (signed-area identity; checked to round-off).
       ``CAP_HANDOVER=source``: L is removed from the buffer cells it comes from before the outer
       sweeps, E is added to ring K after the meridional sweep — positive by construction
       (L_c ≤ ∫_c ρ̃ ≤ m_c), but first order (Williamson l2 0.0366 / 0.0275).
       ``CAP_HANDOVER=after`` (default): the net E − Lf is added to ring K after the
       meridional sweep (as the first prototype did); where a ring-K cell would go negative,
       the deficit is taken back from the cap cell inside that face, and a negative cap cell
       is then filled by scaling its ring (conservative fallback; counted in fix_count,
       fix_mass, ring_fix).
       ``CAP_HANDOVER=overlap``: no hand-over inside the split.  Today's split step runs on the
       whole sphere, the cap rings are overwritten by the remap of the start state, and the
       cap-mass difference δ (split − cap) goes into ring K in proportion to its masses.
       ``CAP_HANDOVER=overlap-scale`` (best): as overlap, but the remapped cap masses are scaled
       to the split step's cap mass (the split fixes how much, the cap where).  Positive and
       conservative by construction, no fallback, no sub-steps at any Courant number.
  4. (source, after) Outer split on rings K..nlat−K−1 (wall at the cap faces), E − Lf into
     ring K between M and the second Z.

Options by environment: CAP_BACKEND=numba|numpy, CAP_MODE=dep|flux|sl (sl: semi-Lagrangian
value per cell, overlap modes only, too diffusive), CAP_HANDOVER=after|source|overlap|
overlap-scale, CAP_TRACE=direct|interp, CAP_TRACE_SUB=n (midpoint sub-steps of the tracing),
CAP_MERGE0=0|1 (ring 0 as one source cell), CAP_RING0=cells|unit (overlap modes: ring 0 as one
destination unit, shared out linearly; cheap).  See CAP.md for the measurements.
"""
import numpy as np

from spherepde.solvers.eulerian import ffsl
from spherepde.solvers.eulerian.transport import FFSLSphere

MAXV = 10
import os
BACKEND = os.environ.get('CAP_BACKEND', 'numba')
HANDOVER = os.environ.get('CAP_HANDOVER', 'after')  # after | source | overlap
MODE = os.environ.get('CAP_MODE', 'dep')
MERGE0 = os.environ.get('CAP_MERGE0', '0') == '1'
RING0UNIT = os.environ.get('CAP_RING0', 'cells') == 'unit'  # overlap modes: ring 0 as a unit (cheap)
TRACE_SUB = int(os.environ.get('CAP_TRACE_SUB', '1'))  # midpoint sub-steps of the vertex tracing (interp)
TRACE = os.environ.get('CAP_TRACE', 'direct')  # direct: velocity callable at midpoints; interp  # dep: departure cells; flux: swept faces


class DepartureError(RuntimeError):
    pass


def _normalize(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _shoelace(P, n):
    """area, centroid of polygons P (m, MAXV, 2) with n (m,) vertices (CCW positive)."""
    idx = np.arange(P.shape[1])[None, :]
    nxt = np.where(idx + 1 < n[:, None], idx + 1, 0)
    Q = np.take_along_axis(P, nxt[..., None].repeat(2, -1), 1)
    valid = idx < n[:, None]
    cr = (P[..., 0] * Q[..., 1] - Q[..., 0] * P[..., 1]) * valid
    A = 0.5 * cr.sum(1)
    cx = ((P[..., 0] + Q[..., 0]) * cr).sum(1)
    cy = ((P[..., 1] + Q[..., 1]) * cr).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.stack([cx, cy], 1) / (6.0 * A[:, None])
    return A, np.nan_to_num(c)


def _moments(P, n):
    """area and first moments of closed polygons P (m, MAXV+1, 2) (vertex n repeats vertex 0)."""
    valid = np.arange(MAXV)[None, :] < n[:, None]
    A0, A1 = P[:, :-1], P[:, 1:]
    cr = (A0[..., 0] * A1[..., 1] - A1[..., 0] * A0[..., 1]) * valid
    A = 0.5 * cr.sum(1)
    return A, np.stack([((A0[..., 0] + A1[..., 0]) * cr).sum(1), ((A0[..., 1] + A1[..., 1]) * cr).sum(1)], 1) / 6.0


def _shoelace(P, n):
    Pc = np.concatenate([P, P[:, :1]], 1) if P.shape[1] == MAXV else P
    Pc = Pc.copy(); Pc[np.arange(len(n)), n] = Pc[:, 0]
    A, M = _moments(Pc, n)
    return A, M / A[:, None]


def _clip(P, n, E0, E1):
    """Clip closed polygons P (m, MAXV+1, 2) by the half-plane left of E0→E1 (m, 2)."""
    m = P.shape[0]
    d = E1 - E0
    s = d[:, None, 0] * (P[..., 1] - E0[:, None, 1]) - d[:, None, 1] * (P[..., 0] - E0[:, None, 0])
    valid = np.arange(MAXV)[None, :] < n[:, None]
    s0, s1 = s[:, :-1], s[:, 1:]
    P0, P1 = P[:, :-1], P[:, 1:]
    ins, insn = (s0 >= 0) & valid, (s1 >= 0) & valid
    cross = valid & (ins != insn)
    with np.errstate(invalid="ignore", divide="ignore"):
        tt = np.where(cross, s0 / np.where(cross, s0 - s1, 1.0), 0.0)
    X = P0 + tt[..., None] * (P1 - P0)
    emit = ins.astype(np.int8) + cross.astype(np.int8)
    pos = np.cumsum(emit, 1) - emit
    out = np.zeros_like(P)
    nout = emit.sum(1).astype(int)
    r, c = np.nonzero(ins)
    out[r, pos[r, c]] = P0[r, c]
    r, c = np.nonzero(cross)
    out[r, pos[r, c] + ins[r, c]] = X[r, c]
    out[np.arange(m), np.minimum(nout, MAXV)] = out[:, 0]
    return out, nout


class _CapC:
    def __init__(self, grid, K, B, sign):
        self.K, self.B, self.sign = K, B, sign
        nl = grid.nlon
        self.nl = nl
        mu_f = np.asarray(grid.mu_faces) if sign > 0 else -np.asarray(grid.mu_faces)[::-1]
        self.r = np.sqrt(np.clip(2.0 * (1.0 - mu_f[:K + B + 1]), 0, None)); self.r[0] = 0.0
        lamf = np.asarray(grid.lon_faces); self.lamf = lamf; self.dl = lamf[1] - lamf[0]
        self.rows = np.arange(K + B) if sign > 0 else grid.nlat - 1 - np.arange(K + B)
        J = K + B
        # vertices V[j, i] = (r_j, λ_i) for j = 0..J, i = 0..nl (i = nl ≡ 0)
        R, L = np.meshgrid(self.r, lamf[:nl], indexing="ij")
        self.V = np.stack([R * np.cos(L), R * np.sin(L)], -1)  # (J+1, nl, 2)
        cells = np.zeros((J, nl, 4, 2)); ncell = np.full((J, nl), 4)
        ip = (np.arange(nl) + 1) % nl
        for j in range(J):
            a, b = self.V[j], self.V[j][ip]
            c, d = self.V[j + 1][ip], self.V[j + 1]
            if j == 0:
                cells[j] = np.stack([a, d, c, c], 1); ncell[j] = 3  # pole, outer λ_i, outer λ_{i+1}
            else:
                cells[j] = np.stack([a, d, c, b], 1)  # inner λ_i → outer λ_i → outer λ_{i+1} → inner λ_{i+1}
        self.cells = cells.reshape(-1, 4, 2); self.ncell = ncell.reshape(-1)
        Pc = np.zeros((len(self.cells), MAXV, 2)); Pc[:, :4] = self.cells
        self.area, self.cent = _shoelace(Pc, self.ncell)
        self.blo, self.bhi = self.cells.min(1), self.cells.max(1)
        assert (self.area > 0).all()
        # LSQ gradient stencil
        idx = lambda j, i: j * nl + (i % nl)
        st = np.zeros((J * nl, 8), int)
        for j in range(J):
            for i in range(nl):
                nb = [idx(j, i - 1), idx(j, i + 1)]
                nb += [idx(j - 1, i + d) for d in (-1, 0, 1)] if j > 0 else [idx(0, i + nl // 2 + d) for d in (-1, 0, 1)]
                nb += [idx(j + 1, i + d) for d in (-1, 0, 1)] if j + 1 < J else [idx(j - 1, i + d) for d in (-1, 0, 1)]
                st[idx(j, i)] = nb
        self.stencil = st
        self.pinv = np.linalg.pinv(self.cent[st] - self.cent[:, None, :])
        self.pinvc = np.ascontiguousarray(self.pinv)
        # ring 0 as one source cell (the convex nl-gon of the ring-1 vertices, centroid 0):
        # gradient by least squares from the ring-1 centroids
        self.poly0 = np.ascontiguousarray(self.V[1])
        self.pinv0 = np.linalg.pinv(self.cent[nl:2 * nl])
        # faces: radial segments in rings 0..K−1 at λ_i (left cell i, right cell i−1), chords at r_j
        # for j = 1..K (left ring j−1, right ring j); end points as vertex indices
        fa, fb, left, right = [], [], [], []
        for j in range(K):
            for i in range(nl):
                fa.append((j, i)); fb.append((j + 1, i)); left.append(idx(j, i)); right.append(idx(j, i - 1))
        for j in range(1, K + 1):
            for i in range(nl):
                fa.append((j, i)); fb.append((j, (i + 1) % nl)); left.append(idx(j - 1, i)); right.append(idx(j, i))
        self.fa, self.fb = np.array(fa), np.array(fb)
        self.left, self.right = np.array(left), np.array(right)
        self.nfaces = len(left)
        # vertex xyz for tracing (only rings 0..K)
        self.Vxyz = self.to_xyz(self.V[:K + 1].reshape(-1, 2))
        self.VxyzAll = np.ascontiguousarray(self.to_xyz(self.V.reshape(-1, 2)))
        self.vel_time = 0.0

    def _ring0_unit(self, Vd, q, grad, rec0, newm, true_area):
        """ring 0 as a unit (overlap modes only): its new total = area of the departure of the
        polar nlon-gon × the source profile at that polygon's centroid; shared out by a limited
        linear profile whose gradient is fitted to the new ring-1 densities."""
        nl = self.nl
        P = Vd[1]
        Q = np.roll(P, -1, axis=0)
        cr = P[:, 0] * Q[:, 1] - Q[:, 0] * P[:, 1]
        A = 0.5 * cr.sum()
        cx = ((P[:, 0] + Q[:, 0]) * cr).sum() / (6 * A); cy = ((P[:, 1] + Q[:, 1]) * cr).sum() / (6 * A)
        # the departure of the polar nlon-gon, coarsened to a 12-gon (every nl/12-th traced
        # ring-1 vertex), integrated exactly and scaled to the full polygon's area
        from capnb import integrate_polygon
        m = 12
        P12 = np.ascontiguousarray(P[np.linspace(0, nl, m, endpoint=False).astype(int)])
        Q12 = np.roll(P12, -1, axis=0)
        A12 = 0.5 * (P12[:, 0] * Q12[:, 1] - Q12[:, 0] * P12[:, 1]).sum()
        I12 = integrate_polygon(P12, self.r, float(self.lamf[0]), float(self.dl), nl, self.K + self.B,
                                self.cells, self.ncell, self.blo, self.bhi, q, np.ascontiguousarray(grad),
                                self.cent, MERGE0, self.poly0, rec0)
        M0 = max(I12, 0.0) * (A / A12) * (true_area[:nl].sum() / self.area[:nl].sum())
        q1 = newm[nl:2 * nl] / true_area[nl:2 * nl]
        qb = M0 / true_area[:nl].sum()
        g = self.pinv0 @ (q1 - qb)
        d = self.cent[:nl] @ g
        dmin = min(0.0, float(d.min()))
        th = 1.0 if dmin == 0.0 else min(1.0, qb / -dmin)
        w = (qb + th * d) * true_area[:nl]
        ws = w.sum()
        return w * (M0 / ws) if ws > 0 else np.zeros(nl)

    def to_chart(self, x):
        s = np.sqrt(2.0 / (1.0 + self.sign * x[..., 2]))
        return np.stack([x[..., 0] * s, x[..., 1] * s], -1)

    def to_xyz(self, X):
        r2 = np.sum(X ** 2, -1)
        s = np.sqrt(np.clip(1.0 - r2 / 4.0, 0, None))
        return np.stack([X[..., 0] * s, X[..., 1] * s, self.sign * (1.0 - 0.5 * r2)], -1)

    def fluxes(self, mass_src, vel, dt, true_area=None):
        q = mass_src / (self.area if true_area is None else true_area)
        if BACKEND == "numba":
            from capnb import reconstruct
            grad = reconstruct(q, self.pinvc, self.stencil, self.cells, self.ncell, self.cent)
        else:
            grad = np.einsum("nkm,nm->nk", self.pinv, q[self.stencil] - q[:, None])
            dv = np.einsum("nvk,nk->nv", self.cells - self.cent[:, None, :], grad)
            theta = np.where(dv.min(1) < 0, np.clip(q / np.maximum(-dv.min(1), 1e-300), 0, 1), 1.0)
            grad *= theta[:, None]
        if TRACE == "interp":
            # velocities at all vertices of rings 0..K+B (in the package: part of the face
            # points, one evaluation per step), midpoint rule on their bilinear interpolant
            import time as _t
            t0 = _t.process_time()
            Vv = np.ascontiguousarray(vel(self.VxyzAll).reshape(self.K + self.B + 1, self.nl, 3))
            self.vel_time += _t.process_time() - t0
            from capnb import trace
            Vd = trace(self.VxyzAll, Vv, dt, float(self.sign), self.r, float(self.lamf[0]), float(self.dl),
                       self.nl, self.K + self.B, (self.K + 1) * self.nl, TRACE_SUB).reshape(self.K + 1, self.nl, 2)
        else:
            x = self.Vxyz
            xm = _normalize(x - 0.5 * dt * vel(x))
            xd = _normalize(x - dt * vel(xm))
            Vd = self.to_chart(xd).reshape(self.K + 1, self.nl, 2)
        from capnb import fold_check
        Vd = np.ascontiguousarray(Vd)
        self.max_dep_r, self.min_dep_area_ratio = fold_check(Vd, self.area, self.K, self.nl)
        if self.max_dep_r > self.r[-1]:
            raise DepartureError("departure beyond buffer")
        # departure cells of the cap must stay positively oriented (simple): else sub-step
        if self.min_dep_area_ratio < 0.05:
            raise DepartureError("departure cell folded")
        V = self.V
        if MODE == "sl":
            from capnb import sl_remap
            nK = self.K * self.nl
            rc = np.hypot(self.cent[::self.nl, 0], self.cent[::self.nl, 1])
            qpole = mass_src[:self.nl].sum() / true_area[:self.nl].sum()
            newm = sl_remap(Vd, self.K, self.nl, rc, float(self.lamf[0]), float(self.dl), q, qpole,
                            true_area[:nK] / self.area[:nK])
            return ("sl", newm, None, None, None)
        if MODE == "dep":
            from capnb import departure_remap
            if MERGE0:
                nl = self.nl
                q0 = mass_src[:nl].sum() / true_area[:nl].sum()
                g0 = self.pinv0 @ (q[nl:2 * nl] - q0)
                dmin = min(0.0, float((self.poly0 @ g0).min()))
                th = 1.0 if dmin == 0.0 else min(1.0, max(0.0, q0 / -dmin))
                rec0 = np.array([q0, th * g0[0], th * g0[1], 0.0, 0.0])
            else:
                rec0 = np.zeros(5)
            newm, E, L, Lf = departure_remap(np.ascontiguousarray(Vd), V, self.K, self.B, self.r, float(self.lamf[0]),
                                         float(self.dl), self.nl, self.cells, self.ncell, self.blo, self.bhi,
                                         q, np.ascontiguousarray(grad), self.cent, MERGE0, self.poly0, rec0,
                                         not HANDOVER.startswith("overlap"), 1 if RING0UNIT else 0)
            if RING0UNIT:
                newm[:self.nl] = self._ring0_unit(Vd, q, grad, rec0, newm, true_area)
            nK = self.K * self.nl
            return ("dep", newm + q[:nK] * (true_area[:nK] - self.area[:nK]), E, L, Lf)
        A = V[self.fa[:, 0], self.fa[:, 1]]; Bp = V[self.fb[:, 0], self.fb[:, 1]]
        Ad = Vd[self.fa[:, 0], self.fa[:, 1]]; Bd = Vd[self.fb[:, 0], self.fb[:, 1]]
        T = np.concatenate([np.stack([A, Bp, Bd], 1), np.stack([A, Bd, Ad], 1)])
        tface = np.concatenate([np.arange(self.nfaces)] * 2)
        if BACKEND == "numba":
            from capnb import swept_integrals
            return swept_integrals(np.ascontiguousarray(T), tface, self.r, float(self.lamf[0]), float(self.dl),
                                   self.nl, self.K + self.B, self.cells, self.ncell, self.blo, self.bhi,
                                   q, np.ascontiguousarray(grad), self.cent, self.nfaces,
                                   self.nfaces - self.nl, self.K * self.nl, self.B)
        sa = 0.5 * ((T[:, 1, 0] - T[:, 0, 0]) * (T[:, 2, 1] - T[:, 0, 1]) - (T[:, 2, 0] - T[:, 0, 0]) * (T[:, 1, 1] - T[:, 0, 1]))
        ok = np.abs(sa) > 0
        T, tface, sa = T[ok], tface[ok], sa[ok]
        sgn = np.sign(sa)
        T = np.where((sgn < 0)[:, None, None], T[:, ::-1], T)  # make CCW
        # candidate cells: polar bounding box of each triangle
        rv = np.hypot(T[..., 0], T[..., 1])
        # distance from origin to the triangle (0 if inside)
        def seg_dist(P0, P1):
            d = P1 - P0; L2 = np.maximum((d ** 2).sum(-1), 1e-300)
            tt = np.clip(-(P0 * d).sum(-1) / L2, 0, 1)
            return np.hypot(*(P0 + tt[..., None] * d).T)
        dmin = np.minimum(np.minimum(seg_dist(T[:, 0], T[:, 1]), seg_dist(T[:, 1], T[:, 2])), seg_dist(T[:, 2], T[:, 0]))
        cr = lambda P0, P1: P0[:, 0] * P1[:, 1] - P0[:, 1] * P1[:, 0]
        inside = (cr(T[:, 0], T[:, 1]) >= 0) & (cr(T[:, 1], T[:, 2]) >= 0) & (cr(T[:, 2], T[:, 0]) >= 0)
        rmin = np.where(inside, 0.0, dmin)
        j0 = np.clip(np.searchsorted(self.r, rmin, side="right") - 1, 0, self.K + self.B - 1)
        j1 = np.clip(np.searchsorted(self.r, rv.max(1), side="right"), 0, self.K + self.B - 1)  # +1 ring margin (chords)
        ang = np.arctan2(T[..., 1], T[..., 0])
        far = rv > 1e-14
        a0 = np.take_along_axis(ang, np.argmax(rv, 1)[:, None], 1)[:, 0]
        rel = np.mod(ang - a0[:, None] + np.pi, 2 * np.pi) - np.pi
        lo = a0 + np.where(far, rel, np.inf).min(1)
        hi = a0 + np.where(far, rel, -np.inf).max(1)
        strict = inside & (rmin <= 0.0) & far.all(1)
        full = strict | (hi - lo > np.pi)
        i0 = np.floor((lo - self.lamf[0]) / self.dl).astype(int) - 1
        i1 = np.floor((hi - self.lamf[0]) / self.dl).astype(int) + 1
        ni = np.where(full, self.nl, np.minimum(i1 - i0 + 1, self.nl))
        i0 = np.where(full, 0, i0)
        nj = j1 - j0 + 1
        cnt = nj * ni
        tid = np.repeat(np.arange(len(T)), cnt)
        off = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        jj = j0[tid] + off // ni[tid]
        ii = (i0[tid] + off % ni[tid]) % self.nl
        cid = jj * self.nl + ii
        # bounding-box pre-filter
        tlo, thi = T.min(1), T.max(1)
        keep = np.all((tlo[tid] <= self.bhi[cid]) & (thi[tid] >= self.blo[cid]), 1)
        tid, cid = tid[keep], cid[keep]
        self.npairs = len(tid)
        # clip
        P = np.zeros((len(tid), MAXV + 1, 2)); P[:, :3] = T[tid]; P[:, 3] = T[tid, 0]
        n = np.full(len(tid), 3)
        C = self.cells[cid]; nc = self.ncell[cid]
        for k in range(4):
            E0 = C[:, k]; E1 = np.where((k + 1 < nc)[:, None], C[:, (k + 1) % 4], C[:, 0])
            use = k < nc
            Pn, nn = _clip(P, n, E0, E1)
            P = np.where(use[:, None, None], Pn, P); n = np.where(use, nn, n)
        n = np.minimum(n, MAXV)
        a, M1 = _moments(P, n)
        a = np.where(n >= 3, a, 0.0); M1 = np.where((n >= 3)[:, None], M1, 0.0)
        val = a * q[cid] + np.sum(grad[cid] * (M1 - a[:, None] * self.cent[cid]), 1)
        per_tri = np.bincount(tid, weights=val, minlength=len(T)) * sgn
        F = np.bincount(tface, weights=per_tri, minlength=self.nfaces)
        # hand-over at the cap boundary (chord K, the last nl faces; F > 0 outward): pieces of
        # its swept triangles inside the cap leave it (E, per face), pieces outside come from
        # the buffer cells they lie in (L, per buffer cell)
        nK = self.K * self.nl
        fK = tface[tid] - (self.nfaces - self.nl)
        onK = fK >= 0
        piece = val * sgn[tid]
        inside = onK & (cid < nK)
        outside = onK & (cid >= nK)
        E = np.bincount(fK[inside], weights=piece[inside], minlength=self.nl)
        L = -np.bincount(cid[outside] - nK, weights=piece[outside], minlength=self.B * self.nl)
        return F, E, L


class CapFFSL(FFSLSphere):
    """Unsplit swept-area remap in rings 0..K−1 of each pole, split FFSL outside, positive
    hand-over: L (mass of buffer cells swept into the cap) is removed from those cells before
    the outer sweeps, E (mass leaving the cap) is added to ring K after the meridional sweep;
    the outer meridional sweep has a wall at the cap boundary.  Cap sub-stepped when departure
    points leave the buffer or departure cells fold."""

    def __init__(self, grid, velocity, K=4, B=3, **opt):
        super().__init__(grid, velocity, **opt)
        self.K, self.B = K, B
        self.caps = [_CapC(grid, K, B, +1), _CapC(grid, K, B, -1)]
        self._line_mid = ffsl.BoundedLine((np.pi / 2 - np.asarray(grid.lat_faces))[K:grid.nlat - K + 1])
        self._cellA = (np.asarray(grid.weights) * grid.dlon)[:, None]
        self.cap_substeps = 0
        self.fix_count = 0; self.fix_mass = 0.0; self.ring_fix = 0
        self.cap_time = 0.0
        self.outer_time = 0.0

    def _cap_update(self, mass, vel, dt):
        """One cap remap over dt (in place on mass); returns E per cap (nl,) to add to ring K."""
        K, nl, cellA = self.K, self.grid.nlon, self._cellA
        Es = []
        for cap in self.caps:
            rows = cap.rows
            out = cap.fluxes(mass[rows].reshape(-1), vel, dt, cellA[rows].repeat(nl, 1).reshape(-1))
            if isinstance(out[0], str):
                _, newm, E, L, Lf = out
                mass[rows[:K]] = newm.reshape(K, nl)
            else:
                F, E, L = out
                dm = np.zeros((K + self.B) * nl)
                np.add.at(dm, cap.left, -F)
                np.add.at(dm, cap.right, F)
                mass[rows[:K]] += dm[:K * nl].reshape(K, nl)
            if HANDOVER == "source":
                mass[rows[K:]] -= L.reshape(self.B, nl)
                Es.append(E)
            else:
                Es.append(E - Lf)
        return Es

    def advance_with(self, rho, vel, az, am, dt):
        if HANDOVER in ("overlap", "overlap-scale"):
            return self._advance_overlap(rho, vel, az, am, dt)
        return self._advance_coupled(rho, vel, az, am, dt)

    def _advance_overlap(self, rho, vel, az, am, dt):
        """overlap coupling: today's split step on the whole sphere, then the cap rings are
        replaced by the cap's remap of the start state; the difference in cap mass (split − cap,
        i.e. the difference of the two estimates of the flux through the cap boundary) goes into
        ring K in proportion to its masses (ring-wide fallback if the ring cannot pay)."""
        import time
        K, nl, cellA = self.K, self.grid.nlon, self._cellA
        t0 = time.process_time()
        mass0 = rho * cellA
        caps_new = []
        nsub = 1
        while True:
            try:
                outs = [cap.fluxes(mass0[cap.rows].reshape(-1), vel, dt / nsub, cellA[cap.rows].repeat(nl, 1).reshape(-1))
                        for cap in self.caps]
                break
            except DepartureError:
                nsub *= 2
                if nsub > 1:
                    raise RuntimeError("overlap mode: cap sub-stepping not implemented")
        t1 = time.process_time()
        new = FFSLSphere.advance(self, rho, az, am, dt)
        t2 = time.process_time()
        for cap, out in zip(self.caps, outs):
            newm = out[1].reshape(K, nl)
            rows = cap.rows
            split_mass = (new[rows[:K]] * cellA[rows[:K]]).sum()
            delta = split_mass - newm.sum()
            if HANDOVER == "overlap-scale":
                # the split's cap mass (its fluxes through the cap boundary), the cap's shape
                tot_c = newm.sum()
                if tot_c > 0:
                    new[rows[:K]] = newm * (split_mass / tot_c) / cellA[rows[:K]]
                else:  # empty cap: keep the split's values
                    pass
                self.delta_abs = getattr(self, "delta_abs", 0.0) + abs(delta)
                self.fix_mass += abs(delta)
                continue
            new[rows[:K]] = newm / cellA[rows[:K]]
            mK = new[rows[K]] * cellA[rows[K]]
            tot = mK.sum()
            scale = max(tot, abs(split_mass), newm.sum(), 1e-300)
            if delta < 0 and -delta > tot:
                # ring K cannot pay: it pays all it has, the cap gives back the rest (scaled)
                rest = -delta - tot
                self.ring_fix += 1
                new[rows[:K]] *= max(0.0, 1.0 - rest / max(newm.sum(), 1e-300))
                delta = -tot
            if -delta > 1e-14 * scale:
                self.fix_count += 1; self.fix_mass += float(-delta)
            if tot > 0:
                new[rows[K]] = mK * (1.0 + delta / tot) / cellA[rows[K]]
            elif delta > 0:  # empty ring receives: in proportion to area
                aK = cellA[rows[K]].repeat(nl) if cellA.shape[1] == 1 else cellA[rows[K]]
                new[rows[K]] = delta / aK.sum() + 0.0 * mK
            self.ring_fix += 0
            self.delta_abs = getattr(self, "delta_abs", 0.0) + abs(delta)
        self.cap_time += t1 - t0
        self.outer_time += t2 - t1
        return new

    def _advance_coupled(self, rho, vel, az, am, dt):
        import time
        g, K, n, nl = self.grid, self.K, self.grid.nlat, self.grid.nlon
        cellA = self._cellA
        t0 = time.process_time()
        mass = rho * cellA
        nsub = 1
        while True:
            try:
                m = mass.copy()
                Etot = [np.zeros(nl), np.zeros(nl)]
                for _ in range(nsub):
                    Es = self._cap_update(m, vel, dt / nsub)
                    for a, b in zip(Etot, Es):
                        a += b
                break
            except DepartureError:
                nsub *= 2
                if nsub > 64:
                    raise
        self.cap_substeps += nsub - 1
        mass = m
        t1 = time.process_time()
        rho = mass / cellA
        mid = slice(K, n - K)
        zonal = self._zonal_plan(az[mid], 0.5 * dt)
        q = self._zonal(rho[mid], zonal)
        w = np.asarray(g.weights)[mid]
        mm = np.ascontiguousarray((q * w[:, None]).T)
        a = np.ascontiguousarray(am[:, K:n - K + 1])
        ns = max(1, int(np.ceil(dt * self._line_mid.lipschitz(a) / self.max_lipschitz)))
        self.substeps += ns - 1
        for _ in range(ns):
            mm = self._line_mid.sweep(mm, a, dt / ns, self.limiter)
        q = mm.T / w[:, None]
        rho[mid] = q
        for cap, E in zip(self.caps, Etot):
            self._hand_over(rho, cap, E)
        q = self._zonal(rho[mid], zonal)
        rho[mid] = q
        self.cap_time += t1 - t0
        self.outer_time += time.process_time() - t1
        return rho

    def _hand_over(self, rho, cap, E):
        """add the net cap-boundary exchange E (mass, > 0 into ring K) to ring K; where that
        would leave a ring-K cell negative, the deficit is taken back from the cap cell inside
        the face, and a negative cap cell is then filled from its ring (proportional scaling)."""
        K, cellA = self.K, self._cellA
        jK, jI = cap.rows[K], cap.rows[K - 1]
        mK = rho[jK] * cellA[jK] + E
        d = np.minimum(mK, 0.0)
        if d.any():
            sig = d < -1e-14 * np.abs(mK).max()  # report only deficits above round-off
            self.fix_count += int(sig.sum()); self.fix_mass += float(-d[sig].sum())
            mK -= d
            mI = rho[jI] * cellA[jI] + d
            if mI.min() < 0:
                neg = np.minimum(mI, 0.0).sum(); pos = np.maximum(mI, 0.0)
                if -neg > 1e-14 * pos.max():
                    self.ring_fix += 1
                ps = pos.sum()
                mI = pos * (1.0 + neg / ps) if ps > -neg else pos * 0.0
            rho[jI] = mI / cellA[jI]
        rho[jK] = mK / cellA[jK]

    def step(self, rho, t, dt):
        tm = t + 0.5 * dt
        az, am, _ = self._face_velocities(tm)
        return self.advance_with(rho, lambda x: self.velocity(tm, x), az, am, dt)
