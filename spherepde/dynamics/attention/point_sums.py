"""Spectral attention sums of weighted points on S² (particles), at arbitrary unit targets.

For a measure Σ_j w_j δ_{y_j} on S² and f ∈ {y_1, y_2, y_3, 1}: the sums S_f of the grid path
(:mod:`.grid_sums`) by adjoint point synthesis → Funk–Hecke → point synthesis (the comment block
below), for B = c·R (:class:`_SpectralPoints`) and for any B with a radius per target
(:class:`_TargetPoints`); :func:`_point_plan` says which applies.  Certification: :mod:`.certify`.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.dynamics.attention import compiled
from spherepde.dynamics.attention.funk_hecke import (TARGET_ROUNDOFF, _per_target_synthesis,
                                                     _SphereKernel, orthogonal_scale)
from spherepde.grids.rings import legendre_recursion

# ============================================================================================
# Spectral fast summation for weighted points on S² (Attention.mean, method "spectral")
# ============================================================================================
#
# The same sums S_f(u) = Σ_j w_j e^{κ(⟨u, y_j⟩ − 1)} f(y_j), f ∈ {y_1, y_2, y_3, 1}, for a measure
# Σ_j w_j δ_{y_j} on S² (particles) instead of cell weights, in three steps:
#   1. adjoint point synthesis: a^f_lm = Σ_j w_j f(y_j) Y*_lm(y_j), l ≤ L — exact (no quadrature,
#      SphericalHarmonics.analyse_points: nonuniform Fourier sums + Legendre recursion);
#   2. Funk–Hecke: multiply by 4π ĩ_l(κ) (spherical_ive);
#   3. point synthesis at the targets u (SphericalHarmonics.evaluate).
# Cost: two real matrix products of (points × L) by (L × 8L) per step, i.e. O((n + m) L²), plus
# O(L³), against O(n m) for the direct sums.  L is the first degree where the kernel tail is below
# the larger of the round-off of the sums, POINT_ROUNDOFF·(L + 16)², and tol·ĩ_0/POINT_TAIL_MARGIN
# (≈ sqrt(2κ ln(1/ε)) with ε ≈ 1e-13: κ = 10 → 28, 100 → 80, 1000 → 240 at tol = 1e-8).
# The error is absolute again (η = err·Σw per sum), so every target is certified exactly as for
# densities (_certified_mean) and the rest summed directly (Attention's "direct", tol/8); there is
# no split pass (particles all carry comparable weights, there is no density level to split at).
# For particles moved by their own field with B = c·I every target is a source: S_1 ≥ w_i, and
# the S_1 test passes while err·Σw/w_i ≤ tol/8 (N·err ≤ 1.25e-9 for equal weights at tol = 1e-8;
# err ≈ 1e-13 at κ = 100) — and far more easily where a target has neighbours within β^{−1/2}.
# With B = c·R, R ≠ I, the targets Rᵀx_i of a concentrated cloud can lie far from the mass: those
# fail and are summed directly (cost ≤ that of the direct method on those targets).

#: round-off of one point sum per unit mass: ε_r(L) = POINT_ROUNDOFF·(L + 16)².  Measured against
#: np.longdouble sums (1500 points: uniform, or blobs of width 0.02 at the poles, the equator and
#: in between; targets at the points and random): ≤ 3.3e-15 at L = 16 (model 5.1e-15),
#: 2.4e-14 at L = 93 (5.9e-14), 6.5e-14 at L = 159 (1.5e-13), 1.3e-13 at L = 288 (4.6e-13),
#: 2.5e-13 at L = 407 (8.9e-13); the error sits next to the mass (≤ 2e-14 away from it)
POINT_ROUNDOFF = 5e-18
#: the point series may stop where the tail is below tol·ĩ_0/POINT_TAIL_MARGIN: error ≤ tol/16 of
#: S_1 at targets where the local mass is ≥ 1/256 of the uniform (ĩ_0·Σw)
POINT_TAIL_MARGIN = 4096.0


class _SpectralPoints(_SphereKernel):
    """Zonal convolutions with e^{κ(t−1)} of weighted points on S², at arbitrary unit points."""

    d = 3

    def __init__(self, kappa: float, tol: float) -> None:
        super().__init__(kappa)
        l = np.arange(self.tail.size)
        roundoff = POINT_ROUNDOFF * (l + 16.0) ** 2
        below = np.flatnonzero(self.tail <= np.maximum(roundoff, tol * self.kbar / POINT_TAIL_MARGIN))
        L = max(1, int(below[0]) if below.size else l[-1])
        self._truncate(L, roundoff[L])
        self._sh = None

    def _transform(self):
        if self._sh is None:
            from spherepde.grids import GaussGrid  # noqa: PLC0415
            from spherepde.grids.sht import SphericalHarmonics  # noqa: PLC0415

            # only the degree matters (analyse_points / evaluate use no grid); nlat ≥ 32 lets
            # the "auto" backend be shtns (no pyshtools import)
            self._sh = SphericalHarmonics(GaussGrid(max(32, self.L + 1 + (self.L + 1) % 2)),
                                          lmax=self.L)
        return self._sh

    def sums(self, w: np.ndarray, y: np.ndarray, u: np.ndarray) -> np.ndarray:
        """S_f(u) for f = y_1, y_2, y_3, 1 (shape (4, n)); weights w (m,) at unit y (m, 3),
        targets u (n, 3) with |u| = 1 (to rounding)."""
        sh = self._transform()
        q = sh.analyse_points(np.vstack([w * y.T, w]), *_lonlat(y))
        q *= self.coef[sh.l]
        return sh.evaluate(q, *_lonlat(u))


class _TargetPoints(_SpectralPoints):
    """The sums of _SpectralPoints for any B, with a radius per target (the comment block "Every
    B: Funk–Hecke with a radius per target"): S̃_f(x) = Σ_j w_j f(y_j) e^{β⟨Bᵀx, y_j⟩ − β|Bᵀx|} at
    unit targets x, the degree set by β‖B‖₂; error per unit mass ``err`` (the point analysis'
    round-off model plus the per-target synthesis')."""

    def __init__(self, B: np.ndarray, beta: float, tol: float) -> None:
        self.B, self.beta = np.asarray(B, float), float(beta)
        super().__init__(self.beta * float(np.linalg.norm(self.B, 2)), tol)
        self.err += TARGET_ROUNDOFF * (self.L + 16.0)
        self._rec = legendre_recursion(self.L)

    def sums(self, w: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """S̃_f(x) for f = y_1, y_2, y_3, 1 (shape (4, n)); weights w (m,) at unit y (m, 3),
        unit targets x (n, 3)."""
        sh = self._transform()
        q = sh.analyse_points(np.vstack([w * y.T, w]), *_lonlat(y))
        return _per_target_synthesis(q, sh, self.B, self.beta, x, self._rec, self.L)


def _lonlat(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longitude and latitude of points p (n, 3) ≠ 0 (arctan2 for both: arcsin(z) loses ~1e-8 rad
    next to the poles)."""
    return np.arctan2(p[:, 1], p[:, 0]), np.arctan2(p[:, 2], np.hypot(p[:, 0], p[:, 1]))


_POINT_CACHE: dict = {}


def _point_plan(att, y: np.ndarray, tol: float):
    """(_SpectralPoints, c) for the spectral point sums of ``att`` with sources y, or
    (None, reason)."""
    if math.isinf(att.beta):
        return None, "beta = inf (the mean does not depend on the measure)"
    if att.d != 3:
        return None, f"d = {att.d}: the point path is for S² (d = 3)"
    c = orthogonal_scale(att.B)
    # B not ∝ orthogonal: the same sums with a radius per target (c = None, see _TargetPoints)
    general = c is None and compiled.available()
    if c is None and not general:
        return None, "B = QᵀK is not a positive multiple of an orthogonal matrix (and numba is missing)"
    kappa = att.beta * (float(np.linalg.norm(att.B, 2)) if general else c)
    dev = float(np.max(np.abs(np.linalg.norm(y, axis=1) - 1.0), initial=0.0))
    if kappa * dev > tol / 16.0:
        return None, f"the sources are not unit vectors (max ||y| − 1| = {dev:.3g})"
    key = (att.B.tobytes() if general else None, kappa, tol)
    spec = _POINT_CACHE.get(key)
    if spec is None:
        if len(_POINT_CACHE) >= 16:
            _POINT_CACHE.clear()
        spec = _POINT_CACHE[key] = (_TargetPoints(att.B, att.beta, tol) if general
                                    else _SpectralPoints(kappa, tol))
    return (spec, c), None

