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
  FFT, orders beyond n/2 folded (:func:`ring_synthesis`), and the layout of points on latitude
  rings that uses it (:class:`RingLayout`: per ring, Fourier coefficients in longitude → values
  at the ring's points).

The table functions are elementwise in their points (a point's values do not depend on the other
points); :meth:`RingLayout.synthesise` is not (the path a point takes and the FFT's rounding
depend on its ring), but it gives the same bits whether or not it keeps its tables.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["legendre_recursion", "legendre_table", "legendre_at_colatitudes", "fourier_powers", "ring_synthesis",
           "RingLayout",
           "RING_LON_TOL"]

_TWO_PI = 2.0 * math.pi
#: a ring's longitudes within this (radians) of φ_0 + 2πj/n, j = 0..n−1, are synthesised by an FFT
#: (with the first-order correction of :meth:`RingLayout.synthesise`; actual deviations on the
#: grids' face points are ≤ 1.8e-15)
RING_LON_TOL = 1e-14


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


def legendre_at_colatitudes(theta: np.ndarray, rec) -> np.ndarray:
    """:func:`legendre_table` at colatitudes θ ∈ [0, π] (μ = cos θ, sin θ taken as 0 within
    1e-12 of θ = π): T[m, l, j]."""
    theta = np.asarray(theta, dtype=np.float64)
    s = np.sin(theta)
    s[np.abs(theta - np.pi) < 1e-12] = 0.0
    return legendre_table(np.cos(theta), s, rec)


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


class RingLayout:
    """Points x_p (P, 3) grouped on latitude rings, and the synthesis on them

        g_b(x_p) = Re Σ_{m=0}^{M} F_{b, r(p), m} e^{imφ_p},   φ_p = atan2(y_p, x_p),

    from Fourier coefficients F (B, R, M+1) per ring r (rings: the distinct z of the points,
    sorted; ``mu`` holds them clipped to [−1, 1]).  A ring whose n points sit at φ_0 + 2πj/n + δ_p
    (any order, |δ_p| ≤ :data:`RING_LON_TOL`) is synthesised by two inverse real FFTs of length n,
    the values and the longitude derivative at φ_0 + 2πj/n, and g(φ_p) = g + δ_p g' (the
    neglected term is ≤ δ²/2 Σ m²|F_m|: below 5e-23 Σ|F_m| for M ≤ 1000): O(n log n) per ring.
    The other points are synthesised point by point with e^{imφ_p}, O(M) each, the table kept
    (``keep``, within ``table_bytes``) or computed in chunks per call — bitwise the same values.
    """

    def __init__(self, x: np.ndarray, ring: np.ndarray, mu: np.ndarray, M: int, lon_tol: float,
                 keep: bool, table_bytes: int) -> None:
        P = x.shape[0]
        self.M, self.npoints, self.ring = int(M), P, ring
        self.mu = np.clip(mu, -1.0, 1.0)
        phi = np.arctan2(x[:, 1], x[:, 0])
        R = mu.size
        m = np.arange(self.M + 1)
        by_ring = np.argsort(ring, kind="stable")
        starts = np.searchsorted(ring[by_ring], np.arange(R + 1))
        groups: dict[int, list[tuple[int, float, np.ndarray]]] = {}
        direct: list[np.ndarray] = []
        for r in range(R):
            idx = by_ring[starts[r]:starts[r + 1]]
            p = phi[idx]
            n = idx.size
            t = np.mod(p - p[0], _TWO_PI) * (n / _TWO_PI)  # position in units of 2π/n
            j = np.rint(t)
            dev = (t - j) * (_TWO_PI / n)  # φ_p − (p[0] + 2π j_p / n), to rounding
            j = j.astype(np.int64) % n
            if n > 1 and np.abs(dev).max() <= lon_tol and np.array_equal(np.sort(j), np.arange(n)):
                pts = np.empty(n, dtype=np.int64)
                pts[j] = idx  # the point at φ_0 + 2π j / n
                groups.setdefault(n, []).append((r, p[0], pts))
            else:
                direct.append(idx)
        #: [(n, rings (R_g,), e^{imφ_0} (R_g, M+1), points (R_g·n,), δ (R_g, n))]
        self.fft_groups = []
        for n, gs in groups.items():
            gs.sort(key=lambda g: g[2][0])  # by first point: ring-major points need no scatter
            pts = np.stack([g[2] for g in gs])
            phi0 = np.array([g[1] for g in gs])
            # δ = φ_p − φ_{0} − 2πj/n, wrapped to (−π, π]
            delta = phi[pts] - phi0[:, None] - _TWO_PI * np.arange(n) / n
            delta -= _TWO_PI * np.rint(delta / _TWO_PI)
            self.fft_groups.append((n, np.array([g[0] for g in gs]), np.exp(1j * np.outer(phi0, m)),
                                    pts.reshape(-1), delta))
        #: the points synthesised one by one, and their longitudes
        self.direct = np.concatenate(direct) if direct else np.zeros(0, dtype=np.int64)
        self._phi_direct = phi[self.direct]
        self._E = None
        if keep and 16 * (self.M + 1) * self.direct.size <= table_bytes:
            self._E = fourier_powers(self._phi_direct, self.M)
        # the points are the rings of one FFT group in order (e.g. FFSLSphere.points): no scatter
        self.in_order = (self.direct.size == 0 and len(self.fft_groups) == 1
                         and np.array_equal(self.fft_groups[0][3], np.arange(P)))
        self.nbytes = int(sum(g[2].nbytes + g[3].nbytes + g[4].nbytes for g in self.fft_groups)
                          + self.direct.nbytes + self._phi_direct.nbytes
                          + (0 if self._E is None else self._E.nbytes))

    @classmethod
    def build(cls, x: np.ndarray, M: int, *, max_fraction: float = 0.25,
              lon_tol: float = RING_LON_TOL, keep: bool = True,
              table_bytes: int = 64 * 2**20) -> "RingLayout | None":
        """The layout of the points x (P, 3) for orders m ≤ M, or None when they lie on more
        than ``max_fraction`` × P distinct latitudes (or P = 0)."""
        x = np.asarray(x, dtype=np.float64)
        P = x.shape[0]
        zs, ring = np.unique(x[:, 2], return_inverse=True)
        if P == 0 or zs.size > max_fraction * P:
            return None
        return cls(x, ring.reshape(-1), zs, M, lon_tol, keep, table_bytes)

    @property
    def n_rings(self) -> int:
        return self.mu.size

    def synthesise(self, F: np.ndarray) -> np.ndarray:
        """g (B, P) from ring coefficients F (B, R, M+1) complex (see the class docstring)."""
        B = F.shape[0]
        out = np.empty((B, self.npoints))
        ik = 1j * np.arange(self.M + 1)
        for n, rings, rot, pts, delta in self.fft_groups:
            X = F[:, rings] * rot  # (B, R_g, M+1): the coefficients at φ_0 + 2πj/n
            g = ring_synthesis(X, n)
            g += delta * ring_synthesis(X * ik, n)  # first order in δ_p
            if self.in_order:
                return g.reshape(B, -1)
            out[:, pts] = g.reshape(B, -1)
        if self.direct.size:
            # gathered per point and contracted with einsum: many tiny per-ring BLAS calls were
            # 5–20× slower (multithreaded OpenBLAS on a shared machine)
            Fr = np.ascontiguousarray(F.real.transpose(1, 0, 2))  # (R, B, M+1)
            Fi = np.ascontiguousarray(F.imag.transpose(1, 0, 2))
            rr = self.ring[self.direct]
            step = max(64, (1 << 21) // (B * (self.M + 1)))
            for a in range(0, self.direct.size, step):
                sl = slice(a, a + step)
                e = fourier_powers(self._phi_direct[sl], self.M) if self._E is None else self._E[sl]
                out[:, self.direct[sl]] = (np.einsum("pm,pbm->bp", e.real, Fr[rr[sl]])
                                           - np.einsum("pm,pbm->bp", e.imag, Fi[rr[sl]]))
        return out
