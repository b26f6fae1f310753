"""Self-attention velocity fields on the sphere S^{d−1} (SPEC.md, Paper 1).

For a measure ρ = Σ_j w_j δ_{y_j} (a density on a grid: y_j the cell centres,
w_j = ρ_j |cell_j|; or N particles with w_j = 1/N) and B = QᵀK:

    softmax:  m_β[ρ](x) = Σ_j w_j e^{β⟨Bᵀx, y_j⟩} y_j / Σ_j w_j e^{β⟨Bᵀx, y_j⟩}
    usa:      m_β[ρ](x) = Σ_j w_j e^{β⟨Bᵀx, y_j⟩ − β} y_j          (unnormalised, rescaled by e^{−β})
    β = ∞:    m_∞(x)    = Bᵀx / |Bᵀx|                               (softmax, full support)

    X_β[ρ](x) = P_x V m_β[ρ](x),   P_x = I − x xᵀ.

Evaluation is in the log domain: logits ℓ_ij = β⟨x_i B, y_j⟩ + log w_j, and the weights are
exp(ℓ_ij − max_j ℓ_ij) — exact at any β (no overflow at β = 10⁴).  Targets are processed in
blocks so that memory stays bounded (``block`` targets × all sources at a time).

The direct sums also run compiled (:mod:`spherepde.dynamics.attention_compiled`: numba, fused,
every core, culled per target), which "direct"/"auto" choose for tol ≥ 1e-12.

For a density on a GaussGrid or CircleGrid with B = QᵀK ∝ orthogonal, :class:`DensityAttention`
also has a spectral (Funk–Hecke) path: the sums are zonal convolutions, done by one SHT (FFT)
analysis and a point synthesis, every target certified against ``tol`` or evaluated exactly
(see the comment block "Spectral (Funk–Hecke) fast path" below).  For any other B on a
GaussGrid the same expansion runs with a radius per target, κ = β|Bᵀx| (comment block "Every B:
Funk–Hecke with a radius per target"), up to β‖B‖ = GENERAL_MAX_KAPPA.  Weighted points on S² (particles)
have the same kind of path in :meth:`Attention.mean` (method "spectral", chosen by "auto" when its
cost model says it is cheaper): adjoint point synthesis → Funk–Hecke → point synthesis, with the
same certification (comment block "Spectral fast summation for weighted points").
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from spherepde.dynamics import attention_compiled, attention_torch
from spherepde.grids.geometry import lat_lon_tiles, project_tangent
from spherepde.grids.sht import _powers  # e^{ikx} by doubling, shared with the SHT evaluation

KINDS = ("softmax", "usa")
METHODS = ("auto", "direct", "reference", "culled", "float32", "compiled", "spectral", "torch",
           "torch-float32")
#: with a GPU present (:func:`attention_torch.gpu_present`), "auto"/"direct" use the torch methods
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
    #: what the last call of :meth:`mean` did (method, and for "spectral" the pass counts)
    last_stats: dict = field(init=False, repr=False, default_factory=dict)

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
        """The attention mean m_β[ρ](x) at targets x (n, d), for ρ = Σ_j w_j δ_{y_j}.

        ``y`` (m, d) and ``w`` (m,) (non-negative, any total) are ignored at β = ∞.

        Methods (all but "spectral" are direct log-domain sums, O(n·m)):
        * ``"reference"`` — exact float64 sum over all sources, ``block`` targets at a time;
        * ``"culled"``    — the same sum restricted, target by target, to the source tiles whose
          upper bound on the logit comes within ln(m/tol) of a lower bound on the row maximum;
          what is dropped weighs less than ``tol`` relative to the kept sum, so
          |m − m_ref| ≤ 2·tol (sources on S², d = 3);
        * ``"float32"``   — the reference sum in single precision (error ≈ 1e-7·β·‖B‖; only
          for tolerances that allow it);
        * ``"compiled"``  — the fused numba sums of :mod:`spherepde.dynamics.attention_compiled`
          on every core, culled per target to ln(m/tol) (d = 3, unit sources), any d: error
          ≤ 3e-14 + 2·tol;
        * ``"direct"``    — "compiled" when ``tol`` ≥ attention_compiled.MIN_TOL (1e-12);
          otherwise "culled" when the logit spread (2β max|Bᵀx| plus the spread of log w) can
          exceed the cut, else "reference"; "float32" when ``tol`` is loose enough
          (tol ≥ 1e-6·max(1, β‖B‖)·sqrt(max(1, m/2¹⁶))) and culling would not help;
        * ``"spectral"``  — Funk–Hecke fast summation, O((n + m) L² + L³) with L ≈ sqrt(2βc
          ln(1/ε)) (see "Spectral fast summation for weighted points" below): needs d = 3, β
          finite, B = c·R (R orthogonal) and unit sources; every target is certified,
          |m − m_ref| < (tol/2)|m_ref|, or evaluated by "direct" with tol/8.  ValueError where
          it does not apply;
        * ``"torch"``, ``"torch-float32"`` — the same log-domain sums through PyTorch
          (:mod:`spherepde.dynamics.attention_torch`) on its device: a GPU when present (a fused
          Triton kernel where Triton is installed), else the CPU; float64 agrees with "reference"
          to round-off, float32 has the error model of "float32".  ImportError without torch;
        * ``"auto"``      — with a GPU present and n·m ≥ :data:`TORCH_MIN_PAIRS`: "torch", or
          "torch-float32" where ``tol`` allows float32 (as for "direct"); otherwise "spectral"
          where it applies and its cost model (:func:`spectral_cost`) says it is cheaper than the
          "direct" choice, else the "direct" choice.  ("direct" likewise prefers the GPU.)

        After each call ``last_stats`` holds the method used and, for "spectral", the series
        degree and how many targets were settled spectrally / exactly.
        """
        x = np.asarray(x, float)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (n, {self.d}), got {x.shape}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not (0.0 < tol < 1.0):
            raise ValueError(f"tol must be in (0, 1), got {tol!r}")
        z = x @ self.B  # rows: Bᵀx
        self.last_stats.clear()
        if math.isinf(self.beta):
            self.last_stats.update(method="beta=inf", targets=x.shape[0])
            return z / np.linalg.norm(z, axis=1, keepdims=True)
        y, logw = _sources(y, w, self.d)
        if method in ("auto", "direct"):
            method = self.choose_method(z, y, logw, tol, spectral=method == "auto")
        self.last_stats.update(method=method, targets=x.shape[0])
        if method == "spectral":
            return self._mean_spectral(x, z, y, logw, tol, block)
        return self._mean_direct(z, y, logw, method, tol, block)

    def _mean_direct(self, z, y, logw, method, tol, block) -> np.ndarray:
        if method in ("auto", "direct"):
            method = self.choose_method(z, y, logw, tol, spectral=False)
        if method == "culled":
            return _mean_culled(z, y, logw, self.beta, self.kind, tol, block)
        if method == "compiled":
            m, pairs = attention_compiled.mean(z, y, logw, self.beta, self.kind, tol)
            self.last_stats["pairs"] = self.last_stats.get("pairs", 0) + pairs
            return m
        if method in ("torch", "torch-float32"):
            return attention_torch.mean_direct(
                z, y, logw, self.beta, self.kind,
                precision="float32" if method == "torch-float32" else "float64")
        dtype = np.float32 if method == "float32" else np.float64
        return _mean_direct(z, y, logw, self.beta, self.kind, block, dtype)

    def _mean_spectral(self, x, z, y, logw, tol, block) -> np.ndarray:
        plan, reason = _point_plan(self, y, tol)
        if plan is None:
            raise ValueError(f"method='spectral' does not apply: {reason}")
        spec, c = plan
        # unit total mass (log-sum-exp): the error bound η = err·Σw can then neither underflow
        # to 0 nor overflow, whatever the scale of w; usa means are linear in w and rescaled
        log_mass = float(np.logaddexp.reduce(logw))
        logw = logw - log_mass
        w = np.exp(logw)
        out, stats = _certified_mean(
            self, c, tol, x, spec.err * float(w.sum()), lambda u: spec.sums(w, y, u),
            lambda idx: self._mean_direct(z[idx], y, logw, "direct", tol / 8.0, block),
            general=c is None)
        self.last_stats.update(degree=spec.L, **stats)
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
        # sources, whose error grows like sqrt(m) (attention_torch module docstring)
        float32_ok = tol >= (1e-6 * max(1.0, self.beta * float(np.linalg.norm(self.B, 2)))
                             * math.sqrt(max(1.0, m / 2**16)))
        if n * m >= TORCH_MIN_PAIRS and attention_torch.gpu_present():
            return "torch-float32" if float32_ok else "torch"
        cut = math.log(max(m, 1) / tol)
        spread = 2.0 * self.beta * float(np.max(np.linalg.norm(z, axis=1))) + float(np.ptp(logw))
        if tol >= attention_compiled.MIN_TOL and attention_compiled.available():
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


#: target rows per block are chosen so that one (rows × sources) buffer stays ≈ 16 MB: the
#: buffer is reused in place, which avoids page faults from fresh large temporaries
BLOCK_BYTES = 2**24


def _mean_direct(z, y, logw, beta, kind, block, dtype=np.float64) -> np.ndarray:
    """Σ_j softmax-weights y_j in the log domain, at most ``block`` targets at a time.

    ℓ_ij = β⟨z_i, y_j⟩ + log w_j;  m_i = Σ_j e^{ℓ_ij − max_j ℓ_ij} y_j / Σ_j e^{ℓ_ij − max_j ℓ_ij}
    (softmax) or Σ_j e^{ℓ_ij − β} y_j (usa).  z (n, d), y (m, d), logw (m,) → (n, d).
    """
    n, m = z.shape[0], y.shape[0]
    rows = max(1, min(block, BLOCK_BYTES // (np.dtype(dtype).itemsize * max(m, 1))))
    out = np.empty((n, y.shape[1]))
    zc, yT, lw = (beta * z).astype(dtype), y.T.astype(dtype), logw.astype(dtype)
    yc = np.ascontiguousarray(yT.T)
    buf = np.empty((min(rows, n), m), dtype)
    for s in range(0, n, rows):
        k = min(rows, n - s)
        b = buf[:k]
        np.matmul(zc[s:s + k], yT, out=b)
        b += lw
        mx = b.max(axis=1, keepdims=True)
        b -= mx
        np.exp(b, out=b)
        num = (b @ yc).astype(np.float64)
        if kind == "softmax":
            out[s:s + k] = num / b.sum(axis=1, keepdims=True, dtype=np.float64)
        else:
            out[s:s + k] = num * np.exp(mx.astype(np.float64) - beta)
    return out


def _sums_direct(z, y, logw, beta, shift) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised sums Σ_j e^{β⟨z_i, y_j⟩ + log w_j − shift_i} y_j and Σ_j e^{…} (float64):
    (num (n, d), den (n,)).  The caller picks ``shift`` so that nothing overflows.

    The thin products (inner or outer dimension d) go through ``np.einsum``, not BLAS: on a
    shared 2-core machine OpenBLAS's threaded dgemm/dgemv took 10–75× longer on such shapes
    (e.g. 23 ms instead of 0.3 ms for (181 × 3) @ (3 × 2611)); einsum's loops are single-threaded.
    Terms below e^{−600} (relative to the shift) are raised to e^{−600}, which keeps denormals
    (slow) out of the products; the caller accounts for the m·e^{−600} this may add to a row.
    """
    n, m = z.shape[0], y.shape[0]
    num, den = np.zeros((n, y.shape[1])), np.zeros(n)
    if m == 0 or n == 0:
        return num, den
    rows = max(1, min(n, BLOCK_BYTES // (8 * m)))
    zc, yT = beta * z, np.ascontiguousarray(y.T)
    buf = np.empty((rows, m))
    for s in range(0, n, rows):
        k = min(rows, n - s)
        b = buf[:k]
        np.einsum("ik,kj->ij", zc[s:s + k], yT, out=b)
        b += logw
        b -= shift[s:s + k, None]
        np.maximum(b, _FLUSH_LOGIT, out=b)
        np.exp(b, out=b)
        for c in range(y.shape[1]):
            num[s:s + k, c] = np.einsum("ij,j->i", b, yT[c])
        den[s:s + k] = b.sum(axis=1)
    return num, den


#: :func:`_sums_direct` raises logit − shift to at least this (e^{−600} ≈ 3e-261)
_FLUSH_LOGIT = -600.0


def _mean_culled(z, y, logw, beta, kind, tol, block, tile=128) -> np.ndarray:
    """Culled log-domain sum (see :meth:`Attention.mean`); sources on S² (d = 3)."""
    out = np.empty((z.shape[0], 3))
    for idx, ys, lws in _culled_blocks(z, y, logw, beta, tol, block, tile):
        out[idx] = _mean_direct(z[idx], ys, lws, beta, kind, len(idx))
    return out


def _culled_blocks(z, y, logw, beta, tol, block, tile=128, lb_extra=None, blas=True):
    """The target blocks of the culled sum and, for each, the sources kept.

    Yields ``(idx, y_kept, logw_kept)``: target indices (into z) and the sources whose tile
    upper bound on the logit β⟨z_i, y_j⟩ + log w_j comes within cut = ln(m/tol) of a lower bound
    ``lb_i`` on the row's total (the largest logit of the tiles' representatives, or
    ``lb_extra[i]`` where that is larger: a lower bound on log Σ_j e^{logit} known to the
    caller, in the same logit units).  Each dropped source weighs at most e^{lb − cut} =
    tol e^{lb}/m, so what is dropped weighs less than tol × the row's total.
    ``blas=False`` computes the thin (× 3) products with einsum (see :func:`_sums_direct`).
    """
    ns = y.shape[0]
    cut = math.log(ns / tol)
    so, sb = lat_lon_tiles(y, tile)
    y, logw = y[so], logw[so]
    nt = len(sb) - 1
    cen = np.add.reduceat(y, sb[:-1], axis=0)
    cen /= np.maximum(np.linalg.norm(cen, axis=1, keepdims=True), 1e-300)
    tile_id = np.repeat(np.arange(nt), np.diff(sb))
    ang = np.arccos(np.clip(np.sum(y * cen[tile_id], axis=1), -1, 1))
    rad = np.maximum.reduceat(ang, sb[:-1])
    bmax = np.maximum.reduceat(logw, sb[:-1])
    rep = sb[:-1] + np.array([np.argmax(logw[a:b]) for a, b in zip(sb[:-1], sb[1:])])
    yrep, lrep = y[rep], logw[rep]

    nz = np.linalg.norm(z, axis=1)
    u = z / np.maximum(nz[:, None], 1e-300)
    to, tb = lat_lon_tiles(u, block // 4 if block >= 8 else 1)
    for a, b in zip(tb[:-1], tb[1:]):
        idx = to[a:b]
        zb, nzb, ub = z[idx], nz[idx], u[idx]
        if not blas:
            lb = np.max(beta * np.einsum("ik,jk->ij", zb, yrep) + lrep[None, :], axis=1)
            cosang = np.einsum("ik,jk->ij", ub, cen)
        else:
            lb = np.max(beta * zb @ yrep.T + lrep[None, :], axis=1)
            cosang = ub @ cen.T
        if lb_extra is not None:
            lb = np.maximum(lb, lb_extra[idx])
        theta = np.arccos(np.clip(cosang, -1, 1))
        ubd = beta * nzb[:, None] * np.cos(np.clip(theta - rad[None, :], 0.0, np.pi)) + bmax[None, :]
        keep = np.any(ubd >= (lb - cut)[:, None], axis=0)
        if not keep.any():
            yield idx, y[:0], logw[:0]
            continue
        sel = np.concatenate([np.arange(sb[t], sb[t + 1]) for t in np.flatnonzero(keep)])
        yield idx, y[sel], logw[sel]


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


# ============================================================================================
# Spectral (Funk–Hecke) fast path for the attention mean of a density on a grid
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
# see DensityAttention._spectral_mean) < tol/2.  In the terms of a fallback threshold: a target
# needs S_1(u) ≥ δ·Σw with δ = 8(tail + ε_r)/tol (e.g. ε_r = 1e-14 at L ≈ 33, tol = 1e-8:
# δ = 8e-6 — the largest S_1 is ≤ Σw, attained next to a point mass).  Rejected targets take a
# second, "split" pass (DensityAttention._split_pass: the spectral sums only for the weights
# below a density level, the bulk above it summed exactly, culled) and what still fails the
# exact log-domain path (Attention.mean "direct": culled/reference, with tol/8).

#: the split pass chooses its level τ so that all but this fraction of its targets can pass
_SPLIT_QUANTILE = 0.02
#: ... and is skipped when more than this fraction of the cells would lie above τ
_SPLIT_MAX_FRACTION = 0.5
#: methods of :class:`DensityAttention`
DENSITY_METHODS = ("auto", "spectral", "reference", "culled", "float32", "torch", "torch-float32")
#: B counts as c·R (R orthogonal) when its singular values agree to this relative spread
ORTHOGONAL_RTOL = 1e-12
#: series are truncated where the kernel tail (sup-norm, kernel peak = 1) drops below this
SERIES_TAIL = 1e-17
#: round-off of one spectral sum, per unit mass: ε_r(L) = SPECTRAL_ROUNDOFF · (L + 16).
#: Measured against longdouble sums (GaussGrid 32–256, κ = 0.5–300, densities from uniform and
#: white noise to vMF κ = 200 at a pole, mid-latitude, two blobs): ≤ 1.2e-15 at L ≤ 21 (model
#: ≥ 5.6e-15), ≤ 2.6e-15 at L = 43 (1.2e-14), ≤ 6.1e-15 at L = 90 (2.1e-14), ≤ 4.1e-15 at
#: L = 154 (3.4e-14); far from the mass (S_1 < 1e-3 Σw) ≤ 5e-16.
SPECTRAL_ROUNDOFF = 2e-16
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


#: keep the tables of the spectral synthesis that depend only on the targets from one call to the
#: next while the targets stay the same (_TargetCache); False recomputes them on every call (the
#: switch of benchmarks/bench_attention_cache.py; the results are bitwise the same either way)
TARGET_CACHE = True
#: the kept tables of one spectral object take at most this many bytes; beyond, they are
#: recomputed on every call (only the copy of the targets and O(1) numbers per target are kept)
TARGET_CACHE_BYTES = 64 * 2**20


class _TargetCache:
    """Tables that depend only on the targets u of a spectral evaluation, kept between calls.

    The mean-field stepper evaluates the attention at the same points (the face points of its
    transport) twice a step; the point synthesis needs tables that depend on those points only
    (longitudes, e^{imλ}, the latitude rings and their Legendre table), and recomputing them was
    ~40% of a drift evaluation at nlat 64–128.  As in ``NoiseField._cached_basis``, the targets of
    each call are compared (np.array_equal) with a copy of the previous call's; the tables are
    built on the second call in a row with the same targets (a one-off call costs only that copy)
    and dropped when the targets change.  ``build(u, keep)`` makes the tables: with keep=False
    only what a single call needs (computed as before, chunk by chunk), with keep=True everything
    that fits in TARGET_CACHE_BYTES.  Both give bitwise the same results.
    """

    def __init__(self) -> None:
        self.last = None  # copy of the previous call's targets
        self.tables = None  # their tables, once built

    def get(self, u: np.ndarray, build):
        if not TARGET_CACHE:
            return build(u, False)
        last = self.last
        if last is not None and last.shape == u.shape and np.array_equal(last, u):
            if self.tables is None:
                self.tables = build(u, True)
            return self.tables
        self.last, self.tables = np.array(u, dtype=float, copy=True), None
        return build(u, False)

    def rows(self, u: np.ndarray, rows) -> object | None:
        """The kept tables if u are the rows ``rows`` of the kept targets (checked), else None:
        the split pass evaluates at a subset of the targets of the call before it."""
        if not TARGET_CACHE or self.tables is None or rows is None:
            return None
        rows = np.asarray(rows)
        if rows.shape != u.shape[:1] or not np.array_equal(self.last[rows], u):
            return None
        return self.tables


class _SphereTargets:
    """What :meth:`_SpectralSphere._evaluate` needs to know about its targets u (n, 3).

    Targets on few latitude rings (the face points of the FFSL transport when R = I: 2·nlat + 1
    rings) take the ring synthesis: ``mu`` the distinct values of u_3 (sorted, clipped to
    [−1, 1]), ``ring`` the ring of each target, ``lon`` the longitudes.  Other targets
    (``scattered``) take SphericalHarmonics.evaluate at (``lon``, ``lat``).  With ``keep`` the
    ring synthesis' tables are kept as well, each if it fits in what is left of TARGET_CACHE_BYTES:
    e^{imλ} (sht._powers) at each distinct longitude (the face points have ≈ 3·nlon of them, to
    rounding), gathered per target, then the Legendre table y_lm(μ_r) of every ring; what is not
    kept :meth:`powers` and :meth:`legendre` compute as needed.  Every value is the one the direct
    computation gives, bit for bit (the recursions are elementwise, and every product sees the
    same operands).
    """

    def __init__(self, spec, u: np.ndarray, keep: bool) -> None:
        n, L = u.shape[0], spec.L
        self.L, self._rec = L, spec._rec  # (not spec itself: no reference cycle via its cache)
        self.lon = np.arctan2(u[:, 1], u[:, 0])
        mu, self.ring = np.unique(u[:, 2], return_inverse=True)
        self.scattered = mu.size * 4 > n or n < 256
        self.lat = self.mu = self._Y = self._E = self._lon_index = None
        if self.scattered:
            r = np.linalg.norm(u, axis=1)
            self.lat = np.arcsin(np.clip(u[:, 2] / r, -1.0, 1.0))
            return
        self.mu = np.clip(mu, -1.0, 1.0)
        if keep:  # the longitude table first: it saves the most (_powers at every target)
            budget = TARGET_CACHE_BYTES
            lon_u, lon_index = np.unique(self.lon, return_inverse=True)
            size = 16 * (L + 1) * lon_u.size + 8 * n
            if size <= budget:
                self._E = _powers(lon_u, L)  # (distinct longitudes, L+1)
                self._lon_index = lon_index
                budget -= size
            if 8 * (L + 1) ** 2 * mu.size <= budget:
                self._Y = _ring_legendre(self.mu, self._rec)  # [m, ring, l]

    def legendre(self, a: int, b: int) -> np.ndarray:
        """The Legendre table of rings a..b−1, [m, ring, l] (see _ring_legendre)."""
        if self._Y is None:
            return _ring_legendre(self.mu[a:b], self._rec)
        return np.ascontiguousarray(self._Y[:, a:b])

    def powers(self, sl: slice) -> np.ndarray:
        """e^{imλ}, m = 0..L, at the targets ``sl``: (targets, L+1) complex."""
        if self._E is None:
            return _powers(self.lon[sl], self.L)
        return np.take(self._E, self._lon_index[sl], axis=0)

    def subset(self, rows: np.ndarray) -> "_SphereTargets | None":
        """The targets (these targets)[rows] (the split pass) with the kept tables, as
        ``_SphereTargets(spec, (these targets)[rows], False)`` would describe them; None where
        that would not take the ring synthesis."""
        n = rows.size
        if self.scattered or n < 256:
            return None
        rings = self.ring[rows]
        present = np.flatnonzero(np.bincount(rings, minlength=self.mu.size))  # = np.unique(u[:, 2])
        if present.size * 4 > n:
            return None
        sub = copy.copy(self)
        sub.lon = self.lon[rows]
        renumber = np.zeros(self.mu.size, dtype=np.intp)
        renumber[present] = np.arange(present.size)
        sub.ring, sub.mu = renumber[rings], self.mu[present]
        if self._Y is not None and present.size < self.mu.size:
            sub._Y = np.take(self._Y, present, axis=1)
        if self._E is not None:
            sub._lon_index = self._lon_index[rows]
        return sub


class _SpectralSphere(_SphereKernel):
    """Zonal convolutions with e^{κ(t−1)} of cell weights on a GaussGrid, at arbitrary points.

    The tables that depend only on the targets are kept between calls with the same targets
    (_TargetCache, _SphereTargets)."""

    d = 3

    def __init__(self, grid, kappa: float) -> None:
        self.grid, self.kappa = grid, float(kappa)
        self._targets = _TargetCache()
        lmax = grid.lmax
        self.possible = lmax * lmax >= 2.0 * self.kappa  # else the tail at lmax is ≥ e^{−1}
        if not self.possible:
            return
        super().__init__(kappa, lmax)  # the tail is needed at every l ≤ lmax
        below = np.flatnonzero(self.tail <= SERIES_TAIL)
        L = max(1, min(lmax, int(below[0]) if below.size else lmax))
        self._truncate(L, SPECTRAL_ROUNDOFF * (L + 16))
        self._sh = None

    def degree_needed(self, tol: float) -> float:
        """Smallest L whose kernel tail is ≤ tol·ĩ_0/TRUNCATION_MARGIN (inf: beyond lmax)."""
        if not self.possible:
            return math.inf
        return super().degree_needed(tol)

    def applicable(self, tol: float) -> bool:
        return self.degree_needed(tol) <= self.grid.lmax

    def _transform(self):
        if self._sh is None:
            from spherepde.grids.sht import SphericalHarmonics  # noqa: PLC0415

            sh = SphericalHarmonics(self.grid, lmax=self.L)
            g = self.grid
            wq = _backend_gauss_weights(sh)
            # the backend's quadrature weights may differ from grid.weights (grids.gauss_legendre)
            # in the last digits (pyshtools' by up to ~1e-13 relative at the polar rings):
            # dividing by the backend's cell areas makes the analysis reproduce Σ_j w_j … exactly
            self._inv_area = (1.0 / (wq * g.dlon))[:, None]
            self._sh = sh
            # normalised Legendre recursion coefficients (no Condon–Shortley phase), for rings
            self._rec = _legendre_recursion(self.L)
        return self._sh

    def near_terms(self, w: np.ndarray, u: np.ndarray) -> np.ndarray:
        """max over the ≤ 4 cells around each u of w_j e^{κ(⟨u, y_j⟩ − 1)}: a lower bound on S_1."""
        return _near_cell_terms(self.grid, w, u, self.kappa)

    def sums(self, w: np.ndarray, u: np.ndarray, rows=None) -> np.ndarray:
        """S_f(u) for f = y_1, y_2, y_3, 1 (shape (4, n)); w cell weights (nlat, nlon), u (n, 3)
        with |u| = 1 (to rounding).  ``rows``: optional, u are these rows of the targets of the
        previous call (the split pass), so that their kept tables serve (checked)."""
        sh = self._transform()
        dens = w * self._inv_area
        xyz = self.grid.xyz
        fields = np.stack([dens * xyz[..., 0], dens * xyz[..., 1], dens * xyz[..., 2], dens])
        q = sh.analyse(fields)
        q *= self.coef[sh.l]
        return self._evaluate(q, u, rows)

    def _evaluate(self, q: np.ndarray, u: np.ndarray, rows=None) -> np.ndarray:
        n = u.shape[0]
        out = np.empty((q.shape[0], n))
        if n == 0:
            return out
        if rows is None:
            t = self._targets.get(u, lambda v, keep: _SphereTargets(self, v, keep))
        else:  # a subset of the last targets: their kept tables serve, else computed as needed
            kept = self._targets.rows(u, rows)
            t = None if kept is None else kept.subset(np.asarray(rows))
            if t is None:
                t = _SphereTargets(self, u, False)
        if t.scattered:  # scattered targets: the general point evaluation
            return self._sh.evaluate(q, t.lon, t.lat)
        # targets on few latitude rings (e.g. the face points of the FFSL transport when R = I):
        # Legendre sums once per ring, then a Fourier sum in longitude per point
        P = self._ring_sums(q, t)  # (rings, nb, L+1), factor 2 for m > 0
        Pr, Pi = np.ascontiguousarray(P.real), np.ascontiguousarray(P.imag)
        # gathered per point and contracted with einsum: many tiny per-ring BLAS calls were
        # 5–20× slower (multithreaded OpenBLAS on a shared machine)
        step = max(64, (1 << 21) // (Pr.shape[1] * (self.L + 1)))
        for a in range(0, n, step):
            sl = slice(a, min(n, a + step))
            e = t.powers(sl)
            rr = t.ring[sl]
            out[:, sl] = (np.einsum("pm,pbm->bp", e.real, Pr[rr])
                          - np.einsum("pm,pbm->bp", e.imag, Pi[rr]))
        return out

    def _ring_sums(self, q: np.ndarray, t: "_SphereTargets") -> np.ndarray:
        """P[r, b, m] = c_m Σ_l q_b,lm y_lm(μ_r) at the rings μ_r = t.mu (c_0 = 1 on the real part,
        c_m = 2)."""
        L, sh = self.L, self._sh
        nb = q.shape[0]
        Qd = np.zeros((nb, L + 1, L + 1), dtype=np.complex128)  # [b, l, m]
        Qd[:, sh.l, sh.m] = q
        Qm = Qd.transpose(2, 1, 0)  # [m, l, b]
        Qr, Qi = np.ascontiguousarray(Qm.real), np.ascontiguousarray(Qm.imag)
        nr = t.mu.size
        P = np.empty((nr, nb, L + 1), dtype=np.complex128)
        chunk = max(1, (1 << 22) // (L + 1) ** 2)  # rings per Legendre table of ≤ 32 MB
        for a in range(0, nr, chunk):
            Ym = t.legendre(a, min(nr, a + chunk))  # [m, ring, l]
            Pc = (Ym @ Qr) + 1j * (Ym @ Qi)  # [m, ring, b]
            Pc[0] = Pc[0].real
            Pc[1:] *= 2.0
            P[a:a + chunk] = Pc.transpose(1, 2, 0)
        return P


def _near_cell_terms(grid, w: np.ndarray, u: np.ndarray, kappa) -> np.ndarray:
    """max over the ≤ 4 cells of ``grid`` around each direction u (n, 3) of
    w_j e^{κ(⟨u, y_j⟩ − 1)} (κ a number or one per target): a lower bound on the scaled sum."""
    g = grid
    r = np.maximum(np.linalg.norm(u, axis=1), 1e-300)
    lat = np.arcsin(np.clip(u[:, 2] / r, -1.0, 1.0))
    lon = np.arctan2(u[:, 1], u[:, 0])
    j = np.clip(np.searchsorted(-g.lat, -lat), 1, g.nlat - 1)
    i = np.floor(np.mod(lon, 2 * np.pi) / g.dlon).astype(int)
    best = np.zeros(u.shape[0])
    for jj in (j - 1, j):
        for ii in (i % g.nlon, (i + 1) % g.nlon):
            best = np.maximum(best, w[jj, ii] * np.exp(
                kappa * (np.sum(u * g.xyz[jj, ii], axis=1) - 1.0)))
    return best


def _ring_legendre(mu: np.ndarray, rec) -> np.ndarray:
    """Orthonormal y_lm(μ) without the Condon–Shortley phase, as [m, ring, l] (0 for m > l), from
    the recursion coefficients ``rec`` = (a, b) of _SpectralSphere._transform (degree L =
    len(a) − 1).  Elementwise in the rings: a ring's values do not depend on the other rings."""
    a, b = rec
    L = a.shape[0] - 1
    s = np.sqrt(np.clip((1.0 - mu) * (1.0 + mu), 0.0, None))
    Y = np.zeros((L + 1, L + 1, mu.size))  # [l, m, ring]
    Y[0, 0] = 1.0 / math.sqrt(4.0 * math.pi)
    with np.errstate(under="ignore"):
        for l in range(1, L + 1):
            Y[l, :l] = a[l, :l, None] * (mu * Y[l - 1, :l]
                                         - (b[l, :l, None] * Y[l - 2, :l] if l > 1 else 0.0))
            Y[l, l] = math.sqrt((2.0 * l + 1.0) / (2.0 * l)) * s * Y[l - 1, l - 1]
    return np.ascontiguousarray(Y.transpose(1, 2, 0))


def _backend_gauss_weights(sh) -> np.ndarray:
    """The Gauss weights the transform's backend integrates with, north to south (falls back
    to grid.weights if they cannot be read)."""
    g = sh.grid
    w = None
    try:
        impl = sh._impl
        if sh.backend == "shtns":
            w = np.asarray(impl.sh.gauss_wts(), dtype=float)
            if w.size == g.nlat // 2:
                w = np.concatenate([w, w[::-1]])
        else:
            w = np.asarray(impl.w, dtype=float)
    except Exception:  # pragma: no cover - defensive: unknown backend internals
        w = None
    if w is None or w.shape != (g.nlat,) or not np.allclose(w, g.weights, rtol=1e-8, atol=0):
        return np.asarray(g.weights, float)
    return w


class _CircleTargets:
    """The angles φ of the targets u (n, 2) of :meth:`_SpectralCircle.sums` and, with ``keep``
    (within TARGET_CACHE_BYTES), the table e^{ikφ}, k = 0..L (sht._powers) at every target, kept
    between calls with the same targets (_TargetCache); without it, :meth:`powers` computes the
    table chunk by chunk as needed (bitwise the same values: _powers is elementwise)."""

    def __init__(self, L: int, u: np.ndarray, keep: bool) -> None:
        self.L = L
        self.phi = np.arctan2(u[:, 1], u[:, 0])
        fits = 16 * (L + 1) * u.shape[0] <= TARGET_CACHE_BYTES
        self._E = _powers(self.phi, L) if keep and fits else None

    def powers(self, sl: slice) -> np.ndarray:
        """e^{ikφ}, k = 0..L, at the targets ``sl``: (targets, L+1) complex."""
        return _powers(self.phi[sl], self.L) if self._E is None else self._E[sl]

    def subset(self, rows: np.ndarray) -> "_CircleTargets | None":
        """The targets (these targets)[rows] with the kept table (None if none is kept)."""
        if self._E is None:
            return None
        sub = copy.copy(self)
        sub.phi, sub._E = self.phi[rows], np.take(self._E, rows, axis=0)
        return sub


class _SpectralCircle:
    """Convolutions with e^{κ(cos φ − 1)} of cell weights on a CircleGrid, at arbitrary angles.

    The table e^{ikφ} at the targets is kept between calls with the same targets (_TargetCache,
    _CircleTargets)."""

    d = 2

    def __init__(self, grid, kappa: float) -> None:
        self.grid, self.kappa = grid, float(kappa)
        self._targets = _TargetCache()
        self.possible = True
        nv = 16 + int(math.sqrt(100.0 * self.kappa + 100.0))
        v = circular_ive(self.kappa, nv)
        self.tail = _suffix_tail(np.r_[v[0], 2.0 * v[1:]])
        self.kbar = float(v[0])
        below = np.flatnonzero(self.tail <= SERIES_TAIL)
        # Σ_j w_j f_j e^{−ikθ_j} is n-periodic in k, so any K is exact (no cap at n/2)
        self.L = max(1, int(below[0]) if below.size else nv)
        self.coef = v[: self.L + 1]
        self.err = float(self.tail[self.L]) + SPECTRAL_ROUNDOFF * (self.L + 16)

    def degree_needed(self, tol: float) -> float:
        ok = np.flatnonzero(self.tail <= tol * self.kbar / TRUNCATION_MARGIN)
        return float(ok[0]) if ok.size else math.inf

    def applicable(self, tol: float) -> bool:
        # cheaper than the direct sum: fewer terms per target than half the sources
        return self.degree_needed(tol) <= self.grid.n // 2

    def near_terms(self, w: np.ndarray, u: np.ndarray) -> np.ndarray:
        """max over the 2 cells around each u of w_j e^{κ(⟨u, y_j⟩ − 1)}: a lower bound on S_1."""
        g = self.grid
        i = np.floor(np.mod(np.arctan2(u[:, 1], u[:, 0]), 2 * np.pi) / g.dtheta).astype(int)
        best = np.zeros(u.shape[0])
        for ii in (i % g.n, (i + 1) % g.n):
            best = np.maximum(best, w[ii] * np.exp(self.kappa * (np.sum(u * g.xy[ii], axis=1) - 1.0)))
        return best

    def sums(self, w: np.ndarray, u: np.ndarray, rows=None) -> np.ndarray:
        """S_f(u) for f = y_1, y_2, 1 (shape (3, n)); w (n_cells,), u (n, 2) unit.  ``rows``:
        optional, u are these rows of the previous call's targets (see _SpectralSphere.sums)."""
        g = self.grid
        F = np.fft.fft(np.stack([w * g.xy[:, 0], w * g.xy[:, 1], w]), axis=1)
        k = np.arange(self.L + 1)
        G = F[:, k % g.n] * self.coef  # (3, K+1)
        G[:, 1:] *= 2.0
        G = np.ascontiguousarray(G.T)
        if rows is None:
            t = self._targets.get(u, lambda v, keep: _CircleTargets(self.L, v, keep))
        else:  # a subset of the last targets (the split pass)
            kept = self._targets.rows(u, rows)
            t = None if kept is None else kept.subset(np.asarray(rows))
            if t is None:
                t = _CircleTargets(self.L, u, False)
        out = np.empty((3, u.shape[0]))
        step = max(1, (1 << 20) // (self.L + 1))
        for a in range(0, u.shape[0], step):
            out[:, a:a + step] = (t.powers(slice(a, a + step)) @ G).real.T
        return out


# --------------------------------------------------------------------------------------------
# Every B: Funk–Hecke with a radius per target (densities on a GaussGrid)
# --------------------------------------------------------------------------------------------
#
# For any B, ⟨Bᵀx, y⟩ = r⟨u, y⟩ with r = |Bᵀx|, u = Bᵀx/r, so each target sees the zonal kernel
# of the comment block above with its own κ = βr (scaled by its own peak e^{βr}):
#
#     S̃_f(x) = Σ_j w_j f(y_j) e^{βr(⟨u, y_j⟩ − 1)} = Σ_{l ≤ L} 4π ĩ_l(βr) Σ_m Y_lm(u) a^f_lm + err,
#
# with a^f_lm = Σ_j w_j f(y_j) Y*_lm(y_j) the exact grid analysis (l ≤ L ≤ lmax) and the
# synthesis done target by target with that target's Bessel weights (a compiled kernel:
# attention_compiled.bessel_sums, O(L²) per target).  The truncation error per unit mass is at
# most tail(L; βr) ≤ tail(L; β‖B‖₂) (the tail grows with κ while L < κ²), plus the round-off
# of the analysis and the synthesis, TARGET_ROUNDOFF·(L + 16): η = err·Σw, relative to each
# target's own scale, so the certification of the zonal path applies unchanged (u and c = r
# per target), the split pass too.  Cost O(n L²) against O(n m) for the direct sums: "auto" takes it up to
# GENERAL_MAX_KAPPA (measured crossover with the compiled culled sums at nlat 128: between
# β‖B‖ = 100 and 1000; benchmarks/bench_attention.py).

#: "auto" uses the per-target Funk–Hecke path for B not ∝ orthogonal up to this β‖B‖₂
GENERAL_MAX_KAPPA = 150.0
#: round-off of one per-target sum, per unit mass: TARGET_ROUNDOFF·(L + 16).  Measured against
#: long-double sums (GaussGrid 48 and 96; B = diag(0.1, 1, 1), a random SPD and a random general
#: matrix; β = 0.5…100; smooth, vMF κ = 100 and white-noise densities; face points, cell centres
#: and far targets): ≤ 1.4e-16·(L + 16) at L ≤ 21 (vMF), ≤ 2.2e-17·(L + 16) at L = 77–95
TARGET_ROUNDOFF = 5e-16


def _per_target_synthesis(q, sh, B, beta, x, rec, L) -> np.ndarray:
    """Σ_{l ≤ L} 4π ĩ_l(β|Bᵀx|) Σ_m Y_lm(Bᵀx/|Bᵀx|) q_lm per target x (n, 3), for the real-field
    coefficients q (4, nlm) of the transform ``sh``: shape (4, n) (attention_compiled.bessel_sums)."""
    a = np.zeros((L + 1, L + 1, 4), dtype=np.complex128)  # [m, l, f], factor 2 for m > 0
    a[sh.m, sh.l] = q.T
    a[1:] *= 2.0
    a[0].imag = 0.0
    z = x @ B
    # (B singular: at Bᵀx = 0 the kernel is the constant 1, which κ → 0 gives: ĩ_0 = 1, rest 0)
    r = np.maximum(np.linalg.norm(z, axis=1), 1e-300)
    return attention_compiled.bessel_sums(a, beta * r, z / r[:, None], rec, L)


def _legendre_recursion(L: int) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients (a, b), [l, m], of the orthonormal Legendre recursion (no Condon–Shortley
    phase) y_lm = a_lm (μ y_{l−1,m} − b_lm y_{l−2,m}), zero where m ≥ l (resp. m ≥ l − 1)."""
    ll = np.arange(L + 1, dtype=float)[:, None]
    mm = np.arange(L + 1, dtype=float)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.sqrt((4.0 * ll**2 - 1.0) / (ll**2 - mm**2))
        b = np.sqrt(((ll - 1.0) ** 2 - mm**2) / (4.0 * (ll - 1.0) ** 2 - 1.0))
    return np.where(mm < ll, a, 0.0), np.where(mm < ll - 1, b, 0.0)


class _TargetBessel(_SpectralSphere):
    """S̃_f(x) = Σ_j w_j f(y_j) e^{β⟨Bᵀx, y_j⟩ − β|Bᵀx|} of cell weights on a GaussGrid, any B
    (comment block above), at unit targets x: ``sums``, ``near_terms``, ``err``, ``L`` as
    :class:`_SpectralSphere` (targets x themselves, scale c = |Bᵀx| per target)."""

    def __init__(self, grid, B: np.ndarray, beta: float) -> None:
        self.grid, self.B, self.beta = grid, np.asarray(B, float), float(beta)
        self.kappa = self.beta * float(np.linalg.norm(self.B, 2))
        self._targets = _TargetCache()
        self._sh = None
        lmax = grid.lmax
        self.possible = lmax * lmax >= 2.0 * self.kappa and attention_compiled.available()
        if not self.possible:
            return
        _SphereKernel.__init__(self, self.kappa, lmax)
        below = np.flatnonzero(self.tail <= SERIES_TAIL)
        L = max(1, min(lmax, int(below[0]) if below.size else lmax))
        self._truncate(L, TARGET_ROUNDOFF * (L + 16.0))

    def applicable(self, tol: float) -> bool:
        return self.degree_needed(tol) <= self.grid.lmax

    def near_terms(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """max over the ≤ 4 cells around Bᵀx/|Bᵀx| of w_j e^{β⟨Bᵀx, y_j⟩ − β|Bᵀx|}: a lower
        bound on S̃_1(x)."""
        z = x @ self.B
        r = np.maximum(np.linalg.norm(z, axis=1), 1e-300)
        return _near_cell_terms(self.grid, w, z / r[:, None], self.beta * r)

    def sums(self, w: np.ndarray, x: np.ndarray, rows=None) -> np.ndarray:
        """S̃_f(x) for f = y_1, y_2, y_3, 1 (shape (4, n)); w cell weights (nlat, nlon), x (n, 3)
        unit targets (``rows`` is accepted for the split pass and not needed)."""
        sh = self._transform()
        dens = w * self._inv_area
        xyz = self.grid.xyz
        q = sh.analyse(np.stack([dens * xyz[..., 0], dens * xyz[..., 1], dens * xyz[..., 2], dens]))
        return _per_target_synthesis(q, sh, self.B, self.beta, x, self._rec, self.L)


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


def _certified_mean(att: Attention, c: float, tol: float, x: np.ndarray, eta: float, sums,
                    exact, second_pass=None, general=False) -> tuple[np.ndarray, dict]:
    """The attention mean at targets x (n, d) from spectral sums, every target certified.

    With u = Bᵀx/c, ``sums(u)`` returns (d + 1, k): the scaled sums S_y (rows 0..d−1) and S_1
    (row d) of the comment block "Spectral (Funk–Hecke) fast path", each off by at most ``eta``.
    A target is accepted when η ≤ (tol/8)·S_1 and √d·η ≤ (tol/8)·|S_y| (softmax; usa:
    √d·η ≤ (tol/4)·|S_y|), so |m − m_ref| < (tol/2)|m_ref|.  The others go to
    ``second_pass(idx, u, z, den, eta, rows) → (accepted mask, means)`` if given (densities: the
    split pass; ``rows``: the positions of its targets among the rows of the u given to ``sums``),
    and what is left to ``exact(idx) → means (len(idx), d)`` (log-domain, tol/8), as do
    targets with β||Bᵀx| − c| > tol/16 (non-unit x, or B only nearly c·R), which could move the
    mean by more than tol/8.  ``general``: the sums of :class:`_TargetBessel` (any B), evaluated
    at the targets x themselves (u = x) and scaled by each target's own e^{β|Bᵀx|} (c = |Bᵀx| per
    target; ``c`` is ignored); non-unit targets, β|Bᵀx|·||x| − 1| > tol/16, go to ``exact``.
    Returns (means (n, d), counts of targets settled by each pass).
    """
    d, beta = att.d, att.beta
    n = x.shape[0]
    z = x @ att.B
    if general:  # any B: the unit targets themselves, each at its own scale c_i = |Bᵀx_i|
        nz = np.linalg.norm(z, axis=1)
        ok = np.flatnonzero(beta * nz * np.abs(np.linalg.norm(x, axis=1) - 1.0) <= tol / 16.0)
        u, c = x[ok], nz[ok]
    else:
        nz = np.linalg.norm(z, axis=1)
        ok = np.flatnonzero(beta * np.abs(nz - c) <= tol / 16.0)
        u = z[ok] / c
    S = sums(u)
    num, den = S[:d].T, S[d]
    nnum = np.linalg.norm(num, axis=1)
    out = np.empty((n, d))
    if not eta > 0:  # the tests below then need den, |S_y| > 0 (callers pass unit mass)
        raise ValueError(f"spectral error bound must be positive and finite, got {eta!r}")
    finite = np.all(np.isfinite(num), axis=1) & np.isfinite(den)
    if att.kind == "softmax":
        good = finite & (eta <= tol / 8.0 * den) & (math.sqrt(d) * eta <= tol / 8.0 * nnum)
        out[ok[good]] = num[good] / den[good, None]
    else:
        good = finite & (math.sqrt(d) * eta <= tol / 4.0 * nnum)
        with np.errstate(over="ignore"):
            scale = np.exp(beta * (c[good] if general else c) - beta)
            out[ok[good]] = num[good] * np.reshape(scale, (-1, 1))
    todo = np.ones(n, bool)
    todo[ok[good]] = False
    nsplit = 0
    bad = np.flatnonzero(~good)
    if bad.size and second_pass is not None:
        done, m_split = second_pass(ok[bad], u[bad], z[ok[bad]], den[bad], eta, bad)
        out[ok[bad][done]] = m_split
        todo[ok[bad][done]] = False
        nsplit = int(done.sum())
    rest = np.flatnonzero(todo)
    if rest.size:
        out[rest] = exact(rest)
    return out, {"spectral": int(good.sum()), "split": nsplit, "exact": int(rest.size)}


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
#: cost of a pair of the compiled sums (attention_compiled) relative to a float64 pair of the
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
        self._rec = _legendre_recursion(self.L)

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


def _point_plan(att: Attention, y: np.ndarray, tol: float):
    """(_SpectralPoints, c) for the spectral point sums of ``att`` with sources y, or
    (None, reason)."""
    if math.isinf(att.beta):
        return None, "beta = inf (the mean does not depend on the measure)"
    if att.d != 3:
        return None, f"d = {att.d}: the point path is for S² (d = 3)"
    c = orthogonal_scale(att.B)
    # B not ∝ orthogonal: the same sums with a radius per target (c = None, see _TargetPoints)
    general = c is None and attention_compiled.available()
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
        * ``"spectral"`` — the Funk–Hecke fast path (see the comment block above
          :data:`DENSITY_METHODS`): needs B = QᵀK = c·R with R orthogonal (singular values equal
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

    After each call ``last_stats`` records the method used and, on the spectral path, how many
    targets each pass settled.
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
        self._spec, self._c = None, None
        self.spectral_reason = None  #: why the spectral path is not used (None when it is)
        if method == "auto" and attention_torch.gpu_present():
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
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        w = None if rho is None else np.asarray(rho).reshape(-1) * self._area
        if self._spec is None or w is None:
            method = "direct" if self.method in ("auto", "spectral") else self.method
            self.last_stats = {"method": method, "targets": x.shape[0]}
            return self.attention.velocity(x, self._y, w, method=method,
                                           tol=self.tol).reshape(shape)
        m = self._spectral_mean(np.asarray(x, float), w)
        return self.attention.velocity_from_mean(x, m).reshape(shape)

    def mean(self, x: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """The attention mean m_β[ρ](x) at points x (..., d), by this object's method."""
        shape = x.shape
        x = np.asarray(x, float).reshape(-1, shape[-1])
        if x.shape[1] != self.attention.d:
            raise ValueError(f"x must have shape (..., {self.attention.d}), got {shape}")
        w = np.asarray(rho).reshape(-1) * self._area
        if self._spec is None:
            method = "direct" if self.method in ("auto", "spectral") else self.method
            self.last_stats = {"method": method, "targets": x.shape[0]}
            return self.attention.mean(x, self._y, w, method=method, tol=self.tol).reshape(shape)
        return self._spectral_mean(x, w).reshape(shape)

    # ------------------------------------------------------------------------------------
    def _spectral_mean(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        att, spec, tol = self.attention, self._spec, self.tol
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

        def split(idx, u, z, den, eta, rows):
            lower = np.maximum(den - eta, spec.near_terms(wg, u))
            return self._split_pass(idx, u, z, w, lower, rows)

        out, stats = _certified_mean(
            att, self._c, tol, x, spec.err, lambda u: spec.sums(wg, u),
            lambda idx: att.mean(x[idx], self._y, w, method="direct", tol=tol / 8.0), split,
            general=isinstance(spec, _TargetBessel))
        self.last_stats = {"method": "spectral", "targets": x.shape[0], "degree": spec.L, **stats}
        if att.kind == "usa":
            out *= total
        return out

    def _split_pass(self, idx, u, z, w, lower, rows=None):
        """Second pass for targets the plain spectral sums cannot certify (far from the mass).

        The weights are split at a density level τ: w_lo = min(w, τ|cell|) goes through the
        spectral sums, whose absolute error is then only η_lo = err·Σ w_lo, and the remainder
        w_hi = w − w_lo (the cells above τ: the bulk of a concentrated density) is summed
        exactly in the log domain, culled against the known lower bound ``lower`` on S_1 (what is
        dropped weighs < tol_hi·S_1, tol_hi = tol/64).  τ is the largest level with
        η_lo ≤ (tol/16)·lower for all but the worst _SPLIT_QUANTILE of the targets.  Returns
        (accepted mask over the targets, their means).  ``rows``: the positions of u among the
        targets of the first pass, whose kept point tables then serve the spectral sums here.
        """
        att, spec, c, tol = self.attention, self._spec, self._c, self.tol
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
        target = float(np.quantile(lower, _SPLIT_QUANTILE)) * tol / 16.0 / spec.err
        k = int(np.searchsorted(m_lo, target, side="right")) - 1  # last break point within
        if k < 0:
            return none
        # on [rs[k], rs[k+1]] the cells 0..k lie below τ: M_lo(τ) = below[k+1] + τ·above[k+1]
        tau = rs[k] if above[k + 1] <= 0 else min(
            rs[k] + (target - m_lo[k]) / above[k + 1], rs[k + 1] if k + 1 < rs.size else np.inf)
        hi = np.flatnonzero(rho > tau)
        if hi.size > _SPLIT_MAX_FRACTION * rho.size or hi.size == 0:
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
        if tol_hi >= attention_compiled.MIN_TOL and attention_compiled.available():
            # compiled sums, culled against the bulk's own maximum (what is dropped weighs
            # < tol_hi of the bulk), rescaled from e^{M} to e^{shift} (M ≤ shift: unit mass)
            nb, db, mx, _ = attention_compiled.sums(z, y_hi, lw_hi, beta, tol_hi)
            with np.errstate(under="ignore"):
                f = np.exp(mx - shift)
            num += nb * f[:, None]
            den += db * f
            # their exponential's error and the e^{−64} floor of skipped-small terms
            floor_hi = (attention_compiled.EXP_RTOL * db + hi.size * math.exp(-64.0)) * f
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
        nnum = np.linalg.norm(num, axis=1)
        err_hi = tol_hi * den + np.maximum(floor_hi, math.exp(_FLUSH_LOGIT))  # > 0: den = 0 fails
        finite = np.all(np.isfinite(num), axis=1) & np.isfinite(den)
        if att.kind == "softmax":
            good = finite & ((eta + err_hi <= tol / 8.0 * den)
                             & (math.sqrt(d) * eta + err_hi <= tol / 8.0 * nnum))
            return good, num[good] / den[good, None]
        good = finite & (math.sqrt(d) * eta + err_hi <= tol / 4.0 * nnum)
        with np.errstate(over="ignore"):
            return good, num[good] * np.exp(shift[good] - beta)[:, None]
