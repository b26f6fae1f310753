"""The MLP noise kernel κ (docs/equations.md, Paper 2): closed forms, quadrature, rates, KL spectrum.

Statistical test: the Monte Carlo check uses a fixed seed; every comparison is at 4.5 estimated
standard errors (two-sided normal tail 6.8e-6), 200 comparisons in all, so a correct kernel
would fail with probability < 0.14 % for a random seed. Its standard errors are ≤ 2 % of κ(1),
so a 5 % error in κ shows up at about 5 standard errors.
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest

from spherepde.noise.activations import ACTIVATIONS
from spherepde.noise.kernel import NoiseKernel, gegenbauer, kernel_table

SMOOTH = ("tanh", "silu", "sigmoid", "gelu")
ALL = ("relu",) + SMOOTH
T = np.linspace(-1.0, 1.0, 41)
# ReLU with its closed form switched off: the kernel then takes the Gauss–Hermite path
RELU_QUAD = dataclasses.replace(ACTIVATIONS["relu"], name="relu-quadrature")


# ---------------------------------------------------------------- κ and κ′
@pytest.mark.parametrize("d, su, sw", [(2, 0.0, 0.0), (3, 0.1, 0.1), (5, 0.0, 0.2), (64, 0.1, 0.1)])
def test_relu_closed_form_matches_quadrature(d, su, sw):
    exact = NoiseKernel("relu", d, su, sw)
    # at t = 1 the quadrature is 1-D and exact for ReLU (even polynomial / symmetric weights)
    assert NoiseKernel(RELU_QUAD, d, su, sw).kappa1 == pytest.approx(exact.kappa1, rel=1e-13)
    assert NoiseKernel(RELU_QUAD, d, su, sw).kappa_prime1 == pytest.approx(exact.kappa_prime1, rel=1e-13)
    # elsewhere ReLU's kink makes tensor Gauss–Hermite converge only algebraically: O(1/n) for κ
    # and O(1/√n) for κ′ = P(a > 0, b > 0)/d (a step function). Measured at 96 nodes: 2.7e-3 κ(1)
    # and 4.4e-2 κ′(1); the tolerances are 4e-3 and 6e-2, and doubling the nodes must shrink
    # the errors at those rates.
    err, err_prime = [], []
    for nodes in (96, 192):
        quad = NoiseKernel(RELU_QUAD, d, su, sw, quad_nodes=nodes)
        err.append(np.abs(quad.kappa(T) - exact.kappa(T)).max() / exact.kappa1)
        err_prime.append(np.abs(quad.kappa_prime(T) - exact.kappa_prime(T)).max() / exact.kappa_prime1)
    assert err[0] < 4e-3 and err_prime[0] < 6e-2
    assert err[1] < 0.55 * err[0] and err_prime[1] < 0.75 * err_prime[0]


@pytest.mark.parametrize("name", SMOOTH)
@pytest.mark.parametrize("d, su, sw", [(2, 0.1, 0.1), (3, 0.0, 0.0), (5, 0.3, 0.1)])
def test_smooth_quadrature_converged(name, d, su, sw):
    a = NoiseKernel(name, d, su, sw)
    b = NoiseKernel(name, d, su, sw, quad_nodes=2 * a.quad_nodes)
    assert np.abs(a.kappa(T) - b.kappa(T)).max() < 1e-13
    assert np.abs(a.kappa_prime(T) - b.kappa_prime(T)).max() < 1e-13
    # the 2-D rule at t = 1 (ρ = 1, done as 1-D) agrees with κ(1), κ′(1) of the 1-D formulas
    assert a.kappa(1.0) == pytest.approx(a.kappa1, rel=1e-14)
    assert a.kappa_prime(1.0) == pytest.approx(a.kappa_prime1, rel=1e-14)


@pytest.mark.parametrize("name", ALL)
def test_kappa_prime_is_the_derivative(name):
    k = NoiseKernel(name, 4, 0.2, 0.1)
    t, h = np.array([-0.9, -0.3, 0.2, 0.7]), 1e-5
    fd = (k.kappa(t + h) - k.kappa(t - h)) / (2 * h)      # error O(h²) + O(ε/h) ≈ 1e-10
    assert np.abs(fd - k.kappa_prime(t)).max() < 1e-8 * k.kappa_prime1
    # κ′(1) from one side, second order: (3κ(1) − 4κ(1−h) + κ(1−2h))/(2h); ReLU's κ′ has a
    # √(1−t) term there, so its one-sided difference is only O(√h) accurate
    h = 1e-4
    fd1 = (3 * k.kappa1 - 4 * k.kappa(1 - h) + k.kappa(1 - 2 * h)) / (2 * h)
    tol = 1e-2 if name == "relu" else 1e-6
    assert fd1 == pytest.approx(k.kappa_prime1, rel=tol)


def test_relu_kappa_values():
    k = NoiseKernel("relu", 5, 0.1, 0.2)
    s2 = 1 / 5 + 0.01
    assert k.kappa1 == pytest.approx(s2 / 2 + 0.04, rel=1e-15)
    assert k.kappa_prime1 == pytest.approx(0.1, rel=1e-15)
    # t = −1 with σ_U = 0: a and b are opposite, relu(a) relu(−a) = 0
    assert float(NoiseKernel("relu", 3).kappa(-1.0)) == pytest.approx(0.0, abs=1e-17)
    assert float(NoiseKernel("relu", 3).kappa_prime(-1.0)) == 0.0


@pytest.mark.parametrize("name", ALL)
def test_gap_has_no_cancellation(name):
    k = NoiseKernel(name, 4, 0.1, 0.1)
    eps = np.geomspace(1e-14, 2.0, 40)
    gap = k._gap_eps(eps)
    assert np.all(gap >= 0)
    assert np.abs(gap - (k.kappa1 - k._kappa_eps(eps))).max() < 2e-15
    # κ(1) − κ(1 − ε) = κ′(1) ε + O(ε^{3/2}) (ReLU) or O(ε²): relative 1e-6 at ε = 1e-12
    assert gap[eps < 1e-11] / eps[eps < 1e-11] == pytest.approx(k.kappa_prime1, rel=1e-6)


# ---------------------------------------------------------------- Monte Carlo over MLPs
def _mlp_fields(rng, act, d, m, su, sw, x, draws):
    """G(x_p) for `draws` independent MLPs: array (draws, d, P)."""
    U = rng.standard_normal((draws, m, d))
    bU = su * rng.standard_normal((draws, m, 1))
    W = rng.standard_normal((draws, d, m))
    bW = sw * rng.standard_normal((draws, d, 1))
    hidden = act.f(U @ x.T / math.sqrt(d) + bU)          # (draws, m, P)
    return W @ hidden / math.sqrt(m) + bW


@pytest.mark.parametrize("name, d, su, sw", [("relu", 3, 0.2, 0.3), ("tanh", 4, 0.0, 0.0),
                                             ("silu", 4, 0.3, 0.1), ("sigmoid", 3, 0.0, 0.2)])
def test_covariance_matches_monte_carlo(name, d, su, sw):
    rng = np.random.default_rng(20260521)
    k = NoiseKernel(name, d, su, sw)
    x = rng.standard_normal((3, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x = np.vstack([x, -x[:1]])                         # an antipodal pair too: t = −1
    G = _mlp_fields(rng, k.activation, d, m=16, su=su, sw=sw, x=x, draws=20_000)
    pairs = [(0, 0), (0, 1), (1, 2), (0, 3)]           # t = 1, two random t, t = −1
    for p, q in pairs:
        prod = G[:, :, p, None] * G[:, None, :, q]     # (draws, d, d): G_α(x) G_β(y)
        mean, se = prod.mean(axis=0), prod.std(axis=0, ddof=1) / math.sqrt(prod.shape[0])
        expect = float(k.kappa(x[p] @ x[q])) * np.eye(d)
        assert np.all(np.abs(mean - expect) <= 4.5 * se), (p, q, mean, expect, se)
        assert se.max() < 0.02 * k.kappa1              # the test can tell a wrong κ apart


# ---------------------------------------------------------------- rates
@pytest.mark.parametrize("d", [2, 3, 4, 5, 16, 64, 128])
@pytest.mark.parametrize("su, sw", [(0.0, 0.0), (0.1, 0.1), (0.3, 0.0), (0.0, 0.2)])
def test_prop_1_5_relu(d, su, sw):
    k = NoiseKernel("relu", d, su, sw)
    b = su ** 2 + 2 * sw ** 2
    assert k.lambda_1 == pytest.approx(-1 / (2 * d) - b * (d - 1) / 4, rel=1e-13, abs=1e-16)
    assert k.lambda_bar == pytest.approx(1 / d - b * (d - 3) / 2, rel=1e-13, abs=1e-16)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("beta", [0.5, 1.0, 5.0])
def test_F_matches_its_definition_and_limit(name, beta):
    k = NoiseKernel(name, 5, 0.1, 0.1)
    u = np.array([-1.0, -0.5, 0.0, 0.3, 0.9, 0.99])
    ku, k1, d = k.kappa(u), k.kappa1, k.d
    G = ku * (d - 2 + u ** 2 - beta * u * (1 - u ** 2)) + k1 * (beta * (1 - u ** 2) - (d - 1) * u)
    F = beta * np.exp(beta * u) * G / (np.exp(beta) - np.exp(beta * u))
    assert k.F(u, beta) == pytest.approx(F, rel=1e-10, abs=1e-13)
    # lim_{u→1} F = −λ̄; F(1 − ε) + λ̄ = O(√ε) for ReLU (κ′ has a √(1−t) term), O(ε) otherwise
    assert float(k.F(1.0, beta)) == pytest.approx(-k.lambda_bar, rel=1e-14)
    eps = np.array([1e-6, 1e-9, 1e-12])
    dev = np.abs(k.F(1 - eps, beta) + k.lambda_bar)
    assert np.all(dev <= 10 * np.sqrt(eps) * (abs(k.lambda_bar) + k1))
    assert dev[2] < dev[0]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("d, s", [(3, 0.0), (64, 0.1)])
def test_lambda_bar_prime_is_minus_inf_F(name, d, s):
    k = NoiseKernel(name, d, s, s)
    u = np.concatenate([np.random.default_rng(7).uniform(-1, 1, 400), 1 - np.geomspace(1e-8, 0.5, 200)])
    for beta in (1.0, 20.0):
        lbp = k.lambda_bar_prime(beta)
        assert lbp >= k.lambda_bar                          # F(1) = −λ̄ is a candidate
        assert -lbp <= k.F(u, beta).min() + 1e-12           # no sampled u beats the minimiser


def test_large_beta_neither_overflows_nor_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("relu", "tanh"):
            k = NoiseKernel(name, 5, 0.1, 0.1)
            for beta in (1e2, 1e3, 1e4):
                lbp = k.lambda_bar_prime(beta)
                assert math.isfinite(lbp) and lbp >= k.lambda_bar
                assert np.all(np.isfinite(k.F(np.linspace(-1, 1, 101), beta)))


# ---------------------------------------------------------------- spherical harmonics
def test_multiplicity_and_area():
    k2, k3, k4, k5 = (NoiseKernel("relu", d) for d in (2, 3, 4, 5))
    assert [k2.multiplicity(n) for n in range(5)] == [1, 2, 2, 2, 2]
    assert [k3.multiplicity(n) for n in range(5)] == [2 * n + 1 for n in range(5)]
    assert [k4.multiplicity(n) for n in range(5)] == [(n + 1) ** 2 for n in range(5)]
    assert [k5.multiplicity(n) for n in range(5)] == [(2 * n + 3) * (n + 1) * (n + 2) // 6 for n in range(5)]
    # degree ≤ N harmonics span the polynomials of degree ≤ N restricted to S^{d−1}
    for d in (6, 9):
        k = NoiseKernel("relu", d)
        total = sum(k.multiplicity(n) for n in range(8))
        assert total == math.comb(7 + d - 1, d - 1) + math.comb(6 + d - 1, d - 1)
    areas = [k.surface_area for k in (k2, k3, k4, k5)]
    assert areas == pytest.approx([2 * np.pi, 4 * np.pi, 2 * np.pi ** 2, 8 * np.pi ** 2 / 3], rel=1e-14)


@pytest.mark.parametrize("d", [2, 3, 4, 5, 7])
def test_gegenbauer_normalisation_and_orthogonality(d):
    from scipy.special import eval_gegenbauer

    t = np.linspace(-1, 1, 7)
    p = gegenbauer(12, d, t)
    assert p[:, -1] == pytest.approx(np.ones(13), rel=1e-14)
    lam = (d - 2) / 2
    for n in (2, 5, 12):
        if d == 2:
            ref = np.cos(n * np.arccos(t))
        else:
            ref = eval_gegenbauer(n, lam, t) / eval_gegenbauer(n, lam, 1.0)
        assert p[n] == pytest.approx(ref, abs=1e-13)
    # ∫ P_n P_m (1 − t²)^{(d−3)/2} dt = δ_nm ω_d/(ω_{d−1} N_n): the constant in the Funk–Hecke formula
    k = NoiseKernel("relu", d)
    x, w = np.polynomial.legendre.leggauss(40)          # in θ: the weight becomes sin^{d−2}θ
    theta, w = 0.5 * np.pi * (x + 1), 0.5 * np.pi * w * np.sin(0.5 * np.pi * (x + 1)) ** (d - 2)
    p = gegenbauer(10, d, np.cos(theta))
    gram = (p * w) @ p.T
    omega_dm1 = NoiseKernel("relu", d - 1).surface_area if d > 2 else 2.0
    expect = np.diag([k.surface_area / (omega_dm1 * k.multiplicity(n)) for n in range(11)])
    assert gram == pytest.approx(expect, abs=1e-13)


@pytest.mark.parametrize("d", [2, 3, 4, 5])
@pytest.mark.parametrize("name, s", [("relu", 0.0), ("relu", 0.1), ("tanh", 0.1), ("gelu", 0.0)])
def test_kl_addition_theorem(d, name, s):
    k = NoiseKernel(name, d, s, s)
    nmax = 250
    C = k.kl_coefficients(nmax)
    assert C.shape == (nmax + 1,) and np.all(C >= 0)
    N = np.array([k.multiplicity(n) for n in range(nmax + 1)], dtype=float)
    t = np.concatenate([np.random.default_rng(3).uniform(-1, 1, 25), [-1.0, 1.0]])
    series = (C * N) @ gegenbauer(nmax, d, t) / k.surface_area
    # |P_n| ≤ 1, so the truncated tail is at most (1 − captured variance) κ(1)
    tail = (1 - k.captured_variance(nmax)) * k.kappa1
    assert np.abs(series - k.kappa(t)).max() <= tail + 1e-13


def test_kl_explicit_formulas_on_circle_and_s2():
    from scipy.integrate import quad
    from scipy.special import eval_legendre

    k2 = NoiseKernel("tanh", 2, 0.1, 0.1)
    phi = np.linspace(0, 2 * np.pi, 400, endpoint=False)          # periodic: spectrally accurate
    c2 = [np.mean(k2.kappa(np.cos(phi)) * np.cos(n * phi)) * 2 * np.pi for n in range(6)]
    assert k2.kl_coefficients(5) == pytest.approx(c2, rel=1e-12, abs=1e-15)
    k3 = NoiseKernel("silu", 3, 0.2, 0.0)
    c3 = [2 * np.pi * quad(lambda t: float(k3.kappa(t)) * eval_legendre(n, t), -1, 1, epsabs=1e-14)[0]
          for n in range(4)]
    assert k3.kl_coefficients(3) == pytest.approx(c3, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("su", [0.0, 0.1])
def test_relu_kl_decay_is_clean_power_law(su):
    k = NoiseKernel("relu", 3, su, 0.1)
    C = k.kl_coefficients(250)
    # converged: doubling the θ nodes moves nothing beyond 1e-13 C_0
    assert np.abs(k.kl_coefficients(250, nodes=1400) - C).max() < 1e-13 * C[0]
    # κ ∼ (1 − t)^{3/2} at t = 1 ⇒ C_n ∼ n^{−5} on S²; with σ_U = 0 the odd n ≥ 3 vanish
    # (relu = (z + |z|)/2 and E|a||b| is even in t), and they are at round-off, clipped to 0
    n = np.arange(20, 201, 2 if su == 0 else 1)
    A = np.vstack([np.ones(n.size), np.log(n)]).T
    fit, *_ = np.linalg.lstsq(A, np.log(C[n]), rcond=None)
    assert -5.1 < fit[1] < -4.9
    assert np.abs(np.log(C[n]) - A @ fit).max() < 0.05
    if su == 0:
        raw, bound = k._kl(250, None)                  # before clipping: ω_{d−1} × these are the C_n
        raw, bound = 2 * np.pi * raw, 2 * np.pi * bound
        assert np.abs(raw[3::2]).max() < 1e-14 * k.kappa1 and np.all(np.abs(raw[3::2]) <= bound[3::2])
        assert np.all(C[3::2] == 0) and np.all(C[::2] > 0)
    assert np.all(C >= 0)


def test_captured_variance_increases_to_one():
    k = NoiseKernel("relu", 3, 0.1, 0.1)
    cv = np.array([k.captured_variance(n) for n in (0, 1, 2, 5, 10, 50, 200)])
    assert np.all(np.diff(cv) > 0)
    assert 1 - 1e-7 < cv[-1] <= 1 + 1e-13
    # C_0 alone: κ̄ = (1/ω) ∫ κ dσ = mean of κ over the sphere, over κ(1)
    assert cv[0] == pytest.approx(0.5 * float(np.sum(k.kappa(np.polynomial.legendre.leggauss(200)[0])
                                                     * np.polynomial.legendre.leggauss(200)[1])) / k.kappa1,
                                  rel=1e-6)
    for fraction in (0.5, 0.9, 0.99, 0.9999):
        n = k.truncation_degree(fraction)
        assert k.captured_variance(n) >= fraction and (n == 0 or k.captured_variance(n - 1) < fraction)


def test_high_dimension_refuses_unresolved_degrees():
    k = NoiseKernel("relu", 64, 0.1, 0.1)
    assert 0.99 < k.captured_variance(10) < 1
    with pytest.raises(ValueError, match="round-off"):
        k.captured_variance(200)
    assert k.captured_variance(k.truncation_degree(0.999)) >= 0.999
    with pytest.raises(ValueError, match="double precision"):
        k.truncation_degree(0.9999)


# ---------------------------------------------------------------- oddness, summary, table
def test_odd_flags():
    assert NoiseKernel("tanh", 4).odd
    assert not NoiseKernel("tanh", 4, sigma_u=0.1).odd
    assert not NoiseKernel("tanh", 4, sigma_w=0.1).odd
    assert not any(NoiseKernel(name, 4).odd for name in ("relu", "silu", "sigmoid", "gelu"))
    # an odd field has κ odd: κ(−t) = −κ(t)
    k = NoiseKernel("tanh", 4)
    assert k.kappa(-T) == pytest.approx(-k.kappa(T), abs=1e-15)     # round-off of the 2-D sums


def test_callable_activation_uses_quadrature():
    k = NoiseKernel(lambda z: np.tanh(z), 4, 0.1, 0.0)
    ref = NoiseKernel("tanh", 4, 0.1, 0.0)
    assert k.activation.name.startswith("callable") and not k.odd
    assert np.abs(k.kappa(T) - ref.kappa(T)).max() < 1e-14
    assert np.abs(k.kappa_prime(T) - ref.kappa_prime(T)).max() < 1e-9   # central-difference σ′


def test_summary_is_plain_json():
    s = NoiseKernel("relu", 5, 0.1, 0.1).summary(beta=2.0)
    assert set(s) == {"activation", "d", "sigma_u", "sigma_w", "beta", "kappa", "kappa_prime",
                      "lambda_1", "lambda_bar", "lambda_bar_prime", "odd"}
    assert json.loads(json.dumps(s)) == s
    assert type(s["kappa"]) is float and type(s["odd"]) is bool and s["beta"] == 2.0
    assert s["lambda_bar"] == pytest.approx(1 / 5 - 0.03, rel=1e-14)


def test_kernel_table_rows():
    table = kernel_table(activations=("relu", "tanh"), dims=(4,), sigmas=(0.0, 0.1))
    lines = table.splitlines()
    assert len(lines) == 2 + 4 and lines[0].startswith("| activation")
    assert "| tanh | 4 | 0 |" in table and lines[4].endswith("| yes |")


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(activation="swish", d=3), ValueError, "activation"),
    (dict(activation=3.0, d=3), TypeError, "activation"),
    (dict(activation="relu", d=1), ValueError, "d must be"),
    (dict(activation="relu", d=2.5), ValueError, "d must be"),
    (dict(activation="relu", d=True), ValueError, "d must be"),
    (dict(activation="relu", d=3, sigma_u=-0.1), ValueError, "sigma_u must be ≥ 0"),
    (dict(activation="relu", d=3, sigma_w=float("nan")), ValueError, "sigma_w must be ≥ 0"),
    (dict(activation="relu", d=3, sigma_w="0.1"), TypeError, "sigma_w"),
    (dict(activation="relu", d=3, quad_nodes=2), ValueError, "quad_nodes"),
])
def test_bad_construction(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        NoiseKernel(**kwargs)


def test_bad_arguments():
    k = NoiseKernel("relu", 3, 0.1, 0.1)
    for fraction in (0, 1, 1.5, -0.2, float("nan")):
        with pytest.raises(ValueError, match="fraction"):
            k.truncation_degree(fraction)
    with pytest.raises(ValueError, match="nmax_limit"):
        k.truncation_degree(0.999999, nmax_limit=5)
    with pytest.raises(ValueError, match="t must lie"):
        k.kappa(1.01)
    with pytest.raises(ValueError, match="t must lie"):
        k.kappa_prime([0.0, np.nan])
    assert float(k.kappa(1 + 1e-13)) == k.kappa1                 # within the slack: clipped
    for beta in (0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="beta"):
            k.lambda_bar_prime(beta)
    with pytest.raises(ValueError, match="nmax"):
        k.kl_coefficients(-1)
    with pytest.raises(ValueError, match="n must be"):
        k.multiplicity(-1)
