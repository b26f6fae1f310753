"""The standard transport cases (Williamson 1992, Nair & Lauritzen 2010, Lauritzen 2012):
velocities, initial fields and error norms, checked against their definitions
(docs/transport-references.md).  Fixed seeds, fast."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.validation.transport_cases import (
    CASES,
    FIELDS,
    error_norms,
    initial_field,
    make_case,
)

ALPHAS = [0.0, 0.05, np.pi / 4, np.pi / 2 - 0.05, np.pi / 2]
CASE_ALPHA = [("williamson1", a) for a in ALPHAS] + [(c, 0.0) for c in CASES if c != "williamson1"]
DIVERGENT = {"nl-case3", "l2012-divergent"}


def random_points(n, seed):
    p = np.random.default_rng(seed).standard_normal((n, 3))
    return p / np.linalg.norm(p, axis=-1, keepdims=True)


def surface_divergence(vel, t, x, h=1e-5):
    """div_S v at unit points x by central differences of the degree-0 extension v(y/|y|):
    its full R³ divergence equals the surface divergence (the radial derivative vanishes and
    ⟨x, Dv·x⟩ = 0), to O(h²)."""
    def ext(y):
        return vel(t, y / np.linalg.norm(y, axis=-1, keepdims=True))

    div = np.zeros(x.shape[:-1])
    for k in range(3):
        e = np.zeros(3)
        e[k] = h
        div += (ext(x + e)[..., k] - ext(x - e)[..., k]) / (2 * h)
    return div


def test_registry_of_cases():
    assert set(CASES) == {"williamson1", "nl-case1", "nl-case2", "nl-case3", "nl-case4",
                          "l2012-divergent"}
    for name in CASES:
        c = make_case(name)
        assert c.name == name
        assert c.divergent == (name in DIVERGENT)
        assert c.period == (12.0 if name == "williamson1" else 5.0)
        assert c.default_field in FIELDS
    assert make_case("williamson1").default_field == "cosine-bell"


@pytest.mark.parametrize("name,alpha", CASE_ALPHA)
def test_velocity_is_tangent_and_finite(name, alpha):
    c = make_case(name, alpha)
    x = random_points(400, 1)
    x = np.concatenate([x, [[0, 0, 1.0], [0, 0, -1.0], [1.0, 0, 0]]])  # poles and λ = 0
    for t in (0.0, 0.37 * c.period, 0.5 * c.period, c.period):
        v = c.velocity(t, x)
        assert v.shape == x.shape and np.all(np.isfinite(v))
        assert np.abs(np.sum(v * x, axis=-1)).max() <= 1e-15 * max(1.0, np.abs(v).max())
        if t == 0.0:
            assert np.abs(v).max() > 0.1  # not trivially zero (NL flows stop at T/2)
    # batched leading axes are kept
    assert c.velocity(0.3, x[:12].reshape(3, 4, 3)).shape == (3, 4, 3)


@pytest.mark.parametrize("name,alpha", CASE_ALPHA)
def test_velocity_single_valued_at_the_poles(name, alpha):
    """(u, v) in the lon/lat basis must give one Cartesian vector at a pole, whatever λ."""
    c = make_case(name, alpha)
    lon = np.linspace(0.0, 2 * np.pi, 13)[:-1]
    for pole in (1, -1):
        x = lonlat_to_xyz(lon, np.full_like(lon, pole * (np.pi / 2 - 1e-9)))
        for t in (0.0, 0.3 * c.period):
            v = c.velocity(t, x)
            assert np.abs(v - v.mean(axis=0)).max() < 1e-7 * max(1.0, np.abs(v).max())


@pytest.mark.parametrize("name,alpha", CASE_ALPHA)
def test_divergence(name, alpha):
    c = make_case(name, alpha)
    x = random_points(300, 2)
    for t in (0.0, 0.21 * c.period, 0.73 * c.period):
        div = surface_divergence(c.velocity, t, x)
        if c.divergent:
            assert np.abs(div).max() > 0.1  # the check below can fail
        else:
            assert np.abs(div).max() < 1e-8, np.abs(div).max()


@pytest.mark.parametrize("alpha", ALPHAS)
def test_williamson_is_solid_body_rotation(alpha):
    c = make_case("williamson1", alpha)
    u0 = 2 * np.pi / 12.0
    omega = u0 * np.array([-np.sin(alpha), 0.0, np.cos(alpha)])  # axis tilted by α towards −x
    x = random_points(200, 3)
    np.testing.assert_allclose(c.velocity(1.3, x), np.cross(omega, x), atol=1e-15)
    # equatorial speed at α = 0 is u0 = 2π a / 12 days (a = 1, day = 1)
    if alpha == 0.0:
        np.testing.assert_allclose(c.velocity(0.0, np.array([[1.0, 0, 0]])), [[0, u0, 0]])


@pytest.mark.parametrize("name", ["nl-case1", "nl-case2", "nl-case3"])
def test_reversing_flows_are_antisymmetric_in_time(name):
    c = make_case(name)
    x = random_points(100, 4)
    for t in (0.0, 0.9, 2.0):
        np.testing.assert_allclose(c.velocity(c.period - t, x), -c.velocity(t, x), atol=1e-14)


@pytest.mark.parametrize("name,alpha", CASE_ALPHA)
def test_flow_returns_every_point_after_one_period(name, alpha):
    """The exact solution at t = T is the initial condition: characteristics close."""
    c = make_case(name, alpha)
    x0 = random_points(6, 5)

    def rhs(t, y):
        x = y.reshape(-1, 3)
        x = x / np.linalg.norm(x, axis=-1, keepdims=True)
        return c.velocity(t, x).ravel()

    sol = solve_ivp(rhs, (0.0, c.period), x0.ravel(), method="DOP853", rtol=1e-10, atol=1e-12)
    xT = sol.y[:, -1].reshape(-1, 3)
    np.testing.assert_allclose(xT, x0, atol=1e-7)
    # and the flow really moved the points half way through (the check above can fail)
    half = solve_ivp(rhs, (0.0, 0.5 * c.period), x0.ravel(), method="DOP853", rtol=1e-8)
    assert np.abs(half.y[:, -1] - x0.ravel()).max() > 0.1


# ---- initial fields --------------------------------------------------------------------------
CENTRES = [(5 * np.pi / 6, 0.0), (7 * np.pi / 6, 0.0)]


def test_gaussian_hills():
    f = initial_field("gaussian-hills")
    c = lonlat_to_xyz(*np.array(CENTRES).T)
    peak = 0.95 * (1.0 + np.exp(-5.0 * 1.0))  # the other hill, at chordal distance² 1, adds e^{-5}
    np.testing.assert_allclose(f(c), [peak, peak], rtol=1e-15)
    # the hills overlap a little, so the maximum sits slightly inside the pair: 0.95 + tiny
    lon = np.linspace(2.0, 3.0, 100001)
    top = f(lonlat_to_xyz(lon, 0 * lon)).max()
    assert peak <= top <= peak + 1e-3
    assert 0.95 < top < 0.957
    v = f(random_points(20000, 6))
    assert v.max() <= top + 1e-12 and v.min() > 0.0
    np.testing.assert_allclose(f(np.array([[0, 0, 1.0]])), 2 * 0.95 * np.exp(-10.0), rtol=1e-14)


def test_cosine_bells():
    f = initial_field("cosine-bells")
    c = lonlat_to_xyz(*np.array(CENTRES).T)
    np.testing.assert_allclose(f(c), [1.0, 1.0], rtol=1e-15)
    x = random_points(20000, 7)
    v = f(x)
    assert v.min() == pytest.approx(0.1, abs=1e-15) and v.max() <= 1.0
    np.testing.assert_allclose(f(np.array([[0, 0, 1.0], [1.0, 0, 0]])), 0.1)  # background
    # on the bell edge (great-circle distance R/2 = 0.5 from a centre) the bell vanishes
    edge = lonlat_to_xyz(5 * np.pi / 6, 0.5 - 1e-9)
    assert f(edge[None])[0] == pytest.approx(0.1, abs=1e-9)
    half = lonlat_to_xyz(5 * np.pi / 6, 0.25)  # half-way: 0.1 + 0.9·½(1 + cos(π/2))
    assert f(half[None])[0] == pytest.approx(0.55, abs=1e-14)


def test_slotted_cylinders():
    f = initial_field("slotted-cylinders")
    v = f(random_points(20000, 8))
    assert set(np.unique(v).tolist()) == {0.1, 1.0}
    R = 0.5
    pts = {
        (5 * np.pi / 6 + 0.2, 0.0): 1.0,    # body of the first cylinder
        (5 * np.pi / 6, 0.0): 0.1,          # in its slot
        (5 * np.pi / 6, 0.1): 0.1,          # slot is open to the north for the first
        (5 * np.pi / 6, -0.3): 1.0,         # closed below −5R/12 (the "tail")
        (7 * np.pi / 6, 0.0): 0.1,          # second cylinder: slot
        (7 * np.pi / 6, 0.3): 1.0,          # closed above +5R/12
        (7 * np.pi / 6, -0.1): 0.1,         # open to the south
        (7 * np.pi / 6 - 0.2, 0.0): 1.0,
        (np.pi, 0.0): 0.1,                  # between the cylinders
        (0.0, 0.0): 0.1,
    }
    lon, lat = np.array(list(pts)).T
    np.testing.assert_array_equal(f(lonlat_to_xyz(lon, lat)), list(pts.values()))
    # area fraction: two discs of radius R minus their slots, against the sphere
    g = GaussGrid(64)
    frac = g.integrate(f(g.xyz) > 0.5) / (4 * np.pi)
    disc = 2 * np.pi * (1 - np.cos(R)) / (4 * np.pi)
    assert 1.5 * disc < frac < 2.0 * disc


def test_williamson_cosine_bell():
    f = initial_field("cosine-bell")
    c = lonlat_to_xyz(3 * np.pi / 2, 0.0)
    assert f(c[None])[0] == pytest.approx(1000.0, rel=1e-15)
    v = f(random_points(20000, 9))
    assert v.min() == 0.0 and v.max() <= 1000.0
    assert f(lonlat_to_xyz(3 * np.pi / 2 + 1 / 3 + 1e-9, 0.0)[None])[0] == 0.0  # radius a/3
    assert f(lonlat_to_xyz(3 * np.pi / 2 + 1 / 6, 0.0)[None])[0] == pytest.approx(500.0)
    # total: ∫ h0/2 (1 + cos(π r/R)) over the cap r < R (exact by quadrature in r)
    r = np.linspace(0, 1 / 3, 20001)
    integrand = 500.0 * (1 + np.cos(3 * np.pi * r)) * 2 * np.pi * np.sin(r)
    exact = np.trapezoid(integrand, r)
    g = GaussGrid(64)
    assert g.integrate(g.cell_average(f)) == pytest.approx(exact, rel=2e-3)


@pytest.mark.parametrize("name", FIELDS)
def test_fields_accept_batches(name):
    f = initial_field(name)
    x = random_points(24, 10)
    np.testing.assert_array_equal(f(x.reshape(2, 3, 4, 3)), f(x).reshape(2, 3, 4))


# ---- error norms -----------------------------------------------------------------------------
def test_error_norms_zero_for_identical_fields():
    g = GaussGrid(8)
    psi = g.cell_average(initial_field("cosine-bells"))
    e = error_norms(g, psi, psi.copy())
    assert e == {"l1": 0.0, "l2": 0.0, "linf": 0.0, "lmax": 0.0, "lmin": 0.0}


def test_error_norms_hand_made_example():
    g = GaussGrid(4)
    A = g.weights * g.dlon  # ring areas per cell (4 rings)
    exact = np.ones(g.shape)
    exact[0, :] = 3.0  # northern polar ring at 3, rest at 1
    psi = exact.copy()
    psi[1, 2] += 0.5   # one overshoot in ring 1
    psi[3, 0] -= 0.25  # one undershoot in ring 3
    nlon = g.nlon
    I_abs_exact = nlon * (3 * A[0] + A[1] + A[2] + A[3])
    I_sq_exact = nlon * (9 * A[0] + A[1] + A[2] + A[3])
    expected = {
        "l1": (0.5 * A[1] + 0.25 * A[3]) / I_abs_exact,
        "l2": np.sqrt((0.25 * A[1] + 0.0625 * A[3]) / I_sq_exact),
        "linf": 0.5 / 3.0,
        "lmax": (3.0 - 3.0) / 2.0,   # max ψ = 3 (ring 0) is unchanged
        "lmin": (0.75 - 1.0) / 2.0,
    }
    got = error_norms(g, psi, exact)
    assert set(got) == set(expected)
    for k in expected:
        assert got[k] == pytest.approx(expected[k], rel=1e-14, abs=1e-16), k
    # with the overshoot above the global max, lmax sees it
    psi[0, 1] = 3.4
    assert error_norms(g, psi, exact)["lmax"] == pytest.approx(0.2, rel=1e-14)
    assert all(isinstance(v, float) for v in got.values())


# ---- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["williamson", "nl-case5", "", "NL-CASE1"])
def test_bad_case(bad):
    with pytest.raises(ValueError, match="case"):
        make_case(bad)


@pytest.mark.parametrize("bad", [-0.1, np.pi / 2 + 1e-6, np.pi, np.nan, np.inf, -np.inf])
def test_bad_alpha(bad):
    with pytest.raises(ValueError, match="alpha"):
        make_case("williamson1", bad)


@pytest.mark.parametrize("bad", ["gaussian", "cosine_bells", "", "slotted-cylinder"])
def test_bad_field(bad):
    with pytest.raises(ValueError, match="field"):
        initial_field(bad)
