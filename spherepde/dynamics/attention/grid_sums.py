"""Spectral (Funk–Hecke) attention sums of cell weights on a GaussGrid, at arbitrary targets.

For weights w_j = ρ_j |cell_j| at the cell centres y_j and f ∈ {y_1, y_2, y_3, 1}:

    B = c·R (:class:`_SpectralSphere`, u = Bᵀx/c, κ = βc):
        S_f(u) = Σ_j w_j f(y_j) e^{κ(⟨u, y_j⟩ − 1)} = Σ_{l ≤ L} 4π ĩ_l(κ) Σ_m a^f_lm Y_lm(u) + err
    any B (:class:`_TargetBessel`, targets x, κ_x = β|Bᵀx|, u_x = Bᵀx/|Bᵀx|):
        S̃_f(x) = Σ_j w_j f(y_j) e^{κ_x(⟨u_x, y_j⟩ − 1)}

with a^f_lm = Σ_j w_j f(y_j) Y*_lm(y_j) the grid's exact analysis (the cell areas of a GaussGrid
are its quadrature weights), |err| ≤ ``err``·Σ_j w_j (the kernel tail beyond L plus round-off).
Targets on few latitude rings (the face points of the transport) are synthesised ring by ring,
others by ``SphericalHarmonics.evaluate``; the tables that depend only on the targets are kept
between calls with the same targets (:class:`_TargetCache`).  What the error bound means for the
attention mean, and how each target is certified, is in :mod:`.certify`.
"""
from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

import numpy as np

from spherepde.dynamics.attention import compiled
from spherepde.dynamics.attention.funk_hecke import (SERIES_TAIL, TARGET_ROUNDOFF, _per_target_synthesis,
                                                     _SphereKernel, degree_levels)
from spherepde.grids.rings import RingLayout, legendre_recursion, legendre_table

if TYPE_CHECKING:
    from spherepde.grids.sht import SphericalHarmonics

_Tables = TypeVar("_Tables")

#: round-off of one spectral sum, per unit mass: ε_r(L) = SPECTRAL_ROUNDOFF · (L + 16).
#: Measured against longdouble sums (GaussGrid 32–256, κ = 0.5–300, densities from uniform and
#: white noise to vMF κ = 200 at a pole, mid-latitude, two blobs): ≤ 1.2e-15 at L ≤ 21 (model
#: ≥ 5.6e-15), ≤ 2.6e-15 at L = 43 (1.2e-14), ≤ 6.1e-15 at L = 90 (2.1e-14), ≤ 4.1e-15 at
#: L = 154 (3.4e-14); far from the mass (S_1 < 1e-3 Σw) ≤ 5e-16.
SPECTRAL_ROUNDOFF = 2e-16


#: keep the tables of the spectral synthesis that depend only on the targets from one call to the
#: next while the targets stay the same (_TargetCache); False recomputes them on every call (the
#: switch of benchmarks/bench_attention_cache.py; the results are bitwise the same either way)
TARGET_CACHE = True
#: the kept tables of one spectral object take at most this many bytes; beyond, they are
#: recomputed on every call (only the copy of the targets and O(1) numbers per target are kept)
TARGET_CACHE_BYTES = 64 * 2**20
#: _TargetBessel: each target's synthesis stops at the degree its own κ = β|Bᵀx| needs for the
#: tail at β‖B‖₂ and L (funk_hecke.degree_levels), not at L for every target
PER_TARGET_DEGREE = True
#: _TargetBessel truncates its series where the kernel tail drops below this share of its
#: round-off term TARGET_ROUNDOFF·(L + 16) (or below SERIES_TAIL, if larger), not at SERIES_TAIL:
#: its bound ``err`` = tail + round-off grows by at most this share, and the synthesis, O(L²)
#: per target, shrinks (κ = 100: L = 84 in place of 90; issue 23, sixth session:
#: benchmarks/results/attention_sixth_session.json).  0 truncates at SERIES_TAIL, as before
TARGET_TAIL_SHARE = 0.05
#: _TargetBessel.upper_bound bounds runs of this many consecutive targets at once first (the
#: face points of the transport come ring by ring: a run is a short arc), then one by one the
#: targets of the runs whose bound is not below the level (compiled_numba.below_bound); 0: one
#: by one only (issue 23, sixth session)
BOUND_RUN = 16
#: _TargetBessel.upper_bound sums the 2·WINDOW_HALF × 2·WINDOW_HALF cells nearest to each target
#: that neither its run (BOUND_RUN) nor BOUND_TRY tiles settle exactly (_window_terms), and
#: bounds by all the tiles only the targets where that stays below the level (on a diffuse
#: density every target reaches it there, while the tile bound, whose tiles come in the order
#: of their weights, visits most tiles before it knows: issue 23, sixth session); 0: the tile
#: bound for every target
WINDOW_HALF = 3
#: ... after at most this many tiles per target (a broad kernel settles it in a few)
BOUND_TRY = 8
#: _TargetBessel.upper_bound settles first, at no cost, the targets whose S̃_1 the smallest
#: density alone keeps at or above the level: S̃_1(x) ≥ ρ_min Σ_j |cell_j| e^{κ_x(⟨u_x, y_j⟩ − 1)}
#: = ρ_min·4π(ĩ_0(κ_x) ± tail) (_TargetBessel.floor_bound).  On a diffuse density that is every
#: target, whose bounds (runs, tiles, windows) had been a fifth of the call (issue 23, seventh
#: session: docs/prototypes/issue23/profile_diffuse_main.json); False: the bounds for every
#: target
FLOOR_BOUND = True
#: _TargetBessel.sums stops each target's series at the degree the density's own spectrum
#: allows (:meth:`_TargetBessel.data_degrees`): with a_l = (a_lm)_m the analysis of a field,
#: |Σ_m a_lm Y_lm(u)| ≤ |a_l|·√((2l+1)/4π), so the terms L_x < l ≤ L of a target weigh at most
#: Σ 4π ĩ_l(κ_x)·√((2l+1)/4π)(|a_l| + ANALYSIS_ROUNDOFF·√((2l+1)/4π)·Σw) (|a_l| the largest of
#: the four fields', the second term what the analysis's rounding may hide), and the series
#: stops where that is ≤ DATA_TAIL_SHARE of the round-off term, which ``err`` then counts in.
#: A smooth density (bench_attention's diffuse one is of degree 1) needs far fewer degrees than
#: the kernel; a concentrated one about those of its own width (issue 23, seventh session).
#: False: the kernel's degrees alone (PER_TARGET_DEGREE).  Read when a _TargetBessel is built
DATA_DEGREE = True
#: ... from this kernel degree L on (below, finding the degrees costs about what they save:
#: bench_attention's β = 1 rows, L = 14–16)
DATA_MIN_DEGREE = 24
#: ... the share of the round-off term TARGET_ROUNDOFF·(L + 16) the skipped degrees may add
DATA_TAIL_SHARE = 0.05
#: ... the rounding of the analysis, per coefficient, relative to √((2l+1)/4π)·Σw (the size of
#: a unit point mass's coefficients): measured ≤ 4.4e-16 against long double (GaussGrid 32 and
#: 128, smooth, vMF κ = 100 and white-noise densities: tests/dynamics/test_attention_general.py
#: ::test_analysis_roundoff)
ANALYSIS_ROUNDOFF = 2e-14
#: cells per k-d tile of _TargetBessel.upper_bound (on the concentrated β = 100 densities of
#: bench_attention, 32-cell tiles find 93–96 % of the targets the first pass rejects, in about
#: half the time of 16-cell tiles, which find 96–98 %: docs/prototypes/issue23/skip_rejected.json)
BOUND_TILE = 32


class _TargetCache(Generic[_Tables]):
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
        self.last: np.ndarray | None = None  # copy of the previous call's targets
        self.tables: _Tables | None = None  # their tables, once built

    def get(self, u: np.ndarray, build: Callable[[np.ndarray, bool], _Tables]) -> _Tables:
        if not TARGET_CACHE:
            return build(u, False)
        last = self.last
        if last is not None and last.shape == u.shape and np.array_equal(last, u):
            if self.tables is None:
                self.tables = build(u, True)
            return self.tables
        self.last, self.tables = np.array(u, dtype=float, copy=True), None
        return build(u, False)

    def rows(self, u: np.ndarray, rows) -> _Tables | None:
        """The kept tables if u are the rows ``rows`` of the kept targets (checked), else None:
        the split pass evaluates at a subset of the targets of the call before it."""
        if not TARGET_CACHE or self.tables is None or rows is None:
            return None
        assert self.last is not None  # kept tables come with their targets
        rows = np.asarray(rows)
        if rows.shape != u.shape[:1] or not np.array_equal(self.last[rows], u):
            return None
        return self.tables


class _SphereTargets:
    """What :meth:`_SpectralSphere._evaluate` needs to know about its targets u (n, 3).

    Targets on few latitude rings (the face points of the FFSL transport when R = I: 2·nlat + 1
    rings of equispaced longitudes) take the ring synthesis: Legendre sums per ring, then the
    ring layout's synthesis in longitude (``layout``, :class:`~spherepde.grids.rings.RingLayout`:
    an inverse real FFT per ring of equispaced longitudes).  Other targets (``scattered``) take
    SphericalHarmonics.evaluate at (``lon``, ``lat``).  With ``keep`` the tables are kept as
    well, each if it fits in what is left of TARGET_CACHE_BYTES: the layout's e^{imλ} at the
    points off equispaced rings, then the Legendre table y_lm(μ_r) of every ring; what is not kept
    :meth:`legendre` and the layout compute as needed.  Every value is the one the direct
    computation gives, bit for bit (the recursions are elementwise, and every product sees the
    same operands).
    """

    def __init__(self, spec, u: np.ndarray, keep: bool) -> None:
        n, L = u.shape[0], spec.L
        self.L, self._rec = L, spec._rec  # (not spec itself: no reference cycle via its cache)
        layout = None if n < 256 else RingLayout.build(u, L, keep=keep,
                                                       table_bytes=TARGET_CACHE_BYTES)
        self.layout = layout
        self.scattered = layout is None
        self._Y: np.ndarray | None = None
        if layout is None:  # scattered
            self.lon = np.arctan2(u[:, 1], u[:, 0])
            r = np.linalg.norm(u, axis=1)
            self.lat = np.arcsin(np.clip(u[:, 2] / r, -1.0, 1.0))
            return
        self.mu = layout.mu
        if keep and 8 * (L + 1) ** 2 * self.mu.size <= TARGET_CACHE_BYTES - layout.nbytes:
            self._Y = _ring_legendre(self.mu, self._rec)  # [m, ring, l]

    def legendre(self, a: int, b: int) -> np.ndarray:
        """The Legendre table of rings a..b−1, [m, ring, l] (see _ring_legendre)."""
        if self._Y is None:
            return _ring_legendre(self.mu[a:b], self._rec)
        return np.ascontiguousarray(self._Y[:, a:b])

    def subset(self, u: np.ndarray, rows: np.ndarray) -> "_SphereTargets | None":
        """The targets u = (these targets)[rows] (the split pass) with the kept Legendre table, as
        ``_SphereTargets(spec, u, False)`` would describe them; None where that would not take
        the ring synthesis."""
        if self.scattered or rows.size < 256:
            return None
        layout = RingLayout.build(u, self.L, keep=False)
        if layout is None:
            return None
        sub = copy.copy(self)
        sub.layout, sub.mu = layout, layout.mu
        if self._Y is not None:  # the rings present, in order: those of the sorted distinct z
            assert self.layout is not None  # not scattered
            present = np.flatnonzero(np.bincount(self.layout.ring[rows], minlength=self.mu.size))
            sub._Y = np.take(self._Y, present, axis=1)
        return sub


class _SpectralSphere(_SphereKernel):
    """Zonal convolutions with e^{κ(t−1)} of cell weights on a GaussGrid, at arbitrary points.

    The tables that depend only on the targets are kept between calls with the same targets
    (_TargetCache, _SphereTargets)."""

    d = 3

    def __init__(self, grid, kappa: float) -> None:
        self.grid, self.kappa = grid, float(kappa)
        self._targets: _TargetCache[_SphereTargets] = _TargetCache()
        lmax = grid.lmax
        self.possible = lmax * lmax >= 2.0 * self.kappa  # else the tail at lmax is ≥ e^{−1}
        if not self.possible:
            return
        super().__init__(kappa, lmax)  # the tail is needed at every l ≤ lmax
        below = np.flatnonzero(self.tail <= SERIES_TAIL)
        L = max(1, min(lmax, int(below[0]) if below.size else lmax))
        self._truncate(L, SPECTRAL_ROUNDOFF * (L + 16))
        self._sh: SphericalHarmonics | None = None

    def degree_needed(self, tol: float) -> float:
        """Smallest L whose kernel tail is ≤ tol·ĩ_0/TRUNCATION_MARGIN (inf: beyond lmax)."""
        if not self.possible:
            return math.inf
        return super().degree_needed(tol)

    def applicable(self, tol: float) -> bool:
        return self.degree_needed(tol) <= self.grid.lmax

    def _transform(self) -> SphericalHarmonics:
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
            self._rec = legendre_recursion(self.L)
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
        if u.shape[0] == 0:
            return np.empty((q.shape[0], 0))
        if rows is None:
            t = self._targets.get(u, lambda v, keep: _SphereTargets(self, v, keep))
        else:  # a subset of the last targets: their kept tables serve, else computed as needed
            kept = self._targets.rows(u, rows)
            sub = None if kept is None else kept.subset(u, np.asarray(rows))
            t = _SphereTargets(self, u, False) if sub is None else sub
        assert self._sh is not None  # built by sums' _transform
        if t.layout is None:  # scattered targets: the general point evaluation
            return self._sh.evaluate(q, t.lon, t.lat)
        # targets on few latitude rings (e.g. the face points of the FFSL transport when R = I):
        # Legendre sums once per ring, then the synthesis in longitude ring by ring
        P = self._ring_sums(q, t)  # (rings, nb, L+1), factor 2 for m > 0
        return t.layout.synthesise(P.transpose(1, 0, 2))

    def _ring_sums(self, q: np.ndarray, t: "_SphereTargets") -> np.ndarray:
        """P[r, b, m] = c_m Σ_l q_b,lm y_lm(μ_r) at the rings μ_r = t.mu (c_0 = 1 on the real part,
        c_m = 2)."""
        L, sh = self.L, self._sh
        assert sh is not None  # built by sums' _transform
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


def _window_terms(grid, w: np.ndarray, u: np.ndarray, kappa: np.ndarray,
                  half: int | None = None) -> np.ndarray:
    """(n,): Σ w_j e^{κ_i(⟨u_i, y_j⟩ − 1)} over the 2·half × 2·half cells of ``grid`` around
    each unit u_i (n, 3) (half = :data:`WINDOW_HALF`; rows clipped at the poles, at most nlon
    columns): part of the sum over every cell, so a lower bound on it up to the rounding of a
    sum of positive terms (compiled_numba.window_sums; each target alone, the same bits on any
    number of threads)."""
    from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

    g = grid
    lat = np.arcsin(np.clip(u[:, 2], -1.0, 1.0))
    lon = np.arctan2(u[:, 1], u[:, 0])
    j = np.clip(np.searchsorted(-g.lat, -lat), 1, g.nlat - 1).astype(np.int64)
    i = np.floor(np.mod(lon, 2 * np.pi) / g.dlon).astype(np.int64) % g.nlon
    out = np.empty(u.shape[0])
    K.window_sums(np.ascontiguousarray(u, dtype=float), np.ascontiguousarray(kappa, dtype=float),
                  j, i, np.ascontiguousarray(g.xyz), np.ascontiguousarray(w, dtype=float),
                  int(WINDOW_HALF if half is None else half), out)
    return out


def _ring_legendre(mu: np.ndarray, rec) -> np.ndarray:
    """Orthonormal y_lm(μ) without the Condon–Shortley phase (grids.rings.legendre_table), as
    [m, ring, l] (0 for m > l), for rings at μ (sin θ = √((1 − μ)(1 + μ))).  Elementwise in the
    rings: a ring's values do not depend on the other rings."""
    s = np.sqrt(np.clip((1.0 - mu) * (1.0 + mu), 0.0, None))
    return np.ascontiguousarray(legendre_table(mu, s, rec).transpose(0, 2, 1))


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


class _TargetBessel(_SpectralSphere):
    """S̃_f(x) = Σ_j w_j f(y_j) e^{β⟨Bᵀx, y_j⟩ − β|Bᵀx|} of cell weights on a GaussGrid, any B
    (funk_hecke, comment block "Every B"), at unit targets x: ``sums``, ``near_terms``, ``err``, ``L`` as
    :class:`_SpectralSphere` (targets x themselves, scale c = |Bᵀx| per target)."""

    def __init__(self, grid, B: np.ndarray, beta: float) -> None:
        self.grid, self.B, self.beta = grid, np.asarray(B, float), float(beta)
        self.kappa = self.beta * float(np.linalg.norm(self.B, 2))
        self._targets: _TargetCache[_SphereTargets] = _TargetCache()
        self._sh: SphericalHarmonics | None = None
        self._bound_tiles: tuple | None = None  # upper_bound's tiles of the cells
        self._levels: tuple | None = None  # funk_hecke.degree_levels, for PER_TARGET_DEGREE
        self._floor_tail: float | None = None  # floor_bound's kernel tail
        lmax = grid.lmax
        self.possible = lmax * lmax >= 2.0 * self.kappa and compiled.available()
        if not self.possible:
            return
        _SphereKernel.__init__(self, self.kappa, lmax)
        l = np.arange(self.tail.size)
        below = np.flatnonzero(self.tail <= np.maximum(
            SERIES_TAIL, TARGET_TAIL_SHARE * TARGET_ROUNDOFF * (l + 16.0)))
        L = max(1, min(lmax, int(below[0]) if below.size else lmax))
        self.data_degree = bool(DATA_DEGREE) and L >= DATA_MIN_DEGREE
        self._truncate(L, TARGET_ROUNDOFF * (L + 16.0)
                       * (1.0 + (DATA_TAIL_SHARE if self.data_degree else 0.0)))

    def applicable(self, tol: float) -> bool:
        return self.degree_needed(tol) <= self.grid.lmax

    def near_terms(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """max over the ≤ 4 cells around Bᵀx/|Bᵀx| of w_j e^{β⟨Bᵀx, y_j⟩ − β|Bᵀx|}: a lower
        bound on S̃_1(x)."""
        z = x @ self.B
        r = np.maximum(np.linalg.norm(z, axis=1), 1e-300)
        return _near_cell_terms(self.grid, w, z / r[:, None], self.beta * r)

    def floor_bound(self, w: np.ndarray, kap: np.ndarray) -> np.ndarray:
        """(n,): a lower bound on S̃_1 at targets with κ_x = ``kap`` from the smallest density
        alone.  With ρ_min = min_j w_j/|cell_j|, S̃_1(x) ≥ ρ_min Σ_j |cell_j| e^{κ_x(⟨u_x, y_j⟩ − 1)};
        the Gauss grid integrates every Y_lm with 1 ≤ l ≤ l_q = min(2·nlat − 1, nlon − 1) to
        zero, so by Funk–Hecke that sum is 4π ĩ_0(κ_x) to within 4π·tail(l_q; κ_x) (the kernel
        series beyond that degree, sup norm), and the tail grows with κ there (every term has
        l > κ, where ĩ_l grows with κ): ≤ the tail at β‖B‖₂.  Zeros where the grid is too coarse
        for that (l_q < β‖B‖₂); a relative 1e-9 off for the rounding (of the cell areas, ĩ_0,
        the sums: ≤ 1e-13 relative)."""
        g = self.grid
        lq = min(2 * g.nlat - 1, g.nlon - 1)
        if lq < self.kappa:
            return np.zeros(kap.shape)
        if self._floor_tail is None:
            self._floor_tail = float(_SphereKernel(self.kappa, lq).tail[lq])
        rmin = float(np.min(np.asarray(w, float).reshape(-1) / np.asarray(g.cell_area).reshape(-1)))
        i0 = -np.expm1(-2.0 * kap) / (2.0 * kap)
        return np.maximum(rmin * 4.0 * math.pi * (i0 - self._floor_tail), 0.0) * (1.0 - 1e-9)

    def upper_bound(self, w: np.ndarray, x: np.ndarray, theta: float) -> np.ndarray:
        """(n,): where < ``theta``, an upper bound on S̃_1(x) at the targets x (n, 3); elsewhere
        some number ≥ theta (S̃_1(x) may be above theta).  The bound is
        S̃_1(x) ≤ Σ_t W_t e^{κ_x(cos(max(∠(u_x, c_t) − r_t, 0)) − 1)} over k-d tiles of
        :data:`BOUND_TILE` cells (centre c_t, angular radius r_t, total weight W_t;
        compiled_numba.below_bound): it finds the targets the certification would reject
        anyway, whose spectral sums need not be synthesised (:func:`.certify._certified_mean`)."""
        wc = np.asarray(w, float).reshape(-1) / np.asarray(self.grid.cell_area).reshape(-1)
        # (ĩ_0 ≤ 1: below, the floor settles no target, as on a density with a tiny floor)
        if FLOOR_BOUND and float(np.min(wc)) * 4.0 * math.pi * (1.0 + 1e-9) >= theta:
            # the targets the smallest density keeps at or above theta: settled
            z = x @ self.B
            kap = self.beta * np.maximum(np.linalg.norm(z, axis=1), 1e-300)
            lo = self.floor_bound(w, kap)
            rest = np.flatnonzero(lo < theta)
            if rest.size < x.shape[0]:
                out = lo
                if rest.size:
                    out[rest] = self._tile_bound(w, x[rest], theta)
                return out
        return self._tile_bound(w, x, theta)

    def _tile_bound(self, w: np.ndarray, x: np.ndarray, theta: float) -> np.ndarray:
        """upper_bound by runs, windows and tiles (FLOOR_BOUND aside)."""
        from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

        if self._bound_tiles is None:
            y = self.grid.xyz.reshape(-1, 3)
            order, starts, cen, rad, _, _, _ = compiled._source_tiles(y, np.zeros(y.shape[0]),
                                                                      BOUND_TILE)
            self._bound_tiles = order, starts, cen, rad
        order, starts, cen, rad = self._bound_tiles
        W = np.add.reduceat(np.asarray(w, float).reshape(-1)[order], starts[:-1])
        by = np.argsort(-W, kind="stable")
        W, cen, rad = W[by], np.ascontiguousarray(cen[by]), rad[by]
        suffix = np.r_[np.cumsum(W[::-1])[::-1], 0.0]
        z = x @ self.B
        r = np.maximum(np.linalg.norm(z, axis=1), 1e-300)
        u = np.ascontiguousarray(z / r[:, None])
        kap = self.beta * r
        args = (cen, np.cos(rad), np.sin(rad), W, suffix, float(theta))
        out = np.empty(x.shape[0])
        if WINDOW_HALF > 0:
            # runs first, then each target of the runs not below theta by at most BOUND_TRY
            # tiles; where that did not settle it, the exact sum over the cells around it, part of
            # S̃_1: where it reaches theta the target cannot be skipped (that sum is "a number
            # ≥ theta"); the rest by all the tiles
            K.below_bound(u, kap, *args, out, int(BOUND_RUN), int(BOUND_TRY))
            todo = np.flatnonzero(out < 0.0)
            if todo.size:
                out[todo] = _window_terms(self.grid, w, u[todo], kap[todo])
                todo = todo[out[todo] < theta]
            if todo.size:
                ob = np.empty(todo.size)
                K.below_bound(np.ascontiguousarray(u[todo]), np.ascontiguousarray(kap[todo]),
                              *args, ob, 0, 0)
                out[todo] = ob
        else:
            K.below_bound(u, kap, *args, out, int(BOUND_RUN), 0)
        # (1 + 1e-9: the rounding of the sums, a relative 1e-13 at most)
        return out * (1.0 + 1e-9)

    def sums(self, w: np.ndarray, x: np.ndarray, rows=None) -> np.ndarray:
        """S̃_f(x) for f = y_1, y_2, y_3, 1 (shape (4, n)); w cell weights (nlat, nlon), x (n, 3)
        unit targets (``rows`` is accepted for the split pass and not needed)."""
        sh = self._transform()
        dens = w * self._inv_area
        xyz = self.grid.xyz
        q = sh.analyse(np.stack([dens * xyz[..., 0], dens * xyz[..., 1], dens * xyz[..., 2], dens]))
        if PER_TARGET_DEGREE and self._levels is None:
            self._levels = degree_levels(self.kappa, self.L, float(self.tail[self.L]))
        if self.data_degree and x.shape[0]:
            deg = self.data_degrees(q, sh, x, float(np.sum(w)))
            if PER_TARGET_DEGREE and self._levels is not None:  # (either keeps the error ≤ err)
                ks, ls = self._levels
                kap = self.beta * np.linalg.norm(x @ self.B, axis=1)
                deg = np.minimum(deg, ls[np.minimum(np.searchsorted(ks, kap, side="left"),
                                                    ls.size - 1)])
            return _per_target_synthesis(q, sh, self.B, self.beta, x, self._rec, self.L,
                                         degrees=deg)
        return _per_target_synthesis(q, sh, self.B, self.beta, x, self._rec, self.L,
                                     self._levels if PER_TARGET_DEGREE else None)

    def data_degrees(self, q: np.ndarray, sh, x: np.ndarray, total: float,
                     with_tail: bool = False):
        """(n,) the degree of each target x by the rule of :data:`DATA_DEGREE`, for the
        analysis q (4, nlm) of the fields of weights of total ``total``; ``with_tail``: also
        the bound on what the skipped degrees weigh (each target's, the terms beyond L
        included: (n,))."""
        L = self.L
        l = np.arange(L + 1)
        wt = np.where(sh.m > 0, 2.0, 1.0)
        a2 = np.array([np.bincount(sh.l, weights=wt * (qf.real ** 2 + qf.imag ** 2), minlength=L + 1)
                       for qf in q])[:, : L + 1]
        y = np.sqrt((2.0 * l + 1.0) / (4.0 * math.pi))
        c = y * (np.sqrt(a2.max(axis=0)) + ANALYSIS_ROUNDOFF * y * total) * (1.0 + 1e-9)
        roundoff = TARGET_ROUNDOFF * (L + 16.0)
        tail0 = float(self.tail[L]) * total
        thr = tail0 + DATA_TAIL_SHARE * roundoff * total
        z = x @ self.B
        kap = self.beta * np.maximum(np.linalg.norm(z, axis=1), 1e-300)
        deg, tail = compiled.data_degrees(kap, c, tail0, thr, L)
        return (deg, tail) if with_tail else deg

