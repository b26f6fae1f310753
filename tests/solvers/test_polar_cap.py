"""The opt-in polar cap of the FFSL–PPM sphere transport (``FFSLSphere(polar="cap")``,
:mod:`spherepde.solvers.eulerian.polar_cap`): Williamson 1 across the poles, mass, positivity,
``polar="split"`` bit for bit the default, and bad options.

Williamson 1, cosine bell, α = π/2, Courant 0.8, ``positive`` limiter, one period, through
:func:`spherepde.experiments.transport.run_transport` (what ``spherepde validate transport``
runs).  Measured on this branch (l2):

    nlat        32       64       128
    split      0.160    0.0629   0.0197     orders 1.35 (32→64), 1.68 (64→128)
    cap K=4    0.196    0.0227   0.00470    orders 3.11 (32→64), 2.27 (64→128)

The scheme is deterministic, so between machines only round-off differs (relative ~1e-12
after a period).  Error model for the bounds: l2 ≈ C h^p with p the measured local order.
The bounds are the issue targets: l2 ≤ 0.054 at 64, ≤ 0.0063 at 128, order ≥ 1.8. The measured
values meet them by factors 2.4 and 1.3, and by +0.47 in order. Between 32 and 64 the cap's
order (3.1) is pre-asymptotic: at nlat 32 the 4 cap rings cover a quarter of each hemisphere,
and the cap is slightly worse than the split there. So the bound on the order there is "at
least the split's + 1" (1.35 + 1 = 2.35, margin 0.76) and ≥ 2.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.experiments.transport import TransportConfig, fixed_dt, run_transport
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.eulerian import polar_cap
from spherepde.solvers.eulerian.meanfield import MeanFieldFFSL
from spherepde.solvers.eulerian.spde import SPDEFFSL
from spherepde.solvers.eulerian.transport import FFSLSphere
from spherepde.validation.transport_cases import initial_field, make_case

HALF_PI = math.pi / 2


def _run(nlat, polar, alpha=HALF_PI):
    return run_transport(TransportConfig(case="williamson1", field="cosine-bell", nlat=nlat,
                                         alpha=alpha, polar=polar), progress=False)


def _order(coarse, fine):
    return math.log(coarse["l2"] / fine["l2"]) / math.log(fine["nlat"] / coarse["nlat"])


@pytest.fixture(scope="module")
def runs():
    return {(n, p): _run(n, p) for n in (32, 64) for p in ("split", "cap")}


def test_williamson1_over_the_poles_meets_the_target_and_beats_the_split(runs):
    cap32, cap64 = runs[32, "cap"], runs[64, "cap"]
    split_order = _order(runs[32, "split"], runs[64, "split"])
    cap_order = _order(cap32, cap64)
    assert math.isfinite(cap64["l2"]) and cap64["l2"] <= 0.054
    assert cap64["l2"] < 0.5 * runs[64, "split"]["l2"]
    assert cap_order >= max(2.0, split_order + 1.0), (cap_order, split_order)
    for r in (cap32, cap64):
        assert r["polar"] == "cap" and r["cap_rings"] == 4
        assert abs(r["mass_error"]) <= 1e-13
        # the cap is ≥ 0 exactly (below); the split rings keep the split's own round-off
        assert r["min_value"] >= -1e-14 * r["max_value"]


def test_cap_rings_are_nonnegative_every_step_and_mass_is_exact():
    g = GaussGrid(32)
    case = make_case("williamson1", HALF_PI)
    rho = g.cell_average(initial_field("cosine-bell"))
    st = make_stepper("ffsl-ppm", g, case.velocity, polar="cap")
    dt, n = fixed_dt(st, case.period, 0.8)
    m0 = g.integrate(rho)
    rows = np.r_[0:4, g.nlat - 4:g.nlat]
    cap_min = np.inf
    for k in range(n):
        rho = st.step(rho, k * dt, dt)
        cap_min = min(cap_min, float(rho[rows].min()))
        assert abs(g.integrate(rho) - m0) <= 1e-13 * m0
    assert cap_min >= 0.0 and np.all(np.isfinite(rho))


def test_the_cap_is_the_default_from_nlat_8_and_split_is_the_split_step():
    """polar="auto" (the default) is the cap with min(4, nlat/4) rings from nlat 8 on and the
    split step below; the cap changes only the cap rings' values after one step."""
    case = make_case("williamson1", HALF_PI)
    for nlat, rings in ((8, 2), (12, 3), (16, 4), (64, 4)):
        st = FFSLSphere(GaussGrid(nlat), case.velocity)
        assert st.polar == "cap" and st.cap_rings == rings and st.options()["cap_rings"] == rings
    assert FFSLSphere(GaussGrid(6), case.velocity).polar == "split"
    assert "cap_rings" not in FFSLSphere(GaussGrid(6), case.velocity).options()
    g = GaussGrid(16)
    rho0 = g.cell_average(initial_field("cosine-bell"))
    a = FFSLSphere(g, case.velocity)
    b = FFSLSphere(g, case.velocity, polar="cap", cap_rings=4)
    s = FFSLSphere(g, case.velocity, polar="split")
    ra, rb = rho0, rho0
    dt = a.stable_dt(rho0, 0.0)
    for k in range(5):
        ra, rb = a.step(ra, k * dt, dt), b.step(rb, k * dt, dt)
    assert np.array_equal(ra, rb) and a.options() == b.options()
    rc, rs = a.step(rho0, 0.0, dt), s.step(rho0, 0.0, dt)
    assert np.array_equal(rc[4:-4], rs[4:-4])
    assert s.options()["polar"] == "split" and "cap_rings" not in s.options()


def test_fit_cap_mass_clips_round_off_and_keeps_the_split_mass():
    split = np.array([[1.0, 2.0], [0.5, 0.5]])
    remap = np.array([[3.0, -1e-15], [1.0, 0.0]])
    out = polar_cap.fit_cap_mass(remap, split, scale=3.0)
    assert out.min() == 0.0 and out.sum() == pytest.approx(split.sum(), rel=1e-15)
    # a real negative (below the round-off band) is not hidden
    assert polar_cap.fit_cap_mass(np.array([[3.0, -1.0]]), np.array([[1.0, 1.0]]), 3.0).min() < 0
    # an empty cap (Σ split ≤ 0) is set to zero
    assert np.array_equal(polar_cap.fit_cap_mass(remap, np.array([[1e-30, -2e-30], [0, 0]]), 3.0),
                          np.zeros((2, 2)))


@pytest.mark.parametrize("kwargs, match", [
    ({"polar": "bogus"}, r"polar must be one of \('auto', 'split', 'cap'\)"),
    ({"polar": "cap", "cap_rings": 1}, r"cap_rings must be an integer in \[2, nlat/4\] = \[2, 4\]"),
    ({"polar": "cap", "cap_rings": 5}, r"cap_rings must be an integer in \[2, nlat/4\]"),
    ({"polar": "cap", "cap_rings": 2.5}, "cap_rings must be None or an integer"),
    ({"polar": "cap", "cap_rings": True}, "cap_rings must be None or an integer"),
])
def test_bad_options(kwargs, match):
    g = GaussGrid(16)
    with pytest.raises(ValueError, match=match):
        FFSLSphere(g, make_case("williamson1").velocity, **kwargs)
    with pytest.raises(ValueError, match=match):
        TransportConfig(case="williamson1", field="cosine-bell", nlat=16,
                        **{k: v for k, v in kwargs.items()})


@pytest.mark.parametrize("dt", [0.0, -1.0, float("nan"), "0.1"])
def test_bad_spde_dt(dt):
    g, noise, path = _noise_path(16, 1.0)
    with pytest.raises(ValueError, match="dt must be None or a positive finite number"):
        SPDEFFSL(g, None, noise=noise, path=path, dt=dt)


@pytest.mark.parametrize("buffer", [0, 13, 2.0, True])
def test_bad_cap_buffer(buffer):
    with pytest.raises(ValueError, match=r"cap_buffer must be None or an integer in \[1, nlat − "
                                         r"cap_rings\] = \[1, 12\]"):
        FFSLSphere(GaussGrid(16), make_case("williamson1").velocity, polar="cap", cap_buffer=buffer)


def test_advance_needs_the_cap_velocities():
    g = GaussGrid(16)
    st = FFSLSphere(g, make_case("williamson1").velocity, polar="cap")
    az, am, _ = st.face_velocities(st.velocity(0.0, st.points))
    with pytest.raises(ValueError, match="advance needs v_cap"):
        st.advance(np.ones((g.nlat, g.nlon)), az, am, 0.01)
    assert FFSLSphere(g, make_case("williamson1").velocity, polar="split").cap_points is None


def _noise_path(nlat, t_end):
    """The grid, noise field and Brownian path of ``validate sync-path`` (its run configuration)."""
    from spherepde.runs.config import RunConfig
    from spherepde.runs.build import build
    from spherepde.experiments.sync_path import SyncPathConfig

    raw = SyncPathConfig(nlat=nlat, t_end=t_end, output_every=t_end, scheme="ffsl-ppm").run_config()
    model = build(RunConfig.from_dict(raw))
    return model.grid, model.noise, model.path


def test_cap_under_noise_is_positive_conservative_and_falls_back_when_the_buffer_is_left():
    """spde-ffsl with the cap: the noise is evaluated at the cap vertices too.  A sync-path step
    (ReLU noise, n_max 4, Δt = 0.01, nlat 24): with the buffer of cap_buffer_for no departure
    point leaves it; with a one-ring buffer some do, and that cap keeps the split step's values
    (counted) — either way mass to round-off, ≥ 0, and the same bits on a rerun."""
    from spherepde.solvers.eulerian.spde import cap_buffer_for

    g, noise, path = _noise_path(24, 1.0)
    rho0 = np.exp(8.0 * g.xyz[..., 2])  # a cluster on the north pole, where the cap acts
    rho0 /= g.integrate(rho0)
    out = {}
    sized = cap_buffer_for(g, noise, 0.01)
    assert sized > cap_buffer_for(g, None, 0.01) == 3  # the Courant-number buffer
    for name, buffer in (("sized", {"dt": 0.01}), ("thin", {"cap_buffer": 1})):
        runs = []
        for _ in range(2):  # a fresh field each time (its evaluation cache changes last bits)
            g, noise, path = _noise_path(24, 1.0)
            st = SPDEFFSL(g, None, noise=noise, path=path, **buffer)
            assert st.transport.polar == "cap"
            assert st.options()["cap_buffer"] == (sized if name == "sized" else 1)
            rho = rho0
            for k in range(40):
                rho = st.step(rho, 0.01 * k, 0.01)
            runs.append(rho)
        assert np.array_equal(runs[0], runs[1])
        assert abs(g.integrate(rho) - 1.0) <= 40 * 1e3 * np.finfo(float).eps
        assert rho.min() >= 0.0
        out[name] = (rho, st.transport.cap_fallbacks)
    assert out["sized"][1] == 0 and out["thin"][1] > 0
    g, noise, path = _noise_path(24, 1.0)
    split = SPDEFFSL(g, None, noise=noise, path=path, polar="split")
    rho = rho0
    for k in range(40):
        rho = split.step(rho, 0.01 * k, 0.01)
    assert split.transport.cap_fallbacks == 0
    assert not np.array_equal(rho, out["sized"][0])


def test_meanfield_cap_is_the_transport_cap_for_a_prescribed_velocity():
    """meanfield-ffsl with a velocity that does not depend on the density transports by it
    directly: with polar="cap" it must take the transport's own cap step, bit for bit (the
    same face and cap-vertex velocities at t + Δt/2)."""
    g = GaussGrid(32)
    case = make_case("williamson1", np.pi / 2)

    def velocity(t, x, rho):
        return case.velocity(t, x)

    velocity.depends_on_density = False
    rho = g.cell_average(initial_field("cosine-bell"))
    mf = MeanFieldFFSL(g, velocity, polar="cap")
    tr = FFSLSphere(g, case.velocity, polar="cap")
    a, b = rho, rho
    for k in range(5):
        a, b = mf.step(a, 0.3 * k, 0.3), tr.step(b, 0.3 * k, 0.3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, MeanFieldFFSL(g, velocity).step(rho, 0.0, 0.3))
    with pytest.raises(ValueError, match="sphere .GaussGrid. only"):
        make_stepper("ffsl-ppm", CircleGrid(16), lambda t, x: 0.0 * x, polar="cap")
    with pytest.raises(ValueError, match="ffsl-ppm stepper only"):
        TransportConfig(case="williamson1", field="cosine-bell", nlat=16, polar="cap",
                        stepper="lagrangian-remap")


def test_too_long_step_is_not_taken_wrong_by_the_cap():
    """A step 8× the Courant step: the cap's departure points leave its buffer, so the remap
    refuses (CapDepartureError, "reduce the time step") and the transport keeps the split
    step's values in both caps for that step (counted): mass and positivity as the split's."""
    g = GaussGrid(16)
    case = make_case("williamson1", HALF_PI)
    st = FFSLSphere(g, case.velocity, polar="cap")
    split = FFSLSphere(g, case.velocity, polar="split")
    rho = g.cell_average(initial_field("cosine-bell"))
    dt = 8.0 * st.stable_dt(rho, 0.0)
    cap = st._caps[0]
    mass = rho * (g.weights * g.dlon)[:, None]
    with pytest.raises(polar_cap.CapDepartureError, match="reduce the time step"):
        cap.remap(mass[cap.rows], case.velocity(0.5 * dt, cap.vertices_xyz), dt)
    assert np.array_equal(st.step(rho, 0.0, dt), split.step(rho, 0.0, dt))
    assert st.cap_fallbacks == 2


@pytest.mark.slow
@pytest.mark.parametrize("alpha, bound", [(HALF_PI, 0.0063), (HALF_PI - 0.05, 0.0063), (0.0, 0.0063)])
def test_williamson1_nlat128(alpha, bound):
    """Measured (cap, K = 4), l2 at 64 / 128 (order): α = π/2 0.0227 / 0.00470 (2.27),
    π/2 − 0.05 0.0194 / 0.00346 (2.49), 0 0.0367 / 0.00434 (3.08, the same as the split: the
    bell never reaches the caps).  Bounds: the issue targets l2 ≤ 0.0063 at 128 and order ≥ 1.8."""
    coarse, fine = _run(64, "cap", alpha), _run(128, "cap", alpha)
    assert math.isfinite(fine["l2"]) and fine["l2"] <= bound
    assert _order(coarse, fine) >= 1.8
    assert abs(fine["mass_error"]) <= 1e-13
    assert fine["min_value"] >= -1e-14 * fine["max_value"]
