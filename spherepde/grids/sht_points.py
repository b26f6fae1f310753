"""Point evaluation and point-measure analysis for :class:`~spherepde.grids.sht.SphericalHarmonics`.

Each order m of a band-limited field is a trigonometric polynomial in the colatitude (a cosine
series for even m, a sine series for odd m), obtained exactly from samples on equispaced
colatitudes with the Legendre recursion of :mod:`spherepde.grids.rings`; points are then
evaluated (or a point measure analysed) with real matrix products.  The methods
``SphericalHarmonics.evaluate`` and ``.analyse_points`` call these functions.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from spherepde.grids.rings import fourier_powers, legendre_at_colatitudes

__all__ = ["evaluate", "analyse_points", "dfs_coefficients", "legendre_blocks"]


class HarmonicsLike(Protocol):
    """What these functions read of a :class:`spherepde.grids.sht.SphericalHarmonics` (a protocol,
    so that this module does not import the one that calls it)."""

    lmax: int
    nlm: int
    l: np.ndarray
    m: np.ndarray

    def _coeffs(self, a: Any, name: str, check_finite: bool = True) -> np.ndarray: ...

    def _recursion_tables(self) -> Any: ...


def evaluate(sh: HarmonicsLike, coeffs, lon, lat) -> np.ndarray:
    """:meth:`SphericalHarmonics.evaluate` (its docstring gives the method)."""
    q = sh._coeffs(coeffs, "coeffs")
    lon_a = np.asarray(lon, dtype=np.float64)
    lat_a = np.asarray(lat, dtype=np.float64)
    try:
        lon_a, lat_a = np.broadcast_arrays(lon_a, lat_a)
    except ValueError:
        raise ValueError(
            f"lon and lat must broadcast together, got shapes {lon_a.shape} and {lat_a.shape}"
        ) from None
    if not (np.isfinite(lon_a).all() and np.isfinite(lat_a).all()):
        raise ValueError("lon and lat must be finite")
    pshape = lon_a.shape
    bshape = q.shape[:-1]
    qq = q.reshape(-1, sh.nlm)
    nb = qq.shape[0]
    ce, so = dfs_coefficients(sh, qq)  # (L+1, nb, Me), (L, nb, Mo)
    L = sh.lmax
    me, mo = ce.shape[2], so.shape[2]
    ce_r = ce.reshape(L + 1, -1).view(np.float64)  # (L+1, 2 nb Me)
    so_r = so.reshape(L, -1).view(np.float64) if mo else None
    th = (0.5 * np.pi - lat_a).ravel()
    ph = lon_a.ravel()
    npts = th.size
    out = np.empty((nb, npts))
    chunk = max(64, (1 << 20) // ((L + 1) * max(nb, 4)))
    for a in range(0, npts, chunk):
        b = min(npts, a + chunk)
        et = fourier_powers(th[a:b], L)  # e^{i k θ}, k = 0..L
        el = fourier_powers(ph[a:b], L)  # e^{i m λ}, m = 0..L
        ge = (np.ascontiguousarray(et.real) @ ce_r).view(np.complex128).reshape(b - a, nb, me)
        acc = np.einsum("pbm,pm->bp", ge, el[:, 0::2]).real
        if mo:
            go = (np.ascontiguousarray(et.imag[:, 1:]) @ so_r).view(np.complex128)
            acc += np.einsum("pbm,pm->bp", go.reshape(b - a, nb, mo), el[:, 1::2]).real
        out[:, a:b] = acc
    return out.reshape(bshape + pshape)


def analyse_points(sh: HarmonicsLike, values, lon, lat) -> np.ndarray:
    """:meth:`SphericalHarmonics.analyse_points` (its docstring gives the method)."""
    v = np.asarray(values, dtype=np.float64)
    lon_a = np.asarray(lon, dtype=np.float64).reshape(-1)
    lat_a = np.asarray(lat, dtype=np.float64).reshape(-1)
    if v.ndim < 1 or lon_a.size != v.shape[-1] or lat_a.size != v.shape[-1]:
        raise ValueError(
            f"values (..., P), lon (P,) and lat (P,) must match, got {v.shape}, "
            f"{np.shape(lon)} and {np.shape(lat)}")
    if not (np.isfinite(v).all() and np.isfinite(lon_a).all() and np.isfinite(lat_a).all()):
        raise ValueError("values, lon and lat must be finite")
    bshape = v.shape[:-1]
    vv = v.reshape(-1, v.shape[-1])
    nb, npts = vv.shape
    L = sh.lmax
    even, odd = np.arange(0, L + 1, 2), np.arange(1, L + 1, 2)
    me, mo = even.size, odd.size
    th = 0.5 * np.pi - lat_a
    Ge: np.ndarray = np.zeros((L + 1, 2 * nb * me))  # [k, (b, m, re/im)] : Σ_p v cos(kθ) e^{−imλ}
    Go: np.ndarray = np.zeros((L, 2 * nb * mo))  # [k = 1..L, …]        : Σ_p v sin(kθ) e^{−imλ}
    chunk = max(64, (1 << 20) // ((L + 1) * max(nb, 4)))
    for a in range(0, npts, chunk):
        b = min(npts, a + chunk)
        et = fourier_powers(th[a:b], L)
        el = np.conj(fourier_powers(lon_a[a:b], L))
        ve = np.ascontiguousarray(vv[:, a:b].T[:, :, None] * el[:, None, 0::2])  # (p, nb, me)
        Ge += np.ascontiguousarray(et.real).T @ ve.reshape(b - a, -1).view(np.float64)
        if mo:
            vo = np.ascontiguousarray(vv[:, a:b].T[:, :, None] * el[:, None, 1::2])
            Go += np.ascontiguousarray(et.imag[:, 1:]).T @ vo.reshape(b - a, -1).view(np.float64)
    Ge = Ge.view(np.complex128).reshape(L + 1, nb, me)
    Go = Go.view(np.complex128).reshape(L, nb, mo)
    # H_m(θ_j) on θ_j = 2πj/K, j = 0..L+1 (the rest by parity), times the folding weights
    # (1 at θ = 0, π; 2 between) and 1/K:  H = G_0 + 2 Σ_k G_k cos kθ (even m), 2 Σ_k G_k sin kθ
    K = 2 * L + 2
    J = L + 2
    thj = 2.0 * np.pi * np.arange(J) / K
    fold = np.full(J, 2.0 / K)
    fold[[0, -1]] = 1.0 / K
    kk = np.arange(L + 1)
    ce = 2.0 * np.cos(np.outer(thj, kk))
    ce[:, 0] = 1.0
    H = np.empty((L + 1, J, nb), dtype=np.complex128)  # [m, j, b]
    H[even] = ((fold[:, None] * ce) @ Ge.reshape(L + 1, -1)).reshape(J, nb, me).transpose(2, 0, 1)
    if mo:
        so = 2.0 * np.sin(np.outer(thj, kk[1:]))
        so[-1] = 0.0
        H[odd] = ((fold[:, None] * so) @ Go.reshape(L, -1)).reshape(J, nb, mo).transpose(2, 0, 1)
    # a_lm = Σ_j p_lm(θ_j) H_m(θ_j): one batched (over m) real matrix product per block of the
    # Legendre table (the transpose of what _dfs_coefficients does)
    Hr = np.ascontiguousarray(H).view(np.float64)  # [m, j, (b, re/im)]
    A: np.ndarray = np.zeros((L + 1, L + 1, 2 * nb))  # [m, l, (b, re/im)]
    for j0, T in legendre_blocks(sh, thj):
        A += np.matmul(T, Hr[:, j0:j0 + T.shape[2]])
    A = A.view(np.complex128).transpose(1, 0, 2)  # [l, m, b]
    out = A[sh.l, sh.m].T  # (nb, nlm)
    out[:, sh.m == 0] = out[:, sh.m == 0].real
    return np.ascontiguousarray(out).reshape(bshape + (sh.nlm,))


def legendre_blocks(sh: HarmonicsLike, theta: np.ndarray):
    """Blocks of the table y_lm(cos θ_j) (sin θ_j taken as 0 at θ_j = π), as (j0, T) with
    T[m, l, j] = y_lm(cos θ_{j0+j}) (0 for m > l; grids.rings.legendre_table), ≤ 32 MB each
    (from lmax ≈ 700: 8 columns)."""
    L = sh.lmax
    rec = sh._recursion_tables()
    jc = max(8, min(theta.size, (1 << 22) // (L + 1) ** 2))
    for j0 in range(0, theta.size, jc):
        yield j0, legendre_at_colatitudes(theta[j0:j0 + jc], rec)


def dfs_coefficients(sh: HarmonicsLike, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Colatitude Fourier coefficients of each order: cosine series for even ``m``
    (shape (L+1 [k=0..L], nb, #even m)) and sine series for odd ``m`` (shape (L [k=1..L], nb,
    #odd m)); the factor 2 for ``m > 0`` is included."""
    L = sh.lmax
    nb = q.shape[0]
    Q = np.zeros((L + 1, L + 1, nb), dtype=np.complex128)  # [m, l, batch]
    Q[sh.m, sh.l] = q.T
    Q[0].imag = 0.0  # imaginary parts of m = 0 coefficients are ignored
    Q[1:] *= 2.0
    Qr = Q.view(np.float64)  # [m, l, (batch, re/im)]
    K = 2 * L + 2
    J = L + 2  # samples θ_j = 2π j / K on [0, π]; the rest follow by parity
    th = 2.0 * np.pi * np.arange(J) / K
    F = np.empty((L + 1, J, 2 * nb))  # [m, j, (batch, re/im)]
    for j0, T in legendre_blocks(sh, th):
        F[:, j0:j0 + T.shape[2]] = np.matmul(T.transpose(0, 2, 1), Qr)
    F = F.view(np.complex128)  # [m, j, batch]
    full = np.empty((L + 1, K, nb), dtype=np.complex128)
    full[:, :J] = F
    sign = np.where(np.arange(L + 1) % 2, -1.0, 1.0)[:, None, None]
    full[:, J:] = sign * F[:, 1 : L + 1][:, ::-1]  # F_m(2π − θ) = (−1)^m F_m(θ)
    bk = np.fft.fft(full, axis=1) / K  # [m, k, batch]
    pos = bk[:, 1 : L + 1]
    neg = bk[:, K - 1 : K - L - 1 : -1]  # k = −1..−L
    even = np.arange(0, L + 1, 2)
    odd = np.arange(1, L + 1, 2)
    ce = np.empty((L + 1, nb, even.size), dtype=np.complex128)
    ce[0] = bk[even, 0].T
    ce[1:] = (pos[even] + neg[even]).transpose(1, 2, 0)
    so = (1j * (pos[odd] - neg[odd])).transpose(1, 2, 0).copy()
    return ce, so
