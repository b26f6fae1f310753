"""``spherepde run``: end to end runs, one file per run, reproducible bits, conservation, the
shared noise path, and bad input refused before any file exists."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from spherepde.cli import main
from spherepde.runs.config import DEFAULT, RunConfig, apply_set, load, read_raw
from spherepde.runs.build import build
from spherepde.runs.execute import run
from spherepde.io.netcdf import open_dataset, read_config
from spherepde.grids import GaussGrid
from spherepde.validation.metrics import (as_measure, top_eigenspace, two_point_weight, two_point_weight_cells,
                                          w2_two_point)
from conftest import interrupt_after

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
EPS = np.finfo(float).eps

SMALL = ["grid.nlat=12", "stepping.t_end=1.0", "stepping.output_every=0.25",
         "representations.particles.n=40"]
NOISY = {  # attention + noise, density + particles on the same path, small
    "grid": {"kind": "sphere", "nlat": 12},
    "initial": {"kind": "low-mode", "amplitude": 0.5, "max_degree": 3, "seed": 4},
    "dynamics": {"attention": {"Q": np.eye(3).tolist(), "K": np.eye(3).tolist(),
                               "V": np.eye(3).tolist(), "beta": 4.0},
                 "noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 3,
                           "seed": 5}},
    "representations": {"density": True, "particles": {"n": 30, "seed": 6}},
    "stepping": {"t_end": 0.5, "dt": 0.05, "output_every": 0.25},
    "outputs": {"diagnostics": ["mass", "min_density", "energy", "w2_particles_density"]},
}


def _cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _sets(assignments):
    return [a for s in assignments for a in ("--set", s)]


def test_default_run_end_to_end(tmp_path, capsys):
    out = tmp_path / "out"
    rc, stdout, _ = _cli(["run", *_sets(SMALL), "--output", str(out), "--quiet", "--json"], capsys)
    assert rc == 0
    res = json.loads(stdout)
    assert {"file", "summary", "density", "particles", "seeds", "version"} <= set(res)
    for name in ("run.nc", "summary.json", "config.toml"):
        assert (out / name).is_file()
    ds = open_dataset(out / "run.nc")
    expected = {"density", "position", "weight", "mass", "min_density", "energy", "dist_eigenspace",
                "w2_projection", "particles_w2_projection",
                "particles_energy", "particles_dist_eigenspace", "w2_particles_density", "Q", "K", "V",
                "cell_area"}
    assert expected <= set(ds.data_vars)
    assert ds.sizes["time"] == 5 and ds.sizes["particle"] == 40 and ds["density"].shape == (5, 12, 24)
    assert np.all(np.isfinite(ds["density"].values)) and np.all(np.isfinite(ds["position"].values))
    assert np.allclose(np.linalg.norm(ds["position"].values, axis=-1), 1.0, atol=1e-12)
    stored = RunConfig.from_dict(read_config(out / "run.nc"))
    assert stored == RunConfig.from_dict(apply_set(apply_set(apply_set(apply_set(
        DEFAULT, SMALL[0]), SMALL[1]), SMALL[2]), SMALL[3]))
    assert load(out / "config.toml") == stored
    assert json.loads((out / "summary.json").read_text())["config"] == stored.to_dict()
    assert ds.attrs["spherepde_version"] and json.loads(ds.attrs["seeds_json"])["particles"] == 0
    # like with like: the particles' W₂ targets the projection of their own initial measure; the
    # distance to the density's Π#ρ₀ is particles_w2_projection_rho0
    att = stored.dynamics.attention
    A = np.array(att.V) @ (np.array(att.Q).T @ np.array(att.K)).T  # A = V Bᵀ, B = QᵀK
    e = top_eigenspace(A).basis[:, 0]
    x0, w = ds["position"].values[0], ds["weight"].values
    xe, we = ds["position"].values[-1], w
    a_own = two_point_weight(x0, w, e)
    # the density's Π#ρ₀ takes a from ρ₀'s formula: ρ₀ ∝ 1 + A⟨x, â⟩ has a = ½ + A⟨â, e⟩/4 exactly
    init = stored.initial
    assert init.kind == "cosine"
    a_rho0 = 0.5 + init.amplitude * (e @ (np.array(init.direction) / np.linalg.norm(init.direction))) / 4
    on_grid = two_point_weight_cells(GaussGrid(12), ds["density"].values[0], e)
    assert 0 < abs(on_grid - a_rho0) <= 0.1 * (np.pi / 12) ** 2  # the grid's cells: O(h²) off
    assert ds["w2_projection"].values[-1] == pytest.approx(
        w2_two_point(*as_measure(GaussGrid(12), ds["density"].values[-1]), e, a_rho0), rel=1e-12)
    assert ds["particles_w2_projection"].values[-1] == pytest.approx(w2_two_point(xe, we, e, a_own), rel=1e-12)
    assert ds["particles_w2_projection_rho0"].values[-1] == pytest.approx(w2_two_point(xe, we, e, a_rho0),
                                                                           rel=1e-12)


def test_config_positional_and_alias(tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(NOISY))
    for i, args in enumerate(([str(cfg)], ["--config", str(cfg)])):
        rc, stdout, _ = _cli(["run", *args, "--output", str(tmp_path / f"o{i}"), "--quiet", "--json"], capsys)
        assert rc == 0 and json.loads(stdout)["noise"]["calculus"] == "stratonovich"
    rc, _, err = _cli(["run", str(cfg), "--config", str(cfg), "--output", str(tmp_path / "o2")], capsys)
    assert rc == 2 and "not both" in err and not (tmp_path / "o2").exists()


def _run(tmp_path, raw, name):
    return run(RunConfig.from_dict(raw), tmp_path / name, progress=False), open_dataset(tmp_path / name / "run.nc")


def test_same_seed_same_bits_other_seed_other_path(tmp_path):
    _, a = _run(tmp_path, NOISY, "a")
    _, b = _run(tmp_path, NOISY, "b")
    for var in ("density", "position", "energy", "particles_energy", "w2_particles_density"):
        assert np.array_equal(a[var].values, b[var].values), var
    other = apply_set(NOISY, "dynamics.noise.seed=6")
    _, c = _run(tmp_path, other, "c")
    assert np.all(np.isfinite(c["density"].values))
    assert not np.array_equal(a["density"].values[-1], c["density"].values[-1])
    assert not np.array_equal(a["position"].values[-1], c["position"].values[-1])


@pytest.mark.parametrize("raw", [NOISY, apply_set(NOISY, "dynamics.noise=false")], ids=["spde", "meanfield"])
def test_mass_conserved_to_round_off_and_no_negative_density(tmp_path, raw):
    summary, ds = _run(tmp_path, raw, "m")
    steps = summary["density"]["steps"]
    mass = ds["mass"].values
    rho = ds["density"].values
    assert np.all(np.isfinite(mass)) and np.all(np.isfinite(rho))
    # error model: each step moves every cell's mass by fluxes that cancel exactly up to one
    # rounding per flux; bound 1e3·eps per step
    assert np.max(np.abs(mass - 1.0)) <= 1e3 * EPS * steps
    assert float(rho.min()) >= 0.0
    assert steps == round(raw["stepping"]["t_end"] / raw["stepping"]["dt"])


def test_density_and_particles_share_one_brownian_path():
    model = build(RunConfig.from_dict(NOISY))
    assert model.density.path is model.particles.system.path
    # the same field, each representation with its own copy (its own evaluation cache)
    a, b = model.density.noise, model.particles.system.noise
    assert a is not b and a.kernel is b.kernel and a.nmax == b.nmax
    assert np.array_equal(a.sqrt_c, b.sqrt_c)
    assert model.density.scheme == "stratonovich" and model.particles.system.method == "heun"


def test_transformer_on_the_same_path_approaches_the_sde_with_depth(tmp_path):
    """m = ∞ layers built from the run's Brownian path: the transformer's tokens (drawn like the
    particles, same seed) approach the limit SDE's particles as L grows (Thm 1.1)."""
    base = apply_set(apply_set(NOISY, "representations.density=false"), 'outputs.diagnostics=["energy"]')
    base = apply_set(base, "stepping.dt=0.0025")
    errors = []
    for depth in (20, 80):
        raw = apply_set(base, f"representations.transformer={{depth = {depth}, width = inf, n = 30, seed = 6}}")
        summary, ds = _run(tmp_path, raw, f"L{depth}")
        assert summary["transformer"]["layers"] == depth
        x, z = ds["position"].values, ds["transformer_position"].values
        assert np.all(np.isfinite(x)) and np.all(np.isfinite(z))
        assert np.array_equal(x[0], z[0])  # the same initial tokens
        errors.append(float(np.max(np.abs(x[-1] - z[-1]))))
    assert errors[1] < 0.6 * errors[0]


def test_transformer_with_finite_width_is_reproducible(tmp_path):
    raw = apply_set(NOISY, "representations.transformer={depth = 10, width = 16, n = 12, seed = 2}")
    _, a = _run(tmp_path, raw, "a")
    _, b = _run(tmp_path, raw, "b")
    za = a["transformer_position"].values
    assert np.all(np.isfinite(za)) and np.array_equal(za, b["transformer_position"].values)
    assert np.allclose(np.linalg.norm(za, axis=-1), 1.0, atol=1e-12)


def test_ito_particles_alone_on_the_circle(tmp_path):
    raw = {"grid": {"kind": "circle", "n": 32},
           "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.3, "n_max": 4, "calculus": "ito"}},
           "representations": {"density": False, "particles": {"n": 16}},
           "stepping": {"t_end": 0.2, "dt": 0.02, "output_every": 0.1},
           "outputs": {"diagnostics": ["energy"]}}
    summary, ds = _run(tmp_path, raw, "ito")
    assert "density" not in ds and "density" not in summary
    assert build(RunConfig.from_dict(raw)).particles.system.method == "euler-maruyama"
    x = ds["position"].values
    assert x.shape == (3, 16, 2) and np.all(np.isfinite(x))
    assert np.allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-12)


def test_initial_density_from_a_netcdf_file(tmp_path):
    raw = apply_set(NOISY, "dynamics.noise=false")
    _, first = _run(tmp_path, raw, "first")
    again = apply_set(raw, f'initial={{kind = "netcdf", path = "{tmp_path / "first" / "run.nc"}"}}')
    model = build(RunConfig.from_dict(again))
    last = first["density"].values[-1]
    assert np.allclose(model.rho0, last / float(model.grid.integrate(last)), rtol=1e-13, atol=0)


BAD_CLI = [
    (["--set", "dynamics.attention.Q=[[1, 0], [0, 1]]"], "dynamics.attention.Q"),
    (["--set", "dynamics.attention.beta=0"], "dynamics.attention.beta"),
    (["--set", "grid.nlta=16"], "did you mean 'grid.nlat'"),
    (["--set", "dynamics.attention.K=[[0, 0, 0], [0, 1, 0], [0, 0, 1]]", "--set",
      "dynamics.attention.beta=inf"], "dynamics.attention"),
    (["--set", "stepping.dt=0.5"], "stepping.courant"),
    (["--set", "initial={kind = \"netcdf\", path = \"/nonexistent/x.nc\"}"], "initial.path"),
    (["--set", "grid.nlat"], "--set"),
    (["--set", "dynamics.attention.method=spectral"], "dynamics.attention.method"),
    (["--set", "dynamics.attention.K=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]", "--set",
      "dynamics.attention.V=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]", "--set",
      "outputs.diagnostics=[\"w2_projection\"]"], "one-dimensional top eigenspace"),
    (["--seed", "-3"], "--seed"),
]


@pytest.mark.parametrize("args, word", BAD_CLI, ids=[w for _, w in BAD_CLI])
def test_bad_input_refused_before_any_file(tmp_path, capsys, args, word):
    out = tmp_path / "never"
    rc, stdout, err = _cli(["run", *args, "--output", str(out), "--quiet"], capsys)
    assert rc == 2 and stdout == "" and word in err
    assert not out.exists()


def test_set_false_switches_an_optional_value_off():
    raw = apply_set(apply_set(DEFAULT, "stepping.dt=0.5"), "stepping.courant=false")
    c = RunConfig.from_dict(raw)
    assert c.stepping.dt == 0.5 and c.stepping.courant is None


def test_noise_step_too_large_is_refused_before_any_file(tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(apply_set(NOISY, "stepping.dt=0.25")))
    out = tmp_path / "never"
    rc, _, err = _cli(["run", str(cfg), "--set", "dynamics.noise.sigma_w=3", "--output", str(out)], capsys)
    assert rc == 2 and "stepping.dt" in err and not out.exists()


def test_output_that_is_a_file_exits_2_naming_it(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(NOISY))
    rc, _, err = _cli(["run", str(cfg), "--output", str(f)], capsys)
    assert rc == 2 and "--output" in err and str(f) in err


def _shrunk(path: Path) -> list[str]:
    raw = read_raw(path)
    sets = ["stepping.t_end=0.4", "stepping.output_every=0.2"]
    kind = raw["grid"]["kind"]
    if kind != "none":  # no grid to shrink for tokens in R^d, d ≥ 4
        sets.append("grid.nlat=12" if kind == "sphere" else "grid.n=64")
    if raw.get("initial", {}).get("kind") == "random-phase":  # its modes must fit the grid: 2·16 ≤ 64
        sets.append("initial.max_degree=16")
    reps = raw.get("representations", {})
    if "particles" in reps:
        sets.append("representations.particles.n=40")
    if "transformer" in reps:
        sets += ["representations.transformer.n=20", "representations.transformer.depth=20"]
    return sets


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_runs_shrunk(tmp_path, capsys, example):
    out = tmp_path / example.stem
    rc, stdout, _ = _cli(["run", str(example), *_sets(_shrunk(example)), "--output", str(out),
                          "--quiet", "--json"], capsys)
    assert rc == 0
    ds = open_dataset(out / "run.nc")
    assert ds.sizes["time"] == 3
    cfg = load(example)
    if cfg.representations.density:
        assert np.all(np.isfinite(ds["density"].values))
        assert abs(float(ds["mass"].values[-1]) - 1.0) <= 1e3 * EPS * json.loads(stdout)["density"]["steps"]
    if cfg.representations.particles is not None:
        assert np.all(np.isfinite(ds["position"].values))
    if cfg.representations.transformer is not None:
        assert np.all(np.isfinite(ds["transformer_position"].values))


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_runs_full_size(tmp_path, capsys, example):
    import time

    t0 = time.perf_counter()
    rc, _, _ = _cli(["run", str(example), "--output", str(tmp_path / "o"), "--quiet", "--json"], capsys)
    seconds = time.perf_counter() - t0
    assert rc == 0 and seconds < 120
    ds = open_dataset(tmp_path / "o" / "run.nc")
    energies = [v for v in ("energy", "particles_energy", "transformer_energy") if v in ds]
    assert energies and all(math.isfinite(float(ds[v].values[-1])) for v in energies)
    print(f"{example.stem}: {seconds:.1f} s")


@pytest.mark.parametrize("stop", ["density", "particles"])
def test_interrupted_run_stops_every_representation_at_one_output_and_plots(tmp_path, monkeypatch,
                                                                            capsys, stop):
    """Ctrl-C in the 7th step of either representation: they advance in step (density, then
    particles, to each output time), so the particles hold the outputs up to t = 0.25 (steps 1–5
    reach it) and the density those up to the same time, or the next one when the particles
    stopped; the summary says where each stopped, and ``spherepde plot`` draws the file."""
    from spherepde.runs import build as run_module

    cls = run_module.ParticleStepper if stop == "particles" else type(build(RunConfig.from_dict(NOISY)).density)
    interrupt_after(monkeypatch, cls, "step", 6)
    with pytest.raises(KeyboardInterrupt):
        run(RunConfig.from_dict(NOISY), tmp_path / "o", progress=False)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["density"]["steps"] >= 5 and summary["particles"]["steps"] >= 5
    ds = open_dataset(tmp_path / "o" / "run.nc", incomplete="ignore")
    assert ds.attrs["status"] == "interrupted"
    written = {v: np.isfinite(ds[v].values) for v in ("energy", "particles_energy")}
    assert written["particles_energy"].tolist() == [True, True, False]
    assert written["energy"].tolist() == [True, True, stop == "particles"]
    rc, _, err = _cli(["plot", str(tmp_path / "o" / "run.nc"), "--output", str(tmp_path / "p"),
                       "--no-animation"], capsys)
    assert rc == 0, err
    assert any((tmp_path / "p").glob("*.png"))
    from spherepde.io.rundata import read_run  # the figures' titles say where it stopped

    last = 0.5 if stop == "particles" else 0.25
    assert read_run(tmp_path / "o" / "run.nc").label.endswith(f"[interrupted at t = {last:g}]")
