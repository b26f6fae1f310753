"""``run.nc``: one CF-1.8 NetCDF file per run holding the density, the particles and the
diagnostics on the same output times, written slice by slice as the run goes.

Layout (the grid description and provenance attributes of :mod:`spherepde.io.netcdf`)::

    dims    time (k = number of outputs), lat, lon (S²) or theta (S¹), bnds,
            particle (N), token (N_T), dim (d), dim_row, dim_col (d, with attention)
    coords  time(time)                  the output times (units "1", model time)
    data    density(time, lat, lon)     ρ at the output times (outputs.fields)
            position(time, particle, dim)   particle positions (outputs.positions)
            transformer_position(time, token, dim)   the discrete transformer's tokens
                                        ((time, transformer_realisation, token, dim) with
                                        representations.transformer.realisations; its
                                        transformer_* diagnostics are then (time,
                                        transformer_realisation))
            weight(particle)            w_i of μ^N = Σ_i w_i δ_{x_i}
            <diagnostic>(time)          one per diagnostic, e.g. mass, energy,
                                        particles_energy, w2_particles_density
            moment_re, moment_im(time, moment)   harmonic moments (outputs.diagnostics
                                        "moments"; particles_…, transformer_… of the others),
                                        with moment_l, moment_m(moment) their degree and order
            Q, K, V(dim_row, dim_col)   the attention matrices
            restart_density(restart_slot, lat, lon), restart_position(restart_slot, particle, dim),
            (restart_density(restart_slot, density_point, xyzw): the rows (x, y, z, w) of a
            density of weighted points, representations.density.scheme = "lagrangian-remap"),
            restart_transformer_position(restart_slot, [transformer_realisation,] token, dim)
                                        the exact state of each representation at its last
                                        complete output (for ``spherepde run --restart``)
    attrs   config_json (the whole configuration), seed, seeds_json, spherepde_version, …

Values not yet written (an interrupted run) read as NaN (the fill value).  The global attribute
``status`` is ``"running"`` while the run goes, then ``"complete"`` or ``"interrupted"``.

Restart state: every representation keeps its state at its last two outputs in two slots
(output i in slot i mod 2, float64, whatever ``outputs.fields``/``positions`` say); the
variable's attribute ``output_index`` (−1 before the first output) names the last output whose
every variable is written, and is set only after that output and its slot are, so a run stopped
anywhere (Ctrl-C inside a write included) leaves a slot that is complete.  Generator states
that a representation draws from (the transformer's finite-width MLP layers), and the counters
of a stepper (``lagrangian-remap``: the steps since the start, which decide the next remap), are
kept as JSON in the attributes ``rng_state_0`` / ``rng_state_1`` of the slots (a list of R
states for R transformer realisations).
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import netCDF4
import numpy as np

from spherepde import __version__
from spherepde.checks import storage_error
from spherepde.grids import GaussGrid
from spherepde.io.netcdf import open_dataset
from spherepde.io.netcdf_layout import (
    TIME_ATTRS,
    _attr_order,
    close_with_status,
    config_to_json,
    density_attrs,
    provenance_attrs,
    write_grid,
)

#: restart-state variable of each representation and the dimensions after restart_slot
RESTART_VARIABLES = {"density": "restart_density", "particles": "restart_position",
                     "transformer": "restart_transformer_position"}


class RunFile:
    """Create ``path`` and write a run into it (see the module docstring).

    Parameters
    ----------
    path : Path
        File to create (overwritten); its folder must exist.
    grid : GaussGrid, CircleGrid or None
        None for ``grid.kind = "none"``: no grid variables, ``grid_json`` is
        ``{"kind": "none", "dimension": d}`` (d from ``particles`` or ``tokens``).
    times : (k,) array
        The output times.
    config : dict
        The whole configuration (stored as ``config_json``).
    seeds : dict
        What each seed seeds (stored as ``seeds_json``; ``seed`` is the noise seed, else the
        particle seed, else "none").
    fields : bool
        Whether ``density`` fields are stored.
    particles : (N, d) or None
        Shape of the particle state; ``weights`` (N,) its weights.
    positions : bool
        Whether ``position`` (and ``transformer_position``) is stored.
    tokens : (N_T, d) or None
        Shape of the transformer's tokens (dimension ``token``).
    token_realisations : int, optional
        R: the transformer's state is (R, N_T, d), with the dimension ``transformer_realisation``
        in front of ``token`` (and behind ``time`` in its ``transformer_*`` diagnostics).
    series : dict
        ``name -> attributes`` of the diagnostics, (time,) variables, or (time, *dims) with the
        attribute ``dims`` (e.g. ``("moment",)``, a dimension a ``static`` variable creates).
    static : dict
        ``name -> (array, dims, attributes)`` written once (e.g. Q, K, V; integer arrays stay
        integers), before the series.
    brownian_path : dict, optional
        :meth:`BrownianPath.to_dict <spherepde.noise.brownian.BrownianPath.to_dict>` of the run's
        path (stored as ``brownian_path_json``: how the noise was drawn, which a restart checks).
    precision : "float64" or "float32"
        Storage type of ``density``, ``density_points``, ``position`` and
        ``transformer_position`` (the restart state is always float64).
    density : bool, optional
        Whether the density is run (its restart state is kept); default ``fields``.
    density_points : int, optional
        For a density of weighted points (``representations.density.scheme = "lagrangian-remap"``): the number M
        of rows (x, y, z, w) of its state, stored as ``density_points`` (with ``fields``) and
        kept as ``restart_density(restart_slot, density_point, xyzw)`` instead of a field.
    density_leaves : int, optional
        For the adaptive density (``scheme = "amr"``): the rows of its state (header, then leaves
        (x0, x1, y0, y1, level, mass), :mod:`spherepde.solvers.eulerian.amr`), stored as
        ``density_leaves`` (with ``fields``, compressed) and kept as the restart state.
    """

    def __init__(self, path: Path, grid, times: np.ndarray, *, config: Mapping, seeds: Mapping,
                 fields: bool, particles: tuple[int, ...] | None, weights=None,
                 positions: bool = True, tokens: tuple[int, ...] | None = None,
                 series: Mapping[str, Mapping] = {},
                 static: Mapping[str, tuple] = {}, density: bool | None = None,
                 density_points: int | None = None, token_realisations: int | None = None,
                 density_leaves: int | None = None,
                 precision: str = "float64", brownian_path: Mapping | None = None) -> None:
        density = fields if density is None else density
        store = {"float64": "f8", "float32": "f4"}[precision]
        seed = next((seeds[k] for k in ("noise", "particles") if seeds.get(k) is not None), None)
        attrs = provenance_attrs(config, seed)
        if grid is not None:
            grid_dict = grid.to_dict()
        else:
            points = particles or tokens
            assert points is not None, "a run without a grid has particles or tokens"
            grid_dict = {"kind": "none", "dimension": points[1]}
        attrs.update(title="spherepde run", seeds_json=json.dumps(dict(seeds), sort_keys=True),
                     grid_json=json.dumps(grid_dict, sort_keys=True))
        if brownian_path is not None:
            attrs["brownian_path_json"] = json.dumps(dict(brownian_path), sort_keys=True)
        self.path = Path(path)
        with self._storage():
            self._ds = ds = netCDF4.Dataset(self.path, "w", format="NETCDF4")
        try:
            ds.setncatts({k: attrs[k] for k in sorted(attrs, key=_attr_order)})
            gdims = write_grid(ds, grid, None) if grid is not None else None
            ds.createDimension("time", len(times))
            tv = ds.createVariable("time", "f8", ("time",), fill_value=False)
            tv.setncatts(TIME_ATTRS)
            tv[:] = np.asarray(times, float)
            if fields:
                assert grid is not None and gdims is not None  # fields need a grid
                v = ds.createVariable("density", store, ("time", *gdims), fill_value=np.nan,
                                      chunksizes=(1, *grid.shape))
                v.setncatts(density_attrs(grid))
                if isinstance(grid, GaussGrid):
                    v.setncattr("cell_measures", "area: cell_area")
            if particles is not None:
                n, d = particles
                ds.createDimension("particle", n)
                ds.createDimension("dim", d)
                w = ds.createVariable("weight", "f8", ("particle",), fill_value=False)
                w.setncatts({"units": "1", "long_name": "particle weight w_i of the empirical "
                             "measure mu^N = sum_i w_i delta_{x_i}"})
                w[:] = np.asarray(weights, float)
                if positions:
                    p = ds.createVariable("position", store, ("time", "particle", "dim"),
                                          fill_value=np.nan)
                    p.setncatts({"units": "1", "long_name": f"Cartesian coordinates of the tokens "
                                 f"on the unit sphere S^{d - 1} in R^{d}"})
            tdims: tuple[str, ...] = ("token", "dim")
            if tokens is not None:
                n, d = tokens
                ds.createDimension("token", n)
                if "dim" not in ds.dimensions:
                    ds.createDimension("dim", d)
                if token_realisations is not None:
                    ds.createDimension("transformer_realisation", token_realisations)
                    tdims = ("transformer_realisation", *tdims)
                if positions:
                    p = ds.createVariable("transformer_position", store, ("time", *tdims),
                                          fill_value=np.nan)
                    p.setncatts({"units": "1", "long_name": f"tokens of the discrete transformer "
                                 f"(after the layers up to this time) on S^{d - 1} in R^{d}"})
            ds.createDimension("restart_slot", 2)
            ddims = gdims
            if density_points is not None:
                ds.createDimension("density_point", density_points)
                ds.createDimension("xyzw", 4)
                ddims = ("density_point", "xyzw")
                if fields:
                    v = ds.createVariable("density_points", store, ("time", *ddims),
                                          fill_value=np.nan, chunksizes=(1, density_points, 4))
                    v.setncatts({"units": "1", "long_name": "the density as weighted points: "
                                 "rows (x, y, z, w) of rho = sum_i w_i delta_{x_i}, unused rows 0 "
                                 "(density is their mass per cell divided by the cell area)"})
            if density_leaves is not None:
                ds.createDimension("density_leaf", density_leaves)
                ds.createDimension("leaf_column", 6)
                ddims = ("density_leaf", "leaf_column")
                if fields:
                    v = ds.createVariable("density_leaves", "f8", ("time", *ddims), fill_value=np.nan,
                                          chunksizes=(1, density_leaves, 6), zlib=True, complevel=1)
                    v.setncatts({"units": "1", "long_name": "the adaptive density's leaves: row 0 "
                                 "(n, steps, nlat0, lmax, format, 0), rows 1..n (x0, x1, y0, y1, "
                                 "level, mass) on the raster of spherepde.solvers.eulerian.amr_mesh, "
                                 "unused rows 0 (density is their conservative remap)"})
            for rep, dims in (("density", ddims if density else None),
                              ("particles", ("particle", "dim") if particles is not None else None),
                              ("transformer", tdims if tokens is not None else None)):
                if dims is None:
                    continue
                r = ds.createVariable(RESTART_VARIABLES[rep], "f8", ("restart_slot", *dims),
                                      fill_value=np.nan)
                r.setncatts({"units": "1", "long_name": f"exact state of the {rep} at its last two "
                             f"outputs (output i in slot i mod 2), for spherepde run --restart",
                             "output_index": np.int64(-1)})
            for name, (array, dims, vattrs) in static.items():
                a = np.asarray(array)
                a = a.astype(np.int64 if np.issubdtype(a.dtype, np.integer) else float)
                for dim, size in zip(dims, a.shape):
                    if dim not in ds.dimensions:
                        ds.createDimension(dim, size)
                s = ds.createVariable(name, a.dtype, dims, fill_value=False)
                s.setncatts(dict(vattrs))
                s[...] = a
            for name, vattrs in series.items():
                vattrs = dict(vattrs)
                dims = tuple(vattrs.pop("dims", ()))
                if token_realisations is not None and name.startswith("transformer_"):
                    dims = ("transformer_realisation", *dims)
                s = ds.createVariable(name, "f8", ("time", *dims), fill_value=np.nan)
                s.setncatts(vattrs)
            ds.sync()
        except BaseException as err:
            with contextlib.suppress(Exception):  # the first error is the one to report
                ds.close()
            if isinstance(err, (OSError, RuntimeError)):
                raise storage_error(err, self.path) from err
            raise

    @contextlib.contextmanager
    def _storage(self) -> Iterator[None]:
        """Errors of the netCDF library while writing (a full disk gives "NetCDF: HDF error")
        become a :class:`~spherepde.checks.StorageError` naming the cause and the file."""
        try:
            yield
        except (OSError, RuntimeError) as err:
            raise storage_error(err, self.path) from err

    def write(self, i: int, **values) -> None:
        """Write output ``i`` of the given variables (arrays or scalars) and flush."""
        with self._storage():
            for name, value in values.items():
                self._ds[name][i, ...] = np.asarray(value, float)
            self._ds.sync()

    def save_state(self, rep: str, i: int, state: np.ndarray, rng_state: dict | None = None) -> None:
        """Keep the exact ``state`` of representation ``rep`` after output ``i`` (module
        docstring): its slot i mod 2 first, then ``output_index = i``, then flush."""
        with self._storage():
            v = self._ds[RESTART_VARIABLES[rep]]
            slot = i % 2
            v[slot, ...] = np.asarray(state, float)
            if rng_state is not None:
                v.setncattr(f"rng_state_{slot}", json.dumps(rng_state))
            v.setncattr("output_index", np.int64(i))
            self._ds.sync()

    @property
    def dataset(self) -> netCDF4.Dataset:
        return self._ds

    def close(self, status: str = "complete") -> None:
        """Set the ``status`` attribute (``"complete"`` or ``"interrupted"``) and close the file
        (idempotent)."""
        with self._storage():
            close_with_status(self._ds, status)


__all__ = ["RESTART_VARIABLES", "RunFile"]


@dataclass
class RestartState:
    """What :func:`restart` read from the file it continues (see :func:`read_restart`)."""

    source: Path
    config: dict
    times: np.ndarray
    index: dict            # rep -> last complete output index (−1: not started)
    state: dict            # rep -> its exact state at that output (None for −1)
    rng_state: dict        # rep -> generator state (JSON dict) at that output, or None
    rows: list             # names of the (time, …) variables (NaN where not written)
    slots: dict            # restart variable -> (array (2, …), attributes)
    snapshots: dict | None = None    # output index -> ρ the particles' W₂ needs (resume_snapshots)
    brownian_path: dict | None = None  # brownian_path_json (None: not stored)


def read_restart(path: str | os.PathLike) -> RestartState:
    """Read what a restart needs from a ``run.nc`` (ValueError naming the path when it is
    missing, not NetCDF, not a spherepde run, or written without restart state)."""
    import netCDF4

    path = Path(path)
    if not path.exists():
        raise ValueError(f"--restart: no such file {str(path)!r}")
    if path.is_dir():
        raise ValueError(f"--restart: {str(path)!r} is a folder; give the run file, "
                         f"{str(path / 'run.nc')!r}")
    if not os.access(path, os.R_OK):
        raise ValueError(f"--restart: {str(path)!r} is not readable")
    try:
        ds = netCDF4.Dataset(path, "r")
    except OSError as err:
        raise ValueError(f"--restart: {str(path)!r} is not a NetCDF file ({err})") from None
    try:
        ds.set_auto_mask(False)
        attrs = ds.ncattrs()
        title = ds.getncattr("title") if "title" in attrs else None
        if "config_json" not in attrs or title != "spherepde run":
            raise ValueError(f"--restart: {str(path)!r} is not a spherepde run file (no title "
                             f"'spherepde run' and config_json; written by spherepde run)")
        if "restart_slot" not in ds.dimensions:
            raise ValueError(f"--restart: {str(path)!r} holds no restart state (written by an "
                             f"older spherepde); run it again")
        try:
            config = json.loads(ds.getncattr("config_json"))
        except json.JSONDecodeError as err:
            raise ValueError(f"--restart: {str(path)!r}: config_json is not JSON ({err})") from None
        brownian_path = (json.loads(ds.getncattr("brownian_path_json"))
                         if "brownian_path_json" in attrs else None)
        times = np.array(ds["time"][:], dtype=float)
        index, state, rng_state, slots = {}, {}, {}, {}
        for rep, name in RESTART_VARIABLES.items():
            if name not in ds.variables:
                continue
            v = ds[name]
            k = int(v.getncattr("output_index"))
            data = np.array(v[...], dtype=float)
            slots[name] = (data, {a: v.getncattr(a) for a in v.ncattrs()
                                  if a == "output_index" or a.startswith("rng_state_")})
            index[rep] = k
            state[rep] = None if k < 0 else data[k % 2]
            key = f"rng_state_{k % 2}"
            rng_state[rep] = json.loads(v.getncattr(key)) if k >= 0 and key in v.ncattrs() else None
        rows = [name for name, v in ds.variables.items()
                if v.dimensions[:1] == ("time",) and name != "time"]
    finally:
        ds.close()
    return RestartState(path, config, times, index, state, rng_state, rows, slots,
                        brownian_path=brownian_path)


def copy_restart(file: RunFile, resume: RestartState) -> None:
    """Copy the outputs (and the restart state) of the file being restarted into the new one,
    one output at a time."""
    import netCDF4

    ds = file.dataset
    k = ds.dimensions["time"].size
    with netCDF4.Dataset(resume.source, "r") as src:
        src.set_auto_mask(False)
        for name in resume.rows:
            if name in ds.variables:
                v, m = src[name], min(k, src.dimensions["time"].size)
                if v.ndim == 1:
                    ds[name][:m] = v[:m]
                else:
                    for i in range(m):
                        ds[name][i, ...] = v[i, ...]
    for name, (data, attrs) in resume.slots.items():
        if name in ds.variables:
            ds[name][...] = data
            ds[name].setncatts(attrs)
    ds.sync()


# ---- sweep.nc: the members' run.nc stacked along the swept keys ----------------------------
#: swept keys whose dimension in sweep.nc has a short name: the realisation of the Brownian path
#: is ``realisation``, so that a sweep over it reads as an ensemble (``spherepde ensemble``)
DIM_NAMES = {"dynamics.noise.realisation": "realisation"}


def sweep_dim(path: str) -> str:
    """The name of the swept key ``path``'s dimension in sweep.nc."""
    return DIM_NAMES.get(path, path.replace(".", "__"))


def write_sweep(outdir: Path, members: list, dims: dict, shape: tuple, config: dict) -> Path:
    """Stack the members' ``run.nc`` (``outdir/members/NAME/run.nc``) into ``outdir/sweep.nc``.

    ``members``: (name, {key path: value}) in member order; ``dims``: {key path: swept values}
    (one dimension each, named by :func:`sweep_dim`); ``shape``: the members' grid shape.  A
    variable gets the swept dimensions it depends on (equal along the others: dropped); variables
    that differ in shape between members are not collected (listed in the attribute
    ``variables_not_collected``).  A member whose run.nc is not complete (an interrupted sweep)
    is left out: its entries are NaN, the file's ``status`` is ``"interrupted"`` and
    ``members_missing`` names them; ValueError when no member is complete.  Written to
    ``sweep.nc.part`` and renamed, so a reader never sees a half-written sweep.nc."""
    import numpy as np
    import xarray as xr

    files = [outdir / "members" / name / "run.nc" for name, _ in members]
    complete = [run_status(f)[0] == "complete" for f in files]
    if not any(complete):
        raise ValueError(f"{str(outdir)!r}: no member of the sweep is complete, no sweep.nc")
    missing = [name for (name, _), ok in zip(members, complete) if not ok]
    sets = [open_dataset(f) if ok else None for f, ok in zip(files, complete)]
    have = [ds for ds in sets if ds is not None]
    try:
        first = have[0]
        names = [sweep_dim(p) for p in dims]
        coords = {d: _swept_coordinate(d, p, v) for d, (p, v) in zip(names, dims.items())}
        data = {}
        skipped: list[str] = []
        for name, var in first.data_vars.items():
            if any(name not in ds or ds[name].shape != var.shape for ds in have[1:]) or (
                    missing and var.dtype.kind != "f"):
                skipped.append(str(name))
                continue
            stacked = np.stack([np.full(var.shape, np.nan) if ds is None else ds[name].values
                                for ds in sets])
            stacked = stacked.reshape(tuple(shape) + var.shape)
            kept: list[str] = []
            for d in names:  # drop each swept dimension the variable does not depend on
                axis = len(kept)
                first_slice = np.take(stacked, [0], axis=axis)
                if not missing and np.array_equal(stacked, np.broadcast_to(first_slice, stacked.shape),
                                                  equal_nan=True):
                    stacked = np.squeeze(first_slice, axis=axis)
                else:
                    kept.append(d)
            data[name] = xr.Variable(kept + list(var.dims), stacked, dict(var.attrs))
        for name, coord in first.coords.items():
            if all(name in ds.coords and ds[name].shape == coord.shape
                   and np.array_equal(ds[name].values, coord.values) for ds in have[1:]):
                coords[str(name)] = xr.Variable(coord.dims, coord.values, dict(coord.attrs))
            else:
                skipped.append(str(name))
        attrs = {"Conventions": first.attrs.get("Conventions", "CF-1.8"),
                 "title": "spherepde sweep", "status": "interrupted" if missing else "complete",
                 "spherepde_version": __version__,
                 "config_json": config_to_json(config),  # as in run.nc: β = ∞ stays a number
                 "members_json": json.dumps([{"name": name, **values} for name, values in members]),
                 "variables_not_collected": " ".join(sorted(skipped))}
        if missing:
            attrs["members_missing"] = " ".join(missing)
        out = xr.Dataset(data, coords=coords, attrs=attrs)
    finally:
        for ds in have:
            ds.close()
    path = outdir / "sweep.nc"
    tmp = outdir / "sweep.nc.part"
    # CF 7.1: boundary variables carry no _FillValue (they are complete by construction)
    bounds = {str(v.attrs["bounds"]) for v in out.variables.values() if "bounds" in v.attrs}
    out.to_netcdf(tmp, encoding={b: {"_FillValue": None} for b in bounds if b in out.variables})
    os.replace(tmp, path)  # a reader never sees a half-written sweep.nc
    return path


def _swept_coordinate(dim: str, path: str, values):
    """The coordinate of one swept key (CF-clean: units on every coordinate, no strings): numbers
    as they are (units "1"); text values as indices 0..n−1 with ``flag_values`` and
    ``flag_meanings`` (the values, spaces as underscores) and ``swept_values_json``."""
    import xarray as xr

    values = list(values)
    attrs: dict[str, object] = {"long_name": f"swept value of {path}", "units": "1"}
    if any(isinstance(v, str) for v in values):
        idx = np.arange(len(values), dtype=np.int32)
        attrs.update(long_name=f"index of the swept value of {path}", flag_values=idx,
                     flag_meanings=" ".join(str(v).replace(" ", "_") for v in values),
                     swept_values_json=json.dumps(values))
        return xr.Variable(dim, idx, attrs)
    return xr.Variable(dim, np.asarray(values), attrs)


def swept_values(ds, dim: str) -> list:
    """The swept values along ``dim`` of a sweep.nc dataset (text values decoded from their
    index coordinate)."""
    coord = ds[dim]
    if "swept_values_json" in coord.attrs:
        return json.loads(coord.attrs["swept_values_json"])
    return coord.values.tolist()


def select(ds, name: str, values: dict):
    """The variable ``name`` of a sweep.nc dataset at the swept ``values`` ({key path: value}), as
    a numpy array: each swept dimension the variable has is indexed at its value, one it does
    not have (it does not depend on that key, :func:`write_sweep`) is skipped.  KeyError naming the
    value when it is not on the dimension."""
    import numpy as np

    var = ds[name]
    for path, value in values.items():
        dim = sweep_dim(path)
        if dim in var.dims:
            swept = swept_values(ds, dim)
            hit = np.flatnonzero(np.asarray([v == value for v in swept]))
            if not hit.size:
                raise KeyError(f"{path} = {value!r} is not a member of the sweep (values: {swept})")
            var = var.isel({dim: int(hit[0])})
    return var.values


def member_runs(sweep_file: str | os.PathLike) -> list:
    """The members of the sweep written to ``sweep_file`` as ({key path: value}, run.nc path),
    in member order (the run.nc of each sits in ``members/NAME/`` beside sweep.nc)."""
    sweep_file = Path(sweep_file)
    with netCDF4.Dataset(sweep_file) as ds:
        members = json.loads(ds.getncattr("members_json"))
    return [({k: v for k, v in m.items() if k != "name"},
             sweep_file.parent / "members" / m["name"] / "run.nc") for m in members]


def run_status(path: str | os.PathLike) -> tuple[str | None, dict | None]:
    """(status, configuration) of a run.nc: ``status`` "running", "complete" or "interrupted";
    (None, None) when the file is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        return None, None
    try:
        with netCDF4.Dataset(path) as ds:
            return getattr(ds, "status", None), json.loads(getattr(ds, "config_json", "null"))
    except (OSError, ValueError):
        return None, None
