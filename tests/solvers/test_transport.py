"""Transport steppers (every name in spherepde.solvers.STEPPERS, every PPM limiter) on prescribed
velocities: conservation, positivity, monotonicity, constants, convergence orders fitted on
refinement sequences, exact S¹ solutions, sub-stepping and bad input.

Velocities are passed as ``velocity(t, x, rho=None)`` so that the same callable serves steppers
for prescribed velocities (called as ``velocity(t, x)``) and mean-field steppers (called with
the density, which a prescribed velocity ignores).

Known defects are pinned by ``xfail(strict=True)`` tests whose reasons carry the measured
numbers; they turn into failures (XPASS) once fixed, so the marker must then be removed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers import STEPPERS, make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian import ffsl, ppm
from spherepde.validation.transport_cases import error_norms, initial_field, make_case

STEPPER_NAMES = sorted(STEPPERS)
LIMITERS = ppm.LIMITERS
POSITIVE_LIMITERS = [lim for lim in LIMITERS if lim != "none"]
HALF_PI = np.pi / 2


def prescribed(f):
    """A prescribed velocity usable by every registered stepper."""

    def velocity(t, x, rho=None):
        return f(t, x)

    return velocity


def make(name, grid, f, **options):
    return make_stepper(name, grid, prescribed(f), **options)


def uniform_steps(stepper, rho0, t_end, *, samples=11):
    """Number of equal steps over [0, t_end] that respects the stepper's Courant number at
    every sampled time."""
    dts = [stepper.stable_dt(rho0, t) for t in np.linspace(0.0, t_end, samples)]
    return max(1, math.ceil(t_end / min(dts)))


def run(stepper, rho0, t_end, n=None):
    """n equal steps (default: from the Courant number); returns (rho, min, max over the run,
    largest relative mass change at any step, n)."""
    grid = stepper.grid
    n = uniform_steps(stepper, rho0, t_end) if n is None else n
    dt = t_end / n
    rho = np.array(rho0, float)
    m0 = grid.integrate(rho)
    lo, hi, dm = rho.min(), rho.max(), 0.0
    for i in range(n):
        rho = stepper.step(rho, i * dt, dt)
        lo, hi = min(lo, rho.min()), max(hi, rho.max())
        dm = max(dm, abs(grid.integrate(rho) - m0) / abs(m0))
    return rho, lo, hi, dm, n


def fitted_order(h, err):
    """Least-squares slope of log(err) against log(h)."""
    return float(np.polyfit(np.log(h), np.log(err), 1)[0])


def rotate_about(omega, t):
    """Rotation matrix exp(t [ω]×)."""
    w = np.linalg.norm(omega)
    k = omega / w
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(w * t) * K + (1 - np.cos(w * t)) * K @ K


def test_registry_is_not_empty():
    assert "ffsl-ppm" in STEPPERS
    assert LIMITERS == ("none", "positive", "monotone")


# ==== conservation ==============================================================================
MASS_CASES = [("nl-case3", 0.0, "gaussian-hills"), ("l2012-divergent", 0.0, "gaussian-hills"),
              ("williamson1", HALF_PI, "cosine-bell")]


@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("case,alpha,field", MASS_CASES)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_mass_conserved_to_round_off(name, case, alpha, field, limiter):
    g = GaussGrid(16)
    c = make_case(case, alpha)
    rho0 = g.cell_average(initial_field(field))
    st = make(name, g, c.velocity, limiter=limiter, courant=0.8)
    rho, *_, dm, n = run(st, rho0, c.period)
    assert n >= 20
    assert dm <= 1e-13, dm
    assert np.abs(rho - rho0).max() > 1e-3 * rho0.max()  # the field did move


@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_mass_conserved_on_the_circle(name, limiter):
    g = CircleGrid(40)
    rng = np.random.default_rng(0)
    rho0 = rng.random(40) + 0.1

    def vel(t, x):  # compressive, time dependent
        th = np.arctan2(x[..., 1], x[..., 0])
        u = 0.3 + np.sin(th - t) * np.cos(t)
        return u[..., None] * np.stack([-np.sin(th), np.cos(th)], -1)

    rho, *_, dm, _ = run(make(name, g, vel, limiter=limiter, courant=2.0), rho0, 7.0)
    assert dm <= 1e-13


# ==== positivity ================================================================================
def zero_background_slotted_cylinders(g):
    # the L2012 slotted cylinders with the background 0.1 removed, so that 0 is the minimum
    return np.maximum(g.cell_average(initial_field("slotted-cylinders")) - 0.1, 0.0)


@pytest.mark.parametrize("limiter", POSITIVE_LIMITERS)
@pytest.mark.parametrize("alpha", [0.05, HALF_PI])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_positive_cosine_bell_solid_body(name, alpha, limiter):
    g = GaussGrid(16)
    rho0 = g.cell_average(initial_field("cosine-bell"))  # zero background
    assert rho0.min() == 0.0
    st = make(name, g, make_case("williamson1", alpha).velocity, limiter=limiter, courant=0.8)
    _, lo, *_ = run(st, rho0, 12.0)
    assert lo >= -1e-14 * rho0.max(), lo


@pytest.mark.parametrize("limiter", POSITIVE_LIMITERS)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_positive_slotted_cylinders_deformational(name, limiter):
    g = GaussGrid(24)
    rho0 = zero_background_slotted_cylinders(g)
    st = make(name, g, make_case("nl-case4").velocity, limiter=limiter, courant=0.8)
    _, lo, *_ = run(st, rho0, 5.0)
    assert lo >= -1e-14 * rho0.max(), lo


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_unlimited_scheme_undershoots_slotted_cylinders(name):
    """Without a limiter PPM undershoots at the cylinder walls: the positivity tests can fail."""
    g = GaussGrid(24)
    rho0 = zero_background_slotted_cylinders(g)
    st = make(name, g, make_case("nl-case4").velocity, limiter="none", courant=0.8)
    _, lo, *_ = run(st, rho0, 5.0)
    assert lo < -0.05 * rho0.max()  # measured −0.48 (relative to max 0.9)


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_positive_limiter_tolerates_round_off_negatives(name):
    import warnings

    g = GaussGrid(8)
    rho = np.ones(g.shape)
    rho[3, :] = -1e-17
    st = make(name, g, make_case("williamson1", 0.3).velocity, limiter="positive")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        st.step(rho, 0.0, 0.1)


# ==== monotonicity ===============================================================================
def square_and_bump(theta):
    return np.where(np.cos(theta) > 0.3, 1.0, 0.2) + 0.5 * np.exp(-20 * (1 - np.cos(theta - 2.0)))


@pytest.mark.parametrize("courant", [0.37, 1.0, 2.71])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_monotone_no_new_extrema_on_circle(name, courant):
    """A uniform speed is the non-divergent flow on S¹; with the monotone limiter no value may
    leave [min ρ0, max ρ0], at any (also non-integer, > 1) Courant number."""
    g = CircleGrid(48)
    rho0 = square_and_bump(g.theta)
    speed = -0.9

    def vel(t, x):
        return speed * np.stack([-x[..., 1], x[..., 0]], -1)

    st = make(name, g, vel, limiter="monotone", courant=courant)
    _, lo, hi, *_ = run(st, rho0, 9.0)
    assert lo >= rho0.min() - 1e-14 and hi <= rho0.max() + 1e-14, (lo, hi)
    # the unlimited parabolas do over- and undershoot on the same data (the test can fail)
    st = make(name, g, vel, limiter="none", courant=courant)
    _, lo, hi, *_ = run(st, rho0, 9.0)
    assert lo < rho0.min() - 1e-3 and hi > rho0.max() + 1e-3


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_monotone_no_new_extrema_zonal_solid_body(name):
    """α = 0: each latitude ring is a periodic line with uniform speed (and v ≡ 0)."""
    g = GaussGrid(16)
    rho0 = g.cell_average(initial_field("slotted-cylinders"))
    st = make(name, g, make_case("williamson1", 0.0).velocity, limiter="monotone", courant=0.8)
    _, lo, hi, *_ = run(st, rho0, 12.0)
    assert lo >= rho0.min() - 1e-14 and hi <= rho0.max() + 1e-14


@pytest.mark.xfail(strict=True, reason=(
    "BUG: the monotone limiter creates new minima in non-divergent 2-D flow. Cosine bells "
    "(background 0.1, max 1) in nl-case4 at nlat 24: min falls to 0.069 (ℓ_min ≈ −0.034), "
    "always in the polar rings, where the split scheme does not keep a constant constant "
    "(see the consistency tests below)."))
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_monotone_no_new_extrema_deformational(name):
    g = GaussGrid(24)
    rho0 = g.cell_average(initial_field("cosine-bells"))
    st = make(name, g, make_case("nl-case4").velocity, limiter="monotone", courant=0.8)
    _, lo, hi, *_ = run(st, rho0, 5.0)
    assert lo >= rho0.min() - 1e-12 and hi <= rho0.max() + 1e-12, (lo, hi)


# ==== constants ==================================================================================
@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_constant_stays_constant_zonal_rotation(name, limiter):
    """α = 0, the split step alone: the zonal index velocity is uniform on every ring and
    v ≡ 0, so each sweep of a constant returns the constant (exactly, up to round-off)."""
    g = GaussGrid(16)
    st = make(name, g, make_case("williamson1", 0.0).velocity, limiter=limiter, courant=2.5,
              polar="split")
    rho, *_ = run(st, np.full(g.shape, 2.5), 12.0)
    assert np.abs(rho - 2.5).max() <= 1e-13


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_constant_under_zonal_rotation_with_the_polar_cap(name):
    """α = 0 with the default polar cap (Courant 2.5, one period): the cap's departure cells are
    traced through the velocity interpolated between its vertices, so a constant is kept only
    to a spatial error that falls fast: max |ρ/2.5 − 1| = 5.5e-4, 7.6e-6, 5.9e-6, 1.5e-6 at
    nlat 16, 24, 32, 48 (fitted order 5.1; the midpoint-rule trace it replaced moved the cells
    outwards by θ²/2 per step and left 0.22 at nlat 16).  Asserted: fitted order ≥ 3 and the
    finest error ≤ 1e-5 (measured 1.5e-6)."""
    nl, errs = np.array([16, 24, 32, 48]), []
    for n in nl:
        g = GaussGrid(int(n))
        st = make(name, g, make_case("williamson1", 0.0).velocity, courant=2.5)
        rho, *_ = run(st, np.full(g.shape, 2.5), 12.0)
        errs.append(float(np.abs(rho / 2.5 - 1.0).max()))
    assert -fitted_order(nl, errs) >= 3.0, errs
    assert errs[-1] <= 1e-5, errs


def constant_rate(stepper, g, t=0.0, dt=1e-5):
    """(S(dt)·1 − 1)/dt per cell: the discrete divergence the scheme applies to a constant
    density (its continuous value is zero for a non-divergent flow)."""
    one = np.ones(g.shape)
    return (stepper.step(one, t - 0.5 * dt, dt) - 1.0) / dt


CONSISTENCY_CASES = [("williamson1", np.pi / 4), ("williamson1", HALF_PI), ("nl-case1", 0.0),
                     ("nl-case4", 0.0)]


#: largest max-over-cells rate on ρ ≡ 1 at nlat 48 (measured: split ≤ 2.1e-3; cap ≤ 6.3e-3), × 1.5–2
CONSISTENCY_MAX = {"split": 3e-3, "auto": 1.2e-2}


@pytest.mark.parametrize("polar, limiter", [("split", "none"), ("split", "positive"),
                                            ("auto", "positive")])
@pytest.mark.parametrize("case,alpha", CONSISTENCY_CASES)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_constant_consistency(name, case, alpha, polar, limiter):
    """Strang splitting of flux-form sweeps does not keep a constant constant in 2-D flow (the
    zonal sweep alone compresses); what must hold is consistency: the rate of change the scheme
    applies to ρ ≡ 1 in a non-divergent flow tends to 0 under refinement.

    Measured on nlat 16, 24, 32, 48 (dt → 0), split step: area-weighted rms order 1.7–2.9,
    max-over-cells order 0.72 (Williamson, unlimited: first order in the polar rings, where
    u ≠ 0 at the pole and the meridian-face flux uses the midpoint rule) to 2.0; asserted 1.5
    and 0.5.  With the default polar cap the max-over-cells rate sits in the cap rings and is
    3–5× the split's (Williamson π/4: 1.05e-2, 7.2e-3, 5.4e-3, 3.7e-3, order 0.9; nl-case1 /
    nl-case4: 6.3e-3 at nlat 48, order 2.0): the departure cells are traced through the
    velocity interpolated bilinearly between the cap vertices, which is not divergence-free.
    """
    c = make_case(case, alpha)
    nl = np.array([16, 24, 32, 48])
    mx, rms = [], []
    for n in nl:
        g = GaussGrid(int(n))
        r = constant_rate(make(name, g, c.velocity, limiter=limiter, polar=polar), g)
        mx.append(float(np.abs(r).max()))
        rms.append(float(np.sqrt(g.integrate(r * r) / (4 * np.pi))))
    assert -fitted_order(nl, rms) >= 1.5, rms
    assert -fitted_order(nl, mx) >= 0.5, mx
    assert mx[-1] < CONSISTENCY_MAX[polar], mx


@pytest.mark.xfail(strict=True, reason=(
    "BUG: the monotone limiter is applied in the meridional sweep to the mass per unit "
    "colatitude ρ·cos φ, which vanishes at the poles and peaks at the equator; the polar cell "
    "is treated as an extremum (its outer neighbour is itself) and flattened.  The rate applied "
    "to ρ ≡ 1 does not converge: Williamson α = π/4: 1.57, 2.35, 3.12, 4.66 at nlat 16, 24, "
    "32, 48 (grows like nlat); nl-case2/4: ≈ 2.0 at every nlat; nl-case1: 1.2.  After one "
    "revolution (α = π/4, nlat 32) a constant 1 becomes up to ≈ 7 in the polar ring."))
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_constant_consistency_monotone_limiter(name):
    c = make_case("williamson1", np.pi / 4)
    nl = np.array([16, 24, 32, 48])
    rates = [np.abs(constant_rate(make(name, GaussGrid(int(n)), c.velocity, limiter="monotone"),
                                  GaussGrid(int(n)))).max() for n in nl]
    assert -fitted_order(nl, rates) >= 0.8 and rates[-1] < 1e-2, rates


@pytest.mark.xfail(strict=True, reason=(
    "Known limitation of Strang-split flux-form sweeps (Lin & Rood use advective inner "
    "operators for this): under tilted solid-body rotation the zonal sweep compresses the "
    "polar rings by a Lipschitz number ~ Courant number, so a constant is not kept: after "
    "t = 1 at Courant 0.8, max |ρ − 1| = 0.23, 0.37, 0.36, 0.63 at nlat 16, 24, 32, 48 "
    "(α = π/4; 0.60, 0.36, 0.50, 0.57 at α = π/2) — O(1) in the polar rings and not "
    "decreasing under refinement."))
@pytest.mark.parametrize("alpha", [np.pi / 4, HALF_PI])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_constant_stays_constant_tilted_rotation(name, alpha):
    g = GaussGrid(16)
    st = make(name, g, make_case("williamson1", alpha).velocity, limiter="none", courant=0.8)
    rho, *_ = run(st, np.ones(g.shape), 1.0)
    assert np.abs(rho - 1.0).max() <= 1e-12


# ==== convergence on the sphere ==================================================================
def reversed_nl_case4(tau):
    """nl-case4 on [0, τ], then exactly backwards on [τ, 2τ]: the exact solution at 2τ is the
    initial condition (a deformational flow, shortened so that nlat ≤ 48 is in range)."""
    c = make_case("nl-case4")

    def vel(t, x):
        return c.velocity(t, x) if t <= tau else -c.velocity(2 * tau - t, x)

    return vel


# measured fitted l2 orders (nlat 16, 24, 32, 48; Courant 0.8): none 3.17, positive 3.03,
# monotone 1.98; l2 at nlat 48: 3.15e-3, 3.15e-3, 1.95e-2.
ORDER_BOUNDS = {"none": (2.5, 5e-3), "positive": (2.5, 5e-3), "monotone": (1.7, 3e-2)}


@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_convergence_order_deformational(name, limiter):
    """Gaussian hills through the time-reversed deformational flow (τ = 0.5 = T/10).

    The scheme is third order in space, second in time; at fixed Courant number the asymptotic
    order is 2, but at these resolutions the spatial error dominates (measured ≈ 3.0–3.2), so
    2.5 is asserted for the unlimited and positive parabolas (a drop to second-order space
    would fail).  The monotone limiter clips smooth peaks (CW84), which limits the l2 order to
    ≈ 2 (measured 1.98): 1.7 is asserted."""
    vel = reversed_nl_case4(0.5)
    nl = np.array([16, 24, 32, 48])
    errs = []
    for n in nl:
        g = GaussGrid(int(n))
        rho0 = g.cell_average(initial_field("gaussian-hills"))
        st = make(name, g, vel, limiter=limiter, courant=0.8)
        steps = 2 * math.ceil(uniform_steps(st, rho0, 1.0) / 2)
        rho, *_ = run(st, rho0, 1.0, n=steps)
        errs.append(error_norms(g, rho, rho0)["l2"])
    order = -fitted_order(nl, errs)
    lower, last = ORDER_BOUNDS[limiter]
    assert order >= lower, (order, errs)
    assert errs[-1] < last, errs


def test_convergence_order_divergent_flow():
    """Gaussian hills through the divergent flow of Lauritzen et al. (2012) over one period
    (the flow reverses: the exact solution at T is the initial field), default scheme (polar
    cap; the flow's poles are stagnation points, so the split gives the same to 3 digits).
    Measured l2: 0.1688, 0.0753, 0.0375 at nlat 32, 48, 64 (fitted order 2.16, local orders 2.0
    then 2.4: pre-asymptotic, rising towards the spatial order 3; the suite's 0.0446 / 0.00478
    at nlat 60 / 120 is order 3.2).  Asserted: ≥ 1.8 (a first-order defect would fit ≤ 1.2) and
    the finest error ≤ 0.05."""
    c = make_case("l2012-divergent")
    nl, errs = np.array([32, 48, 64]), []
    for n in nl:
        g = GaussGrid(int(n))
        rho0 = g.cell_average(initial_field("gaussian-hills"))
        rho, *_ = run(make("ffsl-ppm", g, c.velocity, courant=0.8), rho0, c.period)
        errs.append(error_norms(g, rho, rho0)["l2"])
    assert -fitted_order(nl, errs) >= 1.8, errs
    assert errs[-1] <= 0.05, errs


def single_hill(centre):
    return lambda x: np.exp(-5.0 * np.sum((x - centre) ** 2, axis=-1))


def solid_body_errors(name, alpha, t_end, limiter="positive", nlats=(16, 24, 32, 48), **options):
    """l2 errors of one Gaussian hill started at (3π/2, 0) under Williamson's rotation."""
    c = make_case("williamson1", alpha)
    omega = 2 * np.pi / 12 * np.array([-np.sin(alpha), 0.0, np.cos(alpha)])
    x0 = np.array([0.0, -1.0, 0.0])
    xT = rotate_about(omega, t_end) @ x0
    errs = []
    for n in nlats:
        g = GaussGrid(int(n))
        rho0 = g.cell_average(single_hill(x0))
        st = make(name, g, c.velocity, limiter=limiter, courant=0.8, **options)
        rho, *_ = run(st, rho0, t_end)
        errs.append(error_norms(g, rho, g.cell_average(single_hill(xT)))["l2"])
    return np.array(nlats), errs


@pytest.mark.parametrize("alpha", [0.0, np.pi / 4])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_convergence_order_solid_body(name, alpha):
    """Half a revolution of a smooth hill, away from the poles ('positive' limiter).  Measured
    orders 3.16 (α = 0) and 3.14 (α = π/4); 2.5 asserted as above."""
    nl, errs = solid_body_errors(name, alpha, 6.0)
    assert -fitted_order(nl, errs) >= 2.5, errs


@pytest.mark.xfail(strict=True, reason=(
    "LIMITATION of the split step alone (polar='split'): flow over the poles does not "
    "converge.  A smooth hill carried onto the north pole by Williamson's α = π/2 rotation "
    "(t = 3): l2 = 0.057, 0.075, 0.068, 0.050 at nlat 16, 24, 32, 48 (fitted order 0.15; "
    "'none' limiter; linf up to ≈ 0.75 of the peak); after crossing (t = 6, 'positive') the "
    "order is 1.3.  The error sits in the polar rows; at α = 0 and π/4 the same hill converges "
    "at order 3.1.  The polar cap (the default) fixes it: next test."))
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_convergence_order_over_the_pole_split(name):
    nl, errs = solid_body_errors(name, HALF_PI, 3.0, limiter="none", polar="split")
    assert -fitted_order(nl, errs) >= 1.5, errs


@pytest.mark.parametrize("limiter, t_end", [("positive", 3.0), ("positive", 6.0)])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_convergence_order_over_the_pole(name, limiter, t_end):
    """The same hill with the default polar cap ('positive'): parked on the pole (t = 3) l2 =
    0.0423, 0.0103, 0.00457, 0.00189 at nlat 16, 24, 32, 48 (fitted order 2.83, local orders
    3.5, 2.8, 2.2 falling towards the scheme's 2); after crossing (t = 6) 0.0745, 0.0189,
    0.00725, 0.00266 (3.05).  Asserted: second order (≥ 2.0: a first-order polar
    defect would fit ≤ 1.3, as the split step's does), and the finest error within 2× of the
    measured one (deterministic: only round-off differs between machines)."""
    nl, errs = solid_body_errors(name, HALF_PI, t_end, limiter=limiter)
    assert -fitted_order(nl, errs) >= 2.0, errs
    assert errs[-1] <= 2.0 * {3.0: 0.00189, 6.0: 0.00266}[t_end], errs


# ==== S¹: exact solution for a steady non-uniform speed ==========================================
class CircleFlow:
    """dθ/dt = u(θ) = c + a sin θ (c > |a|).  With ω = sqrt(c² − a²) the lifted phase
    F(θ) = 2 arctan((c tan(θ/2) + a)/ω) advances at rate ω (dF/dθ = ω/u), so the departure point
    of θ after time t is G(F(θ) − ωt), G = F⁻¹.  Density: ρ(t, θ) = ρ0(θ0) u(θ0)/u(θ); the mass
    between two points is the initial mass between their departure points."""

    def __init__(self, c=1.0, a=0.6):
        self.c, self.a, self.w = c, a, math.sqrt(c * c - a * a)

    def u(self, th):
        return self.c + self.a * np.sin(th)

    def F(self, th):
        k = np.round(th / (2 * np.pi))
        r = th - 2 * np.pi * k
        return 2 * np.arctan((self.c * np.tan(r / 2) + self.a) / self.w) + 2 * np.pi * k

    def G(self, ph):
        k = np.round(ph / (2 * np.pi))
        r = ph - 2 * np.pi * k
        return 2 * np.arctan((self.w * np.tan(r / 2) - self.a) / self.c) + 2 * np.pi * k

    def departure(self, th, t):
        return self.G(self.F(th) - self.w * t)

    @staticmethod
    def rho0(th):
        return 1.0 + 0.5 * np.sin(th) + 0.3 * np.cos(2 * th)

    @staticmethod
    def mass0(th):  # antiderivative of rho0, continuous in the lifted angle
        return th - 0.5 * np.cos(th) + 0.15 * np.sin(2 * th)

    def density(self, t, th):
        d = self.departure(th, t)
        return self.rho0(d) * self.u(d) / self.u(th)

    def cell_averages(self, g, t):
        d = self.departure(g.theta_faces, t)
        return np.diff(self.mass0(d)) / g.dtheta

    def velocity(self, t, x):
        th = np.arctan2(x[..., 1], x[..., 0])
        return self.u(th)[..., None] * np.stack([-np.sin(th), np.cos(th)], -1)


def test_circle_exact_solution_is_self_consistent():
    f = CircleFlow()
    ph = np.linspace(-12.0, 12.0, 2001)
    np.testing.assert_allclose(f.F(f.G(ph)), ph, atol=1e-13)
    th = np.linspace(-7.0, 7.0, 2001)
    h = 1e-6
    np.testing.assert_allclose((f.F(th + h) - f.F(th - h)) / (2 * h), f.w / f.u(th), rtol=1e-8)
    # the characteristic solves dθ/dt = u(θ): forward map = G(F(θ0) + ωt)
    th0, t = np.linspace(0, 2 * np.pi, 9), 0.7
    fwd = lambda s: f.G(f.F(th0) + f.w * s)  # noqa: E731
    np.testing.assert_allclose((fwd(t + h) - fwd(t - h)) / (2 * h), f.u(fwd(t)), rtol=1e-8)
    # density formula = derivative of the mass formula; period 2π/ω returns everything
    g = CircleGrid(64)
    pts = np.linspace(0, 2 * np.pi, 50)
    dm = (f.mass0(f.departure(pts + h, t)) - f.mass0(f.departure(pts - h, t))) / (2 * h)
    np.testing.assert_allclose(dm, f.density(t, pts), rtol=1e-7)
    np.testing.assert_allclose(f.cell_averages(g, 2 * np.pi / f.w), f.cell_averages(g, 0.0),
                               atol=1e-12)
    assert g.integrate(f.cell_averages(g, 1.3)) == pytest.approx(2 * np.pi, rel=1e-13)


# measured fitted orders (n = 32, 64, 128, 256, t = 3): Courant 0.8 — none 2.92, positive 2.92,
# monotone 2.01; Courant 3 (time error dominates) — none 2.07.
CIRCLE_BOUNDS = [("none", 0.8, 2.5), ("positive", 0.8, 2.5), ("monotone", 0.8, 1.8),
                 ("none", 3.0, 1.8), ("positive", 3.0, 1.8)]


@pytest.mark.parametrize("limiter,courant,lower", CIRCLE_BOUNDS)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_circle_convergence_to_exact_solution(name, limiter, courant, lower):
    """Cell averages against the exact ones.  Third order in space and second in time: at
    Courant 0.8 the spatial error dominates (assert 2.5, measured 2.9); at Courant 3 the
    second-order time error does (assert 1.8 = 2 − 10 %, measured 2.07).  Monotone: CW84 clips
    the smooth extrema (assert 1.8, measured 2.01)."""
    f = CircleFlow()
    ns = np.array([32, 64, 128, 256])
    errs = []
    for n in ns:
        g = CircleGrid(int(n))
        rho0 = f.cell_averages(g, 0.0)
        st = make(name, g, f.velocity, limiter=limiter, courant=courant)
        rho, *_, dm, _ = run(st, rho0, 3.0)
        assert dm <= 1e-13
        errs.append(np.sqrt(g.integrate((rho - f.cell_averages(g, 3.0)) ** 2)))
    order = -fitted_order(ns, errs)
    assert order >= lower, (order, errs)


@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("shift", [1, 2, 3, -1, -3])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_circle_integer_cell_rotation_is_exact(name, shift, limiter):
    g = CircleGrid(24)
    rng = np.random.default_rng(3)
    rho0 = rng.random(24)  # rough data: only exact shifts reproduce it
    speed = 0.75

    def vel(t, x):
        return speed * np.stack([-x[..., 1], x[..., 0]], -1)

    dt = abs(shift) * g.dtheta / speed
    st = make(name, g, prescribed(lambda t, x: np.sign(shift) * vel(t, x)), limiter=limiter,
              courant=4.0)
    rho = rho0.copy()
    for k in range(5):
        rho = st.step(rho, k * dt, dt)
    np.testing.assert_allclose(rho, np.roll(rho0, 5 * shift), atol=1e-13)


# ==== Courant numbers, sub-stepping, departure order ==============================================
@pytest.mark.parametrize("limiter", POSITIVE_LIMITERS)
@pytest.mark.parametrize("case,alpha,field", MASS_CASES)
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_courant_3_substeps_conserves_and_stays_positive(name, case, alpha, field, limiter):
    g = GaussGrid(16)
    c = make_case(case, alpha)
    rho0 = g.cell_average(initial_field(field))
    st = make(name, g, c.velocity, limiter=limiter, courant=3.0)
    assert st.options()["courant"] == 3.0
    ctl = Controller(st)  # variable steps from stable_dt: the largest the Courant number allows
    res = ctl.run(rho0, (0.0, c.period / 2))
    rho = res.state
    assert res.t == c.period / 2 and res.n_steps < 40
    assert abs(g.integrate(rho) - g.integrate(rho0)) <= 1e-13 * g.integrate(rho0)
    assert rho.min() >= -1e-14 * rho0.max()
    if case == "williamson1":  # the polar rings deform strongly: sweeps must be sub-stepped
        assert st.substeps > 0


def test_stable_dt_is_the_courant_number():
    g = GaussGrid(16)
    c = make_case("williamson1", 0.3)
    st = make("ffsl-ppm", g, c.velocity, courant=2.2)
    dt = st.stable_dt(None, 0.0)
    assert st.courant_number(0.0, dt) == pytest.approx(2.2, rel=1e-14)
    assert dt == pytest.approx(2.2 * (np.pi / 16) / (2 * np.pi / 12), rel=1e-12)  # |u| = u0
    still = make("ffsl-ppm", g, lambda t, x: np.zeros_like(x))
    assert still.stable_dt(None, 0.0) == np.inf


def test_departure_order_error_from_a_direct_sweep():
    n = 16
    q = np.ones((2, n))
    a = 5.0 * np.sin(2 * np.pi * np.arange(n) / n)[None, :].repeat(2, 0)
    assert ffsl.lipschitz_periodic(a).max() > 1.0
    with pytest.raises(ffsl.DepartureOrderError):
        ffsl.sweep_periodic(q, a, 1.0, "positive")
    ffsl.sweep_periodic(q, a, 0.1, "positive")  # deformation number 0.19: fine
    line = ffsl.BoundedLine(np.linspace(0.0, 1.0, 17))
    af = 5.0 * np.sin(2 * np.pi * np.linspace(0.0, 1.0, 17))[None, :]
    assert 0.05 * line.lipschitz(af) > 1.0
    with pytest.raises(ffsl.DepartureOrderError):
        line.sweep(np.full((1, 16), 1 / 16), af, 0.05, "positive")


def sawtooth_circle_velocity(g, scale):
    """Face velocities (cells per unit time) with grid-scale kinks, deformation number
    0.98·0.9 = 0.882 at dt = 1: the midpoint departure rule crosses for this pattern."""
    a = scale * np.array([0, 0, -0.9, -1.8, -2.7, -1.8, -0.9, 0.0])

    def vel(t, x):
        th = np.arctan2(x[..., 1], x[..., 0])
        f = np.round(th / g.dtheta + 0.5).astype(int) % g.n  # faces sit at θ_f = (f − ½)Δθ
        return (a[f] * g.dtheta)[..., None] * np.stack([-np.sin(th), np.cos(th)], -1)

    return vel


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_substepping_below_sqrt3_minus_1_keeps_departures_ordered(name):
    """With midpoint departure points on a piecewise-linear velocity, neighbouring departure
    points stay ordered when L(1 + L/2) < 1, L = dt·max|Δa|, i.e. L < √3 − 1 ≈ 0.73."""
    g = CircleGrid(8)
    st = make(name, g, sawtooth_circle_velocity(g, 0.98), max_lipschitz=0.7)
    rho = st.step(np.ones(8), 0.0, 1.0)
    assert st.substeps > 0 and np.all(rho > 0)
    assert g.integrate(rho) == pytest.approx(2 * np.pi, rel=1e-14)


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_any_allowed_max_lipschitz_keeps_departures_ordered(name):
    g = CircleGrid(8)
    st = make(name, g, sawtooth_circle_velocity(g, 0.98), max_lipschitz=0.7)
    out = st.step(np.ones(8), 0.0, 1.0)  # deformation 0.882 > 0.7: sub-stepped, no crossing
    assert st.substeps > 0
    assert abs(out.sum() - 8.0) < 1e-12 and out.min() >= 0.0


# ==== agreement between steppers =================================================================
@pytest.mark.skipif("meanfield-ffsl" not in STEPPERS, reason="no mean-field stepper registered")
@pytest.mark.parametrize("limiter", LIMITERS)
def test_meanfield_stepper_reduces_to_transport_for_prescribed_velocity(limiter):
    """For a velocity that ignores ρ the midpoint rule's second stage is the transport step
    itself, so both steppers must agree bitwise."""
    g = GaussGrid(16)
    c = make_case("nl-case1")
    rho0 = g.cell_average(initial_field("gaussian-hills"))
    a = make("ffsl-ppm", g, c.velocity, limiter=limiter)
    b = make("meanfield-ffsl", g, c.velocity, limiter=limiter)
    ra, *_ = run(a, rho0, 1.0, n=10)
    rb, *_ = run(b, rho0, 1.0, n=10)
    np.testing.assert_array_equal(ra, rb)


# ==== bad input ==================================================================================
def tangent_rotation(t, x):
    return np.stack([-x[..., 1], x[..., 0], np.zeros_like(x[..., 0])], -1)


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_radial_velocity_refused(name):
    g = GaussGrid(8)
    rho = np.ones(g.shape)
    for f in (lambda t, x: x,  # purely radial
              lambda t, x: tangent_rotation(t, x) + 1e-6 * x):
        st = make(name, g, f)
        with pytest.raises(ValueError, match="radial"):
            st.step(rho, 0.0, 0.1)
        with pytest.raises(ValueError, match="radial"):
            st.stable_dt(rho, 0.0)
    # round-off sized radial parts are accepted
    st = make(name, g, lambda t, x: tangent_rotation(t, x) + 1e-13 * x)
    st.step(rho, 0.0, 0.1)
    # also when the whole field is round-off (a radial attention mean, projected): |v| ~ 1e-16
    st = make(name, g, lambda t, x: 1e-16 * (tangent_rotation(t, x) + x))
    st.step(rho, 0.0, 0.1)
    # a small field that is really radial is still refused
    st = make(name, g, lambda t, x: 1e-6 * x)
    with pytest.raises(ValueError, match="radial"):
        st.step(rho, 0.0, 0.1)


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_circle_radial_velocity_refused(name):
    g = CircleGrid(12)
    st = make(name, g, lambda t, x: np.stack([-x[..., 1], x[..., 0]], -1) + 1e-5 * x)
    with pytest.raises(ValueError, match="radial"):
        st.step(np.ones(12), 0.0, 0.1)


def nan_velocity(t, x):
    v = np.zeros_like(x)
    v[..., 0] = np.nan
    return v


MISSHAPEN = {
    "short-last-axis": lambda t, x: x[..., :1],
    "too-few-points": lambda t, x: x[:3],
    "scalar": lambda t, x: 0.0,
    "extra-axis": lambda t, x: np.zeros(x.shape + (1,)),
}


@pytest.mark.parametrize("grid", [GaussGrid(8), CircleGrid(12)], ids=["sphere", "circle"])
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_non_finite_velocity_refused(name, grid):
    rho = np.ones(grid.shape)
    with pytest.raises(ValueError, match="NaN"):
        make(name, grid, nan_velocity).step(rho, 0.0, 0.1)
    with pytest.raises(ValueError, match="inf"):
        make(name, grid, lambda t, x: np.full_like(x, np.inf)).step(rho, 0.0, 0.1)


@pytest.mark.parametrize("bad", list(MISSHAPEN))
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_misshapen_velocity_refused_circle(name, bad):
    with pytest.raises(ValueError, match="velocity must return an array of shape"):
        make(name, CircleGrid(12), MISSHAPEN[bad]).step(np.ones(12), 0.0, 0.1)


@pytest.mark.parametrize("bad", list(MISSHAPEN))
@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_misshapen_velocity_refused_sphere(name, bad):
    g = GaussGrid(8)
    with pytest.raises(ValueError, match="velocity must return an array of shape"):
        make(name, g, MISSHAPEN[bad]).step(np.ones(g.shape), 0.0, 0.1)


@pytest.mark.parametrize("name", STEPPER_NAMES)
def test_bad_options(name):
    g = GaussGrid(8)
    vel = tangent_rotation
    for bad in (0.0, -1.0, 4.0001, np.nan, np.inf):
        with pytest.raises(ValueError, match="courant"):
            make(name, g, vel, courant=bad)
    with pytest.raises(TypeError, match="courant"):
        make(name, g, vel, courant="fast")
    make(name, g, vel, courant=4.0)  # the upper end is allowed
    for bad in (0.0, -0.1, 0.7001, 0.9, 1.0, np.nan):
        with pytest.raises(ValueError, match="max_lipschitz"):
            make(name, g, vel, max_lipschitz=bad)
    make(name, g, vel, max_lipschitz=0.7)
    for bad in ("minmod", "", None, "Positive"):
        with pytest.raises(ValueError, match="limiter"):
            make(name, g, vel, limiter=bad)
    with pytest.raises(TypeError, match="velocity"):
        make_stepper(name, g, "not a function")
    with pytest.raises(TypeError, match="velocity"):
        make_stepper(name, g, None)
    with pytest.raises(TypeError, match="grid"):
        make(name, "S2", vel)
    with pytest.raises(TypeError):
        make(name, g, vel, cfl=0.5)  # unknown keyword


def test_unknown_stepper_name():
    with pytest.raises(ValueError, match="unknown stepper 'rk4'"):
        make_stepper("rk4", GaussGrid(8), prescribed(tangent_rotation))
