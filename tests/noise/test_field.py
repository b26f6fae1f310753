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


# ---- ring-wise evaluation at points on latitude rings (LatitudeRings) ------------------------
from spherepde.grids import GaussGrid  # noqa: E402
from spherepde.noise import field as field_module  # noqa: E402
from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: E402

_KERNEL = NoiseKernel("relu", d=3, sigma_u=0.5, sigma_w=0.5)


def _face_points(nlat):
    return FFSLSphere(GaussGrid(nlat), lambda t, x: np.zeros_like(x)).points


def _twice(f, xi, x):
    """The second evaluation in a row at x (the one that uses the table built for x)."""
    f.values(xi, x)
    return f.values(xi, x)


def _rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("nlat", [16, 32, 64])
@pytest.mark.parametrize("nmax", [4, 16, 32])
def test_rings_at_face_points_match_the_dense_and_spectral_paths(nlat, nmax):
    x = _face_points(nlat)
    f = NoiseField(_KERNEL, nmax=nmax)
    xi = np.random.default_rng(nlat + nmax).standard_normal((2, 3) + f.shape)
    spectral = NoiseField(_KERNEL, nmax=nmax).values(xi, x)  # first call: SphericalHarmonics.evaluate
    rings = _twice(f, xi, x)
    assert isinstance(f._rings, field_module.LatitudeRings) and f._basis is None
    assert f._rings.n_rings == 2 * nlat + 1 and not f._rings.layout.direct.size  # all FFTs
    assert rings.shape == (2, 3, x.shape[0], 3)
    assert _rel(rings, spectral) <= 1e-12
    # one realisation and one leading dimension: the same numbers
    assert _rel(f.values(xi[1, 2], x), spectral[1, 2]) <= 1e-12
    assert _rel(f.values(xi[0], x), spectral[0]) <= 1e-12
    v = f.tangent_values(xi[1, 2], x)
    assert np.abs(np.sum(v * x, axis=-1)).max() < 1e-13 * np.abs(v).max()
    if x.shape[0] * f.n_coefficients * 8 <= field_module.BASIS_CACHE_BYTES:  # the old cached path
        dense = NoiseField(_KERNEL, nmax=nmax)
        field_module.RING_FRACTION, saved = -1.0, field_module.RING_FRACTION
        try:
            want = _twice(dense, xi, x)
        finally:
            field_module.RING_FRACTION = saved
        assert dense._rings is None and dense._basis is not None
        assert _rel(rings, want) <= 1e-12


def _ring_points(rng, zs, sizes, equispaced):
    """Points on rings at heights zs with sizes points each, longitudes equispaced (random offset,
    shuffled) or random; returned in a random order."""
    pts = []
    for z, n, eq in zip(zs, sizes, equispaced):
        phi = rng.uniform(-np.pi, np.pi) + 2 * np.pi * np.arange(n) / n if eq else rng.uniform(-4, 4, n)
        s = math.sqrt(1.0 - z * z)
        pts.append(np.stack([s * np.cos(phi), s * np.sin(phi), np.full(n, z)], axis=1))
    x = np.concatenate(pts)
    return x[rng.permutation(x.shape[0])]


@pytest.mark.parametrize("nmax", [4, 16, 32])
def test_rings_with_random_longitudes_and_scattered_points(nmax):
    rng = np.random.default_rng(nmax)
    f = NoiseField(_KERNEL, nmax=nmax)
    xi = rng.standard_normal((2,) + f.shape)
    # rings with equispaced longitudes in a random order (FFT + scatter; sizes below and above
    # 2 nmax: aliased FFT bins), with random longitudes (direct sums), and the pole (all its
    # points at longitude atan2(0, 0) = 0: direct)
    x = _ring_points(rng, [-1.0, -0.8, -0.1, 0.3, 0.9, 0.999], [5, 80, 12, 70, 9, 3],
                     [False, True, False, True, True, False])
    want = NoiseField(_KERNEL, nmax=nmax).values(xi, x)
    got = _twice(f, xi, x)
    r = f._rings
    assert isinstance(r, field_module.LatitudeRings) and r.n_rings == 6
    layout = r.layout
    assert layout.direct.size == 5 + 12 + 3 and sum(g[1].size for g in layout.fft_groups) == 3
    assert not layout.in_order
    assert _rel(got, want) <= 1e-12
    # scattered points: no rings, the dense basis table as before
    y = _points(3, 300, seed=nmax)
    want = NoiseField(_KERNEL, nmax=nmax).values(xi, y)
    got = _twice(f, xi, y)
    assert f._rings is None and f._basis is not None
    assert _rel(got, want) <= 1e-12


def test_ring_table_follows_the_points():
    f = NoiseField(_KERNEL, nmax=8)
    xi = np.random.default_rng(5).standard_normal(f.shape)
    x16, x32 = _face_points(16), _face_points(32)
    first = f.values(xi, x16)
    assert f._rings is None  # built on the second call in a row
    assert np.array_equal(f.values(xi, x16), _twice(f, xi, x16)) and f._rings is not None
    table = f._rings
    assert f.values(xi, x16) is not None and f._rings is table  # reused
    np.testing.assert_allclose(f.values(xi, x16), first, rtol=0, atol=1e-13 * np.abs(first).max())
    # other points: the table is dropped, the values are those of the new points
    other = f.values(xi, x32)
    assert f._rings is None
    np.testing.assert_array_equal(other, NoiseField(_KERNEL, nmax=8).values(xi, x32))
    assert _rel(f.values(xi, x32), other) <= 1e-12 and f._rings is not table
    # the same shape, one point moved along its ring: a new table
    y = x32.copy()
    y[7] = [-y[7, 1], y[7, 0], y[7, 2]]
    f.values(xi, y)
    assert f._rings is None
    assert _rel(f.values(xi, y), NoiseField(_KERNEL, nmax=8).values(xi, y)) <= 1e-12
    assert f._rings is not None and f._rings.layout.direct.size  # that ring is no longer equispaced


def test_no_table_above_the_cache_limit(monkeypatch):
    # BASIS_CACHE_BYTES = 0: SphericalHarmonics.evaluate at every call, a table kept for later
    f = NoiseField(_KERNEL, nmax=6)
    xi = np.random.default_rng(6).standard_normal(f.shape)
    x = _face_points(16)
    want = _twice(f, xi, x)
    monkeypatch.setattr(field_module, "BASIS_CACHE_BYTES", 0)
    np.testing.assert_array_equal(f.values(xi, x), NoiseField(_KERNEL, nmax=6).values(xi, x))
    monkeypatch.undo()
    assert f._rings is not None and _rel(f.values(xi, x), want) == 0.0


@pytest.mark.parametrize("nmax", [0, 1])
def test_lowest_truncations(nmax):
    f = NoiseField(_KERNEL, nmax=nmax)
    x = _face_points(16)
    xi = np.random.default_rng(7).standard_normal(f.shape)
    assert _rel(_twice(f, xi, x), NoiseField(_KERNEL, nmax=nmax).values(xi, x)) <= 1e-12
    if nmax == 0:  # the constant Y_00 = 1/√(4π)
        want = np.broadcast_to(xi * math.sqrt(f.variance), (x.shape[0], 3))
        np.testing.assert_allclose(f.values(xi, x), want, rtol=1e-14)


def test_circle_table_gives_the_same_bits():
    f = NoiseField(NoiseKernel("relu", d=2, sigma_u=0.3, sigma_w=0.1), nmax=12)
    xi = np.random.default_rng(8).standard_normal(f.shape)
    x = _points(2, 40)
    first = f.values(xi, x)
    np.testing.assert_array_equal(f.values(xi, x), first)
    assert f._basis is not None and f._rings is None
