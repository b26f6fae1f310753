"""Writers of CF-1.8 NetCDF files: :class:`NetCDFWriter` (one time slice at a time, ``sync()``
after each), :func:`write_dataset` (a small complete xarray dataset) and :class:`NetCDFTracker`
(the run loop's tracker that writes the state at every output time).  The layout is described
in :mod:`spherepde.io.netcdf`.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import netCDF4
import numpy as np

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.io.netcdf_layout import (
    _RESERVED,
    TIME_ATTRS,
    Grid,
    _attr_order,
    _check_attr_value,
    _check_status,
    _seed_attribute,
    config_to_json,
    density_attrs,
    mark_status,
    provenance_attrs,
    set_status,
    write_grid,
)
from spherepde.solvers.trackers import Tracker, register_tracker

if TYPE_CHECKING:  # xarray is imported lazily: writers (and the CLI start-up) do not need it
    import xarray as xr

__all__ = ["NetCDFTracker", "NetCDFWriter", "write_dataset"]


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
