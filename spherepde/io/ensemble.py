"""NetCDF output for ensembles of realisations: one file, a ``realisation`` record dimension.

Layout (CF-1.8, same grid description and provenance attributes as :mod:`.netcdf`)::

    dims    realisation (unlimited), time, <grid dims>, <extra dims>, bnds
    coords  realisation(realisation)  int, the realisation index r (as appended: run_ensemble
                                      appends in increasing r, whatever order they finish in)
            time(time)                model time of the outputs
    data    <field>(realisation, time, lat, lon)   (or theta on S¹), float32 or float64
            <series>(realisation, time[, extra])    diagnostics per output time

Each realisation is written (and the file synced) as soon as it is appended, so an interrupted
ensemble leaves a valid file holding every appended realisation; the global attribute
``status`` is ``"running"`` until :meth:`EnsembleWriter.close` sets ``"complete"`` or
``"interrupted"``.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.io.netcdf import (TIME_ATTRS, _attr_order, _check_attr_value, close_with_status, provenance_attrs,
                                 write_grid)


class EnsembleWriter:
    """Write realisations of an ensemble one at a time (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        File to create (overwritten); its folder must exist.
    grid : GaussGrid or CircleGrid
    times : sequence of float
        Output times shared by every realisation (strictly increasing).
    fields : dict
        ``name -> attributes`` of gridded variables (realisation, time, *grid dims); may be empty.
    series : dict
        ``name -> attributes``; an optional ``"dims"`` entry (tuple of names declared in
        ``extra_dims``) adds trailing axes: (realisation, time, *dims).
    extra_dims : dict
        ``name -> size`` of the extra dimensions used by ``series``.
    config, seed, title : as :class:`~spherepde.io.netcdf.NetCDFWriter`.
    field_dtype : "f4" or "f8"
        Storage of the gridded fields (default float32: ensembles are large).
    static : dict, optional
        ``name -> (dim, values)``: integer labels along an extra dimension (e.g. the degree and
        order of each harmonic moment), written once.
    """

    def __init__(self, path: str | os.PathLike, grid, *, times: Sequence[float],
                 fields: Mapping[str, Mapping[str, Any]], series: Mapping[str, Mapping[str, Any]],
                 extra_dims: Mapping[str, int] | None = None, config: Mapping[str, Any],
                 seed: int | None = None, title: str = "spherepde ensemble",
                 field_dtype: str = "f4", static: Mapping[str, tuple] | None = None) -> None:
        if not isinstance(grid, (GaussGrid, CircleGrid)):
            raise TypeError(f"grid must be a GaussGrid or CircleGrid, got {type(grid).__name__}")
        path = Path(path)
        if not path.parent.is_dir():
            raise ValueError(f"path: folder {str(path.parent)!r} does not exist")
        times = np.asarray(times, dtype=float)
        if times.ndim != 1 or times.size == 0 or np.any(np.diff(times) <= 0) or not np.all(np.isfinite(times)):
            raise ValueError("times must be a non-empty, strictly increasing 1-d sequence of finite numbers")
        if field_dtype not in ("f4", "f8"):
            raise ValueError(f"field_dtype must be 'f4' or 'f8', got {field_dtype!r}")
        extra_dims = dict(extra_dims or {})
        names = list(fields) + list(series)
        reserved = {"realisation", "time", "lat", "lon", "theta", "bnds", *extra_dims}
        for name in names:
            if not isinstance(name, str) or not name.isidentifier() or name in reserved or names.count(name) > 1:
                raise ValueError(f"variable name {name!r} must be a unique identifier not in {sorted(reserved)}")
        for name, attrs in series.items():
            for dim in attrs.get("dims", ()):
                if dim not in extra_dims:
                    raise ValueError(f"series[{name!r}] uses dimension {dim!r} not declared in extra_dims")
        self.path, self.grid, self.times = path, grid, times
        self._fields = {k: dict(v) for k, v in fields.items()}
        self._series = {k: dict(v) for k, v in series.items()}
        self._extra = extra_dims
        self._n = 0
        gattrs = provenance_attrs(config, seed)
        gattrs["title"] = str(title)
        gattrs["grid_json"] = json.dumps(grid.to_dict(), sort_keys=True)
        self._ds = ds = netCDF4.Dataset(path, "w", format="NETCDF4")
        try:
            ds.setncatts({k: gattrs[k] for k in sorted(gattrs, key=_attr_order)})
            spatial = write_grid(ds, grid, None)
            ds.createDimension("realisation", None)
            ds.createDimension("time", times.size)
            for dim, size in extra_dims.items():
                ds.createDimension(dim, int(size))
            rv = ds.createVariable("realisation", "i8", ("realisation",), fill_value=False)
            rv.setncatts({"long_name": "realisation index r (independent Brownian path r)", "units": "1"})
            tv = ds.createVariable("time", "f8", ("time",), fill_value=False)
            tv.setncatts(TIME_ATTRS)
            tv[:] = times
            for name, attrs in self._fields.items():
                v = ds.createVariable(name, field_dtype, ("realisation", "time", *spatial),
                                      fill_value=False, chunksizes=(1, 1, *grid.shape))
                full = {"long_name": name, **attrs}
                if isinstance(grid, GaussGrid):
                    full.setdefault("cell_measures", "area: cell_area")
                v.setncatts({k: _check_attr_value(name, k, x) for k, x in full.items()})
            for name, attrs in self._series.items():
                dims = tuple(attrs.get("dims", ()))
                v = ds.createVariable(name, "f8", ("realisation", "time", *dims), fill_value=False)
                v.setncatts({k: _check_attr_value(name, k, x) for k, x in
                             {"long_name": name, **attrs, "dims": " ".join(dims)}.items() if x != ""})
            for name, (dim, values) in (static or {}).items():
                sv = ds.createVariable(name, "i4", (dim,), fill_value=False)
                sv.setncatts({"long_name": f"{name} along {dim}", "units": "1"})
                sv[:] = np.asarray(values)
            ds.sync()
        except BaseException:
            ds.close()
            raise

    @property
    def n_realisations(self) -> int:
        """Realisations written so far."""
        return self._n

    def append(self, realisation: int, **arrays: np.ndarray) -> None:
        """Write one complete realisation: every field (n_times, *grid.shape) and series."""
        if not self._ds.isopen():
            raise ValueError(f"{self.path}: the writer is closed")
        expected = set(self._fields) | set(self._series)
        if set(arrays) != expected:
            raise ValueError(f"arrays: expected exactly {sorted(expected)}, got {sorted(arrays)}")
        nt = self.times.size
        checked = {}
        for name, a in arrays.items():
            a = np.asarray(a, dtype=float)
            if name in self._fields:
                shape = (nt, *self.grid.shape)
            else:
                shape = (nt, *(self._extra[d] for d in self._series[name].get("dims", ())))
            if a.shape != shape:
                raise ValueError(f"arrays[{name!r}] has shape {a.shape}, expected {shape}")
            checked[name] = a
        i = self._n
        for name, a in checked.items():
            self._ds[name][i, ...] = a
        self._ds["realisation"][i] = int(realisation)  # last: the record counts once indexed
        self._n += 1
        self._ds.sync()

    def close(self, status: str = "complete") -> None:
        """Set the ``status`` attribute (``"complete"`` or ``"interrupted"``) and close the file
        (idempotent)."""
        close_with_status(self._ds, status)

    def __enter__(self) -> EnsembleWriter:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        self.close("complete" if exc_type is None else "interrupted")
