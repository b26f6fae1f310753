"""``spherepde run --restart``: a run stopped (Ctrl-C) or finished and extended continues to the
same numbers as an uninterrupted run — bit for bit, every data variable and the time axis —
and bad restarts are refused naming the key or the path."""
from __future__ import annotations

import json
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from spherepde.cli import main
from spherepde.runs.config import RunConfig
from spherepde.runs.restart import restart
from spherepde.runs.execute import run
from spherepde.solvers import controller as controller_module

EYE = np.eye(3).tolist()
ATT = {"Q": EYE, "K": [[0.5, 0, 0], [0, 1, 0], [0, 0, 1]], "V": [[1, 0, 0], [0, 0.5, 0], [0, 0, 0.2]],
       "beta": 4.0}
NOISE = {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 2, "seed": 5}
INITIAL = {"kind": "low-mode", "amplitude": 0.5, "max_degree": 2, "seed": 4}


def _cfg(reps, *, noise=False, t_end=1.0, diagnostics=("mass", "energy"), grid=None, **stepping):
    dyn = {"attention": ATT}
    if noise:
        dyn["noise"] = dict(NOISE)
    step = {"t_end": t_end, "output_every": 0.25, **stepping}
    if "dt" not in step and "courant" not in step:
        step["dt"] = 0.0625
    return {"grid": {"kind": "sphere", "nlat": 6, **(grid or {})}, "initial": INITIAL, "dynamics": dyn,
            "representations": reps, "stepping": step, "outputs": {"diagnostics": list(diagnostics)}}


def _read(path: Path) -> dict:
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        out = {name: np.array(v[...]) for name, v in ds.variables.items()}
        for name, v in ds.variables.items():
            for a in v.ncattrs():
                if a == "output_index" or a.startswith("rng_state_"):
                    out[f"{name}@{a}"] = v.getncattr(a)
    return out


def _assert_same_file(a: Path, b: Path) -> None:
    x, y = _read(a), _read(b)
    assert sorted(x) == sorted(y)
    for name in x:
        if isinstance(x[name], np.ndarray):
            assert x[name].dtype == y[name].dtype, name
            assert np.array_equal(x[name], y[name], equal_nan=True), name  # bit for bit
        else:
            assert x[name] == y[name], name
    for name in ("density", "position", "transformer_position", "energy", "particles_energy"):
        if name in x:
            assert np.all(np.isfinite(x[name])), name  # every output reached


def _interrupt_after(monkeypatch, k: int) -> dict:
    """Ctrl-C in the k+1-th step of the run loop (whichever representation is running)."""
    calls = {"n": 0}
    original = controller_module.next_step

    def next_step(*args):
        calls["n"] += 1
        if calls["n"] > k:
            raise KeyboardInterrupt
        return original(*args)

    monkeypatch.setattr(controller_module, "next_step", next_step)
    return calls


def _interrupted(monkeypatch, raw, out: Path, k: int) -> Path:
    _interrupt_after(monkeypatch, k)
    with pytest.raises(KeyboardInterrupt):
        run(RunConfig.from_dict(raw), out, progress=False)
    monkeypatch.undo()
    assert json.loads((out / "summary.json").read_text())["interrupted"] is True
    return out / "run.nc"


#: the density as weighted points, remapped every 3 steps (the steps to the next remap are state)
POINTS = {"scheme": "lagrangian-remap", "remap_every": 3}
CASES = {
    # name: (representations, noise, steps before Ctrl-C[, grid keys])  (POINTS: the density's keys)
    "density": ({"density": True}, False, 9),
    "noise-density": ({"density": True}, True, 9),
    "particles": ({"density": False, "particles": {"n": 12, "seed": 3}}, False, 7),
    "noise-density-particles": ({"density": True, "particles": {"n": 12, "seed": 3}}, True, 23),
    "transformer-mlp": ({"density": False, "transformer": {"depth": 16, "width": 5, "n": 10,
                                                           "seed": 2}}, True, 6),
    "transformer-gaussian": ({"density": False, "transformer": {"depth": 8, "width": "inf",
                                                                "n": 10, "seed": 2}}, True, 3),
    # R = 3 realisations: the state (3, N, d) and the 3 layer generators' states are restored
    "transformer-mlp-realisations": ({"density": False, "transformer": {
        "depth": 16, "width": 5, "n": 10, "seed": 2, "realisations": 3}}, True, 6),
    "transformer-gaussian-realisations": ({"density": False, "transformer": {
        "depth": 8, "width": "inf", "n": 10, "seed": 2, "realisations": 2}}, True, 3),
    # 2 layers on 4 output intervals: outputs 2ℓ and 2ℓ + 1 hold X_ℓ; stopped in layer 1
    "transformer-outputs-between-layers": ({"density": False, "transformer": {
        "depth": 2, "width": 5, "n": 10, "seed": 2}}, True, 1),
    "points": ({"density": POINTS}, False, 10),
    # the adaptive density: its leaves (and the step counter of its regrid cadence) are the state
    "amr": ({"density": {"scheme": "amr", "max_level": 2, "mass_per_cell": 0.5}}, False, 9),
    "noise-points-particles": ({"density": POINTS, "particles": {"n": 12, "seed": 3}}, True, 23),
    # the particles at the weighted cell centres of ρ_0 (validate sync-path's reference)
    "noise-points-quadrature": ({"density": POINTS, "particles": {"initial": "quadrature"}}, True,
                                23),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_interrupted_run_restarts_to_the_uninterrupted_bits(tmp_path, monkeypatch, case):
    reps, noise, k, *grid = CASES[case]
    diagnostics = ("energy",) if not reps["density"] else (
        ("mass", "energy", "w2_particles_density") if "particles" in reps else ("mass", "energy"))
    raw = _cfg(reps, noise=noise, diagnostics=diagnostics, grid=grid[0] if grid else None)
    run(RunConfig.from_dict(raw), tmp_path / "full", progress=False)
    src = _interrupted(monkeypatch, raw, tmp_path / "cut", k)
    with netCDF4.Dataset(src) as ds:
        reached = [int(ds[v].output_index) for v in ds.variables if v.startswith("restart_")]
    assert min(reached) < 4 and max(reached) >= 1  # stopped midway, after some outputs
    summary = restart(src, progress=False)
    assert Path(summary["file"]) == tmp_path / "cut-restart" / "run.nc"
    _assert_same_file(tmp_path / "full" / "run.nc", tmp_path / "cut-restart" / "run.nc")


def test_interrupt_in_the_particles_after_the_density_reuses_its_fields(tmp_path, monkeypatch):
    """Density finished, particles stopped in the last interval (they advance in step, density
    first: 4 steps of each per output, so step 30 is the particles' 2nd of the last interval):
    w2_particles_density of the restarted particles needs the stored density."""
    raw = _cfg({"density": True, "particles": {"n": 12, "seed": 3}}, noise=True,
               diagnostics=("mass", "w2_particles_density"))
    run(RunConfig.from_dict(raw), tmp_path / "full", progress=False)
    src = _interrupted(monkeypatch, raw, tmp_path / "cut", 4 * 4 + 3 * 4 + 2)
    with netCDF4.Dataset(src) as ds:
        assert int(ds["restart_density"].output_index) == 4
        assert int(ds["restart_position"].output_index) == 3
    restart(src, output=tmp_path / "again", progress=False)
    _assert_same_file(tmp_path / "full" / "run.nc", tmp_path / "again" / "run.nc")


def test_restart_of_a_restart(tmp_path, monkeypatch):
    raw = _cfg({"density": True, "particles": {"n": 12, "seed": 3}}, noise=True)
    run(RunConfig.from_dict(raw), tmp_path / "full", progress=False)
    src = _interrupted(monkeypatch, raw, tmp_path / "cut", 5)
    _interrupt_after(monkeypatch, 14)
    with pytest.raises(KeyboardInterrupt):
        restart(src, progress=False)
    monkeypatch.undo()
    restart(tmp_path / "cut-restart" / "run.nc", progress=False)
    _assert_same_file(tmp_path / "full" / "run.nc", tmp_path / "cut-restart-restart" / "run.nc")


@pytest.mark.parametrize("case", ["density", "particles", "noise"])
def test_complete_run_extended_equals_the_longer_run(tmp_path, case):
    reps = ({"density": True} if case == "density" else
            {"density": False, "particles": {"n": 12, "seed": 3}} if case == "particles" else
            {"density": True, "particles": {"n": 12, "seed": 3}})
    noise = case == "noise"  # the Brownian path has no horizon: the short run's path is the long one's
    long = _cfg(reps, noise=noise, t_end=1.0,
                diagnostics=("mass", "energy") if reps["density"] else ("energy",),
                **({"courant": 0.3} if case == "density" else {}))  # dt = Courant step
    short = json.loads(json.dumps(long))
    short["stepping"]["t_end"] = 0.5
    run(RunConfig.from_dict(long), tmp_path / "long", progress=False)
    run(RunConfig.from_dict(short), tmp_path / "short", progress=False)
    rc = main(["run", "--restart", str(tmp_path / "short" / "run.nc"), "--set",
               "stepping.t_end=1.0", "--output", str(tmp_path / "ext"), "--quiet", "--json"])
    assert rc == 0
    _assert_same_file(tmp_path / "long" / "run.nc", tmp_path / "ext" / "run.nc")
    with netCDF4.Dataset(tmp_path / "short" / "run.nc") as ds:  # the original is untouched
        assert ds.dimensions["time"].size == 3
    # the same seed with another t_end is the same path: the short run is the long one's start
    x, y = _read(tmp_path / "short" / "run.nc"), _read(tmp_path / "long" / "run.nc")
    for name in ("density", "position", "energy", "particles_energy"):
        if name in x:
            assert np.array_equal(x[name], y[name][:3]), name


# ---- refused -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    raw = _cfg({"density": True}, noise=True, t_end=0.5)
    run(RunConfig.from_dict(raw), out, progress=False)
    return out / "run.nc"


def _refused(args, capsys) -> str:
    rc = main(["run", "--restart", *map(str, args), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    return err


@pytest.mark.parametrize("assignment, words", [
    ("grid.nlat=8", ["grid.nlat", "cannot be changed"]),
    ("dynamics.attention.beta=2", ["dynamics.attention.beta"]),
    ("dynamics.noise.seed=1", ["dynamics.noise.seed"]),
    ("stepping.dt=0.03125", ["stepping.dt"]),
    ("outputs.fields=false", ["outputs.fields"]),
    ("dynamics.noise.horizon=2.0", ["dynamics.noise.horizon", "cannot be changed"]),
    ("stepping.t_end=0.5", ["stepping.t_end", "complete"]),
    ("stepping.t_end=0.25", ["stepping.t_end", "already reached"]),
])
def test_restart_refuses_changes_of_the_model(finished, capsys, tmp_path, assignment, words):
    err = _refused([finished, "--set", assignment, "--output", tmp_path / "o"], capsys)
    assert all(w in err for w in words), err
    assert not (tmp_path / "o").exists()


def test_noise_run_extended_far_past_its_end_equals_the_straight_run(finished, tmp_path):
    """Earlier releases refused this (the Brownian path ended at the first run's t_end): a run
    to 0.5 continued to 2.0 is, bit for bit, the run straight to 2.0."""
    rc = main(["run", "--restart", str(finished), "--set", "stepping.t_end=2.0",
               "--output", str(tmp_path / "ext"), "--quiet"])
    assert rc == 0
    raw = _cfg({"density": True}, noise=True, t_end=2.0)
    run(RunConfig.from_dict(raw), tmp_path / "straight", progress=False)
    _assert_same_file(tmp_path / "straight" / "run.nc", tmp_path / "ext" / "run.nc")


def test_restart_refuses_a_run_of_the_horizon_path(finished, tmp_path, capsys):
    """A run file without brownian_path_json (earlier releases, whose path depended on the
    horizon) cannot be continued on this path: refused, naming the file."""
    import shutil

    old = tmp_path / "old.nc"
    shutil.copy(finished, old)
    with netCDF4.Dataset(old, "a") as ds:
        assert json.loads(ds.brownian_path_json)["scheme"] == "unit-interval-bridge"
        ds.delncattr("brownian_path_json")
    err = _refused([old, "--set", "stepping.t_end=1.0", "--output", tmp_path / "o"], capsys)
    assert str(old) in err and "earlier spherepde" in err and "horizon" in err
    assert not (tmp_path / "o").exists()


def test_restart_refuses_bad_files_with_exit_2_naming_the_path(finished, tmp_path, capsys):
    missing = tmp_path / "nope" / "run.nc"
    assert str(missing) in _refused([missing], capsys)
    text = tmp_path / "text.nc"
    text.write_text("not netcdf")
    assert "not a NetCDF file" in _refused([text], capsys)
    assert "is a folder" in _refused([finished.parent], capsys)
    other = tmp_path / "other.nc"
    with netCDF4.Dataset(other, "w") as ds:
        ds.title = "something else"
    assert "not a spherepde run" in _refused([other], capsys)
    err = _refused([finished, "--set", "stepping.t_end=1.0", "--output", finished.parent], capsys)
    assert "--output" in err and "being restarted" in err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert str(blocker) in _refused([finished, "--set", "stepping.t_end=1.0", "--output", blocker],
                                    capsys)


def test_restart_takes_no_config_and_no_seed(finished, capsys):
    assert "--restart" in _refused([finished, "--seed", "3"], capsys)
    rc = main(["run", "examples/metastability.toml", "--restart", str(finished)])
    assert rc == 2 and "--restart" in capsys.readouterr().err


def test_restart_without_stored_fields_or_positions_uses_the_exact_state(tmp_path, monkeypatch):
    """outputs.fields/positions = false: the state comes from the restart slots alone."""
    raw = _cfg({"density": True, "particles": {"n": 12, "seed": 3}}, noise=True)
    raw["outputs"].update(fields=False, positions=False)
    run(RunConfig.from_dict(raw), tmp_path / "full", progress=False)
    src = _interrupted(monkeypatch, raw, tmp_path / "cut", 10)  # in step: both stopped after output 1
    with netCDF4.Dataset(src) as ds:
        assert "density" not in ds.variables and "position" not in ds.variables
        assert int(ds["restart_density"].output_index) == int(ds["restart_position"].output_index) == 1
    restart(src, progress=False)
    _assert_same_file(tmp_path / "full" / "run.nc", tmp_path / "cut-restart" / "run.nc")


def test_w2_particles_density_without_stored_fields_is_refused(tmp_path, monkeypatch, capsys):
    raw = _cfg({"density": True, "particles": {"n": 12, "seed": 3}}, noise=True,
               diagnostics=("mass", "w2_particles_density"))
    raw["outputs"]["fields"] = False
    src = _interrupted(monkeypatch, raw, tmp_path / "cut", 3 * 4 + 2 * 4 + 2)  # density at output 3, particles in 3
    err = _refused([src], capsys)
    assert "w2_particles_density" in err and "outputs.fields" in err
    assert not (tmp_path / "cut-restart").exists()  # refused before any file


# ---- the pieces bit for bit rests on ---------------------------------------------------------
def test_a_new_brownian_path_gives_the_same_increments():
    """The increments are a pure function of (seed, realisation, ta, tb): no state to save."""
    from spherepde.noise import BrownianPath

    ts = 0.0625 * np.arange(33)
    a = BrownianPath((5, 3), seed=1)
    first = [a.increment(s, t) for s, t in zip(ts[:-1], ts[1:])]
    b = BrownianPath((5, 3), seed=1)  # a fresh object, asked from the middle on
    later = [b.increment(s, t) for s, t in zip(ts[16:-1], ts[17:])]
    assert all(np.array_equal(x, y) for x, y in zip(first[16:], later))


def test_primed_noise_field_evaluates_as_after_a_call():
    from spherepde.grids import GaussGrid
    from spherepde.noise import NoiseField, NoiseKernel

    def field():
        return NoiseField(NoiseKernel("relu", d=3, sigma_u=0.5, sigma_w=0.5), nmax=3)

    rng = np.random.default_rng(0)
    x = GaussGrid(6).xyz.reshape(-1, 3)
    xi0, xi = rng.standard_normal((2, *field().shape))
    used = field()
    used.values(xi0, x)
    primed = field()
    primed.prime(x)
    assert np.array_equal(used.values(xi, x), primed.values(xi, x))


def test_ctrl_c_of_the_command_then_restart_end_to_end(tmp_path):
    """A real SIGINT to ``spherepde run`` midway, then ``--restart``: the uninterrupted bits."""
    import os
    import signal
    import subprocess
    import sys
    import time

    # 400 steps and 16 outputs: the signal, sent once output 1 is on disk, lands with ~375 steps
    # to go (a 100-step run finished before the signal arrived on a fast, idle machine)
    raw = _cfg({"density": False, "particles": {"n": 20, "seed": 3}}, noise=True, t_end=4.0,
               dt=0.01, diagnostics=("energy",))
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(raw))
    run(RunConfig.from_dict(raw), tmp_path / "full", progress=False)
    env = {**os.environ, "HDF5_USE_FILE_LOCKING": "FALSE",
           "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "spherepde", "run", str(cfg), "--output",
                             str(tmp_path / "cut"), "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    nc, reached, deadline = tmp_path / "cut" / "run.nc", -1, time.monotonic() + 120
    while proc.poll() is None and reached < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            with netCDF4.Dataset(nc) as ds:
                reached = int(ds["restart_position"].output_index)
        except (OSError, IndexError, KeyError, RuntimeError):
            pass
    if proc.poll() is not None:
        pytest.skip("the run finished before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(60)
    if rc == 0:
        pytest.skip("the run finished before the signal arrived")
    assert rc == 130, proc.stderr.read()
    with netCDF4.Dataset(nc) as ds:
        assert 1 <= int(ds["restart_position"].output_index) < 16
    rc = main(["run", "--restart", str(nc), "--quiet"])
    assert rc == 0
    _assert_same_file(tmp_path / "full" / "run.nc", tmp_path / "cut-restart" / "run.nc")
