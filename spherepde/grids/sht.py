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
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from typing import Any

import numpy as np

from spherepde.grids.gauss import GaussGrid, gauss_legendre
from spherepde.grids.rings import fourier_powers, legendre_at_colatitudes, legendre_recursion

__all__ = ["SphericalHarmonics", "BACKENDS", "SHTNS_MIN_NLAT", "shtns_available"]

BACKENDS = ("auto", "shtns", "pyshtools")
#: shtns aborts the process (``exit``) for Gauss grids with fewer latitudes than this.
SHTNS_MIN_NLAT = 32
#: Threads used by each shtns transform (OpenMP); 0 means "all cores".  The default 1 is
#: deliberate: with several processes sharing the cores, shtns's OpenMP barriers make a
#: multithreaded transform 10–100× slower on average; override with the environment variable
#: ``SPHEREPDE_SHTNS_THREADS`` (read at import) or by setting this attribute before the first
#: transform of a given size is built.
SHTNS_NTHREADS = int(os.environ.get("SPHEREPDE_SHTNS_THREADS", "1"))
#: shtns polar-optimisation threshold.  shtns's default 1e-10 neglects Legendre values below
#: 1e-10 and changes synthesised fields by ~1e-10 (absolute, O(1) coefficients); 1e-14 keeps the
#: transforms exact to round-off for ~5 % more time.
SHTNS_POLAR_OPT = 1e-14

_FOUR_PI = 4.0 * math.pi

# ----------------------------------------------------------------------------------------------
# backend availability / caches
# ----------------------------------------------------------------------------------------------
_shtns_mod: Any = None  # None: not tried yet; False: unavailable; else the module
_warned_no_shtns = False
_SHTNS_CACHE: dict[tuple[int, int, int], Any] = {}
_PYSHTOOLS_CACHE: dict[tuple[int, int], "_PyshtoolsBackend"] = {}


def _import_shtns_quietly():
    """``import shtns`` without its C-level banner on stdout (it would corrupt, e.g., JSON
    written to stdout by a command-line tool).  Falls back to a plain import."""
    try:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL(None)
        sys.stdout.flush()
        saved = os.dup(1)
    except Exception:
        import shtns  # noqa: PLC0415

        return shtns
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        try:
            import shtns  # noqa: PLC0415
        finally:
            libc.fflush(None)  # the banner may still sit in C's stdio buffer
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    return shtns


def _get_shtns():
    """The ``shtns`` module, or ``None`` if it cannot be imported (tried once per process)."""
    global _shtns_mod
    if _shtns_mod is None:
        try:
            _shtns_mod = _import_shtns_quietly()
        except Exception:  # ImportError, or a broken binary
            _shtns_mod = False
    return _shtns_mod or None


def shtns_available() -> bool:
    """Whether the shtns backend can be used in this process."""
    return _get_shtns() is not None


def _shtns_object(nlat: int, lmax: int):
    """Cached shtns transform for the Gauss grid ``(nlat, 2 nlat)`` truncated at ``lmax``."""
    nthreads = int(SHTNS_NTHREADS)
    if nthreads < 0:
        raise ValueError(f"SHTNS_NTHREADS must be >= 0, got {nthreads}")
    key = (nlat, lmax, nthreads)
    sh = _SHTNS_CACHE.get(key)
    if sh is None:
        shtns = _get_shtns()
        # never let shtns see parameters it would answer with exit()
        if shtns is None:
            raise ImportError("shtns is not importable")
        if nlat < SHTNS_MIN_NLAT or nlat % 2 or not 0 < lmax < nlat:
            raise ValueError(
                f"shtns needs an even nlat >= {SHTNS_MIN_NLAT} and 0 < lmax < nlat, "
                f"got nlat={nlat}, lmax={lmax}"
            )
        sh = shtns.sht(lmax, lmax, 1, shtns.sht_orthonormal | shtns.SHT_NO_CS_PHASE, nthreads)
        sh.set_grid(nlat, 2 * nlat, shtns.sht_gauss | shtns.SHT_PHI_CONTIGUOUS, SHTNS_POLAR_OPT)
        if tuple(sh.spat_shape) != (nlat, 2 * nlat) or sh.nlm != (lmax + 1) * (lmax + 2) // 2:
            raise RuntimeError(
                f"unexpected shtns layout: spat_shape={sh.spat_shape}, nlm={sh.nlm}"
            )
        _SHTNS_CACHE[key] = sh
    return sh


def _lm_arrays(lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Degree and order of each coefficient in shtns (m-major) order."""
    m = np.concatenate([np.full(lmax + 1 - mm, mm, dtype=np.int64) for mm in range(lmax + 1)])
    l = np.concatenate([np.arange(mm, lmax + 1, dtype=np.int64) for mm in range(lmax + 1)])
    return l, m


def _m_offsets(lmax: int) -> np.ndarray:
    """Start of each order ``m`` block in the coefficient array, shape (lmax+2,)."""
    mm = np.arange(lmax + 2)
    return mm * (2 * lmax + 3 - mm) // 2


# ----------------------------------------------------------------------------------------------
# backends: they receive validated, C-contiguous float64/complex128 arrays of exactly one field
# and write into preallocated outputs.
# ----------------------------------------------------------------------------------------------
class _ShtnsBackend:
    name = "shtns"

    def __init__(self, nlat: int, lmax: int) -> None:
        sh = _shtns_object(nlat, lmax)
        self.sh = sh
        self.analyse = sh.spat_to_SH  # (field, out_coeffs)
        self.synthesise = sh.SH_to_spat  # (coeffs, out_field)

    def analyse_vector(self, u, v, s_out, t_out) -> None:
        self.sh.spat_to_SHsphtor(np.negative(v), u, s_out, t_out)  # v_theta = −v_north

    def synthesise_vector(self, s, t, u_out, v_out) -> None:
        self.sh.SHsphtor_to_spat(s, t, v_out, u_out)
        np.negative(v_out, out=v_out)

    def gradient(self, s, u_out, v_out) -> None:
        self.sh.SHsph_to_spat(s, v_out, u_out)
        np.negative(v_out, out=v_out)


def _quiet(fn):
    """Run ``fn`` without floating-point warnings: non-finite or huge inputs are reported by
    the caller's validation, not as RuntimeWarnings from the intermediate FFTs."""

    def wrapped(*args):
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(*args)

    wrapped.__name__, wrapped.__doc__ = fn.__name__, fn.__doc__
    return wrapped


class _PyshtoolsBackend:
    """Same transforms as shtns, built from pyshtools and numpy (slower; no size limit)."""

    name = "pyshtools"

    def __init__(self, nlat: int, lmax: int) -> None:
        self.nlat, self.nlon, self.nglq, self.lmax = nlat, 2 * nlat, 2 * nlat - 1, lmax
        # nodes (= grid.mu, north to south) and weights; pyshtools is imported by the transforms
        # only, so that point evaluations (evaluate, analyse_points) do not pay for it
        self.zero, self.w = gauss_legendre(nlat)
        self.l, self.m = _lm_arrays(lmax)
        self.off = _m_offsets(lmax)
        mzero = self.m == 0
        # q_l0 = sqrt(4π) C_l0 ;  q_lm = sqrt(2π) (C_lm − i S_lm)   (m > 0)
        self._scale = np.where(mzero, math.sqrt(_FOUR_PI), math.sqrt(2.0 * math.pi))
        self._mpos = ~mzero
        self._tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # -- coefficient conversion (4π-normalised real cilm, csphase = 1) --------------------
    def q_to_cilm(self, q: np.ndarray) -> np.ndarray:
        L = self.lmax
        cilm = np.zeros((2, L + 1, L + 1))
        cilm[0, self.l, self.m] = q.real / self._scale
        cilm[1, self.l, self.m] = np.where(self._mpos, -q.imag, 0.0) / self._scale
        return cilm

    def cilm_to_q(self, cilm: np.ndarray, out: np.ndarray) -> None:
        out.real = cilm[0, self.l, self.m] * self._scale
        out.imag = np.where(self._mpos, -cilm[1, self.l, self.m] * self._scale, 0.0)

    # -- scalar ---------------------------------------------------------------------------
    @_quiet
    def analyse(self, f: np.ndarray, out: np.ndarray) -> None:
        from pyshtools.expand import SHExpandGLQ  # noqa: PLC0415

        n = self.nlat
        # exact resampling of each row (modes 0..nlat−1) from 2 nlat to 2 nlat − 1 longitudes
        spec = np.fft.rfft(f, axis=-1)[:, :n]
        spec *= self.nglq / self.nlon
        g = np.fft.irfft(spec, n=self.nglq, axis=-1)
        cilm = SHExpandGLQ(g, self.w, self.zero, norm=1, csphase=1, lmax_calc=self.lmax)
        self.cilm_to_q(cilm, out)

    @_quiet
    def synthesise(self, q: np.ndarray, out: np.ndarray) -> None:
        from pyshtools.expand import MakeGridGLQ  # noqa: PLC0415

        n = self.nlat
        g = MakeGridGLQ(
            self.q_to_cilm(q), self.zero, lmax=n - 1, norm=1, csphase=1, lmax_calc=self.lmax
        )
        spec = np.zeros((n, n + 1), dtype=np.complex128)
        spec[:, :n] = np.fft.rfft(g, axis=-1)
        spec *= self.nlon / self.nglq
        out[...] = np.fft.irfft(spec, n=self.nlon, axis=-1)

    # -- vector ---------------------------------------------------------------------------
    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``y_lm(μ_j)``, ``∂y_lm/∂φ(μ_j)`` as (nlat, nlm) in shtns order, and ``1/cos φ_j``."""
        if self._tables is None:
            from pyshtools.legendre import PlmON_d1  # noqa: PLC0415

            L = self.lmax
            pidx = self.l * (self.l + 1) // 2 + self.m
            z = self.zero
            coslat = np.sqrt((1.0 - z) * (1.0 + z))
            p = np.empty((self.nlat, self.l.size))
            dp = np.empty((self.nlat, self.l.size))
            for j, zj in enumerate(z):
                pj, dpj = PlmON_d1(L, zj, csphase=1, cnorm=1)  # complex normalisation, no CS
                p[j] = pj[pidx]
                dp[j] = dpj[pidx] * coslat[j]  # d/dφ = cos φ d/dμ
            self._tables = (p, dp, 1.0 / coslat)
        return self._tables

    @_quiet
    def analyse_vector(self, u, v, s_out, t_out) -> None:
        p, dp, inv_c = self.tables()
        L, off, w = self.lmax, self.off, self.w
        fac = 2.0 * np.pi / self.nlon
        U = np.fft.rfft(u, axis=-1)[:, : L + 1] * (fac * w)[:, None]  # ∫ u e^{−imλ} dλ × w_j
        V = np.fft.rfft(v, axis=-1)[:, : L + 1] * (fac * w)[:, None]
        for m in range(L + 1):
            sl = slice(off[m], off[m + 1])
            um, vm = U[:, m], V[:, m]
            # real GEMMs on [Re, Im] columns
            a = dp[:, sl].T @ np.stack([vm.real, vm.imag, um.real, um.imag], axis=1)
            dv, du = a[:, 0] + 1j * a[:, 1], a[:, 2] + 1j * a[:, 3]
            if m:
                uc, vc = um * inv_c, vm * inv_c
                b = p[:, sl].T @ np.stack([uc.real, uc.imag, vc.real, vc.imag], axis=1)
                pu, pv = b[:, 0] + 1j * b[:, 1], b[:, 2] + 1j * b[:, 3]
                s_out[sl] = dv - 1j * m * pu
                t_out[sl] = du + 1j * m * pv
            else:
                s_out[sl] = dv
                t_out[sl] = du
        ll1 = self.l * (self.l + 1.0)
        ll1[0] = np.inf
        s_out /= ll1
        t_out /= ll1

    @_quiet
    def synthesise_vector(self, s, t, u_out, v_out) -> None:
        p, dp, inv_c = self.tables()
        L, off, n = self.lmax, self.off, self.nlat
        U = np.zeros((n, n + 1), dtype=np.complex128)
        V = np.zeros((n, n + 1), dtype=np.complex128)
        for m in range(L + 1):
            sl = slice(off[m], off[m + 1])
            sm, tm = s[sl], t[sl]
            rhs = np.stack([sm.real, sm.imag, tm.real, tm.imag], axis=1)
            a = dp[:, sl] @ rhs
            ds, dt = a[:, 0] + 1j * a[:, 1], a[:, 2] + 1j * a[:, 3]
            if m:
                b = p[:, sl] @ rhs
                ps = (b[:, 0] + 1j * b[:, 1]) * inv_c
                pt = (b[:, 2] + 1j * b[:, 3]) * inv_c
                U[:, m] = 1j * m * ps + dt
                V[:, m] = ds - 1j * m * pt
            else:
                U[:, m] = dt
                V[:, m] = ds
        U *= self.nlon
        V *= self.nlon
        u_out[...] = np.fft.irfft(U, n=self.nlon, axis=-1)
        v_out[...] = np.fft.irfft(V, n=self.nlon, axis=-1)

    def gradient(self, s, u_out, v_out) -> None:
        self.synthesise_vector(s, np.zeros_like(s), u_out, v_out)


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
        q = self._coeffs(coeffs, "coeffs")
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
        qq = q.reshape(-1, self.nlm)
        nb = qq.shape[0]
        ce, so = self._dfs_coefficients(qq)  # (L+1, nb, Me), (L, nb, Mo)
        L = self.lmax
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
        L = self.lmax
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
        for j0, T in self._legendre_blocks(thj):
            A += np.matmul(T, Hr[:, j0:j0 + T.shape[2]])
        A = A.view(np.complex128).transpose(1, 0, 2)  # [l, m, b]
        out = A[self.l, self.m].T  # (nb, nlm)
        out[:, self.m == 0] = out[:, self.m == 0].real
        return np.ascontiguousarray(out).reshape(bshape + (self.nlm,))

    def _recursion_tables(self):
        """The Legendre recursion coefficients of degree lmax (grids.rings.legendre_recursion)."""
        if self._dfs_tables is None:
            self._dfs_tables = legendre_recursion(self.lmax)
        return self._dfs_tables

    def _legendre_blocks(self, theta: np.ndarray):
        """Blocks of the table y_lm(cos θ_j) (sin θ_j taken as 0 at θ_j = π), as (j0, T) with
        T[m, l, j] = y_lm(cos θ_{j0+j}) (0 for m > l; grids.rings.legendre_table), ≤ 32 MB each
        (from lmax ≈ 700: 8 columns)."""
        L = self.lmax
        rec = self._recursion_tables()
        jc = max(8, min(theta.size, (1 << 22) // (L + 1) ** 2))
        for j0 in range(0, theta.size, jc):
            yield j0, legendre_at_colatitudes(theta[j0:j0 + jc], rec)

    def _dfs_coefficients(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Colatitude Fourier coefficients of each order: cosine series for even ``m``
        (shape (L+1 [k=0..L], nb, #even m)) and sine series for odd ``m`` (shape (L [k=1..L], nb,
        #odd m)); the factor 2 for ``m > 0`` is included."""
        L = self.lmax
        nb = q.shape[0]
        Q = np.zeros((L + 1, L + 1, nb), dtype=np.complex128)  # [m, l, batch]
        Q[self.m, self.l] = q.T
        Q[0].imag = 0.0  # imaginary parts of m = 0 coefficients are ignored
        Q[1:] *= 2.0
        Qr = Q.view(np.float64)  # [m, l, (batch, re/im)]
        K = 2 * L + 2
        J = L + 2  # samples θ_j = 2π j / K on [0, π]; the rest follow by parity
        th = 2.0 * np.pi * np.arange(J) / K
        F = np.empty((L + 1, J, 2 * nb))  # [m, j, (batch, re/im)]
        for j0, T in self._legendre_blocks(th):
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
