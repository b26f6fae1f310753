"""Certification of spectral attention sums: every target accepted within ``tol`` or redone.

The spectral sums (:mod:`.grid_sums`, :mod:`.circle_sums`, :mod:`.point_sums`) are accurate to
an ABSOLUTE bound η per sum; :func:`_certified_mean` turns them into attention means whose
relative error is < tol/2 at every target it accepts, and hands the others on (the comment
block below).
"""
from __future__ import annotations

import math

import numpy as np

#: :func:`_certified_mean` with ``upper``: of the targets whose sums would fail, every this
#: many-th is summed anyway (the second pass's estimate of their S_1)
SKIPPED_SAMPLE = 16

# ============================================================================================
# Spectral (Funk–Hecke) fast path: accuracy and certification
# ============================================================================================
#
# When B = QᵀK = c·R with R orthogonal (c > 0), ⟨Bᵀx, y⟩ = c⟨Rᵀx, y⟩ = c⟨u, y⟩ with u = Bᵀx/c a
# unit vector, so every sum of the attention mean is a zonal convolution of the weights with the
# kernel k(t) = e^{κ(t − 1)}, κ = βc (scaled by e^{−κ}: its peak is 1), evaluated at u:
#
#     S_f(u) = Σ_j w_j e^{κ(⟨u, y_j⟩ − 1)} f(y_j),   f ∈ {y_1, …, y_d, 1}
#     softmax: m(x) = S_y(u) / S_1(u);   usa: m(x) = e^{β(c − 1)} S_y(u).
#
# On S² (Funk–Hecke): k(⟨u, y⟩) = Σ_l 4π ĩ_l(κ) Σ_m Y_lm(u) Y*_lm(y), ĩ_l = i_l(κ) e^{−κ}; the
# cell areas of a GaussGrid are its quadrature weights, so the spherical-harmonic analysis of
# the field w_j / |cell_j| · f(y_j) is exactly the discrete sum Σ_j w_j f(y_j) Y*_lm(y_j) (l ≤ lmax)
# and S_f is that analysis times 4π ĩ_l, synthesised at u.  On S¹: k(cos φ) = Σ_k Ĩ_k e^{ikφ},
# Ĩ_k = I_k(κ) e^{−κ}, and the DFT of the cell weights gives Σ_j w_j f_j e^{−ikθ_j} for every k.
#
# Accuracy is ABSOLUTE: each S_f is off by at most η = (tail + ε_r)·Σ_j w_j, where tail bounds
# the discarded part of the kernel series and ε_r the round-off (SPECTRAL_ROUNDOFF).  Hence the
# relative error of m = S_y/S_1 at u is ≈ η/S_1 + √d·η/|S_y|: large far from the mass, where S_1
# is tiny (the notes measured a relative error of 2 at β = 200, 1.5 rad from a blob).  Every
# target is therefore checked: it is accepted when  η ≤ (tol/8)·S_1  and  √d·η ≤ (tol/8)·|S_y|,
# so that the relative error of m is ≤ (tol/4)/(1 − tol/8) (+ ≤ tol/8 from rounding |Bᵀx| to c,
# see density.DensityAttention._spectral_mean) < tol/2.  In the terms of a fallback threshold: a target
# needs S_1(u) ≥ δ·Σw with δ = 8(tail + ε_r)/tol (e.g. ε_r = 1e-14 at L ≈ 33, tol = 1e-8:
# δ = 8e-6 — the largest S_1 is ≤ Σw, attained next to a point mass).  Rejected targets take a
# second, "split" pass (density.DensityAttention._split_pass: the spectral sums only for the weights
# below a density level, the bulk above it summed exactly, culled) and what still fails the
# exact log-domain path (Attention.mean "direct": culled/reference, with tol/8).



def _accepted(kind: str, num: np.ndarray, den: np.ndarray, eta: float, tol: float,
              extra=0.0) -> np.ndarray:
    """The certification test for sums S_y = ``num`` (k, d) and S_1 = ``den`` (k,), each off by
    at most η (+ ``extra``, a number or one per row, for an exactly summed part): softmax
    η + extra ≤ (tol/8)·S_1 and √d·η + extra ≤ (tol/8)·|S_y|; usa √d·η + extra ≤ (tol/4)·|S_y|.
    Rows with NaN or inf are never accepted.  Boolean mask (k,)."""
    sd = math.sqrt(num.shape[1])
    nnum = np.linalg.norm(num, axis=1)
    finite = np.all(np.isfinite(num), axis=1) & np.isfinite(den)
    if kind == "softmax":
        return finite & (eta + extra <= tol / 8.0 * den) & (sd * eta + extra <= tol / 8.0 * nnum)
    return finite & (sd * eta + extra <= tol / 4.0 * nnum)


def _reject_level(kind: str, d: int, tol: float, eta: float) -> float:
    """θ such that a target with S_1 < θ fails :func:`_accepted` whatever its sums (each off by
    ≤ η): softmax S_1 + η < 8η/tol, usa S_1 + √d·η < 4√d·η/tol (|S_y| ≤ S_1, unit sources)."""
    if kind == "softmax":
        return (8.0 / tol - 1.0) * eta
    return math.sqrt(d) * (4.0 / tol - 1.0) * eta


def _certified_mean(att, c: float | None, tol: float, x: np.ndarray, eta: float, sums,
                    exact, second_pass=None, general=False, upper=None) -> tuple[np.ndarray, dict]:
    """The attention mean at targets x (n, d) from spectral sums, every target certified.

    With u = Bᵀx/c, ``sums(u)`` returns (d + 1, k): the scaled sums S_y (rows 0..d−1) and S_1
    (row d) of the comment block above, each off by at most ``eta``.
    A target is accepted when η ≤ (tol/8)·S_1 and √d·η ≤ (tol/8)·|S_y| (softmax; usa:
    √d·η ≤ (tol/4)·|S_y|), so |m − m_ref| < (tol/2)|m_ref|.  The others go to
    ``second_pass(idx, u, z, den, eta, rows) → (accepted mask, means)`` if given (densities: the
    split pass; ``rows``: the positions of its targets among the rows of the u given to ``sums``),
    and what is left to ``exact(idx) → means (len(idx), d)`` (log-domain, tol/8), as do
    targets with β||Bᵀx| − c| > tol/16 (non-unit x, or B only nearly c·R), which could move the
    mean by more than tol/8.  ``general``: the sums of grid_sums._TargetBessel or
    point_sums._TargetPoints (any B), evaluated
    at the targets x themselves (u = x) and scaled by each target's own e^{β|Bᵀx|} (c = |Bᵀx| per
    target; ``c`` is ignored); non-unit targets, β|Bᵀx|·||x| − 1| > tol/16, go to ``exact``.
    ``upper(u, theta)``: optional, per target an upper bound on S_1 where it is < theta, else
    a number ≥ theta (grid_sums._TargetBessel.upper_bound).  Targets with
    S_1 + η < 8η/tol (softmax; usa S_1 + √d·η < 4√d·η/tol: |S_y| ≤ S_1 for unit sources) fail
    the test above whatever their sums, so ``sums`` is not called for them but for every
    :data:`SKIPPED_SAMPLE`-th; the second pass sees S = −inf for the others (no lower bound
    from their sums) and ``second_pass(..., weight=…)``: per target how many targets its sums
    stand for (1, the sample's 1/fraction, 0 for those not summed).
    Returns (means (n, d), counts of targets settled by each pass).
    """
    d, beta = att.d, att.beta
    n = x.shape[0]
    z = x @ att.B
    if general:  # any B: the unit targets themselves, each at its own scale c_i = |Bᵀx_i|
        nz = np.linalg.norm(z, axis=1)
        ok = np.flatnonzero(beta * nz * np.abs(np.linalg.norm(x, axis=1) - 1.0) <= tol / 16.0)
        u, c_each = x[ok], nz[ok]
    else:
        assert c is not None, "c is needed unless general"
        nz = np.linalg.norm(z, axis=1)
        ok = np.flatnonzero(beta * np.abs(nz - c) <= tol / 16.0)
        u = z[ok] / c
    if not eta > 0:  # the tests below then need den, |S_y| > 0 (callers pass unit mass)
        raise ValueError(f"spectral error bound must be positive and finite, got {eta!r}")
    bound = None
    if upper is None:
        S = sums(u)
    else:
        theta = _reject_level(att.kind, d, tol, eta)
        skip = upper(u, theta) < theta
        # every SKIPPED_SAMPLE-th skipped target is summed all the same: the second pass
        # estimates the distribution of S_1 over its targets from them
        weight = np.ones(u.shape[0])
        sk = np.flatnonzero(skip)
        sample = sk[::SKIPPED_SAMPLE]
        weight[sk] = 0.0
        weight[sample] = sk.size / max(sample.size, 1)
        summed = weight > 0
        S = np.full((d + 1, u.shape[0]), -np.inf)
        if summed.any():
            S[:, summed] = sums(u[summed])
        bound = weight
    num, den = S[:d].T, S[d]
    out = np.empty((n, d))
    good = _accepted(att.kind, num, den, eta, tol)
    if bound is not None:  # the sample of the skipped targets: known to fail
        good[skip] = False
    if att.kind == "softmax":
        out[ok[good]] = num[good] / den[good, None]
    else:
        with np.errstate(over="ignore"):
            scale = np.exp(beta * (c_each[good] if general else c) - beta)
            out[ok[good]] = num[good] * np.reshape(scale, (-1, 1))
    todo = np.ones(n, bool)
    todo[ok[good]] = False
    nsplit = 0
    bad = np.flatnonzero(~good)
    if bad.size and second_pass is not None:
        more = {} if bound is None else {"weight": bound[bad]}
        done, m_split = second_pass(ok[bad], u[bad], z[ok[bad]], den[bad], eta, bad, **more)
        out[ok[bad][done]] = m_split
        todo[ok[bad][done]] = False
        nsplit = int(done.sum())
    rest = np.flatnonzero(todo)
    if rest.size:
        out[rest] = exact(rest)
    return out, {"spectral": int(good.sum()), "split": nsplit, "exact": int(rest.size)}

