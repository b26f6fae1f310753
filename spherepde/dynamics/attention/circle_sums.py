"""Spectral attention sums of cell weights on a CircleGrid (S¹), at arbitrary angles.

For weights w_j at the cell centres y_j = (cos θ_j, sin θ_j), f ∈ {y_1, y_2, 1}, κ = βc:

    S_f(u) = Σ_j w_j f(y_j) e^{κ(⟨u, y_j⟩ − 1)} = Σ_{|k| ≤ K} Ĩ_k(κ) e^{ikφ_u} Σ_j w_j f(y_j) e^{−ikθ_j} + err,

the inner sums one FFT of the cell weights (n-periodic in k, so any K is exact), |err| ≤
``err``·Σ_j w_j.  Certification as on S² (:mod:`.certify`).
"""
from __future__ import annotations

import copy
import math

import numpy as np

from spherepde.dynamics.attention import grid_sums
from spherepde.dynamics.attention.funk_hecke import (SERIES_TAIL, TRUNCATION_MARGIN, _suffix_tail,
                                                     circular_ive)
from spherepde.dynamics.attention.grid_sums import SPECTRAL_ROUNDOFF, _TargetCache
from spherepde.grids.rings import fourier_powers

class _CircleTargets:
    """The angles φ of the targets u (n, 2) of :meth:`_SpectralCircle.sums` and, with ``keep``
    (within TARGET_CACHE_BYTES), the table e^{ikφ}, k = 0..L (grids.rings.fourier_powers) at every target, kept
    between calls with the same targets (_TargetCache); without it, :meth:`powers` computes the
    table chunk by chunk as needed (bitwise the same values: fourier_powers is elementwise)."""

    def __init__(self, L: int, u: np.ndarray, keep: bool) -> None:
        self.L = L
        self.phi = np.arctan2(u[:, 1], u[:, 0])
        fits = 16 * (L + 1) * u.shape[0] <= grid_sums.TARGET_CACHE_BYTES
        self._E = fourier_powers(self.phi, L) if keep and fits else None

    def powers(self, sl: slice) -> np.ndarray:
        """e^{ikφ}, k = 0..L, at the targets ``sl``: (targets, L+1) complex."""
        return fourier_powers(self.phi[sl], self.L) if self._E is None else self._E[sl]

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
        self._targets: _TargetCache[_CircleTargets] = _TargetCache()
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
            sub = None if kept is None else kept.subset(np.asarray(rows))
            t = _CircleTargets(self.L, u, False) if sub is None else sub
        out = np.empty((3, u.shape[0]))
        step = max(1, (1 << 20) // (self.L + 1))
        for a in range(0, u.shape[0], step):
            out[:, a:a + step] = (t.powers(slice(a, a + step)) @ G).real.T
        return out

