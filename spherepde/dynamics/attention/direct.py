"""Direct log-domain attention sums in numpy: the float64/float32 reference and the culled sums.

For targets z_i = Bᵀx_i (n, d) and sources (y_j, log w_j) (m, d), (m,):

    ℓ_ij = β⟨z_i, y_j⟩ + log w_j,   M_i = max_j ℓ_ij
    softmax: m_i = Σ_j e^{ℓ_ij − M_i} y_j / Σ_j e^{ℓ_ij − M_i};   usa: m_i = Σ_j e^{ℓ_ij − β} y_j

exact at any β (no overflow at β = 10⁴), in blocks of targets so that memory stays bounded.  The
culled sums (sources on S²) skip the source tiles whose logit bound lies more than ln(m/tol)
below a lower bound on the row maximum.  The compiled (numba) versions are in :mod:`.compiled`,
the torch ones in :mod:`.torch_sums`.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids.geometry import lat_lon_tiles

#: target rows per block are chosen so that one (rows × sources) buffer stays ≈ 16 MB: the
#: buffer is reused in place, which avoids page faults from fresh large temporaries
BLOCK_BYTES = 2**24


def _mean_direct(z, y, logw, beta, kind, block, dtype=np.float64) -> np.ndarray:
    """Σ_j softmax-weights y_j in the log domain, at most ``block`` targets at a time.

    ℓ_ij = β⟨z_i, y_j⟩ + log w_j;  m_i = Σ_j e^{ℓ_ij − max_j ℓ_ij} y_j / Σ_j e^{ℓ_ij − max_j ℓ_ij}
    (softmax) or Σ_j e^{ℓ_ij − β} y_j (usa).  z (n, d), y (m, d), logw (m,) → (n, d).
    """
    n, m = z.shape[0], y.shape[0]
    rows = max(1, min(block, BLOCK_BYTES // (np.dtype(dtype).itemsize * max(m, 1))))
    out = np.empty((n, y.shape[1]))
    zc, yT, lw = (beta * z).astype(dtype), y.T.astype(dtype), logw.astype(dtype)
    yc = np.ascontiguousarray(yT.T)
    buf = np.empty((min(rows, n), m), dtype)
    for s in range(0, n, rows):
        k = min(rows, n - s)
        b = buf[:k]
        np.matmul(zc[s:s + k], yT, out=b)
        b += lw
        mx = b.max(axis=1, keepdims=True)
        b -= mx
        np.exp(b, out=b)
        num = (b @ yc).astype(np.float64)
        if kind == "softmax":
            out[s:s + k] = num / b.sum(axis=1, keepdims=True, dtype=np.float64)
        else:
            out[s:s + k] = num * np.exp(mx.astype(np.float64) - beta)
    return out


def _sums_direct(z, y, logw, beta, shift) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised sums Σ_j e^{β⟨z_i, y_j⟩ + log w_j − shift_i} y_j and Σ_j e^{…} (float64):
    (num (n, d), den (n,)).  The caller picks ``shift`` so that nothing overflows.

    The thin products (inner or outer dimension d) go through ``np.einsum``, not BLAS: on a
    shared 2-core machine OpenBLAS's threaded dgemm/dgemv took 10–75× longer on such shapes
    (e.g. 23 ms instead of 0.3 ms for (181 × 3) @ (3 × 2611)); einsum's loops are single-threaded.
    Terms below e^{−600} (relative to the shift) are raised to e^{−600}, which keeps denormals
    (slow) out of the products; the caller accounts for the m·e^{−600} this may add to a row.
    """
    n, m = z.shape[0], y.shape[0]
    num, den = np.zeros((n, y.shape[1])), np.zeros(n)
    if m == 0 or n == 0:
        return num, den
    rows = max(1, min(n, BLOCK_BYTES // (8 * m)))
    zc, yT = beta * z, np.ascontiguousarray(y.T)
    buf = np.empty((rows, m))
    for s in range(0, n, rows):
        k = min(rows, n - s)
        b = buf[:k]
        np.einsum("ik,kj->ij", zc[s:s + k], yT, out=b)
        b += logw
        b -= shift[s:s + k, None]
        np.maximum(b, _FLUSH_LOGIT, out=b)
        np.exp(b, out=b)
        for c in range(y.shape[1]):
            num[s:s + k, c] = np.einsum("ij,j->i", b, yT[c])
        den[s:s + k] = b.sum(axis=1)
    return num, den


#: :func:`_sums_direct` raises logit − shift to at least this (e^{−600} ≈ 3e-261)
_FLUSH_LOGIT = -600.0


def _mean_culled(z, y, logw, beta, kind, tol, block, tile=128) -> np.ndarray:
    """Culled log-domain sum (see :meth:`Attention.mean`); sources on S² (d = 3)."""
    out = np.empty((z.shape[0], 3))
    for idx, ys, lws in _culled_blocks(z, y, logw, beta, tol, block, tile):
        out[idx] = _mean_direct(z[idx], ys, lws, beta, kind, len(idx))
    return out


def _culled_blocks(z, y, logw, beta, tol, block, tile=128, lb_extra=None, blas=True):
    """The target blocks of the culled sum and, for each, the sources kept.

    Yields ``(idx, y_kept, logw_kept)``: target indices (into z) and the sources whose tile
    upper bound on the logit β⟨z_i, y_j⟩ + log w_j comes within cut = ln(m/tol) of a lower bound
    ``lb_i`` on the row's total (the largest logit of the tiles' representatives, or
    ``lb_extra[i]`` where that is larger: a lower bound on log Σ_j e^{logit} known to the
    caller, in the same logit units).  Each dropped source weighs at most e^{lb − cut} =
    tol e^{lb}/m, so what is dropped weighs less than tol × the row's total.
    ``blas=False`` computes the thin (× 3) products with einsum (see :func:`_sums_direct`).
    """
    ns = y.shape[0]
    cut = math.log(ns / tol)
    so, sb = lat_lon_tiles(y, tile)
    y, logw = y[so], logw[so]
    nt = len(sb) - 1
    cen = np.add.reduceat(y, sb[:-1], axis=0)
    cen /= np.maximum(np.linalg.norm(cen, axis=1, keepdims=True), 1e-300)
    tile_id = np.repeat(np.arange(nt), np.diff(sb))
    ang = np.arccos(np.clip(np.sum(y * cen[tile_id], axis=1), -1, 1))
    rad = np.maximum.reduceat(ang, sb[:-1])
    bmax = np.maximum.reduceat(logw, sb[:-1])
    rep = sb[:-1] + np.array([np.argmax(logw[a:b]) for a, b in zip(sb[:-1], sb[1:])])
    yrep, lrep = y[rep], logw[rep]

    nz = np.linalg.norm(z, axis=1)
    u = z / np.maximum(nz[:, None], 1e-300)
    to, tb = lat_lon_tiles(u, block // 4 if block >= 8 else 1)
    for a, b in zip(tb[:-1], tb[1:]):
        idx = to[a:b]
        zb, nzb, ub = z[idx], nz[idx], u[idx]
        if not blas:
            lb = np.max(beta * np.einsum("ik,jk->ij", zb, yrep) + lrep[None, :], axis=1)
            cosang = np.einsum("ik,jk->ij", ub, cen)
        else:
            lb = np.max(beta * zb @ yrep.T + lrep[None, :], axis=1)
            cosang = ub @ cen.T
        if lb_extra is not None:
            lb = np.maximum(lb, lb_extra[idx])
        theta = np.arccos(np.clip(cosang, -1, 1))
        ubd = beta * nzb[:, None] * np.cos(np.clip(theta - rad[None, :], 0.0, np.pi)) + bmax[None, :]
        keep = np.any(ubd >= (lb - cut)[:, None], axis=0)
        if not keep.any():
            yield idx, y[:0], logw[:0]
            continue
        sel = np.concatenate([np.arange(sb[t], sb[t + 1]) for t in np.flatnonzero(keep)])
        yield idx, y[sel], logw[sel]

