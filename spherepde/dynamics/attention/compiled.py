"""Compiled attention sums (numba): fused, on every core, with a vectorised exp and per-target
culling — the direct log-domain sums of :mod:`.direct` at the hardware's pace.

Two exponential paths (issue 23), the same sums around them; :func:`kernel_path` says which
one runs, and ``SPHEREPDE_ATTENTION_EXP`` (``cody-waite`` | ``legacy``) or the ``path``
argument of :func:`sums` chooses:

* ``"cody-waite"`` (default): :mod:`.expsum` — range reduction to |r| ≤ ln2/2, a degree-13
  polynomial, 2^k from k's bits, in blocks that LLVM vectorises; ≤ 2 ulps per term
  (:data:`.expsum.EXP_RTOL_CW`), 0 exactly below −708.  Needs nothing beyond numba (no SVML).
* ``"legacy"``: the squaring exponential below (within 1.5e-14 per term, clamped at −64); the
  fallback when the first path does not compile.

The error bounds quoted below (:data:`EXP_RTOL`, the e^{−64} floor) are the legacy path's; they
bound the cody-waite path's errors too, so the callers' certificates hold on either path.

For targets z_i = Bᵀx_i (n, d) and sources (y_j, log w_j) (m of them):

    ℓ_ij = β⟨z_i, y_j⟩ + log w_j,   M_i = max_j ℓ_ij            (first pass, exact)
    num_i = Σ_j e^{ℓ_ij − M_i} y_j,   den_i = Σ_j e^{ℓ_ij − M_i}   (second pass)
    softmax: m_i = num_i / den_i;   usa: m_i = num_i e^{M_i − β}.

One target row per task (``numba.prange``: both cores of the CI machine), the logits never
stored.  The exponential of t = ℓ − M ∈ [−64, 0] is (e^{−1/2} p(t/64 + 1/2))^64 with p the
degree-14 Taylor polynomial of e^x on [−1/2, 1/2] (truncation < 3e-17) and six squarings: pure
arithmetic, which LLVM vectorises, where a call to exp would not be.  Error model: the
squarings multiply the polynomial's relative rounding error (≤ 2 ulps) by 64, so each term is
within 64·2·2⁻⁵³ ≈ 1.5e-14 of e^t; terms with t < −64 are evaluated at −64 (e^{−64} ≈ 1.6e-28
instead of something smaller), which adds at most m·1.6e-28 to den_i ≥ 1.  Hence |m_i − m_ref,i|
≤ 3e-14·Σ_j e^{ℓ_ij−M_i}|y_j|/den_i + m·2e-28 (≤ 3e-14 for unit sources), which the "direct"
choice accepts for tolerances ≥ :data:`MIN_TOL`.

Culling (``tol`` given, d = 3, unit sources, m ≥ :data:`CULL_MIN_SOURCES`): the sources are
grouped into tiles of at most :data:`TILE` points (centre c_t, angular radius r_t, largest
log-weight b_t, a representative point): k-d tiles (:data:`CULL_TILES`, geometry.kd_tiles),
small where the sources crowd, in an order that keeps neighbouring tiles together.  For target
i with |z_i| = ζ_i and direction u_i, the
largest logit of tile t is at most ζ_i cos(max(∠(u_i, c_t) − r_t, 0)) + b_t, and the largest
representative logit lb_i is at most M_i.  Tiles whose bound lies below lb_i − ln(m/tol) are
skipped: each of their terms weighs < (tol/m)·e^{M_i}, so what is skipped is < tol·den_i and
(with :data:`CULL_BY_TILE_MASS`, off by default, b_t is replaced by ln W_t + ln(T/m), W_t the
tile's total weight and T the number of tiles: each skipped tile then weighs < (tol/T)·e^{lb_i},
the same total bound)
|m_i − m_ref,i| ≤ 2·tol·max|y| on top of the error above.  The bound is per target, so the kept
work follows each target's own neighbourhood (the tile culling of ``direct._culled_blocks``
bounds whole blocks of targets at once).  cos(max(∠(u_i, c_t) − r_t, 0)) is taken by the
addition formula from cos r_t, sin r_t (no arccos per target and tile), plus
``compiled_numba.COS_MARGIN`` (1e-7: above that formula's rounding, which is below 2e-8 where
the angle is near 0 or π), which only keeps more.  Kept tiles that follow each other in the
source order are summed as one range (:data:`CULL_RUNS`), each range in the blocks of the
path's plain loops, so the order of a row's sum is fixed by the tiles and the targets'
layout alone, whatever the thread count.

Two refinements (issue 23, :data:`CULL_CUMULATIVE`, :data:`CULL_SHIFT_BY_BOUND`): each target
skips its tiles by a budget — with T_t = n_t·e^{bound_t − lb_i} a bound on tile t's total
relative to e^{lb_i} (W_t·e^{ζ_i cos(…)} by tile mass), the tiles with the smallest T_t go while
their T_t sum to ≤ tol·(the share of the sources the block's first level kept), in 64 bins per 16
units of log below tol (compiled_numba.cull_budget; the per-tile rule above where that keeps
fewer sources) — so what is skipped is again < tol·e^{lb_i} ≤ tol·den_i·e^{M_i}.  And on the
cody-waite path a culled row's terms are e^{ℓ_ij − M̂_i}, M̂_i = the largest bound of a kept
tile (≥ M_i; used when M̂_i − lb_i ≤ compiled_numba.SHIFT_SLACK = 64, else M_i itself): no
pass for the row's maximum; M̂_i is returned as M (the means num/den and num·e^{M − β} do not
change; the terms near the maximum stay ≥ e^{−64}, far above the exponential's flush).

One more (issue 23, eighth session).  :data:`CULL_EXPAND`: where the targets and sources crowd (the
clusters of a low-temperature run), a super-block of targets (k-d order, :data:`EXPAND_TARGETS`
down to :data:`EXPAND_MIN_TARGETS`; centre z_c, radius r_z in βBᵀx) takes whole groups of 2^k consecutive source
tiles (centre c, radius r) and sums them by

    e^{⟨z, y⟩} = e^{⟨z_c, y⟩} · e^{⟨z − z_c, c⟩} · Σ_{|α| ≤ p} (z − z_c)^α (y − c)^α / α!  + R_p,

moments Σ_j w_j e^{⟨z_c, y_j⟩ − A} (y_j − c)^α/α! (· y_j) once per group and super-block, then
C(p + 3, 3) terms per target instead of one exponential per pair.  With s = ⟨z − z_c, y − c⟩,
|s| ≤ ρ = r_z·r, the remainder is within η = ρ^{p+1}e^{2ρ}/(p + 1)! of each term (relative); p
is the least degree ≤ :data:`EXPAND_MAX_DEGREE` with η ≤ :data:`EXPAND_RTOL`·tol, and a group
is taken only where the cost model (:data:`EXPAND_COST`) says it pays.  The terms are positive,
so the row's den and num move by ≤ η of themselves: |m_i − m_ref,i| ≤ 2η·max|y| more, and the
culling works to tol·(1 − EXPAND_RTOL), so the bound above stays 2·tol·max|y| (plus the
rounding of the series, C(p+3,3)·2⁻⁵³·e^{2ρ} ≈ 1e-13 at p = 8).  Each super-block is one task,
its groups and targets summed in a fixed order: the bits do not depend on the thread count.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np

from spherepde.grids.geometry import lat_lon_tiles

#: bessel_sums synthesises each pair of targets that are mirror images in the equator (bitwise,
#: same κ: :func:`mirror_pairs`) once, the second from the same Legendre recurrence (the terms
#: with l + m even and odd summed apart; issue 23, sixth session: the face points of a GaussGrid
#: pair up for diagonal B, halving the synthesis of the concentrated β = 100 rows of diagonal B)
MIRROR_PAIRS = True
#: ... from this degree on (below, finding the pairs costs about what they save)
MIRROR_MIN_DEGREE = 24
#: bessel_sums groups the targets that share |u₃| and κ bitwise (:func:`target_groups`) and
#: runs one Legendre–Bessel recurrence per group (compiled_numba.bessel_groups): the longitude
#: enters only through e^{imλ}, the sign of u₃ through (−1)^{l+m}.  For diagonal B the face points
#: of a GaussGrid fall in groups of up to 8 (their images under x → −x, y → −y, z → −z share r =
#: |Bᵀx| and |u₃| to the bit often enough), where mirror pairs (MIRROR_PAIRS) made groups of 2
#: (issue 23, seventh session).  Takes precedence over MIRROR_PAIRS; from MIRROR_MIN_DEGREE on
GROUP_TARGETS = True
#: ... where the groups number at most this share of the targets (else the targets are nearly all
#: alone, as for B without a symmetry of the grid, and the mirror pairs' or the single path runs)
GROUP_MAX_SHARE = 0.75
#: smallest tolerance the compiled sums serve (their own error is ≤ 3e-14, see the docstring)
MIN_TOL = 1e-12
#: relative error of each exponential term (64 · 2 ulps, module docstring)
EXP_RTOL = 1.5e-14
#: culling needs at least this many sources (below, the tile tests cost more than they save)
CULL_MIN_SOURCES = 2048
#: points per source tile of the culling
TILE = 64
#: cull by each tile's total weight W_t (skip when W_t·e^{bound} < (tol/#tiles)·e^{lb}) rather
#: than by its largest weight (skip when e^{bound + max log w} < (tol/m)·e^{lb}); both keep what
#: is skipped below tol·e^{lb}, the first skips more where the weights vary within a tile.
#: Off: on the concentrated densities of bench_attention (GaussGrid(64), β = 100, 1000, every B)
#: it skipped only 1–8 % more pairs, and no time gain showed above the load's scatter
#: (docs/prototypes/issue23/cull_mass.json)
CULL_BY_TILE_MASS = False
#: cull each target's tiles by a budget (compiled_numba.cull_budget): the tiles with the
#: smallest bounds on their totals are skipped while those bounds sum to ≤ tol·e^{lb}, in place
#: of skipping each tile whose every term is < (tol/m)·e^{lb} (kept whenever that keeps fewer)
CULL_CUMULATIVE = True
#: culled rows on the cody-waite path: shift the logits by the kept tiles' bound on their
#: maximum (compiled_numba.SHIFT_SLACK) instead of a first pass for the maximum itself
CULL_SHIFT_BY_BOUND = True
#: how the culling groups sources into tiles and targets into blocks: "kd" (geometry.kd_tiles:
#: at most TILE / TARGET_BLOCK points each, small where the points crowd) or "lat-lon"
#: (geometry.lat_lon_tiles: equal-area cells, the layout before issue 23's second session)
CULL_TILES = "kd"
#: sum a target's kept tiles that follow each other in the source order as one range (k-d order
#: keeps neighbouring tiles together, so a target's kept cap is a few ranges, not many tiles)
CULL_RUNS = True
#: targets per block of the culling's first level (targets of similar direction Bᵀx)
TARGET_BLOCK = 64
#: a target whose kept tiles hold more than this fraction of the sources sums them all.  Was
#: 0.35 when the kept tiles were summed one by one on lat–lon tiles (2.5–4× the plain loops per
#: pair); on k-d tiles summed as ranges a kept pair costs about what it costs in the plain loops,
#: and 0.7 sent the 70 % blob of bench_particle_kernels' concentrated cloud to full rows
#: (58 % of the pairs are needed there); benchmarks/bench_attention_culling.py
CULL_MAX_FRACTION = 0.9
#: expand the far-from-singular interactions (issue 23, eighth session): a block of targets
#: (centre z_c in z, radius r_z) sums a group of sources (2^k consecutive k-d tiles, centre c,
#: radius r) by e^{⟨z, y⟩} = e^{⟨z_c, y⟩} e^{⟨z − z_c, c⟩} Σ_{|α| ≤ p} (z − z_c)^α (y − c)^α / α!
#: (the Taylor series of e^s, |s| ≤ ρ = r_z·r): per-group moments, then a few terms per target
#: in place of one exponential per pair, wherever the cost model says it pays — the dense
#: clusters of low-temperature particles and densities (compiled_numba.select_groups)
CULL_EXPAND = True
#: highest degree p of an expansion (C(p + 3, 3) terms: 165 at p = 8)
EXPAND_MAX_DEGREE = 8
#: each term's relative truncation error η = ρ^{p+1} e^{2ρ}/(p + 1)! ≤ EXPAND_RTOL·tol; the
#: culling then works to tol·(1 − EXPAND_RTOL), so the total stays within 2·tol (docstring)
EXPAND_RTOL = 0.01
#: targets per super-block of the expansions (consecutive target blocks in the k-d order): the
#: moments of a group are paid once per super-block, so larger ones share them among more targets
#: (and have a larger radius r_z, so fewer groups qualify)
EXPAND_TARGETS = 512
#: ... and the smallest super-blocks (down from EXPAND_TARGETS by halves): single blocks of 64
#: took few groups (about 1 % of the sources expanded for the concentrated particle cloud) for a
#: pass that costs as much as the three coarser levels together
EXPAND_MIN_TARGETS = 128
#: the cost model of an expansion against the T·S exponentials of the direct sums: S·(1 + c_m R)
#: + T·(1 + c_t R) for S sources, T targets, R terms; taken when ≤ the last entry times T·S
EXPAND_COST = (0.13, 0.13, 0.5)
#: sources count as unit vectors when ||y| − 1| ≤ this
UNIT_RTOL = 1e-12
#: below this many (target, source) pairs the all-pairs kernels run on one numba thread: starting
#: the parallel region costs more than the sums (measured: 16 tokens, 1.7 ms per call on 2
#: threads vs 0.33 ms on one, up to 9 ms on an oversubscribed machine).  Each row is summed the
#: same way on any number of threads, so the numbers are identical.
SERIAL_PAIRS = 16384
#: the exponential paths (module docstring), the first the default
PATHS = ("cody-waite", "legacy")
#: environment variable that chooses the path
PATH_ENV = "SPHEREPDE_ATTENTION_EXP"


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Whether numba can be imported (it is a core dependency; this guards broken installs)."""
    try:
        import numba  # noqa: F401, PLC0415
    except ImportError:  # pragma: no cover - numba is a core dependency
        return False
    return True


@functools.lru_cache(maxsize=1)
def _cody_waite():
    """expsum's kernels, or (None, why) when they do not compile here."""
    try:
        from spherepde.dynamics.attention import expsum  # noqa: PLC0415

        ks = expsum.kernels()
        ks.exp_array(np.zeros(1), np.empty(1))  # compiles (or loads) the exponential here
        return ks, None
    except Exception as exc:  # noqa: BLE001 - any failure sends the sums to the legacy path
        return None, f"{type(exc).__name__}: {exc}"


def kernel_path(path: str | None = None) -> str:
    """The exponential path the sums take: ``path`` if given, else ``$SPHEREPDE_ATTENTION_EXP``,
    else "cody-waite" — "legacy" when the cody-waite kernels do not compile here."""
    want = path or os.environ.get(PATH_ENV) or PATHS[0]
    if want not in PATHS:
        raise ValueError(f"attention exponential path must be one of {PATHS}, got {want!r}")
    if want == "cody-waite" and _cody_waite()[0] is None:
        return "legacy"
    return want


def path_info() -> dict:
    """What a benchmark records: the default path, and why cody-waite is unavailable (or None)."""
    return {"path": kernel_path(), "cody_waite_error": _cody_waite()[1],
            "env": os.environ.get(PATH_ENV)}


@functools.lru_cache(maxsize=1)
def _kernels():
    """The legacy kernels (compiled on first use, or loaded from numba's cache):
    (sums3, sums_any, sums3_culled, bessel_synthesis) of :mod:`.compiled_numba`."""
    from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

    return K.sums3, K.sums_any, K.sums3_culled, K.bessel_synthesis


def bessel_sums(a: np.ndarray, kappa: np.ndarray, u: np.ndarray, rec, L: int,
                degrees: np.ndarray | None = None) -> np.ndarray:
    """S_f(i) = Σ_{l ≤ L} 4π ĩ_l(κ_i) Σ_m Re(a_f,lm y_lm(u_i) e^{imλ_i}) for f = 0..3: the scaled
    sums Σ_j w_j f(y_j) e^{κ_i(⟨u_i, y_j⟩ − 1)} of a measure with real-field coefficients a
    (shape (L+1, L+1, 4) complex, [m, l, f], factor 2 for m > 0), at unit points u (n, 3) with
    their own κ_i > 0 (the attention of any B: κ_i = β|Bᵀx_i|, u_i = Bᵀx_i/|Bᵀx_i|).  ĩ_l by
    Miller's recurrence per target (as funk_hecke.spherical_ive), orthonormal y_lm by the
    recursion ``rec`` = (a, b, c) of grids.rings.legendre_recursion (L).  Shape (4, n).
    ``degrees`` (n,): optional, a degree ≤ L per target (the sum stops there); the targets are
    then synthesised in the order of their degrees, so that each block of the kernel holds
    similar ones (a block sums to its largest degree)."""
    bessel_synthesis = _kernels()[3]
    n = u.shape[0]
    out = np.empty((4, n))
    if n == 0:
        return out
    kappa = np.asarray(kappa, dtype=float)
    grouped = GROUP_TARGETS and n >= 2 and L >= MIRROR_MIN_DEGREE
    if grouped:
        groups = target_groups(u, kappa)
        if groups[1].size - 1 <= GROUP_MAX_SHARE * n:
            return _bessel_groups(a, kappa, u, rec, L, degrees, groups)
    # (where the groups did not pay, mirror pairs, a kind of group, would not either)
    if MIRROR_PAIRS and not grouped and n >= 2 and L >= MIRROR_MIN_DEGREE:
        first, second = mirror_pairs(u, kappa)
        if first.size:  # each pair synthesised once (its first), the second from its mirror sums
            single = np.ones(n, bool)
            single[second] = False
            keep = np.flatnonzero(single)  # the firsts and the unpaired, in their order
            pos = np.empty(n, np.int64)
            pos[keep] = np.arange(keep.size)
            deg = None
            if degrees is not None:  # (a pair stops at the larger of its two degrees)
                deg = np.array(degrees, dtype=np.int64)
                deg[first] = np.maximum(deg[first], deg[second])
                deg = deg[keep]
            res, mir = _bessel_sums(bessel_synthesis, a, kappa[keep], u[keep], rec, L, deg, True)
            out[:, keep] = res
            out[:, second] = mir[:, pos[first]]
            return out
    return _bessel_sums(bessel_synthesis, a, kappa, u, rec, L, degrees, False)[0]


def mirror_pairs(u: np.ndarray, kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, second): the pairs of unit points whose coordinates are bitwise (u₀, u₁, ±u₂),
    u₂ ≠ 0, with the same κ (bitwise), among u (n, 3) with their κ (n,): the mirror images in
    the equator of one another (the face points and cell centres of a GaussGrid, whose
    latitudes are symmetric, for B that keeps the equator: diagonal B).  ``first`` holds the
    one with u₂ > 0.  Points that occur more than twice are left unpaired."""
    ub = np.ascontiguousarray(u, dtype=float).view(np.uint64)
    kb = np.ascontiguousarray(kappa, dtype=float).view(np.uint64)
    # one sort by a hash of the bits of (u₀, u₁, |u₂|, κ); runs of exactly two equal hashes are
    # then checked exactly (the order among equal hashes does not matter)
    with np.errstate(over="ignore"):
        h = (ub[:, 0] * np.uint64(0x9E3779B97F4A7C15)) ^ (ub[:, 1] * np.uint64(0xC2B2AE3D27D4EB4F))
        h ^= (ub[:, 2] & np.uint64(0x7FFFFFFFFFFFFFFF)) * np.uint64(0x165667B19E3779F9)
        h ^= kb * np.uint64(0x27D4EB2F165667C5)
    order = np.argsort(h)
    hs = h[order]
    eq = hs[1:] == hs[:-1]
    two = eq & np.r_[True, ~eq[:-1]] & np.r_[~eq[1:], True]
    a, b = order[:-1][two], order[1:][two]
    ua, ub2 = u[a], u[b]
    ok = ((ua[:, 0] == ub2[:, 0]) & (ua[:, 1] == ub2[:, 1]) & (ua[:, 2] == -ub2[:, 2])
          & (ua[:, 2] != 0.0) & (kappa[a] == kappa[b]))
    a, b = a[ok], b[ok]
    up = u[a, 2] > 0.0
    return np.where(up, a, b), np.where(up, b, a)


def data_degrees(kappa: np.ndarray, c: np.ndarray, tail0: float, thr: float,
                 L: int) -> tuple[np.ndarray, np.ndarray]:
    """(degrees, tails) (n,): per κ_i the smallest L_i ≤ L with tail0 + Σ_{L_i < l ≤ L}
    4π ĩ_l(κ_i) c[l] ≤ thr, and that sum (compiled_numba.data_degrees; grid_sums.DATA_DEGREE)."""
    from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

    kappa = np.asarray(kappa, dtype=float)
    if kappa.size == 0:
        return np.empty(0, np.int64), np.empty(0)
    ku, inv = np.unique(kappa, return_inverse=True)  # (targets often share κ: one each)
    deg, tail = np.empty(ku.size, np.int64), np.empty(ku.size)
    N = L + 32 + int(math.sqrt(100.0 * float(ku[-1]) + 100.0))
    K.data_degrees(ku, np.ascontiguousarray(c, dtype=float), float(tail0), float(thr), int(L),
                   int(N), deg, tail)
    return deg[inv.reshape(-1)], tail[inv.reshape(-1)]


def target_groups(u: np.ndarray, kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): the unit points u (n, 3) with their κ (n,) in groups that share |u₃|
    (clipped to [−1, 1]) and κ bitwise: group g is order[starts[g]:starts[g+1]] (starts ends
    with n), the groups in increasing κ (then |u₃|), each group's members in their order."""
    mu = np.abs(np.clip(u[:, 2], -1.0, 1.0))
    mb = np.ascontiguousarray(mu).view(np.uint64)
    kb = np.ascontiguousarray(kappa, dtype=float).view(np.uint64)
    order = np.lexsort((mb, kb))  # κ > 0 and |u₃| ≥ 0: their bits sort as the numbers
    ms, ks = mb[order], kb[order]
    new = np.r_[True, (ms[1:] != ms[:-1]) | (ks[1:] != ks[:-1])]
    return order, np.r_[np.flatnonzero(new), order.size]


def _bessel_groups(a, kappa, u, rec, L, degrees, groups) -> np.ndarray:
    """:func:`bessel_sums` with one recurrence per group (``groups``: :func:`target_groups`)."""
    from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

    n = u.shape[0]
    order, starts = groups
    first = order[starts[:-1]]
    rep = np.repeat(np.arange(first.size), np.diff(starts))
    mu = np.clip(u[:, 2], -1.0, 1.0)
    Lt = np.empty(0, np.int64)
    if degrees is not None:  # (a group shares κ, so its degree: the largest, to be safe)
        Lt = np.maximum.reduceat(np.asarray(degrees, dtype=np.int64)[order], starts[:-1])
    kmax = float(np.max(kappa))
    N = L + 32 + int(math.sqrt(100.0 * kmax + 100.0))
    res = np.empty((4, n))
    us = u[order]
    K.bessel_groups(np.ascontiguousarray(np.abs(mu[first])), np.ascontiguousarray(kappa[first]),
                    np.ascontiguousarray(a.real), np.ascontiguousarray(a.imag),
                    np.ascontiguousarray(rec[0].T), np.ascontiguousarray(rec[1].T),
                    np.r_[1.0, rec[2]], int(L), int(N), np.ascontiguousarray(Lt),
                    np.ascontiguousarray(starts, dtype=np.int64), rep,
                    np.ascontiguousarray(np.arctan2(us[:, 1], us[:, 0])),
                    np.where(mu[order] < 0.0, -1.0, 1.0), res)
    out = np.empty((4, n))
    out[:, order] = res
    return out


def _bessel_sums(bessel_synthesis, a, kappa, u, rec, L, degrees, mirror: bool):
    """:func:`bessel_sums` by the kernel: (sums (4, n), mirror sums (4, n) or None)."""
    n = u.shape[0]
    out = np.empty((4, n))
    mir = np.empty((4, n) if mirror else (4, 0))
    kmax = float(np.max(kappa))
    N = L + 32 + int(math.sqrt(100.0 * kmax + 100.0))
    ra, rb = rec[0], rec[1]
    rc = np.r_[1.0, rec[2]]  # rc[m] = √((2m+1)/(2m)), m ≥ 1: y_mm = rc[m] sinθ y_{m−1,m−1}
    kappa = np.asarray(kappa, dtype=float)
    order = None
    Lt = np.empty(0, np.int64)
    if degrees is not None:
        order = np.argsort(degrees, kind="stable")
        u, kappa = u[order], kappa[order]
        Lt = np.ascontiguousarray(np.asarray(degrees)[order], dtype=np.int64)
    bessel_synthesis(np.ascontiguousarray(np.clip(u[:, 2], -1.0, 1.0)),
                     np.ascontiguousarray(np.arctan2(u[:, 1], u[:, 0])),
                     np.ascontiguousarray(kappa),
                     np.ascontiguousarray(a.real), np.ascontiguousarray(a.imag),
                     np.ascontiguousarray(ra.T), np.ascontiguousarray(rb.T), rc, int(L), int(N), out,
                     Lt, mir)
    if order is not None:
        back = np.empty_like(out)
        back[:, order] = out
        out = back
        if mirror:
            back = np.empty_like(mir)
            back[:, order] = mir
            mir = back
    return out, (mir if mirror else None)


def _tiles(p: np.ndarray, size: int):
    """(order, starts) of the culling's tiles of unit points p (:data:`CULL_TILES`; the k-d
    tiles by compiled_numba.kd_order, the same as geometry.kd_tiles)."""
    if CULL_TILES == "kd":
        from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

        return K.kd_order(np.ascontiguousarray(p, dtype=float), int(size))
    return lat_lon_tiles(p, size)


def _source_tiles(y: np.ndarray, logw: np.ndarray, size: int):
    """Sources sorted into tiles (:func:`_tiles`) and what the culling bound needs per
    tile: (order, starts, centre, angular radius, max log w, representative, its log w)."""
    order, starts = _tiles(y, size)
    ys, lws = y[order], logw[order]
    cen = np.add.reduceat(ys, starts[:-1], axis=0)
    cen /= np.maximum(np.linalg.norm(cen, axis=1, keepdims=True), 1e-300)
    tile = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    ang = np.arccos(np.clip(np.sum(ys * cen[tile], axis=1), -1.0, 1.0))
    # a little more than the farthest member: the bound stays a bound after rounding
    rad = np.minimum(np.maximum.reduceat(ang, starts[:-1]) * (1 + 1e-12) + 1e-15, np.pi)
    bmax = np.maximum.reduceat(lws, starts[:-1])
    # the first source of each tile with its largest log-weight (as np.argmax per tile)
    top = np.flatnonzero(lws == np.repeat(bmax, np.diff(starts)))
    rep = top[np.searchsorted(top, starts[:-1])]
    return (order, starts, np.ascontiguousarray(cen), rad, bmax, np.ascontiguousarray(ys[rep]),
            lws[rep].copy())


@functools.lru_cache(maxsize=8)
def _expansion_tables(pmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(parent, var, invf, Rp): the multi-indices α ∈ ℕ³ with |α| ≤ pmax in graded order,
    α_r = α_{parent[r]} + e_{var[r]} (r ≥ 1), invf[r] = 1/α_r!, and Rp[p] = C(p + 3, 3) the
    number of those with |α| ≤ p."""
    alphas = [(0, 0, 0)]
    for deg in range(1, pmax + 1):
        alphas += [(a, b, deg - a - b) for a in range(deg, -1, -1) for b in range(deg - a, -1, -1)]
    index = {a: r for r, a in enumerate(alphas)}
    parent = np.zeros(len(alphas), np.int64)
    var = np.zeros(len(alphas), np.int64)
    for r, a in enumerate(alphas[1:], start=1):
        v = max(k for k in range(3) if a[k] > 0)
        var[r] = v
        parent[r] = index[(a[0] - (v == 0), a[1] - (v == 1), a[2] - (v == 2))]
    invf = np.array([1.0 / (math.factorial(a[0]) * math.factorial(a[1]) * math.factorial(a[2]))
                     for a in alphas])
    Rp = np.array([math.comb(p + 3, 3) for p in range(pmax + 1)], np.int64)
    return parent, var, invf, Rp


@functools.lru_cache(maxsize=16)
def _rho_limits(eta: float, pmax: int) -> np.ndarray:
    """rho_p (pmax + 1,): the largest ρ with ρ^{p+1} e^{2ρ}/(p + 1)! ≤ eta, by bisection (the
    relative error of e^s's Taylor polynomial of degree p for |s| ≤ ρ, against e^s ≥ e^{−ρ})."""
    out = np.empty(pmax + 1)
    for p in range(pmax + 1):
        lo, hi = 0.0, 50.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            err = math.exp((p + 1) * math.log(mid) + 2.0 * mid - math.lgamma(p + 2)) if mid > 0 else 0.0
            lo, hi = (mid, hi) if err <= eta else (lo, mid)
        out[p] = lo * (1.0 - 1e-9)
    out.flags.writeable = False  # (cached)
    return out


def _source_groups(ys: np.ndarray, starts: np.ndarray):
    """The groups of :data:`CULL_EXPAND`: for k = 1, 2, … while 2^k < the number of tiles, the
    runs of 2^k consecutive tiles (the last one shorter): (gl_off (levels + 1,), g_t0, g_t1 (the
    tile ranges), g_cen (the sources' mean, not normalised), g_rad (a little more than the largest
    distance of a source from it))."""
    nt = starts.size - 1
    cs = np.vstack([np.zeros((1, 3)), np.cumsum(ys, axis=0)])
    t0s, t1s, cens, rads, off = [], [], [], [], [0]
    k = 1
    while 2 ** k < nt:
        t0 = np.arange(0, nt, 2 ** k)
        t1 = np.minimum(t0 + 2 ** k, nt)
        lo, hi = starts[t0], starts[t1]
        cen = (cs[hi] - cs[lo]) / (hi - lo)[:, None]
        grp = np.repeat(np.arange(t0.size), hi - lo)
        dist = np.linalg.norm(ys - cen[grp], axis=1)
        rad = np.maximum.reduceat(dist, lo) * (1 + 1e-12) + 1e-15
        t0s.append(t0)
        t1s.append(t1)
        cens.append(cen)
        rads.append(rad)
        off.append(off[-1] + t0.size)
        k += 1
    if not t0s:
        return (np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
                np.empty((0, 3)), np.empty(0))
    return (np.array(off, np.int64), np.concatenate(t0s), np.concatenate(t1s),
            np.ascontiguousarray(np.vstack(cens)), np.concatenate(rads))


def _first_super_block() -> int:
    """Target blocks per super-block of the expansions' first level (≤ EXPAND_TARGETS targets)."""
    sbs = 1
    while 2 * sbs * TARGET_BLOCK <= EXPAND_TARGETS:
        sbs *= 2
    return sbs


def _may_expand(zs: np.ndarray, tstarts: np.ndarray, rad: np.ndarray, rho_max: float) -> bool:
    """Whether the expansions are worth a pass: some super-block of the first level (EXPAND_TARGETS
    targets; zs: the targets in block order) has a radius r_z in z with r_z·(the smallest tile's
    radius, about a group's) ≤ rho_max.  A heuristic gate (nothing is lost either way): where it
    says no, the first level could take few groups or none (diffuse clouds; the leaves of an
    adaptive density, a few per kernel width by design), and the pass would stop after it."""
    first = tstarts[:-1:_first_super_block()]
    cen = np.add.reduceat(zs, first, axis=0) / np.diff(np.r_[first, tstarts[-1]])[:, None]
    sb = np.repeat(np.arange(first.size), np.diff(np.r_[first, tstarts[-1]]))
    rz = np.maximum.reduceat(np.sum((zs - cen[sb]) ** 2, axis=1), first)
    return bool(math.sqrt(float(np.min(rz))) * float(np.min(rad)) <= rho_max)


def _nothing_expanded():
    """:func:`_expand`'s empty arrays: sums3_culled expands nothing."""
    return np.zeros((0, 0), np.bool_), np.zeros(0, np.bool_), np.empty((0, 4)), np.empty(0), np.empty(0)


def _expand(zc, y0, y1, y2, lws, cen, rad, cosr, sinr, bmax, yrep, lrep, cut, torder, tstarts, lbx,
            ys, starts, rho_p):
    """(taken, has, gacc, gU, gL) of compiled_numba.expand_pass (:data:`CULL_EXPAND`) at its
    finest level, or empty arrays that tell sums3_culled nothing was expanded.  The levels: super-
    blocks of EXPAND_TARGETS targets, then halves of them, down to EXPAND_MIN_TARGETS (each takes
    groups among the tiles its parent left); it stops after a level that took nothing anywhere."""
    n = zc.shape[0]
    groups = _source_groups(ys, starts)
    if groups[0].size < 2:
        return _nothing_expanded()
    from spherepde.dynamics.attention import compiled_numba as K  # noqa: PLC0415

    parent, var, invf, Rp = _expansion_tables(rho_p.size - 1)
    cost = np.array(EXPAND_COST, dtype=float)
    nb, nt = tstarts.size - 1, starts.size - 1
    has, gacc, gU, gL = np.zeros(n, np.bool_), np.empty((n, 4)), np.empty(n), np.empty(n)
    taken, sbs, psbs = np.zeros((0, nt), np.bool_), _first_super_block(), 1
    blk, nk = np.zeros((0, nt), np.int64), np.zeros(0, np.int64)
    while sbs * TARGET_BLOCK >= EXPAND_MIN_TARGETS:
        nsb = (nb + sbs - 1) // sbs
        ptaken, taken = taken, np.empty((nsb, nt), np.bool_)
        pblk, pnk, blk, nk = blk, nk, np.empty((nsb, nt), np.int64), np.empty(nsb, np.int64)
        K.expand_pass(zc, y0, y1, y2, lws, cen, rad, cosr, sinr, bmax, yrep, lrep, cut, torder,
                      tstarts, sbs, lbx, starts, *groups, rho_p, Rp, parent, var, invf, cost, ptaken, psbs,
                      pblk, pnk, taken, has, gacc, gU, gL, blk, nk)
        psbs, sbs = sbs, sbs // 2
        if not has.any():  # nothing dense enough at this size: smaller super-blocks are
            return _nothing_expanded()  # (nearly always) no better, and the pass costs
    # (sums3_culled reads the tiles taken for each target block)
    return np.repeat(taken, psbs, axis=0)[:nb], has, gacc, gU, gL


def _sums_all_pairs(sums3, zc, y, lw, num, den, mx):
    """:func:`sums`' result by the all-pairs kernel (d = 3)."""
    y0, y1, y2 = (np.ascontiguousarray(y[:, k], dtype=float) for k in range(3))
    _all_pairs(sums3, zc.shape[0] * y.shape[0], zc, y0, y1, y2, lw, num, den, mx)
    return num, den, mx, zc.shape[0] * y.shape[0]


def _all_pairs(kernel, pairs: int, *args) -> None:
    """Run an all-pairs kernel, on one numba thread when ``pairs < SERIAL_PAIRS``."""
    import numba

    threads = numba.get_num_threads()
    if pairs >= SERIAL_PAIRS or threads == 1:
        kernel(*args)
        return
    numba.set_num_threads(1)
    try:
        kernel(*args)
    finally:
        numba.set_num_threads(threads)


def sums(z: np.ndarray, y: np.ndarray, logw: np.ndarray, beta: float, tol: float | None = None,
         path: str | None = None, lb_extra: np.ndarray | None = None):
    """(num (n, d), den (n,), M (n,), pairs summed) of the module docstring, for targets z = Bᵀx
    (n, d), sources y (m, d) and log-weights (m,) (finite).  ``tol``: cull (d = 3, unit sources,
    m ≥ CULL_MIN_SOURCES) so that what is skipped weighs < tol·den per target; None sums all.
    ``path``: the exponential path (:func:`kernel_path`).  ``lb_extra`` (n,): optional lower
    bounds on the logarithm of a sum the row's terms are part of (Σ_j e^{ℓ_ij} + something ≥ 0,
    e.g. a split's spectral part): the culling then skips what weighs
    < tol·e^{max(lb_i, lb_extra_i)}, so a row may keep nothing (num = den = 0, M = −inf)."""
    sums3, sums_any, sums3_culled, _ = _kernels()
    cw = kernel_path(path) == "cody-waite"
    if cw:
        cwk = _cody_waite()[0]
        sums3, sums_any = cwk.sums3, cwk.sums_any
    n, d = z.shape
    m = y.shape[0]
    zc = np.ascontiguousarray(beta * np.asarray(z, float))
    lw = np.ascontiguousarray(logw, dtype=float)
    num, den, mx = np.empty((n, d)), np.empty(n), np.empty(n)
    if n == 0 or m == 0:
        return num, den, mx, 0
    if d != 3:
        _all_pairs(sums_any, n * m, zc, np.ascontiguousarray(np.asarray(y, float).T), lw, num, den, mx)
        return num, den, mx, n * m
    unit = float(np.max(np.abs(np.linalg.norm(y, axis=1) - 1.0))) <= UNIT_RTOL
    cut = math.inf if tol is None else math.log(m / tol)
    # logits of one row differ by at most 2 max|βz| + spread of log w: if that is within the
    # cut, no tile can be skipped
    spread = 2.0 * float(np.max(np.linalg.norm(zc, axis=1))) + float(np.ptp(lw))
    # (within the cut nothing can be culled, but dense groups may still be expanded: below)
    if m < CULL_MIN_SOURCES or not unit or (spread <= cut and not (CULL_EXPAND and tol is not None)):
        return _sums_all_pairs(sums3, zc, y, lw, num, den, mx)
    order, starts, cen, rad, bmax, yrep, lrep = _source_tiles(y, lw, TILE)
    if CULL_BY_TILE_MASS:  # the tile's total weight in place of m/nt times its largest
        lws_sorted = lw[order]
        tile = np.repeat(np.arange(starts.size - 1), np.diff(starts))
        with np.errstate(under="ignore"):
            mass = np.log(np.add.reduceat(np.exp(lws_sorted - bmax[tile]), starts[:-1])) + bmax
        # (+1e-9: log W_t's rounding; a larger value only keeps more)
        bmax = mass + math.log((starts.size - 1) / m) + 1e-9
    ys, lws = y[order], lw[order]
    y0, y1, y2 = (np.ascontiguousarray(ys[:, k], dtype=float) for k in range(3))
    zn = np.maximum(np.linalg.norm(zc, axis=1, keepdims=True), 1e-300)
    torder, tstarts = _tiles(zc / zn, TARGET_BLOCK)
    assert tol is not None  # (cut is finite: the culled branch)
    rho_p = _rho_limits(EXPAND_RTOL * tol, EXPAND_MAX_DEGREE)
    dense = CULL_EXPAND and _may_expand(zc[torder], tstarts, rad, rho_p[-1])
    if spread <= cut and not dense:
        return _sums_all_pairs(sums3, zc, y, lw, num, den, mx)
    kept = np.empty(n, np.int64)
    lws, cosr, sinr = np.ascontiguousarray(lws), np.cos(rad), np.sin(rad)
    lbx = np.empty(0) if lb_extra is None else np.ascontiguousarray(lb_extra, dtype=float)
    tol_cull = tol * (1.0 - EXPAND_RTOL)  # (the expansions' share of tol, where they take any)
    expanded = (_expand(zc, y0, y1, y2, lws, cen, rad, cosr, sinr, bmax, yrep, lrep, math.log(m / tol_cull),
                        torder, tstarts, lbx, ys, starts, rho_p) if dense else _nothing_expanded())
    if expanded[0].shape[0] == 0:  # nothing expanded: the culling has the whole tolerance
        tol_cull = tol
    if CULL_CUMULATIVE:  # ln of what multiplies a tile's term bound into a bound on its total
        lscale = (np.full(starts.size - 1, math.log(m / (starts.size - 1))) if CULL_BY_TILE_MASS
                  else np.log(np.diff(starts).astype(float)))
    else:
        lscale = np.empty(0)
    sums3_culled(zc, y0, y1, y2, lws, starts, cen, rad, cosr, sinr, bmax, yrep, lrep,
                 math.log(m / tol_cull), torder, tstarts, CULL_MAX_FRACTION, cw,
                 CULL_RUNS, num, den, mx, kept, lscale, math.log(tol_cull), CULL_SHIFT_BY_BOUND,
                 lbx, *expanded)
    return num, den, mx, int(kept.sum())


def mean(z: np.ndarray, y: np.ndarray, logw: np.ndarray, beta: float, kind: str,
         tol: float | None = None, path: str | None = None) -> tuple[np.ndarray, int]:
    """The attention mean (n, d) by the compiled sums (softmax or usa; see :func:`sums`), and
    the number of (target, source) pairs summed."""
    num, den, mx, pairs = sums(z, y, logw, beta, tol, path)
    if kind == "softmax":
        return num / den[:, None], pairs
    with np.errstate(over="ignore"):
        return num * np.exp(mx - beta)[:, None], pairs
