"""Compiled attention sums (spherepde.dynamics.attention.compiled, Attention.mean "compiled").

Every check compares against the float64 log-domain reference (``method="reference"``) on the
same measure.  The error model (module docstring): each exponential within 1.5e-14 relative,
so |m − m_ref| ≤ 3e-14·Σ_j e^{ℓ_j−M}|y_j|/den (≤ 3e-14 for unit sources) without culling and
2·tol more with it.  The checks below allow ABS_ERR = 1e-13 + 2·tol (absolute, |y| = 1) and, for
the density-weighted relative error, tol.
"""
from __future__ import annotations

import numpy as np
import pytest

from spherepde.dynamics.attention import compiled as C
from spherepde.dynamics.attention import Attention
from conftest import unit

pytestmark = pytest.mark.skipif(not C.available(), reason="numba not importable")

TOL = 1e-8
MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])


def matrices(name, rng):
    if name == "identity":
        return np.eye(3)
    if name == "diag-0.1":
        return np.diag([0.1, 1.0, 1.0])
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    if name == "spd-random":
        return q @ np.diag([1.5, 0.8, 0.3]) @ q.T
    return q @ np.diag([1.2, 0.7, 0.4]) @ np.linalg.qr(rng.normal(size=(3, 3)))[0]


def cloud(name, n, rng):
    if name == "diffuse":
        return unit(rng.normal(size=(n, 3)))
    k = int(0.7 * n)
    return unit(np.vstack([MU + 0.05 * rng.normal(size=(k, 3)),
                           unit([-0.5, 0.2, -0.8]) + 0.15 * rng.normal(size=(n - k, 3))]))


@pytest.mark.parametrize("path", C.PATHS)
def test_exponential_within_its_error_model(path):
    """num = e^t exactly when the sources are y = (0, 1) with logits (0, t): every t ∈ [−64, 0]
    comes out within 1.5e-14 of e^t (long double; legacy: 64·2 ulps); below, legacy gives
    e^{−64} and cody-waite e^t (0 below −708)."""
    t = np.r_[np.linspace(-64.0, 0.0, 20001), -1e-300, -0.5, -64.0]
    num, den, mx, _ = C.sums(t[:, None], np.array([[0.0], [1.0]]), np.zeros(2), 1.0, path=path)
    assert np.all(mx == 0.0) and np.all(np.isfinite(num))
    truth = np.exp(t.astype(np.longdouble))
    rel = np.abs((num[:, 0] - truth) / truth).astype(float)
    assert rel.max() <= 1.5e-14, rel.max()
    low, _, _, _ = C.sums(np.array([[-100.0], [-1e4]]), np.array([[0.0], [1.0]]), np.zeros(2), 1.0,
                          path=path)
    if path == "legacy":
        assert np.allclose(low[:, 0], np.exp(-64.0), rtol=1.5e-14, atol=0)
    else:
        assert np.allclose(low[0, 0], np.exp(-100.0), rtol=1e-15, atol=0) and low[1, 0] == 0.0


@pytest.mark.parametrize("bname", ["identity", "diag-0.1", "spd-random", "general-random"])
@pytest.mark.parametrize("beta", [0.1, 1.0, 30.0, 1000.0, 1e4])
@pytest.mark.parametrize("name", ["diffuse", "concentrated"])
def test_matches_reference(bname, beta, name):
    rng = np.random.default_rng(int(beta * 10) % 1000 + len(bname))
    y = cloud(name, 3000, rng)
    w = rng.uniform(0.5, 1.5, y.shape[0])
    # targets at the points, random, and far from the mass
    x = np.vstack([y[::6], unit(rng.normal(size=(300, 3))), unit(-MU + 0.3 * rng.normal(size=(200, 3)))])
    att = Attention(np.eye(3), matrices(bname, rng), np.eye(3), beta)
    m, stats = att.mean_and_stats(x, y, w, method="compiled", tol=TOL)
    stats = dict(stats)
    assert stats["method"] == "compiled" and stats["pairs"] <= x.shape[0] * 3000
    ref = att.mean(x, y, w, method="reference")
    dm = np.linalg.norm(m - ref, axis=1)
    assert np.all(np.isfinite(m))
    assert np.all(dm <= 1e-13 + 2 * TOL), dm.max()
    assert np.sum(dm) <= TOL * np.sum(np.linalg.norm(ref, axis=1))
    if beta >= 1000.0 and name == "diffuse":  # the per-target culling skips most pairs
        assert stats["pairs"] < 0.35 * x.shape[0] * 3000, stats


def test_culling_at_tight_tolerance_is_exact_to_round_off():
    """tol = 1e-12: the culled sums agree with the reference to the model's 3e-14 + 2·tol."""
    rng = np.random.default_rng(5)
    y = cloud("concentrated", 4000, rng)
    w = np.full(4000, 1 / 4000)
    x = unit(rng.normal(size=(500, 3)))
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.eye(3), 300.0)
    m, stats = att.mean_and_stats(x, y, w, method="compiled", tol=1e-12)
    assert stats["pairs"] < 500 * 4000
    ref = att.mean(x, y, w, method="reference")
    assert np.max(np.linalg.norm(m - ref, axis=1)) <= 1e-13 + 2e-12


@pytest.mark.parametrize("d", [2, 5])
def test_any_dimension(d):
    rng = np.random.default_rng(d)
    y = unit(rng.normal(size=(1500, d)))
    w = rng.uniform(0.5, 1.5, 1500)
    x = unit(rng.normal(size=(200, d)))
    K = rng.normal(size=(d, d))
    for kind, beta in (("softmax", 3.0), ("softmax", 300.0), ("usa", 20.0)):
        att = Attention(np.eye(d), K, np.eye(d), beta, kind=kind)
        m = att.mean(x, y, w, method="compiled")
        ref = att.mean(x, y, w, method="reference")
        scale = np.linalg.norm(ref, axis=1).max()  # usa means carry e^{β(c−1)}: scale-free
        assert np.max(np.linalg.norm(m - ref, axis=1)) <= 1e-13 * scale, (kind, beta)


def test_usa_on_the_sphere():
    rng = np.random.default_rng(9)
    y = cloud("concentrated", 3000, rng)
    w = np.full(3000, 1 / 3000)
    x = np.vstack([y[::10], unit(rng.normal(size=(300, 3)))])
    att = Attention(np.eye(3), matrices("spd-random", rng), np.eye(3), 200.0, kind="usa")
    m = att.mean(x, y, w, method="compiled", tol=TOL)
    ref = att.mean(x, y, w, method="reference")
    scale = np.linalg.norm(ref, axis=1).max()
    assert scale > 0
    assert np.max(np.linalg.norm(m - ref, axis=1)) <= (1e-13 + 2 * TOL) * scale


def test_same_bits_on_any_number_of_threads():
    """Each target row is one task, so the thread count does not change a result's bits."""
    import numba

    rng = np.random.default_rng(2)
    y = cloud("concentrated", 3000, rng)
    w = np.full(3000, 1 / 3000)
    x = unit(rng.normal(size=(400, 3)))
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.eye(3), 100.0)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = att.mean(x, y, w, method="compiled")
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one, att.mean(x, y, w, method="compiled"))


def test_direct_choice_takes_compiled_within_its_tolerances():
    rng = np.random.default_rng(4)
    x = cloud("diffuse", 3000, rng)
    w = np.full(3000, 1 / 3000)
    att = Attention(np.eye(3), np.diag([0.5, 1.0, 1.0]), np.eye(3), 10.0)
    _, stats = att.mean_and_stats(x, x, w)
    assert stats["method"] == "compiled"
    _, stats = att.mean_and_stats(x, x, w, tol=1e-13)  # tighter than the compiled sums' own error
    assert stats["method"] in ("reference", "culled")


@pytest.mark.parametrize("d", [3, 4])
def test_small_problems_on_one_thread_give_the_same_bits(d, monkeypatch):
    """Below SERIAL_PAIRS the all-pairs kernels run on one numba thread (a parallel launch
    costs more than 16 tokens' sums); every row is summed the same way, so bits agree."""
    from spherepde.dynamics.attention import compiled

    rng = np.random.default_rng(1)
    y = rng.standard_normal((16, d))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    z, logw = rng.standard_normal((16, d)), np.full(16, -np.log(16))
    serial = compiled.sums(z, y, logw, 2.0)
    monkeypatch.setattr(compiled, "SERIAL_PAIRS", 0)  # force the parallel region
    parallel = compiled.sums(z, y, logw, 2.0)
    for a, b in zip(serial[:3], parallel[:3]):
        np.testing.assert_array_equal(a, b)
