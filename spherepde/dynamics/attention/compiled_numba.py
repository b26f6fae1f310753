"""The numba kernels of :mod:`.compiled` (its legacy exponential, the culled kernel that also
calls the cody-waite helpers of :mod:`.expsum`, and the Bessel synthesis).  Imported on first
use.  Module-level functions, not closures: numba caches them between processes (a closure over
another compiled function gets a new cache key in every process, so it was compiled anew in
each).  Note numba's cache does not see edits to a called function in another file
(expsum.py): clear ``__pycache__/*.nbi`` / ``*.nbc`` after editing one.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

#: exponential buffer of the cody-waite path in the culled kernel (≥ expsum.BLOCK)
TILE_BUF = 512


_inline = njit(fastmath=True, inline="always", cache=True)

@_inline
def exp_neg(t):
    # e^t for t ≤ 0, clamped at t = −64 (compiled.py's docstring)
    x = max(t, -64.0) * 0.015625 + 0.5
    p = 1.0 / 87178291200.0
    p = p * x + 1.0 / 6227020800.0
    p = p * x + 1.0 / 479001600.0
    p = p * x + 1.0 / 39916800.0
    p = p * x + 1.0 / 3628800.0
    p = p * x + 1.0 / 362880.0
    p = p * x + 1.0 / 40320.0
    p = p * x + 1.0 / 5040.0
    p = p * x + 1.0 / 720.0
    p = p * x + 1.0 / 120.0
    p = p * x + 1.0 / 24.0
    p = p * x + 1.0 / 6.0
    p = p * x + 0.5
    p = p * x + 1.0
    p = p * x + 1.0
    e = p * 0.6065306597126334  # e^{−1/2}
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    e = e * e
    return e * e

@_inline
def row3(i, zc, y0, y1, y2, lw, num, den, mx):
    """Target row i against all sources (d = 3): the two passes, written to num/den/mx."""
    a0, a1, a2 = zc[i, 0], zc[i, 1], zc[i, 2]
    M = -np.inf
    for j in range(y0.shape[0]):
        M = max(M, a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + lw[j])
    s0 = s1 = s2 = s3 = 0.0
    for j in range(y0.shape[0]):
        e = exp_neg(a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + (lw[j] - M))
        s0 += e * y0[j]
        s1 += e * y1[j]
        s2 += e * y2[j]
        s3 += e
    num[i, 0], num[i, 1], num[i, 2], den[i], mx[i] = s0, s1, s2, s3, M

@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def sums3(zc, y0, y1, y2, lw, num, den, mx):
    """d = 3, all sources: num (n, 3), den (n,), mx (n,) written."""
    for i in prange(zc.shape[0]):
        row3(i, zc, y0, y1, y2, lw, num, den, mx)

@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def sums_any(zc, yT, lw, num, den, mx):
    """any d: yT (d, m)."""
    d, m = yT.shape
    for i in prange(zc.shape[0]):
        lg = np.empty(m)
        for j in range(m):
            lg[j] = lw[j]
        for k in range(d):
            a = zc[i, k]
            for j in range(m):
                lg[j] += a * yT[k, j]
        M = -np.inf
        for j in range(m):
            M = max(M, lg[j])
        s = 0.0
        for j in range(m):
            lg[j] = exp_neg(lg[j] - M)
            s += lg[j]
        for k in range(d):
            acc = 0.0
            for j in range(m):
                acc += lg[j] * yT[k, j]
            num[i, k] = acc
        den[i], mx[i] = s, M

try:
    from spherepde.dynamics.attention.expsum import range_max as cw_max
    from spherepde.dynamics.attention.expsum import range_sums as cw_sums
    from spherepde.dynamics.attention.expsum import row3 as cw_row3
except Exception:  # noqa: BLE001 - never called then (cw is False): stand-ins of the same types
    @njit(cache=True)
    def cw_row3(i, zc, y0, y1, y2, lw, num, den, mx, e, acc):
        return None

    @njit(cache=True)
    def cw_max(a0, a1, a2, y0, y1, y2, lw, lo, hi, M):
        return M

    @njit(cache=True)
    def cw_sums(a0, a1, a2, y0, y1, y2, lw, M, lo, hi, e, acc):
        return None


@njit(cache=True, nogil=True)
def kd_order(p, size):
    """geometry.kd_tiles compiled (the same order and tiles): (order, starts)."""
    n, k = p.shape
    order = np.arange(n)
    if n == 0:
        return order, np.zeros(1, np.int64)
    size = max(1, size)
    cuts = np.empty(n + 1, np.int64)  # tile starts, in any order
    ncut = 0
    stack = np.empty((2 * (n // size + 2) + 64, 2), np.int64)
    stack[0, 0], stack[0, 1] = 0, n
    top = 1
    while top > 0:
        top -= 1
        lo, hi = stack[top, 0], stack[top, 1]
        if hi - lo <= size:
            cuts[ncut] = lo
            ncut += 1
            continue
        best, ax = -1.0, 0
        for c in range(k):
            mn, mxv = np.inf, -np.inf
            for j in range(lo, hi):
                v = p[order[j], c]
                mn = min(mn, v)
                mxv = max(mxv, v)
            if mxv - mn > best:
                best, ax = mxv - mn, c
        seg = order[lo:hi].copy()
        key = np.empty(hi - lo)
        for j in range(hi - lo):
            key[j] = p[seg[j], ax]
        idx = np.argsort(key, kind="mergesort")
        for j in range(hi - lo):
            order[lo + j] = seg[idx[j]]
        mid = lo + (hi - lo) // 2
        stack[top, 0], stack[top, 1] = mid, hi
        stack[top + 1, 0], stack[top + 1, 1] = lo, mid
        top += 2
    starts = np.empty(ncut + 1, np.int64)
    starts[:ncut] = np.sort(cuts[:ncut])
    starts[ncut] = n
    return order, starts


#: a culled row on the cody-waite path shifts its logits by the kept tiles' bound on their
#: maximum when it lies within this of the lower bound lb (e^{−SHIFT_SLACK} stays far above the
#: exponential's flush at e^{−708}: the terms near the maximum keep their relative accuracy)
SHIFT_SLACK = 64.0
#: bins of the cumulative culling (:func:`cull_budget`), over CUM_SPAN below ln tol
CUM_BINS = 64
CUM_SPAN = 16.0


@njit(cache=True, nogil=True, inline="always")
def cull_budget(bq, blk, starts, lscale, lb, lntol, budget, ebin, cnt, keep):
    """keep[q] for the target's tiles q (tile t = blk[q], a bound bq[q] on each of its terms'
    logits): with T_q = e^{bq[q] + lscale[t] − lb} a bound on the tile's total relative to
    e^{lb}, skip the tiles with the smallest T_q while their bounds sum to ≤ ``budget``.  The
    T_q fall into CUM_BINS bins of width CUM_SPAN/CUM_BINS below e^{lntol} (everything lower in
    the first), each counted as its bin's upper edge (ebin); the tiles of the longest prefix of
    bins whose total stays within the budget are skipped, the others kept (T_q ≥ e^{lntol}
    always).  ``keep`` holds the rule bq ≥ lb − cut on entry (its skipped total is within the
    budget too); it is replaced only when this rule keeps fewer sources."""
    nb = ebin.shape[0]
    h = CUM_SPAN / nb
    base = lntol - CUM_SPAN
    for k in range(nb):
        cnt[k] = 0.0
    for q in range(bq.shape[0]):
        v = bq[q] + lscale[blk[q]] - lb
        if v < lntol:
            cnt[min(int(math.floor((v - base) / h)) if v > base else 0, nb - 1)] += 1.0
    tot = 0.0
    kmax = -1
    for k in range(nb):
        tot += cnt[k] * ebin[k]
        if tot > budget:
            break
        kmax = k
    if kmax < 0:
        return
    n_old = n_new = 0
    for q in range(bq.shape[0]):
        t = blk[q]
        v = bq[q] + lscale[t] - lb
        k = min(int(math.floor((v - base) / h)) if v > base else 0, nb - 1)
        size = starts[t + 1] - starts[t]
        if keep[q]:
            n_old += size
        if not (v < lntol and k <= kmax):
            n_new += size
    if n_new >= n_old:
        return
    for q in range(bq.shape[0]):
        v = bq[q] + lscale[blk[q]] - lb
        k = min(int(math.floor((v - base) / h)) if v > base else 0, nb - 1)
        keep[q] = not (v < lntol and k <= kmax)


#: absolute margin on the cosine of a tile bound (compiled.py: ``cos(max(α − r, 0))`` by the
#: addition formula, whose rounding near α = 0 or π stays below 2e-8)
COS_MARGIN = 1e-7


@njit(cache=True, nogil=True, inline="always")
def block_tiles(k0, k1, torder, zc, yrep, lrep, cen, rad, cosr, sinr, bmax, lbx, cut, blk, cand):
    """The tiles among ``cand`` that can matter to any of the targets torder[k0:k1] (into blk)
    and a lower bound LB on each one's row maximum (by the candidates' representatives): returns
    (their number, LB).  ``cand`` holds tile indices (all of them, or those of a larger block
    of targets: a part of it needs no tile the whole did not)."""
    # the block: mean direction c, angular radius rb, smallest/largest |βz|
    c0 = c1 = c2 = 0.0
    zmin, zmax = np.inf, 0.0
    for k in range(k0, k1):
        i = torder[k]
        zeta = math.sqrt(zc[i, 0] ** 2 + zc[i, 1] ** 2 + zc[i, 2] ** 2)
        inv = 1.0 / max(zeta, 1e-300)
        c0 += zc[i, 0] * inv
        c1 += zc[i, 1] * inv
        c2 += zc[i, 2] * inv
        zmin, zmax = min(zmin, zeta), max(zmax, zeta)
    inv = 1.0 / max(math.sqrt(c0 * c0 + c1 * c1 + c2 * c2), 1e-300)
    c0, c1, c2 = c0 * inv, c1 * inv, c2 * inv
    rb = 0.0
    for k in range(k0, k1):
        i = torder[k]
        zeta = max(math.sqrt(zc[i, 0] ** 2 + zc[i, 1] ** 2 + zc[i, 2] ** 2), 1e-300)
        ct = (zc[i, 0] * c0 + zc[i, 1] * c1 + zc[i, 2] * c2) / zeta
        rb = max(rb, math.acos(min(1.0, max(-1.0, ct))))
    rb = rb * (1.0 + 1e-12) + 1e-15
    # a lower bound on every target's row maximum (through the representatives) ...
    # (cosines of sums and differences of angles by the addition formulas, COS_MARGIN on the side
    # that keeps each bound a bound, as in sums3_culled's per-target bounds)
    crb, srb = math.cos(rb), math.sin(rb)
    LB = -np.inf
    for t in cand:
        # cos(min(α + rb, π)), α = ∠(c, rep_t)
        ct = c0 * yrep[t, 0] + c1 * yrep[t, 1] + c2 * yrep[t, 2]
        sa = math.sqrt(max((1.0 - ct) * (1.0 + ct), 0.0))
        cc = (ct * crb - sa * srb if ct > -crb else -1.0) - COS_MARGIN
        LB = max(LB, (zmin if cc >= 0.0 else zmax) * cc + lrep[t])
    if lbx.shape[0] > 0:  # the caller's lower bounds, the block's smallest
        lbmin = np.inf
        for k in range(k0, k1):
            lbmin = min(lbmin, lbx[torder[k]])
        LB = max(LB, lbmin)
    # ... and the tiles that can matter to any target of the block
    nkb = 0
    for t in cand:
        # cos(max(α − r, 0)), α = ∠(c, c_t), r = r_t + rb: 1 if α ≤ r
        ct = c0 * cen[t, 0] + c1 * cen[t, 1] + c2 * cen[t, 2]
        cr = cosr[t] * crb - sinr[t] * srb
        if rad[t] + rb >= math.pi or ct >= cr:
            cc = 1.0
        else:
            sa = math.sqrt(max((1.0 - ct) * (1.0 + ct), 0.0))
            cc = ct * cr + sa * (sinr[t] * crb + cosr[t] * srb) + COS_MARGIN
        if (zmax if cc >= 0.0 else zmin) * cc + bmax[t] >= LB - cut:
            blk[nkb] = t
            nkb += 1
    return nkb, LB


@njit(cache=True, nogil=True, inline="always")
def select_groups(tin, starts, gl_off, g_t0, g_t1, g_rad, rz, nT, rho_p, Rp, cost, gsel, gp):
    """The source groups a target block expands (sums3_culled): from the largest groups down,
    each group whose tiles are all in the block's list (``tin``, not yet taken) and whose
    ρ = rz·r_g (rz: the block's radius in z, r_g: the group's in y) allows a degree p ≤ pmax
    (``rho_p[p]`` the largest ρ of degree p) is taken when its cost S·(1 + c_m R) + T·(1 + c_t R)
    (S sources, T targets, R = Rp[p] terms) is ≤ ``cost[2]`` times the direct T·S.  Its tiles
    leave ``tin``; gsel[k], gp[k] = the group and its degree.  Returns the number taken."""
    ng = 0
    for lev in range(gl_off.shape[0] - 2, -1, -1):
        for g in range(gl_off[lev], gl_off[lev + 1]):
            rho = rz * g_rad[g]
            if rho > rho_p[rho_p.shape[0] - 1]:
                continue
            every = True
            for t in range(g_t0[g], g_t1[g]):
                if not tin[t]:
                    every = False
                    break
            if not every:
                continue
            p = 0
            while rho_p[p] < rho:
                p += 1
            S = float(starts[g_t1[g]] - starts[g_t0[g]])
            R = float(Rp[p])
            if S * (1.0 + cost[0] * R) + nT * (1.0 + cost[1] * R) > cost[2] * nT * S:
                continue
            for t in range(g_t0[g], g_t1[g]):
                tin[t] = False
            gsel[ng], gp[ng] = g, p
            ng += 1
    return ng


#: sources per chunk of :func:`group_moments` (their monomials, R × CHUNK, stay in L2)
CHUNK = 128


@njit(cache=True, nogil=True, inline="always")
def monomials(parent, var, R, d, out):
    """out[r, j] = d[:, j]^{α_r} (r < R) for the columns j of d (3, nc): row by row, each row a
    vectorised loop over the columns (α_r = α_{parent[r]} + e_{var[r]}; out[0] given)."""
    for r in range(1, R):
        pr, vr = parent[r], var[r]
        for j in range(d.shape[1]):
            out[r, j] = out[pr, j] * d[vr, j]


@njit(cache=True, nogil=True, inline="always")
def group_moments(z0, z1, z2, lo, hi, c0, c1, c2, y0, y1, y2, lw, parent, var, invf, R, mono,
                  d, out):
    """The moments of sources [lo, hi) about their centre c seen from z: with
    A = max_j ⟨z, y_j⟩ + lw_j and a_j = e^{⟨z, y_j⟩ + lw_j − A}, d_j = y_j − c,
    out[f, r] = Σ_j a_j d_j^{α_r}/α_r! · (y_j0, y_j1, y_j2, 1)[f] for the first R multi-indices
    (graded), in chunks of CHUNK sources (buffers mono (≥ R, CHUNK), d (3, CHUNK)).  Returns A."""
    A = -np.inf
    for j in range(lo, hi):
        A = max(A, z0 * y0[j] + z1 * y1[j] + z2 * y2[j] + lw[j])
    for f in range(4):
        for r in range(R):
            out[f, r] = 0.0
    for b in range(lo, hi, CHUNK):
        nc = min(CHUNK, hi - b)
        dc = d[:, :nc]
        mc = mono[:, :nc]
        for j in range(nc):
            q = b + j
            mc[0, j] = math.exp(z0 * y0[q] + z1 * y1[q] + z2 * y2[q] + lw[q] - A)
            dc[0, j], dc[1, j], dc[2, j] = y0[q] - c0, y1[q] - c1, y2[q] - c2
        monomials(parent, var, R, dc, mc)
        w0, w1, w2 = y0[b:b + nc], y1[b:b + nc], y2[b:b + nc]
        for r in range(R):
            s0 = s1 = s2 = s3 = 0.0
            for j in range(nc):
                v = mc[r, j]
                s0 += v * w0[j]
                s1 += v * w1[j]
                s2 += v * w2[j]
                s3 += v
            out[0, r] += s0 * invf[r]
            out[1, r] += s1 * invf[r]
            out[2, r] += s2 * invf[r]
            out[3, r] += s3 * invf[r]
    return A


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def expand_pass(zc, y0, y1, y2, lw, cen, rad, cosr, sinr, bmax, yrep, lrep, cut, torder, tstarts,
                sbs, lbx, starts, gl_off, g_t0, g_t1, g_cen, g_rad, rho_p, Rp, parent, var, invf, cost,
                ptaken, psbs, pblk, pnk, taken, has, gacc, gU, gL, oblk, onk):
    """The expansions of sums3_culled: the target blocks in super-blocks of ``sbs`` (super-block
    s = blocks s·sbs … (s+1)·sbs − 1, neighbours in the k-d order), each with its centre z_c and
    radius r_z in z.  A super-block takes the source groups :func:`select_groups` chooses among
    the tiles that can matter to it and that its parent (super-block s·sbs // psbs of the coarser
    level's ``ptaken``, none when that is empty) did not take; taken[s] = the parent's tiles and
    its own.  The tiles that can matter are sought among the parent's
    (pblk[ps, :pnk[ps]]; all when pnk is empty) and written to oblk[s, :onk[s]] for the next
    level.  Their moments about z_c (:func:`group_moments`); for each of its targets i = z_c + d:
    U ≥ every logit of the groups' sources (max_k e_k + |d| r_g), L ≤ their largest (max_k
    e_k − |d| r_g; the source that attains A_k has a logit ≥ it), e_k = A_k + ⟨d, c_g⟩, and the
    groups' four sums times e^{−U} (Σ_k e^{e_k − U} Σ_r d^{α_r} moments_k[·, r]) join gU[i],
    gL[i] (max) and gacc[i] (rescaled to the larger U) where has[i], else start them."""
    nt = cen.shape[0]
    nb = tstarts.shape[0] - 1
    alltiles = np.arange(nt)
    for s in prange(taken.shape[0]):
        k0, k1 = tstarts[s * sbs], tstarts[min((s + 1) * sbs, nb)]
        ps = (s * sbs) // psbs
        for t in range(nt):
            taken[s, t] = ptaken[ps, t] if ptaken.shape[0] > 0 else False
        blk = np.empty(nt, np.int64)
        cand = pblk[ps, :pnk[ps]] if pnk.shape[0] > 0 else alltiles
        nkb, LB = block_tiles(k0, k1, torder, zc, yrep, lrep, cen, rad, cosr, sinr, bmax, lbx, cut,
                              blk, cand)
        onk[s] = nkb
        for q in range(nkb):
            oblk[s, q] = blk[q]
        if nkb == 0 or k1 <= k0:
            continue
        nT = k1 - k0
        zb0 = zb1 = zb2 = 0.0
        for k in range(k0, k1):
            i = torder[k]
            zb0 += zc[i, 0]
            zb1 += zc[i, 1]
            zb2 += zc[i, 2]
        zb0, zb1, zb2 = zb0 / nT, zb1 / nT, zb2 / nT
        rz = 0.0
        for k in range(k0, k1):
            i = torder[k]
            rz = max(rz, (zc[i, 0] - zb0) ** 2 + (zc[i, 1] - zb1) ** 2 + (zc[i, 2] - zb2) ** 2)
        rz = math.sqrt(rz) * (1.0 + 1e-12) + 1e-300
        tin = np.zeros(nt, np.bool_)
        for q in range(nkb):
            tin[blk[q]] = not taken[s, blk[q]]
        gsel = np.empty(nt, np.int64)
        gp = np.empty(nt, np.int64)
        ng = select_groups(tin, starts, gl_off, g_t0, g_t1, g_rad, rz, float(nT), rho_p, Rp, cost,
                           gsel, gp)
        if ng == 0:
            continue
        Rb = 1
        for k in range(ng):
            g = gsel[k]
            Rb = max(Rb, Rp[gp[k]])
            for t in range(g_t0[g], g_t1[g]):
                taken[s, t] = True
        gA = np.empty(ng)
        gmom = np.empty((ng, 4, Rb))
        mono = np.empty((Rb, CHUNK))
        dbuf = np.empty((3, CHUNK))
        for k in range(ng):
            g = gsel[k]
            gA[k] = group_moments(zb0, zb1, zb2, starts[g_t0[g]], starts[g_t1[g]], g_cen[g, 0],
                                  g_cen[g, 1], g_cen[g, 2], y0, y1, y2, lw, parent, var, invf,
                                  Rp[gp[k]], mono, dbuf, gmom[k])
        # the targets: d_i = z_i − z_c, their monomials (R × T), the bounds U_i ≥ every logit of
        # the groups' sources and L_i ≤ the largest (the source that attains A_k has a logit
        # ≥ e_ki − |d_i| r_g, e_ki = A_k + ⟨d_i, c_g⟩), then the groups' sums
        dt = np.empty((3, nT))
        dn = np.empty(nT)
        for q in range(nT):
            i = torder[k0 + q]
            dt[0, q], dt[1, q], dt[2, q] = zc[i, 0] - zb0, zc[i, 1] - zb1, zc[i, 2] - zb2
            dn[q] = math.sqrt(dt[0, q] ** 2 + dt[1, q] ** 2 + dt[2, q] ** 2)
        tmT = np.empty((Rb, nT))
        tmT[0, :] = 1.0
        monomials(parent, var, Rb, dt, tmT)
        tm = np.ascontiguousarray(tmT.T)  # (T, R): each target's terms contiguous
        eg = np.empty((ng, nT))
        U = np.full(nT, -np.inf)
        L = np.full(nT, -np.inf)
        for k in range(ng):
            g = gsel[k]
            for q in range(nT):
                e = gA[k] + dt[0, q] * g_cen[g, 0] + dt[1, q] * g_cen[g, 1] + dt[2, q] * g_cen[g, 2]
                eg[k, q] = e
                U[q] = max(U[q], e + dn[q] * g_rad[g])
                L[q] = max(L[q], e - dn[q] * g_rad[g])
        acc = np.zeros((4, nT))
        for k in range(ng):
            R = Rp[gp[k]]
            g0, g1, g2, g3 = gmom[k, 0], gmom[k, 1], gmom[k, 2], gmom[k, 3]
            for q in range(nT):
                t = tm[q]
                s0 = s1 = s2 = s3 = 0.0
                for r in range(R):
                    v = t[r]
                    s0 += v * g0[r]
                    s1 += v * g1[r]
                    s2 += v * g2[r]
                    s3 += v * g3[r]
                f = math.exp(eg[k, q] - U[q])
                acc[0, q] += f * s0
                acc[1, q] += f * s1
                acc[2, q] += f * s2
                acc[3, q] += f * s3
        for q in range(nT):
            i = torder[k0 + q]
            if has[i]:
                V = max(U[q], gU[i])
                fo, fn = math.exp(gU[i] - V), math.exp(U[q] - V)
                for c in range(4):
                    gacc[i, c] = gacc[i, c] * fo + acc[c, q] * fn
                gU[i], gL[i] = V, max(L[q], gL[i])
            else:
                has[i] = True
                gU[i], gL[i] = U[q], L[q]
                for c in range(4):
                    gacc[i, c] = acc[c, q]


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def sums3_culled(zc, y0, y1, y2, lw, starts, cen, rad, cosr, sinr, bmax, yrep, lrep, cut, torder,
                 tstarts, full, cw, runs, num, den, mx, kept, lscale, lntol, shift_by_bound, lbx,
                 taken, has, gacc, gU, gL):
    """d = 3, sources sorted by tile (tile t = starts[t]:starts[t+1]), targets grouped into
    blocks (block b = torder[tstarts[b]:tstarts[b+1]]); kept[i] = pairs summed for i;
    ``cw``: the kept tiles summed by the cody-waite path's helpers (else the legacy loops);
    ``runs``: kept tiles that follow each other in the source order are summed as one range
    (else tile by tile).  ``lscale`` (nt,) empty: a tile is kept when its bound on a term
    is ≥ lb − cut; else skipped by the budget of :func:`cull_budget`: e^{bound + lscale[t]}
    bounds the tile's total (lscale = ln n_t, or ln(m/T) with bmax by tile mass), and the
    smallest tiles are skipped while their bounds sum to ≤ e^{lntol}·e^{lb} (what the block's
    first level skipped counted in).  ``shift_by_bound`` (cody-waite path): a culled row's
    terms are e^{ℓ − M} with M the kept tiles' largest bound on a logit (within SHIFT_SLACK of
    lb ≤ max ℓ, else the maximum itself, by a pass of its own), not the row's maximum: one pass
    over the kept sources instead of two; mx[i] = that M.  ``lbx`` (n,) or empty: the caller's
    lower bounds on log Σ_j e^{ℓ_ij} (of a larger sum the row is a part of), which replace lb
    where larger (a row may then keep no tile: num = den = 0, mx = −inf).  ``taken`` (nsb, nt)
    or (0, 0), ``has``, ``gacc``, ``gU``, ``gL``: what :func:`expand_pass` wrote at its finest
    level (block b skips the tiles taken[b]; target i adds gacc[i]·e^{gU[i] − M} where
    has[i]); kept[i] counts the terms summed one by one."""
    nt = starts.shape[0] - 1
    m = y0.shape[0]
    alltiles = np.arange(nt)
    cumul = lscale.shape[0] == nt
    ebin = np.empty(CUM_BINS)  # the bins' upper edges, relative to e^{lb}
    for k in range(CUM_BINS):
        ebin[k] = math.exp(lntol - CUM_SPAN + (k + 1) * (CUM_SPAN / CUM_BINS))
    for b in prange(tstarts.shape[0] - 1):
        ebuf = np.empty(max(TILE_BUF, y0.shape[0]))  # cw_row3 keeps a row's logits in it
        acc = np.empty(4)
        cnt = np.empty(CUM_BINS)
        blk = np.empty(nt, np.int64)
        nkb, LB = block_tiles(tstarts[b], tstarts[b + 1], torder, zc, yrep, lrep, cen, rad, cosr,
                              sinr, bmax, lbx, cut, blk, alltiles)
        keep = np.empty(nkb, np.bool_)
        bq = np.empty(nkb)
        rlo = np.empty(nkb, np.int64)
        rhi = np.empty(nkb, np.int64)
        # what the first level skipped: each source < (tol/m)·e^{LB} ≤ (tol/m)·e^{lb_i}
        inblk = 0
        for q in range(nkb):
            inblk += starts[blk[q] + 1] - starts[blk[q]]
        budget = math.exp(lntol) * (inblk / m) if m > 0 else 0.0
        if taken.shape[0] > 0:  # without the tiles expanded for it (expand_pass)
            nk2 = 0
            for q in range(nkb):
                if not taken[b, blk[q]]:
                    blk[nk2] = blk[q]
                    nk2 += 1
            nkb = nk2
        # the block's tiles' data side by side (centre, cos r, sin r, largest log-weight, the
        # representative and its log-weight), one row per field, read
        # contiguously per target instead of gathered through blk
        kt = np.empty((10, nkb))
        for q in range(nkb):
            t = blk[q]
            kt[0, q], kt[1, q], kt[2, q] = cen[t, 0], cen[t, 1], cen[t, 2]
            kt[3, q], kt[4, q], kt[5, q] = cosr[t], sinr[t], bmax[t]
            kt[6, q], kt[7, q], kt[8, q], kt[9, q] = yrep[t, 0], yrep[t, 1], yrep[t, 2], lrep[t]
        for k in range(tstarts[b], tstarts[b + 1]):
            i = torder[k]
            a0, a1, a2 = zc[i, 0], zc[i, 1], zc[i, 2]
            zeta = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
            inv = 1.0 / max(zeta, 1e-300)
            u0, u1, u2 = a0 * inv, a1 * inv, a2 * inv
            lb = LB if lbx.shape[0] == 0 else max(LB, lbx[i])
            # the expanded groups' bounds (a flag, not −inf: fastmath assumes no infinities)
            grp = taken.shape[0] > 0 and has[i]
            Ug = gU[i] if grp else lb
            if grp:
                lb = max(lb, gL[i])
            for q in range(nkb):
                lb = max(lb, a0 * kt[6, q] + a1 * kt[7, q] + a2 * kt[8, q] + kt[9, q])
            npair = 0
            nrun = 0
            for q in range(nkb):
                # cos(max(α − r_t, 0)), α = ∠(u, c_t): 1 if α ≤ r_t, else cos α cos r + sin α sin r
                ct = u0 * kt[0, q] + u1 * kt[1, q] + u2 * kt[2, q]
                sa = math.sqrt(max((1.0 - ct) * (1.0 + ct), 0.0))
                cc = 1.0 if ct >= kt[3, q] else ct * kt[3, q] + sa * kt[4, q]
                bq[q] = zeta * (cc + COS_MARGIN) + kt[5, q]
                keep[q] = bq[q] >= lb - cut
            if cumul:
                cull_budget(bq, blk, starts, lscale, lb, lntol, budget, ebin, cnt, keep)
            Mb = -np.inf  # the kept tiles' largest bound on a logit: ≥ the row's maximum
            for q in range(nkb):
                t = blk[q]
                if keep[q]:
                    lo, hi = starts[t], starts[t + 1]
                    npair += hi - lo
                    Mb = max(Mb, bq[q])
                    if runs and nrun > 0 and rhi[nrun - 1] == lo:
                        rhi[nrun - 1] = hi
                    else:
                        rlo[nrun] = lo
                        rhi[nrun] = hi
                        nrun += 1
            if not grp and npair > full * y0.shape[0]:  # most sources kept: the plain loops are faster
                if cw:
                    cw_row3(i, zc, y0, y1, y2, lw, num, den, mx, ebuf, acc)
                else:
                    row3(i, zc, y0, y1, y2, lw, num, den, mx)
                kept[i] = y0.shape[0]
                continue
            if cw:
                if shift_by_bound and Mb - lb <= SHIFT_SLACK:
                    M = Mb  # no pass for the maximum: the terms are e^{ℓ − M} ≤ 1 all the same
                else:
                    M = -np.inf
                    for q in range(nrun):
                        M = cw_max(a0, a1, a2, y0, y1, y2, lw, rlo[q], rhi[q], M)
                if grp:
                    M = max(M, Ug)
                acc[:] = 0.0
                for q in range(nrun):
                    cw_sums(a0, a1, a2, y0, y1, y2, lw, M, rlo[q], rhi[q], ebuf, acc)
                if grp:
                    f = math.exp(Ug - M)
                    for q in range(4):
                        acc[q] += f * gacc[i, q]
                num[i, 0], num[i, 1], num[i, 2], den[i], mx[i] = acc[0], acc[1], acc[2], acc[3], M
                kept[i] = npair
                continue
            M = -np.inf
            for q in range(nrun):
                for j in range(rlo[q], rhi[q]):
                    M = max(M, a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + lw[j])
            if grp:
                M = max(M, Ug)
            s0 = s1 = s2 = s3 = 0.0
            for q in range(nrun):
                for j in range(rlo[q], rhi[q]):
                    e = exp_neg(a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + (lw[j] - M))
                    s0 += e * y0[j]
                    s1 += e * y1[j]
                    s2 += e * y2[j]
                    s3 += e
            if grp:
                f = math.exp(Ug - M)
                s0, s1, s2, s3 = (s0 + f * gacc[i, 0], s1 + f * gacc[i, 1], s2 + f * gacc[i, 2],
                                  s3 + f * gacc[i, 3])
            num[i, 0], num[i, 1], num[i, 2], den[i], mx[i] = s0, s1, s2, s3, M
            kept[i] = npair

@njit(cache=True, nogil=True, inline="always")
def bessel_table(kap, b0, nb, L, N, Ib, rho, inv):
    """Ib (L + 1, BS)[l, i] = 4π ĩ_l(κ) for the targets b0 … b0 + nb − 1 (κ = kap; padding
    columns at κ = 1): the ratios ĩ_l/ĩ_{l−1} by Miller's backward recurrence from degree N,
    ĩ_l/ĩ_{l−1} = 1/((2l+1)/κ + ĩ_{l+1}/ĩ_l), times 4π ĩ_0(κ), 4π ĩ_0 = 4π(1 − e^{−2κ})/(2κ).
    rho, inv (BS,): scratch, rho zero and inv one on entry.  Inlined: the caller's fastmath."""
    BS = Ib.shape[1]
    for i in range(nb):
        inv[i] = 1.0 / kap[b0 + i]
    for l in range(N, 0, -1):
        c2 = 2.0 * l + 1.0
        for i in range(BS):
            rho[i] = 1.0 / (c2 * inv[i] + rho[i])
        if l <= L:
            for i in range(BS):
                Ib[l, i] = rho[i]
    for i in range(BS):
        k = kap[b0 + i] if i < nb else 1.0
        Ib[0, i] = 4.0 * math.pi * (-math.expm1(-2.0 * k) / (2.0 * k))
    for l in range(1, L + 1):
        for i in range(BS):
            Ib[l, i] *= Ib[l - 1, i]


@njit(cache=True, nogil=True, inline="always")
def latitudes(mu, b0, nb, x, s):
    """x, s (BS,) = μ and (1 − μ²)^{1/2} of the targets b0 … b0 + nb − 1 (padding: μ = 0)."""
    for i in range(x.size):
        xx = mu[b0 + i] if i < nb else 0.0
        x[i] = xx
        s[i] = math.sqrt(max((1.0 - xx) * (1.0 + xx), 0.0))


@njit(cache=True, nogil=True, inline="always")
def block_degree(Lt, b0, nb, L):
    """The largest degree min(Lt[i], L) of the targets b0 … b0 + nb − 1; L when Lt is empty."""
    if Lt.shape[0] == 0:
        return L
    Lb = 0
    for i in range(nb):
        Lb = max(Lb, min(Lt[b0 + i], L))
    return Lb


@njit(cache=True, nogil=True, inline="always")
def legendre_terms(m, Lb, raT, rbT, ar, ai, x, ymm, Ib, p1, p2, q, qo, split):
    """Order m of the any-B synthesis for BS targets at μ = x: q = the l = m term, qo = 0 when
    ``split`` (else qo is q itself: one sum), then the Legendre recurrence
    p_l = a_ml (x p_{l−1} − b_ml p_{l−2}) from p_m = y_mm (ymm), p_{m−1} = 0, and for
    l = m + 1 … Lb the terms Ib[l]·p_l·(a_lm of the four fields, real and imaginary) added into
    q (l − m even) or qo (odd).  Inlined: the caller's fastmath."""
    for i in range(x.size):
        p2[i] = 0.0
        p1[i] = ymm[i]
        w = Ib[m, i] * ymm[i]
        for f in range(4):
            q[2 * f, i] = w * ar[m, m, f]
            q[2 * f + 1, i] = w * ai[m, m, f]
    if split:
        for i in range(x.size):
            for k in range(8):
                qo[k, i] = 0.0
    for l in range(m + 1, Lb + 1):
        a_, b_ = raT[m, l], rbT[m, l]
        c0r, c0i, c1r, c1i = ar[m, l, 0], ai[m, l, 0], ar[m, l, 1], ai[m, l, 1]
        c2r, c2i, c3r, c3i = ar[m, l, 2], ai[m, l, 2], ar[m, l, 3], ai[m, l, 3]
        qq = q if (l - m) % 2 == 0 else qo
        for i in range(x.size):
            p = a_ * (x[i] * p1[i] - b_ * p2[i])
            p2[i] = p1[i]
            p1[i] = p
            w = Ib[l, i] * p
            qq[0, i] += w * c0r
            qq[1, i] += w * c0i
            qq[2, i] += w * c1r
            qq[3, i] += w * c1i
            qq[4, i] += w * c2r
            qq[5, i] += w * c2i
            qq[6, i] += w * c3r
            qq[7, i] += w * c3i


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def bessel_synthesis(mu, lon, kap, ar, ai, raT, rbT, rc, L, N, out, Lt, mir):
    """out[f, i] = Σ_{l ≤ L} 4π ĩ_l(κ_i) Σ_{m} y_lm(μ_i) Re(a_f,ml e^{imλ_i}) (real-field
    synthesis with per-target scaled Bessel weights; module :func:`bessel_sums`).  ``Lt`` (n,)
    or empty: a degree per target (≤ L); a block of targets sums to its largest.  ``mir``
    (4, n) or (4, 0): if (4, n), also the same sums at the mirror image (μ → −μ, same λ and κ)
    of each target, mir[f, i]: y_lm(−μ) = (−1)^{l+m} y_lm(μ), so the terms with l + m even
    and odd are summed apart (E, O) and out = E + O, mir = E − O: one recurrence for both."""
    BS = 32
    n = mu.size
    y0 = 1.0 / math.sqrt(4.0 * math.pi)
    both = mir.shape[1] == n and n > 0
    for bi in prange((n + BS - 1) // BS):
        b0 = bi * BS
        nb = min(BS, n - b0)
        Ib = np.empty((L + 1, BS))
        rho, inv = np.zeros(BS), np.ones(BS)
        x, s = np.zeros(BS), np.zeros(BS)
        er, ei, cl, sl = np.ones(BS), np.zeros(BS), np.ones(BS), np.zeros(BS)
        ymm, p1, p2 = np.full(BS, y0), np.empty(BS), np.empty(BS)
        q = np.empty((8, BS))
        qo = np.empty((8, BS)) if both else q  # the odd l + m (the same array: one sum)
        acc = np.zeros((4, BS))
        accm = np.zeros((4, BS)) if both else acc
        bessel_table(kap, b0, nb, L, N, Ib, rho, inv)
        latitudes(mu, b0, nb, x, s)
        for i in range(BS):
            lo = lon[b0 + i] if i < nb else 0.0
            cl[i], sl[i] = math.cos(lo), math.sin(lo)
        Lb = block_degree(Lt, b0, nb, L)
        for m in range(Lb + 1):
            if m > 0:
                big = 0.0
                for i in range(BS):
                    ymm[i] = rc[m] * s[i] * ymm[i]
                    t = er[i] * cl[i] - ei[i] * sl[i]
                    ei[i] = er[i] * sl[i] + ei[i] * cl[i]
                    er[i] = t
                    big = max(big, abs(ymm[i]))
                if big < 1e-290:  # y_mm underflows: every y_lm (l ≥ m) of these targets too
                    break
            # l − m odd into qo, even into q (qo is q itself without a mirror pair: one sum)
            legendre_terms(m, Lb, raT, rbT, ar, ai, x, ymm, Ib, p1, p2, q, qo, both)
            if both:
                for i in range(BS):
                    for f in range(4):
                        re = q[2 * f, i] * er[i] - q[2 * f + 1, i] * ei[i]
                        ro = qo[2 * f, i] * er[i] - qo[2 * f + 1, i] * ei[i]
                        acc[f, i] += re + ro
                        accm[f, i] += re - ro
            else:
                for i in range(BS):
                    for f in range(4):
                        acc[f, i] += q[2 * f, i] * er[i] - q[2 * f + 1, i] * ei[i]
        for i in range(nb):
            for f in range(4):
                out[f, b0 + i] = acc[f, i]
        if both:
            for i in range(nb):
                for f in range(4):
                    mir[f, b0 + i] = accm[f, i]


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def bessel_groups(mu, kap, ar, ai, raT, rbT, rc, L, N, Lt, start, rep, lon, sgn, out):
    """bessel_synthesis for targets in groups that share |μ| and κ (bitwise): group g (μ_g =
    mu[g] ≥ 0, κ_g = kap[g], degree Lt[g] if Lt is not empty) has the members
    start[g] … start[g+1] − 1, member k at longitude lon[k] and latitude sine sgn[k]·μ_g
    (sgn ±1), rep[k] = g.  The Legendre and Bessel factors depend on (|μ|, κ) alone and the
    longitude only enters through e^{imλ}: one recurrence per group, the terms with l + m even
    and odd summed apart (E, O, as bessel_synthesis with mirror pairs), then per member and
    order m Re((E ± O) e^{imλ}).  out (4, members).  Each block of BS groups alone: the same
    bits on any number of threads."""
    BS = 32
    n = mu.size
    y0 = 1.0 / math.sqrt(4.0 * math.pi)
    for bi in prange((n + BS - 1) // BS):
        b0 = bi * BS
        nb = min(BS, n - b0)
        j0 = start[b0]
        nm = start[b0 + nb] - j0
        Ib = np.empty((L + 1, BS))
        rho, inv = np.zeros(BS), np.ones(BS)
        x, s = np.zeros(BS), np.zeros(BS)
        ymm, p1, p2 = np.full(BS, y0), np.empty(BS), np.empty(BS)
        q = np.empty((8, BS))
        qo = np.empty((8, BS))
        er, ei, cl, sl = np.ones(nm), np.zeros(nm), np.empty(nm), np.empty(nm)
        loc = np.empty(nm, np.int64)
        acc = np.zeros((4, nm))
        for j in range(nm):
            lo = lon[j0 + j]
            cl[j], sl[j] = math.cos(lo), math.sin(lo)
            loc[j] = rep[j0 + j] - b0
        bessel_table(kap, b0, nb, L, N, Ib, rho, inv)
        latitudes(mu, b0, nb, x, s)
        Lb = block_degree(Lt, b0, nb, L)
        for m in range(Lb + 1):
            if m > 0:
                big = 0.0
                for i in range(BS):
                    ymm[i] = rc[m] * s[i] * ymm[i]
                    big = max(big, abs(ymm[i]))
                if big < 1e-290:  # y_mm underflows: every y_lm (l ≥ m) of these targets too
                    break
                for j in range(nm):
                    t = er[j] * cl[j] - ei[j] * sl[j]
                    ei[j] = er[j] * sl[j] + ei[j] * cl[j]
                    er[j] = t
            legendre_terms(m, Lb, raT, rbT, ar, ai, x, ymm, Ib, p1, p2, q, qo, True)
            for j in range(nm):
                i = loc[j]
                sg = sgn[j0 + j]
                for f in range(4):
                    re = q[2 * f, i] * er[j] - q[2 * f + 1, i] * ei[j]
                    ro = qo[2 * f, i] * er[j] - qo[2 * f + 1, i] * ei[j]
                    acc[f, j] += re + sg * ro
        for j in range(nm):
            for f in range(4):
                out[f, j0 + j] = acc[f, j]


@njit(parallel=True, fastmath=False, cache=True, nogil=True)
def data_degrees(kap, c, tail0, thr, L, N, deg, tail):
    """Per target i (κ_i = kap[i]): the smallest degree L_i ≤ L with
    T_i(L_i) = tail0 + Σ_{L_i < l ≤ L} 4π ĩ_l(κ_i)·c[l] ≤ thr (L_i = L if none), and tail[i] =
    T_i(L_i).  ĩ_l(κ) by the Miller recurrence of bessel_synthesis (from N down, the same
    operations); each target alone (the same bits on any number of threads)."""
    BS = 64
    n = kap.size
    for bi in prange((n + BS - 1) // BS):
        b0 = bi * BS
        nb = min(BS, n - b0)
        Ib = np.empty((L + 1, BS))
        rho, inv = np.zeros(BS), np.ones(BS)
        bessel_table(kap, b0, nb, L, N, Ib, rho, inv)
        for i in range(nb):
            t = tail0
            d = L
            if t <= thr:
                while d > 0:
                    tn = t + Ib[d, i] * c[d]
                    if tn > thr:
                        break
                    t = tn
                    d -= 1
            deg[b0 + i] = d
            tail[b0 + i] = t


@njit(cache=True, nogil=True, inline="always")
def _bound_sum(u0, u1, u2, k, cen, cosr, sinr, W, suffix, theta, cosb, sinb, max_tiles):
    """below_bound's sum for one direction u (unit) and κ = k, the tiles widened by an angle b
    (cos b, sin b; b = 0: cosb = 1, sinb = 0): Σ_t W_t e^{k(cos(max(∠(u, c_t) − r_t − b, 0)) − 1)}
    until it is known to lie below theta or not (below_bound's rule); −1 when that is not
    known after ``max_tiles`` tiles (> 0)."""
    nt = W.shape[0]
    s = 0.0
    for q in range(nt + 1):
        if s + suffix[q] < theta or q == nt or s >= theta:
            return s + suffix[q]
        if max_tiles > 0 and q == max_tiles:
            return -1.0
        ct = u0 * cen[q, 0] + u1 * cen[q, 1] + u2 * cen[q, 2]
        # cos R, sin R of R = r_t + b (R ≥ π: every angle is within R)
        cR = cosr[q] * cosb - sinr[q] * sinb
        sR = sinr[q] * cosb + cosr[q] * sinb
        if sR < 0.0 or ct >= cR:
            cc = 1.0
        else:
            cc = ct * cR + math.sqrt(max((1.0 - ct) * (1.0 + ct), 0.0)) * sR
        s += W[q] * math.exp(k * (min(cc + COS_MARGIN, 1.0) - 1.0))
    return s


@njit(parallel=True, cache=True, nogil=True)
def below_bound(u, kap, cen, cosr, sinr, W, suffix, theta, out, block, max_tiles):
    """An upper bound on Σ_j w_j e^{κ_i(⟨u_i, y_j⟩ − 1)} over unit sources y_j in tiles t (centre
    c_t, angular radius r_t, total weight W_t): Σ_t W_t e^{κ_i(cos(max(∠(u_i, c_t) − r_t, 0)) − 1)},
    summed only until it is known to lie below ``theta`` or not.  Tiles in decreasing W_t,
    suffix[q] = Σ_{t ≥ q} W_t (suffix[nt] = 0): each term is ≤ W_t, so after q tiles the bound is
    at most s + suffix[q].  out[i]: that bound where it is < theta (the sum so far plus the
    suffix), else a number ≥ theta.  ``block`` > 0: the targets are first taken in runs of that
    many (in their order), each run bounded at once (its centre, angular radius b and smallest
    κ — each term e^{κ(cc − 1)}, cc ≤ 1, falls with κ —: the tiles widened by b bound every
    target of the run), and a run whose bound is < theta
    gives it to each of its targets; the others are bounded one by one (``max_tiles`` > 0: out
    = −1 where that is not known after so many tiles, for the caller).  Each run alone: the
    same bits on any number of threads."""
    n = u.shape[0]
    bs = max(block, 1)
    for bi in prange((n + bs - 1) // bs):
        lo, hi = bi * bs, min(bi * bs + bs, n)
        if block > 0 and hi - lo > 1:
            c0 = c1 = c2 = 0.0
            kmin = np.inf
            for i in range(lo, hi):
                c0 += u[i, 0]
                c1 += u[i, 1]
                c2 += u[i, 2]
                kmin = min(kmin, kap[i])
            nrm = math.sqrt(c0 * c0 + c1 * c1 + c2 * c2)
            if nrm > 1e-300:
                c0, c1, c2 = c0 / nrm, c1 / nrm, c2 / nrm
                rb = 0.0
                for i in range(lo, hi):
                    ct = u[i, 0] * c0 + u[i, 1] * c1 + u[i, 2] * c2
                    rb = max(rb, math.acos(min(1.0, max(-1.0, ct))))
                # a little more than the farthest target: a bound after rounding
                rb = min(rb * (1.0 + 1e-12) + 1e-15, math.pi)
                sb = _bound_sum(c0, c1, c2, kmin, cen, cosr, sinr, W, suffix, theta,
                                math.cos(rb), math.sin(rb), 0)
                if sb < theta:
                    for i in range(lo, hi):
                        out[i] = sb
                    continue
        for i in range(lo, hi):
            out[i] = _bound_sum(u[i, 0], u[i, 1], u[i, 2], kap[i], cen, cosr, sinr, W, suffix,
                                theta, 1.0, 0.0, max_tiles)


@njit(parallel=True, cache=True, nogil=True)
def window_sums(u, kap, row, col, xyz, w, half, out):
    """out[i] = Σ w[a, b] e^{κ_i(⟨u_i, xyz[a, b]⟩ − 1)} over the rows a = row_i − half …
    row_i + half − 1 (those on the grid) and the columns b = col_i − half + 1 … col_i + half
    (mod nlon; at most nlon of them) of the cells of a lat–lon grid: part of the sum over all
    cells, each target alone (the same bits on any number of threads)."""
    nlat, nlon = w.shape
    nc = min(2 * half, nlon)
    for i in prange(u.shape[0]):
        u0, u1, u2, k = u[i, 0], u[i, 1], u[i, 2], kap[i]
        s = 0.0
        for a in range(max(row[i] - half, 0), min(row[i] + half, nlat)):
            for q in range(nc):
                b = (col[i] - half + 1 + q) % nlon
                s += w[a, b] * math.exp(k * (u0 * xyz[a, b, 0] + u1 * xyz[a, b, 1]
                                             + u2 * xyz[a, b, 2] - 1.0))
        out[i] = s
