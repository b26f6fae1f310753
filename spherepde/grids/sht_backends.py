"""The two spherical-harmonic transform backends behind :class:`~spherepde.grids.sht.SphericalHarmonics`.

``_ShtnsBackend`` wraps a cached shtns transform; ``_PyshtoolsBackend`` reproduces shtns's
conventions (see :mod:`spherepde.grids.sht`) from pyshtools and numpy.  Both receive validated,
C-contiguous float64/complex128 arrays of one field and write into preallocated outputs.  This
module also holds shtns's import (quiet, tried once per process), its size limit and its
settings (``SHTNS_NTHREADS``, ``SHTNS_POLAR_OPT``: set them here, before the first transform of
a given size is built).
"""
from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

from spherepde.grids.gauss import gauss_legendre

__all__ = ["BACKENDS", "SHTNS_MIN_NLAT", "SHTNS_NTHREADS", "SHTNS_POLAR_OPT", "shtns_available"]

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
