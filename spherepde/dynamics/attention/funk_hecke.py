"""Funk–Hecke series of the attention kernel on S² and S¹: the special functions.

The scaled kernel k(t) = e^{κ(t − 1)} (peak 1) of the attention sums, expanded on S² and S¹:

    S²:  e^{κ(⟨x, y⟩ − 1)} = Σ_l 4π ĩ_l(κ) Σ_m Y_lm(x) Y*_lm(y),   ĩ_l = i_l(κ) e^{−κ}
    S¹:  e^{κ(cos φ − 1)}  = Σ_{k∈ℤ} Ĩ_k(κ) e^{ikφ},                Ĩ_k = I_k(κ) e^{−κ}

(:func:`spherical_ive`, :func:`circular_ive`, :func:`funk_hecke_coefficients`; Miller's backward
recurrence), the truncated series with its tail bound (:class:`_SphereKernel`), the test for
B = c·R (:func:`orthogonal_scale`: then the sums are zonal convolutions) and, for any other B,
the synthesis with one radius per target (:func:`_per_target_synthesis`).
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.dynamics.attention import compiled

#: B counts as c·R (R orthogonal) when its singular values agree to this relative spread
ORTHOGONAL_RTOL = 1e-12
#: series are truncated where the kernel tail (sup-norm, kernel peak = 1) drops below this
SERIES_TAIL = 1e-17
#: "auto" uses the spectral path when the truncation needed for ``tol`` — the degree beyond which
#: the kernel tail is below tol/TRUNCATION_MARGIN of the kernel mean ĩ_0 (the value of S_1 for a
#: uniform unit mass) — fits on the grid (≤ lmax on S², ≤ n/2 on S¹)
TRUNCATION_MARGIN = 64.0


def spherical_ive(kappa: float, L: int) -> np.ndarray:
    """Scaled modified spherical Bessel functions ĩ_l(κ) = i_l(κ) e^{−κ}, l = 0..L.

    Equal to ``sqrt(π/(2κ)) · scipy.special.ive(l + ½, κ)``, computed by Miller's backward
    recurrence i_{l−1} = i_{l+1} + (2l+1)/κ · i_l (started far beyond L) normalised with the closed
    form ĩ_0 = (1 − e^{−2κ})/(2κ): ≤ 3e-15 relative up to κ = 5000, where scipy's ive is off by
    2e-14–3e-13 (both measured against mpmath), enough to dominate the round-off of the spectral
    sums.  Values below ~1e-308 underflow to 0.
    """
    kappa = float(kappa)
    if not (kappa > 0 and math.isfinite(kappa)):
        raise ValueError(f"kappa must be positive and finite, got {kappa!r}")
    L = int(L)
    n = L + 32 + int(math.sqrt(100.0 * kappa + 100.0))
    v = _miller(lambda l: (2.0 * l + 1.0) / kappa, n)
    i0 = -math.expm1(-2.0 * kappa) / (2.0 * kappa)
    return v[: L + 1] * (i0 / v[0])


def circular_ive(kappa: float, K: int) -> np.ndarray:
    """Scaled modified Bessel functions Ĩ_k(κ) = I_k(κ) e^{−κ}, k = 0..K (integer orders).

    Equal to ``scipy.special.ive(k, κ)``; Miller's backward recurrence I_{k−1} = I_{k+1} +
    (2k/κ) I_k normalised with Σ_{k∈ℤ} Ĩ_k = Ĩ_0 + 2 Σ_{k≥1} Ĩ_k = 1 (e^{κ cos 0} e^{−κ}).
    """
    kappa = float(kappa)
    if not (kappa > 0 and math.isfinite(kappa)):
        raise ValueError(f"kappa must be positive and finite, got {kappa!r}")
    K = int(K)
    n = K + 32 + int(math.sqrt(100.0 * kappa + 100.0))
    v = _miller(lambda k: 2.0 * k / kappa, n)
    total = v[0] + 2.0 * math.fsum(v[1:])
    return v[: K + 1] / total


def _miller(ratio, n: int) -> np.ndarray:
    """Minimal solution v_0..v_n (arbitrary scale) of v_{l−1} = v_{l+1} + ratio(l) v_l."""
    v = np.zeros(n + 2)
    v[n] = 1e-280
    for l in range(n, 0, -1):
        v[l - 1] = v[l + 1] + ratio(l) * v[l]
        if v[l - 1] > 1e250:  # rescale: what is far below the new scale underflows harmlessly
            v[l - 1:] *= 1e-250
    return v[: n + 1]


def funk_hecke_coefficients(kappa: float, L: int) -> np.ndarray:
    """Funk–Hecke eigenvalues of the scaled kernel e^{κ(t−1)} on S²: 4π ĩ_l(κ), l = 0..L.

    ∫_{S²} e^{κ(⟨x, y⟩ − 1)} Y_lm(y) dσ(y) = 4π ĩ_l(κ) Y_lm(x).
    """
    return 4.0 * math.pi * spherical_ive(kappa, L)


def orthogonal_scale(B: np.ndarray, rtol: float = ORTHOGONAL_RTOL) -> float | None:
    """c > 0 with B = c·R, R orthogonal (singular values of B equal to ``rtol``), else None."""
    s = np.linalg.svd(np.asarray(B, float), compute_uv=False)
    c = float(np.sqrt(np.mean(s * s)))
    if not (c > 0 and math.isfinite(c)) or float(s[0] - s[-1]) > rtol * c:
        return None
    return c


def _suffix_tail(terms: np.ndarray) -> np.ndarray:
    """tail[L] = Σ_{l > L} terms[l]."""
    t = np.cumsum(terms[::-1])[::-1]
    return np.r_[t[1:], 0.0]


class _SphereKernel:
    """The Funk–Hecke series of the scaled kernel e^{κ(t−1)} on S²: ĩ_l(κ) for l ≤ max(lmin, 16 +
    10√(κ+1)) (beyond, the terms are < e^{−45}), ``tail[L]`` = Σ_{l>L} (2l+1) ĩ_l = the sup-norm error
    of the series truncated at degree L (kernel peak 1), and ``kbar`` = ĩ_0 (the kernel's mean).
    ``_truncate(L, roundoff)`` sets the degree L, the coefficients 4π ĩ_l (l ≤ L) and ``err`` =
    tail[L] + roundoff, the absolute error of one sum per unit mass."""

    def __init__(self, kappa: float, lmin: int = 0) -> None:
        self.kappa = float(kappa)
        nv = max(lmin, 16 + int(math.sqrt(100.0 * self.kappa + 100.0)))
        self.ive = spherical_ive(self.kappa, nv)
        l = np.arange(nv + 1)
        self.tail = _suffix_tail((2.0 * l + 1.0) * self.ive)
        self.kbar = float(self.ive[0])

    def _truncate(self, L: int, roundoff: float) -> None:
        self.L = int(L)
        self.coef = 4.0 * math.pi * self.ive[: self.L + 1]
        self.err = float(self.tail[self.L]) + float(roundoff)

    def degree_needed(self, tol: float) -> float:
        """Smallest L whose kernel tail is ≤ tol·ĩ_0/TRUNCATION_MARGIN."""
        ok = np.flatnonzero(self.tail <= tol * self.kbar / TRUNCATION_MARGIN)
        return float(ok[0]) if ok.size else math.inf


# --------------------------------------------------------------------------------------------
# Every B: Funk–Hecke with a radius per target (densities and points on S²)
# --------------------------------------------------------------------------------------------
#
# For any B, ⟨Bᵀx, y⟩ = r⟨u, y⟩ with r = |Bᵀx|, u = Bᵀx/r, so each target sees the zonal kernel
# of the zonal path (certify's comment block) with its own κ = βr (scaled by its own peak e^{βr}):
#
#     S̃_f(x) = Σ_j w_j f(y_j) e^{βr(⟨u, y_j⟩ − 1)} = Σ_{l ≤ L} 4π ĩ_l(βr) Σ_m Y_lm(u) a^f_lm + err,
#
# with a^f_lm = Σ_j w_j f(y_j) Y*_lm(y_j) the exact grid analysis (l ≤ L ≤ lmax) and the
# synthesis done target by target with that target's Bessel weights (a compiled kernel:
# compiled.bessel_sums, O(L²) per target).  The truncation error per unit mass is at
# most tail(L; βr) ≤ tail(L; β‖B‖₂) (the tail grows with κ while L < κ²), plus the round-off
# of the analysis and the synthesis, TARGET_ROUNDOFF·(L + 16): η = err·Σw, relative to each
# target's own scale, so the certification of the zonal path applies unchanged (u and c = r
# per target), the split pass too.  Cost O(n L²) against O(n m) for the direct sums: "auto" takes it up to
# GENERAL_MAX_KAPPA (measured crossover with the compiled culled sums at nlat 128: between
# β‖B‖ = 100 and 1000; benchmarks/bench_attention.py).

#: round-off of one per-target sum, per unit mass: TARGET_ROUNDOFF·(L + 16).  Measured against
#: long-double sums (GaussGrid 48 and 96; B = diag(0.1, 1, 1), a random SPD and a random general
#: matrix; β = 0.5…100; smooth, vMF κ = 100 and white-noise densities; face points, cell centres
#: and far targets): ≤ 1.4e-16·(L + 16) at L ≤ 21 (vMF), ≤ 2.2e-17·(L + 16) at L = 77–95
TARGET_ROUNDOFF = 5e-16


def degree_levels(kappa: float, L: int, tail_L: float, levels: int = 32):
    """(κ_j, L_j), j = 1..levels: κ_j = κ·j/levels and L_j ≤ L the smallest degree whose tail at
    κ_j is ≤ tail_L (the tail at κ and L).  The tail grows with κ while L < κ² (the comment
    block above), so a target with κ_x ≤ κ_j truncated at L_j is off by no more than at L."""
    ks = kappa * np.arange(1, levels + 1) / levels
    out = np.empty(levels, np.int64)
    for j, k in enumerate(ks):
        t = _SphereKernel(float(k), L).tail
        ok = np.flatnonzero(t[: L + 1] <= tail_L)
        out[j] = int(ok[0]) if ok.size else L
    out[-1] = L
    return ks, np.maximum.accumulate(out)


def _per_target_synthesis(q, sh, B, beta, x, rec, L, levels=None, degrees=None) -> np.ndarray:
    """Σ_{l ≤ L} 4π ĩ_l(β|Bᵀx|) Σ_m Y_lm(Bᵀx/|Bᵀx|) q_lm per target x (n, 3), for the real-field
    coefficients q (4, nlm) of the transform ``sh``: shape (4, n) (compiled.bessel_sums).
    ``levels``: optional (κ_j, L_j) of :func:`degree_levels`: each target stops at the degree of
    the first level with κ_j ≥ its κ.  ``degrees`` (n,): optional, a degree ≤ L per target
    (in place of ``levels``)."""
    a = np.zeros((L + 1, L + 1, 4), dtype=np.complex128)  # [m, l, f], factor 2 for m > 0
    a[sh.m, sh.l] = q.T
    a[1:] *= 2.0
    a[0].imag = 0.0
    z = x @ B
    # (B singular: at Bᵀx = 0 the kernel is the constant 1, which κ → 0 gives: ĩ_0 = 1, rest 0)
    r = np.maximum(np.linalg.norm(z, axis=1), 1e-300)
    if degrees is not None:  # given, a degree ≤ L per target
        degrees = np.asarray(degrees, dtype=np.int64)
    elif levels is not None:
        ks, ls = levels
        degrees = ls[np.minimum(np.searchsorted(ks, beta * r, side="left"), ls.size - 1)]
    return compiled.bessel_sums(a, beta * r, z / r[:, None], rec, L, degrees)


