"""Sweeps over ``dynamics.noise.realisation`` (what ``spherepde ensemble`` runs): member r is
driven by Brownian path r of the seed, and ``sweep.nc`` stacks them along a sorted
``realisation`` dimension; the sweep examples expand."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from spherepde.runs.config import RunConfig, apply_set, read_raw
from spherepde.runs.build import build
from spherepde.runs.sweep import expand, run_sweep
from spherepde.noise import BrownianPath

SWEEP_EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "sweeps").glob("*.toml"))

RAW = {"grid": {"kind": "sphere", "nlat": 12},
       "initial": {"kind": "vmf", "centres": [[1.0, 0.0, 0.0]], "kappas": [3.0]},
       "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 4,
                              "seed": 4}},
       "representations": {"density": True},
       "stepping": {"t_end": 0.5, "dt": 0.05, "output_every": 0.25},
       "outputs": {"diagnostics": ["mass", "energy"], "energy_beta": 1.0}}


def test_member_r_gets_brownian_path_r_of_the_seed():
    for r in (0, 3):
        model = build(RunConfig.from_dict(apply_set(RAW, f"dynamics.noise.realisation={r}")))
        want = BrownianPath(model.noise.shape, seed=4, realisation=r)
        assert model.path.to_dict() == want.to_dict()
        for t in (0.05, 0.3, 0.5):  # the same numbers, not only the same parameters
            assert np.array_equal(model.path(t), want(t))


def test_realisation_sweep_is_sorted_and_its_members_differ(tmp_path):
    s = run_sweep({**RAW, "sweep": {"dynamics.noise.realisation": [1, 0]}}, tmp_path / "sweep",
                  workers=0, progress=False)  # unsorted on purpose
    assert (s["members"], s["completed"]) == (2, 2)
    sw = xr.open_dataset(tmp_path / "sweep" / "sweep.nc")
    assert list(sw["realisation"].values) == [0, 1]
    assert sw["density"].dims == ("realisation", "time", "lat", "lon")
    assert sw["energy"].dims == ("realisation", "time")
    rho = sw["density"].values
    assert np.all(np.isfinite(rho)) and np.max(np.abs(rho[0, -1] - rho[1, -1])) > 1e-3
    sw.close()


@pytest.mark.parametrize("example", SWEEP_EXAMPLES, ids=[p.stem for p in SWEEP_EXAMPLES])
def test_sweep_examples_expand(example):
    s = expand(read_raw(example))
    assert len(s.members) >= 2


def test_realisation_sweep_example_runs_shrunk(tmp_path):
    raw = read_raw(SWEEP_EXAMPLES[[p.stem for p in SWEEP_EXAMPLES].index("spde_realisations")])
    for a in ("grid.nlat=12", "stepping.t_end=0.2", "stepping.output_every=0.1",
              "representations.particles.n=20"):
        raw = apply_set(raw, a)
    raw["sweep"] = {"dynamics.noise.realisation": [1, 0]}
    s = run_sweep(raw, tmp_path / "o", workers=0, progress=False)
    sw = xr.open_dataset(s["file"])
    assert list(sw["realisation"].values) == [0, 1]
    assert sw["particles_energy"].dims == ("realisation", "time")
    assert json.loads(sw.attrs["members_json"])[1]["dynamics.noise.realisation"] == 1
    sw.close()
