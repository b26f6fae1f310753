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
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import netCDF4
import numpy as np

from spherepde import __version__
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers.trackers import Tracker, register_tracker

if TYPE_CHECKING:  # xarray is imported lazily: writers (and the CLI start-up) do not need it
    import xarray as xr

Grid = GaussGrid | CircleGrid

CONVENTIONS = "CF-1.8"
#: values of the ``status`` global attribute
STATUSES = ("running", "complete", "interrupted")


class IncompleteFileWarning(UserWarning):
    """A file whose ``status`` attribute is not ``"complete"`` was opened."""
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


# ---- writer --------------------------------------------------------------------------------
class NetCDFWriter:
    """Write snapshots of fields on a grid to a CF-1.8 NetCDF4 file, one time slice at a time.

    Parameters
    ----------
    path : str or os.PathLike
        File to create (overwritten if it exists); its folder must exist.
    grid : GaussGrid or CircleGrid
        Grid of every field; fields have shape ``grid.shape``.
    variables : dict
        ``name -> {"units": str, "long_name": str, "standard_name": str (optional), ...}``;
        one float64 variable with dims ``(time, *grid dims)`` per entry.
    config : dict
        The whole run configuration; stored as the ``config_json`` global attribute.
    seed : int or None
        Random seed of the run (``"none"`` in the file if None).
    title : str
        ``title`` global attribute.
    radius : float or None
        Sphere (circle) radius in metres: ``cell_area`` (``m2``) and ``cell_length`` (``m``) are
        scaled to it.  Default: the unit sphere (circle), taken as radius 1 m (the module
        docstring): areas in ``m2``, lengths in ``m``, densities (:func:`density_attrs`) in
        ``m-2`` / ``m-1``.
    attrs : dict, optional
        Extra global attributes (strings, numbers, 1-d numeric arrays).
    compress : int
        zlib level 0–9 (0, the default, writes uncompressed; compression is lossless).

    Examples
    --------
    >>> with NetCDFWriter("run.nc", GaussGrid(8), variables={"density": {"units": "1",
    ...         "long_name": "density"}}, config={"nlat": 8}) as w:    # doctest: +SKIP
    ...     w.append(0.0, density=rho)
    """

    def __init__(
        self,
        path: str | os.PathLike,
        grid: Grid,
        *,
        variables: Mapping[str, Mapping[str, Any]],
        config: Mapping[str, Any],
        seed: int | None = None,
        title: str = "spherepde output",
        radius: float | None = None,
        attrs: Mapping[str, Any] | None = None,
        compress: int = 0,
    ) -> None:
        # -- validate everything before the file is created
        if not isinstance(grid, (GaussGrid, CircleGrid)):
            raise TypeError(f"grid must be a GaussGrid or CircleGrid, got {type(grid).__name__}")
        path = Path(path)
        if not path.parent.is_dir():
            raise ValueError(f"path: folder {str(path.parent)!r} does not exist")
        if not isinstance(variables, Mapping) or not variables:
            raise ValueError("variables must be a non-empty dict name -> attributes")
        for name, vattrs in variables.items():
            if not isinstance(name, str) or not name.isidentifier() or name in _RESERVED:
                raise ValueError(
                    f"variables: invalid name {name!r} (an identifier not in {sorted(_RESERVED)})"
                )
            if not isinstance(vattrs, Mapping) or "units" not in vattrs:
                raise ValueError(f"variables[{name!r}] must be a dict with at least 'units'")
            for k, v in vattrs.items():
                _check_attr_value(name, k, v)
        if radius is not None and not (np.isfinite(radius) and radius > 0):
            raise ValueError(f"radius must be a positive finite number (metres) or None, got {radius}")
        if isinstance(compress, bool) or not isinstance(compress, (int, np.integer)) or not 0 <= compress <= 9:
            raise ValueError(f"compress must be an int in 0..9, got {compress!r}")
        gattrs = provenance_attrs(config, seed)
        gattrs["title"] = str(title)
        gattrs["grid_json"] = json.dumps(grid.to_dict(), sort_keys=True)
        for k, v in (attrs or {}).items():
            gattrs[k] = _check_attr_value("global attributes", k, v)

        self.path = path
        self.grid = grid
        self.variables = {k: dict(v) for k, v in variables.items()}
        self._compress = int(compress)
        self._n = 0
        self._last_t = -np.inf
        self._ds = netCDF4.Dataset(path, "w", format="NETCDF4")
        try:
            self._ds.setncatts({k: gattrs[k] for k in sorted(gattrs, key=_attr_order)})
            self._spatial_dims = self._write_grid(grid, radius)
            self._ds.createDimension("time", None)
            tv = self._ds.createVariable("time", "f8", ("time",), fill_value=False)
            tv.setncatts(TIME_ATTRS)
            chunks = (1, *grid.shape)
            for name, vattrs in self.variables.items():
                # complevel: an int in 1..9 (compress checked above); the stubs want a Literal
                v = self._ds.createVariable(  # type: ignore[call-overload]
                    name, "f8", ("time", *self._spatial_dims), fill_value=False,
                    chunksizes=chunks, zlib=self._compress > 0,
                    complevel=max(self._compress, 1),
                )
                full = {"long_name": name, **vattrs}
                if isinstance(grid, GaussGrid):
                    full.setdefault("cell_measures", "area: cell_area")
                v.setncatts(full)
            self._ds.sync()
        except BaseException:
            self._ds.close()
            raise

    # ---- grid description ------------------------------------------------------------------
    def _write_grid(self, grid: Grid, radius: float | None) -> tuple[str, ...]:
        return write_grid(self._ds, grid, radius)

    # ---- writing -----------------------------------------------------------------------
    @property
    def n_records(self) -> int:
        """Number of time slices written so far."""
        return self._n

    @property
    def closed(self) -> bool:
        return not self._ds.isopen()

    def append(self, t: float, **fields: np.ndarray) -> None:
        """Write one time slice ``t`` of every declared variable and flush it to disk.

        Parameters
        ----------
        t : float
            Model time; finite and strictly larger than the previous slice's.
        **fields : ndarray
            One array of shape ``grid.shape`` per declared variable (all of them).
        """
        if self.closed:
            raise ValueError(f"{self.path}: the writer is closed")
        t = float(t)
        if not np.isfinite(t) or t <= self._last_t:
            raise ValueError(f"t must be finite and > the previous time {self._last_t}, got {t}")
        missing = set(self.variables) - set(fields)
        extra = set(fields) - set(self.variables)
        if missing or extra:
            raise ValueError(
                f"fields: expected exactly {sorted(self.variables)}, "
                f"missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        arrays = {}
        for name, a in fields.items():
            a = np.asarray(a, dtype=np.float64)
            if a.shape != self.grid.shape:
                raise ValueError(f"fields[{name!r}] has shape {a.shape}, expected {self.grid.shape}")
            arrays[name] = a
        i = self._n
        for name, a in arrays.items():
            self._ds[name][i, ...] = a
        self._ds["time"][i] = t  # last: a slice counts once its time is set
        self._n += 1
        self._last_t = t
        self._ds.sync()

    def add_static(
        self,
        name: str,
        array: np.ndarray,
        dims: Sequence[str],
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """Add a time-independent data variable (e.g. the attention matrices Q, K, V).

        Parameters
        ----------
        name : str
            Variable name (an identifier, not already in the file).
        array : array_like
            Values (numeric; stored with their dtype, booleans as int8).
        dims : sequence of str
            One name per axis; new dimensions are created, existing ones must match in size;
            ``"time"`` is not allowed.
        attrs : dict, optional
            Variable attributes (``units``, ``long_name``, ...).
        """
        if self.closed:
            raise ValueError(f"{self.path}: the writer is closed")
        if not isinstance(name, str) or not name.isidentifier() or name in self._ds.variables:
            raise ValueError(f"name {name!r} must be an identifier not already in the file")
        a = np.asarray(array)
        if a.dtype == bool:
            a = a.astype(np.int8)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"array must be numeric, got dtype {a.dtype}")
        dims = tuple(dims)
        if len(dims) != a.ndim:
            raise ValueError(f"dims {dims} has {len(dims)} names for an array with {a.ndim} axes")
        if "time" in dims:
            raise ValueError("dims: static variables cannot use the 'time' dimension")
        for d, size in zip(dims, a.shape):
            if d in self._ds.dimensions:
                if len(self._ds.dimensions[d]) != size:
                    raise ValueError(
                        f"dims: dimension {d!r} has size {len(self._ds.dimensions[d])}, "
                        f"array axis has {size}"
                    )
            else:
                self._ds.createDimension(d, size)
        attrs = {k: _check_attr_value(name, k, v) for k, v in (attrs or {}).items()}
        v = self._ds.createVariable(name, a.dtype, dims, fill_value=False)
        if attrs:
            v.setncatts(attrs)
        v[...] = a
        self._ds.sync()

    def close(self, status: str = "complete") -> None:
        """Set the ``status`` attribute (``"complete"`` or ``"interrupted"``) and close the file
        (idempotent: a closed file is left as it is)."""
        _check_status(status)
        if self._ds.isopen():
            try:
                set_status(self._ds, status)
            finally:
                self._ds.close()

    def __enter__(self) -> NetCDFWriter:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        self.close("complete" if exc_type is None else "interrupted")

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"NetCDFWriter({str(self.path)!r}, {self.grid!r}, n_records={self._n}, {state})"


def _attr_order(key: str) -> tuple[int, str]:
    first = ["Conventions", "title", "status", "source", "history"]
    return (first.index(key), "") if key in first else (len(first), key)


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


def write_dataset(
    path: str | os.PathLike,
    ds: xr.Dataset,
    *,
    config: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> None:
    """Write a small complete :class:`xarray.Dataset` (engine netcdf4).

    The provenance attributes (``Conventions``, ``spherepde_version``, ``history``, ...) are
    added unless the dataset already has them; ``config`` and ``seed`` as in
    :class:`NetCDFWriter`.  The dataset passed in is not modified.
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
    out = ds.copy(deep=False)
    attrs = provenance_attrs()
    del attrs["seed"]
    attrs.update(ds.attrs)
    if config is not None:
        attrs["config_json"] = config_to_json(config)
    if seed is not None or "seed" not in attrs:
        attrs["seed"] = _seed_attribute(seed)
    attrs["status"] = "running"  # until the whole dataset is on disk
    out.attrs = attrs
    text = {k: {"dtype": "S1"} for k, v in out.variables.items() if v.dtype.kind in "OUS"}
    out.to_netcdf(path, engine="netcdf4", encoding=text)  # text as char arrays, not NC_STRING
    mark_status(path, "complete")


# ---- the run loop's NetCDF tracker (io sits above solvers: it imports the Tracker base) -------
@register_tracker
class NetCDFTracker(Tracker):
    """Write the state at every output time to a CF NetCDF file, flushed slice by slice.

    The file is created when the run starts (:meth:`initialize`) and closed by
    :meth:`finalize`, also after Ctrl-C or an error, so it always opens with the snapshots
    written so far; its ``status`` attribute is ``"running"`` meanwhile, then ``"complete"``,
    or ``"interrupted"`` when the controller reported an error (:meth:`abort`).  See
    :class:`spherepde.io.netcdf.NetCDFWriter` for the layout.

    Parameters
    ----------
    path : str or os.PathLike
        Output file (its folder must exist).
    grid : GaussGrid or CircleGrid
        Must be the stepper's grid.
    config : dict
        The run configuration, stored as ``config_json``.
    variable : str
        Name of the field variable (default ``"density"``).
    attrs : dict, optional
        Its attributes; default :func:`density_attrs` of the grid (a probability density).
    seed : int or None
        Stored as the ``seed`` attribute.
    title : str
        ``title`` attribute.
    static : dict, optional
        ``name -> (array, dims, attrs)`` time-independent variables (e.g. Q, K, V), written
        when the file is created.
    compress : int
        zlib level 0–9 (0 = none).
    """

    name = "netcdf"


    def __init__(
        self,
        path: str | os.PathLike,
        grid: Grid,
        *,
        config: Mapping[str, Any],
        variable: str = "density",
        attrs: Mapping[str, Any] | None = None,
        seed: int | None = None,
        title: str = "spherepde run",
        static: Mapping[str, tuple] | None = None,
        compress: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if not isinstance(grid, (GaussGrid, CircleGrid)):
            raise TypeError(f"grid must be a GaussGrid or CircleGrid, got {type(grid).__name__}")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ValueError(f"path: folder {str(self.path.parent)!r} does not exist")
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        self.grid = grid
        self.config = dict(config)
        self.variable = variable
        self.attrs = dict(density_attrs(grid) if attrs is None else attrs)
        self.seed = seed
        self.title = title
        self.static = dict(static or {})
        self.compress = compress
        self.writer: NetCDFWriter | None = None
        self._status = "complete"

    def initialize(self, state, t, info) -> None:
        if info["grid"] != self.grid:
            raise ValueError(f"grid: tracker grid {self.grid} differs from the stepper's {info['grid']}")
        self._status = "complete"
        self.writer = writer = NetCDFWriter(
            self.path, self.grid, variables={self.variable: self.attrs}, config=self.config,
            seed=self.seed, title=self.title, compress=self.compress,
            attrs={"stepper": str(info.get("stepper", "unknown"))},
        )
        try:
            for key, (array, dims, *rest) in self.static.items():
                writer.add_static(key, array, dims, rest[0] if rest else None)
        except BaseException:
            writer.close("interrupted")
            raise

    def handle(self, state, t) -> None:
        assert self.writer is not None  # opened by initialize
        self.writer.append(t, **{self.variable: state})

    def abort(self, error: BaseException) -> None:
        self._status = "interrupted"

    def finalize(self) -> None:
        if self.writer is not None:
            self.writer.close(self._status)

    @property
    def result(self) -> Path:
        """Path of the file."""
        return self.path
