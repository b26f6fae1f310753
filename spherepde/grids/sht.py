"""Spherical-harmonic transforms on a :class:`~spherepde.grids.gauss.GaussGrid`.

A thin, fast wrapper around `shtns <https://nschaeff.bitbucket.io/shtns/>`_, with a
pure-pyshtools/numpy fallback that reproduces shtns's conventions to round-off.

Conventions
-----------
Grid
    Fields are real arrays of shape ``(..., nlat, nlon)`` on the Gauss grid: rows north to
    south (``lat[0] ≈ +90°``), column ``i`` at longitude ``λ_i = 2π i / nlon``, ``nlon = 2 nlat``.
    This is shtns's ``sht_gauss | SHT_PHI_CONTIGUOUS`` layout, so no reordering is done.
Harmonics
    Complex, **orthonormal** on the unit sphere (``∫ |Y_lm|² dσ = 1``) and **without** the
    Condon–Shortley phase::

        Y_lm(λ, φ) = y_lm(sin φ) e^{i m λ},   y_mm(μ) = +sqrt((2m+1)!!/(4π (2m)!!)) (1−μ²)^{m/2} > 0

    i.e. ``Y_lm = (−1)^m × scipy.special.sph_harm_y(l, m, θ, λ)`` for ``m ≥ 0`` (θ = colatitude).
Coefficients
    Complex arrays of shape ``(..., nlm)`` in shtns order (``m``-major: index
    ``m (2 lmax + 1 − m) / 2 + l``), orders ``0 ≤ m ≤ l ≤ lmax`` only.  A real field is::

        f = Σ_l [ q_l0 Y_l0 + 2 Re Σ_{m>0} q_lm Y_lm ]

    The imaginary parts of the ``m = 0`` coefficients are ignored on synthesis (and are zero on
    analysis).  ``q_00 = sqrt(4π) × mean(f)``.
Vectors
    Tangent vector fields are given by their (east, north) components ``(u, v)``.  The
    spheroidal/toroidal scalars ``(S, T)`` are those of shtns::

        u_vec = ∇S − r̂ × ∇T  (= ∇S + ∇×(T r̂))
        u = (1/cos φ) ∂S/∂λ + ∂T/∂φ,      v = ∂S/∂φ − (1/cos φ) ∂T/∂λ

    so ``div u_vec = ∇²S`` and the vorticity ``r̂·∇×u_vec = −∇²T`` (the usual stream
    function is ``ψ = −T``).  shtns itself works with ``(v_θ, v_φ) = (−v, u)`` (θ = colatitude);
    the sign flip is done here.  The degree-0 parts ``S_00, T_00`` are always zero.

Backends
--------
``"shtns"`` (default when importable and ``nlat >= 32``) and ``"pyshtools"`` (scalar transforms
by ``pyshtools.expand.SHExpandGLQ``/``MakeGridGLQ`` after exact FFT resampling of each latitude
row from ``2 nlat`` to pyshtools' ``2 nlat − 1`` longitudes; vector transforms by
``pyshtools.legendre.PlmON_d1`` tables + numpy FFTs + Gauss quadrature).  Both give the same
numbers to ~1e-13 relative.  shtns terminates the whole process (``exit()``) on parameters it
dislikes, e.g. ``nlat < 32``; this module never hands it such parameters.

The backends live in :mod:`spherepde.grids.sht_backends` (with shtns's settings
``SHTNS_NTHREADS`` and ``SHTNS_POLAR_OPT``), point evaluation in :mod:`spherepde.grids.sht_points`.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from spherepde.grids import sht_points as _points
from spherepde.grids.gauss import GaussGrid
from spherepde.grids.sht_backends import (
    _FOUR_PI,
    _PYSHTOOLS_CACHE,
    BACKENDS,
    SHTNS_MIN_NLAT,
    SHTNS_NTHREADS,
    SHTNS_POLAR_OPT,
    _lm_arrays,
    _PyshtoolsBackend,
    _ShtnsBackend,
    shtns_available,
)
from spherepde.grids.rings import legendre_recursion

__all__ = ["SphericalHarmonics", "BACKENDS", "SHTNS_MIN_NLAT", "SHTNS_NTHREADS", "SHTNS_POLAR_OPT",
           "shtns_available"]

_warned_no_shtns = False  # the fallback warning is given once per process


# ----------------------------------------------------------------------------------------------
# the public class
# ----------------------------------------------------------------------------------------------
class SphericalHarmonics:
    """Spherical-harmonic transforms on a Gauss grid (see the module docstring for conventions).

    Parameters
    ----------
    grid : GaussGrid
        The grid; fields have shape ``(..., grid.nlat, grid.nlon)``.
    lmax : int, optional
        Spectral truncation, ``0 < lmax <= grid.lmax`` (default ``grid.lmax = nlat − 1``, for
        which analysis of any band-limited field is exact).
    backend : {"auto", "shtns", "pyshtools"}
        ``"auto"`` uses shtns when it is importable and ``grid.nlat >= 32``, else pyshtools
        (warning once per process if the reason is that shtns is missing).

    Attributes
    ----------
    grid, lmax, backend : GaussGrid, int, str
    nlm : int
        Number of coefficients, ``(lmax+1)(lmax+2)/2``.
    l, m : ndarray of int, shape (nlm,)
        Degree and order of each coefficient (read-only).
    shape : tuple
        ``(nlat, nlon)``.

    Notes
    -----
    Every method accepts extra leading batch dimensions (``(..., nlat, nlon)`` fields,
    ``(..., nlm)`` coefficients) and returns new arrays; inputs are never modified.  Inputs
    are validated: a wrong shape raises ``ValueError`` naming the argument and the expected
    shape; NaN or inf in an input of a transform or of ``evaluate`` raises ``ValueError``
    (``laplacian``, ``inverse_laplacian`` and ``to_pyshtools`` only rescale and skip that check).
    Inputs of another dtype or memory layout are converted (one copy); the shtns scalar
    transforms add no copy for C-contiguous float64 fields and complex128 coefficients.

    The shtns transform objects are cached per ``(nlat, lmax, threads)`` and shared between
    instances.
    """

    def __init__(self, grid: GaussGrid, lmax: int | None = None, backend: str = "auto") -> None:
        if not isinstance(grid, GaussGrid):
            raise TypeError(f"grid must be a GaussGrid, got {type(grid).__name__}")
        if lmax is None:
            lmax = grid.lmax
        if isinstance(lmax, bool) or not isinstance(lmax, (int, np.integer)):
            raise TypeError(f"lmax must be an int or None, got {type(lmax).__name__}")
        lmax = int(lmax)
        if not 0 < lmax <= grid.lmax:
            raise ValueError(f"lmax must satisfy 0 < lmax <= grid.lmax = {grid.lmax}, got lmax={lmax}")
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ValueError(f"unknown backend={backend!r}; allowed: {', '.join(map(repr, BACKENDS))}")

        nlat = grid.nlat
        if backend == "auto":
            if nlat < SHTNS_MIN_NLAT:
                backend = "pyshtools"
            elif shtns_available():
                backend = "shtns"
            else:
                global _warned_no_shtns
                if not _warned_no_shtns:
                    _warned_no_shtns = True
                    warnings.warn(
                        "shtns is not available; using the slower pyshtools backend for "
                        "spherical-harmonic transforms",
                        UserWarning,  # not RuntimeWarning: the test suite makes those errors
                        stacklevel=2,
                    )
                backend = "pyshtools"
        if backend == "shtns":
            if nlat < SHTNS_MIN_NLAT:
                raise ValueError(
                    f"backend='shtns' needs grid.nlat >= {SHTNS_MIN_NLAT} (shtns would abort the "
                    f"process), got nlat={nlat}; use backend='pyshtools' or 'auto'"
                )
            if not shtns_available():
                raise ImportError("backend='shtns' requested but shtns cannot be imported")
            impl: Any = _ShtnsBackend(nlat, lmax)
        else:
            key = (nlat, lmax)
            impl = _PYSHTOOLS_CACHE.get(key)
            if impl is None:
                impl = _PYSHTOOLS_CACHE[key] = _PyshtoolsBackend(nlat, lmax)

        self.grid = grid
        self.lmax = lmax
        self.backend = backend
        self._impl = impl
        self._analyse = impl.analyse
        self._synthesise = impl.synthesise
        self.nlat, self.nlon = nlat, grid.nlon
        self.shape = (nlat, grid.nlon)
        l, m = _lm_arrays(lmax)
        l.setflags(write=False)
        m.setflags(write=False)
        self.l, self.m = l, m
        self.nlm = int(l.size)
        self._ll1 = l * (l + 1.0)  # l(l+1)
        with np.errstate(divide="ignore"):
            inv = -1.0 / self._ll1
        inv[0] = 0.0
        self._inv_lap = inv
        self._dfs_tables: tuple | None = None

    def __repr__(self) -> str:
        return (
            f"SphericalHarmonics(GaussGrid({self.nlat}), lmax={self.lmax}, "
            f"backend={self.backend!r})"
        )

    # ---- indexing ----------------------------------------------------------------------
    def index(self, l, m):
        """Position of coefficient ``(l, m)`` (shtns's ``sh.idx(l, m)``); broadcasts over arrays.

        Raises ``ValueError`` unless ``0 <= m <= l <= lmax``.
        """
        la, ma = np.asarray(l), np.asarray(m)
        if la.dtype.kind not in "iu" or ma.dtype.kind not in "iu":
            raise TypeError("l and m must be integers")
        if np.any((ma < 0) | (ma > la) | (la > self.lmax)):
            raise ValueError(f"need 0 <= m <= l <= lmax={self.lmax}, got l={l}, m={m}")
        idx = ma * (2 * self.lmax + 1 - ma) // 2 + la
        return int(idx) if idx.ndim == 0 else idx

    # ---- validation helpers ------------------------------------------------------------
    def _field(self, a, name: str) -> np.ndarray:
        if not (type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous):
            a = np.asarray(a)
            if a.dtype.kind == "c":
                raise ValueError(f"{name} must be real-valued, got dtype {a.dtype}")
            if a.dtype.kind not in "biuf":
                raise TypeError(f"{name} must be a real numeric array, got dtype {a.dtype}")
            a = np.ascontiguousarray(a, dtype=np.float64)
        if a.shape[-2:] != self.shape or a.ndim < 2:
            raise ValueError(
                f"{name} must have shape (..., {self.nlat}, {self.nlon}) "
                f"(nlat, nlon) of the grid, got {a.shape}"
            )
        return a

    def _coeffs(self, a, name: str, check_finite: bool = True) -> np.ndarray:
        if not (type(a) is np.ndarray and a.dtype == np.complex128 and a.flags.c_contiguous):
            a = np.asarray(a)
            if a.dtype.kind not in "biufc":
                raise TypeError(f"{name} must be a numeric array, got dtype {a.dtype}")
            a = np.ascontiguousarray(a, dtype=np.complex128)
        if a.ndim < 1 or a.shape[-1] != self.nlm:
            raise ValueError(
                f"{name} must have shape (..., {self.nlm}) (nlm for lmax={self.lmax}), got {a.shape}"
            )
        if check_finite and a.size:
            # min/max propagate NaN and expose ±inf; two fast passes, no temporaries, and no
            # floating-point warnings (unlike a sum, which may overflow)
            r = a.view(np.float64)
            if not (math.isfinite(r.min()) and math.isfinite(r.max())):
                self._raise_nonfinite(name, a)
        return a

    @staticmethod
    def _raise_nonfinite(name: str, a: np.ndarray) -> None:
        bad = ~np.isfinite(a)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{name} contains NaN or inf (first at index {where})")

    # ---- scalar transforms -------------------------------------------------------------
    def analyse(self, field) -> np.ndarray:
        """Spherical-harmonic coefficients of a real field.

        Parameters
        ----------
        field : array_like, shape (..., nlat, nlon)
            Real grid values.

        Returns
        -------
        ndarray of complex128, shape (..., nlm)
            ``q_lm = ∫ f Y_lm* dσ`` by Gauss quadrature (exact for band-limited fields).
        """
        f = self._field(field, "field")
        # q_00 is a positive-weight sum of every sample: a NaN/inf anywhere makes it non-finite,
        # so probing it replaces a pass over the input
        if f.ndim == 2:
            out = np.empty(self.nlm, dtype=np.complex128)
            self._analyse(f, out)
            if not math.isfinite(out[0].real):
                self._raise_nonfinite("field", f)
            return out
        out = np.empty(f.shape[:-2] + (self.nlm,), dtype=np.complex128)
        ff, oo = f.reshape((-1,) + self.shape), out.reshape(-1, self.nlm)
        for i in range(ff.shape[0]):
            self._analyse(ff[i], oo[i])
        if not np.isfinite(oo[:, 0].real).all():
            self._raise_nonfinite("field", f)
        return out

    def synthesise(self, coeffs) -> np.ndarray:
        """Grid values of the real field with coefficients ``coeffs``.

        Parameters
        ----------
        coeffs : array_like, shape (..., nlm)
            Complex coefficients (shtns order; see ``index``).

        Returns
        -------
        ndarray of float64, shape (..., nlat, nlon)
        """
        q = self._coeffs(coeffs, "coeffs")
        if q.ndim == 1:
            out = np.empty(self.shape)
            self._synthesise(q, out)
            return out
        out = np.empty(q.shape[:-1] + self.shape)
        qq, oo = q.reshape(-1, self.nlm), out.reshape((-1,) + self.shape)
        for i in range(qq.shape[0]):
            self._synthesise(qq[i], oo[i])
        return out

    # ---- vector transforms -------------------------------------------------------------
    def analyse_vector(self, u_east, v_north) -> tuple[np.ndarray, np.ndarray]:
        """Spheroidal/toroidal coefficients ``(S, T)`` of a tangent vector field.

        ``u_vec = ∇S − r̂ × ∇T``, i.e. ``u = (1/cos φ) ∂S/∂λ + ∂T/∂φ``,
        ``v = ∂S/∂φ − (1/cos φ) ∂T/∂λ`` (shtns's convention, written in east/north components).

        Parameters
        ----------
        u_east, v_north : array_like, shape (..., nlat, nlon)
            East and north components.

        Returns
        -------
        S, T : ndarray of complex128, shape (..., nlm)
            With ``S_00 = T_00 = 0``.
        """
        u = self._field(u_east, "u_east")
        v = self._field(v_north, "v_north")
        if u.shape != v.shape:
            raise ValueError(f"u_east and v_north must have the same shape, got {u.shape} and {v.shape}")
        fn = self._impl.analyse_vector
        S = np.empty(u.shape[:-2] + (self.nlm,), dtype=np.complex128)
        T = np.empty_like(S)
        if u.ndim == 2:
            fn(u, v, S, T)
        else:
            uu, vv = u.reshape((-1,) + self.shape), v.reshape((-1,) + self.shape)
            SS, TT = S.reshape(-1, self.nlm), T.reshape(-1, self.nlm)
            for i in range(uu.shape[0]):
                fn(uu[i], vv[i], SS[i], TT[i])
        # S_10 (T_10) is a weighted sum of every v (u) sample with positive weights
        if not (np.isfinite(S[..., 1]).all() and np.isfinite(T[..., 1]).all()):
            self._raise_nonfinite("u_east", u)
            self._raise_nonfinite("v_north", v)
        return S, T

    def synthesise_vector(self, S, T) -> tuple[np.ndarray, np.ndarray]:
        """East and north components of ``∇S − r̂ × ∇T`` on the grid.

        Parameters
        ----------
        S, T : array_like, shape (..., nlm)
            Spheroidal and toroidal coefficients (``S_00, T_00`` are ignored).

        Returns
        -------
        u_east, v_north : ndarray of float64, shape (..., nlat, nlon)
        """
        s = self._coeffs(S, "S")
        t = self._coeffs(T, "T")
        if s.shape != t.shape:
            raise ValueError(f"S and T must have the same shape, got {s.shape} and {t.shape}")
        u = np.empty(s.shape[:-1] + self.shape)
        v = np.empty_like(u)
        fn = self._impl.synthesise_vector
        if s.ndim == 1:
            fn(s, t, u, v)
        else:
            ss, tt = s.reshape(-1, self.nlm), t.reshape(-1, self.nlm)
            uu, vv = u.reshape((-1,) + self.shape), v.reshape((-1,) + self.shape)
            for i in range(ss.shape[0]):
                fn(ss[i], tt[i], uu[i], vv[i])
        return u, v

    def gradient(self, coeffs) -> tuple[np.ndarray, np.ndarray]:
        """Surface gradient ``∇f = ((1/cos φ) ∂f/∂λ, ∂f/∂φ)`` of the field with ``coeffs``.

        Returns
        -------
        u_east, v_north : ndarray of float64, shape (..., nlat, nlon)
        """
        s = self._coeffs(coeffs, "coeffs")
        u = np.empty(s.shape[:-1] + self.shape)
        v = np.empty_like(u)
        fn = self._impl.gradient
        if s.ndim == 1:
            fn(s, u, v)
        else:
            ss = s.reshape(-1, self.nlm)
            uu, vv = u.reshape((-1,) + self.shape), v.reshape((-1,) + self.shape)
            for i in range(ss.shape[0]):
                fn(ss[i], uu[i], vv[i])
        return u, v

    def laplacian(self, coeffs) -> np.ndarray:
        """Coefficients of ``∇² f``: ``−l(l+1) q_lm``, shape (..., nlm)."""
        return self._coeffs(coeffs, "coeffs", check_finite=False) * -self._ll1

    def inverse_laplacian(self, coeffs) -> np.ndarray:
        """Coefficients of the zero-mean solution ``g`` of ``∇² g = f``: ``−q_lm / (l(l+1))``
        (the ``l = 0`` coefficient is set to 0)."""
        return self._coeffs(coeffs, "coeffs", check_finite=False) * self._inv_lap

    def divergence(self, u_east, v_north) -> np.ndarray:
        """Coefficients of ``∇·u_vec`` (``= −l(l+1) S_lm``), shape (..., nlm)."""
        S, _ = self.analyse_vector(u_east, v_north)
        S *= -self._ll1
        return S

    def vorticity(self, u_east, v_north) -> np.ndarray:
        """Coefficients of the radial vorticity ``r̂·∇×u_vec`` (``= +l(l+1) T_lm``), shape (..., nlm)."""
        _, T = self.analyse_vector(u_east, v_north)
        T *= self._ll1
        return T

    # ---- point evaluation --------------------------------------------------------------
    def evaluate(self, coeffs, lon, lat) -> np.ndarray:
        """Values of the field with ``coeffs`` at arbitrary points (exact, vectorised).

        Parameters
        ----------
        coeffs : array_like, shape (..., nlm)
        lon, lat : array_like
            Longitudes and latitudes in radians, broadcast together to the points' shape ``P``.
            Any finite values are accepted; a latitude beyond ±π/2 is read as
            :func:`~spherepde.grids.geometry.lonlat_to_xyz` reads it (over the pole).

        Returns
        -------
        ndarray of float64, shape ``coeffs.shape[:-1] + P``

        Notes
        -----
        Each order ``m`` of a band-limited field, ``Σ_l q_lm y_lm(cos θ)``, is a trigonometric
        polynomial of degree ``≤ lmax`` in the colatitude θ (a cosine series for even ``m``, a
        sine series for odd ``m``).  Its coefficients are obtained exactly by an FFT of samples
        on ``2 lmax + 2`` equispaced colatitudes (O(lmax³) work per field); the points are then
        evaluated by real matrix products, O(n_points lmax²) flops, accurate to ~1e-14 × Σ|q|.
        """
        return _points.evaluate(self, coeffs, lon, lat)

    def analyse_points(self, values, lon, lat) -> np.ndarray:
        """Coefficients of the point measure ``Σ_p v_p δ_p``: ``a_lm = Σ_p v_p Y*_lm(λ_p, φ_p)``.

        The analysis of a discrete measure (exact, no quadrature) and the adjoint of
        :meth:`evaluate`: for the real field f with coefficients q,
        ``Σ_p v_p f(p) = Σ_l [Re(q_l0 a*_l0) + 2 Re Σ_{m>0} q_lm a*_lm]``.  For grid values times cell
        areas at the grid's nodes it reproduces :meth:`analyse` (Gauss quadrature).

        Parameters
        ----------
        values : array_like, shape (..., P)
            Real weights v_p (any leading batch shape).
        lon, lat : array_like, shape (P,)
            Longitudes and latitudes (radians) of the points, finite (read as in :meth:`evaluate`).

        Returns
        -------
        ndarray of complex128, shape (..., nlm)

        Notes
        -----
        Mirror image of :meth:`evaluate`: each ``y_lm(cos θ)`` is a cosine (even m) or sine (odd m)
        polynomial of degree ≤ lmax in the colatitude θ, so ``a_lm = Σ_k α_lm,k G_k,m`` with the
        nonuniform Fourier sums ``G_k,m = Σ_p v_p {cos, sin}(kθ_p) e^{−imλ_p}`` (real matrix
        products, O(P lmax²)); the ``α`` are never formed — ``Σ_k α_lm,k G_k,m`` is a Gauss-free
        quadrature over ``2 lmax + 2`` equispaced colatitudes, done with the Legendre recursion
        (O(lmax³)).  Accurate to ~1e-15 × Σ|v| × max|Y_lm|.
        """
        return _points.analyse_points(self, values, lon, lat)

    def _recursion_tables(self):
        """The Legendre recursion coefficients of degree lmax (grids.rings.legendre_recursion)."""
        if self._dfs_tables is None:
            self._dfs_tables = legendre_recursion(self.lmax)
        return self._dfs_tables

    # ---- pyshtools interoperability ------------------------------------------------------
    def to_pyshtools(self, coeffs, normalization: str = "4pi", csphase: int = 1) -> np.ndarray:
        """Real pyshtools coefficients ``cilm``, shape (..., 2, lmax+1, lmax+1).

        Parameters
        ----------
        coeffs : array_like, shape (..., nlm)
        normalization : {"4pi", "ortho"}
            pyshtools ``norm=1`` (4π-normalised, the default) or ``norm=4`` (orthonormal).
        csphase : {1, -1}
            pyshtools' Condon–Shortley convention (1: without the phase, as here).

        Notes
        -----
        ``q_l0 = sqrt(4π) C_l0`` and ``q_lm = sqrt(2π) (C_lm − i S_lm)`` for ``m > 0``
        (4π normalisation, ``csphase = 1``).
        """
        fac = self._pyshtools_factor(normalization, csphase)
        q = self._coeffs(coeffs, "coeffs", check_finite=False)
        L = self.lmax
        scale = np.where(self.m == 0, math.sqrt(_FOUR_PI), math.sqrt(2.0 * math.pi)) / fac
        cilm = np.zeros(q.shape[:-1] + (2, L + 1, L + 1))
        cilm[..., 0, self.l, self.m] = q.real * (1.0 / scale)
        cilm[..., 1, self.l, self.m] = np.where(self.m > 0, -q.imag, 0.0) * (1.0 / scale)
        return cilm

    def from_pyshtools(self, cilm, normalization: str = "4pi", csphase: int = 1) -> np.ndarray:
        """Coefficients from real pyshtools ``cilm`` of shape (..., 2, n, n).

        Degrees above ``lmax`` are dropped; missing degrees are zero.  ``normalization`` and
        ``csphase`` as in :meth:`to_pyshtools`.
        """
        fac = self._pyshtools_factor(normalization, csphase)
        c = np.asarray(cilm)
        if c.dtype.kind not in "biuf":
            raise TypeError(f"cilm must be a real array, got dtype {c.dtype}")
        if c.ndim < 3 or c.shape[-3] != 2 or c.shape[-2] != c.shape[-1] or c.shape[-1] < 1:
            raise ValueError(f"cilm must have shape (..., 2, n, n), got {c.shape}")
        n = c.shape[-1]
        keep = self.l < n
        scale = np.where(self.m == 0, math.sqrt(_FOUR_PI), math.sqrt(2.0 * math.pi)) / fac
        q = np.zeros(c.shape[:-3] + (self.nlm,), dtype=np.complex128)
        lk, mk = self.l[keep], self.m[keep]
        q.real[..., keep] = c[..., 0, lk, mk] * scale[keep]
        q.imag[..., keep] = np.where(mk > 0, -c[..., 1, lk, mk], 0.0) * scale[keep]
        return q

    def _pyshtools_factor(self, normalization: str, csphase: int) -> np.ndarray:
        """Per-coefficient factor f with ``C(normalization, csphase) = f × C(4π, csphase=1)``."""
        if normalization == "4pi":
            f = np.ones(self.nlm)
        elif normalization == "ortho":
            f = np.full(self.nlm, math.sqrt(_FOUR_PI))
        else:
            raise ValueError(f"normalization must be '4pi' or 'ortho', got {normalization!r}")
        if csphase == -1:
            f = f * np.where(self.m % 2, -1.0, 1.0)
        elif csphase != 1:
            raise ValueError(f"csphase must be 1 or -1, got {csphase!r}")
        return f
