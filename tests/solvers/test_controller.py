"""Controller and trackers, driven by fake steppers with exact solutions."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from spherepde import __version__
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.io import open_dataset, read_config
from spherepde.solvers.controller import SPLIT_RTOL, Controller, RunResult
from spherepde.io.netcdf import NetCDFTracker
from spherepde.solvers.trackers import (
    TRACKERS,
    DiagnosticsTracker,
    MemoryTracker,
    ProgressTracker,
    Tracker,
)

REPO = Path(__file__).resolve().parents[2]


# ---- fake steppers -------------------------------------------------------------------------
class DecayStepper:
    """Exact exponential decay ρ(t+τ) = ρ(t)·exp(−λτ); stable_dt = h (records every call)."""

    name = "fake-decay"

    def __init__(self, grid, lam=0.7, h=0.03, fail_at=None, exc=KeyboardInterrupt):
        self.grid, self.lam, self.h = grid, lam, h
        self.fail_at, self.exc = fail_at, exc
        self.steps: list[tuple[float, float]] = []
        self.n_stable_dt = 0

    def stable_dt(self, rho, t):
        self.n_stable_dt += 1
        return self.h

    def step(self, rho, t, dt):
        if self.fail_at is not None and len(self.steps) == self.fail_at:
            raise self.exc("fake failure")
        self.steps.append((t, dt))
        return rho * math.exp(-self.lam * dt)


class RollStepper:
    """Rotation by exactly one cell per step on S¹ (dt must be one cell, 2π/n)."""

    name = "fake-roll"

    def __init__(self, grid):
        self.grid = grid

    def stable_dt(self, rho, t):
        return self.grid.dtheta

    def step(self, rho, t, dt):
        assert dt == pytest.approx(self.grid.dtheta, rel=1e-12)
        return np.roll(rho, 1)


class NaNStepper(DecayStepper):
    def step(self, rho, t, dt):
        out = super().step(rho, t, dt)
        if len(self.steps) == 3:
            out = out.copy()
            out.flat[0] = np.nan
        return out


class Recorder(Tracker):
    name = "recorder"

    def __init__(self, log, name):
        super().__init__(name=name)
        self.log = log

    def initialize(self, state, t, info):
        self.log.append((self.name, "initialize", t))

    def handle(self, state, t):
        self.log.append((self.name, "handle", t))

    def on_step(self, t):
        self.log.append((self.name, "on_step", t))

    def finalize(self):
        self.log.append((self.name, "finalize", None))


@pytest.fixture
def circle():
    return CircleGrid(16)


@pytest.fixture
def rho_c(circle):
    return np.random.default_rng(0).random(circle.shape)


# ---- time stepping -------------------------------------------------------------------------
def test_output_times_and_t_end_hit_exactly(circle, rho_c):
    st = DecayStepper(circle, h=0.03)
    outs = [0.0, 0.1, 0.25, 0.7, 0.9]
    mem = MemoryTracker()
    res = Controller(st, [mem]).run(rho_c, (0.0, 1.0), output_times=outs)
    assert isinstance(res, RunResult) and not res.interrupted
    assert res.t == 1.0
    assert mem.result["time"].tolist() == outs  # exact, no offsets
    # steps are consecutive, every output time and t_end is a step end point
    ends = [t + dt for t, dt in st.steps]
    assert [t for t, _ in st.steps[1:]] == pytest.approx(ends[:-1], abs=1e-15)
    starts = {t for t, _ in st.steps}
    assert set(outs[1:]) <= starts and st.steps[-1][0] + st.steps[-1][1] == pytest.approx(1.0)
    # even split: h/2 < τ <= h(1 + rtol) except for intervals shorter than h
    # (every interval here is longer than h, so no step is shorter than h/2)
    assert all(st.h / 2 < dt <= st.h * (1 + SPLIT_RTOL) for _, dt in st.steps)
    assert res.n_steps == len(st.steps) == st.n_stable_dt
    # exact solution at every output time
    for t, s in zip(mem.result["time"], mem.result["state"]):
        np.testing.assert_allclose(s, rho_c * np.exp(-st.lam * t), rtol=1e-13)
    np.testing.assert_allclose(res.state, rho_c * np.exp(-st.lam), rtol=1e-13)


def test_fixed_dt_step_counts_and_stable_dt_not_called(circle, rho_c):
    st = DecayStepper(circle)
    res = Controller(st, dt=0.1).run(rho_c, (0.0, 1.0))
    assert res.n_steps == 10 and st.n_stable_dt == 0
    assert [dt for _, dt in st.steps] == pytest.approx([0.1] * 10, rel=1e-12)
    # dt not dividing the span: even split, 4 steps of 0.25
    st = DecayStepper(circle)
    assert Controller(st, dt=0.3).run(rho_c, (0.0, 1.0)).n_steps == 4
    assert [dt for _, dt in st.steps] == pytest.approx([0.25] * 4, rel=1e-12)
    # a span a hair longer than 10 dt: no tiny extra step
    st = DecayStepper(circle)
    res = Controller(st, dt=0.1).run(rho_c, (0.0, 1.0 + 1e-13))
    assert res.n_steps == 10 and res.t == 1.0 + 1e-13
    # t_span not starting at zero, output times not on the dt lattice
    st = DecayStepper(circle)
    res = Controller(st, dt=0.25).run(rho_c, (2.0, 3.0), output_times=[2.1, 3.0])
    assert res.n_steps == 1 + 4 and res.t == 3.0


def test_adaptive_uses_stable_dt(circle, rho_c):
    st = DecayStepper(circle, h=0.01)
    res = Controller(st).run(rho_c, (0.0, 0.5))
    assert res.n_steps == 50 and st.n_stable_dt == 50


def test_rotation_is_exact(circle):
    rho0 = np.arange(circle.n, dtype=float)
    dt = circle.dtheta
    outs = np.arange(circle.n + 1) * dt
    mem = MemoryTracker()
    res = Controller(RollStepper(circle), mem, dt=dt).run(rho0, (0.0, 2 * np.pi), output_times=outs)
    assert res.n_steps == circle.n
    for k, s in enumerate(mem.result["state"]):
        np.testing.assert_array_equal(s, np.roll(rho0, k))
    np.testing.assert_array_equal(res.state, rho0)


def test_rho0_not_modified(circle, rho_c):
    before = rho_c.copy()
    Controller(DecayStepper(circle)).run(rho_c, (0.0, 0.1))
    np.testing.assert_array_equal(rho_c, before)


def test_max_steps(circle, rho_c):
    log = []
    with pytest.raises(RuntimeError, match="max_steps"):
        Controller(DecayStepper(circle, h=0.01), Recorder(log, "a"), max_steps=5).run(rho_c, (0, 1))
    assert log[-1] == ("a", "finalize", None)


# ---- trackers ------------------------------------------------------------------------------
def test_trackers_called_in_order(circle, rho_c):
    log = []
    Controller(DecayStepper(circle), [Recorder(log, "a"), Recorder(log, "b")], dt=0.5).run(
        rho_c, (0.0, 1.0), output_times=[0.0, 0.5, 1.0]
    )
    assert log == [
        ("a", "initialize", 0.0), ("b", "initialize", 0.0),
        ("a", "handle", 0.0), ("b", "handle", 0.0),
        ("a", "on_step", 0.5), ("b", "on_step", 0.5),
        ("a", "handle", 0.5), ("b", "handle", 0.5),
        ("a", "on_step", 1.0), ("b", "on_step", 1.0),
        ("a", "handle", 1.0), ("b", "handle", 1.0),
        ("a", "finalize", None), ("b", "finalize", None),
    ]


def test_tracker_names_and_strings(circle, rho_c):
    res = Controller(DecayStepper(circle), ["diagnostics", "memory"]).run(rho_c, (0, 0.1))
    assert set(res.trackers) == {"diagnostics", "memory"}
    with pytest.raises(ValueError, match="unique"):
        Controller(DecayStepper(circle), [MemoryTracker(), MemoryTracker()])
    Controller(DecayStepper(circle), [MemoryTracker(), MemoryTracker(name="m2")])
    with pytest.raises(ValueError, match="unknown tracker"):
        Controller(DecayStepper(circle), ["nope"])


@pytest.mark.parametrize("grid", [CircleGrid(12), GaussGrid(8)], ids=["circle", "gauss"])
def test_diagnostics_mass(grid):
    rng = np.random.default_rng(1)
    rho0 = rng.random(grid.shape)
    measure = grid.cell_length if isinstance(grid, CircleGrid) else grid.cell_area
    rho0 /= np.sum(rho0 * measure)  # unit mass
    st = DecayStepper(grid, lam=0.5)
    diag = DiagnosticsTracker({"mean": lambda s, t: float(s.mean()), "twice_t": lambda s, t: 2 * t})
    res = Controller(st, diag).run(rho0, (0.0, 1.0), output_times=[0.0, 0.5, 1.0])
    d = res.trackers["diagnostics"]
    t = np.array([0.0, 0.5, 1.0])
    np.testing.assert_array_equal(d["time"], t)
    np.testing.assert_allclose(d["mass"], np.exp(-0.5 * t), rtol=1e-13)
    np.testing.assert_allclose(d["rel_mass_error"], np.exp(-0.5 * t) - 1, atol=1e-13)
    np.testing.assert_allclose(d["max"], rho0.max() * np.exp(-0.5 * t), rtol=1e-13)
    np.testing.assert_allclose(d["min"], rho0.min() * np.exp(-0.5 * t), rtol=1e-13)
    np.testing.assert_allclose(d["mean"], rho0.mean() * np.exp(-0.5 * t), rtol=1e-13)
    np.testing.assert_array_equal(d["twice_t"], 2 * t)
    with pytest.raises(ValueError, match="extra"):
        DiagnosticsTracker({"mass": lambda s, t: 0.0})


def test_progress_tracker(circle, rho_c, capsys):
    Controller(DecayStepper(circle), ProgressTracker(disable=False, desc="demo")).run(rho_c, (0, 1))
    err = capsys.readouterr().err
    assert "demo" in err and "t=1/1" in err
    # not a terminal: no bar by default
    Controller(DecayStepper(circle), ProgressTracker()).run(rho_c, (0, 1))
    assert capsys.readouterr().err == ""


def _make_tracker(name, tmp_path, grid):
    if name == "netcdf":
        return NetCDFTracker(tmp_path / "reg.nc", grid, config={"k": 1})
    if name == "progress":
        return ProgressTracker(disable=True)
    return TRACKERS[name]()


@pytest.mark.parametrize("name", sorted(TRACKERS))
def test_every_registered_tracker_survives_run_and_interrupt(name, tmp_path, circle, rho_c):
    tr = _make_tracker(name, tmp_path, circle)
    assert tr.name == name
    res = Controller(DecayStepper(circle), tr).run(rho_c, (0, 0.3), output_times=[0.0, 0.1, 0.3])
    assert name in res.trackers
    tr = _make_tracker(name, tmp_path, circle)
    ctrl = Controller(DecayStepper(circle, fail_at=5), tr)
    with pytest.raises(KeyboardInterrupt):
        ctrl.run(rho_c, (0, 0.3), output_times=[0.0, 0.1, 0.3])
    assert ctrl.result.interrupted and name in ctrl.result.trackers


# ---- NetCDF through the tracker ------------------------------------------------------------
@pytest.mark.parametrize("grid", [CircleGrid(12), GaussGrid(8)], ids=["circle", "gauss"])
def test_netcdf_tracker_round_trip(grid, tmp_path):
    rho0 = np.random.default_rng(2).random(grid.shape)
    config = {"grid": grid.to_dict(), "beta": 1.5, "stepper": "fake-decay", "nested": {"a": [1, 2]}}
    path = tmp_path / "run.nc"
    mem = MemoryTracker()
    nc = NetCDFTracker(path, grid, config=config, seed=7,
                       static={"Q": (np.eye(3), ("dim", "dim2"), {"long_name": "query matrix"})})
    outs = [0.0, 0.25, 0.5, 1.0]
    Controller(DecayStepper(grid), [mem, nc]).run(rho0, (0.0, 1.0), output_times=outs)
    ds = open_dataset(path)
    spatial = ("theta",) if isinstance(grid, CircleGrid) else ("lat", "lon")
    assert ds["density"].dims == ("time", *spatial)
    np.testing.assert_array_equal(ds["time"].values, outs)
    np.testing.assert_array_equal(ds["density"].values, mem.result["state"])
    np.testing.assert_array_equal(ds["Q"].values, np.eye(3))
    assert ds.attrs["Conventions"] == "CF-1.8"
    assert ds.attrs["spherepde_version"] == __version__
    assert ds.attrs["source"] == f"spherepde {__version__}"
    assert ds.attrs["seed"] == 7 and ds.attrs["stepper"] == "fake-decay"
    assert json.loads(ds.attrs["config_json"]) == config == read_config(path)
    assert json.loads(ds.attrs["grid_json"]) == grid.to_dict()
    assert ds["time"].attrs["units"] == "1"
    # per unit measure of the unit sphere / circle taken as radius 1 m, beside m2 / m measures
    measure = "cell_area" if isinstance(grid, GaussGrid) else "cell_length"
    assert (ds["density"].attrs["units"], ds[measure].attrs["units"]) == (
        ("m-2", "m2") if isinstance(grid, GaussGrid) else ("m-1", "m"))
    if isinstance(grid, GaussGrid):
        assert ds["density"].attrs["cell_measures"] == "area: cell_area"
        assert ds["lat"].attrs["units"] == "degrees_north"
        np.testing.assert_array_equal(ds["cell_area"].values, grid.cell_area)


def _run_interrupted(tmp_path, exc):
    grid = CircleGrid(12)
    rho0 = np.random.default_rng(3).random(grid.shape)
    path = tmp_path / "int.nc"
    mem, nc = MemoryTracker(), NetCDFTracker(path, grid, config={"x": 1})
    ctrl = Controller(DecayStepper(grid, fail_at=5, exc=exc), [mem, nc], dt=0.1)
    with pytest.raises(exc):
        ctrl.run(rho0, (0.0, 1.0), output_times=np.arange(11) / 10)
    assert nc.writer.closed
    ds = open_dataset(path, incomplete="ignore")
    assert ds.attrs["status"] == "interrupted"
    assert ds.sizes["time"] == 6  # t = 0 and the five completed steps
    np.testing.assert_array_equal(ds["time"].values, mem.result["time"])
    np.testing.assert_array_equal(ds["density"].values, mem.result["state"])
    return ctrl


def test_keyboard_interrupt_leaves_valid_file(tmp_path):
    ctrl = _run_interrupted(tmp_path, KeyboardInterrupt)
    r = ctrl.result
    assert r.interrupted and r.n_steps == 5 and r.t == pytest.approx(0.5)
    assert r.trackers["memory"]["time"].size == 6
    np.testing.assert_array_equal(r.state, r.trackers["memory"]["state"][-1])


def test_other_exception_finalizes_and_propagates(tmp_path):
    ctrl = _run_interrupted(tmp_path, RuntimeError)
    assert ctrl.result is None


def test_nan_state_raises_and_file_is_valid(tmp_path, circle, rho_c):
    path = tmp_path / "nan.nc"
    with pytest.raises(FloatingPointError, match="non-finite"):
        Controller(NaNStepper(circle), NetCDFTracker(path, circle, config={}), dt=0.1).run(
            rho_c, (0, 1), output_times=np.arange(11) / 10)
    ds = open_dataset(path, incomplete="ignore")
    assert ds.attrs["status"] == "interrupted"
    assert ds.sizes["time"] == 3 and np.all(np.isfinite(ds["density"].values))


# ---- input validation ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(t_span=(1.0, 1.0)), "t_span"),
        (dict(t_span=(1.0, 0.0)), "t_span"),
        (dict(t_span=(0.0, np.inf)), "t_span"),
        (dict(t_span=(0.0,)), "t_span"),
        (dict(output_times=[0.5, 0.2]), "output_times"),
        (dict(output_times=[0.2, 0.2]), "output_times"),
        (dict(output_times=[-0.1, 0.5]), "output_times"),
        (dict(output_times=[0.5, 1.5]), "output_times"),
        (dict(output_times=[0.5, np.nan]), "output_times"),
        (dict(rho0=np.ones(15)), "rho0"),
        (dict(rho0=np.ones((16, 1))), "rho0"),
        (dict(rho0=np.full(16, np.nan)), "rho0"),
        (dict(rho0=np.r_[np.inf, np.ones(15)]), "rho0"),
    ],
)
def test_bad_run_inputs(kwargs, match, tmp_path, circle):
    path = tmp_path / "never.nc"
    ctrl = Controller(DecayStepper(circle), NetCDFTracker(path, circle, config={}))
    args = dict(rho0=np.ones(16), t_span=(0.0, 1.0), output_times=None) | kwargs
    with pytest.raises(ValueError, match=match):
        ctrl.run(args.pop("rho0"), args.pop("t_span"), **args)
    assert not path.exists()  # refused before any work


@pytest.mark.parametrize("dt", [0.0, -1.0, np.inf, np.nan])
def test_bad_dt(dt, circle):
    with pytest.raises(ValueError, match="dt"):
        Controller(DecayStepper(circle), dt=dt)


def test_bad_max_steps(circle):
    with pytest.raises(ValueError, match="max_steps"):
        Controller(DecayStepper(circle), max_steps=0)


# ---- a real Ctrl-C in a child process ------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import numpy as np
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if SIGINT was ignored
    from spherepde.grids import CircleGrid
    from spherepde.solvers.controller import Controller
    from spherepde.io.netcdf import NetCDFTracker
    from spherepde.solvers.trackers import Tracker

    class Slow:
        name = "slow-roll"
        def __init__(self, grid):
            self.grid = grid
        def stable_dt(self, rho, t):
            return 1.0
        def step(self, rho, t, dt):
            time.sleep(0.02)
            return np.roll(rho, 1)

    class Announce(Tracker):
        name = "announce"
        def handle(self, state, t):
            print("SNAPSHOT", t, flush=True)

    grid = CircleGrid(8)
    ctrl = Controller(Slow(grid), [NetCDFTracker(sys.argv[1], grid, config={"demo": True}),
                                   Announce()])
    try:
        ctrl.run(np.arange(8.0), (0.0, 1000.0), output_times=np.arange(1001.0))
    except KeyboardInterrupt:
        r = ctrl.result
        print("INTERRUPTED", r.interrupted, r.n_steps, flush=True)
        sys.exit(130)
    print("FINISHED", flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_in_subprocess_leaves_valid_file(tmp_path):
    script, path = tmp_path / "child.py", tmp_path / "child.nc"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    watchdog = threading.Timer(60, proc.kill)  # never hang the test suite
    watchdog.start()
    try:
        seen = 0
        while seen < 3:  # the file holds >= 3 snapshots once the third line is printed
            line = proc.stdout.readline()
            assert line, f"child exited early: {proc.stderr.read()}"
            seen += line.startswith("SNAPSHOT")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        watchdog.cancel()
        proc.kill()
    assert proc.returncode == 130, err
    assert "INTERRUPTED True" in out
    ds = open_dataset(path, incomplete="ignore")
    assert ds.attrs["status"] == "interrupted"
    n = ds.sizes["time"]
    assert n >= 3
    np.testing.assert_array_equal(ds["time"].values, np.arange(n, dtype=float))
    for k in range(n):
        np.testing.assert_array_equal(ds["density"].values[k], np.roll(np.arange(8.0), k))
    assert read_config(path) == {"demo": True}


def test_an_interrupt_inside_a_compiled_kernel_stops_the_run_as_interrupted(circle, rho_c):
    """A signal handler that raises while a numba kernel returns gives CPython's SystemError
    ("returned a result with an exception set") with the interrupt as its cause: the lane
    re-raises the interrupt itself, so the run ends interrupted, not failed."""
    from spherepde.solvers.controller import interrupt_inside

    class Kernel(DecayStepper):
        def __init__(self, grid, inner):
            super().__init__(grid)
            self.inner = inner

        def step(self, rho, t, dt):
            try:
                raise self.inner
            except BaseException as exc:
                raise SystemError("CPUDispatcher returned a result with an exception set") from exc

    with pytest.raises(KeyboardInterrupt):
        Controller(Kernel(circle, KeyboardInterrupt()), dt=0.1).run(rho_c, (0.0, 1.0))
    with pytest.raises(SystemError):  # any other cause stays a failure
        Controller(Kernel(circle, ValueError("bad")), dt=0.1).run(rho_c, (0.0, 1.0))
    plain = SystemError("no cause")
    assert interrupt_inside(plain) is plain
