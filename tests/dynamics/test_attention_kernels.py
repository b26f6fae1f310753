"""The compiled attention sums' two exponential paths (issue 23): spherepde.dynamics.attention
.expsum ("cody-waite", the default) and the legacy squaring exponential of .compiled.

* the cody-waite exponential against long double over every argument the sums give it,
  [−708, 0], and exactly 0 below;
* the attention mean of both paths against a long-double evaluation of the same sums, for every
  class of B, within the error model written out in :func:`model_bound`;
* the same bits on one and on two numba threads, for the all-pairs, culled (both tile layouts)
  and any-d kernels;
* the culled sums (k-d tiles summed as ranges, and the lat–lon tiles before them) within the
  error model plus 2·tol of long double, and the plain-loop rows of the culled kernel equal to
  the all-pairs kernel bit for bit; geometry.kd_tiles a partition;
* the fallback: the legacy path when asked for, and when the cody-waite kernels do not compile.
"""
from __future__ import annotations

import numpy as np
import pytest

from spherepde.dynamics.attention import compiled as C
from spherepde.dynamics.attention import expsum
from conftest import unit

pytestmark = pytest.mark.skipif(not C.available(), reason="numba not importable")

U = 2.0**-53
#: per-term relative error of each path's exponential
RTOL = {"cody-waite": expsum.EXP_RTOL_CW, "legacy": C.EXP_RTOL}
MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])


def matrix(name, rng):
    if name == "identity":
        return np.eye(3)
    if name == "diagonal":
        return np.diag([0.1, 1.0, 1.0])
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    if name == "spd-random":
        return q @ np.diag([1.5, 0.8, 0.3]) @ q.T
    return q @ np.diag([1.2, 0.7, 0.4]) @ np.linalg.qr(rng.normal(size=(3, 3)))[0]


def tight_cloud(n, rng):
    """Particles of a low-temperature run: 70 % in a blob of width 0.03, 30 % of width 0.15."""
    k = int(0.7 * n)
    return unit(np.vstack([MU + 0.03 * rng.normal(size=(k, 3)),
                           unit([-0.5, 0.2, -0.8]) + 0.15 * rng.normal(size=(n - k, 3))]))


def concentrated(n, rng):
    k = int(0.7 * n)
    return unit(np.vstack([MU + 0.05 * rng.normal(size=(k, 3)),
                           unit([-0.5, 0.2, -0.8]) + 0.15 * rng.normal(size=(n - k, 3))]))


def test_cody_waite_exponential_against_long_double():
    """Within EXP_RTOL_CW (2 ulps) of e^t on [−708, 0]; e^0 = 1; 0 exactly below −708."""
    t = np.r_[np.linspace(-708.0, 0.0, 400001), -np.logspace(-300, 2.8, 2001), -0.0, 0.0,
              -np.log(2.0) / 2 * np.array([1.0, 1.0 + 1e-15, 1.0 - 1e-15, 3.0])]
    t = t[t >= -708.0]
    e = expsum.exp(t)
    truth = np.exp(t.astype(np.longdouble))
    rel = np.abs((e - truth) / truth).astype(float)
    assert rel.max() <= expsum.EXP_RTOL_CW, rel.max()
    assert expsum.exp(np.array([0.0]))[0] == 1.0
    assert np.all(expsum.exp(np.array([-708.0001, -709.0, -745.2, -1e4, -1e300])) == 0.0)


def reference_ld(z, y, logw, beta):
    """The softmax mean, in long double from the same float64 inputs; the row maxima."""
    zl, yl, wl = (a.astype(np.longdouble) for a in (z, y, logw))
    lg = np.longdouble(beta) * (zl @ yl.T) + wl
    M = lg.max(axis=1, keepdims=True)
    e = np.exp(lg - M)
    return (e @ yl) / e.sum(axis=1)[:, None], M[:, 0]


def model_bound(z, y, logw, beta, M, path):
    """|m − m_ld| per target for unit sources: each term e^{t_j} is computed with relative error
    ≤ RTOL + |δt_j| (δt_j: the rounding of the logit t_j = β⟨z, y_j⟩ + log w_j − M, at most
    u(6(√3 β|z| + |log w_j|) + |t_j| + 1); M's own rounding scales every term alike and cancels
    in the softmax ratio), which moves the mean by at most twice that; the sums of m terms add
    (m − 1)u relative to Σ e|y_j| ≤ den (num) and den, 2(m − 1)u in the ratio."""
    zeta = beta * np.linalg.norm(z, axis=1)
    t_max = 2.0 * zeta + np.ptp(logw)  # ≥ |t_j|
    dt = U * (6.0 * (np.sqrt(3.0) * zeta + np.max(np.abs(logw))) + t_max + np.abs(M) + 1.0)
    return 2.0 * (RTOL[path] + dt) + 2.0 * (y.shape[0] - 1) * U


@pytest.mark.parametrize("path", C.PATHS)
@pytest.mark.parametrize("bname", ["identity", "diagonal", "spd-random", "general-random"])
def test_error_model_against_long_double(bname, path):
    rng = np.random.default_rng(len(bname))
    y = concentrated(600, rng)
    logw = np.log(rng.uniform(0.5, 1.5, y.shape[0]) / y.shape[0])
    x = np.vstack([y[::10], unit(rng.normal(size=(60, 3)))])
    B = matrix(bname, rng)
    for beta in (1.0, 100.0, 1e4):
        z = x @ B
        m, _ = C.mean(z, y, logw, beta, "softmax", path=path)
        ref, M = reference_ld(z, y, logw, beta)
        err = np.linalg.norm((m - ref).astype(float), axis=1)
        bound = model_bound(z, y, logw, beta, M.astype(float), path)
        assert np.all(err <= bound), (beta, float(np.max(err / bound)))


def test_paths_agree_to_their_error_models():
    rng = np.random.default_rng(3)
    y = unit(rng.normal(size=(3000, 3)))
    logw = np.full(3000, -np.log(3000.0))
    z = unit(rng.normal(size=(200, 3))) @ np.diag([0.1, 1.0, 1.0])
    a, _ = C.mean(z, y, logw, 30.0, "softmax", path="cody-waite")
    b, _ = C.mean(z, y, logw, 30.0, "softmax", path="legacy")
    assert np.max(np.abs(a - b)) <= 2 * (C.EXP_RTOL + expsum.EXP_RTOL_CW) + 1e-14


def _threads_available():
    import numba

    return numba.config.NUMBA_NUM_THREADS >= 2


@pytest.mark.skipif(not _threads_available(), reason="numba started with one thread")
@pytest.mark.parametrize("path", C.PATHS)
@pytest.mark.parametrize("case", ["all-pairs", "culled", "culled-latlon", "expanded", "any-d"])
def test_same_bits_on_one_and_two_threads(case, path, monkeypatch):
    import numba

    if case == "expanded":  # particles in a tight blob: the expansions of CULL_EXPAND
        rng = np.random.default_rng(13)
        y = tight_cloud(4000, rng)
        logw = np.log(np.full(y.shape[0], 1.0 / y.shape[0]))
        z = y @ matrix("general-random", rng)
        monkeypatch.setattr(C, "SERIAL_PAIRS", 0)
        before = numba.get_num_threads()
        got = {}
        try:
            for nt in (1, 2):
                numba.set_num_threads(nt)
                got[nt] = C.sums(z, y, logw, 100.0, 1e-8, path=path)
        finally:
            numba.set_num_threads(before)
        monkeypatch.setattr(C, "CULL_EXPAND", False)
        assert got[1][3] < C.sums(z, y, logw, 100.0, 1e-8, path=path)[3]  # groups were expanded
        for a, b in zip(got[1][:3], got[2][:3]):
            np.testing.assert_array_equal(a, b)
        return

    if case == "culled-latlon":  # the layout before k-d tiles and ranges
        monkeypatch.setattr(C, "CULL_TILES", "lat-lon")
        monkeypatch.setattr(C, "CULL_RUNS", False)
        case = "culled"

    rng = np.random.default_rng(11)
    d = 5 if case == "any-d" else 3
    y = concentrated(2600, rng) if d == 3 else unit(rng.normal(size=(1500, d)))
    logw = np.log(np.full(y.shape[0], 1.0 / y.shape[0]))
    z = unit(rng.normal(size=(300, d))) @ rng.normal(size=(d, d))
    beta, tol = (300.0, 1e-8) if case == "culled" else (20.0, None)
    monkeypatch.setattr(C, "SERIAL_PAIRS", 0)  # the parallel region even for small problems
    before = numba.get_num_threads()
    got = {}
    try:
        for nt in (1, 2):
            numba.set_num_threads(nt)
            got[nt] = C.sums(z, y, logw, beta, tol, path=path)
    finally:
        numba.set_num_threads(before)
    if case == "culled":
        assert got[1][3] < 300 * 2600  # tiles were skipped
    for a, b in zip(got[1][:3], got[2][:3]):
        np.testing.assert_array_equal(a, b)
    assert got[1][3] == got[2][3]


def test_fallback_to_the_legacy_path(monkeypatch):
    rng = np.random.default_rng(5)
    y = unit(rng.normal(size=(800, 3)))
    logw = np.full(800, -np.log(800.0))
    z = unit(rng.normal(size=(50, 3)))
    legacy = C.sums(z, y, logw, 10.0, path="legacy")
    monkeypatch.setenv(C.PATH_ENV, "legacy")
    assert C.kernel_path() == "legacy" and C.path_info()["path"] == "legacy"
    for a, b in zip(C.sums(z, y, logw, 10.0)[:3], legacy[:3]):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setenv(C.PATH_ENV, "fast")
    with pytest.raises(ValueError, match="cody-waite"):
        C.kernel_path()
    # where the cody-waite kernels do not compile, the sums take the legacy path and say why
    monkeypatch.delenv(C.PATH_ENV)
    assert C.kernel_path() == "cody-waite"
    monkeypatch.setattr(C, "_cody_waite", lambda: (None, "LoweringError: probe"))
    assert C.kernel_path() == "legacy" and C.kernel_path("cody-waite") == "legacy"
    assert C.path_info() == {"path": "legacy", "cody_waite_error": "LoweringError: probe", "env": None}
    for a, b in zip(C.sums(z, y, logw, 10.0)[:3], legacy[:3]):
        np.testing.assert_array_equal(a, b)


def test_culling_by_tile_mass_keeps_the_tolerance(monkeypatch):
    """CULL_BY_TILE_MASS (off by default): each skipped tile weighs < (tol/#tiles)·e^{lb}, so the
    mean stays within 2·tol (+ round-off) of the reference.  (It need not skip more than the
    default: tiles hold unequal numbers of points.)"""
    from spherepde.dynamics.attention import Attention

    rng = np.random.default_rng(8)
    y = concentrated(4000, rng)
    w = rng.uniform(0.2, 5.0, 4000) / 4000
    x = unit(rng.normal(size=(300, 3)))
    att = Attention(np.eye(3), matrix("spd-random", rng), np.eye(3), 300.0)
    ref = att.mean(x, y, w, method="reference")
    pairs = {}
    for flag in (False, True):
        monkeypatch.setattr(C, "CULL_BY_TILE_MASS", flag)
        m, st = att.mean_and_stats(x, y, w, method="compiled", tol=1e-8)
        assert np.max(np.linalg.norm(m - ref, axis=1)) <= 1e-13 + 2e-8
        pairs[flag] = dict(st)["pairs"]
    assert max(pairs.values()) < 300 * 4000


def test_kd_tiles_partition_the_points():
    """geometry.kd_tiles: every point in exactly one tile of at most `size` points, the same
    order on every call, and tiles that follow the points (a tight cluster gets small tiles)."""
    from spherepde.grids.geometry import kd_tiles

    rng = np.random.default_rng(4)
    p = concentrated(3001, rng)
    order, starts = kd_tiles(p, 64)
    assert np.array_equal(np.sort(order), np.arange(3001))
    assert starts[0] == 0 and starts[-1] == 3001 and np.all(np.diff(starts) >= 1)
    assert np.max(np.diff(starts)) <= 64
    o2, s2 = kd_tiles(p, 64)
    assert np.array_equal(order, o2) and np.array_equal(starts, s2)
    # the tiles of the tight blob (width 0.05) are much narrower than those of the wide one
    q = p[order]
    cen = unit(np.add.reduceat(q, starts[:-1], axis=0))
    tile = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    rad = np.maximum.reduceat(np.arccos(np.clip(np.sum(q * cen[tile], 1), -1, 1)), starts[:-1])
    near = cen @ MU > 0.99
    assert np.median(rad[near]) < 0.5 * np.median(rad[~near])
    assert kd_tiles(np.empty((0, 3)), 8)[1].tolist() == [0]
    # the compiled version the culling uses gives the same order and tiles (GaussGrid points:
    # many equal coordinates, so the sorts' ties matter)
    from spherepde import GaussGrid
    from spherepde.dynamics.attention import compiled_numba as K

    for pts in (p, GaussGrid(16).xyz.reshape(-1, 3)):
        for size in (1, 7, 64):
            a, b = kd_tiles(pts, size), K.kd_order(np.ascontiguousarray(pts), size)
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


LAYOUTS = [("kd", True), ("lat-lon", False)]


@pytest.mark.parametrize("layout", LAYOUTS, ids=["kd-runs", "latlon-tiles"])
@pytest.mark.parametrize("path", C.PATHS)
@pytest.mark.parametrize("bname", ["identity", "diagonal", "spd-random", "general-random"])
def test_culled_error_model_against_long_double(bname, path, layout, monkeypatch):
    """The culled sums (tol = 1e-8) on a concentrated measure with uneven weights: within the
    error model of the kept terms plus 2·tol (what is skipped weighs < tol·den) of the long-double
    sums over all sources, for both tile layouts, and skipping pairs."""
    monkeypatch.setattr(C, "CULL_TILES", layout[0])
    monkeypatch.setattr(C, "CULL_RUNS", layout[1])
    rng = np.random.default_rng(len(bname) + 7)
    y = concentrated(2400, rng)
    logw = np.log(rng.uniform(0.2, 5.0, y.shape[0]) / y.shape[0])
    x = np.vstack([y[::12], unit(rng.normal(size=(100, 3)))])
    B = matrix(bname, rng)
    tol = 1e-8
    for beta in (100.0, 1000.0):
        z = x @ B
        m, pairs = C.mean(z, y, logw, beta, "softmax", tol=tol, path=path)
        ref, M = reference_ld(z, y, logw, beta)
        err = np.linalg.norm((m - ref).astype(float), axis=1)
        bound = model_bound(z, y, logw, beta, M.astype(float), path) + 2.0 * tol
        assert np.all(err <= bound), (beta, float(np.max(err / bound)))
        assert pairs < x.shape[0] * y.shape[0]


@pytest.mark.parametrize("path", C.PATHS)
def test_culled_rows_sent_to_the_plain_loops_give_the_all_pairs_bits(path, monkeypatch):
    """CULL_MAX_FRACTION = 0 sends every row of the culled kernel to the plain loops: the bits
    of the all-pairs kernel over the sources in the layout's tile order, whatever the layout."""
    rng = np.random.default_rng(12)
    y = concentrated(2500, rng)
    logw = np.log(rng.uniform(0.5, 2.0, 2500) / 2500)
    z = unit(rng.normal(size=(120, 3))) @ matrix("general-random", rng)
    monkeypatch.setattr(C, "CULL_MAX_FRACTION", 0.0)
    monkeypatch.setattr(C, "CULL_EXPAND", False)  # (an expanded row is not a plain one)
    for layout in LAYOUTS:
        monkeypatch.setattr(C, "CULL_TILES", layout[0])
        monkeypatch.setattr(C, "CULL_RUNS", layout[1])
        order = C._tiles(y, C.TILE)[0]
        full = C.sums(z, y[order], logw[order], 300.0, None, path=path)
        got = C.sums(z, y, logw, 300.0, 1e-8, path=path)
        assert got[3] == 120 * 2500
        for a, b in zip(got[:3], full[:3]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("by_mass", [False, True], ids=["tile-max", "tile-mass"])
def test_cumulative_culling_and_shift_by_bound(by_mass, monkeypatch):
    """CULL_CUMULATIVE (a per-target budget for the skipped tiles' bounds) and
    CULL_SHIFT_BY_BOUND (the kept tiles' bound on the maximum as the shift), each on and off:
    within the error model plus 2·tol of long double; the budget never keeps more pairs than the
    per-tile rule."""
    monkeypatch.setattr(C, "CULL_BY_TILE_MASS", by_mass)
    rng = np.random.default_rng(21)
    y = concentrated(3000, rng)
    logw = np.log(rng.uniform(0.2, 5.0, y.shape[0]) / y.shape[0])
    x = np.vstack([y[::15], unit(rng.normal(size=(100, 3)))])
    B = matrix("general-random", rng)
    tol = 1e-8
    for beta in (100.0, 1000.0):
        z = x @ B
        ref, M = reference_ld(z, y, logw, beta)
        bound = model_bound(z, y, logw, beta, M.astype(float), "cody-waite") + 2.0 * tol
        pairs = {}
        for cum in (False, True):
            for shift in (False, True):
                monkeypatch.setattr(C, "CULL_CUMULATIVE", cum)
                monkeypatch.setattr(C, "CULL_SHIFT_BY_BOUND", shift)
                m, pairs[cum, shift] = C.mean(z, y, logw, beta, "softmax", tol=tol)
                err = np.linalg.norm((m - ref).astype(float), axis=1)
                assert np.all(err <= bound), (beta, cum, shift, float(np.max(err / bound)))
        assert pairs[True, True] <= pairs[False, True] < x.shape[0] * y.shape[0]


def test_lb_extra_culls_against_the_whole_sum():
    """compiled.sums(lb_extra=…): the sources split in two parts, the second's row sums known
    (here exactly), the first culled against a lower bound on the whole sum: the mean over
    both within 2·tol (+ the error model) of long double, fewer pairs than culling the first
    part on its own, and rows that keep nothing give num = den = 0."""
    rng = np.random.default_rng(31)
    y = concentrated(4000, rng)
    logw = np.log(rng.uniform(0.2, 5.0, 4000) / 4000)
    part = (y @ MU) < 0.9  # the wide blob: the part known otherwise (the tight one is culled)
    x = unit(rng.normal(size=(300, 3)))
    z = x @ matrix("spd-random", rng)
    beta, tol = 100.0, 1e-8
    ref, M = reference_ld(z, y, logw, beta)
    nk, dk, mk, _ = C.sums(z, y[part], logw[part], beta, None)
    lbx = np.log(dk) + mk  # log Σ over the known part: a lower bound on the whole
    own = C.sums(z, y[~part], logw[~part], beta, tol)
    got = C.sums(z, y[~part], logw[~part], beta, tol, lb_extra=lbx)
    assert got[3] < own[3]
    with np.errstate(under="ignore", invalid="ignore"):
        f = np.exp(got[2] - mk)
    f[~np.isfinite(got[2])] = 0.0
    assert np.all(got[1][f == 0.0] == 0.0) or np.all(f > 0)
    m = (nk + got[0] * f[:, None]) / (dk + got[1] * f)[:, None]
    err = np.linalg.norm((m - ref).astype(float), axis=1)
    bound = model_bound(z, y, logw, beta, M.astype(float), "cody-waite") + 2.0 * tol
    assert np.all(err <= bound), float(np.max(err / bound))


def test_expansion_degree_limits_bound_the_truncation():
    """_rho_limits: at ρ = rho_p[p] the Taylor polynomial of degree p of e^s is within η of e^s
    (relative) for every |s| ≤ ρ, and 2 % more ρ breaks the bound ρ^{p+1}e^{2ρ}/(p+1)! ≤ η; the
    tables hold the multi-indices of degree ≤ p, each once, with 1/α!."""
    import math

    eta = 1e-10
    rho = C._rho_limits(eta, 10)
    assert np.all(np.diff(rho) > 0)
    for p in range(11):
        s = np.linspace(-rho[p], rho[p], 201)
        taylor = sum(s ** k / math.factorial(k) for k in range(p + 1))
        # (+ 4e-16: the rounding of this float64 check itself, two ulps of e^s)
        assert np.max(np.abs(taylor - np.exp(s)) / np.exp(s)) <= eta + 4e-16
        r = 1.02 * rho[p]
        assert r ** (p + 1) * math.exp(2 * r) / math.factorial(p + 1) > eta
    parent, var, invf, Rp = C._expansion_tables(6)
    alphas = [np.zeros(3, int)]
    for r in range(1, Rp[-1]):
        alphas.append(alphas[parent[r]] + np.eye(3, dtype=int)[var[r]])
    assert len({tuple(a) for a in alphas}) == Rp[-1] == math.comb(9, 3)
    for p in range(7):  # graded: the first Rp[p] are those of degree ≤ p
        assert all(sum(a) <= p for a in alphas[:Rp[p]]) and all(sum(a) > p for a in alphas[Rp[p]:])
    assert np.allclose(invf, [1.0 / np.prod([math.factorial(k) for k in a]) for a in alphas])


@pytest.mark.parametrize("path", C.PATHS)
@pytest.mark.parametrize("bname", ["diagonal", "general-random"])
def test_expansions_against_long_double(bname, path, monkeypatch):
    """Particles in a tight blob, targets = sources (a low-temperature particle step), uneven
    weights: with CULL_EXPAND the sums expand groups (at β = 100 fewer terms one by one than
    without) and
    stay within the error model of the kept terms plus 2·tol of the long-double sums, at
    β = 100 and 1000; so does the cost model's every choice (EXPAND_COST's last entry large:
    every group that the degree allows)."""
    rng = np.random.default_rng(len(bname) + 31)
    y = tight_cloud(3000, rng)
    logw = np.log(rng.uniform(0.2, 5.0, y.shape[0]) / y.shape[0])
    B = matrix(bname, rng)
    tol = 1e-8
    for beta in (100.0, 1000.0):
        z = y @ B
        ref, M = reference_ld(z, y, logw, beta)
        bound = model_bound(z, y, logw, beta, M.astype(float), path) + 2.0 * tol
        pairs = {}
        for expand, frac in ((False, 0.5), (True, 0.5), (True, 1e6)):
            monkeypatch.setattr(C, "CULL_EXPAND", expand)
            monkeypatch.setattr(C, "EXPAND_COST", (0.13, 0.13, frac))
            m, pairs[expand, frac] = C.mean(z, y, logw, beta, "softmax", tol=tol, path=path)
            err = np.linalg.norm((m - ref).astype(float), axis=1)
            assert np.all(err <= bound), (beta, expand, frac, float(np.max(err / bound)))
        assert pairs[True, 1e6] <= pairs[True, 0.5] <= pairs[False, 0.5], (beta, pairs)
        if beta == 100.0:  # (at β = 1000 the blob is ten times wider in z: fewer groups pay)
            assert pairs[True, 0.5] < pairs[False, 0.5], pairs
