"""Compiled (numba) backend of the FFSL–PPM sweeps of :mod:`spherepde.solvers.eulerian.ffsl`.

Same arguments, same results: every kernel repeats, cell by cell, the floating-point operations
of the numpy reference in :mod:`ffsl` / :mod:`ppm` in the same order (edge values, limiters,
departure points, partial masses, sequential cumulative sums; no fused multiply-adds, no
fast-math), so the two backends agree bitwise, signed zeros included
(tests/solvers/test_ffsl_backends.py).  The numpy code is the specification: change both
together.  What differs is the work pattern — one pass per line with scratch buffers of the
line's length instead of whole-array temporaries — and these details, none of which changes a
result:

* the limiters are written with selects instead of masks, so that the loops vectorise; the
  positivity scaling runs its exact test on every cell (numpy pre-filters with a bound that only
  skips cells passing that test, see ``ppm._scale_positive``); the Colella–Sekora step of the
  ``positive`` limiter is computed face by face and cell by cell, the numpy code on whole slices;
* when every departure point (and midpoint) of a line lies in one of the two cells at its face
  — the usual case at Courant numbers below 1 — a line takes a vectorised path without a cell
  search or cumulative sum; otherwise the line is redone the general way (cell search by a walk
  from the face instead of ``searchsorted``; whole cells from the cumulative sum);
* ``BoundedLine.lipschitz`` is max_f (max_r |Δa|) / h_f (rounded division by h > 0 is monotone);
* the periodic sweep returns its lines in the other memory layout than it got them: an
  F-ordered batch (the transposed output of a meridional sweep) is read in blocks of lines
  without a copy and comes back C-ordered, a C-ordered batch comes back F-ordered — so that in
  a Strang step Z M Z the transpose before the meridional sweep costs nothing and the step's
  result is C-ordered (a single line stays C-ordered);
* an unknown limiter name raises ``ValueError`` (:func:`ppm.check_limiter`), and face
  coordinates / velocities are assumed free of NaN (the steppers check velocities).

Departure points that cross make a kernel return a flag, and the Python wrapper raises the same
:class:`ffsl.DepartureOrderError` (same message) as the numpy code.

The kernels compile on first use: ~8 s of CPU for all five, once per machine thanks to
``cache=True`` (numba's on-disk cache in ``__pycache__``; later processes load them in ~0.3 s).
Arrays reach them C-contiguous float64, so each kernel has a single compiled version.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from spherepde.solvers.eulerian import ppm

_NONE, _POSITIVE, _MONOTONE = 0, 1, 2
_LIMITER_CODE = {"none": _NONE, "positive": _POSITIVE, "monotone": _MONOTONE}
_BLOCK = 8  # lines transposed at a time from an F-ordered batch
_C7 = 7.0 / 12.0
_C1 = 1.0 / 12.0


def _limiter_code(limiter: str) -> int:
    return _LIMITER_CODE[ppm.check_limiter(limiter)]


# ---- scalar helpers (inlined by LLVM) -----------------------------------------------------------
@njit(error_model="numpy")
def _fmin(a, b):
    """np.minimum(a, b) exactly: a NaN propagates, b on a tie (so the sign of a zero too)."""
    return a if (a < b) | (a != a) else b


@njit(error_model="numpy")
def _fmax(a, b):
    """np.maximum(a, b) exactly: a NaN propagates, b on a tie."""
    return a if (a > b) | (a != a) else b


@njit(error_model="numpy")
def _clip(x, lo, hi):
    """np.clip(x, lo, hi) = minimum(maximum(x, lo), hi)."""
    return _fmin(_fmax(x, lo), hi)


@njit(error_model="numpy")
def _clip_finite(x, lo, hi):
    """np.clip for non-NaN x, lo, hi (coordinates: one instruction each way, no NaN test)."""
    x = x if x > lo else lo
    return x if x < hi else hi


@njit(error_model="numpy")
def _wrap(k, n):
    """(k // n, k mod n) with floor division, without a division in the usual cases."""
    if 0 <= k < n:
        return 0, k
    if -n <= k < 0:
        return -1, k + n
    if n <= k < 2 * n:
        return 1, k - n
    return k // n, k % n  # numba follows Python's floor semantics


@njit(error_model="numpy")
def _cell(qb, qprev, qnext, eL, eR, limiter, may_flatten):
    """ppm.bound_edges and ppm.parabola for one cell: (qL, Δq, q6) of the cell with mean qb,
    neighbouring means qprev / qnext (monotone limiter only) and raw edge values eL / eR.

    Written with selects rather than branches so that the loops over a line vectorise; every
    value taken is computed by the numpy reference's operations in its order.  ``limiter`` is a
    constant at every call site (the branches on it fold away).  ``may_flatten=False``: the
    cell is never flagged as an extremum (ends of closed lines).
    """
    if limiter == _MONOTONE:
        eL = _clip(eL, _fmin(qprev, qb), _fmax(qprev, qb))
        eR = _clip(eR, _fmin(qb, qnext), _fmax(qb, qnext))
        ext = may_flatten & ((eR - qb) * (qb - eL) <= 0.0)
        qL = qb if ext else eL
        qR = qb if ext else eR
        dq = qR - qL
        q6 = 6.0 * (qb - 0.5 * (qL + qR))
        over_l = dq * q6 > dq * dq
        over_r = -dq * dq > dq * q6  # never both
        qL, qR = (3.0 * qb - 2.0 * qR if over_l else qL,
                  3.0 * qb - 2.0 * qL if over_r else qR)
    else:
        qL = eL
        qR = eR
    dq = qR - qL
    q6 = 6.0 * (qb - 0.5 * (qL + qR))
    if limiter == _POSITIVE:
        # ppm._scale_positive: minimum over [0, 1] at an end or at the interior vertex, and the
        # scaling p → q̄ + θ (p − q̄) where it is negative
        pmin = _fmin(qL, qR)
        s = 0.5 * (dq + q6) / q6 if q6 != 0.0 else -1.0
        pv = qL + s * (dq + q6 * (1.0 - s))
        pmin = _fmin(pmin, pv) if (s > 0.0) & (s < 1.0) else pmin
        denom = qb - pmin
        theta = _clip(qb / denom, 0.0, 1.0) if denom > 0.0 else 0.0
        bad = pmin < 0.0
        qL = qb + theta * (qL - qb) if bad else qL
        dq = dq * theta if bad else dq
        q6 = q6 * theta if bad else q6
    return qL, dq, q6


@njit(error_model="numpy")
def _one_sign(d2, o1, o2, o3, three):
    """ppm._one_sign for d2 and two others (three=False: o3 unused) or three (selects, no
    branches: the loops that call it vectorise)."""
    pos = (d2 > 0.0) & (o1 > 0.0) & (o2 > 0.0)
    neg = (d2 < 0.0) & (o1 < 0.0) & (o2 < 0.0)
    if three:
        pos &= o3 > 0.0
        neg &= o3 < 0.0
    return pos | neg


@njit(error_model="numpy")
def _extremum_face(e, qm1, q0, d2l, d2r):
    """ppm.extremum_limit_edges for one face (same operations); d2l, d2r are the second
    differences qm2 − 2 qm1 + q0 and qm1 − 2 q0 + qp1 of the means on either side."""
    out = (e - qm1) * (q0 - e) < 0.0
    smooth = _one_sign(qm1 - 2.0 * e + q0, d2l, d2r, 0.0, False)
    avg = 0.5 * (qm1 + q0)
    return avg if out > smooth else e  # out and not smooth


@njit(error_model="numpy")
def _extremum_cell(qL, qR, qm1, q, qp1, d2l, d2c, d2r):
    """ppm.extremum_limit_cells for one cell (same operations): the new (qL, qR); d2l, d2c,
    d2r are the second differences of the means at the left neighbour, the cell, the right
    neighbour."""
    ext = ((qR - q) * (q - qL) <= 0.0) | ((qm1 - q) * (q - qp1) <= 0.0)
    smooth = _one_sign(6.0 * (qL + qR) - 12.0 * q, d2c, d2l, d2r, True)
    dl = qL - q
    dr = qR - q
    big_r = abs(dr) >= 2.0 * abs(dl)
    big_l = abs(dl) >= 2.0 * abs(dr)
    mono_l = q - 2.0 * dr
    mono_r = q - 2.0 * dl
    keep_l = qL if smooth else q
    keep_r = qR if smooth else q
    alt_l = mono_l if big_l else qL
    alt_r = mono_r if big_r else qR
    return (keep_l if ext else alt_l), (keep_r if ext else alt_r)


@njit(error_model="numpy")
def _scaled_cells(q, el, qL, dq, q6):
    """_cell(..., _POSITIVE) for cells j with means q[j] and edges el[j], el[j+1]."""
    for j in range(qL.size):
        qL[j], dq[j], q6[j] = _cell(q[j], 0.0, 0.0, el[j], el[j + 1], _POSITIVE, False)


@njit(error_model="numpy")
def _parabolas_positive(qx, off, e, f_lo, f_hi, c_lo, c_hi, el, dd, qL, dq, q6):
    """The "positive" limiter of a line of n cells with means q_k = qx[k + off]: the
    Colella–Sekora test on faces f_lo..f_hi and cells c_lo..c_hi (their stencils q_{f−2..f+1}
    and q_{i−2..i+2} must lie in qx; c_lo = f_lo, c_hi ≥ f_hi − 1), then the scaling of every
    cell.  Scratch: ``el`` (n+1) and ``dd`` (≥ c_hi − c_lo + 3), which holds the second
    differences q_{k−1} − 2 q_k + q_{k+1} of cells k = c_lo − 1 .. c_hi + 1 (each computed
    once, as numpy computes every one of them).  Each range is its own loop over views indexed
    from 0, without branches or negative indices, so that the loops vectorise."""
    n = qL.size
    nd = c_hi - c_lo + 3
    qd = qx[c_lo - 2 + off:]  # q_{k−1} for k = c_lo − 1 + j
    for j in range(nd):
        dd[j] = qd[j] - 2.0 * qd[j + 1] + qd[j + 2]
    el[:f_lo] = e[:f_lo]
    el[f_hi + 1:] = e[f_hi + 1:]
    ef = e[f_lo:f_hi + 1]
    out = el[f_lo:f_hi + 1]
    qf = qx[f_lo - 1 + off:]  # q_{f−1} for f = f_lo + j; dd[j] is cell f − 1 (f_lo = c_lo)
    for j in range(ef.size):
        out[j] = _extremum_face(ef[j], qf[j], qf[j + 1], dd[j], dd[j + 1])
    _scaled_cells(qx[off:c_lo + off], el[:c_lo + 1], qL[:c_lo], dq[:c_lo], q6[:c_lo])
    qc = qx[c_lo - 1 + off:]  # q_{i−1} for i = c_lo + j; dd[j + 1] is cell i
    ec = el[c_lo:]
    cL, cdq, c6 = qL[c_lo:c_hi + 1], dq[c_lo:c_hi + 1], q6[c_lo:c_hi + 1]
    for j in range(cL.size):
        lo, hi = _extremum_cell(ec[j], ec[j + 1], qc[j], qc[j + 1], qc[j + 2], dd[j], dd[j + 1],
                                dd[j + 2])
        cL[j], cdq[j], c6[j] = _cell(qc[j + 1], 0.0, 0.0, lo, hi, _POSITIVE, False)
    _scaled_cells(qx[c_hi + 1 + off:n + off], el[c_hi + 1:], qL[c_hi + 1:], dq[c_hi + 1:],
                  q6[c_hi + 1:])


@njit(error_model="numpy")
def _parabolas(qbp, e, limiter, qL, dq, q6):
    """(qL, Δq, q6) of the n cells of a line: means qbp[1:n+1] with a neighbour on each side
    (qbp[0], qbp[n+1]), edge values e[0..n]; with the monotone limiter any cell may be
    flagged as an extremum."""
    n = qL.size
    if limiter == _NONE:
        for i in range(n):
            qL[i], dq[i], q6[i] = _cell(qbp[i + 1], 0.0, 0.0, e[i], e[i + 1], _NONE, False)
    elif limiter == _POSITIVE:
        for i in range(n):
            qL[i], dq[i], q6[i] = _cell(qbp[i + 1], 0.0, 0.0, e[i], e[i + 1], _POSITIVE, False)
    else:
        for i in range(n):
            qL[i], dq[i], q6[i] = _cell(qbp[i + 1], qbp[i], qbp[i + 2], e[i], e[i + 1],
                                        _MONOTONE, True)


@njit(error_model="numpy")
def _partial_mass_left(qL, dq, q6, s):
    """ppm.partial_mass_left, same expression."""
    return qL * s + dq * s * s / 2.0 + q6 * (s * s / 2.0 - s * s * s / 3.0)


@njit(error_model="numpy")
def _cell_of(X, x, n, f):
    """clip(searchsorted(X, x, "right") − 1, 0, n − 1) for a point x traced back from the
    interior face f: one of the two cells at the face (tried first, without a branch on the
    side: it depends on the sign of the velocity), else a walk from there."""
    k = f - 1 if x < X[f] else f
    if (X[k] <= x) & (x < X[k + 1]):
        return k
    while k > 0 and X[k] > x:
        k -= 1
    while k < n - 1 and X[k + 1] <= x:
        k += 1
    return k


# ---- deformation numbers -------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _lipschitz_periodic(a, out):
    """ffsl.lipschitz_periodic: out[r] = max_f |a[r, f+1 mod n] − a[r, f]| (NaN propagates;
    four running maxima break the dependency chain, the result is the same)."""
    nrows, n = a.shape
    for r in range(nrows):
        ar = a[r]
        m0 = m1 = m2 = m3 = abs(ar[0] - ar[n - 1])
        f = 0
        while f + 4 < n:
            m0 = _fmax(abs(ar[f + 1] - ar[f]), m0)
            m1 = _fmax(abs(ar[f + 2] - ar[f + 1]), m1)
            m2 = _fmax(abs(ar[f + 3] - ar[f + 2]), m2)
            m3 = _fmax(abs(ar[f + 4] - ar[f + 3]), m3)
            f += 4
        while f + 1 < n:
            m0 = _fmax(abs(ar[f + 1] - ar[f]), m0)
            f += 1
        out[r] = _fmax(_fmax(m0, m1), _fmax(m2, m3))


@njit(cache=True, error_model="numpy")
def _lipschitz_bounded(a, h):
    """ffsl.BoundedLine.lipschitz: max over rows r and cells f of |a[r, f+1] − a[r, f]| / h[f],
    as max_f (max_r |Δa|) / h[f] — the same number, since rounded division by h > 0 is monotone
    (and a NaN propagates either way)."""
    nrows, n1 = a.shape
    n = n1 - 1
    col = np.empty(n)
    for f in range(n):
        col[f] = abs(a[0, f + 1] - a[0, f])
    for r in range(1, nrows):
        ar = a[r]
        for f in range(n):
            col[f] = _fmax(abs(ar[f + 1] - ar[f]), col[f])
    out = col[0] / h[0]
    for f in range(1, n):
        out = _fmax(col[f] / h[f], out)
    return out


# ---- periodic uniform lines ---------------------------------------------------------------------
@njit(error_model="numpy")
def _departure_periodic(ar, f, n, hd, d):
    """x_d(f) = f − d · a(f − hd · a_f) on the periodic linear interpolant (any distance)."""
    xm = f - hd * ar[f]
    i0f = np.floor(xm)
    fr = xm - i0f
    i0 = _wrap(int(i0f), n)[1]
    i1 = 0 if i0 == n - 1 else i0 + 1
    am = (1.0 - fr) * ar[i0] + fr * ar[i1]
    return f - d * am


@njit(cache=True, error_model="numpy")
def _periodic_departures(a, dt, s, index, wraps, one_cell, same_cell):
    """ffsl.periodic_departures into the given (nrows, n) arrays; False if departure points of
    a line cross (the outputs are then incomplete)."""
    nrows, n = a.shape
    xd = np.empty(n)
    for r in range(nrows):
        ar = a[r]
        d = dt[r]
        hd = 0.5 * d
        # fast path (vectorised): the midpoint of interior face f lies in cell f − 1 or f;
        # if that fails anywhere on the line, the line is redone in general
        local = True
        for f in range(1, n - 1):
            xm = f - hd * ar[f]
            i0f = np.floor(xm)
            left = i0f == f - 1  # cell f − 1, else cell f
            local &= left | (i0f == f)
            fr = xm - i0f
            a0 = ar[f - 1] if left else ar[f]
            a1 = ar[f] if left else ar[f + 1]
            am = (1.0 - fr) * a0 + fr * a1
            xd[f] = f - d * am
        if not local:
            for f in range(1, n - 1):
                xd[f] = _departure_periodic(ar, f, n, hd, d)
        xd[0] = _departure_periodic(ar, 0, n, hd, d)
        xd[n - 1] = _departure_periodic(ar, n - 1, n, hd, d)
        crossed = False
        for f in range(n - 1):
            crossed |= xd[f + 1] < xd[f]
        if crossed:
            return False
        # departure cell k = ⌊x_d⌋ = n · wraps + (k mod n); fast path for −n ≤ k < 2n
        row0 = r * n
        near = True
        for f in range(n):
            kf = np.floor(xd[f])
            s[r, f] = xd[f] - kf
            k = int(kf)
            near &= (k >= -n) & (k < 2 * n)
            w = -1 if k < 0 else (1 if k >= n else 0)
            index[r, f] = row0 + (k - w * n)
            wraps[r, f] = w
            one_cell[r, f] = f - k == 1
            same_cell[r, f] = f - k == 0
        if not near:
            for f in range(n):
                w, kk = _wrap(int(np.floor(xd[f])), n)
                index[r, f] = row0 + kk
                wraps[r, f] = w
    return True


@njit(cache=True, error_model="numpy")
def _sweep_periodic(qs, columns, s, index, wraps, one_cell, same_cell, limiter, outs,
                    out_columns):
    """ffsl.sweep_periodic_departed for lines q (nrows, n) into out; q = qs, or q = qs.T if
    ``columns`` (an F-ordered q, read without a copy); out = outs, or outs.T if
    ``out_columns``."""
    nrows, n = s.shape
    qp = np.empty(n + 4)
    e = np.empty(n + 1)
    el = np.empty(n + 1)
    dd = np.empty(n + 2)
    qL = np.empty(n)
    dq = np.empty(n)
    q6 = np.empty(n)
    csum = np.empty(n)
    flux = np.empty(n + 1)
    block = np.empty((_BLOCK, n)) if columns else np.empty((0, n))
    oblock = np.empty((_BLOCK, n)) if out_columns else np.empty((0, n))
    for r in range(nrows):
        # the line with ghost cells q_{n−2}, q_{n−1} | q | q_0, q_1 (ppm.edges_periodic_uniform)
        if columns:  # transpose _BLOCK lines at a time: whole cache lines of qs are read
            j = r % _BLOCK
            if j == 0:
                nb = min(_BLOCK, nrows - r)
                for i in range(n):
                    for jj in range(nb):
                        block[jj, i] = qs[i, r + jj]
            qp[2:n + 2] = block[j]
        else:
            qp[2:n + 2] = qs[r]
        qr = qp[2:n + 2]
        qp[0] = qr[(n - 2) % n]
        qp[1] = qr[n - 1]
        qp[n + 2] = qr[0]
        qp[n + 3] = qr[1 % n]
        for i in range(n + 1):  # face i − 1/2; e[n] is face −1/2 again
            e[i] = _C7 * (qp[i + 2] + qp[i + 1]) - _C1 * (qp[i + 3] + qp[i])
        if limiter == _POSITIVE:  # every face and cell: the ghosts wrap
            _parabolas_positive(qp, 2, e, 0, n, 0, n - 1, el, dd, qL, dq, q6)
        else:
            _parabolas(qp[1:], e, limiter, qL, dq, q6)
        # fluxes.  Fast path (vectorised): x_d in one of the two cells at the face, i.e. exactly
        # cell f − 1 (shift 1) or no whole cell (shift 0) between x_d and the face
        row0 = r * n
        kk = index[r, 0] - row0
        local = one_cell[r, 0] | same_cell[r, 0]
        whole = qr[kk] if one_cell[r, 0] else 0.0
        flux[0] = whole - _partial_mass_left(qL[kk], dq[kk], q6[kk], s[r, 0])
        for f in range(1, n):
            one = one_cell[r, f]
            local &= one | same_cell[r, f]
            pl = _partial_mass_left(qL[f - 1] if one else qL[f], dq[f - 1] if one else dq[f],
                                    q6[f - 1] if one else q6[f], s[r, f])
            whole = qr[f - 1] if one else 0.0
            flux[f] = whole - pl
        if not local:
            # general case: whole cells S(f) − S(k) from the exclusive cumulative sum
            # C[j] = Σ_{i<j} q_i (sequential, as np.cumsum) and the ring total
            csum[0] = 0.0
            if n > 1:
                acc = qr[0]
                csum[1] = acc
                for j in range(2, n):
                    acc = acc + qr[j - 1]
                    csum[j] = acc
                total = acc + qr[n - 1]
            else:
                total = 0.0 + qr[0]
            for f in range(n):
                kk = index[r, f] - row0
                w = wraps[r, f]
                shift = f - (kk + w * n)
                whole = (csum[f] - csum[kk]) - w * total
                whole = 0.0 if shift == 0 else whole
                whole = qr[kk] if shift == 1 else whole
                flux[f] = whole - _partial_mass_left(qL[kk], dq[kk], q6[kk], s[r, f])
        flux[n] = flux[0]
        outr = oblock[r % _BLOCK] if out_columns else outs[r]
        for i in range(n):
            outr[i] = qr[i] - (flux[i + 1] - flux[i])
        if out_columns and (r % _BLOCK == _BLOCK - 1 or r == nrows - 1):
            r0 = r - r % _BLOCK
            for i in range(n):
                for jj in range(r - r0 + 1):
                    outs[i, r0 + jj] = oblock[jj, i]


# ---- bounded (closed) non-uniform lines --------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _sweep_bounded(m, a, dt, X, h, start, w, limiter, out):
    """ffsl.BoundedLine.sweep for masses m (nrows, n), face velocities a (nrows, n+1) into
    out; False if departure points of a line cross (out is then incomplete)."""
    nrows, n = m.shape
    X0 = X[0]
    Xn = X[n]
    hd = 0.5 * dt
    w0 = w[:, 0].copy()  # contiguous weights of the interior faces
    w1 = w[:, 1].copy()
    w2 = w[:, 2].copy()
    w3 = w[:, 3].copy()
    xd = np.empty(n + 1)
    e = np.empty(n + 1)
    qbp = np.empty(n + 2)
    el = np.empty(n + 1)
    dd = np.empty(n + 2)
    qL = np.empty(n)
    dq = np.empty(n)
    q6 = np.empty(n)
    csum = np.empty(n)
    flux = np.empty(n + 1)
    flux[0] = 0.0  # the end faces are closed
    flux[n] = 0.0
    for r in range(nrows):
        mr = m[r]
        ar = a[r]
        # departure points of the interior faces: midpoint rule on the linear interpolant.
        # Fast path (vectorised): the midpoint lies in one of the two cells at its face, chosen
        # by selects; if that fails anywhere on the line, the line is redone with the search.
        local = True
        for f in range(1, n):
            x = _clip_finite(X[f] - hd * ar[f], X0, Xn)
            left = x < X[f]  # cell f − 1, else cell f
            Xi = X[f - 1] if left else X[f]
            Xi1 = X[f] if left else X[f + 1]
            hi = h[f - 1] if left else h[f]
            a0 = ar[f - 1] if left else ar[f]
            a1 = ar[f] if left else ar[f + 1]
            local &= (Xi <= x) & (x < Xi1)
            fr = (x - Xi) / hi
            am = (1.0 - fr) * a0 + fr * a1
            xd[f] = _clip_finite(X[f] - dt * am, X0, Xn)
        if not local:
            for f in range(1, n):
                x = _clip_finite(X[f] - hd * ar[f], X0, Xn)
                i = _cell_of(X, x, n, f)
                fr = (x - X[i]) / h[i]
                am = (1.0 - fr) * ar[i] + fr * ar[i + 1]
                xd[f] = _clip_finite(X[f] - dt * am, X0, Xn)
        crossed = False
        for f in range(1, n - 1):
            crossed |= xd[f + 1] < xd[f]
        if crossed:
            return False
        # edge values from the masses (ppm.edges_nonuniform: terms in order, then + 0); the
        # interior faces 2..n−2 have the stencil f−2..f+1, the two faces at each end start[f]
        for f in range(2, n - 1):
            e[f] = (((mr[f - 2] * w0[f] + mr[f - 1] * w1[f]) + mr[f] * w2[f])
                    + mr[f + 1] * w3[f]) + 0.0
        for f in (0, 1, n - 1, n):
            c = start[f]
            e[f] = (((mr[c] * w0[f] + mr[c + 1] * w1[f]) + mr[c + 2] * w2[f])
                    + mr[c + 3] * w3[f]) + 0.0
        # means, with each end cell standing in for its missing outer neighbour
        for i in range(n):
            qbp[i + 1] = mr[i] / h[i]
        qbp[0] = qbp[1]
        qbp[n + 1] = qbp[n]
        if limiter == _POSITIVE:  # faces 2..n−2 and cells 2..n−3: stencils on the line
            _parabolas_positive(qbp, 1, e, 2, n - 2, 2, n - 3, el, dd, qL, dq, q6)
        else:
            _parabolas(qbp, e, limiter, qL, dq, q6)
        if limiter == _MONOTONE:  # the end cells are never flagged as extrema
            for i in (0, n - 1):
                qL[i], dq[i], q6[i] = _cell(qbp[i + 1], qbp[i], qbp[i + 2], e[i], e[i + 1],
                                            _MONOTONE, False)
        # fluxes.  Fast path (vectorised): x_d in one of the two cells at the face, i.e. no
        # whole cell (k = f) or exactly cell f − 1 (k = f − 1) between x_d and the face
        local = True
        for f in range(1, n):
            x = xd[f]
            left = x < X[f]  # k = f − 1, else k = f
            Xk = X[f - 1] if left else X[f]
            Xk1 = X[f] if left else X[f + 1]
            hk = h[f - 1] if left else h[f]
            local &= (Xk <= x) & (x < Xk1)
            sk = _clip_finite((x - Xk) / hk, 0.0, 1.0)
            pl = hk * _partial_mass_left(qL[f - 1] if left else qL[f], dq[f - 1] if left else dq[f],
                                         q6[f - 1] if left else q6[f], sk)
            whole = mr[f - 1] if left else 0.0
            flux[f] = whole - pl
        if not local:
            # general case: whole cells between x_d and face f from the exclusive cumulative
            # sum C[j] = Σ_{i<j} m_i (sequential, as np.cumsum)
            csum[0] = 0.0
            acc = mr[0]
            csum[1] = acc
            for j in range(2, n):
                acc = acc + mr[j - 1]
                csum[j] = acc
            for f in range(1, n):
                k = _cell_of(X, xd[f], n, f)
                hk = h[k]
                sk = _clip_finite((xd[f] - X[k]) / hk, 0.0, 1.0)
                pl = hk * _partial_mass_left(qL[k], dq[k], q6[k], sk)
                whole = csum[f] - csum[k]
                whole = 0.0 if k == f else whole
                whole = mr[k] if k == f - 1 else whole
                flux[f] = whole - pl
        outr = out[r]
        for i in range(n):
            outr[i] = mr[i] - (flux[i + 1] - flux[i])
    return True
