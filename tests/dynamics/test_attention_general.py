"""The per-target Funk–Hecke path for every B (attention._TargetBessel, DensityAttention "auto" /
"spectral" when B is not ∝ orthogonal).

Checks against sums in np.longdouble written out here (the error model: each scaled sum
S̃_f(x) = Σ_j w_j f(y_j) e^{β⟨Bᵀx, y_j⟩ − β|Bᵀx|} within err·Σw) and against the float64
log-domain reference of Attention.mean on the same measure (density-weighted relative error
≤ tol, max relative error ≤ 10·tol where |m_ref| ≥ M_TINY, as for the zonal path).
B classes: diag(0.1, 1, 1) (Paper 1), a seeded SPD matrix and a seeded non-symmetric one.
"""
from __future__ import annotations

import numpy as np
import pytest

from spherepde.dynamics import attention as A
from spherepde.dynamics.attention import grid_sums
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import GaussGrid
from spherepde.solvers.eulerian.transport import FFSLSphere
from conftest import unit

TOL = 1e-8
M_TINY = 1e-3
MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])


def matrix(name):
    rng = np.random.default_rng(2026)
    q1 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    q2 = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return {"diag-0.1": np.diag([0.1, 1.0, 1.0]),
            "spd-random": q1 @ np.diag([1.5, 0.8, 0.3]) @ q1.T,
            "general-random": q1 @ np.diag([1.2, 0.7, 0.4]) @ q2}[name]


def density(name, p):
    if name == "smooth":
        return 1.0 + 0.5 * (p @ MU) + 0.3 * p[..., 2] ** 2
    return 100.0 / (2 * np.pi) * np.exp(100.0 * (p @ MU - 1.0)) + 1e-12  # vMF κ = 100


def targets(g, rng, step):
    pts = FFSLSphere(g, lambda t, x: 0 * x).points[::step]
    far = unit(-MU + 0.3 * rng.normal(size=(100, 3)))
    return np.concatenate([pts, g.xyz.reshape(-1, 3)[::step], far])


@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("beta", [1.0, 10.0, 40.0])
@pytest.mark.parametrize("dname", ["smooth", "vmf100"])
def test_sums_within_error_model(bname, beta, dname):
    g = GaussGrid(48)
    B = matrix(bname)
    spec = grid_sums._TargetBessel(g, B, beta)
    assert spec.possible
    x = targets(g, np.random.default_rng(1), 5)
    w = density(dname, g.xyz) * g.cell_area
    S = spec.sums(w, x)
    # long-double sums of the same scaled kernel
    xl, yl = x.astype(np.longdouble), g.xyz.reshape(-1, 3).astype(np.longdouble)
    zl = xl @ B.astype(np.longdouble)
    r = np.sqrt(np.sum(zl * zl, axis=1))
    k = np.exp(beta * (zl @ yl.T - r[:, None])) * w.reshape(-1).astype(np.longdouble)
    want = np.vstack([(k @ yl).T, k.sum(axis=1)]).astype(float)
    err = np.max(np.abs(S - want))
    assert err <= spec.err * w.sum(), (err, spec.err * w.sum(), spec.L)


@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 30.0])
@pytest.mark.parametrize("dname", ["smooth", "vmf100"])
def test_density_means_match_reference(bname, beta, dname):
    g = GaussGrid(48 if beta < 30 else 64)  # (β‖B‖ = 45 needs degree 51)
    x = targets(g, np.random.default_rng(3), 4)
    rho = density(dname, g.xyz)
    att = Attention(np.eye(3), matrix(bname), np.eye(3), beta)
    da = DensityAttention(att, g)
    assert isinstance(da._spec, grid_sums._TargetBessel), da.spectral_reason
    m, stats = da.mean_and_stats(x, rho)
    st = dict(stats)
    assert st["method"] == "spectral" and st["spectral"] + st["split"] + st["exact"] == x.shape[0]
    ref = att.mean(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1), method="reference")
    dm, nr = np.linalg.norm(m - ref, axis=1), np.linalg.norm(ref, axis=1)
    weight = density(dname, x)
    assert np.sum(weight * dm) / np.sum(weight * nr) <= TOL, st
    big = nr >= M_TINY
    assert np.max(dm[big] / nr[big]) <= 10 * TOL, st
    if dname == "smooth":  # diffuse: every target certified by the plain spectral sums
        assert st["spectral"] == x.shape[0], st


def test_usa_variant():
    g = GaussGrid(48)
    x = targets(g, np.random.default_rng(4), 4)
    for dname in ("smooth", "vmf100"):
        rho = density(dname, g.xyz)
        for B, beta in ((matrix("spd-random"), 8.0), (matrix("diag-0.1"), 20.0)):
            att = Attention(np.eye(3), B, np.eye(3), beta, kind="usa")
            da = DensityAttention(att, g, method="spectral")
            m, stats = da.mean_and_stats(x, rho)
            ref = att.mean(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1),
                           method="reference")
            nr = np.linalg.norm(ref, axis=1)
            big = nr >= M_TINY * nr.max()  # usa means carry e^{β(|Bᵀx| − 1)}: scale-free
            rel = np.linalg.norm(m - ref, axis=1)[big] / nr[big]
            assert rel.max() <= TOL, (dname, beta, rel.max(), stats)


def test_non_unit_targets_are_evaluated_exactly():
    g = GaussGrid(32)
    rho = density("smooth", g.xyz)
    att = Attention(np.eye(3), matrix("general-random"), np.eye(3), 5.0)
    da = DensityAttention(att, g)
    x = 1.001 * unit(np.random.default_rng(5).normal(size=(40, 3)))
    m, stats = da.mean_and_stats(x, rho)
    assert stats["exact"] == 40
    ref = att.mean(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1), method="reference")
    assert np.max(np.linalg.norm(m - ref, axis=1) / np.linalg.norm(ref, axis=1)) <= TOL


def test_choice_by_temperature():
    """auto takes the per-target path up to β‖B‖ = GENERAL_MAX_KAPPA (beyond, the compiled
    culled direct sums are faster); "spectral" forces it wherever the degree fits the grid."""
    g = GaussGrid(128)
    B = matrix("diag-0.1")
    assert DensityAttention(Attention(np.eye(3), B, np.eye(3), 100.0), g).spectral
    hot = DensityAttention(Attention(np.eye(3), B, np.eye(3), 1.01 * A.GENERAL_MAX_KAPPA), g)
    assert not hot.spectral and "faster" in hot.spectral_reason
    forced = DensityAttention(Attention(np.eye(3), B, np.eye(3), 1.01 * A.GENERAL_MAX_KAPPA), g,
                              method="spectral")
    assert isinstance(forced._spec, grid_sums._TargetBessel)


# ---- weighted points (particles) ------------------------------------------------------------------
@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("beta", [1.0, 10.0, 100.0])
@pytest.mark.parametrize("name", ["diffuse", "concentrated"])
def test_points_match_reference(bname, beta, name):
    """Attention.mean "spectral" for B not ∝ orthogonal: adjoint point synthesis of the sources,
    per-target Bessel synthesis, every target certified or summed directly."""
    rng = np.random.default_rng(int(beta) + len(bname))
    n = 2000
    if name == "diffuse":
        x = unit(rng.normal(size=(n, 3)))
    else:
        x = unit(np.vstack([MU + 0.05 * rng.normal(size=(1400, 3)),
                            unit([-0.5, 0.2, -0.8]) + 0.15 * rng.normal(size=(600, 3))]))
    w = rng.uniform(0.5, 1.5, n)
    att = Attention(np.eye(3), matrix(bname), np.eye(3), beta)
    m, stats = att.mean_and_stats(x, x, w, method="spectral")
    st = dict(stats)
    assert st["method"] == "spectral" and st["spectral"] + st["exact"] == n
    ref = att.mean(x, x, w, method="reference")
    dm, nr = np.linalg.norm(m - ref, axis=1), np.linalg.norm(ref, axis=1)
    assert np.sum(w * dm) / np.sum(w * nr) <= TOL, st
    big = nr >= M_TINY
    assert np.max(dm[big] / nr[big]) <= TOL, st
    if name == "diffuse" and beta <= 10:
        assert st["spectral"] == n, st


def test_singular_B():
    """B = diag(0, 1, 1): at targets with Bᵀx = 0 the kernel is constant (the mean is the
    measure's mean); densities and particles stay finite and match the reference."""
    g = GaussGrid(32)
    B = np.diag([0.0, 1.0, 1.0])
    rho = density("smooth", g.xyz)
    x = np.vstack([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], unit(np.random.default_rng(6).normal(size=(200, 3)))])
    att = Attention(np.eye(3), B, np.eye(3), 5.0)
    y, w = g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1)
    ref = att.mean(x, y, w, method="reference")
    for m in (DensityAttention(att, g, method="spectral").mean(x, rho),
              att.mean(x, y, w, method="spectral")):
        assert np.all(np.isfinite(m))
        dm, nr = np.linalg.norm(m - ref, axis=1), np.linalg.norm(ref, axis=1)
        assert np.all(dm <= 10 * TOL * nr), np.max(dm / nr)


@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("beta", [10.0, 40.0])
@pytest.mark.parametrize("run,window", [(16, 3), (16, 0), (0, 0)])
def test_upper_bound_bounds_the_sums(bname, beta, run, window, monkeypatch):
    """_TargetBessel.upper_bound: where it is below theta it bounds S̃_1 (long double) from above
    (elsewhere it only says ≥ theta: it stops summing there); with runs of targets bounded at
    once (grid_sums.BOUND_RUN) and one by one, with and without the window sums first
    (grid_sums.WINDOW_HALF, a lower bound on S̃_1)."""
    monkeypatch.setattr(grid_sums, "BOUND_RUN", run)
    monkeypatch.setattr(grid_sums, "WINDOW_HALF", window)
    g = GaussGrid(48)
    B = matrix(bname)
    spec = grid_sums._TargetBessel(g, B, beta)
    x = targets(g, np.random.default_rng(5), 3)
    w = density("vmf100", g.xyz) * g.cell_area
    w /= w.sum()
    xl, yl = x.astype(np.longdouble), g.xyz.reshape(-1, 3).astype(np.longdouble)
    zl = xl @ B.astype(np.longdouble)
    r = np.sqrt(np.sum(zl * zl, axis=1))
    s1 = (np.exp(beta * (zl @ yl.T - r[:, None])) @ w.reshape(-1).astype(np.longdouble)).astype(float)
    for theta in (1e-12, 1e-6, 1e-3, 2.0):
        ub = spec.upper_bound(w, x, theta)
        below = ub < theta
        assert np.all(ub[below] >= s1[below]), theta
        if theta == 2.0:  # above the total mass: every target, and a true bound everywhere
            assert below.all() and np.all(ub >= s1)
    # the concentrated density has far targets, which the bound finds at the rejection level
    assert (spec.upper_bound(w, x, 1e-6) < 1e-6).any()
    if window:  # the window sums: part of S̃_1, positive
        z = x @ B
        r = np.linalg.norm(z, axis=1)
        win = grid_sums._window_terms(g, w, z / r[:, None], beta * r)
        assert np.all(win > 0) and np.all(win <= s1 * (1 + 1e-12))


@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random"])
@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_skipping_surely_rejected_targets(bname, kind, monkeypatch):
    """density.SKIP_SURELY_REJECTED: the first pass accepts the same targets; every mean within
    the error model against the reference either way."""
    from spherepde.dynamics.attention import density as dmod

    g = GaussGrid(64)
    x = targets(g, np.random.default_rng(6), 2)
    rho = density("vmf100", g.xyz)
    att = Attention(np.eye(3), matrix(bname), np.eye(3), 30.0, kind=kind)
    ref = att.mean(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1), method="reference")
    got = {}
    for skip in (True, False):
        monkeypatch.setattr(dmod, "SKIP_SURELY_REJECTED", skip)
        da = DensityAttention(att, g, method="spectral")
        assert isinstance(da._spec, grid_sums._TargetBessel)
        got[skip] = da.mean_and_stats(x, rho)
        m, st = got[skip]
        nr = np.linalg.norm(ref, axis=1)
        big = nr >= M_TINY * (nr.max() if kind == "usa" else 1.0)
        rel = np.linalg.norm(m - ref, axis=1)[big] / nr[big]
        assert rel.max() <= 10 * TOL, (skip, rel.max(), st)
    s1, s0 = got[True][1], got[False][1]
    assert s1["spectral"] == s0["spectral"] and s1["spectral"] > 0
    assert s1["split"] + s1["exact"] > 0


@pytest.mark.parametrize("kappa", [45.0, 150.0])
def test_degree_levels_keep_the_tail(kappa):
    """funk_hecke.degree_levels: for every κ up to each level's κ_j, the tail at that level's
    degree is within the tail at the full κ and degree (grid_sums.PER_TARGET_DEGREE)."""
    from spherepde.dynamics.attention.funk_hecke import _SphereKernel, degree_levels

    L = 51 if kappa < 100 else 110
    tail = float(_SphereKernel(kappa, L).tail[L])
    ks, ls = degree_levels(kappa, L, tail)
    assert ls[-1] == L and np.all(np.diff(ls) >= 0) and ls[0] < L
    for kj, lj in zip(ks, ls):
        for k in np.linspace(1e-3, kj, 25):
            assert _SphereKernel(float(k), L).tail[lj] <= tail * (1 + 1e-9), (k, kj, lj)



@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random"])
@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_tail_share(bname, kind, monkeypatch):
    """grid_sums.TARGET_TAIL_SHARE: the series stops where the kernel tail is that share of the
    round-off term (a lower degree than at SERIES_TAIL, err larger by at most the share); every
    mean within the error model against the reference either way."""
    from spherepde.dynamics.attention.funk_hecke import TARGET_ROUNDOFF

    g = GaussGrid(64)
    x = targets(g, np.random.default_rng(9), 2)
    rho = density("vmf100", g.xyz)
    att = Attention(np.eye(3), matrix(bname), np.eye(3), 30.0, kind=kind)
    ref = att.mean(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1), method="reference")
    nr = np.linalg.norm(ref, axis=1)
    big = nr >= M_TINY * (nr.max() if kind == "usa" else 1.0)
    specs = {}
    for share in (0.05, 0.0):
        monkeypatch.setattr(grid_sums, "TARGET_TAIL_SHARE", share)
        da = DensityAttention(att, g, method="spectral")
        spec = specs[share] = da._spec
        assert isinstance(spec, grid_sums._TargetBessel)
        ro = TARGET_ROUNDOFF * (spec.L + 16.0)
        assert spec.tail[spec.L] <= max(grid_sums.SERIES_TAIL, share * ro)
        m, st = da.mean_and_stats(x, rho)
        assert st["split"] > 0, st
        rel = np.linalg.norm(m - ref, axis=1)[big] / nr[big]
        assert rel.max() <= 10 * TOL, (share, rel.max(), st)
    assert specs[0.05].L < specs[0.0].L and specs[0.05].err <= 1.05 * specs[0.0].err


@pytest.mark.parametrize("bname", ["diag-0.1", "general-random"])
def test_mirror_pairs_within_error_model(bname, monkeypatch):
    """compiled.MIRROR_PAIRS: targets that are mirror images in the equator (GaussGrid face
    points and cell centres with a diagonal B) share one synthesis; the sums stay within the
    error model against long double, pairs or not, and equal the unpaired ones to rounding."""
    from spherepde.dynamics.attention import compiled

    monkeypatch.setattr(compiled, "GROUP_TARGETS", False)  # (groups take precedence)
    g = GaussGrid(48)
    B, beta = matrix(bname), 40.0
    spec = grid_sums._TargetBessel(g, B, beta)
    x = np.concatenate([FFSLSphere(g, lambda t, x: 0 * x).points[::3], g.xyz.reshape(-1, 3)[::7]])
    w = density("vmf100", g.xyz) * g.cell_area
    w /= w.sum()
    z = x @ B
    r = np.linalg.norm(z, axis=1)
    first, second = compiled.mirror_pairs(z / r[:, None], beta * r)
    if bname == "diag-0.1":
        assert first.size > x.shape[0] // 4
        assert np.array_equal(x[first] * [1, 1, -1], x[second])
    else:  # no B-image of the grid is mirror symmetric
        assert first.size == 0
    got = {}
    for on in (True, False):
        monkeypatch.setattr(compiled, "MIRROR_PAIRS", on)
        got[on] = spec.sums(w, x)
    xl, yl = x.astype(np.longdouble), g.xyz.reshape(-1, 3).astype(np.longdouble)
    zl = xl @ B.astype(np.longdouble)
    rl = np.sqrt(np.sum(zl * zl, axis=1))
    k = np.exp(beta * (zl @ yl.T - rl[:, None])) * w.reshape(-1).astype(np.longdouble)
    want = np.vstack([(k @ yl).T, k.sum(axis=1)]).astype(float)
    for on, S in got.items():
        assert np.max(np.abs(S - want)) <= spec.err, on
    assert np.max(np.abs(got[True] - got[False])) <= 1e-14


def _same_sums_on_one_and_two_threads(bname, dname):
    """_TargetBessel(GaussGrid(48), B, β = 40).sums at the face points for density dname, on one
    and on two numba threads: the two results, or a skip when numba started with one thread."""
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba started with one thread")
    g = GaussGrid(48)
    spec = grid_sums._TargetBessel(g, matrix(bname), 40.0)
    x = FFSLSphere(g, lambda t, x: 0 * x).points
    w = density(dname, g.xyz) * g.cell_area
    before = numba.get_num_threads()
    got = {}
    try:
        for nt in (1, 2):
            numba.set_num_threads(nt)
            got[nt] = spec.sums(w, x)
    finally:
        numba.set_num_threads(before)
    return got[1], got[2]


def test_mirror_pairs_same_bits_on_one_and_two_threads(monkeypatch):
    """The paired synthesis (compiled.bessel_sums with mirror pairs) gives the same bits on one
    and on two numba threads."""
    from spherepde.dynamics.attention import compiled

    monkeypatch.setattr(compiled, "GROUP_TARGETS", False)  # (groups take precedence)
    np.testing.assert_array_equal(*_same_sums_on_one_and_two_threads("diag-0.1", "vmf100"))


def _longdouble_sums(x, g, B, beta, w):
    """(4, n): S̃_f(x) for f = y_1, y_2, y_3, 1 in long double (the error model's yardstick)."""
    xl, yl = x.astype(np.longdouble), g.xyz.reshape(-1, 3).astype(np.longdouble)
    zl = xl @ B.astype(np.longdouble)
    rl = np.sqrt(np.sum(zl * zl, axis=1))
    k = np.exp(beta * (zl @ yl.T - rl[:, None])) * w.reshape(-1).astype(np.longdouble)
    return np.vstack([(k @ yl).T, k.sum(axis=1)]).astype(float)


@pytest.mark.parametrize("bname", ["diag-0.1", "general-random"])
@pytest.mark.parametrize("dname", ["smooth", "vmf100"])
@pytest.mark.parametrize("per_degree", [True, False])
def test_target_groups_within_error_model(bname, dname, per_degree, monkeypatch):
    """compiled.GROUP_TARGETS: targets sharing |u₃| and κ bitwise (GaussGrid face points and cell
    centres with a diagonal B: their images under the reflections in the coordinate planes) share
    one recurrence; the sums stay within the error model against long double, with and without
    per-target degrees, and equal the mirror-paired and the single sums to rounding."""
    from spherepde.dynamics.attention import compiled

    monkeypatch.setattr(grid_sums, "PER_TARGET_DEGREE", per_degree)
    g = GaussGrid(48)
    B, beta = matrix(bname), 40.0
    spec = grid_sums._TargetBessel(g, B, beta)
    x = np.concatenate([FFSLSphere(g, lambda t, x: 0 * x).points[::3], g.xyz.reshape(-1, 3)[::7]])
    w = density(dname, g.xyz) * g.cell_area
    w /= w.sum()
    z = x @ B
    r = np.linalg.norm(z, axis=1)
    order, starts = compiled.target_groups(z / r[:, None], beta * r)
    assert np.array_equal(np.sort(order), np.arange(x.shape[0]))
    ngroups = starts.size - 1
    if bname == "diag-0.1":  # groups of up to 8: fewer recurrences than with mirror pairs
        first, _ = compiled.mirror_pairs(z / r[:, None], beta * r)
        assert ngroups < 0.9 * (x.shape[0] - first.size)
        assert ngroups <= compiled.GROUP_MAX_SHARE * x.shape[0]
        for g0, g1 in zip(starts[:-1], starts[1:]):  # each group: one |u₃| and one κ
            mem = order[g0:g1]
            assert np.all(np.abs(z[mem, 2] / r[mem]) == abs(z[mem[0], 2] / r[mem[0]]))
            assert np.all(beta * r[mem] == beta * r[mem[0]])
    else:  # no symmetry: the targets stay alone and the other paths run
        assert ngroups > compiled.GROUP_MAX_SHARE * x.shape[0]
    got = {}
    for mode in ("groups", "pairs", "single"):
        monkeypatch.setattr(compiled, "GROUP_TARGETS", mode == "groups")
        monkeypatch.setattr(compiled, "MIRROR_PAIRS", mode == "pairs")
        got[mode] = spec.sums(w, x)
    want = _longdouble_sums(x, g, B, beta, w)
    for mode, S in got.items():
        assert np.max(np.abs(S - want)) <= spec.err, mode
    assert np.max(np.abs(got["groups"] - got["pairs"])) <= 1e-14
    assert np.max(np.abs(got["groups"] - got["single"])) <= 1e-14


def test_target_groups_same_bits_on_one_and_two_threads():
    """The grouped synthesis (compiled_numba.bessel_groups) gives the same bits on one and on
    two numba threads."""
    from spherepde.dynamics.attention import compiled

    assert compiled.GROUP_TARGETS
    np.testing.assert_array_equal(*_same_sums_on_one_and_two_threads("diag-0.1", "smooth"))


@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("beta", [1.0, 40.0])
@pytest.mark.parametrize("dname", ["smooth", "vmf100"])
def test_floor_bound(bname, beta, dname, monkeypatch):
    """grid_sums.FLOOR_BOUND: _TargetBessel.floor_bound is below S̃_1 (long double) at every
    target; upper_bound skips the same targets with it and without it (it settles only targets
    at or above the level), and DensityAttention's means are bitwise the same."""
    g = GaussGrid(48 if beta < 30 else 64)  # (β‖B‖ = 60 needs degree 57)
    B = matrix(bname)
    spec = grid_sums._TargetBessel(g, B, beta)
    x = targets(g, np.random.default_rng(7), 3 if beta < 30 else 5)
    w = density(dname, g.xyz) * g.cell_area
    w /= w.sum()
    s1 = _longdouble_sums(x, g, B, beta, w)[3]
    kap = beta * np.linalg.norm(x @ B, axis=1)
    lo = spec.floor_bound(w, kap)
    assert np.all(lo <= s1)
    if dname == "smooth":  # ρ_min is half the mean: the bound is within a factor 4 of S̃_1
        assert np.all(lo >= 0.25 * s1)
    for theta in (1e-6, float(np.median(lo)) if dname == "smooth" else 1e-3):
        ub = {}
        for on in (True, False):
            monkeypatch.setattr(grid_sums, "FLOOR_BOUND", on)
            ub[on] = spec.upper_bound(w, x, theta)
        np.testing.assert_array_equal(ub[True] < theta, ub[False] < theta)
        below = ub[True] < theta
        np.testing.assert_array_equal(ub[True][below], ub[False][below])
    att = Attention(np.eye(3), B, np.eye(3), beta)
    rho = density(dname, g.xyz)
    got = {}
    for on in (True, False):
        monkeypatch.setattr(grid_sums, "FLOOR_BOUND", on)
        got[on] = DensityAttention(att, g, method="spectral").mean(x, rho)
    np.testing.assert_array_equal(got[True], got[False])


@pytest.mark.parametrize("nlat", [32, 128])
@pytest.mark.parametrize("dname", ["smooth", "vmf100", "noise"])
def test_analysis_roundoff(dname, nlat):
    """grid_sums.ANALYSIS_ROUNDOFF: the analysis of the four fields of a cell measure (what the
    any-B path synthesises) against the same sums Σ_j w_j f(y_j) y_lm(μ_j) e^{−imλ_j} in long
    double (orthonormal y_lm without the Condon–Shortley phase, by the recursion of grids.rings,
    ring by ring), per coefficient within ANALYSIS_ROUNDOFF·√((2l+1)/4π)·Σ|w f| — the size of a
    unit point mass's coefficients."""
    g = GaussGrid(nlat)
    spec = grid_sums._TargetBessel(g, matrix("diag-0.1"), 10.0 if nlat < 64 else 100.0)
    sh = spec._transform()
    if dname == "noise":
        rho = np.random.default_rng(11).uniform(0.0, 1.0, g.shape)
    else:
        rho = density(dname, g.xyz)
    w = rho * g.cell_area
    dens = w * spec._inv_area
    xyz = g.xyz
    fields = np.stack([xyz[..., 0], xyz[..., 1], xyz[..., 2], np.ones(g.shape)])
    q = sh.analyse(dens[None] * fields)
    L = spec.L
    ld = np.longdouble
    mu = np.sin(g.lat.astype(ld))  # (the ring latitudes, as the grid's cell centres)
    sn = np.cos(g.lat.astype(ld))
    T = np.zeros((L + 1, L + 1, g.nlat), dtype=ld)  # [m, l, ring]
    T[0, 0] = 1 / np.sqrt(4 * np.pi * ld(1))
    for l in range(1, L + 1):
        m = np.arange(l, dtype=ld)[:, None]
        a_ = np.sqrt((4 * ld(l) ** 2 - 1) / (ld(l) ** 2 - m ** 2))
        b_ = np.sqrt(np.maximum((ld(l) - 1) ** 2 - m ** 2, 0) / (4 * (ld(l) - 1) ** 2 - 1))
        T[:l, l] = a_ * (mu * T[:l, l - 1] - (b_ * T[:l, l - 2] if l > 1 else 0))
        T[l, l] = np.sqrt((2 * ld(l) + 1) / (2 * ld(l))) * sn * T[l - 1, l - 1]
    lon = np.arange(g.nlon, dtype=ld) * ld(g.dlon)
    ang = np.arange(L + 1, dtype=ld)[:, None] * lon[None, :]  # [m, lon]
    cm, sm = np.cos(ang), np.sin(ang)
    worst = 0.0
    for f in range(4):
        wf = (w * fields[f]).astype(ld)  # [ring, lon]
        Fr, Fi = wf @ cm.T, -(wf @ sm.T)  # [ring, m]: Σ_lon w f e^{−imλ}
        ref_r = np.einsum("mlr,rm->ml", T, Fr)
        ref_i = np.einsum("mlr,rm->ml", T, Fi)
        d = np.hypot((q[f].real - ref_r[sh.m, sh.l]).astype(float),
                     (q[f].imag - ref_i[sh.m, sh.l]).astype(float))
        scale = np.sqrt((2.0 * sh.l + 1.0) / (4.0 * np.pi)) * float(np.abs(wf).sum())
        worst = max(worst, float(np.max(d / scale)))
    assert worst <= grid_sums.ANALYSIS_ROUNDOFF, worst
    print(f"analysis round-off {dname}, nlat {nlat}, L {L}: {worst:.2e}")


@pytest.mark.parametrize("bname", ["diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("dname", ["smooth", "vmf100", "noise"])
def test_data_degree_within_error_model(bname, dname, monkeypatch):
    """grid_sums.DATA_DEGREE: each target's series stops where the density's spectrum allows;
    the sums stay within err (which counts DATA_TAIL_SHARE of the round-off in) against long
    double at every target, on a smooth density (few degrees), a concentrated one and white
    noise (a flat spectrum: the kernel's degrees); the same within err of the sums without it."""
    g = GaussGrid(48)
    B, beta = matrix(bname), 40.0
    x = targets(g, np.random.default_rng(12), 4)
    rho = (np.random.default_rng(13).uniform(0.0, 1.0, g.shape) if dname == "noise"
           else density(dname, g.xyz))
    w = rho * g.cell_area
    w /= w.sum()
    got, specs = {}, {}
    for on in (True, False):
        monkeypatch.setattr(grid_sums, "DATA_DEGREE", on)
        spec = specs[on] = grid_sums._TargetBessel(g, B, beta)
        got[on] = spec.sums(w, x)
    spec = specs[True]
    assert spec.err == pytest.approx(specs[False].err + grid_sums.DATA_TAIL_SHARE
                                     * grid_sums.TARGET_ROUNDOFF * (spec.L + 16.0), rel=1e-12)
    want = _longdouble_sums(x, g, B, beta, w)
    for on, S in got.items():
        assert np.max(np.abs(S - want)) <= specs[on].err, on
    assert np.max(np.abs(got[True] - got[False])) <= spec.err
    sh = spec._transform()
    dens = w * spec._inv_area
    xyz = g.xyz
    q = sh.analyse(np.stack([dens * xyz[..., 0], dens * xyz[..., 1], dens * xyz[..., 2], dens]))
    deg, tail = spec.data_degrees(q, sh, x, 1.0, with_tail=True)
    assert np.all(tail <= spec.tail[spec.L] + grid_sums.DATA_TAIL_SHARE
                  * grid_sums.TARGET_ROUNDOFF * (spec.L + 16.0))
    if dname == "smooth":  # of degree 2: the kernel's degree is not needed
        assert deg.max() <= spec.L // 2, (deg.max(), spec.L)
    if dname == "noise":  # a flat spectrum: nearly the kernel's degrees
        assert np.median(deg) >= 0.7 * spec.L, (np.median(deg), spec.L)


@pytest.mark.parametrize("bname", ["diag-0.1", "general-random"])
@pytest.mark.parametrize("dname", ["smooth", "vmf100"])
def test_data_degree_same_bits_on_one_and_two_threads(bname, dname):
    """The sums with the density's degrees (compiled_numba.data_degrees, then the grouped or
    single synthesis) give the same bits on one and on two numba threads."""
    assert grid_sums.DATA_DEGREE
    np.testing.assert_array_equal(*_same_sums_on_one_and_two_threads(bname, dname))
