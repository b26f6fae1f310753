"""Diagnostics of measures (spherepde.validation.metrics): W₂ to a two-point measure against
POT's exact solver, continuum limits on the Gauss grid (fitted orders or exact quadrature),
eigenspaces, interaction energy and spherical-harmonic moments against the SHT."""
from __future__ import annotations

import numpy as np
import pytest

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.sht import SphericalHarmonics
from spherepde.validation import metrics as M
from conftest import fitted_order, random_orthogonal as random_rotation, unit

EPS = np.finfo(float).eps


# ---- W₂ to a two-point measure -----------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_w2_two_point_equals_emd(seed):
    pytest.importorskip("ot")
    rng = np.random.default_rng(seed)
    n = 300
    x = unit(rng.normal(size=(n, 3)))
    w = rng.random(n) * (rng.random(n) < 0.9)  # some zero weights
    e = unit(rng.normal(size=3))
    for a in (rng.random(), 0.0, 1.0, M.two_point_weight(x, w, e)):
        exact = M.w2(x, w, np.array([e, -e]), np.array([a, 1 - a]))
        fast = M.w2_two_point(x, w, e, a)
        # both are sqrt of an O(1) sum of 300 non-negative O(1) terms: agreement to round-off
        # (measured ≤ 1e-15); 1e-10 allows for the network simplex's own tolerance
        assert abs(fast - exact) <= 1e-10, (a, fast, exact)


def test_w2_two_point_point_masses():
    e = np.array([0.0, 0.0, 1.0])
    x = np.array([e, -e])
    # Π_#ρ itself: distance 0; all mass at e sent a fraction 1 − a to −e at cost |2e|² = 4
    assert M.w2_two_point(x, [0.3, 0.7], e, 0.3) == pytest.approx(0.0, abs=1e-15)
    assert M.w2_two_point(x[:1], [1.0], e, 0.25) == pytest.approx(np.sqrt(0.75 * 4), rel=1e-15)
    with pytest.raises(ValueError, match="a must be"):
        M.w2_two_point(x, [0.5, 0.5], e, 1.5)
    with pytest.raises(ValueError, match="weights"):
        M.w2_two_point(x, [0.5, -0.5], e, 0.5)


def test_w2_uniform_to_poles_second_order():
    """W₂²(σ/4π, (δ_e + δ_−e)/2) = ∫ (2 − 2|⟨x, e⟩|) dσ/4π = 2 − 2·½ = 1 exactly.

    With e the grid axis the cell-centre measure splits exactly in halves at the equator, and
    the only error is the Gauss–Legendre rule applied to the kink |μ| (not a polynomial):
    O(1/nlat²).  Measured W₂² − 1: −3.0e-3, −7.8e-4, −2.0e-4 at nlat 16, 32, 64 (order 1.97).
    """
    errs, nl = [], (16, 32, 64)
    e = np.array([0.0, 0.0, 1.0])
    for nlat in nl:
        g = GaussGrid(nlat)
        x, w = M.as_measure(g, np.full(g.shape, 1 / (4 * np.pi)))
        errs.append(abs(M.w2_two_point(x, w, e, 0.5) ** 2 - 1.0))
    assert errs[-1] < 3e-4
    assert fitted_order(nl, errs) >= 1.9, errs


# ---- W₂ with a bound beyond the dense limit ----------------------------------------------------
def _clouds(rng, na, nb, d=3):
    """A diffuse and a concentrated cloud with random positive weights (some zero)."""
    xa = unit(rng.normal(size=(na, d)))
    c = unit(rng.normal(size=d))
    xb = unit(c + 0.6 * rng.normal(size=(nb, d)))
    wa = rng.random(na) * (rng.random(na) < 0.95)
    return xa, wa, xb, rng.random(nb)


@pytest.mark.parametrize("na,nb,max_entries", [(300, 400, 2000), (800, 900, 10**4),
                                                (1500, 1500, 10**5), (2500, 1200, 4 * 10**5)])
def test_w2_with_bound_holds_against_exact_emd(na, nb, max_entries):
    pytest.importorskip("ot")
    rng = np.random.default_rng(na + nb)
    xa, wa, xb, wb = _clouds(rng, na, nb)
    exact = M.w2(xa, wa, xb, wb)
    est = M.w2_with_bound(xa, wa, xb, wb, max_entries=max_entries)
    assert est.method == "coarsened" and est.grid.startswith("GaussGrid(")
    assert est.atoms[0] * est.atoms[1] <= max_entries
    # the bound is rigorous (1e-12: the solvers' own round-off) and the radius bound cruder
    assert abs(est.value - exact) <= est.error_bound + 1e-12, (est, exact)
    assert est.lower - 1e-12 <= exact <= est.upper + 1e-12
    assert est.error_bound <= est.radius_bound + 1e-15
    # and it is not vacuous: it shrinks as the budget grows
    finer = M.w2_with_bound(xa, wa, xb, wb, max_entries=4 * max_entries)
    assert finer.error_bound < est.error_bound and abs(finer.value - exact) <= finer.error_bound + 1e-12


def test_w2_with_bound_exact_when_it_fits_and_on_the_circle():
    pytest.importorskip("ot")
    rng = np.random.default_rng(3)
    xa, wa, xb, wb = _clouds(rng, 200, 150)
    est = M.w2_with_bound(xa, wa, xb, wb)
    assert est.method == "exact" and est.error_bound == 0.0 and est.grid is None
    assert est.value == pytest.approx(M.w2(xa, wa, xb, wb), abs=1e-12)
    xa, wa, xb, wb = _clouds(rng, 700, 600, d=2)  # S¹: equal arcs
    exact = M.w2(xa, wa, xb, wb)
    est = M.w2_with_bound(xa, wa, xb, wb, max_entries=5000)
    assert est.method == "coarsened" and est.grid.startswith("CircleGrid(")
    assert abs(est.value - exact) <= est.error_bound + 1e-12


def test_w2_with_bound_large_problems():
    """Problems above the dense limit run, state the method, and the bound holds where the
    answer is known: W₂²(μ, δ_p) = Σ w_j (2 − 2⟨x_j, p⟩) (all mass goes to p)."""
    pytest.importorskip("ot")
    rng = np.random.default_rng(5)
    x = unit(rng.normal(size=(200_000, 3)))
    w = rng.random(200_000)
    p = unit(np.array([0.2, -0.3, 0.9]))
    want = np.sqrt(np.sum(w / w.sum() * (2 - 2 * x @ p)))
    est = M.w2_with_bound(x, w, p[None, :], [1.0], max_entries=10**4)
    assert est.method == "coarsened" and est.atoms[1] == 1 and est.atoms[0] <= 10**4
    assert abs(est.value - want) <= est.error_bound and est.error_bound < 0.05
    xa, wa, xb, wb = _clouds(rng, 30_000, 30_000)  # 9e8 entries
    with pytest.raises(ValueError, match="exceeds max_entries"):
        M.w2(xa, wa, xb, wb)
    est = M.w2_with_bound(xa, wa, xb, wb, max_entries=10**6)
    assert est.method == "coarsened" and est.atoms[0] * est.atoms[1] <= 10**6
    assert np.isfinite(est.value) and 0 < est.error_bound < 0.2 and 0 <= est.lower <= est.upper


def test_w2_with_bound_bad_input():
    x = unit(np.random.default_rng(0).normal(size=(50, 3)))
    with pytest.raises(ValueError, match="coarsest level"):
        M.w2_with_bound(x, np.ones(50), x, np.ones(50), max_entries=100)
    with pytest.raises(ValueError, match="dimensions"):
        M.w2_with_bound(x, np.ones(50), x[:, :2], np.ones(50))
    with pytest.raises(ValueError, match="positive total mass"):
        M.w2_with_bound(x, np.zeros(50), x, np.ones(50))
    x4 = unit(np.random.default_rng(1).normal(size=(50, 4)))
    with pytest.raises(ValueError, match="d = 2, 3"):
        M.w2_with_bound(x4, np.ones(50), x4, np.ones(50), max_entries=100)


def test_coarsen_measure_barycentres():
    rng = np.random.default_rng(9)
    x = unit(rng.normal(size=(5000, 3)))
    w = rng.random(5000)
    p, m, eps, r = M.coarsen_measure(x, w, 8)
    assert p.shape[0] == m.size <= 2 * 8 * 8 and m.sum() == pytest.approx(1.0, rel=1e-14)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-15)
    assert 0 < eps <= r < 0.8  # GaussGrid(8) cells are ~0.4 rad across
    # ε is the cost of one coupling of μ and μ̃, so at least the optimal one
    pytest.importorskip("ot")
    assert M.w2(x, w, p, m) <= eps + 1e-12


# ---- eigenspaces --------------------------------------------------------------------------------
def test_top_eigenspace_simple_and_gap():
    rng = np.random.default_rng(1)
    R = random_rotation(rng)
    A = R @ np.diag([2.5, 1.0, -3.0]) @ R.T
    E = M.top_eigenspace(A)
    assert E.dim == 1
    np.testing.assert_allclose(np.abs(E.basis[:, 0] @ R[:, 0]), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(E.eigenvalues, [2.5, 1.0, -3.0], atol=1e-14)
    assert E.gap == pytest.approx(1.5, abs=1e-14)
    # by magnitude: −3 dominates
    Em = M.top_eigenspace(A, by_magnitude=True)
    assert Em.dim == 1
    np.testing.assert_allclose(np.abs(Em.basis[:, 0] @ R[:, 2]), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(Em.eigenvalues, [-3.0, 2.5, 1.0], atol=1e-14)
    assert Em.gap == pytest.approx(0.5, abs=1e-14)


def test_top_eigenspace_ties_grouped():
    rng = np.random.default_rng(2)
    R = random_rotation(rng, 4)
    A = R @ np.diag([2.0, 2.0 + 1e-12, 0.5, -1.0]) @ R.T
    E = M.top_eigenspace(A)
    assert E.dim == 2
    # the basis is orthonormal and spans span(R[:, 0], R[:, 1])
    np.testing.assert_allclose(E.basis.T @ E.basis, np.eye(2), atol=1e-13)
    P = E.basis @ E.basis.T
    np.testing.assert_allclose(P, R[:, :2] @ R[:, :2].T, atol=1e-12)
    assert E.gap == pytest.approx(1.5, abs=1e-11)
    # ±2 tie in magnitude: both grouped by_magnitude, not by value
    B = R @ np.diag([2.0, -2.0, 0.5, 0.1]) @ R.T
    assert M.top_eigenspace(B).dim == 1
    Eb = M.top_eigenspace(B, by_magnitude=True)
    assert Eb.dim == 2 and Eb.gap == pytest.approx(1.5, abs=1e-13)
    # everything tied: E is the whole space and the gap is 0
    Ei = M.top_eigenspace(3.0 * np.eye(3))
    assert Ei.dim == 3 and Ei.gap == 0.0
    # a separation larger than rtol·‖A‖ is not a tie
    assert M.top_eigenspace(np.diag([1.0, 1.0 - 1e-6, 0.0])).dim == 1


def test_top_eigenspace_refuses_non_symmetric():
    with pytest.raises(ValueError, match="symmetric"):
        M.top_eigenspace(np.array([[1.0, 2.0], [0.0, 1.0]]))
    # round-off asymmetry (as in V Bᵀ computed in floating point) is accepted
    rng = np.random.default_rng(3)
    S = rng.normal(size=(3, 3))
    S = S + S.T
    S[0, 1] += 1e-15
    assert M.top_eigenspace(S).dim == 1


# ---- distances to subspaces and the projection map -------------------------------------------------
def test_dist_to_subspace_points_on_E_and_uniform():
    rng = np.random.default_rng(4)
    R = random_rotation(rng)
    plane = R[:, :2]
    pts = unit(rng.normal(size=(50, 2))) @ plane.T
    assert M.dist_to_subspace(pts, np.full(50, 1 / 50), plane) <= 1e-15
    line = R[:, :1]
    assert M.dist_to_subspace(np.array([R[:, 0], -R[:, 0]]), [0.5, 0.5], line) <= 1e-15
    # uniform measure: ∫ |P_{E⊥}x|² = 1 − ∫⟨x, e⟩² = 1 − 1/3.  The integrand is a degree-2
    # polynomial, which the Gauss grid integrates exactly (degree ≤ 2 nlat − 1), so the
    # continuum value sqrt(2/3) holds to round-off already on a coarse grid
    for nlat in (4, 8, 16):
        g = GaussGrid(nlat)
        x, w = M.as_measure(g, np.full(g.shape, 1 / (4 * np.pi)))
        assert M.dist_to_subspace(x, w, line) == pytest.approx(np.sqrt(2 / 3), abs=1e-14)
        # and to a plane: 1 − 2/3
        assert M.dist_to_subspace(x, w, plane) == pytest.approx(np.sqrt(1 / 3), abs=1e-14)


def test_projection_pushforward_and_two_point_weight():
    rng = np.random.default_rng(5)
    e = unit(rng.normal(size=3))
    x = unit(rng.normal(size=(200, 3)))
    w = rng.random(200)
    p, pw = M.projection_pushforward(x, w, e[:, None])
    s = np.sign(x @ e)
    np.testing.assert_allclose(p, s[:, None] * e[None, :], atol=1e-15)
    np.testing.assert_array_equal(pw, w)
    a = M.two_point_weight(x, w, e)
    assert a == pytest.approx(np.sum(w[s > 0]) / np.sum(w), rel=1e-15)
    # mass on P_E x = 0 is dropped (exactly orthogonal points: the test is of the rule, not of
    # the sign of a rounding error)
    ez = np.array([0.0, 0.0, 1.0])
    p2, pw2 = M.projection_pushforward(np.array([[1.0, 0.0, 0.0], ez]), [0.4, 0.6], ez[:, None])
    assert p2.shape == (1, 3) and pw2.tolist() == [0.6]


def test_two_point_weight_of_cells_splits_the_cells_the_plane_cuts():
    """ρ₀ ∝ 1 + ½⟨x, â⟩ has a = ½ + ⟨â, e⟩/8 exactly.  Its cell averages on GaussGrid(n), split
    by cell centres, put the columns at λ = 0, π (centres on the plane ⟨x, e_y⟩ = 0) wholly on
    one side: a is off by O(h) (4.5e-3 at n = 32).  Split by area, the cell averages are off
    only by the cells' own error, second order in h (9e-5 at n = 32, 4e-5 at n = 48): the error
    model is |Δa| ≤ C h² with C from the cell average of a linear function (≈ 0.1)."""
    from spherepde.grids import CircleGrid, GaussGrid

    ah = unit(np.array([0.6, 0.5, 0.3]))
    for e in (np.array([0.0, 1.0, 0.0]), unit(np.array([1.0, 0.0, 1.0]))):
        exact = 0.5 + (ah @ e) / 8
        errs = []
        for n in (24, 48):
            g = GaussGrid(n)
            rho = 1.0 + 0.5 * (g.xyz @ ah)
            errs.append(abs(M.two_point_weight_cells(g, rho, e) - exact))
            assert errs[-1] <= 0.1 * (np.pi / n) ** 2, (n, e, errs[-1])
        assert errs[1] < 0.5 * errs[0]  # second order: 4× from 24 to 48, ≥ 2× asked
    # by centres, the same cells are off at first order (the fault the split by area removes)
    g = GaussGrid(32)
    by_centre = M.two_point_weight(*M.as_measure(g, 1.0 + 0.5 * (g.xyz @ ah)), np.array([0.0, 1.0, 0.0]))
    assert abs(by_centre - (0.5 + ah[1] / 8)) > 1e-3
    # S¹: ρ ∝ 1 + ½ cos θ has the mass (π + 1)/(2π) on cos θ > 0
    c = CircleGrid(64)
    a1 = M.two_point_weight_cells(c, 1.0 + 0.5 * np.cos(c.theta), np.array([1.0, 0.0]))
    assert abs(a1 - (np.pi + 1) / (2 * np.pi)) <= 0.1 * c.dtheta ** 2


def test_two_point_weight_of_a_formula_is_exact_for_smooth_densities():
    """ρ ∝ 1 + A⟨x, â⟩ on S² has a = ½ + A⟨â, e⟩/4; on S¹ ½ + A cos(θ_â − θ_e)/π; a vMF bump
    centred on the plane ⟨x, e⟩ = 0 is split evenly, and one tilted off it agrees with the grid's
    cells split by area within their O(h²) (an independent discretisation)."""
    from spherepde.grids import GaussGrid

    ah = unit(np.array([0.6, 0.5, 0.3]))
    for e in (np.array([0.0, 1.0, 0.0]), unit(np.array([1.0, -2.0, 0.5]))):
        for A in (0.5, 1.0):
            a = M.two_point_weight_function(lambda x: 1.0 + A * (x @ ah), e)
            assert a == pytest.approx(0.5 + A * (ah @ e) / 4, abs=1e-14)
    th_a, th_e = 0.7, -0.4
    a1 = M.two_point_weight_function(lambda x: 1.0 + 0.3 * (x @ [np.cos(th_a), np.sin(th_a)]),
                                     np.array([np.cos(th_e), np.sin(th_e)]))
    assert a1 == pytest.approx(0.5 + 0.3 * np.cos(th_a - th_e) / np.pi, abs=1e-14)
    e = np.array([0.0, 1.0, 0.0])
    on_plane = M.two_point_weight_function(lambda x: np.exp(40.0 * (x[:, 2] - 1.0)), e)
    assert on_plane == pytest.approx(0.5, abs=1e-12)
    c = unit(np.array([0.3, 0.2, 1.0]))
    vmf = lambda x: np.exp(20.0 * (x @ c - 1.0))  # noqa: E731
    a = M.two_point_weight_function(vmf, e)
    g = GaussGrid(96)
    cells = M.two_point_weight_cells(g, vmf(g.xyz.reshape(-1, 3)).reshape(g.shape), e)
    assert 0.5 < a < 1 and abs(cells - a) <= 20.0 * (np.pi / 96) ** 2  # C ~ κ/2 for the bump
    for bad in (np.zeros(3), np.ones(4), np.array([np.nan, 1.0, 0.0])):
        with pytest.raises(ValueError, match="e must be"):
            M.two_point_weight_function(vmf, bad)
    with pytest.raises(ValueError, match="n must be"):
        M.two_point_weight_function(vmf, e, n=1)
    with pytest.raises(ValueError, match="non-negative"):
        M.two_point_weight_function(lambda x: -np.ones(len(x)), e)


# ---- interaction energy --------------------------------------------------------------------------
def test_interaction_energy_closed_forms():
    rng = np.random.default_rng(6)
    e = unit(rng.normal(size=3))
    for beta in (0.1, 3.0, 50.0, 1e4):
        # a single Dirac: 1 − e^{β(1−1)} = 0 for every pair
        assert M.interaction_energy(e[None], [1.0], beta) == 0.0
        # ½δ_e + ½δ_−e: the two cross pairs, each ¼(1 − e^{−2β}), halved: ¼(1 − e^{−2β})
        want = 0.25 * (1 - np.exp(-2 * beta))
        got = M.interaction_energy(np.array([e, -e]), [0.5, 0.5], beta)
        assert got == pytest.approx(want, rel=1e-15, abs=1e-17)


def test_interaction_energy_uniform_converges():
    """Uniform measure: ∫ e^{β(⟨x,y⟩−1)} dσ(y)/4π = ½∫₋₁¹ e^{β(t−1)} dt = e^{−β} sinh β / β, so
    E = ½(1 − e^{−β} sinh β/β).  The integrand is entire, so the Gauss grid converges
    spectrally (measured at β = 50: 1.2e-2, 9.6e-4, 3.9e-7, ≤ 1e-16 at nlat 4, 8, 16, 32)."""
    for beta in (1.0, 10.0, 50.0):
        want = 0.5 * (1 - np.exp(-beta) * np.sinh(beta) / beta)
        errs = []
        for nlat in (4, 8, 16, 32):
            g = GaussGrid(nlat)
            x, w = M.as_measure(g, np.full(g.shape, 1 / (4 * np.pi)))
            errs.append(abs(M.interaction_energy(x, w, beta, block=1000) - want))
        assert errs[-1] <= 1e-14, (beta, errs)
        # strictly decreasing until round-off
        big = [e for e in errs if e > 1e-14]
        assert all(a > b for a, b in zip(big, big[1:])), errs


# ---- harmonic moments ----------------------------------------------------------------------------
@pytest.mark.parametrize("nlat", [16, 32])
def test_harmonic_moments_equal_sht_analysis(nlat):
    """For a density ρ on the grid, as_measure gives the same quadrature as the SHT's
    analysis (∫ ρ conj(Y_lm) by the Gauss rule), so the moments agree to round-off."""
    rng = np.random.default_rng(nlat)
    g = GaussGrid(nlat)
    rho = np.exp(2 * g.xyz @ unit([1.0, -2.0, 0.5])) + 0.1 * rng.random(g.shape)  # not band-limited
    sh = SphericalHarmonics(g)
    q = sh.analyse(rho)
    lmax = 8
    hm = M.harmonic_moments(*M.as_measure(g, rho), lmax)
    idx = [sh.index(l, m) for l in range(lmax + 1) for m in range(l + 1)]  # (l, m), m fastest
    assert hm.shape == (len(idx),)
    # O(1) coefficients, sums of 2 nlat² terms: round-off (measured ≤ 6e-14 for |q| ≈ 7)
    assert np.abs(hm - q[idx]).max() <= 1e-12 * np.abs(q).max()


def test_harmonic_moments_known_values():
    # δ at the north pole: conj(Y_l0(pole)) = sqrt((2l+1)/4π), Y_lm(pole) = 0 for m > 0
    hm = M.harmonic_moments(np.array([[0.0, 0.0, 1.0]]), [1.0], 3)
    want = []
    for l in range(4):
        for m in range(l + 1):
            want.append(np.sqrt((2 * l + 1) / (4 * np.pi)) if m == 0 else 0.0)
    np.testing.assert_allclose(hm, want, atol=1e-15)
    # no Condon–Shortley phase: Y_11 = +sqrt(3/8π) sin θ e^{iλ}, so at x = (1, 0, 0)
    hm = M.harmonic_moments(np.array([[1.0, 0.0, 0.0]]), [1.0], 1)
    assert hm[2] == pytest.approx(np.sqrt(3 / (8 * np.pi)), rel=1e-14)
    with pytest.raises(ValueError, match="S²"):
        M.harmonic_moments(np.array([[1.0, 0.0]]), [1.0], 2)


def test_harmonic_moments_of_samples_within_clt():
    """Moments of N iid samples of the piecewise-constant density agree with its exact moments
    within 5σ/√N per real and imaginary part; the exact moments are cell averages of
    conj(Y_lm) (4×4 Gauss rule per cell), not the cell-centre quadrature, whose O(h²) bias
    (≈ 1e-3 here) would be comparable to σ/√N."""
    sampling = pytest.importorskip("spherepde.grids.sampling")
    from scipy.special import sph_harm_y

    g = GaussGrid(16)
    rho = np.exp(1.5 * g.xyz @ unit([0.3, 0.4, -1.0])) + 0.2
    N = 40_000
    pts = sampling.sample_density(g, rho, N, seed=2026)
    lmax = 4
    hm = M.harmonic_moments(pts, np.full(N, 1 / N), lmax)
    mass = rho * g.cell_area
    mass = mass / mass.sum()

    def ylm(l, m):
        def f(X):
            th = np.arccos(np.clip(X[..., 2], -1, 1))
            ph = np.arctan2(X[..., 1], X[..., 0])
            return np.conj(sph_harm_y(l, m, th, ph) * (-1) ** m)
        return f

    k = 0
    for l in range(lmax + 1):
        for m in range(l + 1):
            f = ylm(l, m)
            re = np.sum(mass * g.cell_average(lambda X: f(X).real, 4))
            im = np.sum(mass * g.cell_average(lambda X: f(X).imag, 4))
            vals = f(pts)
            for got, want, sd in ((hm[k].real, re, vals.real.std()), (hm[k].imag, im, vals.imag.std())):
                assert abs(got - want) <= 5 * sd / np.sqrt(N) + 1e-15, (l, m, got, want)
            k += 1


# ---- input checks ----------------------------------------------------------------------------------
def test_as_measure_and_bad_weights():
    g = CircleGrid(8)
    x, w = M.as_measure(g, np.ones(8))
    assert x.shape == (8, 2) and w.sum() == pytest.approx(2 * np.pi)
    with pytest.raises(ValueError, match="weights"):
        M.dist_to_subspace(x, np.r_[w[:-1], np.nan], np.eye(2)[:, :1])
    with pytest.raises(ValueError, match="must match"):
        M.interaction_energy(x, w[:-1], 1.0)
