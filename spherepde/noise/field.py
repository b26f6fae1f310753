"""The MLP noise as a Gaussian field on S² or S¹: truncated Karhunen–Loève expansion (docs/equations.md).

With real orthonormal spherical harmonics Y_{n,i} (∫ Y² dσ = 1) and the kernel's
coefficients C_n (:meth:`NoiseKernel.kl_coefficients`),

    G(x)    = Σ_{n ≤ n_max} Σ_i sqrt(C_n) Y_{n,i}(x) ξ_{n,i},        ξ_{n,i} ~ N(0, I_d),
    W(t, x) = Σ_{n ≤ n_max} Σ_i sqrt(C_n) Y_{n,i}(x) B_{n,i}(t),      B_{n,i} Brownian in R^d,

so E[G(x) G(y)ᵀ] = κ_{n_max}(⟨x, y⟩) I_d, the kernel truncated at degree n_max, which keeps the
fraction :attr:`NoiseField.captured_variance` of κ(1).  The tangent noise velocity that moves a
token at x is P_x W(dt, x).

Coefficient layout (shape ``(n_coefficients, d)``, the leading axis ordered by degree so that a
larger n_max keeps the low modes: see :class:`~spherepde.noise.brownian.BrownianPath`):

* S² (d = 3): degree n holds 2n + 1 entries — m = 0, then (cos, sin) pairs for m = 1..n — the
  real harmonics Y_n0, √2 Re Y_nm, √2 Im Y_nm of the complex orthonormal basis of
  :class:`~spherepde.grids.sht.SphericalHarmonics` (no Condon–Shortley phase);
* S¹ (d = 2): degree 0 is 1/√(2π); degree n ≥ 1 holds cos(nθ)/√π, sin(nθ)/√π.

Evaluating at the same points again (a grid stepper asks for the noise at its fixed face points
every step): the second call in a row with equal points builds a table for those points, and
later calls with them use it.  On S², points on few latitude rings (every point of a ring has the
same z; the face points of :class:`~spherepde.solvers.eulerian.transport.FFSLSphere`, ~2 nlat
rings of 2 nlat equispaced longitudes) are evaluated ring by ring (:class:`LatitudeRings`): per
ring r the Fourier coefficients in longitude

    F_{r,0} = Σ_n a_{n,0} y_n0(μ_r),   F_{r,m} = √2 Σ_n y_nm(μ_r) (a^c_{n,m} − i a^s_{n,m}),  m ≥ 1,

(a = sqrt(C_n) ξ, a^c/a^s the cos/sin entries, y_nm the normalised associated Legendre functions
of :class:`~spherepde.grids.sht.SphericalHarmonics`, μ_r = z_r), then G(x_p) = Re Σ_m F_{r,m}
e^{i m φ_p}: an inverse real FFT on a ring of equispaced longitudes, a product with tabulated
e^{i m φ_p} otherwise — O(rings · K + P log n_lon) per call instead of O(P · K),
K = (n_max + 1)².  Other repeated points (scattered, on S¹) get the tabulated basis Y_{n,i}(x_p)
(when it takes at most :data:`BASIS_CACHE_BYTES`): one matrix product per call.  Both agree with
the spectral evaluation of new points (``SphericalHarmonics.evaluate``) to round-off (on S¹ the
same bits).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from spherepde.grids.geometry import project_tangent
from spherepde.grids.rings import RingLayout, legendre_at_colatitudes, legendre_recursion

_TWO_PI = 2.0 * math.pi
#: largest table kept for repeated evaluation points (dense basis: points × coefficients × 8 bytes;
#: latitude rings: :attr:`LatitudeRings.nbytes`); 0 evaluates afresh every call
BASIS_CACHE_BYTES = 64 * 2**20
#: points on at most this fraction × P distinct latitudes are evaluated ring by ring
RING_FRACTION = 0.25

if TYPE_CHECKING:
    from spherepde.grids.sht import SphericalHarmonics


class NoiseField:
    """Truncated KL expansion of the noise field of ``kernel`` on S^{d−1}, d = 2 or 3.

    Parameters
    ----------
    kernel : NoiseKernel
        Gives d (2: S¹, 3: S²), C_n and κ(1).
    nmax : int, optional
        Truncation degree (≥ 0).
    variance_fraction : float in (0, 1), optional
        Choose the smallest n_max keeping at least this fraction of the variance κ(1).
        Exactly one of ``nmax`` and ``variance_fraction`` may be given; default fraction 0.99.
    """

    def __init__(self, kernel, *, nmax: int | None = None, variance_fraction: float | None = None):
        d = int(kernel.d)
        if d not in (2, 3):
            raise ValueError(f"a noise field on a grid needs d = 2 (S¹) or d = 3 (S²), got kernel.d = {d}; "
                             "in higher d use the exact Gaussian sampler of the particle SDE")
        if nmax is not None and variance_fraction is not None:
            raise ValueError("give nmax or variance_fraction, not both")
        if nmax is None:
            fraction = 0.99 if variance_fraction is None else variance_fraction
            nmax = kernel.truncation_degree(fraction)  # validates the fraction
        if isinstance(nmax, bool) or not isinstance(nmax, (int, np.integer)) or nmax < 0:
            raise ValueError(f"nmax must be an int ≥ 0, got {nmax!r}")
        self.kernel = kernel
        self.d = d
        self.nmax = int(nmax)
        c = np.asarray(kernel.kl_coefficients(self.nmax), dtype=float)
        self.coefficients = c  # C_n, n = 0..nmax
        self.captured_variance = float(kernel.captured_variance(self.nmax))
        if d == 3:
            degree = np.concatenate([np.full(2 * n + 1, n) for n in range(self.nmax + 1)])
        else:
            degree = np.concatenate([[0], np.repeat(np.arange(1, self.nmax + 1), 2)])
        self.degree = degree
        self.sqrt_c = np.sqrt(c[degree])
        self.n_coefficients = int(degree.size)
        self.shape = (self.n_coefficients, d)
        #: κ_{n_max}(1) = Σ C_n N_n / ω: the variance of each component of G at a point
        self.variance = float(np.sum(self.sqrt_c ** 2) / (4 * math.pi if d == 3 else _TWO_PI))
        self._sht: SphericalHarmonics | None = None  # S² only (set by _setup_sphere)
        self._last_x: np.ndarray | None = None  # the points of the last evaluation (a copy)
        # basis tabulated at _last_x: (n_coefficients, P) on S², (P, n_coefficients) on S¹
        self._basis: np.ndarray | None = None
        self._rings: LatitudeRings | None = None   # LatitudeRings of _last_x (S²)
        self._rings_checked = False  # whether _last_x was searched for latitude rings
        if d == 3:
            self._setup_sphere()

    def __repr__(self) -> str:
        return (f"NoiseField(d={self.d}, nmax={self.nmax}, captured_variance="
                f"{self.captured_variance:.6f})")

    def to_dict(self) -> dict:
        """Parameters to write to output files."""
        return {"d": self.d, "nmax": self.nmax, "captured_variance": self.captured_variance,
                "variance": self.variance}

    # ---- S² ---------------------------------------------------------------------------
    def _setup_sphere(self) -> None:
        from spherepde.grids import GaussGrid
        from spherepde.grids.sht import SphericalHarmonics

        lmax = max(self.nmax, 1)
        sht = SphericalHarmonics(GaussGrid(max(4, 2 * (lmax // 2 + 1))), lmax=lmax, backend="pyshtools")
        self._sht = sht
        # real index k → (complex index, part): m = 0 real; m > 0: Re q = ξ_c/√2, Im q = −ξ_s/√2
        # (a real field is q_l0 Y_l0 + Σ_{m>0} 2 Re(q_lm Y_lm), see SphericalHarmonics.evaluate)
        cidx, part, order = [], [], []
        for n in range(self.nmax + 1):
            cidx.append(int(sht.index(n, 0)))
            part.append(0)
            order.append(0)
            for m in range(1, n + 1):
                j = int(sht.index(n, m))
                cidx += [j, j]
                part += [1, 2]
                order += [m, m]
        self._cidx = np.array(cidx)
        self._part = np.array(part)  # 0: m = 0, 1: cos (√2 Re Y_nm), 2: sin (√2 Im Y_nm)
        self._order = np.array(order)  # m of each real index

    def _complex_coefficients(self, xi: np.ndarray) -> np.ndarray:
        """(…, n_coefficients, 3) real KL coefficients (already scaled) → (…, 3, nlm) complex."""
        lead = xi.shape[:-2]
        assert self._sht is not None, "S² only"
        q = np.zeros(lead + (3, self._sht.nlm), dtype=np.complex128)
        a = np.moveaxis(xi, -1, -2)  # (…, 3, ncoef)
        s = 1.0 / math.sqrt(2.0)
        p0, p1, p2 = (self._part == 0), (self._part == 1), (self._part == 2)
        q[..., self._cidx[p0]] = a[..., p0]
        q[..., self._cidx[p1]] += s * a[..., p1]
        q[..., self._cidx[p2]] += -1j * s * a[..., p2]
        return q

    # ---- evaluation -------------------------------------------------------------------
    def _check_coefficients(self, xi) -> np.ndarray:
        xi = np.asarray(xi, dtype=float)
        if xi.shape[-2:] != self.shape:
            raise ValueError(f"coefficients must have shape (..., {self.shape[0]}, {self.shape[1]}), "
                             f"got {xi.shape}")
        return xi

    def values(self, xi, x) -> np.ndarray:
        """Σ sqrt(C_n) Y_{n,i}(x) ξ_{n,i}: the R^d-valued field at points.

        xi : (…, n_coefficients, d) standard coefficients (ξ for G, Brownian increments ΔB for
        W(dt, ·));  x : (P, d) unit vectors.  Returns (…, P, d).
        """
        xi = self._check_coefficients(xi) * self.sqrt_c[:, None]
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (P, {self.d}), got {x.shape}")
        basis = self._cached_basis(x)
        if self.d == 3:
            if isinstance(basis, LatitudeRings):
                return basis.values(xi)
            if basis is not None:  # (…, 3, K) @ (K, P) → (…, 3, P)
                return np.moveaxis(np.matmul(np.swapaxes(xi, -1, -2), basis), -2, -1)
            lon, lat = self._lonlat(x)
            assert self._sht is not None  # d == 3
            vals = self._sht.evaluate(self._complex_coefficients(xi), lon, lat)  # (…, 3, P)
            return np.moveaxis(vals, -2, -1)
        if basis is None:
            basis = self._circle_basis(x)
        return np.einsum("pk,...kd->...pd", basis, xi)

    @staticmethod
    def _lonlat(x: np.ndarray):
        return np.arctan2(x[:, 1], x[:, 0]), np.arcsin(np.clip(x[:, 2], -1.0, 1.0))

    def _circle_basis(self, x: np.ndarray) -> np.ndarray:
        """(P, n_coefficients): 1/√(2π), cos(nθ)/√π, sin(nθ)/√π at the points of S¹."""
        theta = np.arctan2(x[:, 1], x[:, 0])
        basis = np.empty((x.shape[0], self.n_coefficients))
        basis[:, 0] = 1.0 / math.sqrt(_TWO_PI)
        n = np.arange(1, self.nmax + 1)
        basis[:, 1::2] = np.cos(np.outer(theta, n)) / math.sqrt(math.pi)
        basis[:, 2::2] = np.sin(np.outer(theta, n)) / math.sqrt(math.pi)
        return basis

    def _cached_basis(self, x: np.ndarray):
        """The table for evaluating at x when x equals the points of the previous call, else None
        (remembering x).  Built on the second call in a row: on S² the :class:`LatitudeRings` of x
        when x lies on few latitude rings, else the dense basis (S²: (K, P), S¹: (P, K)) if it fits
        in BASIS_CACHE_BYTES.  A table larger than BASIS_CACHE_BYTES (read at every call) is not
        used."""
        last = self._last_x
        if last is None or last.shape != x.shape or not np.array_equal(last, x):
            self._last_x = np.array(x, dtype=float, copy=True)
            self._basis = self._rings = None
            self._rings_checked = False
            return None
        if self.d == 3 and not self._rings_checked:
            self._rings_checked = True
            self._rings = LatitudeRings.build(self, x)
        if self._rings is not None:
            return self._rings if self._rings.nbytes <= BASIS_CACHE_BYTES else None
        if x.shape[0] * self.n_coefficients * 8 > BASIS_CACHE_BYTES:
            return None
        if self._basis is None:
            if self.d == 3:  # Y_k(x_p), k = real index: the evaluation of one-hot coefficients
                s = 1.0 / math.sqrt(2.0)
                assert self._sht is not None
                q = np.zeros((self.n_coefficients, self._sht.nlm), dtype=np.complex128)
                k = np.arange(self.n_coefficients)
                q[k, self._cidx] = np.where(self._part == 0, 1.0, np.where(self._part == 1, s, -1j * s))
                self._basis = self._sht.evaluate(q, *self._lonlat(x))  # (K, P)
            else:
                self._basis = self._circle_basis(x)
        return self._basis

    def prime(self, x) -> None:
        """Do to the evaluation cache what an evaluation at the points ``x`` (P, d) does, without
        evaluating.  The first evaluation at new points and the later ones at the same points take
        different (equally accurate) arithmetic — the tables of :meth:`_cached_basis` — so the
        last bits of a value depend on whether the previous call was at the same points; a run
        restarted midway primes the field at the points its steps evaluate, and its next steps then
        give the bits of the uninterrupted run."""
        self._cached_basis(np.asarray(x, dtype=float))

    def tangent_values(self, xi, x) -> np.ndarray:
        """P_x Σ sqrt(C_n) Y_{n,i}(x) ξ_{n,i}, shape (…, P, d): the velocity the field gives a token."""
        return project_tangent(np.asarray(x, float), self.values(xi, x))

    def sample(self, rng: np.random.Generator, size: tuple = ()) -> np.ndarray:
        """Standard coefficients ξ ~ N(0, I) of ``size`` realisations: shape size + (n_coefficients, d)."""
        return rng.standard_normal(tuple(size) + self.shape)


class LatitudeRings:
    """Ring-wise evaluation of a :class:`NoiseField` on S² at fixed points on latitude rings.

    The points x_p (P, 3) are grouped by exact z (:class:`~spherepde.grids.rings.RingLayout`: a
    ring r at μ_r = z_r, colatitude θ_r = π/2 − arcsin μ_r as in ``SphericalHarmonics.evaluate``;
    longitudes φ_p = atan2(y, x)).  Per call, with a = sqrt(C_n) ξ (…, K, 3) and y_nm the
    normalised associated Legendre functions (no Condon–Shortley phase, ∫ |y_nm e^{imφ}|² dσ = 1)
    tabulated once per ring,

        F_{r,0} = Σ_n a_{n,0} y_n0(μ_r),   F_{r,m} = √2 Σ_n y_nm(μ_r) (a^c_{n,m} − i a^s_{n,m}),
        G(x_p)  = Re Σ_{m=0}^{n_max} F_{r(p),m} e^{i m φ_p}

    (the real basis of :class:`NoiseField`: √2 y_nm cos mφ, √2 y_nm sin mφ).  Forming F costs
    O(rings · n_max²) per component: one matrix product per order m, batched; the synthesis is
    the layout's (an inverse real FFT per ring of equispaced longitudes, O(n_max) per point
    elsewhere).
    """

    def __init__(self, field: NoiseField, layout) -> None:
        L = field.nmax
        self.nmax = L
        self.layout = layout
        theta = 0.5 * math.pi - np.arcsin(layout.mu)
        T = legendre_at_colatitudes(theta, legendre_recursion(L))  # [m, n, r]
        self._legendre = np.ascontiguousarray(T.transpose(0, 2, 1))  # (L+1 [m], R, L+1 [n])
        # real index k → (m, n, re/im, factor) of its term in F_{r,m}
        self._m = field._order
        self._n = field.degree
        self._reim = (field._part == 2).astype(int)
        self._factor = np.choose(field._part, [1.0, math.sqrt(2.0), -math.sqrt(2.0)])
        self.nbytes = int(self._legendre.nbytes + layout.nbytes)

    @property
    def n_rings(self) -> int:
        return self.layout.n_rings

    @classmethod
    def build(cls, field: NoiseField, x: np.ndarray):
        """The rings of the points x (P, 3), or None when they lie on more than
        RING_FRACTION × P distinct latitudes."""
        layout = RingLayout.build(x, field.nmax, max_fraction=RING_FRACTION,
                                  table_bytes=BASIS_CACHE_BYTES)
        return None if layout is None else cls(field, layout)

    def ring_coefficients(self, a: np.ndarray) -> np.ndarray:
        """F (B, R, n_max + 1) complex from a (K, B) (the columns: real coefficient vectors)."""
        L = self.nmax
        B = a.shape[1]
        Q = np.zeros((L + 1, L + 1, B, 2))  # [m, n, column, re/im]
        Q[self._m, self._n, :, self._reim] = self._factor[:, None] * a
        F = np.matmul(self._legendre, Q.reshape(L + 1, L + 1, 2 * B))  # [m, r, (column, re/im)]
        return F.view(np.complex128).transpose(2, 1, 0)

    def values(self, a: np.ndarray) -> np.ndarray:
        """G at the points: a (…, K, 3) scaled coefficients sqrt(C_n) ξ → (…, P, 3)."""
        lead, K = a.shape[:-2], a.shape[-2]
        cols = np.moveaxis(a.reshape((-1, K, 3)), 0, 1).reshape(K, -1)  # column b·3 + c
        out = self.layout.synthesise(self.ring_coefficients(cols))
        return np.swapaxes(out.reshape(lead + (3, self.layout.npoints)), -1, -2)
