"""The shared latitude-ring tables (spherepde.grids.rings): Legendre recursion, e^{ikx}, ring FFT
synthesis and RingLayout, against independent formulas (scipy's spherical harmonics, direct sums
written out here)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import sph_harm_y

from spherepde.grids import GaussGrid
from spherepde.grids.rings import (RING_LON_TOL, RingLayout, fourier_powers, legendre_recursion,
                                   legendre_table, ring_synthesis)
from spherepde.solvers.eulerian.transport import FFSLSphere

EPS = np.finfo(float).eps


@pytest.mark.parametrize("L", [0, 1, 7, 40])
def test_legendre_table_is_scipys_without_the_phase(L):
    """T[m, l, j] = (−1)^m Re Y_l^m(θ_j, 0) (scipy, with the Condon–Shortley phase), 0 for m > l;
    error ≤ 50 ε (L + 1) relative to the largest value (the recursion's growth is linear in L)."""
    theta = np.r_[0.0, np.linspace(0.01, np.pi - 0.01, 37), np.pi]
    s = np.sin(theta)
    s[-1] = 0.0
    T = legendre_table(np.cos(theta), s, legendre_recursion(L))
    assert T.shape == (L + 1, L + 1, theta.size)
    want = np.zeros_like(T)
    for l in range(L + 1):
        for m in range(l + 1):
            want[m, l] = (-1) ** m * sph_harm_y(l, m, theta, 0.0).real
    assert np.abs(T - want).max() <= 50 * EPS * (L + 1) * np.abs(want).max()


def test_fourier_powers_and_ring_synthesis():
    rng = np.random.default_rng(0)
    x = rng.uniform(-4, 4, 50)
    k = np.arange(34)
    E = fourier_powers(x, 33)
    # the reference in long double; e^{ikx} is conditioned at k|x|ε (the rounding of kx)
    want = np.exp(1j * np.outer(x.astype(np.longdouble), k)).astype(complex)
    assert np.all(np.abs(E - want) <= 8 * EPS * (1.0 + np.outer(np.abs(x), k)))
    for n, M in [(16, 5), (16, 8), (9, 20), (1, 3)]:  # M > n/2: folded (aliased) orders
        X = rng.normal(size=(3, M + 1)) + 1j * rng.normal(size=(3, M + 1))
        j = np.arange(n)
        want = (X[:, None, :] * np.exp(2j * np.pi * np.outer(j, np.arange(M + 1)) / n)).sum(-1).real
        scale = np.abs(X).sum(axis=1, keepdims=True)
        assert np.all(np.abs(ring_synthesis(X, n) - want) <= 20 * EPS * math.log2(n + 1) * scale + 1e-300)


def _direct(F, layout_ring, phi):
    """Re Σ_m F[b, ring(p), m] e^{imφ_p}, summed here term by term."""
    M = F.shape[-1] - 1
    e = np.exp(1j * np.outer(phi, np.arange(M + 1)))  # (P, M+1)
    return np.einsum("bpm,pm->bp", F[:, layout_ring], e).real


def _rings(rng, zs, sizes, kinds):
    """Points on rings at heights zs: 'eq' equispaced (random offset), 'pert' equispaced with
    longitudes moved by up to 0.45 RING_LON_TOL (so within RING_LON_TOL of each other), 'rand' random
    longitudes; in a random order."""
    pts = []
    for z, n, kind in zip(zs, sizes, kinds):
        phi = rng.uniform(-np.pi, np.pi) + 2 * np.pi * np.arange(n) / n
        if kind == "pert":
            phi = phi + rng.uniform(-0.45, 0.45, n) * RING_LON_TOL
        elif kind == "rand":
            phi = rng.uniform(-4, 4, n)
        s = math.sqrt(1.0 - z * z)
        pts.append(np.stack([s * np.cos(phi), s * np.sin(phi), np.full(n, z)], axis=1))
    x = np.concatenate(pts)
    return x[rng.permutation(x.shape[0])]


@pytest.mark.parametrize("M", [3, 24, 90])
def test_ring_layout_synthesis_matches_direct_sums(M):
    """Equispaced rings (shuffled, sizes below and above 2M: aliased bins), rings moved off
    equispacing by up to 0.45 RING_LON_TOL (FFT with the first-order correction), random rings and
    a pole (direct): all within 40 ε (log₂ n + 1) Σ_m |F_m| of the sums written out here.  The
    coefficients are in phase (real, positive), so g' ~ M²/2 near φ = 0: the uncorrected FFT is
    off by up to δ·|g'| there (measured without the correction: 1.2× the bound at M = 90)."""
    rng = np.random.default_rng(M)
    x = _rings(rng, [-1.0, -0.7, -0.2, 0.1, 0.5, 0.8], [4, 2 * M + 7, 40, max(3, M // 2), 64, 11],
               ["rand", "eq", "rand", "eq", "pert", "pert"])
    layout = RingLayout.build(x, M)
    assert layout is not None and layout.n_rings == 6
    assert sum(g[1].size for g in layout.fft_groups) == 4 and layout.direct.size == 44
    F = rng.uniform(0.5, 1.0, size=(2, 6, M + 1)).astype(complex)
    got = layout.synthesise(F)
    want = _direct(F, layout.ring, np.arctan2(x[:, 1], x[:, 0]))
    bound = 40 * EPS * (math.log2(2 * M + 8) + 1) * np.abs(F).sum(axis=-1).max()
    assert np.abs(got - want).max() <= bound
    # kept table of the direct points or not: the same bits
    lean = RingLayout.build(x, M, keep=False)
    assert lean._E is None and layout._E is not None
    np.testing.assert_array_equal(lean.synthesise(F), got)


def test_ring_layout_of_face_points_and_scattered_points():
    g = GaussGrid(24)
    pts = FFSLSphere(g, lambda t, x: np.zeros_like(x)).points
    layout = RingLayout.build(pts, 20)
    assert layout.n_rings == 2 * g.nlat + 1 and layout.direct.size == 0 and layout.in_order
    rng = np.random.default_rng(1)
    assert RingLayout.build(rng.normal(size=(100, 3)), 4) is None  # every point its own z
    assert RingLayout.build(np.zeros((0, 3)), 4) is None
