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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

KINDS = ("softmax", "usa")
METHODS = ("auto", "reference", "culled", "float32")


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
        """The attention mean m_β[ρ](x) at targets x (n, d), for ρ = Σ_j w_j δ_{y_j}.

        ``y`` (m, d) and ``w`` (m,) (non-negative, any total) are ignored at β = ∞.

        Methods (all log-domain):
        * ``"reference"`` — exact float64 sum over all sources, ``block`` targets at a time;
        * ``"culled"``    — the same sum restricted, target by target, to the source tiles whose
          upper bound on the logit comes within ln(m/tol) of a lower bound on the row maximum;
          what is dropped weighs less than ``tol`` relative to the kept sum, so
          |m − m_ref| ≤ 2·tol (sources on S², d = 3);
        * ``"float32"``   — the reference sum in single precision (error ≈ 1e-7·β·‖B‖; only
          for tolerances that allow it);
        * ``"auto"``      — "culled" when the logit spread (2β max|Bᵀx| plus the spread of
          log w) can exceed the cut, else "reference"; "float32" when ``tol`` is loose enough
          (tol ≥ 1e-6·max(1, β‖B‖)) and culling would not help.
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
            return z / np.linalg.norm(z, axis=1, keepdims=True)
        y, logw = _sources(y, w, self.d)
        if method == "auto":
            method = self.choose_method(z, y, logw, tol)
        if method == "culled":
            return _mean_culled(z, y, logw, self.beta, self.kind, tol, block)
        dtype = np.float32 if method == "float32" else np.float64
        return _mean_direct(z, y, logw, self.beta, self.kind, block, dtype)

    def choose_method(self, z: np.ndarray, y: np.ndarray, logw: np.ndarray, tol: float) -> str:
        """The method "auto" picks for Bᵀx rows z and sources (y, log w); see :meth:`mean`."""
        cut = math.log(max(len(logw), 1) / tol)
        spread = 2.0 * self.beta * float(np.max(np.linalg.norm(z, axis=1))) + float(np.ptp(logw))
        if self.d == 3 and len(logw) >= 2048 and spread > cut:
            return "culled"
        if tol >= 1e-6 * max(1.0, self.beta * float(np.linalg.norm(self.B, 2))):
            return "float32"
        return "reference"

    def velocity(self, x: np.ndarray, y: np.ndarray | None = None, w: np.ndarray | None = None,
                 **kw) -> np.ndarray:
        """X_β[ρ](x) = P_x V m_β[ρ](x) at unit targets x (n, d); shape (n, d)."""
        v = self.mean(x, y, w, **kw) @ self.V.T
        return v - np.sum(v * x, axis=1, keepdims=True) * x


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


def _tiles(p: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Group unit points (n, 3) into about n/size lat–lon tiles: (order, tile start offsets)."""
    n = p.shape[0]
    ntile = max(1, n // size)
    nlat = max(1, int(round(math.sqrt(ntile / 2))))
    nlon = max(1, 2 * nlat)
    lat = np.arcsin(np.clip(p[:, 2], -1, 1))
    lon = np.arctan2(p[:, 1], p[:, 0]) + np.pi
    ib = np.minimum((lat + np.pi / 2) / np.pi * nlat, nlat - 1).astype(int)
    jb = np.minimum(lon / (2 * np.pi) * nlon, nlon - 1).astype(int)
    key = ib * nlon + jb
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(key[order]) != 0])
    return order, np.r_[starts, n]


def _mean_culled(z, y, logw, beta, kind, tol, block, tile=128) -> np.ndarray:
    """Culled log-domain sum (see :meth:`Attention.mean`); sources on S² (d = 3)."""
    ns = y.shape[0]
    cut = math.log(ns / tol)
    so, sb = _tiles(y, tile)
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
    out = np.empty((z.shape[0], 3))
    to, tb = _tiles(u, block // 4 if block >= 8 else 1)
    for a, b in zip(tb[:-1], tb[1:]):
        idx = to[a:b]
        zb, nzb, ub = z[idx], nz[idx], u[idx]
        lb = np.max(beta * zb @ yrep.T + lrep[None, :], axis=1)
        theta = np.arccos(np.clip(ub @ cen.T, -1, 1))
        ubd = beta * nzb[:, None] * np.cos(np.clip(theta - rad[None, :], 0.0, np.pi)) + bmax[None, :]
        keep = np.any(ubd >= (lb - cut)[:, None], axis=0)
        sel = np.concatenate([np.arange(sb[t], sb[t + 1]) for t in np.flatnonzero(keep)])
        out[idx] = _mean_direct(zb, y[sel], logw[sel], beta, kind, len(idx))
    return out


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


class DensityAttention:
    """The attention velocity of a density on a grid, for the density solvers.

    ``velocity(t, x, rho)`` returns X_β[ρ](x) at Cartesian points x (..., d) for the density
    ``rho`` (grid.shape) with ρ = Σ_j rho_j |cell_j| δ_{y_j}, y_j the cell centres.
    """

    depends_on_density = True

    def __init__(self, attention: Attention, grid) -> None:
        self.attention = attention
        if hasattr(grid, "xyz"):
            y, area = grid.xyz.reshape(-1, 3), grid.cell_area.reshape(-1)
        else:
            y, area = grid.xy, grid.cell_length
        if y.shape[1] != attention.d:
            raise ValueError(
                f"Q, K, V are {attention.d}×{attention.d} but the grid lives in R^{y.shape[1]} "
                f"({type(grid).__name__}); use d = {y.shape[1]}")
        self.grid = grid
        self._y = y
        self._area = area

    @property
    def depends_on_density(self) -> bool:  # noqa: F811 — β = ∞ does not
        return not math.isinf(self.attention.beta)

    def __call__(self, t: float, x: np.ndarray, rho: np.ndarray | None = None) -> np.ndarray:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        w = None if rho is None else np.asarray(rho).reshape(-1) * self._area
        return self.attention.velocity(x, self._y, w).reshape(shape)
