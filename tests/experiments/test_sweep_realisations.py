"""Ensembles as sweeps over ``dynamics.noise.realisation``: member r is driven by the Brownian path
that realisation r of ``spherepde ensemble`` gets, and ``sweep.nc`` stacks them along a sorted
``realisation`` dimension."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from spherepde.experiments.config import RunConfig, apply_set, read_raw
from spherepde.experiments.run import build
from spherepde.experiments.sweep import expand, run_sweep
from spherepde.experiments.ensemble import SPDEConfig, run_ensemble

SWEEP_EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "sweeps").glob("*.toml"))
EPS64, EPS32 = np.finfo(np.float64).eps, np.finfo(np.float32).eps

#: one model, written for the ensemble (SPDEConfig) and for the configuration tree (RunConfig)
ENSEMBLE = SPDEConfig(grid="sphere", nlat=12, sigma_u=0.5, sigma_w=0.5, nmax=4,
                      initial={"kind": "vmf", "direction": [1.0, 0.0, 0.0], "concentration": 3.0},
                      t_end=0.5, dt=0.05, n_outputs=2, seed=4, energy_beta=1.0)
RAW = {"grid": {"kind": "sphere", "nlat": 12},
       "initial": {"kind": "vmf", "centres": [[1.0, 0.0, 0.0]], "kappas": [3.0]},
       "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 4,
                              "seed": 4}},
       "representations": {"density": True},
       "stepping": {"t_end": 0.5, "dt": 0.05, "output_every": 0.25},
       "outputs": {"diagnostics": ["mass", "energy"], "energy_beta": 1.0},
       "sweep": {"dynamics.noise.realisation": [1, 0]}}  # unsorted on purpose


def test_member_r_gets_the_ensembles_brownian_path_r():
    noise = ENSEMBLE.make_noise()
    for r in (0, 3):
        path = build(RunConfig.from_dict(apply_set({k: v for k, v in RAW.items() if k != "sweep"},
                                                   f"dynamics.noise.realisation={r}"))).path
        assert path.to_dict() == ENSEMBLE.make_path(noise, r).to_dict()
        for t in (0.05, 0.3, 0.5):  # the same numbers, not only the same parameters
            assert np.array_equal(path(t), ENSEMBLE.make_path(noise, r)(t))


def test_two_member_realisation_sweep_reproduces_the_ensemble(tmp_path):
    run_ensemble(ENSEMBLE, 2, tmp_path / "ensemble.nc", workers=0)
    s = run_sweep(RAW, tmp_path / "sweep", workers=0, progress=False)
    assert (s["members"], s["completed"]) == (2, 2)
    ens = xr.open_dataset(tmp_path / "ensemble.nc")
    sw = xr.open_dataset(tmp_path / "sweep" / "sweep.nc")
    assert list(sw["realisation"].values) == [0, 1]          # sorted, whatever the order given
    assert sw["density"].dims == ("realisation", "time", "lat", "lon")
    assert sw["energy"].dims == ("realisation", "time")
    assert np.array_equal(sw["time"].values, ens["time"].values)
    assert list(ens["realisation"].values) == [0, 1]
    # Error model: both runs take the same 10 steps on the same path; they differ only in how ρ_0
    # is normalised (an ulp).  The positive-limited FFSL step is max-norm stable and adds at most
    # a few ulps of max ρ per step, so |Δρ| ≤ (1 + steps) · 4 eps · max ρ; ensemble.nc stores ρ
    # in float32 (one more rounding, ½ eps32 relative); E = ½∬(1 − k)ρρ with 0 ≤ 1 − k ≤ 1 on S²
    # of area 4π changes by at most 4π |Δρ|.
    steps = round(ENSEMBLE.t_end / ENSEMBLE.dt)
    rho = sw["density"].values
    assert np.all(np.isfinite(rho)) and np.all(np.isfinite(sw["energy"].values))
    tol = (1 + steps) * 4 * EPS64 * float(np.max(rho))
    for r in (0, 1):
        a = rho[r]
        b = ens["density"].sel(realisation=r).values.astype(float)
        assert np.all(np.abs(a - b) <= tol + 0.5 * EPS32 * np.abs(a)), r
        e_ens = ens["energy"].sel(realisation=r).values
        assert np.all(np.abs(sw["energy"].values[r] - e_ens) <= 4 * np.pi * tol), r
    # and the two realisations are different paths (the comparison above is not vacuous)
    assert np.max(np.abs(rho[0, -1] - rho[1, -1])) > 1e3 * tol
    ens.close()
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
