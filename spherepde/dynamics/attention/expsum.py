"""The compiled attention sums' "cody-waite" path: an exponential that LLVM vectorises, and the
row sums of :mod:`.compiled` built on it in fixed-size blocks (issue 23).

**The exponential.**  For t ≤ 0 (the shifted logits ℓ − M), with k = round(t/ln 2) taken by
``floor(t·log₂e + ½)``, r = (t − k·ln2_hi) − k·ln2_lo (Cody–Waite: ln2_hi has 11 trailing zero
bits, so k·ln2_hi and the first subtraction are exact for |k| ≤ 1021), |r| ≤ ln2/2 (+ rounding),

    e^t = 2^k · p(r),   p = a degree-11 polynomial, within 1.1e-17 of e^r (relative, :data:`_C`),

2^k built from k's bits (k + 1023 + 2⁵² is exact, its low bits are k + 1023; shifted into the
exponent field).  t < −708 gives 0 exactly (e^{−708} ≈ 3.3e-308: 2^k stays normal for t ≥ −708,
and what is flushed weighs less than 3.3e-308 each).  Pure arithmetic without branches (a select
for the flush), so the block loop vectorises; its floating-point flags are ``contract`` only
(fused multiply-adds; no reassociation, which would undo the Cody–Waite split).  The measured
error against long double over [−708, 0] is in tests/dynamics/test_attention_kernels.py
(:data:`EXP_RTOL_CW`).

**The sums.**  A target row (:func:`kernels` ``row3``) first writes its logits ℓ_j into a
buffer and takes their maximum M (exact in any order), then, in blocks of :data:`BLOCK` sources,
replaces them by e^{ℓ_j − M} (the loop above) and adds Σ e·y₀, Σ e·y₁, Σ e·y₂, Σ e over the
block in a loop with ``reassoc`` (so that LLVM keeps vector partial sums).  The culled kernel's
tiles go through ``range_max`` / ``range_sums`` (logits recomputed, no row buffer).  Each row is
summed by one thread in the same order whatever the thread count, so the bits do not depend on
it (tests/dynamics/test_attention_kernels.py).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

#: sources per block of the row sums (the block's exponentials fit in L1: 4 KiB)
BLOCK = 512
#: largest relative error of one exponential against long double over [−708, 0], the bound the
#: tests hold (two ulps); measured 1.4e-16 = 1.24 ulps (np.exp: 1.1e-16) on znver1 with FMA
#: (docs/prototypes/issue23/exp_error.json)
EXP_RTOL_CW = 4.5e-16
#: below this the exponential is 0 exactly
FLUSH_BELOW = -708.0

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # 0x3fe62e42fee00000: 11 trailing zero bits
LN2_LO = 1.90821492927058770002e-10  # ln 2 − LN2_HI
TWO52 = 4503599627370496.0
#: bits of 2⁵²: bits(k + 1023 + 2⁵²) − this = k + 1023
BITS_TWO52 = 0x4330000000000000

#: p(r) = Σ_k C[k] r^k: interpolates e^r at the 12 Chebyshev nodes of [−0.3471, 0.3471],
#: relative error 1.1e-17 there with these float64 coefficients (derived and checked by
#: docs/prototypes/issue23/exp_coefficients.py; Taylor's degree 11 would be 8.8e-15)
_C = (1.0, 1.0, 0.5000000000000019, 0.16666666666666682, 0.04166666666648591,
      0.008333333333319433, 0.0013888888952895354, 0.00019841269890493569,
      2.4801484861795582e-05, 2.755724044140247e-06, 2.763286890506109e-07,
      2.511021390618485e-08)


# (module-level functions, not closures: numba caches them between processes; a closure over
# another compiled function gets a new cache key in every process)


@intrinsic
def bits_of(typingctx, x):
    """The int64 whose bits are those of the float64 x."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen

@intrinsic
def float_of(typingctx, x):
    """The float64 whose bits are those of the int64 x."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen

c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 = _C
_EXACT = {"contract"}  # fused multiply-adds only: the Cody–Waite split stays as written
_SUMFLAGS = {"contract", "reassoc", "nsz", "nnan", "ninf"}

# inlined in numba's IR (LLVM would not always inline it, and a call per element stops the
# vectoriser); the caller's flags apply, and every caller below has ``exact``
@njit(fastmath=_EXACT, inline="always", cache=True, nogil=True)
def exp_cw(t):
    """e^t for t ≤ 0 (module docstring); 0 for t < −708."""
    tt = max(t, FLUSH_BELOW)
    kf = np.floor(tt * LOG2E + 0.5)
    r = (tt - kf * LN2_HI) - kf * LN2_LO
    p = c11
    p = p * r + c10
    p = p * r + c9
    p = p * r + c8
    p = p * r + c7
    p = p * r + c6
    p = p * r + c5
    p = p * r + c4
    p = p * r + c3
    p = p * r + c2
    p = p * r + c1
    p = p * r + c0
    s = float_of((bits_of(kf + (1023.0 + TWO52)) - BITS_TWO52) << 52)
    return p * s if t >= FLUSH_BELOW else 0.0

@njit(fastmath=_EXACT, cache=True, nogil=True)
def exp_array(t, out):
    """out[j] = exp_cw(t[j]) (for tests and the error model)."""
    for j in range(t.shape[0]):
        out[j] = exp_cw(t[j])

# (the loops below index from 0 over slices: numba's wrap-around of negative indices
# would otherwise turn each load into a select and stop LLVM from vectorising)
@njit(fastmath=_EXACT, cache=True, nogil=True)
def block_exp(a0, a1, a2, y0, y1, y2, lw, M, e):
    """e[j] = exp(a·y_j + lw_j − M) for the block's sources (slices)."""
    for j in range(y0.shape[0]):
        e[j] = exp_cw(a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + (lw[j] - M))

@njit(fastmath=_EXACT, cache=True, nogil=True)
def exp_shifted(lg, M):
    """lg[j] = exp(lg[j] − M) in place."""
    for j in range(lg.shape[0]):
        lg[j] = exp_cw(lg[j] - M)

@njit(fastmath=_SUMFLAGS, cache=True, nogil=True)
def block_sums(e, y0, y1, y2):
    """(Σ e·y₀, Σ e·y₁, Σ e·y₂, Σ e) over the block (slices)."""
    s0 = s1 = s2 = s3 = 0.0
    for j in range(y0.shape[0]):
        ej = e[j]
        s0 += ej * y0[j]
        s1 += ej * y1[j]
        s2 += ej * y2[j]
        s3 += ej
    return s0, s1, s2, s3

@njit(fastmath=_SUMFLAGS, cache=True, nogil=True)
def slice_max(a0, a1, a2, y0, y1, y2, lw, M):
    """max(M, max_j a·y_j + lw_j) over the sources (slices; exact in any order)."""
    for j in range(y0.shape[0]):
        M = max(M, a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + lw[j])
    return M

@njit(cache=True, nogil=True)
def range_max(a0, a1, a2, y0, y1, y2, lw, lo, hi, M):
    """max(M, max_j a·y_j + lw_j) over the sources [lo, hi)."""
    return slice_max(a0, a1, a2, y0[lo:hi], y1[lo:hi], y2[lo:hi], lw[lo:hi], M)

@njit(cache=True, nogil=True)
def range_sums(a0, a1, a2, y0, y1, y2, lw, M, lo, hi, e, acc):
    """acc += the four sums of the sources [lo, hi), in blocks of BLOCK."""
    for b in range(lo, hi, BLOCK):
        bh = min(b + BLOCK, hi)
        eb = e[:bh - b]
        block_exp(a0, a1, a2, y0[b:bh], y1[b:bh], y2[b:bh], lw[b:bh], M, eb)
        s0, s1, s2, s3 = block_sums(eb, y0[b:bh], y1[b:bh], y2[b:bh])
        acc[0] += s0
        acc[1] += s1
        acc[2] += s2
        acc[3] += s3

@njit(fastmath=_SUMFLAGS, cache=True, nogil=True)
def logits_max(a0, a1, a2, y0, y1, y2, lw, L):
    """L[j] = a·y_j + lw_j for every source; returns max_j L[j] (exact in any order)."""
    M = -np.inf
    for j in range(y0.shape[0]):
        L[j] = a0 * y0[j] + a1 * y1[j] + a2 * y2[j] + lw[j]
        M = max(M, L[j])
    return M

@njit(cache=True, nogil=True)
def row3(i, zc, y0, y1, y2, lw, num, den, mx, lbuf, acc):
    """Target row i against all sources: the logits and their maximum in one pass (into
    lbuf, ≥ m long), then block by block their exponentials (in place) and the sums."""
    a0, a1, a2 = zc[i, 0], zc[i, 1], zc[i, 2]
    m = y0.shape[0]
    M = logits_max(a0, a1, a2, y0, y1, y2, lw, lbuf[:m])
    s0 = s1 = s2 = s3 = 0.0
    for b in range(0, m, BLOCK):
        bh = min(b + BLOCK, m)
        eb = lbuf[b:bh]
        exp_shifted(eb, M)
        t0, t1, t2, t3 = block_sums(eb, y0[b:bh], y1[b:bh], y2[b:bh])
        s0 += t0
        s1 += t1
        s2 += t2
        s3 += t3
    num[i, 0], num[i, 1], num[i, 2], den[i], mx[i] = s0, s1, s2, s3, M

@njit(parallel=True, cache=True, nogil=True)
def sums3(zc, y0, y1, y2, lw, num, den, mx):
    """d = 3, all sources, rows in chunks of 16 per task (one buffer per task)."""
    n = zc.shape[0]
    for c in prange((n + 15) // 16):
        e = np.empty(y0.shape[0])
        acc = np.empty(4)
        for i in range(16 * c, min(16 * c + 16, n)):
            row3(i, zc, y0, y1, y2, lw, num, den, mx, e, acc)

@njit(fastmath=_EXACT, cache=True, nogil=True)
def axpy(lg, a, yk):
    """lg[j] += a·yk[j]."""
    for j in range(lg.shape[0]):
        lg[j] += a * yk[j]

@njit(fastmath=_SUMFLAGS, cache=True, nogil=True)
def vmax(v):
    M = -np.inf
    for j in range(v.shape[0]):
        M = max(M, v[j])
    return M

@njit(fastmath=_SUMFLAGS, cache=True, nogil=True)
def dot(a, b):
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j] * b[j]
    return s

@njit(fastmath=_SUMFLAGS, cache=True, nogil=True)
def vsum(a):
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j]
    return s

@njit(parallel=True, cache=True, nogil=True)
def sums_any(zc, yT, lw, num, den, mx):
    """any d: yT (d, m); one row per task (its logits in a buffer of m)."""
    d = yT.shape[0]
    for i in prange(zc.shape[0]):
        lg = lw.copy()
        for k in range(d):
            axpy(lg, zc[i, k], yT[k])
        M = vmax(lg)
        exp_shifted(lg, M)
        for k in range(d):
            num[i, k] = dot(lg, yT[k])
        den[i], mx[i] = vsum(lg), M


def kernels() -> SimpleNamespace:
    """The kernels of this path (compiled on first call, or loaded from numba's cache):
    ``exp_array``, ``sums3`` and ``sums_any`` (the all-pairs sums of
    :func:`spherepde.dynamics.attention.compiled.sums`), and the row helpers ``row3``,
    ``range_max``, ``range_sums`` that the culled kernel calls."""
    return SimpleNamespace(exp_array=exp_array, sums3=sums3, sums_any=sums_any, row3=row3,
                           range_max=range_max, range_sums=range_sums)


def exp(t):
    """The path's exponential of a float64 array (t ≤ 0), for tests and the error model."""
    t = np.ascontiguousarray(t, dtype=float)
    out = np.empty_like(t)
    kernels().exp_array(t.reshape(-1), out.reshape(-1))
    return out
