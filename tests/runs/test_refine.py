"""``spherepde run --refine F``: every resolution parameter of every representation scaled by F,
the model untouched, bad factors refused before any work."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from spherepde.cli import main
from spherepde.runs.config import RunConfig
from spherepde.runs.compare import compare_runs
from spherepde.runs.refine import refine

EXAMPLE = Path(__file__).parents[2] / "examples" / "metastability.toml"


EYE = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
EYE2 = [[1.0, 0.0], [0.0, 1.0]]


def _config(noise=None, **reps) -> RunConfig:
    raw = {"grid": {"kind": "sphere", "nlat": 24},
           "initial": {"kind": "cosine", "direction": [0.6, 0.5, 0.3], "amplitude": 0.5},
           "dynamics": {"attention": {"Q": EYE, "K": EYE, "V": EYE, "beta": 30.0},
                        **({} if noise is None else {"noise": noise})},
           "representations": {"density": True, **reps},
           "stepping": {"t_end": 2.0, "dt": 0.05, "output_every": 0.5}}
    return RunConfig.from_dict(raw)


def test_refine_scales_grid_counts_and_step_and_leaves_the_model():
    cfg = _config(noise={"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "seed": 1},
                  particles={"n": 400, "seed": 3}, transformer={"n": 100, "depth": 8, "width": 10})
    fine = refine(cfg, 1.5)
    assert fine.grid.nlat == 36
    assert fine.representations.particles.n == 900
    assert fine.representations.particles.seed == 3
    assert fine.representations.transformer.n == 225
    assert fine.representations.transformer.depth == 12  # 8 · 1.5, a multiple of the 4 outputs
    assert fine.representations.transformer.width == 23  # 10 · 2.25 = 22.5, halves upwards
    assert math.isclose(fine.stepping.dt, 0.05 / 1.5)
    for key in ("initial", "dynamics", "outputs"):
        assert fine.to_dict()[key] == cfg.to_dict()[key]
    assert (fine.stepping.t_end, fine.stepping.output_every) == (cfg.stepping.t_end, cfg.stepping.output_every)
    assert refine(cfg, 1).to_dict() == cfg.to_dict()


def test_refine_keeps_the_transformer_layers_lined_up_with_the_outputs():
    cfg = _config(transformer={"n": 10, "depth": 2})  # 2 layers divide the 4 output intervals
    # 3 and 6 layers would not line up; a tie goes to the finer
    assert refine(cfg, 1.5).representations.transformer.depth == 4
    assert refine(cfg, 3.0).representations.transformer.depth == 8
    assert refine(cfg, 0.5).representations.transformer.depth == 1


def test_refine_scales_the_amr_base_and_cell_budget_and_nlat_stays_even():
    cfg = RunConfig.from_dict({**_config().to_dict(), "grid": {"kind": "sphere", "nlat": 22},
                               "representations": {"density": {"scheme": "amr", "base_nlat": 16,
                                                               "max_level": 2, "max_cells": 4000}}})
    fine = refine(cfg, 1.5)
    dens = fine.representations.density
    assert fine.grid.nlat == 34 and fine.grid.nlat % 2 == 0  # 22 · 1.5 = 33 → the even 34
    assert (dens.base_nlat, dens.max_level, dens.max_cells) == (24, 2, 9000)
    assert dens.mass_per_cell == cfg.representations.density.mass_per_cell


def test_refine_on_the_circle_scales_the_cells():
    cfg = RunConfig.from_dict({"grid": {"kind": "circle", "n": 64}, "initial": {"kind": "uniform"},
                               "dynamics": {"attention": {"Q": EYE2, "K": EYE2, "V": EYE2, "beta": 4.0}},
                               "stepping": {"t_end": 1.0, "courant": 0.5}})
    assert refine(cfg, 2).grid.n == 128
    assert refine(cfg, 2).stepping.courant == 0.5  # Δt follows the grid already


@pytest.mark.parametrize("factor", [0.0, -1.0, 0.1, 5.0, math.nan, math.inf, True, "2"])
def test_bad_factors_are_refused_naming_the_option(factor):
    with pytest.raises(ValueError, match=r"--refine: must be a number in \[0.25, 4\]"):
        refine(_config(), factor)


def test_a_refined_value_out_of_range_is_refused_with_its_key():
    cfg = _config(particles={"n": 60_000})
    with pytest.raises(ValueError, match=r"--refine 2: representations\.particles\.n"):
        refine(cfg, 2)


def test_cli_run_refine_writes_the_refined_configuration(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[grid]\nkind = "sphere"\nnlat = 8\n[dynamics.attention]\n'
                   'Q = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]\n'
                   'K = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]\n'
                   'V = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]\nbeta = 1.0\n'
                   '[stepping]\nt_end = 0.2\ndt = 0.1\noutput_every = 0.1\n')
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--refine", "1.5", "--output", str(out), "--quiet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["outputs"] == 3  # t = 0, 0.1, 0.2
    stored = (out / "config.toml").read_text()
    assert "nlat = 12" in stored and "dt = 0.0666" in stored


def test_cli_refine_with_restart_is_refused(tmp_path, capsys):
    assert main(["run", "--restart", str(tmp_path / "run.nc"), "--refine", "2"]) == 2
    assert "--refine" in capsys.readouterr().err


def test_validate_resolution_compares_a_run_with_its_refined_run(tmp_path, capsys):
    """The metastability set-up, nlat 8 and its --refine 1.5 (nlat 12): at β = 30 the clusters
    are narrower than a cell of either grid, so the energy changes far beyond 2 %: not resolved;
    a run against itself changes by exactly 0."""
    sets = ["--set", "grid.nlat=8", "--set", "stepping.t_end=6.0", "--set", "stepping.output_every=1.0"]
    for name, extra in (("a", []), ("b", ["--refine", "1.5"])):
        assert main(["run", str(EXAMPLE), *sets, *extra, "--output", str(tmp_path / name), "--quiet",
                     "--json"]) == 0
    capsys.readouterr()
    a, b = str(tmp_path / "a" / "run.nc"), str(tmp_path / "b" / "run.nc")
    assert main(["validate", "resolution", a, b, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["per_quantity"]) == {"energy", "dist_eigenspace", "dist_eigenspace_V", "w2_projection"}
    assert out["times"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert out["max_relative_change"] > 0.02 and out["resolved"] is False
    assert len(out["switch_time"]) == 2 and "switch_time_change" in out
    same = compare_runs(a, a)
    assert same["max_relative_change"] == 0.0 and same["resolved"] is True
    assert main(["validate", "resolution", a, b]) == 0
    text = capsys.readouterr().out
    assert text.startswith("spherepde validate resolution: NOT resolved") and "energy:" in text


def test_validate_resolution_refuses_two_different_models(tmp_path, capsys):
    sets = ["--set", "grid.nlat=6", "--set", "stepping.t_end=0.5", "--set", "stepping.output_every=0.25"]
    for name, beta in (("a", 30), ("b", 10)):
        assert main(["run", str(EXAMPLE), *sets, "--set", f"dynamics.attention.beta={beta}", "--output",
                     str(tmp_path / name), "--quiet", "--json"]) == 0
    capsys.readouterr()
    assert main(["validate", "resolution", str(tmp_path / "a" / "run.nc"), str(tmp_path / "b" / "run.nc")]) == 2
    err = capsys.readouterr().err
    assert "different models" in err and "dynamics.attention.beta" in err
