"""The attention velocity of a density on a grid (:class:`DensityAttention`), for the solvers.

ρ on a GaussGrid (S²) or CircleGrid (S¹) is the measure Σ_j ρ_j |cell_j| δ_{y_j} (y_j the cell
centres).  :class:`DensityAttention` chooses, once, between the certified spectral sums
(:mod:`.grid_sums`, :mod:`.circle_sums`: B ∝ orthogonal; per-target radii for any other B on a
GaussGrid up to β‖B‖ = :data:`GENERAL_MAX_KAPPA`) and the direct sums of
:meth:`~spherepde.dynamics.attention.model.Attention.mean_and_stats`; targets the spectral sums
cannot certify take a split pass (:meth:`DensityAttention._split_pass`), then the direct sums.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.dynamics.attention import compiled, torch_sums
from spherepde.dynamics.attention.certify import _accepted, _certified_mean
from spherepde.dynamics.attention.circle_sums import _SpectralCircle
from spherepde.dynamics.attention.direct import _FLUSH_LOGIT, _culled_blocks, _sums_direct
from spherepde.dynamics.attention.funk_hecke import orthogonal_scale
from spherepde.dynamics.attention.grid_sums import _SpectralSphere, _TargetBessel
from spherepde.dynamics.attention.model import Attention, nonnegative_weights

#: the split pass chooses its level τ so that all but this fraction of its targets can pass
_SPLIT_QUANTILE = 0.02
#: where the first pass summed only a sample (any B, SKIP_SURELY_REJECTED): the quantiles tried
#: after _SPLIT_QUANTILE when its τ is below every cell's density or leaves too many cells above
#: (the targets below the quantile then mostly go on to the exact sums)
_SPLIT_QUANTILES_MORE = (0.1, 0.25, 0.5)
#: ... and is skipped when more than this fraction of the cells would lie above τ
_SPLIT_MAX_FRACTION = 0.5
#: methods of :class:`DensityAttention`
DENSITY_METHODS = ("auto", "spectral", "reference", "culled", "float32", "torch", "torch-float32")
#: "auto" uses the per-target Funk–Hecke path for B not ∝ orthogonal up to this β‖B‖₂
GENERAL_MAX_KAPPA = 150.0
#: the split pass culls its exact part (the cells above τ) against a lower bound on the whole
#: sum — the first pass's, or the split's own spectral part minus its error bound — rather than
#: against the exact part alone (compiled.sums' lb_extra): what is skipped still weighs
#: < tol/64 of the whole sum, the error the split's certification counts
SPLIT_CULL_BY_TOTAL = True
#: any B (_TargetBessel): targets whose S̃_1 is certainly too small for the certification (a
#: bound over tiles of cells, _TargetBessel.surely_below) skip the first spectral synthesis and
#: go straight to the split pass (issue 23: the synthesis of targets the certification rejects
#: was half the time of the concentrated β = 100 rows); False synthesises every target first
SKIP_SURELY_REJECTED = True


def _weighted_quantile(a: np.ndarray, weight: np.ndarray, q: float) -> float:
    """The smallest a_i with Σ_{a_j ≤ a_i} weight_j ≥ q·Σ weight (weights ≥ 0, not all 0)."""
    order = np.argsort(a, kind="stable")
    cum = np.cumsum(weight[order])
    k = min(int(np.searchsorted(cum, q * cum[-1], side="left")), a.size - 1)
    return float(a[order[k]])


def _general_plan(attention: Attention, grid):
    """(_TargetBessel, None) for ``attention`` on a GaussGrid (d = 3, β finite), or (None,
    reason)."""
    from spherepde.grids import GaussGrid  # noqa: PLC0415

    if math.isinf(attention.beta) or not isinstance(grid, GaussGrid):
        return None, "the per-target Funk–Hecke path is for GaussGrid densities at finite beta"
    obj = _TargetBessel(grid, attention.B, attention.beta)
    if not obj.possible:
        return None, "the per-target Funk–Hecke path needs numba and lmax² ≥ 2β‖B‖"
    return (obj, None), None


def _spectral_plan(attention: Attention, grid):
    """(spectral object, c) for ``attention`` on ``grid``, or (None, reason)."""
    from spherepde.grids import CircleGrid, GaussGrid  # noqa: PLC0415

    if math.isinf(attention.beta):
        return None, "beta = inf (the velocity does not depend on the density)"
    if not isinstance(grid, (GaussGrid, CircleGrid)):
        return None, f"the grid is a {type(grid).__name__}, not a GaussGrid or CircleGrid"
    c = orthogonal_scale(attention.B)
    if c is None:
        return None, "B = QᵀK is not a positive multiple of an orthogonal matrix"
    kappa = attention.beta * c
    obj = (_SpectralSphere if isinstance(grid, GaussGrid) else _SpectralCircle)(grid, kappa)
    return (obj, c), None


class DensityAttention:
    """The attention velocity of a density on a grid, for the density solvers.

    ``velocity(t, x, rho)`` (the call ``da(t, x, rho)``) returns X_β[ρ](x) at Cartesian points
    x (..., d) for the density ``rho`` (grid.shape) with ρ = Σ_j rho_j |cell_j| δ_{y_j}, y_j the
    cell centres.

    Parameters
    ----------
    attention : Attention
    grid : GaussGrid (d = 3) or CircleGrid (d = 2)
    method : {"auto", "spectral", "reference", "culled", "float32", "torch", "torch-float32"}
        * ``"spectral"`` — the Funk–Hecke fast path (see the comment block of
          :mod:`.certify`): needs B = QᵀK = c·R with R orthogonal (singular values equal
          to 1e-12 relative), β finite and a GaussGrid or CircleGrid; every target whose
          spectral value cannot be certified to ``tol`` is evaluated exactly (split pass, then
          :meth:`Attention.mean` "direct" with ``tol/8``).  ValueError where not applicable.
        * ``"auto"`` (default) — with a GPU present, :meth:`Attention.mean`'s "direct" choice (the
          torch methods on the GPU; measured faster than the spectral path on the CPU,
          ``benchmarks/bench_gpu.py``); otherwise "spectral" where it applies and the kernel series
          needed for ``tol`` fits on the grid (degree ≤ lmax on S², ≤ n/2 terms on S¹), else
          :meth:`Attention.mean`'s "direct" choice (culled/reference/float32, not its spectral
          point path) with ``tol``.
        * the others — passed to :meth:`Attention.mean`.
    tol : float in (0, 1), default 1e-8
        Accuracy target for the attention mean m_β: on the spectral path the relative error
        |m − m_ref|/|m_ref| of each target is below tol/2 by construction; elsewhere as
        :meth:`Attention.mean` states for its methods.

    :meth:`mean_and_stats` returns what an evaluation did; each velocity call (``da(t, x, rho)``,
    the solvers' interface) records the same in ``last_stats`` (one object per thread, then).
    """

    def __init__(self, attention: Attention, grid, *, method: str = "auto",
                 tol: float = 1e-8) -> None:
        self.attention = attention
        if hasattr(grid, "xyz"):
            y, area = grid.xyz.reshape(-1, 3), grid.cell_area.reshape(-1)
        else:
            y, area = grid.xy, grid.cell_length
        if y.shape[1] != attention.d:
            raise ValueError(
                f"Q, K, V are {attention.d}×{attention.d} but the grid lives in R^{y.shape[1]} "
                f"({type(grid).__name__}); use d = {y.shape[1]}")
        if not isinstance(method, str) or method not in DENSITY_METHODS:
            raise ValueError(f"method must be one of {DENSITY_METHODS}, got {method!r}")
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            raise ValueError(f"tol must be a number in (0, 1), got {tol!r}") from None
        if not (0.0 < tol < 1.0):
            raise ValueError(f"tol must be in (0, 1), got {tol!r}")
        self.grid = grid
        self._y = y
        self._area = area
        self.method, self.tol = method, tol
        #: the spectral sums and their scale c (None for _TargetBessel: a scale per target)
        self._spec: _SpectralSphere | _SpectralCircle | None = None
        self._c: float | None = None
        self.spectral_reason = None  #: why the spectral path is not used (None when it is)
        if method == "auto" and torch_sums.gpu_present():
            self.spectral_reason = "a GPU is present: the direct sums run there"
        elif method in ("auto", "spectral"):
            plan, reason = _spectral_plan(attention, grid)
            if plan is None and reason.startswith("B = QᵀK is not") and hasattr(grid, "lmax"):
                general, why = _general_plan(attention, grid)  # any B: a radius per target
                if general is None:
                    reason = f"{reason}, and {why}"
                elif method == "auto" and general[0].kappa > GENERAL_MAX_KAPPA:
                    reason = (f"{reason}, and beta·‖B‖ = {general[0].kappa:.4g} > "
                              f"{GENERAL_MAX_KAPPA:g} (the compiled direct sums are faster)")
                else:
                    plan = general
            if plan is not None and not plan[0].applicable(tol):
                need = plan[0].degree_needed(tol)
                lim = grid.lmax if hasattr(grid, "lmax") else grid.n // 2
                kappa = plan[0].kappa
                reason = (f"the kernel series for beta·c = {kappa:.4g} needs "
                          f"degree {need:.0f} for tol = {tol:g}, beyond {lim} on this grid")
                if method == "spectral" and hasattr(grid, "n"):
                    reason = None  # on S¹ any number of terms is exact, only slower
                else:
                    plan = None
            if plan is None:
                if method == "spectral":
                    raise ValueError(f"method='spectral' does not apply: {reason}")
                self.spectral_reason = reason
            else:
                self._spec, self._c = plan
        else:
            self.spectral_reason = f"method={method!r}"
        self.last_stats: dict = {}

    @property
    def depends_on_density(self) -> bool:  # β = ∞ does not
        return not math.isinf(self.attention.beta)

    @property
    def spectral(self) -> bool:
        """Whether calls with a density take the spectral path."""
        return self._spec is not None

    @property
    def spectral_degree(self) -> int | None:
        """Degree (S²) or number of Fourier terms (S¹) of the kernel series, if spectral."""
        return None if self._spec is None else self._spec.L

    def __call__(self, t: float, x: np.ndarray, rho: np.ndarray | None = None) -> np.ndarray:
        """X_β[ρ](x) at points x (..., d) (``rho`` None: β = ∞); records ``last_stats``."""
        shape = x.shape
        x = np.asarray(x, float).reshape(-1, shape[-1])
        m, self.last_stats = self._mean_and_stats(x, rho)
        return self.attention.velocity_from_mean(x, m).reshape(shape)

    def mean(self, x: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """The attention mean m_β[ρ](x) at points x (..., d), by this object's method."""
        return self.mean_and_stats(x, rho)[0]

    def mean_and_stats(self, x: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, dict]:
        """The attention mean m_β[ρ](x) at points x (..., d) and what its evaluation did: a new
        dict with ``"method"`` ("spectral", or the method passed to
        :meth:`Attention.mean_and_stats`, "direct" for "auto"), ``"targets"``; on the spectral
        path the ``"degree"`` and the targets settled ``"spectral"``-ly, by the ``"split"`` pass
        and ``"exact"``-ly (with ``"exact_method"``, the direct sums' choice); otherwise
        ``"chosen"``, the method the direct sums chose, and their statistics."""
        shape = x.shape
        x = np.asarray(x, float).reshape(-1, shape[-1])
        if x.shape[1] != self.attention.d:
            raise ValueError(f"x must have shape (..., {self.attention.d}), got {shape}")
        m, stats = self._mean_and_stats(x, rho)
        return m.reshape(shape), stats

    # ------------------------------------------------------------------------------------
    def _mean_and_stats(self, x: np.ndarray, rho) -> tuple[np.ndarray, dict]:
        w = None if rho is None else np.asarray(rho).reshape(-1) * self._area
        if self._spec is None or w is None:
            method = "direct" if self.method in ("auto", "spectral") else self.method
            m, st = self.attention.mean_and_stats(x, self._y, w, method=method, tol=self.tol)
            return m, {**st, "method": method, "chosen": st["method"]}
        return self._spectral_mean(x, w)

    def _spectral_mean(self, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, dict]:
        att, spec, tol = self.attention, self._spec, self.tol
        assert spec is not None  # called only with a spectral plan
        if x.ndim != 2 or x.shape[1] != att.d:
            raise ValueError(f"x must have shape (n, {att.d}), got {x.shape}")
        w = nonnegative_weights(w, "w")
        total = float(w.sum())
        if not total > 0:
            raise ValueError("w must have positive total mass")
        # unit total mass: the error bound η = err·Σw can neither underflow to 0 nor overflow,
        # whatever the scale of ρ (softmax means do not depend on it; usa means are rescaled)
        w = w / total
        wg = w.reshape(self.grid.shape)
        stats = {"method": "spectral", "targets": x.shape[0], "degree": spec.L}

        def split(idx, u, z, den, eta, rows, weight=None):
            lower = np.maximum(den - eta, spec.near_terms(wg, u))
            return self._split_pass(idx, u, z, w, lower, rows, weight)

        def exact(idx):
            m, st = att.mean_and_stats(x[idx], self._y, w, method="direct", tol=tol / 8.0)
            stats["exact_method"] = st["method"]
            if "pairs" in st:
                stats["pairs"] = stats.get("pairs", 0) + st["pairs"]
            return m

        general = isinstance(spec, _TargetBessel)
        upper = None
        if general and SKIP_SURELY_REJECTED:
            def upper(u, theta):
                return spec.upper_bound(wg, u, theta)
        out, counts = _certified_mean(att, self._c, tol, x, spec.err, lambda u: spec.sums(wg, u),
                                      exact, split, general=general, upper=upper)
        stats.update(counts)
        if att.kind == "usa":
            out *= total
        return out, stats

    def _split_pass(self, idx, u, z, w, lower, rows=None, weight=None):
        """Second pass for targets the plain spectral sums cannot certify (far from the mass).

        The weights are split at a density level τ: w_lo = min(w, τ|cell|) goes through the
        spectral sums, whose absolute error is then only η_lo = err·Σ w_lo, and the remainder
        w_hi = w − w_lo (the cells above τ: the bulk of a concentrated density) is summed
        exactly in the log domain, culled against the known lower bound ``lower`` on S_1 (what is
        dropped weighs < tol_hi·S_1, tol_hi = tol/64).  τ is the largest level with
        η_lo ≤ (tol/16)·lower for all but the worst _SPLIT_QUANTILE of the targets (``weight``
        given: the quantile of ``lower`` with these weights, where the first pass summed only a
        sample of the targets; τ only decides how much the split pass settles, each target is
        still accepted by its own sums).  Returns (accepted mask over the targets, their means).
        ``rows``: the positions of u among the targets of the first pass, whose kept point
        tables then serve the spectral sums here.
        """
        att, spec, c, tol = self.attention, self._spec, self._c, self.tol
        assert spec is not None  # called only with a spectral plan
        d, beta = att.d, att.beta
        none = np.zeros(idx.size, bool), np.empty((0, d))
        area = self._area
        rho = w / area
        # M_lo(τ) = Σ_j |cell_j| min(ρ_j, τ): piecewise linear in τ, break points at the ρ_j
        order = np.argsort(rho)
        rs, a_s = rho[order], area[order]
        below = np.r_[0.0, np.cumsum(rs * a_s)]  # mass of the cells with ρ < rs[k]
        above = np.r_[np.cumsum(a_s[::-1])[::-1], 0.0]  # area of the cells from k on
        m_lo = below[:-1] + rs * above[:-1]  # M_lo(rs[k])
        hi, tau = None, 0.0
        for quant in (_SPLIT_QUANTILE,) + (_SPLIT_QUANTILES_MORE if weight is not None else ()):
            q = (float(np.quantile(lower, quant)) if weight is None
                 else _weighted_quantile(lower, weight, quant))
            target = q * tol / 16.0 / spec.err
            k = int(np.searchsorted(m_lo, target, side="right")) - 1  # last break point within
            if k < 0:
                continue
            # on [rs[k], rs[k+1]] the cells 0..k lie below τ: M_lo(τ) = below[k+1] + τ·above[k+1]
            tau = rs[k] if above[k + 1] <= 0 else min(
                rs[k] + (target - m_lo[k]) / above[k + 1], rs[k + 1] if k + 1 < rs.size else np.inf)
            hi = np.flatnonzero(rho > tau)
            if hi.size > _SPLIT_MAX_FRACTION * rho.size or hi.size == 0:
                hi = None
                continue
            break
        if hi is None:
            return none
        w_lo = np.minimum(w, tau * area)
        w_hi = (w - w_lo)[hi]
        eta = spec.err * float(w_lo.sum())
        S = spec.sums(w_lo.reshape(self.grid.shape), u, rows)
        num, den = S[:d].T.copy(), S[d].copy()
        # exact part, in the same scaled units: terms e^{β⟨z, y⟩ + log w − βc}
        tol_hi = tol / 64.0
        # (any B: each target's own scale |Bᵀx|, as its spectral sums)
        shift = (beta * np.linalg.norm(z, axis=1) if isinstance(spec, _TargetBessel)
                 else np.full(idx.size, beta * c))
        with np.errstate(divide="ignore"):
            lb_extra = np.log(lower) + shift
        y_hi, lw_hi = self._y[hi], np.log(w_hi)
        floor_hi = hi.size * math.exp(_FLUSH_LOGIT)  # what the flushed terms may add
        if tol_hi >= compiled.MIN_TOL and compiled.available():
            # compiled sums, culled against the bulk's own maximum (what is dropped weighs
            # < tol_hi of the bulk), rescaled from e^{M} to e^{shift} (M ≤ shift: unit mass)
            # (SPLIT_CULL_BY_TOTAL: against the whole sum, whose spectral part is known here)
            lbx = None
            if SPLIT_CULL_BY_TOTAL:
                with np.errstate(divide="ignore", invalid="ignore"):
                    lbx = np.log(np.maximum(lower, den - eta)) + shift
            nb, db, mx, _ = compiled.sums(z, y_hi, lw_hi, beta, tol_hi, lb_extra=lbx)
            with np.errstate(under="ignore"):
                f = np.exp(mx - shift)
            num += nb * f[:, None]
            den += db * f
            # their exponential's error and the e^{−64} floor of skipped-small terms
            floor_hi = (compiled.EXP_RTOL * db + hi.size * math.exp(-64.0)) * f
        elif d == 3 and hi.size >= 256:
            for blk, ys, lws in _culled_blocks(z, y_hi, lw_hi, beta, tol_hi, 256, tile=32,
                                               lb_extra=lb_extra, blas=False):
                nb, db = _sums_direct(z[blk], ys, lws, beta, shift[blk])
                num[blk] += nb
                den[blk] += db
        else:
            nb, db = _sums_direct(z, y_hi, lw_hi, beta, shift)
            num += nb
            den += db
        err_hi = tol_hi * den + np.maximum(floor_hi, math.exp(_FLUSH_LOGIT))  # > 0: den = 0 fails
        good = _accepted(att.kind, num, den, eta, tol, err_hi)
        if att.kind == "softmax":
            return good, num[good] / den[good, None]
        with np.errstate(over="ignore"):
            return good, num[good] * np.exp(shift[good] - beta)[:, None]
