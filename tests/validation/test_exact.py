"""Exact solutions by characteristics (spherepde.validation.exact) against independent
constructions: a finite-volume flux estimate of the surface divergence, the closed-form
characteristics of docs/equations.md for symmetric A = VBᵀ (scipy ``solve_ivp``), a finite-difference
Jacobian of the inverse flow map, and mass conservation on the Gauss grid."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from spherepde.grids import GaussGrid
from spherepde.validation.exact import ZeroTemperatureFlow, characteristics_solution
from conftest import fitted_order, random_orthogonal as random_rotation, unit


def symmetric_config(seed, eig=(0.5, 0.1, -0.3)):
    """B non-symmetric with singular values (1.3, 1, 0.7); A = VBᵀ symmetric with the given
    eigenvalues (V := A B^{−T})."""
    rng = np.random.default_rng(seed)
    B = random_rotation(rng) @ np.diag([1.3, 1.0, 0.7]) @ random_rotation(rng)
    R = random_rotation(rng)
    A = R @ np.diag(eig) @ R.T
    V = A @ np.linalg.inv(B.T)
    return B, V, A


def vmf(c, kappa):
    k = kappa / (2 * np.pi * (1 - np.exp(-2 * kappa)))
    return lambda X: k * np.exp(kappa * (X @ c - 1.0))


# ---- divergence ----------------------------------------------------------------------------------
def cap_flux_average(flow, x0, r, n=64):
    """(1/|cap|) ∮ u·n ds over the geodesic circle of radius r about x0 (divergence theorem:
    the mean of div_S u over the cap).  Trapezoid rule in the angle: spectral for the smooth
    periodic integrand."""
    a = unit(np.cross(x0, [0.3, 0.1, 1.0]))
    b = np.cross(x0, a)
    ph = 2 * np.pi * np.arange(n) / n
    c = np.cos(ph)[:, None] * a + np.sin(ph)[:, None] * b
    p = np.cos(r) * x0 + np.sin(r) * c          # boundary points
    nrm = -np.sin(r) * x0 + np.cos(r) * c       # outward unit conormal, tangent at p
    flux = np.mean(np.sum(flow.velocity(p) * nrm, axis=1)) * 2 * np.pi * np.sin(r)
    return flux / (2 * np.pi * (1 - np.cos(r)))


@pytest.mark.parametrize("seed", range(3))
def test_divergence_matches_flux_estimate(seed):
    rng = np.random.default_rng(seed)
    B, V = rng.normal(size=(2, 3, 3))  # general (A = VBᵀ need not be symmetric here)
    flow = ZeroTemperatureFlow(B, V)
    for x0 in unit(rng.normal(size=(8, 3))):
        d = flow.divergence(x0[None])[0]
        # the cap mean is div(x0) + c r² + O(r⁴); Richardson on r, r/2 removes the r² term.
        # With r = 4e-3 the remainder is O(r⁴ ‖u‖_{C⁴}) ≈ 1e-9 (measured ≤ 2e-8 at r = 1e-2)
        # and the rounding of the flux sum is eps·2/r ≈ 1e-13
        r = 4e-3
        est = (4 * cap_flux_average(flow, x0, r / 2) - cap_flux_average(flow, x0, r)) / 3
        assert abs(est - d) <= 1e-6 * max(1.0, abs(d)), (x0, d, est)


def test_divergence_on_circle():
    """d = 2: div_S u = d/dθ (u·t) along S¹; central differences, O(h²) = 1e-10."""
    rng = np.random.default_rng(7)
    B, V = rng.normal(size=(2, 2, 2))
    flow = ZeroTemperatureFlow(B, V)
    th = rng.uniform(0, 2 * np.pi, 20)
    h = 1e-5

    def ut(t):
        x = np.stack([np.cos(t), np.sin(t)], -1)
        tan = np.stack([-np.sin(t), np.cos(t)], -1)
        return np.sum(flow.velocity(x) * tan, axis=-1)

    fd = (ut(th + h) - ut(th - h)) / (2 * h)
    exact = flow.divergence(np.stack([np.cos(th), np.sin(th)], -1))
    np.testing.assert_allclose(exact, fd, rtol=0, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_velocity_tangent():
    rng = np.random.default_rng(8)
    B, V = rng.normal(size=(2, 3, 3))
    x = unit(rng.normal(size=(100, 3)))
    u = ZeroTemperatureFlow(B, V).velocity(x)
    assert np.abs(np.sum(u * x, axis=1)).max() <= 1e-14


# ---- closed form for symmetric A -------------------------------------------------------------------
class ClosedForm:
    """x(t) = e^{s(t)A}x0/|e^{s(t)A}x0|, ds/dt = 1/|Bᵀx(t)| (docs/equations.md), by solve_ivp on s."""

    def __init__(self, B, A):
        self.B = B
        self.lam, self.U = np.linalg.eigh(A)

    def normalised(self, s, x0):
        return unit(self.U @ (np.exp(s * self.lam) * (self.U.T @ x0)))

    def map(self, x0, t):
        """Φ_t(x0) (t < 0: the inverse map Φ_{|t|}^{-1})."""
        sign = np.sign(t)

        def rhs(_, s):
            return [sign / np.linalg.norm(self.normalised(s[0], x0) @ self.B)]

        sol = solve_ivp(rhs, (0.0, abs(t)), [0.0], method="DOP853", rtol=1e-12, atol=1e-14)
        return self.normalised(sol.y[0, -1], x0)


def test_closed_form_is_the_flow_of_the_velocity():
    """Independent of characteristics_solution: integrate dx/dt = u(x) itself."""
    B, V, A = symmetric_config(1)
    flow = ZeroTemperatureFlow(B, V)
    cf = ClosedForm(B, A)
    rng = np.random.default_rng(10)
    for x0 in unit(rng.normal(size=(5, 3))):
        sol = solve_ivp(lambda _, x: flow.velocity(unit(x)[None])[0], (0.0, 1.0), x0,
                        method="DOP853", rtol=1e-12, atol=1e-14)
        # two solve_ivp runs at rtol 1e-12 over an O(1) Lipschitz flow: ≈ 1e-11
        np.testing.assert_allclose(unit(sol.y[:, -1]), cf.map(x0, 1.0), rtol=0, atol=1e-9)


def test_characteristics_solution_against_closed_form():
    """ρ(t, x) = ρ0(Φ_t^{-1}x)·J(x).  With ρ0 ≡ 1 characteristics_solution returns J, and with
    ρ0 = the k-th coordinate it returns (Φ_t^{-1}x)_k·J: so the foot of the characteristic and
    the Jacobian are both read off and compared with the closed form (foot) and a central
    finite-difference Jacobian of the closed-form inverse map (J = |∂_a Ψ × ∂_b Ψ|)."""
    B, V, A = symmetric_config(1, eig=(0.9, 0.1, -0.7))
    flow = ZeroTemperatureFlow(B, V)
    cf = ClosedForm(B, A)
    rng = np.random.default_rng(11)
    x = unit(rng.normal(size=(6, 3)))
    t = 1.0
    J = characteristics_solution(flow, lambda y: np.ones(y.shape[:-1]), x, t)
    foot = np.stack([characteristics_solution(flow, lambda y, k=k: y[..., k], x, t)
                     for k in range(3)], -1) / J[:, None]
    h = 1e-4
    for xi, fi, Ji in zip(x, foot, J):
        # RK4 with 100 steps (error ∝ steps⁻⁴, see below): measured ≤ 8e-11
        np.testing.assert_allclose(fi, cf.map(xi, -t), rtol=0, atol=1e-9)
        a = unit(np.cross(xi, [1.0, 0.0, 0.0]))
        b = np.cross(xi, a)
        da = (cf.map(unit(xi + h * a), -t) - cf.map(unit(xi - h * a), -t)) / (2 * h)
        db = (cf.map(unit(xi + h * b), -t) - cf.map(unit(xi - h * b), -t)) / (2 * h)
        J_fd = np.linalg.norm(np.cross(da, db))
        # FD error O(h²) ≈ 1e-8 plus solve_ivp noise rtol/h ≈ 1e-8 (measured ≤ 2.4e-8 relative)
        assert abs(J_fd / Ji - 1) <= 1e-6, (J_fd, Ji)


def test_characteristics_solution_rk4_order():
    B, V, _ = symmetric_config(2, eig=(0.9, 0.1, -0.7))
    flow = ZeroTemperatureFlow(B, V)
    rng = np.random.default_rng(12)
    x = unit(rng.normal(size=(20, 3)))
    rho0 = vmf(unit([1.0, 2.0, -1.0]), 2.0)
    ref = characteristics_solution(flow, rho0, x, 1.0, steps=800)
    steps = (25, 50, 100)
    err = [np.abs(characteristics_solution(flow, rho0, x, 1.0, steps=n) - ref).max() for n in steps]
    # classical RK4 on both the position and log J: order 4 (measured ≈ 4.0)
    assert fitted_order(steps, err) >= 3.8, err
    # the default (100·t steps) is at the documented accuracy
    default = characteristics_solution(flow, rho0, x, 1.0)
    assert np.abs(default - ref).max() <= 1e-9 * ref.max()


def test_characteristics_solution_conserves_mass():
    """∫ρ_t dσ = ∫ρ0 dσ = 1.  ρ_t is smooth, so the Gauss rule on point values converges
    spectrally (measured |∫ρ_t − 1|: 5.9e-3, 8.3e-5, 2.7e-8 at nlat 8, 16, 32); a wrong
    Jacobian would leave an O(1) plateau instead.  Order ≥ 2 is the floor asked for; the
    last value must be near the RK4 floor (≈ 1e-9)."""
    B, V, _ = symmetric_config(1)
    flow = ZeroTemperatureFlow(B, V)
    rho0 = vmf(unit([1.0, 2.0, -1.0]), 3.0)
    nl = (8, 16, 32)
    errs = []
    for nlat in nl:
        g = GaussGrid(nlat)
        assert abs(g.integrate(rho0(g.xyz)) - 1) <= 1e-11  # the initial mass itself
        errs.append(abs(g.integrate(characteristics_solution(flow, rho0, g.xyz, 1.0)) - 1))
    assert fitted_order(nl, errs) >= 2.0, errs
    assert errs[-1] <= 1e-7, errs


def test_characteristics_solution_identity_at_t0_and_shape():
    B, V, _ = symmetric_config(3)
    flow = ZeroTemperatureFlow(B, V)
    rho0 = vmf(unit([0.0, 1.0, 1.0]), 4.0)
    g = GaussGrid(8)
    out = characteristics_solution(flow, rho0, g.xyz, 1e-300, steps=1)
    assert out.shape == g.shape
    np.testing.assert_allclose(out, rho0(g.xyz), rtol=1e-14)
