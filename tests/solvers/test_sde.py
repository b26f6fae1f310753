"""ParticleSDE: the one-point law E[x·e(t)] = e^{−κ(1)(d−1)t/2} of the noise-only flow, the exact
conditional Gaussian sampler, common noise, reproducibility, bad input."""
import math

import numpy as np
import pytest

from spherepde.dynamics.attention import Attention
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.noise.kernel import NoiseKernel
from spherepde.solvers.lagrangian.particles import ParticleODE
from spherepde.solvers.lagrangian.sde import ParticleSDE, PointGaussianNoise


@pytest.mark.parametrize("d, method", [(3, "euler-maruyama"), (4, "euler-maruyama"), (3, "heun")])
def test_one_point_motion_is_brownian_motion_on_the_sphere(d, method):
    # the generator is (κ(1)/2)Δ_S, and x ↦ x·e is an eigenfunction with eigenvalue −(d−1):
    # E[X_T·e] = exp(−κ(1)(d−1)T/2).  800 single-token paths; within 4 standard errors plus
    # the weak-order-1 bias, which was measured at Δt = 0.025: EM 0.004, Heun 0.06 (Heun's
    # constant is larger here); allowances 0.02 and 0.1
    k = NoiseKernel("relu", d=d, sigma_u=0.5, sigma_w=0.5)
    T, dt, R = 0.5, 0.025, 800
    x0 = np.zeros((1, d))
    x0[0, -1] = 1.0
    z = np.array([ParticleSDE(kernel=k, seed=r, method=method).run(x0, (0, T), dt=dt)
                  .positions[-1, 0, -1] for r in range(R)])
    want = math.exp(-k.kappa1 * (d - 1) * T / 2)
    se = z.std(ddof=1) / math.sqrt(R)
    bias = 0.02 if method == "euler-maruyama" else 0.1
    assert abs(z.mean() - want) < 4 * se + bias, (z.mean(), want, se)


def test_conditional_sampler_reproduces_the_joint_covariance():
    k = NoiseKernel("tanh", d=4, sigma_u=0.3, sigma_w=0.1)
    x = np.eye(4)[:2]
    y = np.array([[0.6, 0.8, 0, 0], [0, 0, 1.0, 0]])
    s = PointGaussianNoise(k, seed=3)
    dt, n = 0.5, 4000
    w = np.empty((n, 4))
    for i in range(n):
        a = s.increment(x, dt)
        b = s.conditional(x, a, y, dt)
        w[i] = a[0, 0], a[1, 0], b[0, 0], b[1, 0]
    pts = np.concatenate([x, y])
    want = dt * k.kappa(np.clip(pts @ pts.T, -1, 1))
    cov = w.T @ w / n
    se = np.sqrt((want ** 2 + np.outer(np.diag(want), np.diag(want))) / n)  # Gaussian 4th moments
    assert np.all(np.abs(cov - want) < 5 * se)


def test_common_noise_and_reproducibility():
    k = NoiseKernel("relu", d=3, sigma_u=0.2, sigma_w=0.2)
    f = NoiseField(k, nmax=6)
    x0 = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    run = lambda seed: ParticleSDE(noise=f, path=BrownianPath(f.shape, seed=seed)).run(  # noqa: E731
        x0, (0, 1.0), dt=0.05).positions[-1]
    a, b, c = run(1), run(1), run(2)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-14)
    # one token alone moves as it does among others: the noise does not depend on the others
    alone = ParticleSDE(noise=f, path=BrownianPath(f.shape, seed=1)).run(
        x0[:1], (0, 1.0), dt=0.05).positions[-1]
    np.testing.assert_allclose(alone[0], a[0], atol=1e-14)


def test_without_noise_heun_is_a_second_order_ode_solver():
    att = Attention(np.eye(3), np.eye(3), np.diag([1.0, 0.6, 0.2]), beta=3.0)
    x0 = np.random.default_rng(0).standard_normal((20, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    ref = ParticleODE(att).run(x0, (0, 1.0), dt=0.01).positions[-1]
    err = [np.abs(ParticleSDE(att).run(x0, (0, 1.0), dt=h).positions[-1] - ref).max()
           for h in (0.1, 0.05, 0.025)]
    order = np.polyfit(np.log([0.1, 0.05, 0.025]), np.log(err), 1)[0]
    assert 1.8 < order < 2.3, (err, order)
    # attention_scale = 0 switches it off; −1 reverses it
    assert np.array_equal(ParticleSDE(att, attention_scale=0.0).run(x0, (0, 1.0), dt=0.1).positions[-1],
                          x0 / np.linalg.norm(x0, axis=1, keepdims=True))


def test_bad_input():
    k3 = NoiseKernel("relu", d=3)
    f = NoiseField(k3, nmax=3)
    att4 = Attention(np.eye(4), np.eye(4), np.eye(4), beta=1.0)
    with pytest.raises(ValueError, match="dimensions"):
        ParticleSDE(att4, kernel=k3)
    with pytest.raises(ValueError, match="together"):
        ParticleSDE(noise=f)
    with pytest.raises(ValueError, match="not both"):
        ParticleSDE(noise=f, path=BrownianPath(f.shape, seed=0), kernel=k3)
    with pytest.raises(ValueError, match="method"):
        ParticleSDE(kernel=k3, method="milstein")
    with pytest.raises(ValueError, match="dimensions"):
        ParticleSDE()
