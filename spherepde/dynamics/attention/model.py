"""The attention head (Q, K, V, β, normalisation) and its mean for a weighted point measure.

For ρ = Σ_j w_j δ_{y_j} and B = QᵀK (:class:`Attention`):

    softmax:  m_β[ρ](x) = Σ_j w_j e^{β⟨Bᵀx, y_j⟩} y_j / Σ_j w_j e^{β⟨Bᵀx, y_j⟩}
    usa:      m_β[ρ](x) = Σ_j w_j e^{β⟨Bᵀx, y_j⟩ − β} y_j
    β = ∞:    m_∞(x)    = Bᵀx / |Bᵀx|
    X_β[ρ](x) = P_x V m_β[ρ](x),   P_x = I − x xᵀ.

:meth:`Attention.mean_and_stats` dispatches to the direct sums (:mod:`.direct`, :mod:`.compiled`,
:mod:`.torch_sums`) or the certified spectral point sums (:mod:`.point_sums`, :mod:`.certify`);
:meth:`Attention.choose_method` is the cost model of "auto".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from spherepde.dynamics.attention import compiled, torch_sums
from spherepde.dynamics.attention.certify import _certified_mean
from spherepde.dynamics.attention.direct import _mean_culled, _mean_direct
from spherepde.dynamics.attention.point_sums import _point_plan
from spherepde.grids.geometry import project_tangent

KINDS = ("softmax", "usa")
METHODS = ("auto", "direct", "reference", "culled", "float32", "compiled", "spectral", "torch",
           "torch-float32")
#: with a GPU present (:func:`torch_sums.gpu_present`), "auto"/"direct" use the torch methods
#: for problems of at least this many target–source pairs (below it the launch overheads win)
TORCH_MIN_PAIRS = 2**18


def _as_matrix(a, name: str, d: int | None) -> np.ndarray:
    m = np.asarray(a, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {m.shape}")
    if d is not None and m.shape[0] != d:
        raise ValueError(f"{name} must be {d}×{d} to match the other matrices, got {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} contains NaN or inf")
    return m


@dataclass(frozen=True, eq=False)
class Attention:
    """One attention head: matrices Q, K, V (d×d), inverse temperature β, normalisation.

    Parameters
    ----------
    Q, K, V : (d, d) arrays.
    beta : float in (0, ∞], ``math.inf`` for the zero-temperature limit (softmax only; needs
        B = QᵀK invertible).
    kind : "softmax" (default) or "usa" (unnormalised self-attention, rescaled by e^{−β}).
    """

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    beta: float
    kind: str = "softmax"
    B: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        Q = _as_matrix(self.Q, "Q", None)
        d = Q.shape[0]
        if d < 2:
            raise ValueError(f"Q must be at least 2×2 (tokens on S^{{d−1}}, d ≥ 2), got {Q.shape}")
        K = _as_matrix(self.K, "K", d)
        V = _as_matrix(self.V, "V", d)
        for n, m in (("Q", Q), ("K", K), ("V", V)):
            m.setflags(write=False)
            object.__setattr__(self, n, m)
        try:
            beta = float(self.beta)
        except (TypeError, ValueError):
            raise TypeError(f"beta must be a number or math.inf, got {self.beta!r}") from None
        if not beta > 0 or math.isnan(beta):
            raise ValueError(f"beta must be > 0 (or math.inf), got {self.beta!r}")
        object.__setattr__(self, "beta", beta)
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        B = Q.T @ K
        B.setflags(write=False)
        object.__setattr__(self, "B", B)
        if math.isinf(beta):
            if self.kind != "softmax":
                raise ValueError("beta = inf is defined for kind='softmax' only")
            s = np.linalg.svd(B, compute_uv=False)
            if s[-1] <= 1e-12 * max(s[0], 1e-300):
                raise ValueError(
                    f"beta = inf needs B = QᵀK invertible (smallest singular value {s[-1]:.3g})")

    @property
    def d(self) -> int:
        return self.Q.shape[0]

    @property
    def A(self) -> np.ndarray:
        """A = V Bᵀ, whose top eigenspace carries the metastable state (Paper 1)."""
        return self.V @ self.B.T

    def to_dict(self) -> dict:
        return {"Q": self.Q.tolist(), "K": self.K.tolist(), "V": self.V.tolist(),
                "beta": self.beta, "kind": self.kind}

    # ------------------------------------------------------------------------------------
    def mean(self, x: np.ndarray, y: np.ndarray | None = None, w: np.ndarray | None = None,
             *, method: str = "auto", tol: float = 1e-8, block: int = 2048) -> np.ndarray:
        """The attention mean m_β[ρ](x) at targets x (n, d), for ρ = Σ_j w_j δ_{y_j}: the mean
        of :meth:`mean_and_stats` (see there for the methods)."""
        return self.mean_and_stats(x, y, w, method=method, tol=tol, block=block)[0]

    def mean_and_stats(self, x: np.ndarray, y: np.ndarray | None = None,
                       w: np.ndarray | None = None, *, method: str = "auto", tol: float = 1e-8,
                       block: int = 2048) -> tuple[np.ndarray, dict]:
        """The attention mean m_β[ρ](x) at targets x (n, d), for ρ = Σ_j w_j δ_{y_j}, and what
        its evaluation did.

        ``y`` (m, d) and ``w`` (m,) (non-negative, any total) are ignored at β = ∞.

        Methods (all but "spectral" are direct log-domain sums, O(n·m)):
        * ``"reference"`` — exact float64 sum over all sources, ``block`` targets at a time;
        * ``"culled"``    — the same sum restricted, target by target, to the source tiles whose
          upper bound on the logit comes within ln(m/tol) of a lower bound on the row maximum;
          what is dropped weighs less than ``tol`` relative to the kept sum, so
          |m − m_ref| ≤ 2·tol (sources on S², d = 3);
        * ``"float32"``   — the reference sum in single precision (error ≈ 1e-7·β·‖B‖; only
          for tolerances that allow it);
        * ``"compiled"``  — the fused numba sums of :mod:`.compiled`
          on every core, culled per target to ln(m/tol) (d = 3, unit sources), any d: error
          ≤ 3e-14 + 2·tol;
        * ``"direct"``    — "compiled" when ``tol`` ≥ compiled.MIN_TOL (1e-12);
          otherwise "culled" when the logit spread (2β max|Bᵀx| plus the spread of log w) can
          exceed the cut, else "reference"; "float32" when ``tol`` is loose enough
          (tol ≥ 1e-6·max(1, β‖B‖)·sqrt(max(1, m/2¹⁶))) and culling would not help;
        * ``"spectral"``  — Funk–Hecke fast summation, O((n + m) L² + L³) with L ≈ sqrt(2βc
          ln(1/ε)) (:mod:`.point_sums`): needs d = 3, β
          finite, B = c·R (R orthogonal) and unit sources; every target is certified,
          |m − m_ref| < (tol/2)|m_ref|, or evaluated by "direct" with tol/8.  ValueError where
          it does not apply;
        * ``"torch"``, ``"torch-float32"`` — the same log-domain sums through PyTorch
          (:mod:`.torch_sums`) on its device: a GPU when present (a fused
          Triton kernel where Triton is installed), else the CPU; float64 agrees with "reference"
          to round-off, float32 has the error model of "float32".  ImportError without torch;
        * ``"auto"``      — with a GPU present and n·m ≥ :data:`TORCH_MIN_PAIRS`: "torch", or
          "torch-float32" where ``tol`` allows float32 (as for "direct"); otherwise "spectral"
          where it applies and its cost model (:func:`spectral_cost`) says it is cheaper than the
          "direct" choice, else the "direct" choice.  ("direct" likewise prefers the GPU.)

        Returns ``(m, stats)``: the means (n, d) and a new dict with the method used
        (``"method"``), the number of ``"targets"``, for "compiled" the (target, source)
        ``"pairs"`` summed, and for "spectral" the series ``"degree"`` and how many targets were
        settled ``"spectral"``-ly, by a ``"split"`` pass and ``"exact"``-ly.
        """
        x = np.asarray(x, float)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}), got {x.shape}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not (0.0 < tol < 1.0):
            raise ValueError(f"tol must be in (0, 1), got {tol!r}")
        z = x @ self.B  # rows: Bᵀx
        if math.isinf(self.beta):
            return (z / np.linalg.norm(z, axis=1, keepdims=True),
                    {"method": "beta=inf", "targets": x.shape[0]})
        y, logw = _sources(y, w, self.d)
        if method in ("auto", "direct"):
            method = self.choose_method(z, y, logw, tol, spectral=method == "auto")
        stats = {"method": method, "targets": x.shape[0]}
        if method == "spectral":
            return self._mean_spectral(x, z, y, logw, tol, block, stats), stats
        return self._mean_direct(z, y, logw, method, tol, block, stats), stats

    def _mean_direct(self, z, y, logw, method, tol, block, stats) -> np.ndarray:
        """The direct sums by ``method`` ("direct": its choice); adds to ``stats``."""
        if method in ("auto", "direct"):
            method = self.choose_method(z, y, logw, tol, spectral=False)
        if method == "culled":
            return _mean_culled(z, y, logw, self.beta, self.kind, tol, block)
        if method == "compiled":
            m, pairs = compiled.mean(z, y, logw, self.beta, self.kind, tol)
            stats["pairs"] = stats.get("pairs", 0) + pairs
            return m
        if method in ("torch", "torch-float32"):
            return torch_sums.mean_direct(
                z, y, logw, self.beta, self.kind,
                precision="float32" if method == "torch-float32" else "float64")
        dtype = np.float32 if method == "float32" else np.float64
        return _mean_direct(z, y, logw, self.beta, self.kind, block, dtype)

    def _mean_spectral(self, x, z, y, logw, tol, block, stats) -> np.ndarray:
        """The certified spectral point sums (ValueError where they do not apply); adds to
        ``stats``."""
        plan, reason = _point_plan(self, y, tol)
        if plan is None:
            raise ValueError(f"method='spectral' does not apply: {reason}")
        spec, c = plan
        # unit total mass (log-sum-exp): the error bound η = err·Σw can then neither underflow
        # to 0 nor overflow, whatever the scale of w; usa means are linear in w and rescaled
        log_mass = float(np.logaddexp.reduce(logw))
        logw = logw - log_mass
        w = np.exp(logw)
        out, counts = _certified_mean(
            self, c, tol, x, spec.err * float(w.sum()), lambda u: spec.sums(w, y, u),
            lambda idx: self._mean_direct(z[idx], y, logw, "direct", tol / 8.0, block, stats),
            general=c is None)
        stats.update(degree=spec.L, **counts)
        if self.kind == "usa":
            with np.errstate(over="ignore"):
                out *= np.exp(log_mass)
        return out

    def choose_method(self, z: np.ndarray, y: np.ndarray, logw: np.ndarray, tol: float,
                      *, spectral: bool = True) -> str:
        """The method "auto" (``spectral=True``) or "direct" picks for Bᵀx rows z and sources
        (y, log w); see :meth:`mean`."""
        n, m = z.shape[0], len(logw)
        # float32: logit error ≈ 1e-7·β‖B‖, plus the fused GPU kernel's float32 sums over the
        # sources, whose error grows like sqrt(m) (torch_sums module docstring)
        float32_ok = tol >= (1e-6 * max(1.0, self.beta * float(np.linalg.norm(self.B, 2)))
                             * math.sqrt(max(1.0, m / 2**16)))
        if n * m >= TORCH_MIN_PAIRS and torch_sums.gpu_present():
            return "torch-float32" if float32_ok else "torch"
        cut = math.log(max(m, 1) / tol)
        spread = 2.0 * self.beta * float(np.max(np.linalg.norm(z, axis=1))) + float(np.ptp(logw))
        if tol >= compiled.MIN_TOL and compiled.available():
            direct = "compiled"
        elif self.d == 3 and m >= 2048 and spread > cut:
            direct = "culled"
        elif float32_ok:
            direct = "float32"
        else:
            direct = "reference"
        if not spectral or n * m < SPECTRAL_MIN_PAIRS:
            return direct
        plan, _ = _point_plan(self, y, tol)
        if plan is None:
            return direct
        # the spectral sums cost at least spectral_cost (every target certified), the direct
        # sums at most n·m·(their largest per_pair below): when the first is larger, the samples
        # cannot change the choice (they cost ≈ 32 rows of exact sums: 15 ms at m = 10⁴)
        most = {"float32": FLOAT32_PAIR_COST, "compiled": COMPILED_PAIR_COST}.get(direct, 1.0)
        if spectral_cost(n, m, plan[0].L) >= n * m * most:
            return direct
        culled, passed = _sample_targets(self, plan, z, y, logw, tol, cut)
        per_pair = {"culled": culled, "float32": FLOAT32_PAIR_COST,
                    "compiled": COMPILED_PAIR_COST * culled}.get(direct, 1.0)
        # the targets the certification rejects are summed directly as well
        cost_spectral = spectral_cost(n, m, plan[0].L) + (1.0 - passed) * n * m * per_pair
        return "spectral" if cost_spectral < n * m * per_pair else direct

    def velocity(self, x: np.ndarray, y: np.ndarray | None = None, w: np.ndarray | None = None,
                 **kw) -> np.ndarray:
        """X_β[ρ](x) = P_x V m_β[ρ](x) at unit targets x (n, d); shape (n, d)."""
        return self.velocity_from_mean(x, self.mean(x, y, w, **kw))

    def velocity_from_mean(self, x: np.ndarray, m: np.ndarray) -> np.ndarray:
        """P_x V m for targets x and attention means m, both (n, d)."""
        return project_tangent(x, m @ self.V.T)


#: negative weights down to −ROUND_OFF × max|w| are taken as round-off zeros
ROUND_OFF = 1e-12


def nonnegative_weights(w: np.ndarray, name: str) -> np.ndarray:
    """Weights/densities as non-negative floats.  Flux-form updates are positive only up to
    round-off (≈ 1e-16 of the largest value): values down to −ROUND_OFF·max|w| are set to 0;
    NaN/inf or anything more negative raises ValueError naming ``name``."""
    w = np.asarray(w, float)
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    wmin = float(w.min(initial=0.0))
    if wmin < 0:
        if wmin < -ROUND_OFF * float(np.abs(w).max()):
            raise ValueError(f"{name} must be non-negative (min {wmin:.3g})")
        w = np.maximum(w, 0.0)
    return w


def _sources(y, w, d: int) -> tuple[np.ndarray, np.ndarray]:
    if y is None or w is None:
        raise ValueError("y and w (the measure's support points and weights) are needed for finite beta")
    y = np.asarray(y, float)
    if y.ndim != 2 or y.shape[1] != d:
        raise ValueError(f"y must have shape (m, {d}) (points in R^{d}), got {y.shape}")
    w = np.asarray(w, float).reshape(-1)
    if w.shape[0] != y.shape[0]:
        raise ValueError(f"w must have one weight per point of y ({y.shape[0]}), got {w.shape[0]}")
    w = nonnegative_weights(w, "w")
    if not np.any(w > 0):
        raise ValueError("w must have positive total mass")
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    keep = w > 0
    return y[keep], logw[keep]


#: "auto" never picks "spectral" below this many (target, source) pairs
SPECTRAL_MIN_PAIRS = 10**5
# Cost model of "auto" (units: one (target, source) pair of the float64 direct sum).  Fitted to
# timings on the 2-core development machine at N = 10⁴ (one BLAS thread; benchmarks/
# bench_particles.py measures the resulting choices): spectral ≈ (n + m)(300 + 0.15 (L+1)²) +
# 4 (L+1)³ (per-point work 384, 355, 1634, 3464, 6891 pairs at L = 12, 28, 80, 134, 240;
# L³ part 2.6–9 pairs per unit); culled ≈ n·m·(0.4 + 3f), f the fraction of sources within the
# cut of the row maximum (measured 0.80, 0.58, 0.53 of the reference at f = 0.14, 0.046, 0.014:
# the per-block source unions and bounds cost about half the full sum there).
SPECTRAL_POINT_OVERHEAD = 300.0
SPECTRAL_POINT_COST = 0.15
SPECTRAL_DEGREE_COST = 4.0
CULLED_BASE, CULLED_SLOPE = 0.4, 3.0
#: cost of a float32 pair relative to a float64 pair of the direct sum
FLOAT32_PAIR_COST = 0.5
#: cost of a pair of the compiled sums (compiled) relative to a float64 pair of the
#: reference (both cores; benchmarks/bench_attention.py measures it against the reference)
COMPILED_PAIR_COST = 0.15


def spectral_cost(n: int, m: int, L: int) -> float:
    """Estimated cost of the spectral point sums (n targets, m sources, degree L), in units of
    one (target, source) pair of the float64 direct sum (see the cost-model constants)."""
    return ((n + m) * (SPECTRAL_POINT_OVERHEAD + SPECTRAL_POINT_COST * (L + 1) ** 2)
            + SPECTRAL_DEGREE_COST * (L + 1) ** 3)


def _sample_targets(att, plan, z, y, logw, tol, cut, samples: int = 32) -> tuple[float, float]:
    """Exact sums at ``samples`` evenly spaced targets, for the cost model of "auto":
    (work of the culled sum per (target, source) pair, CULLED_BASE + CULLED_SLOPE·f capped at 1,
    f the mean fraction of sources whose logit comes within ``cut`` of the row maximum;
    fraction of the targets the spectral certification would accept)."""
    spec, c = plan
    idx = np.unique(np.linspace(0, z.shape[0] - 1, min(samples, z.shape[0])).astype(int))
    lg = att.beta * np.einsum("ik,jk->ij", z[idx], y) + logw
    mx = lg.max(axis=1, keepdims=True)
    f = float(np.mean(lg >= mx - cut))
    e = np.exp(lg - mx)
    s1 = e.sum(axis=1)
    ns = np.linalg.norm(np.einsum("ij,jk->ik", e, y), axis=1)  # |S_y| in the units of s1
    eta = spec.err * float(np.exp(logw).sum())
    with np.errstate(divide="ignore"):
        # log S_1 of the block comment (terms e^{κ(⟨u, y⟩ − 1)}, κ = βc): log s1 + mx − βc
        # (any B, c = None: each target's own scale β|Bᵀx|)
        shift = att.beta * (np.linalg.norm(z[idx], axis=1) if c is None else c)
        log_s1 = np.log(s1) + mx[:, 0] - shift
        log_ns = np.log(ns) + mx[:, 0] - shift
    if att.kind == "softmax":
        ok = ((math.log(8.0 * eta / tol) <= log_s1)
              & (math.log(8.0 * math.sqrt(3) * eta / tol) <= log_ns))
    else:
        ok = math.log(4.0 * math.sqrt(3) * eta / tol) <= log_ns
    return min(1.0, CULLED_BASE + CULLED_SLOPE * f), float(np.mean(ok))

