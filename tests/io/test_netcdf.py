"""NetCDF writer/readers: CF layout, provenance, exact round trips, validation."""
from __future__ import annotations

import json

import netCDF4
import numpy as np
import pytest
import xarray as xr

from spherepde import __version__
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.io import NetCDFWriter, config_to_json, open_dataset, read_config, write_dataset
from spherepde.io.netcdf import IncompleteFileWarning, NetCDFTracker, file_status

VARS = {"density": {"units": "1", "long_name": "probability density"}}


def _write(path, grid, n=3, **kw):
    rng = np.random.default_rng(0)
    data = rng.random((n, *grid.shape))
    kw = {"variables": VARS, "config": {"grid": grid.to_dict()}} | kw
    with NetCDFWriter(path, grid, **kw) as w:
        for k in range(n):
            w.append(0.5 * k, density=data[k])
        assert w.n_records == n
    assert w.closed
    return data


def test_gauss_layout_and_round_trip(tmp_path):
    grid, path = GaussGrid(8), tmp_path / "g.nc"
    config = {"grid": grid.to_dict(), "beta": float("inf"), "Q": np.eye(2), "n": np.int64(3)}
    data = _write(path, grid, config=config, seed=42, title="test run")
    ds = open_dataset(path)
    assert dict(ds.sizes) == {"time": 3, "lat": 8, "lon": 16, "bnds": 2}
    np.testing.assert_array_equal(ds["density"].values, data)
    np.testing.assert_array_equal(ds["time"].values, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(ds["lat"].values, grid.lat_deg)
    np.testing.assert_array_equal(ds["lon"].values, grid.lon_deg)
    np.testing.assert_array_equal(ds["lat_bnds"].values[:, 0], np.degrees(grid.lat_faces[:-1]))
    np.testing.assert_array_equal(ds["lon_bnds"].values[:, 1], np.degrees(grid.lon_faces[1:]))
    np.testing.assert_allclose(ds["cell_area"].sum(), 4 * np.pi, rtol=1e-13)
    assert ds["lat"].attrs == {"units": "degrees_north", "standard_name": "latitude",
                               "long_name": "latitude (Gauss-Legendre nodes)", "axis": "Y",
                               "bounds": "lat_bnds"}
    assert ds["lon"].attrs["units"] == "degrees_east" and ds["lon"].attrs["axis"] == "X"
    assert ds["time"].attrs["units"] == "1" and "dimensionless" in ds["time"].attrs["long_name"]
    assert ds["cell_area"].attrs["units"] == "m2" and ds["cell_area"].attrs["sphere_radius"] == 1.0
    assert "axis" not in ds["time"].attrs and "standard_name" not in ds["time"].attrs
    assert ds["density"].attrs == {"long_name": "probability density", "units": "1",
                                   "cell_measures": "area: cell_area"}
    a = ds.attrs
    assert a["Conventions"] == "CF-1.8" and a["title"] == "test run"
    assert a["spherepde_version"] == __version__ and __version__ in a["source"]
    assert a["history"].endswith(f"created by spherepde {__version__}") and "Z" in a["history"]
    assert a["seed"] == 42
    assert json.loads(a["grid_json"]) == {"kind": "gauss", "nlat": 8}
    for key in ("python_version", "numpy_version", "netcdf4_version", "hdf5_version"):
        assert isinstance(a[key], str) and a[key]
    back = read_config(path)
    assert back == {"grid": grid.to_dict(), "beta": float("inf"), "Q": [[1.0, 0.0], [0.0, 1.0]], "n": 3}
    # the time dimension is unlimited (appendable)
    with netCDF4.Dataset(path) as nc:
        assert nc.dimensions["time"].isunlimited()


def test_circle_layout(tmp_path):
    grid, path = CircleGrid(10), tmp_path / "c.nc"
    data = _write(path, grid, n=2)
    ds = open_dataset(path)
    assert ds["density"].dims == ("time", "theta")
    np.testing.assert_array_equal(ds["density"].values, data)
    np.testing.assert_array_equal(ds["theta"].values, grid.theta)
    np.testing.assert_array_equal(ds["theta_bnds"].values[:, 0], grid.theta_faces[:-1])
    np.testing.assert_allclose(ds["cell_length"].sum(), 2 * np.pi, rtol=1e-14)
    assert "cell_measures" not in ds["density"].attrs
    assert ds.attrs["seed"] == "none"


def test_radius_gives_metres(tmp_path):
    path = tmp_path / "r.nc"
    _write(path, GaussGrid(4), n=1, radius=2.0)
    ds = open_dataset(path)
    assert ds["cell_area"].attrs["units"] == "m2"
    np.testing.assert_allclose(ds["cell_area"].sum(), 16 * np.pi, rtol=1e-13)


def test_static_variables(tmp_path):
    grid, path = GaussGrid(4), tmp_path / "s.nc"
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((3, 3)) for _ in range(3))
    with NetCDFWriter(path, grid, variables=VARS, config={}) as w:
        for name, m in {"Q": Q, "K": K, "V": V}.items():
            w.add_static(name, m, ("d_out", "d_in"), {"long_name": f"{name} matrix", "units": "1"})
        w.add_static("beta", np.float64(2.5), ())
        w.append(0.0, density=np.ones(grid.shape))
        with pytest.raises(ValueError, match="time"):
            w.add_static("bad", np.ones(3), ("time",))
        with pytest.raises(ValueError, match="d_out"):
            w.add_static("bad", np.ones(4), ("d_out",))
        with pytest.raises(ValueError, match="name"):
            w.add_static("Q", np.ones(3), ("d_out",))
    ds = open_dataset(path)
    for name, m in {"Q": Q, "K": K, "V": V}.items():
        np.testing.assert_array_equal(ds[name].values, m)
        assert ds[name].dims == ("d_out", "d_in") and ds[name].attrs["long_name"] == f"{name} matrix"
    assert float(ds["beta"]) == 2.5


def test_append_validation(tmp_path):
    grid = CircleGrid(6)
    with NetCDFWriter(tmp_path / "v.nc", grid, variables=VARS, config={}) as w:
        w.append(1.0, density=np.ones(6))
        with pytest.raises(ValueError, match="t must be"):
            w.append(1.0, density=np.ones(6))
        with pytest.raises(ValueError, match="t must be"):
            w.append(np.nan, density=np.ones(6))
        with pytest.raises(ValueError, match="shape"):
            w.append(2.0, density=np.ones(5))
        with pytest.raises(ValueError, match="missing"):
            w.append(2.0)
        with pytest.raises(ValueError, match="unknown"):
            w.append(2.0, density=np.ones(6), other=np.ones(6))
        assert w.n_records == 1
    with pytest.raises(ValueError, match="closed"):
        w.append(3.0, density=np.ones(6))
    assert open_dataset(tmp_path / "v.nc").sizes["time"] == 1


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(variables={}), ValueError, "variables"),
        (dict(variables={"time": {"units": "1"}}), ValueError, "variables"),
        (dict(variables={"x": {"long_name": "no units"}}), ValueError, "units"),
        (dict(config=[1, 2]), TypeError, "config"),
        (dict(config={"f": object()}), TypeError, "config"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(radius=-1.0), ValueError, "radius"),
        (dict(compress=12), ValueError, "compress"),
    ],
)
def test_writer_validation(kwargs, exc, match, tmp_path):
    path = tmp_path / "bad.nc"
    args = {"variables": VARS, "config": {}} | kwargs
    with pytest.raises(exc, match=match):
        NetCDFWriter(path, CircleGrid(6), **args)
    assert not path.exists()


def test_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="path"):
        NetCDFWriter(tmp_path / "nope" / "x.nc", CircleGrid(6), variables=VARS, config={})


def test_compression_is_lossless(tmp_path):
    path = tmp_path / "z.nc"
    data = _write(path, GaussGrid(8), compress=4)
    np.testing.assert_array_equal(open_dataset(path)["density"].values, data)


def test_unclosed_writer_file_is_readable(tmp_path):
    """Every append is synced: the file opens while the writer still holds it."""
    path, grid = tmp_path / "open.nc", CircleGrid(6)
    w = NetCDFWriter(path, grid, variables=VARS, config={"a": 1})
    try:
        w.append(0.0, density=np.arange(6.0))
        w.append(1.0, density=np.arange(6.0) + 1)
        with netCDF4.Dataset(path, "r") as nc:
            assert nc["time"][:].tolist() == [0.0, 1.0]
            np.testing.assert_array_equal(nc["density"][1], np.arange(6.0) + 1)
            assert nc.getncattr("status") == "running"
    finally:
        w.close()
    assert file_status(path) == "complete"


def test_write_dataset_round_trip(tmp_path):
    path = tmp_path / "w.nc"
    ds = xr.Dataset(
        {"energy": (("time",), np.array([1.0, 0.5, 0.25]), {"units": "1"}),
         "K": (("i", "j"), np.arange(6.0).reshape(2, 3))},
        coords={"time": ("time", [0.0, 1.0, 2.0], {"units": "1"})},
        attrs={"title": "small"},
    )
    write_dataset(path, ds, config={"experiment": "demo", "beta": 1.0}, seed=3)
    assert "Conventions" not in ds.attrs  # input untouched
    back = open_dataset(path)
    xr.testing.assert_identical(back[["energy", "K"]].drop_attrs(), ds[["energy", "K"]].drop_attrs())
    np.testing.assert_array_equal(back["time"].values, ds["time"].values)
    assert back.attrs["Conventions"] == "CF-1.8" and back.attrs["title"] == "small"
    assert back.attrs["spherepde_version"] == __version__ and back.attrs["seed"] == 3
    assert back.attrs["status"] == "complete"
    assert read_config(path) == {"experiment": "demo", "beta": 1.0}


def test_read_config_without_config(tmp_path):
    path = tmp_path / "nc.nc"
    xr.Dataset({"a": ("x", [1.0])}).to_netcdf(path, engine="netcdf4")
    with pytest.raises(ValueError, match="config_json"):
        read_config(path)


def test_config_to_json_sorted():
    assert config_to_json({"b": 1, "a": (1, 2)}) == '{"a": [1, 2], "b": 1}'
    with pytest.raises(TypeError, match="config"):
        config_to_json("nope")


# ---- the status attribute ----------------------------------------------------------------------
def test_status_complete_after_a_normal_end(tmp_path):
    path = tmp_path / "ok.nc"
    _write(path, CircleGrid(6))
    assert file_status(path) == "complete"
    assert open_dataset(path).attrs["status"] == "complete"


def test_writer_left_by_an_exception_is_interrupted(tmp_path):
    path = tmp_path / "boom.nc"
    with pytest.raises(RuntimeError):
        with NetCDFWriter(path, CircleGrid(6), variables=VARS, config={}) as w:
            w.append(0.0, density=np.ones(6))
            raise RuntimeError("crash")
    assert file_status(path) == "interrupted"


def test_readers_warn_or_refuse_on_incomplete_files(tmp_path):
    path = tmp_path / "open.nc"
    w = NetCDFWriter(path, CircleGrid(6), variables=VARS, config={})  # still "running"
    try:
        w.append(0.0, density=np.ones(6))
        with pytest.warns(IncompleteFileWarning, match="running"):
            ds = open_dataset(path)
        assert ds.sizes["time"] == 1
        with pytest.raises(ValueError, match="status"):
            open_dataset(path, incomplete="error")
        assert open_dataset(path, incomplete="ignore").sizes["time"] == 1
        with pytest.raises(ValueError, match="incomplete"):
            open_dataset(path, incomplete="maybe")
    finally:
        w.close()


class _InterruptAfter:
    """A velocity u(t, x, ρ) = rigid rotation about the z axis that raises KeyboardInterrupt
    on its (k+1)-th call, as Ctrl-C would in the middle of a step."""

    def __init__(self, k):
        self.k, self.calls = k, 0

    def __call__(self, t, x, rho):
        self.calls += 1
        if self.calls > self.k:
            raise KeyboardInterrupt
        return np.stack([-x[..., 1], x[..., 0], np.zeros_like(x[..., 0])], axis=-1)


def test_run_interrupted_by_the_velocity_leaves_an_interrupted_file(tmp_path):
    from spherepde.solvers import make_stepper
    from spherepde.solvers.controller import Controller
    from spherepde.solvers.trackers import MemoryTracker

    grid = GaussGrid(8)
    rho0 = np.ones(grid.shape) / (4 * np.pi)
    path = tmp_path / "run.nc"
    velocity = _InterruptAfter(k=6)
    mem, nc = MemoryTracker(), NetCDFTracker(path, grid, config={"case": "rotation"})
    ctrl = Controller(make_stepper("meanfield-ffsl", grid, velocity), [mem, nc], dt=0.05)
    with pytest.raises(KeyboardInterrupt):
        ctrl.run(rho0, (0.0, 1.0), output_times=np.linspace(0.0, 1.0, 21))
    assert ctrl.result.interrupted and ctrl.result.n_steps >= 1
    assert file_status(path) == "interrupted"
    ds = open_dataset(path, incomplete="ignore")
    assert ds.attrs["status"] == "interrupted"
    written = mem.result
    assert ds.sizes["time"] == written["time"].size >= 2  # t = 0 and the steps before the stop
    np.testing.assert_array_equal(ds["time"].values, written["time"])
    np.testing.assert_array_equal(ds["density"].values, written["state"])
