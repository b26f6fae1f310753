"""The numba backend of the FFSL–PPM sweeps (spherepde.solvers.eulerian.ffsl_numba) against the
numpy reference (ffsl.py / ppm.py): bitwise equal densities at every step (uint64 views, so
signed zeros count too) for every standard transport case, limiter, Courant number 0.8 / 2.5
(sub-stepped polar rings included) on GaussGrid(16 / 32) and on the circle; direct sweeps on
rough data, short lines and F-ordered input; equal deformation numbers; conservation and
positivity under numba; the same DepartureOrderError from both; backend selection and dispatch.

The kernels compile on first use (cache=True: ~8 s of CPU once, later processes load them from
numba's on-disk cache in well under a second).
"""
from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.eulerian import ffsl, ppm
from spherepde.validation.transport_cases import CASES, initial_field, make_case

pytest.importorskip("numba")

LIMITERS = ppm.LIMITERS
HALF_PI = np.pi / 2
#: (case, alpha, field): every standard case, and Williamson's pole-crossing rotation; the
#: fields rotate through all four so that smooth, flat-topped, discontinuous and zero-floored
#: data meet every limiter
SPHERE_CASES = [
    ("williamson1", 0.0, "cosine-bell"),
    ("williamson1", HALF_PI, "cosine-bell"),
    ("nl-case1", 0.0, "slotted-cylinders"),
    ("nl-case2", 0.0, "cosine-bells"),
    ("nl-case3", 0.0, "gaussian-hills"),
    ("nl-case4", 0.0, "slotted-cylinders"),
    ("l2012-divergent", 0.0, "cosine-bell"),
]
assert {c for c, *_ in SPHERE_CASES} == set(CASES)
STEPS = {16: 10, 32: 5}


def bits(x):
    return np.ascontiguousarray(x, dtype=float).view(np.uint64)


def assert_bitwise(a, b, what):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape, what
    if not np.array_equal(bits(a), bits(b)):
        diff = np.abs(a - b)
        rel = float(np.max(diff) / max(np.max(np.abs(a)), 1e-300))
        pytest.fail(f"{what}: {int(np.sum(bits(a) != bits(b)))} entries differ bitwise "
                    f"(max |diff| {np.max(diff):.3g}, relative {rel:.3g})")


def step_with(backend, monkeypatch, stepper, rho, t, dt):
    monkeypatch.setattr(ffsl, "BACKEND", backend)
    return stepper.step(rho, t, dt)


def compare_runs(monkeypatch, grid, velocity, rho0, limiter, courant, nsteps):
    """nsteps equal steps at the Courant number's dt (taken at t = 0) with each backend;
    every step's density must agree bitwise.  Returns the numba stepper and its densities."""
    ref = make_stepper("ffsl-ppm", grid, velocity, limiter=limiter, courant=courant)
    fast = make_stepper("ffsl-ppm", grid, velocity, limiter=limiter, courant=courant)
    dt = ref.stable_dt(rho0, 0.0)
    r_ref = r_fast = np.array(rho0, float)
    out = []
    for i in range(nsteps):
        r_ref = step_with("numpy", monkeypatch, ref, r_ref, i * dt, dt)
        r_fast = step_with("numba", monkeypatch, fast, r_fast, i * dt, dt)
        assert_bitwise(r_fast, r_ref, f"step {i + 1}")
        out.append(r_fast)
    assert fast.substeps == ref.substeps
    return fast, out


# ==== agreement ===================================================================================
@pytest.mark.parametrize("courant", [0.8, 2.5])
@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("nlat", [16, 32])
@pytest.mark.parametrize("case,alpha,field", SPHERE_CASES)
def test_sphere_backends_agree_bitwise(monkeypatch, case, alpha, field, nlat, limiter, courant):
    g = GaussGrid(nlat)
    c = make_case(case, alpha)
    rho0 = g.cell_average(initial_field(field))
    st, _ = compare_runs(monkeypatch, g, c.velocity, rho0, limiter, courant, STEPS[nlat])
    if case == "williamson1" and alpha == HALF_PI and courant == 2.5:
        assert st.substeps > 0  # the polar rings were sub-stepped (subset-of-rows sweeps)


def circle_velocity(t, x):
    """Compressive, time-dependent velocity on S¹."""
    th = np.arctan2(x[..., 1], x[..., 0])
    u = 0.3 + np.sin(th - t) * np.cos(t) + 0.4 * np.cos(3 * th)
    return u[..., None] * np.stack([-np.sin(th), np.cos(th)], -1)


@pytest.mark.parametrize("courant", [0.8, 2.5])
@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("n", [40, 97])
def test_circle_backends_agree_bitwise(monkeypatch, n, limiter, courant):
    g = CircleGrid(n)
    rng = np.random.default_rng(n)
    rho0 = np.where(rng.random(n) < 0.3, 0.0, rng.random(n) + 0.1)  # jumps and zeros
    st, _ = compare_runs(monkeypatch, g, circle_velocity, rho0, limiter, courant, 20)
    if courant == 2.5 and n == 40:
        assert st.substeps > 0


@pytest.mark.parametrize("limiter", LIMITERS)
def test_direct_sweeps_agree_bitwise_on_rough_data(monkeypatch, limiter):
    """Both sweeps called directly on random signed data, per-row steps, non-uniform faces and
    non-contiguous inputs, with departure points many cells away (wraps of both signs)."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((9, 33)).T.copy().T  # F-ordered
    a = 4.0 + 30.0 * rng.standard_normal((9, 1)) + 0.1 * rng.standard_normal((9, 33))
    dt = 0.5 * rng.random(9)
    line = ffsl.BoundedLine(np.cumsum(0.5 + rng.random(26)))
    m = rng.standard_normal((25, 7)).T  # non-contiguous view
    af = 2.0 * rng.standard_normal((7, 26)) + 5.0 * np.sin(np.linspace(0, 3, 26))
    res = {}
    for backend in ffsl.BACKENDS:
        monkeypatch.setattr(ffsl, "BACKEND", backend)
        dep = ffsl.periodic_departures(a, dt)
        res[backend] = (dep, ffsl.sweep_periodic_departed(q, dep, limiter),
                        ffsl.sweep_periodic(q, a, dt, limiter), line.sweep(m, af, 0.02, limiter))
    (dn, *rn), (db, *rb) = res["numpy"], res["numba"]
    assert np.unique(dn.wraps).size >= 3  # departure points beyond the line on both sides
    for field in dn._fields:
        x, y = getattr(dn, field), getattr(db, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field
    for what, x, y in zip(("departed", "periodic", "bounded"), rn, rb):
        assert_bitwise(y, x, what)
    # departures of one backend serve the sweep of the other
    monkeypatch.setattr(ffsl, "BACKEND", "numba")
    assert_bitwise(ffsl.sweep_periodic_departed(q, dn, limiter), rn[0], "numpy departures")


@pytest.mark.parametrize("limiter", LIMITERS)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_short_lines_agree_bitwise(monkeypatch, n, limiter):
    """Periodic lines of 1..8 cells (ghost cells wrap more than once) and closed lines of
    4..8 cells (every face near an end), at Courant numbers from 0.3 to 3."""
    rng = np.random.default_rng(n)
    q = rng.random((6, n)) - 0.2
    a = rng.uniform(-3.0, 3.0, (6, 1)) + 0.05 * rng.standard_normal((6, n))
    dt = np.linspace(0.1, 1.0, 6)
    res = {}
    for backend in ffsl.BACKENDS:
        monkeypatch.setattr(ffsl, "BACKEND", backend)
        res[backend] = [ffsl.sweep_periodic(q, a, dt, limiter)]
        if n >= 4:
            line = ffsl.BoundedLine(np.linspace(0.0, 1.0, n + 1) ** 1.3)  # non-uniform
            af = np.linspace(-0.2, 0.3, n + 1)[None, :] * np.arange(1, 7)[:, None]
            res[backend].append(line.sweep(q * 0.1, af, 0.4, limiter))
    for x, y in zip(res["numpy"], res["numba"]):
        assert_bitwise(y, x, f"n={n}")


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (3, 5), (7, 16), (4, 33)])
def test_deformation_numbers_agree(monkeypatch, shape):
    rng = np.random.default_rng(shape[1])
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, (shape[0], 1))
    a_nan = a.copy()
    a_nan[-1, shape[1] // 2] = np.nan
    n = max(shape[1] - 1, 4)
    line = ffsl.BoundedLine(np.cumsum(0.1 + rng.random(n + 1)))
    af = rng.standard_normal((shape[0], n + 1))
    af_nan = af.copy()
    af_nan[0, 2] = np.nan
    res = {}
    for backend in ffsl.BACKENDS:
        monkeypatch.setattr(ffsl, "BACKEND", backend)
        res[backend] = (ffsl.lipschitz_periodic(a), ffsl.lipschitz_periodic(a_nan),
                        line.lipschitz(af), line.lipschitz(af_nan))
    (p, p_nan, b, b_nan), (pn, pn_nan, bn, bn_nan) = res["numpy"], res["numba"]
    assert_bitwise(pn, p, "lipschitz_periodic")
    np.testing.assert_array_equal(np.isnan(pn_nan), np.isnan(p_nan))
    np.testing.assert_array_equal(pn_nan, p_nan)
    assert type(bn) is float and bn == b
    assert np.isnan(bn_nan) and np.isnan(b_nan)


# ==== properties under numba ======================================================================
@pytest.mark.parametrize("limiter", ["positive", "monotone"])
@pytest.mark.parametrize("case,alpha,field", [("williamson1", HALF_PI, "cosine-bell"),
                                              ("l2012-divergent", 0.0, "cosine-bell"),
                                              ("nl-case1", 0.0, "slotted-cylinders")])
def test_numba_conserves_mass_and_stays_positive(monkeypatch, case, alpha, field, limiter):
    monkeypatch.setattr(ffsl, "BACKEND", "numba")
    g = GaussGrid(32)
    c = make_case(case, alpha)
    rho0 = g.cell_average(initial_field(field))
    st = make_stepper("ffsl-ppm", g, c.velocity, limiter=limiter, courant=2.5)
    n = 12
    dt = 0.5 * c.period / n
    m0 = g.integrate(rho0)
    rho = rho0
    for i in range(n):
        rho = st.step(rho, i * dt, dt)
        assert abs(g.integrate(rho) - m0) <= 1e-13 * m0
        assert rho.min() >= -1e-14 * rho0.max()  # round-off, as with numpy (bitwise the same)
    assert np.abs(rho - rho0).max() > 1e-2 * rho0.max()  # it moved


# ==== departure order ==============================================================================
@pytest.mark.parametrize("backend", ffsl.BACKENDS)
def test_departure_order_error_from_both_backends(monkeypatch, backend):
    monkeypatch.setattr(ffsl, "BACKEND", backend)
    n = 16
    q = np.ones((2, n))
    a = 5.0 * np.sin(2 * np.pi * np.arange(n) / n)[None, :].repeat(2, 0)
    a[0] = 0.1  # the first line is fine: the error comes from the second
    with pytest.raises(ffsl.DepartureOrderError, match="departure points crossed"):
        ffsl.sweep_periodic(q, a, 1.0, "positive")
    with pytest.raises(ffsl.DepartureOrderError, match="departure points crossed"):
        ffsl.periodic_departures(a, np.array([1.0, 1.0]))
    ffsl.sweep_periodic(q, a, 0.1, "positive")  # deformation number 0.19: fine
    line = ffsl.BoundedLine(np.linspace(0.0, 1.0, 17))
    af = 5.0 * np.sin(2 * np.pi * np.linspace(0.0, 1.0, 17))[None, :].repeat(3, 0)
    af[:2] = 0.3
    with pytest.raises(ffsl.DepartureOrderError, match="departure points crossed"):
        line.sweep(np.full((3, 16), 1 / 16), af, 0.05, "monotone")
    line.sweep(np.full((3, 16), 1 / 16), af, 0.005, "monotone")


@pytest.mark.parametrize("backend", ffsl.BACKENDS)
def test_stepper_substeps_instead_of_crossing(monkeypatch, backend):
    """Deformation 0.882 > max_lipschitz 0.7 on the circle: sub-stepped, never crossed."""
    monkeypatch.setattr(ffsl, "BACKEND", backend)
    g = CircleGrid(8)
    a = 0.98 * np.array([0, 0, -0.9, -1.8, -2.7, -1.8, -0.9, 0.0])

    def vel(t, x):
        th = np.arctan2(x[..., 1], x[..., 0])
        f = np.round(th / g.dtheta + 0.5).astype(int) % g.n
        return (a[f] * g.dtheta)[..., None] * np.stack([-np.sin(th), np.cos(th)], -1)

    st = make_stepper("ffsl-ppm", g, vel, max_lipschitz=0.7)
    rho = st.step(np.ones(8), 0.0, 1.0)
    assert st.substeps > 0 and np.all(rho > 0)
    with pytest.raises(ffsl.DepartureOrderError):
        ffsl.sweep_periodic(np.ones((1, 8)), a[None, :], 1.0, "positive")


# ==== backend selection ============================================================================
def test_backend_chosen_from_the_environment(monkeypatch):
    monkeypatch.delenv(ffsl.BACKEND_ENV, raising=False)
    assert ffsl._choose_backend() == "numba"  # numba is importable here
    for name in ffsl.BACKENDS:
        monkeypatch.setenv(ffsl.BACKEND_ENV, name)
        assert ffsl._choose_backend() == name
    monkeypatch.setenv(ffsl.BACKEND_ENV, "cython")
    with pytest.raises(ValueError, match="cython"):
        ffsl._choose_backend()


def test_backend_without_numba(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `import numba` fail
    monkeypatch.delenv(ffsl.BACKEND_ENV, raising=False)
    assert ffsl._choose_backend() == "numpy"
    monkeypatch.setenv(ffsl.BACKEND_ENV, "numba")
    with pytest.raises(ImportError, match="numba"):
        ffsl._choose_backend()


def test_dispatch_rejects_bad_backend_and_limiter(monkeypatch):
    q = np.ones((1, 8))
    a = np.full((1, 8), 0.5)
    monkeypatch.setattr(ffsl, "BACKEND", "fortran")
    with pytest.raises(ValueError, match="fortran"):
        ffsl.sweep_periodic(q, a, 0.1, "positive")
    monkeypatch.setattr(ffsl, "BACKEND", "numba")
    with pytest.raises(ValueError, match="limiter"):
        ffsl.sweep_periodic(q, a, 0.1, "positve")
    with pytest.raises(ValueError):
        ffsl.BoundedLine(np.linspace(0, 1, 9)).sweep(q, np.ones((1, 8)), 0.1, "none")
    # the numpy reference stays reachable whatever the backend
    for fn in (ffsl.periodic_departures, ffsl.sweep_periodic_departed, ffsl.BoundedLine.sweep):
        assert callable(fn.numpy)


def test_dispatch_routes_every_entry_point(monkeypatch):
    """Under "numba" each dispatched function runs its numba entry point (``ffsl._numba_<name>``,
    over the compiled kernels of ffsl_numba), under "numpy" none of them (so the agreement tests
    compare two implementations)."""
    calls = []
    for name in ("lipschitz_periodic", "periodic_departures", "sweep_periodic_departed",
                 "bounded_lipschitz", "bounded_sweep"):
        def spy(*args, _name=name, _fn=getattr(ffsl, f"_numba_{name}"), **kwargs):
            calls.append(_name)
            return _fn(*args, **kwargs)

        monkeypatch.setattr(ffsl, f"_numba_{name}", spy)
    g = GaussGrid(8)
    st = make_stepper("ffsl-ppm", g, make_case("nl-case1").velocity)
    rho0 = np.ones(g.shape)
    for backend, expected in (("numpy", set()),
                              ("numba", {"lipschitz_periodic", "periodic_departures",
                                         "sweep_periodic_departed", "bounded_lipschitz",
                                         "bounded_sweep"})):
        monkeypatch.setattr(ffsl, "BACKEND", backend)
        calls.clear()
        rho = st.step(rho0, 0.0, 0.1)
        assert set(calls) == expected
        assert rho.flags.c_contiguous  # whatever layouts the sweeps pass on inside the step


def test_periodic_sweep_layouts(monkeypatch):
    """The kernel returns the other layout (C in → F out, F in → C out; one line stays C) with
    the same values as numpy."""
    monkeypatch.setattr(ffsl, "BACKEND", "numba")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((10, 12))
    for q, order in ((rng.random((10, 12)), "F"), (np.asfortranarray(rng.random((10, 12))), "C"),
                     (rng.random((1, 12)), "C")):
        monkeypatch.setattr(ffsl, "BACKEND", "numpy")
        ref = ffsl.sweep_periodic(q, a[:len(q)], 0.1, "monotone")
        monkeypatch.setattr(ffsl, "BACKEND", "numba")
        out = ffsl.sweep_periodic(q, a[:len(q)], 0.1, "monotone")
        assert_bitwise(out, ref, order)
        assert out.flags[f"{order}_CONTIGUOUS"]


def test_numba_kernels_preserve_constants(monkeypatch):
    """A constant density in a uniform rotation stays constant to round-off (all limiters)."""
    monkeypatch.setattr(ffsl, "BACKEND", "numba")
    for limiter, n in itertools.product(LIMITERS, (8, 31)):
        q = np.full((3, n), 2.5)
        out = ffsl.sweep_periodic(q, np.full((3, n), 3.7), [0.3, 1.0, 2.2], limiter)
        np.testing.assert_allclose(out, 2.5, rtol=1e-14)
