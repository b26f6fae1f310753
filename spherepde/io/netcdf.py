"""CF-1.8 NetCDF output: an incremental writer (netCDF4) and readers (xarray).

xarray cannot append to a NetCDF file, so time series are written one slice at a time with
:class:`NetCDFWriter` (netCDF4, unlimited ``time`` dimension, ``sync()`` after every slice: a
run that is interrupted or crashes still leaves a file that opens).  Small complete datasets
go through :func:`write_dataset`; everything is read back with :func:`open_dataset`.

File layout
-----------
GaussGrid ``(nlat, nlon)``::

    dims    time (unlimited), lat, lon, bnds = 2
    coords  time(time)   units "1": dimensionless model time (TIME_ATTRS, below)
            lat(lat)     degrees_north, north to south, bounds "lat_bnds"
            lon(lon)     degrees_east, bounds "lon_bnds"
    data    cell_area(lat, lon)   area of each cell, units "m2" (the unit sphere taken as
                                  radius 1 m, or ``radius`` metres); Σ = 4π r²
            <field>(time, lat, lon), each with ``cell_measures = "area: cell_area"``

Mapping onto CF
---------------
* Model time is dimensionless (the attention and noise equations have no physical time unit).
  CF reserves the time axis for physical times with a reference date (``units = "s since
  ..."``), so spherepde does not claim one: ``time`` is a plain coordinate with ``units = "1"``
  and ``long_name = "model time (dimensionless)"``, without ``standard_name = "time"`` or
  ``axis = "T"`` (CF 4.4 would otherwise demand a reference time).  Inventing one ("seconds
  since 1970-01-01") would make readers decode model time into calendar dates.
* Areas: the unit sphere is mapped onto the sphere of radius 1 m, so ``cell_area`` carries the
  standard name ``cell_area`` with its canonical units ``m2``; the values are the solid angles
  in steradian (they sum to 4π), and its attribute ``sphere_radius = 1.0`` (m) says so.  With ``radius``
  (metres) the areas are scaled by radius².
* No string variables (they crash some CF checkers): :func:`write_dataset` stores text labels as
  character arrays.

CircleGrid ``(n,)``: dims ``time, theta, bnds``; ``theta`` in radians with bounds
``theta_bnds``; a ``cell_length`` variable in ``m`` on the circle of radius 1 m (CF
``cell_measures`` knows only area and volume, so fields on S¹ carry no ``cell_measures``).
A probability density is in ``m-2`` (S²) or ``m-1`` (S¹), per unit measure of the unit sphere
or circle taken as radius 1 m (:func:`density_attrs`).

Global attributes: ``Conventions = "CF-1.8"``, ``title``, ``source``, ``history`` (UTC),
``status`` (``"running"`` from the moment the file is created, ``"complete"`` after a normal
end, ``"interrupted"`` after Ctrl-C, SIGTERM or an error: see :func:`open_dataset`),
``spherepde_version``, ``config_json`` (the whole configuration as one JSON string),
``seed`` (int or ``"none"``), ``grid_json``, ``python_version``, ``numpy_version``,
``netcdf4_version``, ``netcdf_c_version``, ``hdf5_version``.

Modules: this one holds the readers (:func:`open_dataset`, :func:`read_config`) and re-exports
the rest; the layout's pieces (attributes, status, grid variables) are in
:mod:`spherepde.io.netcdf_layout`, the writers and the tracker in :mod:`spherepde.io.netcdf_writer`.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import TYPE_CHECKING

import netCDF4

from spherepde.io.netcdf_layout import (
    CONVENTIONS,
    STATUSES,
    TIME_ATTRS,
    Grid,
    close_with_status,
    config_to_json,
    density_attrs,
    file_status,
    mark_status,
    provenance_attrs,
    set_status,
    write_grid,
)
from spherepde.io.netcdf_writer import NetCDFTracker, NetCDFWriter, write_dataset

if TYPE_CHECKING:  # xarray is imported lazily: writers (and the CLI start-up) do not need it
    import xarray as xr

__all__ = ["CONVENTIONS", "STATUSES", "TIME_ATTRS", "Grid", "IncompleteFileWarning", "NetCDFTracker",
           "NetCDFWriter", "close_with_status", "config_to_json", "density_attrs", "file_status",
           "mark_status", "open_dataset", "provenance_attrs", "read_config", "set_status",
           "write_dataset", "write_grid"]


class IncompleteFileWarning(UserWarning):
    """A file whose ``status`` attribute is not ``"complete"`` was opened."""

# ---- readers and the small-dataset writer --------------------------------------------------
def open_dataset(path: str | os.PathLike, *, load: bool = True, incomplete: str = "warn") -> xr.Dataset:
    """Open a spherepde NetCDF file with xarray, checking its ``status`` attribute.

    Times are left as plain floats (``decode_times=False``, ``decode_timedelta=False``: model
    time is dimensionless) and values are returned bit for bit as written.

    Parameters
    ----------
    path : str or os.PathLike
    load : bool
        If True (default) read everything into memory and close the file, so the file is not
        held open; if False return a lazily loaded dataset (close it yourself).
    incomplete : {"warn", "error", "ignore"}
        What to do when the file's ``status`` is not ``"complete"`` (``"running"``: still being
        written, or its writer was killed; ``"interrupted"``: stopped by Ctrl-C, SIGTERM or an
        error — the file holds what was computed until then).  Default: an
        :class:`IncompleteFileWarning`; ``"error"`` raises ``ValueError``.  Files without a
        ``status`` attribute (written by versions that did not record it) are accepted silently.
    """
    import xarray as xr

    if incomplete not in ("warn", "error", "ignore"):
        raise ValueError(f"incomplete must be 'warn', 'error' or 'ignore', got {incomplete!r}")
    if not load:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False, decode_timedelta=False)
    else:
        with xr.open_dataset(path, engine="netcdf4", decode_times=False, decode_timedelta=False) as lazy:
            ds = lazy.load()
    status = ds.attrs.get("status", "complete")
    if status != "complete" and incomplete != "ignore":
        text = (f"{path}: status is {status!r}, not 'complete' — the file holds only what was "
                "written before the run stopped (pass incomplete='ignore' to accept it)")
        if incomplete == "error":
            ds.close()
            raise ValueError(text)
        warnings.warn(text, IncompleteFileWarning, stacklevel=2)
    return ds


def read_config(path: str | os.PathLike) -> dict:
    """Return the configuration stored in a file's ``config_json`` attribute."""
    with netCDF4.Dataset(path, "r") as ds:
        if "config_json" not in ds.ncattrs():
            raise ValueError(f"{path}: no 'config_json' global attribute")
        text = ds.getncattr("config_json")
    return json.loads(text)
