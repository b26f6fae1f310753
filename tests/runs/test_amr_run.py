"""``representations.density.scheme = "amr"`` through ``spherepde run``: the density on the regular
Gauss grid in run.nc (beside the leaves), mass and positivity, and its keys refused by name."""
from __future__ import annotations

import json
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from spherepde.cli import main
from spherepde.grids import GaussGrid
from spherepde.runs.build import build
from spherepde.runs.config import RunConfig, apply_set, read_raw

EXAMPLE = Path(__file__).parents[2] / "examples" / "metastability.toml"
SMALL = ["representations.density.scheme=amr", "grid.nlat=8", "representations.density.max_level=1",
         "stepping.t_end=0.5", "stepping.output_every=0.25",
         "dynamics.attention.method=reference"]  # numpy sums: no numba compilation in a fast test


def test_cli_run_writes_the_density_on_the_regular_grid(tmp_path, capsys):
    args = ["run", str(EXAMPLE), "--output", str(tmp_path / "out"), "--quiet", "--json"]
    for s in SMALL:
        args += ["--set", s]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["density"]["scheme"] == "amr" and summary["density"]["leaves"] > 0
    g = GaussGrid(8)
    with netCDF4.Dataset(tmp_path / "out" / "run.nc") as ds:
        ds.set_auto_mask(False)
        rho = np.array(ds["density"][...])
        leaves = np.array(ds["density_leaves"][...])
        mass = np.array(ds["mass"][...])
        restart_state = np.array(ds["restart_density"][...])
    assert rho.shape == (3, *g.shape) and np.all(rho >= 0.0)
    for k in range(3):
        assert abs(g.integrate(rho[k]) - 1.0) <= 1e-13
        assert abs(mass[k] - 1.0) <= 1e-13
    # the field is the conservative remap of the stored leaves, which are the restart state
    raw = read_raw(EXAMPLE)
    for s in SMALL:
        raw = apply_set(raw, s)
    st = build(RunConfig.from_dict(raw)).density
    np.testing.assert_array_equal(st.field(leaves[-1]), rho[-1])
    assert any(np.array_equal(leaves[-1], r) for r in restart_state)


def test_cli_run_with_a_turned_mesh_restarts_bit_for_bit(tmp_path, capsys):
    """``representations.density.pole``: the run's field exact in mass and positive, the pole in
    the stepper's options, and a run stopped at t = 0.25 and resumed equal to the straight run."""
    small = SMALL + ["representations.density.pole=[1.0, 1.0, 1.0]"]
    args = ["run", str(EXAMPLE), "--quiet"]
    for s in small:
        args += ["--set", s]
    assert main(args + ["--output", str(tmp_path / "straight")]) == 0
    half = [a if a != "stepping.t_end=0.5" else "stepping.t_end=0.25" for a in args]
    assert main(half + ["--output", str(tmp_path / "resumed")]) == 0
    assert main(["run", "--restart", str(tmp_path / "resumed" / "run.nc"), "--quiet",
                 "--set", "stepping.t_end=0.5", "--output", str(tmp_path / "ext")]) == 0
    capsys.readouterr()
    g = GaussGrid(8)
    with netCDF4.Dataset(tmp_path / "straight" / "run.nc") as a, \
            netCDF4.Dataset(tmp_path / "ext" / "run.nc") as b:
        a.set_auto_mask(False)
        b.set_auto_mask(False)
        rho = np.array(a["density"][...])
        assert np.all(rho >= 0.0) and all(abs(g.integrate(r) - 1.0) <= 1e-13 for r in rho)
        assert np.array_equal(np.array(a["density_leaves"][...]), np.array(b["density_leaves"][...]))
        assert np.array_equal(rho, np.array(b["density"][...]))
        assert '"pole"' in a.getncattr("config_json")


@pytest.mark.parametrize("key, value, word", [
    ("representations.density.max_level", "17", "representations.density.max_level"),
    ("representations.density.base_nlat", "7", "representations.density.base_nlat"),
    ("representations.density.mass_per_cell", "0", "representations.density.mass_per_cell"),
    ("representations.density.pole", "[0, 0, 0]", "representations.density.pole"),
    ("representations.density.pole", "[1, 0]", "representations.density.pole"),
    # amr integrates the Stratonovich SPDE (tests/solvers/test_amr_noise.py); Itô is refused
    ("dynamics.noise", '{activation = "relu", sigma_u = 0.5, sigma_w = 0.5, n_max = 2, '
     'calculus = "ito"}', "dynamics.noise.calculus"),
])
def test_bad_amr_configs_are_refused_naming_the_key(key, value, word):
    raw = apply_set(read_raw(EXAMPLE), "representations.density.scheme=amr")
    if key == "dynamics.noise":
        raw = apply_set(apply_set(raw, "stepping.courant=false"), "stepping.dt=0.05")
    raw = apply_set(raw, f"{key}={value}")
    with pytest.raises(ValueError, match=word.replace(".", r"\.")):
        RunConfig.from_dict(raw)


def test_cli_run_on_the_circle(tmp_path, capsys):
    """examples/circle_clusters.toml (S¹, random-phase ρ₀ given on the grid: remapped onto the
    arcs) as "amr", shrunk: mass 1 on the CircleGrid field, positive, arcs beside it."""
    args = ["run", str(EXAMPLE.parent / "circle_clusters.toml"), "--output", str(tmp_path / "c"),
            "--quiet", "--json"]
    for s in ("representations.density.scheme=amr", "grid.n=64", "initial.max_degree=16",
              "representations.particles=false", "stepping.t_end=1.0",
              "representations.density.max_level=2", "dynamics.attention.method=reference"):
        args += ["--set", s]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["density"]["scheme"] == "amr"
    with netCDF4.Dataset(tmp_path / "c" / "run.nc") as ds:
        ds.set_auto_mask(False)
        rho = np.array(ds["density"][...])
        assert "density_leaves" in ds.variables
    assert rho.shape[1:] == (64,) and np.all(rho >= 0.0)
    np.testing.assert_allclose(rho.sum(axis=1) * 2 * np.pi / 64, 1.0, rtol=0, atol=1e-13)


def test_memory_it_cannot_honour_is_refused_naming_the_key():
    raw = read_raw(EXAMPLE)
    for s in ("representations.density.scheme=amr", "representations.density.base_nlat=32",
              "representations.density.max_level=7", "representations.density.max_cells=10000000"):
        raw = apply_set(raw, s)
    with pytest.raises(ValueError, match="representations.density: .*base_nlat = 32, max_level = 7, "
                                         "max_cells = 10000000 need about .* GiB"):
        build(RunConfig.from_dict(raw))
