"""SPDE ensembles: a real dask cluster, one NetCDF file with a realisation record dimension,
reproducible realisations, antithetic pairs, bad input."""
import json

import netCDF4
import numpy as np
import pytest

from spherepde.io.ensemble import EnsembleWriter
from spherepde.io.netcdf import open_dataset, read_config
from spherepde.grids import CircleGrid
from spherepde.experiments.ensemble import SPDEConfig, run_ensemble, run_realisation

SMALL = SPDEConfig(grid="circle", n=32, t_end=0.4, dt=0.05, n_outputs=4,
                   initial={"kind": "vmf", "direction": [1.0, 0.0], "concentration": 2.0})


def test_dask_ensemble_file_matches_serial_runs(tmp_path, single_threaded):
    res = run_ensemble(SMALL, 4, tmp_path / "ens.nc", workers=2)
    assert sorted(res.realisations) == [0, 1, 2, 3]
    ds = open_dataset(tmp_path / "ens.nc")
    assert ds["density"].dims == ("realisation", "time", "theta")
    assert ds["moment_re"].dims == ("realisation", "time", "moment")
    assert ds.sizes["realisation"] == 4 and ds.sizes["time"] == 5
    assert read_config(tmp_path / "ens.nc")["seed"] == SMALL.seed
    # every realisation in the file is realisation r recomputed alone, bit for bit, with one
    # thread as in the workers (BLAS/numba results may depend on the thread count)
    for i, r in enumerate(ds["realisation"].values):
        with single_threaded():
            alone = run_realisation(SMALL, int(r))
        np.testing.assert_array_equal(ds["density"].values[i], alone["density"].astype(np.float32))
        np.testing.assert_array_equal(ds["energy"].values[i], alone["energy"])
    np.testing.assert_allclose(ds["mass"].values, 1.0, rtol=1e-13)
    # realisations differ
    assert not np.allclose(ds["density"].values[0], ds["density"].values[1])


def test_antithetic_pairs_mirror_the_path():
    from dataclasses import replace

    cfg = replace(SMALL, antithetic=True)
    a, b = run_realisation(cfg, 0), run_realisation(cfg, 1)
    # path 1 = −path 0: the first-order (odd) response cancels in the pair mean, which stays close
    # to ρ0 compared with either path alone
    rho0 = a["density"][0]
    one = np.abs(a["density"][1] - rho0).max()
    pair = np.abs(0.5 * (a["density"][1] + b["density"][1]) - rho0).max()
    assert pair < 0.3 * one


def test_writer_keeps_finished_realisations(tmp_path):
    g = CircleGrid(8)
    w = EnsembleWriter(tmp_path / "e.nc", g, times=[0.0, 1.0], fields={"density": {"units": "1"}},
                       series={"mass": {"units": "1"}}, config={"a": 1})
    w.append(3, density=np.ones((2, 8)), mass=np.ones(2))
    with netCDF4.Dataset(tmp_path / "e.nc") as ds:  # readable while the writer is open
        assert list(ds["realisation"][:]) == [3]
    with pytest.raises(ValueError, match="shape"):
        w.append(4, density=np.ones((3, 8)), mass=np.ones(2))
    with pytest.raises(ValueError, match="expected exactly"):
        w.append(4, density=np.ones((2, 8)))
    w.close()
    assert json.loads(netCDF4.Dataset(tmp_path / "e.nc").getncattr("config_json")) == {"a": 1}


@pytest.mark.parametrize("kw, match", [
    ({"grid": "torus"}, "grid"), ({"dt": -0.1}, "dt"), ({"dt": 2.0, "t_end": 1.0}, "dt"),
    ({"n_outputs": 0}, "n_outputs"), ({"initial": {"kind": "gauss"}}, "initial"),
    ({"noise": False}, "nothing moves"), ({"activation": "swish"}, "activation"),
    ({"sigma_u": -1.0}, "sigma_u"), ({"variance_fraction": 1.0}, "fraction"),
])
def test_bad_config(kw, match, tmp_path):
    with pytest.raises((ValueError, TypeError), match=match):
        cfg = SPDEConfig(**kw)
        run_ensemble(cfg, 2, tmp_path / "x.nc", workers=0)


def test_bad_ensemble_arguments(tmp_path):
    from dataclasses import replace

    with pytest.raises(ValueError, match="realisations"):
        run_ensemble(SMALL, 0, tmp_path / "x.nc")
    with pytest.raises(ValueError, match="pairs"):
        run_ensemble(replace(SMALL, antithetic=True), 3, tmp_path / "x.nc")
    with pytest.raises(ValueError, match="workers"):
        run_ensemble(SMALL, 2, tmp_path / "x.nc", workers=-1)


def test_too_large_step_refused_before_any_work(tmp_path):
    from dataclasses import replace

    with pytest.raises(ValueError, match="too large for the noise"):
        run_ensemble(replace(SMALL, dt=0.8, t_end=1.6), 2, tmp_path / "x.nc", workers=0)
    assert not (tmp_path / "x.nc").exists()


class _Done:
    """A finished future of the fake client below."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class _BackwardsClient:
    """Runs each task at submission; dask's as_completed is patched to yield them last first."""

    def submit(self, fn, *args, pure=False):
        return _Done(fn(*args))


def test_realisations_stored_in_order_whatever_order_they_finish(tmp_path, monkeypatch):
    import dask.distributed

    monkeypatch.setattr(dask.distributed, "as_completed", lambda futures: list(futures)[::-1])
    res = run_ensemble(SMALL, 3, tmp_path / "e.nc", client=_BackwardsClient())
    assert res.realisations == [0, 1, 2]
    ds = open_dataset(tmp_path / "e.nc")
    assert ds.attrs["status"] == "complete"
    assert ds["realisation"].values.tolist() == [0, 1, 2]
    serial = run_realisation(SMALL, 1)
    np.testing.assert_array_equal(ds["mass"].values[1], serial["mass"])


def test_interrupted_ensemble_keeps_finished_realisations_sorted(tmp_path, monkeypatch):
    import dask.distributed

    def backwards_then_stop(futures):
        futures = list(futures)
        yield futures[2]
        yield futures[1]
        raise KeyboardInterrupt  # realisation 0 never finishes

    monkeypatch.setattr(dask.distributed, "as_completed", backwards_then_stop)
    with pytest.raises(KeyboardInterrupt):
        run_ensemble(SMALL, 3, tmp_path / "e.nc", client=_BackwardsClient())
    ds = open_dataset(tmp_path / "e.nc", incomplete="ignore")
    assert ds.attrs["status"] == "interrupted"
    assert ds["realisation"].values.tolist() == [1, 2]


ATT = {"Q": np.eye(3).tolist(), "K": np.eye(3).tolist(), "V": np.eye(3).tolist(), "beta": 1.0}


@pytest.mark.parametrize("attention, match", [
    ({**ATT, "Q": [[1.0, 0.0], [0.0, 1.0]]}, r"attention\.Q must be a 3×3"),
    ({**ATT, "V": [[1.0, 0, 0], [0, float("nan"), 0], [0, 0, 1.0]]}, r"attention\.V contains NaN"),
    ({k: v for k, v in ATT.items() if k != "K"}, r"missing keys \['attention\.K'\]"),
    ({**ATT, "beta": -1.0}, r"attention\.beta"),
    ({**ATT, "gamma": 1.0}, r"unknown keys \['attention\.gamma'\]"),
])
def test_bad_attention_named_before_any_file(attention, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        run_ensemble(SPDEConfig(attention=attention), 2, tmp_path / "x.nc", workers=0)
    assert not (tmp_path / "x.nc").exists()
