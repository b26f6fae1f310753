"""Tables on latitude rings, shared by every spherical-harmonic evaluation off the grid.

One implementation of each of the three pieces that the point evaluation of
:class:`~spherepde.grids.sht.SphericalHarmonics`, the noise field's ring synthesis
(:class:`~spherepde.noise.field.LatitudeRings`) and the spectral attention sums
(:mod:`spherepde.dynamics.attention`) need:

* the orthonormal associated Legendre functions without the Condon–Shortley phase (the
  convention of :mod:`spherepde.grids.sht`), by the stable three-term recursion

      y_00 = 1/√(4π),   y_mm = c_m sinθ y_{m−1,m−1},   c_m = √((2m+1)/(2m)),
      y_lm = a_lm (μ y_{l−1,m} − b_lm y_{l−2,m}),   μ = cos θ,
      a_lm = √((4l² − 1)/(l² − m²)),   b_lm = √(((l−1)² − m²)/(4(l−1)² − 1)),

  so that ∫ |y_lm(cos θ) e^{imλ}|² dσ = 1 (:func:`legendre_recursion`, :func:`legendre_table`);
* e^{ikx}, k = 0..n, by repeated doubling (:func:`fourier_powers`);
* the synthesis Re Σ_m X_m e^{2πimj/n} on a ring of n equispaced longitudes by an inverse real
  FFT, orders beyond n/2 folded (:func:`ring_synthesis`).

Every function is elementwise in its points: a point's values do not depend on the other points
(the attention's target cache relies on this for bitwise-equal results).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["legendre_recursion", "legendre_table", "fourier_powers", "ring_synthesis"]


def legendre_recursion(L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coefficients (a, b, c) of the recursion in the module docstring, up to degree L.

    a, b : (L+1, L+1) arrays indexed [l, m], zero where m ≥ l (a) and m ≥ l − 1 (b);
    c : (L,) array, c[m − 1] = √((2m+1)/(2m)) for m = 1..L.
    """
    L = int(L)
    ll = np.arange(L + 1, dtype=np.float64)[:, None]
    mm = np.arange(L + 1, dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.sqrt((4.0 * ll**2 - 1.0) / (ll**2 - mm**2))
        b = np.sqrt(((ll - 1.0) ** 2 - mm**2) / (4.0 * (ll - 1.0) ** 2 - 1.0))
    k = np.arange(1, L + 1, dtype=np.float64)
    return np.where(mm < ll, a, 0.0), np.where(mm < ll - 1, b, 0.0), np.sqrt((2.0 * k + 1.0) / (2.0 * k))


def legendre_table(mu: np.ndarray, s: np.ndarray, rec) -> np.ndarray:
    """y_lm(μ_j) for l, m ≤ L as T[m, l, j] (zero for m > l), from μ_j = cos θ_j and
    s_j = sin θ_j ≥ 0 (the caller computes s as accurately as it can: from θ, or √((1−μ)(1+μ)))
    and ``rec`` = :func:`legendre_recursion` (L) — shape (L+1, L+1, len(μ)).  Values below the
    smallest normal float flush to zero without a warning."""
    a, b, c = rec
    L = a.shape[0] - 1
    mu = np.asarray(mu, dtype=np.float64)
    T = np.zeros((L + 1, L + 1, mu.size))  # [m, l, j]
    T[0, 0] = 1.0 / math.sqrt(4.0 * math.pi)
    with np.errstate(under="ignore"):
        for l in range(1, L + 1):
            T[:l, l] = a[l, :l, None] * (mu * T[:l, l - 1]
                                         - (b[l, :l, None] * T[:l, l - 2] if l > 1 else 0.0))
            T[l, l] = c[l - 1] * s * T[l - 1, l - 1]
    return T


def fourier_powers(x: np.ndarray, n: int) -> np.ndarray:
    """``e^{i k x}`` for ``k = 0..n``, shape (len(x), n+1), by doubling (error ~ log2(n) ulp)."""
    out = np.empty((x.size, n + 1), dtype=np.complex128)
    out[:, 0] = 1.0
    s = 1
    while s <= n:
        e = np.exp(1j * s * x)
        w = min(s, n + 1 - s)
        np.multiply(out[:, :w], e[:, None], out=out[:, s : s + w])
        s *= 2
    return out


def ring_synthesis(X: np.ndarray, n: int) -> np.ndarray:
    """Re Σ_{m=0}^{M} X_m e^{2πi m j / n} for j = 0..n−1: X (…, M + 1) complex → (…, n) real,
    by an inverse real FFT (orders m > n/2 folded onto the bins m mod n, conjugated above n/2)."""
    M = X.shape[-1] - 1
    h = n // 2
    Y = np.zeros(X.shape[:-1] + (h + 1,), dtype=complex)
    if M <= h:
        Y[..., : M + 1] = X
    else:
        for m in range(M + 1):
            k = m % n
            if k <= h:
                Y[..., k] += X[..., m]
            else:
                Y[..., n - k] += np.conj(X[..., m])
    w = np.full(h + 1, 0.5 * n)  # irfft(Z)_j = (Z_0 + 2 Σ_{0<k<n/2} Re Z_k ω^{kj} + Z_{n/2} (−1)^j) / n
    w[0] = n
    if n % 2 == 0:
        w[h] = n
    return np.fft.irfft(Y * w, n=n, axis=-1)
