"""CF-1.8 NetCDF files for particle runs (:class:`~spherepde.solvers.lagrangian.ParticleResult`).

File layout::

    dims    time (k), particle (N), dim (d)            [+ dim_row, dim_col = d if attention]
    coords  time(time)          units "1" (dimensionless model time, not a CF time axis)
            particle(particle)  particle index 0..N−1
            dim(dim)            Cartesian component index 0..d−1
    data    position(time, particle, dim)   unit vectors x_i(t) on S^{d−1} ⊂ R^d, units "1"
            weight(particle)                w_i in μ^N = Σ_i w_i δ_{x_i}
            final_position(particle, dim)   positions at the last completed step
                                            (global attribute t_final; differs from the last
                                            output time only for an interrupted run)
            Q, K, V(dim_row, dim_col)       only when ``attention`` is given

Global attributes: the provenance of every spherepde file
(:func:`spherepde.io.netcdf.provenance_attrs`: ``Conventions``, ``spherepde_version``,
``history``, ``config_json``, ``seed``, library versions, ``status``: ``"running"`` while the
file is written, then ``"complete"``, or ``"interrupted"`` for an interrupted run), plus ``title``, ``method``,
``n_steps``, ``wall_time``, ``interrupted`` (0/1), ``t_final``, and ``attention_beta`` /
``attention_kind`` when ``attention`` is given.  Read back with :func:`read_particles_netcdf`
or :func:`spherepde.io.netcdf.open_dataset`.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.io.netcdf import open_dataset
from spherepde.io.netcdf_layout import TIME_ATTRS, config_to_json, mark_status, provenance_attrs
from spherepde.solvers.lagrangian.particles import ParticleResult


def write_particles_netcdf(
    path: str | os.PathLike,
    result: ParticleResult,
    *,
    config: Mapping[str, Any],
    seed: int | None,
    attention: Attention | None = None,
    title: str = "spherepde particle run",
) -> Path:
    """Write a particle run to a CF-1.8 NetCDF4 file (layout in the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        File to create (overwritten); its folder must exist.
    result : ParticleResult
        ``times`` (k,), ``positions`` (k, N, d), weights, step counts.
    config : dict
        The whole run configuration, stored as the ``config_json`` global attribute.
    seed : int or None
        Random seed of the run (``"none"`` in the file if None).
    attention : Attention, optional
        If given, Q, K, V are stored as data variables and β, kind as attributes.
    title : str
        ``title`` global attribute.

    Returns
    -------
    Path
        ``path``.
    """
    import xarray as xr

    if not isinstance(result, ParticleResult):
        raise TypeError(f"result must be a ParticleResult, got {type(result).__name__}")
    if attention is not None and not isinstance(attention, Attention):
        raise TypeError(f"attention must be an Attention or None, got {type(attention).__name__}")
    path = Path(path)
    if not path.parent.is_dir():
        raise ValueError(f"path: folder {str(path.parent)!r} does not exist")
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    config_to_json(config)  # fail early on a configuration that is not JSON serialisable
    pos = np.asarray(result.positions, dtype=np.float64)
    times = np.asarray(result.times, dtype=np.float64)
    if pos.ndim != 3 or pos.shape[0] != times.shape[0]:
        raise ValueError(f"result.positions must have shape (k, N, d) with k = {times.shape[0]}, "
                         f"got {pos.shape}")
    _, n, d = pos.shape
    if attention is not None and attention.d != d:
        raise ValueError(f"attention is {attention.d}×{attention.d} but the particles live in R^{d}")
    weights = (np.full(n, 1.0 / n) if result.weights is None
               else np.asarray(result.weights, dtype=np.float64))
    state = pos[-1] if result.state is None else np.asarray(result.state, dtype=np.float64)
    t_final = float(times[-1]) if not np.isfinite(result.t) and times.size else float(result.t)

    data = {
        "position": (("time", "particle", "dim"), pos, {
            "units": "1",
            "long_name": f"Cartesian coordinates of the tokens on the unit sphere S^{d - 1} in R^{d}",
        }),
        "weight": (("particle",), weights, {
            "units": "1", "long_name": "particle weight w_i of the empirical measure "
                                       "mu^N = sum_i w_i delta_{x_i}"}),
        "final_position": (("particle", "dim"), state, {
            "units": "1", "long_name": "positions at the last completed step (time t_final)"}),
    }
    attrs = provenance_attrs(config, seed)
    attrs.update({
        "title": str(title),
        "method": str(result.method),
        "n_steps": int(result.n_steps),
        "wall_time": float(result.wall_time),
        "interrupted": int(bool(result.interrupted)),
        "t_final": t_final,
    })
    if attention is not None:
        for name in ("Q", "K", "V"):
            data[name] = (("dim_row", "dim_col"), np.asarray(getattr(attention, name)), {
                "units": "1", "long_name": f"attention matrix {name}"})
        attrs["attention_beta"] = float(attention.beta)
        attrs["attention_kind"] = attention.kind
    coords = {
        "time": ("time", times, dict(TIME_ATTRS)),
        "particle": ("particle", np.arange(n, dtype=np.int64), {"long_name": "particle index", "units": "1"}),
        "dim": ("dim", np.arange(d, dtype=np.int64), {
            "long_name": "Cartesian component index (0 = x, 1 = y, 2 = z, ...)", "units": "1"}),
    }
    ds = xr.Dataset(
        {k: xr.Variable(dims, v, a) for k, (dims, v, a) in data.items()},
        coords={k: xr.Variable(dims, v, a) for k, (dims, v, a) in coords.items()},
        attrs=attrs,
    )
    encoding = {k: {"_FillValue": None} for k in (*ds.data_vars, *ds.coords)}
    ds.to_netcdf(path, engine="netcdf4", format="NETCDF4", encoding=encoding)
    mark_status(path, "interrupted" if result.interrupted else "complete")
    return path


def read_particles_netcdf(path: str | os.PathLike) -> ParticleResult:
    """Read a file written by :func:`write_particles_netcdf` back into a ParticleResult."""
    ds = open_dataset(path, incomplete="ignore")  # an interrupted run is read as such
    if "position" not in ds or "weight" not in ds:
        raise ValueError(f"{path}: not a spherepde particle file (no 'position'/'weight')")
    a = ds.attrs
    return ParticleResult(
        times=ds["time"].values.astype(np.float64),
        positions=ds["position"].values.astype(np.float64),
        n_steps=int(a.get("n_steps", 0)),
        wall_time=float(a.get("wall_time", np.nan)),
        interrupted=bool(int(a.get("interrupted", 0))),
        t=float(a.get("t_final", np.nan)),
        state=ds["final_position"].values.astype(np.float64) if "final_position" in ds else None,
        weights=ds["weight"].values.astype(np.float64),
        method=str(a.get("method", "rk4")),
    )


__all__ = ["read_particles_netcdf", "write_particles_netcdf"]
