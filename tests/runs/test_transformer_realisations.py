"""``representations.transformer.realisations`` (R transformers on the same tokens in one run) and
transformer outputs finer than its layers (output t holds X_{⌊Lt/T⌋})."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import xarray as xr

from spherepde.runs.config import RunConfig, apply_set
from spherepde.runs.execute import run
from spherepde.runs.build import transformer_anchors
from spherepde.validation.metrics import interaction_energy

EYE = np.eye(3).tolist()
BASE = {"grid": {"kind": "sphere", "nlat": 6}, "initial": {"kind": "uniform"},
        "dynamics": {"attention": {"Q": EYE, "K": EYE, "V": EYE, "beta": 1.0},
                     "noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 3,
                               "seed": 3}},
        "representations": {"density": False,
                            "transformer": {"depth": 4, "width": 5, "n": 6, "seed": 1}},
        "stepping": {"t_end": 1.0, "dt": 0.0625, "output_every": 0.25},
        "outputs": {"diagnostics": ["energy"]}}


def _with(raw=BASE, **sets):
    for key, value in sets.items():
        raw = apply_set(raw, f"{key.replace('__', '.')}={value}")
    return raw


def _tokens(path, name="transformer_position"):
    with xr.open_dataset(path) as ds:
        return ds[name].values


@pytest.mark.parametrize("width", ["5", "inf"])
def test_realisation_k_is_the_run_on_noise_realisation_r_plus_k(tmp_path, width):
    """R = 3 realisations from noise realisation r = 2: realisation k equals the one-realisation
    run on noise realisation 2 + k (width m: layer generator 2 + k; inf: Brownian path 2 + k), to
    round-off (the one-realisation step renormalises its input tokens, the batched one does
    not: |ΔX| ≤ a few ulps per layer, 4 layers); the realisations differ; the energy series is
    per realisation."""
    w = {"representations__transformer__width": width, "dynamics__noise__realisation": "2"}
    summary = run(RunConfig.from_dict(_with(**w, representations__transformer__realisations="3")),
                  tmp_path / "R", progress=False)
    assert summary["transformer"]["realisations"] == 3
    with xr.open_dataset(tmp_path / "R" / "run.nc") as ds:
        z = ds["transformer_position"].values
        assert ds["transformer_position"].dims == ("time", "transformer_realisation", "token", "dim")
        assert ds["transformer_energy"].dims == ("time", "transformer_realisation")
        energy = ds["transformer_energy"].values
    assert z.shape == (5, 3, 6, 3) and np.all(np.isfinite(z))
    np.testing.assert_array_equal(z[0, 0], z[0, 2])  # the same tokens
    for k in range(3):
        raw = _with(**{**w, "dynamics__noise__realisation": str(2 + k)})
        run(RunConfig.from_dict(raw), tmp_path / f"r{k}", progress=False)
        one = _tokens(tmp_path / f"r{k}" / "run.nc")
        np.testing.assert_allclose(z[:, k], one, rtol=0, atol=1e-14)
        for i in range(5):
            assert energy[i, k] == pytest.approx(interaction_energy(z[i, k], np.full(6, 1 / 6), 1.0),
                                                 rel=1e-12)
    assert np.max(np.abs(z[-1, 0] - z[-1, 1])) > 1e-3


def test_outputs_between_layers_hold_the_last_layer(tmp_path):
    """4 layers on 8 output intervals: output i holds X_{⌊i/2⌋}, the same bits as the run with
    one output per layer."""
    run(RunConfig.from_dict(BASE), tmp_path / "layers", progress=False)
    run(RunConfig.from_dict(_with(stepping__output_every="0.125")), tmp_path / "fine", progress=False)
    coarse, fine = _tokens(tmp_path / "layers" / "run.nc"), _tokens(tmp_path / "fine" / "run.nc")
    assert fine.shape == (9, 6, 3)
    np.testing.assert_array_equal(fine[::2], coarse)
    np.testing.assert_array_equal(fine[1::2], coarse[:-1])
    assert transformer_anchors(8, 4).tolist() == [0, 0, 2, 2, 4, 4, 6, 6, 8]
    assert transformer_anchors(2, 4).tolist() == [0, 1, 2]


@pytest.mark.parametrize("sets, words", [
    ({"representations__transformer__realisations": "0"},
     ["representations.transformer.realisations", "1.."]),
    ({"representations__transformer__realisations": "2.5"},
     ["representations.transformer.realisations", "integer"]),
    ({"representations__transformer__realisations": "200000"},
     ["representations.transformer.realisations", "integer"]),
    ({"representations__transformer__realisations": "100000", "representations__transformer__n": "20"},
     ["representations.transformer.realisations", "tokens in all"]),
    ({"stepping__output_every": "0.1"}, ["representations.transformer.depth", "multiple or a divisor", "10"]),
])
def test_bad_realisations_and_output_grids(sets, words):
    raw = copy.deepcopy(BASE)
    with pytest.raises(ValueError) as err:
        RunConfig.from_dict(_with(raw, **sets))
    for w in words:
        assert w in str(err.value)


def test_realisations_without_a_grid(tmp_path):
    """grid.kind = "none" (d = 4): R finite-width transformers on the exactly sampled tokens."""
    raw = {"grid": {"kind": "none", "dimension": 4}, "initial": {"kind": "uniform"},
           "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5}},
           "representations": {"density": False, "transformer": {"depth": 4, "width": 5, "n": 6,
                                                                 "realisations": 2}},
           "stepping": {"t_end": 1.0, "dt": 0.25, "output_every": 0.5},
           "outputs": {"diagnostics": ["energy"]}}
    run(RunConfig.from_dict(raw), tmp_path / "a", progress=False)
    z = _tokens(tmp_path / "a" / "run.nc")
    assert z.shape == (3, 2, 6, 4) and np.all(np.isfinite(z))
    np.testing.assert_allclose(np.linalg.norm(z, axis=-1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(z[0, 0], z[0, 1])
    assert np.max(np.abs(z[-1, 0] - z[-1, 1])) > 1e-3
