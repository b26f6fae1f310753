"""Spectral fast summation for weighted points on S² (Attention.mean, method "spectral"/"auto").

Every accuracy check compares against the float64 log-domain reference (``method="reference"``)
on the same measure Σ_j w_j δ_{y_j}, or against sums in ``np.longdouble`` written out here.
Criteria (tol = 1e-8, the default):
* weighted relative error  Σ_i w_i |m_i − m_ref,i| / Σ_i w_i |m_ref,i| ≤ tol  (w_i the particle
  weights: the targets are the particles themselves, or ones at the given points), and
* max_i |m_i − m_ref,i| / |m_ref,i| ≤ tol over targets with |m_ref,i| ≥ M_TINY (the spectral
  targets are certified to tol/2, the rest are summed directly with tol/8).
Clouds (fixed seeds): "diffuse" (uniform on S²) and "concentrated" (two blobs of angular width
0.05 and 0.15 with 70/30 % of the mass), N = 1500–3000.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.dynamics.attention import point_sums
from spherepde.dynamics.attention import Attention
from spherepde.solvers.lagrangian import ParticleODE
from conftest import random_rotation as rotation, unit

TOL = 1e-8
M_TINY = 1e-3
MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])


def cloud(name, n, rng):
    if name == "diffuse":
        return unit(rng.normal(size=(n, 3)))
    k = int(0.7 * n)
    other = unit(np.array([-0.5, 0.2, -0.8]))
    return unit(np.vstack([MU + 0.05 * rng.normal(size=(k, 3)),
                           other + 0.15 * rng.normal(size=(n - k, 3))]))


def errors(m, ref, weight):
    """(weighted relative error, max relative error where |m_ref| ≥ M_TINY)."""
    dm = np.linalg.norm(m - ref, axis=1)
    nr = np.linalg.norm(ref, axis=1)
    big = nr >= M_TINY
    return float(np.sum(weight * dm) / np.sum(weight * nr)), float(np.max(dm[big] / nr[big]))


def longdouble_sums(w, y, u, kappa):
    """S_y (3 rows) and S_1 of the block comment, in np.longdouble: shape (4, len(u))."""
    yl, ul = y.astype(np.longdouble), u.astype(np.longdouble)
    k = np.exp(kappa * (ul @ yl.T - 1)) * w.astype(np.longdouble)
    return np.vstack([(k @ yl).T, k.sum(axis=1)])


# ---- the error model of one spectral sum -----------------------------------------------------
@pytest.mark.parametrize("kappa", [0.5, 10.0, 100.0, 600.0])
def test_point_sums_within_error_model(kappa):
    """|S_spectral − S_exact| ≤ err per unit mass (truncation tail + round-off model), for clouds
    at the north pole, south pole, equator, mid-latitude, and uniform; targets at the points
    (where the error sits) and random."""
    rng = np.random.default_rng(int(kappa * 10))
    spec = point_sums._SpectralPoints(kappa, TOL)
    for c0 in ([0, 0, 1.0], [0, 0, -1.0], [1.0, 0, 0], [0, 0.3, 1.0], None):
        y = (unit(rng.normal(size=(800, 3))) if c0 is None
             else unit(np.array(c0) + 0.02 * rng.normal(size=(800, 3))))
        w = rng.uniform(0.5, 1.5, 800)
        w /= w.sum()
        u = np.vstack([y[:200], unit(rng.normal(size=(200, 3)))])
        err = np.max(np.abs(spec.sums(w, y, u) - longdouble_sums(w, y, u, kappa)))
        assert err <= spec.err, (c0, err, spec.err)


def test_degree_grows_like_sqrt_kappa():
    L = {k: point_sums._SpectralPoints(k, TOL).L for k in (10.0, 100.0, 1000.0)}
    assert L[10.0] < L[100.0] < L[1000.0]
    for k, l in L.items():  # L ≈ sqrt(2κ ln(1/ε)) with ε between 1e-15 and 1e-11
        assert math.sqrt(2 * k * math.log(1e11)) <= l + 3 <= math.sqrt(2 * k * math.log(1e15)) + 10


# ---- accuracy against the reference ------------------------------------------------------------
@pytest.mark.parametrize("beta", [1.0, 10.0, 100.0, 1000.0])
@pytest.mark.parametrize("name", ["diffuse", "concentrated"])
@pytest.mark.parametrize("rotated", [False, True])
def test_particles_match_reference(beta, name, rotated):
    rng = np.random.default_rng(int(beta) + 7 * rotated + (name == "diffuse"))
    n = 3000 if beta <= 100 else 1500
    x = cloud(name, n, rng)
    w = rng.uniform(0.5, 1.5, n)
    K = 1.5 * rotation(rng) if rotated else np.eye(3)  # B = QᵀK = c·R
    att = Attention(np.eye(3), K, np.diag([1.0, 0.8, 0.2]), beta)
    m, stats = att.mean_and_stats(x, x, w, method="spectral")
    stats = dict(stats)
    ref = att.mean(x, x, w, method="reference")
    wrel, mx = errors(m, ref, w)
    assert wrel <= TOL and mx <= TOL, (wrel, mx, stats)
    assert stats["method"] == "spectral" and stats["spectral"] + stats["exact"] == n
    if not rotated and beta <= 100:  # every target is a source: S_1 ≥ w_i ≫ err·Σw
        assert stats["spectral"] >= 0.9 * n
    # (at β = 1000 and N = 1500 the points are ~3 kernel widths apart: S_1 ≈ w_i is close to
    # 8·err·Σw/tol and a quarter of the diffuse cloud is summed exactly)


def test_usa_matches_reference():
    rng = np.random.default_rng(3)
    x = cloud("concentrated", 2000, rng)
    w = np.full(2000, 1 / 2000)
    for beta in (5.0, 80.0):
        att = Attention(np.eye(3), 0.9 * rotation(rng), np.eye(3), beta, kind="usa")
        m = att.mean(x, x, w, method="spectral")
        ref = att.mean(x, x, w, method="reference")
        dm, nr = np.linalg.norm(m - ref, axis=1), np.linalg.norm(ref, axis=1)
        big = nr >= M_TINY * nr.max()  # usa means carry e^{β(c−1)}: scale-free criterion
        assert np.sum(w * dm) / np.sum(w * nr) <= TOL and np.max(dm[big] / nr[big]) <= TOL


def test_far_field_targets_fall_back_to_exact():
    """Targets far from a concentrated cloud: the spectral sums are only accurate to ~1e-13 of
    the mass there, so they must be certified away and summed directly — and still be right."""
    rng = np.random.default_rng(11)
    y = unit(MU + 0.05 * rng.normal(size=(2000, 3)))
    w = np.full(2000, 1 / 2000)
    far = unit(-MU + 0.6 * rng.normal(size=(500, 3)))  # 1–3 rad from the mass
    near = unit(MU + 0.05 * rng.normal(size=(500, 3)))
    x = np.vstack([near, far])
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 200.0)
    m, stats = att.mean_and_stats(x, y, w, method="spectral")
    stats = dict(stats)
    ref = att.mean(x, y, w, method="reference")
    assert stats["exact"] >= 400 and stats["spectral"] >= 450, stats
    dm = np.linalg.norm(m - ref, axis=1) / np.linalg.norm(ref, axis=1)
    assert dm.max() <= TOL
    # what the certification protects against: the raw spectral ratio far away is wrong — off
    # by more than 1e-3, or not even finite (S_1 is ~1e-13 of the mass there, down to an exact
    # 0 on some CPUs, so the raw ratio can be inf or NaN)
    spec, _ = point_sums._point_plan(att, y, TOL)[0]
    S = spec.sums(w, y, far)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw_err = np.linalg.norm(S[:3].T / S[3][:, None] - ref[500:], axis=1)
    wrong = ~np.isfinite(raw_err) | (raw_err > 1e-3)
    assert np.count_nonzero(wrong) >= 50, np.count_nonzero(wrong)


@pytest.mark.parametrize("kind,scale", [("softmax", 1e-312), ("softmax", 1e-150),
                                        ("softmax", 1e150), ("usa", 1e-150), ("usa", 1e150)])
def test_spectral_certification_at_any_mass_scale(kind, scale):
    """The certification's error bound η = err·Σw is formed for unit mass.  Before, a total
    mass of 1e-312 made η underflow to exactly 0, every far target (S_1 = 0) passed the test
    η ≤ (tol/8)·S_1, and the mean came back inf/NaN or 288× off.  Now, at any scale of the
    weights, every returned mean is finite and within tol of the reference."""
    rng = np.random.default_rng(17)
    y = unit(MU + 0.05 * rng.normal(size=(1500, 3)))
    x = np.vstack([y[:200], unit(-MU + 0.6 * rng.normal(size=(200, 3)))])  # near and far
    w = np.full(1500, scale / 1500)
    for beta in (200.0, 3000.0):
        att = Attention(np.eye(3), np.eye(3), np.eye(3), beta, kind=kind)
        m, stats = att.mean_and_stats(x, y, w, method="spectral")
        stats = dict(stats)
        ref = att.mean(x, y, w, method="reference")
        assert np.all(np.isfinite(m)), (beta, stats)
        assert stats["spectral"] >= 150 and stats["exact"] >= 150, stats  # both paths taken
        nr = np.linalg.norm(ref, axis=1)
        dm = np.linalg.norm(m - ref, axis=1)
        big = nr >= M_TINY * nr.max()
        assert np.count_nonzero(big) >= 200 and np.all(dm[big] <= TOL * nr[big]), beta
        assert np.all(dm <= TOL * nr.max()), beta


def test_non_unit_targets_are_summed_exactly():
    rng = np.random.default_rng(2)
    y = cloud("diffuse", 1500, rng)
    w = np.full(1500, 1 / 1500)
    x = 1.01 * unit(rng.normal(size=(50, 3)))
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)
    m, stats = att.mean_and_stats(x, y, w, method="spectral")
    assert stats["exact"] == 50
    assert errors(m, att.mean(x, y, w, method="reference"), np.ones(50))[1] <= TOL


# ---- choice of method and errors ----------------------------------------------------------------
def test_auto_choice(monkeypatch):
    """auto's choice between spectral and the numpy direct sums (the compiled sums disabled, as
    where numba is not importable; with them the direct choice is "compiled")."""
    from spherepde.dynamics.attention import compiled

    monkeypatch.setattr(compiled, "available", lambda: False)
    rng = np.random.default_rng(4)
    x = cloud("diffuse", 4000, rng)
    w = np.full(4000, 1 / 4000)
    eye = np.eye(3)
    for beta in (1.0, 10.0):  # moderate degree: far cheaper than the 1.6e7 direct pairs
        att = Attention(eye, 2.0 * rotation(rng), eye, beta)
        _, stats = att.mean_and_stats(x, x, w)
        assert stats["method"] == "spectral"
    att = Attention(eye, eye, eye, 10.0)
    _, stats = att.mean_and_stats(x, x, w, method="direct")
    assert stats["method"] == "reference"  # "direct" never picks spectral
    att = Attention(eye, eye, eye, 5000.0)  # degree ≈ 530: culled is cheaper
    _, stats = att.mean_and_stats(x, x, w)
    assert stats["method"] == "culled"
    att = Attention(eye, np.diag([0.5, 1.0, 1.0]), eye, 10.0)  # not ∝ orthogonal
    _, stats = att.mean_and_stats(x, x, w)
    assert stats["method"] != "spectral"
    att = Attention(eye, eye, eye, 10.0)
    _, stats = att.mean_and_stats(x[:100], x[:100], w[:100])  # 10⁴ pairs: direct
    assert stats["method"] == "reference"
    _, stats = att.mean_and_stats(x, 1.001 * x, w)  # sources off the sphere
    assert stats["method"] != "spectral"


def test_spectral_refused_where_it_does_not_apply(monkeypatch):
    """(B not ∝ orthogonal needs the compiled per-target sums: refused without them.)"""
    from spherepde.dynamics.attention import compiled

    monkeypatch.setattr(compiled, "available", lambda: False)
    rng = np.random.default_rng(6)
    x = cloud("diffuse", 50, rng)
    w = np.ones(50)
    eye = np.eye(3)
    cases = [(Attention(eye, np.diag([0.5, 1, 1]), eye, 3.0), x, "orthogonal"),
             (Attention(eye, eye, eye, 3.0), 1.01 * x, "unit"),
             (Attention(np.eye(2), np.eye(2), np.eye(2), 3.0), x[:, :2] / np.linalg.norm(
                 x[:, :2], axis=1, keepdims=True), "d = 2")]
    for att, y, msg in cases:
        with pytest.raises(ValueError, match=msg):
            att.mean(y, y, w, method="spectral")
    with pytest.raises(ValueError, match="method must be one of"):
        Attention(eye, eye, eye, 3.0).mean(x, x, w, method="fmm")
    inf = Attention(eye, eye, eye, math.inf)  # β = ∞ ignores the measure, any method
    np.testing.assert_allclose(inf.mean(x, x, w, method="spectral"), x, atol=1e-15)


def test_particle_ode_step_uses_spectral_and_matches_reference():
    rng = np.random.default_rng(8)
    n = 2500
    x = cloud("concentrated", n, rng)
    att = Attention(np.eye(3), np.eye(3), np.diag([1.0, 0.8, 0.2]), 10.0)
    ode = ParticleODE(att, attention_method="spectral")  # (auto takes "compiled" here)
    x1 = ode.step(x, 0.0, 0.1)
    assert ode.last_stats["method"] == "spectral"
    att_ref = Attention(np.eye(3), np.eye(3), np.diag([1.0, 0.8, 0.2]), 10.0)
    v = att_ref.velocity(x, x, np.full(n, 1 / n), method="reference")
    # one RK4 step against the same step with reference velocities: agree to ~tol·|v|·dt
    ref_step = _rk4_reference(att_ref, x, 0.1)
    assert np.max(np.linalg.norm(x1 - ref_step, axis=1)) <= 10 * TOL * np.abs(v).max()


def _rk4_reference(att, x, h):
    from spherepde.solvers.lagrangian import retract

    w = np.full(x.shape[0], 1 / x.shape[0])

    def f(p):
        p = retract(p)
        return att.velocity(p, p, w, method="reference")

    k1 = f(x)
    k2 = f(x + 0.5 * h * k1)
    k3 = f(x + 0.5 * h * k2)
    k4 = f(x + h * k3)
    return retract(x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
