"""The CF-1.8 layout of spherepde's NetCDF files: global attributes, the ``status`` attribute,
the grid's coordinate and cell-measure variables, the model-time attributes.

The layout is described in :mod:`spherepde.io.netcdf`; the writers (:mod:`spherepde.io.netcdf_writer`,
:mod:`spherepde.io.runfile`, :mod:`spherepde.io.particles`) build their files from these pieces.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from collections.abc import Mapping
from typing import Any

import netCDF4
import numpy as np

from spherepde import __version__
from spherepde.grids import CircleGrid, GaussGrid

Grid = GaussGrid | CircleGrid

CONVENTIONS = "CF-1.8"
#: values of the ``status`` global attribute
STATUSES = ("running", "complete", "interrupted")


#: attributes of the dimensionless model-time coordinate in every file (see "Mapping onto CF")
TIME_ATTRS = {
    "units": "1",
    "long_name": "model time (dimensionless)",
    "comment": "the model has no physical time unit, so this is not a CF time axis "
               "(no reference date, no standard_name or axis T)",
}
_RESERVED = {"time", "lat", "lon", "theta", "bnds", "lat_bnds", "lon_bnds", "theta_bnds",
             "cell_area", "cell_length"}


# ---- small helpers -------------------------------------------------------------------------
def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def config_to_json(config: Mapping[str, Any]) -> str:
    """Serialise a configuration mapping to one JSON string (keys sorted).

    numpy scalars and arrays become numbers and lists; objects with ``to_dict()`` (grids) are
    expanded.  ``inf``/``nan`` are written as ``Infinity``/``NaN``, which :func:`json.loads`
    reads back (β = ∞ is a legitimate configuration value).
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    try:
        return json.dumps(dict(config), sort_keys=True, default=_json_default)
    except (TypeError, ValueError) as err:
        raise TypeError(f"config must be JSON serialisable: {err}") from err


def _seed_attribute(seed: int | None) -> int | str:
    """The ``seed`` global attribute: the seed as an int (any integer: the file records what
    the run was given, the run's own check refuses what cannot seed it), or ``"none"``."""
    if seed is None:
        return "none"
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    return int(seed)


def _check_attr_value(name: str, key: str, value: Any) -> Any:
    if isinstance(value, (str, int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return value
    if isinstance(value, (np.ndarray, list, tuple)):
        arr = np.asarray(value)
        if arr.ndim == 1 and arr.dtype.kind in "iuf":
            return arr
    raise TypeError(
        f"attribute {key!r} of {name!r} must be a str, a number or a 1-d numeric array, "
        f"got {type(value).__name__}"
    )


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_status(status: str) -> str:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    return status


def set_status(ds: netCDF4.Dataset, status: str) -> None:
    """Set the ``status`` global attribute of an open (writable) file and flush it to disk."""
    ds.setncattr("status", _check_status(status))
    ds.sync()


def close_with_status(ds: netCDF4.Dataset, status: str) -> None:
    """Set ``status`` (``"complete"`` or ``"interrupted"``) on an open file and close it; a file
    already closed is left alone (so writers' ``close`` is idempotent)."""
    if ds.isopen():
        try:
            set_status(ds, status)
        finally:
            ds.close()


def mark_status(path: str | os.PathLike, status: str) -> None:
    """Set the ``status`` global attribute of a closed file (reopened for appending)."""
    with netCDF4.Dataset(path, "a") as ds:
        set_status(ds, status)


def file_status(path: str | os.PathLike) -> str | None:
    """The ``status`` global attribute of a file (None for files written before it existed)."""
    with netCDF4.Dataset(path, "r") as ds:
        return str(ds.getncattr("status")) if "status" in ds.ncattrs() else None


def provenance_attrs(config: Mapping[str, Any] | None = None, seed: int | None = None,
                     status: str = "running") -> dict:
    """Global attributes that every spherepde file carries (see the module docstring)."""
    attrs: dict[str, Any] = {
        "Conventions": CONVENTIONS,
        "status": _check_status(status),
        "source": f"spherepde {__version__}",
        "history": f"{_utc_now()} created by spherepde {__version__}",
        "spherepde_version": __version__,
        "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "netcdf4_version": netCDF4.__version__,
        "netcdf_c_version": netCDF4.__netcdf4libversion__,
        "hdf5_version": netCDF4.__hdf5libversion__,
    }
    if config is not None:
        attrs["config_json"] = config_to_json(config)
    attrs["seed"] = _seed_attribute(seed)
    return attrs


# ---- grid description ----------------------------------------------------------------------
def density_attrs(grid) -> dict:
    """Units and long_name of a probability density on ``grid``: per unit area of the unit sphere
    (S², taken as radius 1 m, so ``m-2`` beside ``cell_area`` in ``m2``) or per unit arc length of
    the unit circle (S¹, radius 1 m: ``m-1`` beside ``cell_length`` in ``m``); Σ density · cell
    measure = 1 either way."""
    if isinstance(grid, GaussGrid):
        return {"units": "m-2", "long_name": "probability density per unit area of the unit sphere "
                "(radius 1 m): sum of density * cell_area is 1"}
    return {"units": "m-1", "long_name": "probability density per unit arc length of the unit "
            "circle (radius 1 m): sum of density * cell_length is 1"}


def write_grid(ds: netCDF4.Dataset, grid: Grid, radius: float | None) -> tuple[str, ...]:
    """Write the grid's dimensions, coordinates, bounds and cell measure; return the spatial dims."""
    ds.createDimension("bnds", 2)
    scale = 1.0 if radius is None else float(radius)
    if isinstance(grid, GaussGrid):
        ds.createDimension("lat", grid.nlat)
        ds.createDimension("lon", grid.nlon)
        lat = ds.createVariable("lat", "f8", ("lat",), fill_value=False)
        lat.setncatts({"units": "degrees_north", "standard_name": "latitude",
                       "long_name": "latitude (Gauss-Legendre nodes)", "axis": "Y",
                       "bounds": "lat_bnds"})
        lat[:] = grid.lat_deg
        lon = ds.createVariable("lon", "f8", ("lon",), fill_value=False)
        lon.setncatts({"units": "degrees_east", "standard_name": "longitude",
                       "long_name": "longitude", "axis": "X", "bounds": "lon_bnds"})
        lon[:] = grid.lon_deg
        lf, of = np.degrees(grid.lat_faces), np.degrees(grid.lon_faces)
        ds.createVariable("lat_bnds", "f8", ("lat", "bnds"), fill_value=False)[:] = (
            np.stack([lf[:-1], lf[1:]], axis=-1))
        ds.createVariable("lon_bnds", "f8", ("lon", "bnds"), fill_value=False)[:] = (
            np.stack([of[:-1], of[1:]], axis=-1))
        area = ds.createVariable("cell_area", "f8", ("lat", "lon"), fill_value=False)
        area.setncatts({
            "units": "m2",
            "standard_name": "cell_area",
            "long_name": "cell area on the unit sphere, taken as the sphere of radius 1 m (the "
                         "values are solid angles in steradian); cells sum to 4 pi"
            if radius is None else f"cell area on the sphere of radius {scale} m",
            "sphere_radius": scale,
        })
        area[:] = grid.cell_area * scale**2
        return ("lat", "lon")
    ds.createDimension("theta", grid.n)
    th = ds.createVariable("theta", "f8", ("theta",), fill_value=False)
    th.setncatts({"units": "radian", "long_name": "angle on the unit circle",
                  "axis": "X", "bounds": "theta_bnds"})
    th[:] = grid.theta
    f = grid.theta_faces
    ds.createVariable("theta_bnds", "f8", ("theta", "bnds"), fill_value=False)[:] = (
        np.stack([f[:-1], f[1:]], axis=-1))
    ln = ds.createVariable("cell_length", "f8", ("theta",), fill_value=False)
    ln.setncatts({
        "units": "m",
        "long_name": "cell arc length on the unit circle, taken as the circle of radius 1 m (the "
                     "values are angles in radian); cells sum to 2 pi"
        if radius is None else f"cell arc length on the circle of radius {scale} m",
    })
    ln[:] = grid.cell_length * scale
    return ("theta",)


def _attr_order(key: str) -> tuple[int, str]:
    first = ["Conventions", "title", "status", "source", "history"]
    return (first.index(key), "") if key in first else (len(first), key)
