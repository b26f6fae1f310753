"""NoiseField: the truncated KL expansion reproduces the truncated kernel exactly; layout."""
import math

import numpy as np
import pytest

from spherepde.noise.field import NoiseField
from spherepde.noise.kernel import NoiseKernel, gegenbauer


def _points(d, n, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _truncated_kernel(kernel, nmax, t):
    """Σ_{n ≤ nmax} C_n N_n P_n(t) / ω (addition theorem)."""
    c = kernel.kl_coefficients(nmax)
    n_n = np.array([kernel.multiplicity(n) for n in range(nmax + 1)])
    return np.tensordot(c * n_n, gegenbauer(nmax, kernel.d, t), axes=1) / kernel.surface_area


@pytest.mark.parametrize("d, act, su, sw, nmax", [(3, "relu", 0.3, 0.1, 12), (3, "tanh", 0.5, 0.0, 9),
                                                  (2, "relu", 0.0, 0.2, 20), (2, "silu", 0.4, 0.0, 7)])
def test_basis_reproduces_truncated_kernel(d, act, su, sw, nmax):
    # feed one-hot coefficients: Σ_k (√C Y_k)(x)(√C Y_k)(y) must be the truncated κ exactly
    k = NoiseKernel(act, d=d, sigma_u=su, sigma_w=sw)
    f = NoiseField(k, nmax=nmax)
    x = _points(d, 7)
    eye = np.zeros((f.n_coefficients, f.n_coefficients, d))
    eye[np.arange(f.n_coefficients), np.arange(f.n_coefficients), 0] = 1.0
    phi = f.values(eye, x)[..., 0]  # (ncoef, P): √C_k Y_k(x_p)
    cov = phi.T @ phi
    want = _truncated_kernel(k, nmax, np.clip(x @ x.T, -1, 1))
    np.testing.assert_allclose(cov, want, rtol=0, atol=1e-12 * k.kappa1)
    assert f.variance == pytest.approx(k.kappa1 * f.captured_variance, rel=1e-12)
    # the other components are zero: components are independent copies
    assert np.all(f.values(eye, x)[..., 1:] == 0.0)


def test_higher_truncation_keeps_the_low_modes():
    k = NoiseKernel("relu", d=3, sigma_u=0.2, sigma_w=0.1)
    lo, hi = NoiseField(k, nmax=4), NoiseField(k, nmax=9)
    xi = np.random.default_rng(1).standard_normal(hi.shape)
    x = _points(3, 5)
    low_part = xi.copy()
    low_part[lo.n_coefficients:] = 0.0
    np.testing.assert_allclose(hi.values(low_part, x), lo.values(xi[: lo.n_coefficients], x), atol=1e-13)


def test_variance_fraction_and_tangent_values():
    k = NoiseKernel("relu", d=3, sigma_u=0.1, sigma_w=0.1)
    f = NoiseField(k, variance_fraction=0.999)
    assert f.captured_variance >= 0.999
    assert NoiseField(k, nmax=f.nmax - 1).captured_variance < 0.999
    x = _points(3, 9)
    v = f.tangent_values(f.sample(np.random.default_rng(0)), x)
    assert np.max(np.abs(np.sum(v * x, axis=-1))) < 1e-13


def test_bad_input():
    with pytest.raises(ValueError, match="d = 2"):
        NoiseField(NoiseKernel("relu", d=4), nmax=3)
    k = NoiseKernel("relu", d=3)
    with pytest.raises(ValueError, match="not both"):
        NoiseField(k, nmax=3, variance_fraction=0.9)
    with pytest.raises(ValueError, match="fraction"):
        NoiseField(k, variance_fraction=1.5)
    with pytest.raises(ValueError, match="nmax"):
        NoiseField(k, nmax=-1)
    f = NoiseField(k, nmax=2)
    with pytest.raises(ValueError, match="coefficients"):
        f.values(np.zeros((3, 3)), _points(3, 2))


def test_repeated_points_use_a_basis_table_with_the_same_values():
    # the second call with the same points builds a table of basis values; results must agree
    # with the direct evaluation (a fresh field) to round-off
    k = NoiseKernel("relu", d=3, sigma_u=0.4, sigma_w=0.2)
    x = _points(3, 50, seed=3)
    xi = np.random.default_rng(2).standard_normal(NoiseField(k, nmax=6).shape)
    cached = NoiseField(k, nmax=6)
    first = cached.values(xi, x)
    second = cached.values(xi, x)
    third = cached.values(2 * xi, x)
    np.testing.assert_allclose(second, first, rtol=0, atol=1e-14 * np.abs(first).max())
    np.testing.assert_allclose(third, 2 * first, rtol=0, atol=1e-14 * np.abs(first).max())
    other = _points(3, 50, seed=4)  # new points: not the table of the old ones
    np.testing.assert_allclose(cached.values(xi, other), NoiseField(k, nmax=6).values(xi, other),
                               rtol=0, atol=1e-14 * np.abs(first).max())
