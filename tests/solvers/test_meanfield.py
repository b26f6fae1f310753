"""The mean-field stepper "meanfield-ffsl" (spherepde.solvers.eulerian.meanfield) with the
attention velocity (docs/equations.md Paper 1): convergence to the exact β = ∞ solution, conservation,
positivity, order in time, clustering on S¹, and bad input.

Known defects and limitations are pinned by ``xfail(strict=True)`` tests whose reasons carry
the measured numbers; they turn into failures (XPASS) once fixed, so the marker must then be
removed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian.meanfield import MeanFieldFFSL
from spherepde.validation.exact import ZeroTemperatureFlow, characteristics_solution
from spherepde.validation.transport_cases import error_norms
from conftest import fitted_order, unit


def lonlat(lat_deg, lon_deg):
    la, lo = np.radians(lat_deg), np.radians(lon_deg)
    return np.array([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)])


def frame(e):
    """Orthonormal columns (e, a, b)."""
    e = unit(e)
    a = unit(np.cross(e, [0.0, 0.0, 1.0]))
    return np.stack([e, a, np.cross(e, a)], axis=1)


# B = G diag(1.2, 1, 0.8) Hᵀ (not symmetric); A = VBᵀ symmetric with eigenvalues
# (0.5, 0.1, −0.3), i.e. V = A B^{−T}; the β = ∞ velocity is P_x A x / |Bᵀx|
B_INF = frame(lonlat(-25, 110)) @ np.diag([1.2, 1.0, 0.8]) @ frame(lonlat(50, -60)).T
EIG = np.diag([0.5, 0.1, -0.3])
#: z an eigenvector of A (the bottom one): the velocity vanishes at the poles, the flow
#: concentrates mass at ±e on the equator
A_EQUATOR = np.array([lonlat(0, 40), lonlat(0, 130), lonlat(90, 0)]).T @ EIG \
    @ np.array([lonlat(0, 40), lonlat(0, 130), lonlat(90, 0)])
#: generic orientation, e at latitude 35°: the flow crosses the poles
A_GENERIC = frame(lonlat(35, 40)) @ EIG @ frame(lonlat(35, 40)).T
BUMP = lonlat(10, -30)


def rho0_smooth(X):
    return 1.0 + 0.8 * np.exp(-4.0 * (1.0 - X @ BUMP))


def zero_temperature_errors(A, nlats, t_end=1.0, **options):
    """l2 errors (Williamson-normalised) of meanfield-ffsl at Courant 0.8 against cell averages
    (2×2 Gauss rule, O(h⁴)) of the exact solution by characteristics."""
    V = A @ np.linalg.inv(B_INF.T)
    att = Attention(np.eye(3), B_INF, V, math.inf)
    flow = ZeroTemperatureFlow(att.B, att.V)
    errs = []
    for nlat in nlats:
        g = GaussGrid(nlat)
        r0 = g.cell_average(rho0_smooth, 2)
        # RK4 with 40 steps: ≈ 1e-9, far below the errors measured (≥ 8e-4)
        exact = g.cell_average(lambda X: characteristics_solution(flow, rho0_smooth, X, t_end,
                                                                  steps=40), 2)
        stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g), **options)
        out = Controller(stepper).run(r0, (0.0, t_end))
        assert abs(g.integrate(out.state) - g.integrate(r0)) <= 1e-13 * g.integrate(r0)
        errs.append(error_norms(g, out.state, exact)["l2"])
    return errs


def test_zero_temperature_converges_second_order():
    """β = ∞ attention transported to t = 1 against the exact solution.

    Measured l2: 7.0e-3, 2.9e-3, 1.85e-3, 8.4e-4 at nlat 16, 24, 32, 48 (fitted order 1.91;
    1.94 on 16, 32, 64).  The scheme is second order (midpoint departure points, Strang
    splitting, PPM; Δt ∝ h at fixed Courant number), so the asymptotic order is 2; ≥ 1.7
    allows for the pre-asymptotic spread of the local orders (1.8–2.0 measured) but not for a
    first-order defect (time or face velocities), which would fit ≤ 1.2.
    The orientation is chosen with z an eigenvector of A so that no flow crosses the poles:
    the polar limitation of the split scheme is pinned separately (next test)."""
    nlats = (16, 24, 32, 48)
    errs = zero_temperature_errors(A_EQUATOR, nlats)
    assert errs[-1] < 1.2e-3, errs
    assert fitted_order(nlats, errs) >= 1.7, errs


@pytest.mark.xfail(strict=True, reason=(
    "LIMITATION of the split FFSL transport over the poles (also pinned in "
    "tests/solvers/test_transport.py): with A's top eigenvector at latitude 35° (flow across "
    "the poles) the β = ∞ run to t = 1 has l2 = 1.03e-2, 4.97e-3, 3.70e-3, 2.45e-3 at nlat 16, "
    "24, 32, 48 (fitted order 1.29; 1.06 before the limiter's Colella–Sekora test); the error "
    "in |lat| > 60° is almost all of it. The polar cap (the default) fixes it (next test: "
    "order 2.02)."))
def test_zero_temperature_converges_generic_orientation_with_the_split_step():
    nlats = (16, 24, 32, 48)
    errs = zero_temperature_errors(A_GENERIC, nlats, polar="split")
    assert fitted_order(nlats, errs) >= 1.7, errs


def test_zero_temperature_across_the_poles_converges_second_order_with_the_polar_cap():
    """The same generic orientation (flow across the poles) with the default ``polar="auto"``
    (the cap from nlat 8 on; given explicitly here): the attention
    is also evaluated at the cap vertices and the first 4 rings around each pole are remapped
    unsplit (solvers/eulerian/polar_cap.py).  Measured l2: 9.0e-3, 3.1e-3, 1.8e-3, 9.7e-4 at
    nlat 16, 24, 32, 48 (fitted order 2.02, against 1.29 for the split scheme on the same
    runs); the bounds are those of the pole-free orientation above (≥ 1.7, and below 1.2e-3 at
    nlat 48), since with the cap the poles no longer limit the order."""
    nlats = (16, 24, 32, 48)
    errs = zero_temperature_errors(A_GENERIC, nlats, polar="cap")
    assert errs[-1] < 1.2e-3, errs
    assert fitted_order(nlats, errs) >= 1.7, errs


# ---- finite β -------------------------------------------------------------------------------------
def finite_beta_setup():
    rng = np.random.default_rng(5)
    Q, K, V = np.eye(3) + 0.3 * rng.normal(size=(3, 3, 3))
    return Attention(Q, K, V, 5.0)


def test_finite_beta_conservative_and_positive():
    """β = 5 on GaussGrid(16): a cosine bell with compact support on a zero background."""
    att = finite_beta_setup()
    g = GaussGrid(16)
    c = lonlat(20, -30)

    def bell(X):
        r = np.arccos(np.clip(X @ c, -1, 1))
        return np.where(r < 1.0, 0.5 * (1 + np.cos(np.pi * r / 1.0)), 0.0)

    rho = g.cell_average(bell, 3)
    rho /= g.integrate(rho)
    assert np.sum(rho == 0.0) > g.nlat * g.nlon // 2  # most of the sphere is empty
    stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g))
    t = 0.0
    for _ in range(8):
        dt = stepper.stable_dt(rho, t)
        new = stepper.step(rho, t, dt)
        # every sweep is a flux difference: the mass changes by round-off only
        assert abs(g.integrate(new) - g.integrate(rho)) <= 1e-13
        assert new.min() >= -1e-14 * rho.max()  # positive up to the round-off of flux sums
        rho, t = new, t + dt
    assert t > 0.5  # the run went somewhere (8 steps at Courant 0.8)


@pytest.mark.xfail(strict=True, reason=(
    "LIMITATION (not of the midpoint rule): at fixed nlat 16 the FFSL spatial error depends on "
    "the Courant number, a term of first order in Δt with an O(h^k) coefficient, and it "
    "dominates. β = 5, t = 0.5, Δt = T/4, T/8, T/16 against T/64: l2 = 5.1e-3, 2.5e-3, 1.2e-3 "
    "(fitted order 1.06; T = 1: 0.78).  A steady β = ∞ velocity (no time coupling at all) "
    "gives 0.71–0.79 the same way; on S¹ the order rises from 0.7–1.0 at n = 64 cells to 1.9 at "
    "n = 384 (test_time_order_on_fine_circle).  The module docstring's 'second order in time' "
    "holds only as h → 0."))
def test_time_order_fixed_coarse_sphere():
    att = finite_beta_setup()
    g = GaussGrid(16)
    c = lonlat(20, -30)
    rho0 = g.cell_average(lambda X: (1.0 + 2 * np.exp(-3 * (1 - X @ c))) / (4 * np.pi), 3)
    T = 0.5

    def run(n):
        stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g))
        rho = rho0
        for k in range(n):
            rho = stepper.step(rho, k * T / n, T / n)
        return rho

    ns = (4, 8, 16)
    ref = run(16 * ns[0])
    errs = [np.sqrt(g.integrate((run(n) - ref) ** 2) / g.integrate(ref**2)) for n in ns]
    assert fitted_order(ns, errs) >= 1.7, errs


def test_time_order_on_fine_circle():
    """The midpoint coupling ρ* = T(X[ρⁿ], Δt/2)ρⁿ, ρⁿ⁺¹ = T(X[ρ*], Δt)ρⁿ is second order
    in time once the Courant-dependent spatial error is small (fine grid, here S¹ with 384
    cells): β = 5, Δt = 1/4, 1/8, 1/16 against 1/64 (Δt/16).  Measured l2 3.55e-3, 9.2e-4,
    2.5e-4: fitted order 1.91 (local 1.94, 1.88; the first-order Courant term is what bends
    it at small Δt: 1.72, 1.51, 1.12 with 256 cells and smaller Δt).  A first-order coupling
    (e.g. X[ρⁿ] frozen over the step) would fit ≈ 1."""
    g = CircleGrid(384)
    att = Attention(np.array([[1.0, 0.2], [0.0, 1.0]]), np.eye(2),
                    np.array([[1.0, 0.3], [0.1, 0.6]]), 5.0)
    th = g.theta
    rho0 = (1 + 0.5 * np.cos(th - 1) + 0.3 * np.sin(2 * th)) / (2 * np.pi)

    def run(n):
        stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g))
        rho = rho0
        for k in range(n):
            new = stepper.step(rho, k / n, 1.0 / n)
            assert abs(g.integrate(new) - 1.0) <= 1e-13
            rho = new
        assert stepper.substeps == 0  # the frozen-velocity sweeps were taken whole
        return rho

    ns = (4, 8, 16)
    ref = run(64)
    errs = [np.sqrt(np.mean((run(n) - ref) ** 2) / np.mean(ref**2)) for n in ns]
    assert fitted_order(ns, errs) >= 1.7, errs


def test_circle_identity_attention_concentrates():
    """Q = K = V = I on S¹, β = 4: tokens attract; a non-uniform density sharpens, max ρ
    grows monotonically (measured 0.2069, 0.2125, 0.2189, 0.2345, 0.2550 at t = 0, 0.5, 1, 2,
    3; linear theory, next test, gives 0.2505 at t = 3, i.e. a factor 1.21), mass is
    conserved and ρ stays positive."""
    g = CircleGrid(128)
    att = Attention(np.eye(2), np.eye(2), np.eye(2), 4.0)
    th = g.theta
    rho0 = (1 + 0.3 * np.cos(th - 0.7)) / (2 * np.pi)
    stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g))
    times = [0.0, 0.5, 1.0, 2.0, 3.0]
    res = Controller(stepper, "memory").run(rho0, (0.0, times[-1]), output_times=times)
    mem = res.trackers["memory"]
    np.testing.assert_array_equal(mem["time"], times)
    maxima = [s.max() for s in mem["state"]]
    assert all(a < b for a, b in zip(maxima, maxima[1:])), maxima
    assert maxima[-1] > 1.2 * maxima[0], maxima
    for state in mem["state"]:
        assert abs(g.integrate(state) - 1.0) <= 1e-13
        assert state.min() > 0.0
    # the peak stays where it started (the flow is symmetric about θ = 0.7)
    assert abs(th[np.argmax(mem["state"][-1])] - 0.7) <= g.dtheta


@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_circle_linear_growth_rate(beta):
    """Linear stability of the uniform state for Q = K = V = I on S¹: for
    ρ = (1 + ε cos(θ − θ0))/2π the tangential velocity is −ε sin(θ − θ0) I₁(β)/(β I₀(β)) to
    first order, so ε grows like e^{λt}, λ = I₁(β)/(β I₀(β)).  The stepper is linear in ε to
    O(ε²) and its two stages are then exactly the midpoint (RK2) rule, so after n steps the
    mode-1 amplitude is ε (1 + z + z²/2)ⁿ, z = λΔt; what remains is spatial error, second
    order (measured relative errors 1.43e-3, 3.6e-4, 9.0e-5 at β = 1 and 6.9e-4, 1.7e-4,
    4.3e-5 at β = 4 for n = 32, 64, 128 cells: orders 1.99, 2.00).  A first-order coupling
    (amplification 1 + z) would be off by 40 z²/2 ≈ 1e-2 at β = 1."""
    from scipy.special import iv

    eps, T, dt = 1e-3, 2.0, 0.05
    lam = iv(1, beta) / (beta * iv(0, beta))
    z = lam * dt
    cells, errs = (32, 64, 128), []
    for n in cells:
        g = CircleGrid(n)
        stepper = make_stepper("meanfield-ffsl", g,
                               DensityAttention(Attention(np.eye(2), np.eye(2), np.eye(2), beta), g))
        res = Controller(stepper, dt=dt).run((1 + eps * np.cos(g.theta - 0.7)) / (2 * np.pi), (0.0, T))
        assert res.n_steps == 40
        mode = np.fft.rfft(res.state)[1] * 2 * (2 * np.pi) / n  # ε(T) e^{−iθ0}
        assert abs(np.angle(mode) + 0.7) <= 1e-9
        # nonlinear terms change the mode-1 amplitude by O(ε²) = 1e-6 relative
        errs.append(abs(abs(mode) / (eps * (1 + z + z * z / 2) ** 40) - 1))
    assert errs[-1] <= 1.5e-4, errs
    assert fitted_order(cells, errs) >= 1.8, errs


# ---- structure ------------------------------------------------------------------------------------
def test_steady_velocity_step_equals_transport():
    """For a velocity that does not depend on ρ or t, both stages use the same face velocities,
    so one meanfield step is exactly one ffsl-ppm step."""
    g = GaussGrid(16)
    att = Attention(np.eye(3), B_INF, A_GENERIC @ np.linalg.inv(B_INF.T), math.inf)
    da = DensityAttention(att, g)

    def forced(t, x, rho=None):  # claims to depend on ρ: takes the two-stage path
        return da(t, x, None)

    rho = g.cell_average(rho0_smooth, 2)
    mf = make_stepper("meanfield-ffsl", g, forced)
    tr = make_stepper("ffsl-ppm", g, lambda t, x: da(t, x, None))
    np.testing.assert_array_equal(mf.step(rho, 0.0, 0.1), tr.step(rho, 0.0, 0.1))
    # and the β = ∞ one-stage path gives the same
    inf = make_stepper("meanfield-ffsl", g, da)
    np.testing.assert_array_equal(inf.step(rho, 0.0, 0.1), tr.step(rho, 0.0, 0.1))
    assert inf.stable_dt(rho, 0.0) == pytest.approx(tr.stable_dt(rho, 0.0), rel=1e-15)


def test_velocity_evaluations_per_step():
    g = GaussGrid(8)
    calls = []
    for beta, per_step in ((3.0, 2), (math.inf, 1)):
        att = Attention(np.eye(3), np.eye(3), np.diag([1.0, 0.5, -0.5]), beta)
        da = DensityAttention(att, g)

        def counted(t, x, rho=None, da=da):
            calls.append((t, rho is None))
            return da(t, x, rho)

        counted.depends_on_density = da.depends_on_density
        stepper = MeanFieldFFSL(g, counted)
        calls.clear()
        stepper.step(np.ones(g.shape), 0.0, 0.05)
        assert len(calls) == per_step
        if per_step == 2:
            assert [c[0] for c in calls] == [0.0, 0.025] and not any(c[1] for c in calls)
        else:
            assert calls == [(0.025, True)]


def test_registry_and_options():
    g = CircleGrid(16)
    da = DensityAttention(Attention(np.eye(2), np.eye(2), np.eye(2), 2.0), g)
    st = make_stepper("meanfield-ffsl", g, da, limiter="monotone", courant=0.5)
    assert isinstance(st, MeanFieldFFSL) and st.name == "meanfield-ffsl"
    opts = st.options()
    assert opts["stepper"] == "meanfield-ffsl" and opts["limiter"] == "monotone"
    assert opts["courant"] == 0.5


# ---- bad input ------------------------------------------------------------------------------------
def test_bad_input():
    g = GaussGrid(8)
    with pytest.raises(TypeError, match="velocity"):
        make_stepper("meanfield-ffsl", g, "attention")
    with pytest.raises(TypeError, match="velocity"):
        MeanFieldFFSL(g, None)
    da = DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), 2.0), g)
    with pytest.raises(ValueError, match="limiter"):
        make_stepper("meanfield-ffsl", g, da, limiter="clip")
    with pytest.raises(ValueError, match="courant"):
        make_stepper("meanfield-ffsl", g, da, courant=-1.0)
    with pytest.raises(TypeError, match="grid"):
        make_stepper("meanfield-ffsl", object(), da)

    def radial(t, x, rho=None):
        return x.copy()  # not tangent

    with pytest.raises(ValueError, match="radial"):
        make_stepper("meanfield-ffsl", g, radial).step(np.ones(g.shape), 0.0, 0.1)


def test_in_place_modified_density_not_stale():
    g = CircleGrid(64)
    da = DensityAttention(Attention(np.eye(2), np.eye(2), np.eye(2), 5.0), g)
    th = g.theta
    r1 = (1 + 0.5 * np.cos(th)) / (2 * np.pi)
    r2 = (1 + 0.5 * np.cos(th - 2.0)) / (2 * np.pi)
    stepper = make_stepper("meanfield-ffsl", g, da)
    buf = r1.copy()
    stepper.stable_dt(buf, 0.0)
    buf[:] = r2
    fresh = make_stepper("meanfield-ffsl", g, da)
    np.testing.assert_allclose(stepper.step(buf, 0.0, 0.1), fresh.step(r2.copy(), 0.0, 0.1),
                               rtol=0, atol=1e-15)


def test_unlimited_parabolas_refused_with_density_dependent_attention():
    """limiter='none' undershoots below zero at a forming cluster, and the attention weights
    must be non-negative (it used to crash mid-run with 'w must be non-negative'): the stepper
    refuses the combination before any velocity evaluation, naming the argument; the SPDE
    stepper inherits the check.  Density-independent velocities (β = ∞, noise only) and
    velocities that declare accepts_signed_density keep the unlimited scheme."""
    from spherepde.solvers.eulerian.spde import SPDEFFSL

    g = CircleGrid(32)
    da = DensityAttention(Attention(np.eye(2), np.eye(2), np.eye(2), 10.0), g)
    calls = []

    def counted(t, x, rho=None):
        calls.append(t)
        return da(t, x, rho)

    counted.depends_on_density = da.depends_on_density  # a wrapper passes the flag on
    for vel in (da, counted):
        with pytest.raises(ValueError, match="limiter='none'.*density-dependent"):
            make_stepper("meanfield-ffsl", g, vel, limiter="none")
    with pytest.raises(ValueError, match="limiter='none'"):
        SPDEFFSL(g, da, limiter="none")
    assert calls == []
    # allowed: β = ∞ (no density dependence), no drift, a velocity for signed densities
    inf = DensityAttention(Attention(np.eye(2), np.eye(2), np.eye(2), math.inf), g)
    assert make_stepper("meanfield-ffsl", g, inf, limiter="none").options()["limiter"] == "none"
    assert SPDEFFSL(g, None, limiter="none").options()["limiter"] == "none"

    def signed(t, x, rho=None):
        return np.zeros_like(x)

    assert make_stepper("meanfield-ffsl", g, signed, limiter="none").options()["limiter"] == "none"
    signed.depends_on_density = True
    with pytest.raises(ValueError, match="accepts_signed_density"):
        make_stepper("meanfield-ffsl", g, signed, limiter="none")
    signed.accepts_signed_density = True
    st = make_stepper("meanfield-ffsl", g, signed, limiter="none")
    rho = np.ones(g.shape) / (2 * np.pi)
    np.testing.assert_array_equal(st.step(rho, 0.0, 0.1), rho)
    # the default limiter runs the same attention through a collapse without negative values
    st = make_stepper("meanfield-ffsl", g, da)
    rho = (1.0 + 0.3 * np.cos(g.theta)) / (2 * np.pi)
    for k in range(40):
        rho = st.step(rho, 0.5 * k, 0.5)
    assert rho.min() >= 0.0 and rho.max() > 5 * rho.mean()
