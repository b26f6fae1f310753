"""What the figures read from a run.nc (:class:`RunData`, :func:`read_run`), its one-line label,
and the choice of the times and the colour scale shown."""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid, grid_from_dict

#: the colour scale is logarithmic when max/min of the shown density exceeds this
LOG_SPAN = 100.0
#: how many decades below the maximum a logarithmic scale shows
LOG_DECADES = 3.0


# ---- reading a run file -----------------------------------------------------------------------
@dataclass
class RunData:
    """What the figures need from one run.nc.

    grid : GaussGrid, CircleGrid or None (grid.kind = "none": tokens in R^d, d ≥ 4); times : (k,);
    density : (k, *grid.shape) or None;
    positions : (k, N, d) or None (particles), tokens : (k, N_T, d) or None (transformer);
    series : name -> (k,) diagnostics; long_names : name -> text; label : a one-line title;
    config : the run's configuration (config_json), {} when the file has none; status : the file's
    status ("complete", "interrupted" or "running"), said in the label when it is not complete;
    energy_beta : the β of the energy diagnostics (their ``beta`` attribute), None without one."""

    path: Path
    grid: GaussGrid | CircleGrid | None
    times: np.ndarray
    density: np.ndarray | None = None
    positions: np.ndarray | None = None
    tokens: np.ndarray | None = None
    series: dict = field(default_factory=dict)
    long_names: dict = field(default_factory=dict)
    label: str = ""
    config: dict = field(default_factory=dict)
    status: str = "complete"
    energy_beta: float | None = None

    @property
    def sphere(self) -> bool:
        return isinstance(self.grid, GaussGrid)

    @property
    def gauss_grid(self) -> GaussGrid:
        """The grid of a density on S² (for the figures that draw one)."""
        assert isinstance(self.grid, GaussGrid), "a density on S²"
        return self.grid

    @property
    def circle_grid(self) -> CircleGrid:
        """The grid of a density on S¹ (for the figures that draw one)."""
        assert isinstance(self.grid, CircleGrid), "a density on S¹"
        return self.grid

    @property
    def points(self) -> np.ndarray:
        """The particles' positions (k, N, d), else the transformer's tokens."""
        pts = self.positions if self.positions is not None else self.tokens
        assert pts is not None, "a run with particles or tokens"
        return pts

    def valid(self) -> np.ndarray:
        """Indices of the output times that were written (an interrupted run leaves NaN)."""
        ok = np.ones(self.times.size, bool)
        for a in (self.density, self.positions, self.tokens):
            if a is not None:
                ok &= np.all(np.isfinite(a.reshape(a.shape[0], -1)), axis=1)
        return np.flatnonzero(ok)


def _not_a_run(path, why: str) -> ValueError:
    return ValueError(f"{str(path)!r} is not a spherepde run file ({why}); give the run.nc that "
                      f"`spherepde run` or `spherepde demo` wrote")


def read_run(path: str | os.PathLike) -> RunData:
    """Read a run.nc; ValueError naming the path when it is missing, a folder, not NetCDF or not a
    spherepde run file."""
    import netCDF4

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a folder; give the run file, e.g. {str(path / 'run.nc')!r}")
    if not path.exists():
        raise ValueError(f"{str(path)!r}: no such file")
    try:
        ds = netCDF4.Dataset(path, "r")
    except OSError as err:
        raise _not_a_run(path, f"cannot be read as NetCDF: {err}") from None
    with ds:
        attrs = ds.ncattrs()
        if "grid_json" not in attrs or "time" not in ds.variables:
            raise _not_a_run(path, "no grid_json attribute or time variable")
        try:
            gd = json.loads(ds.getncattr("grid_json"))
            grid = None if gd.get("kind") == "none" else grid_from_dict(gd)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise _not_a_run(path, f"grid_json: {err}") from None
        if not any(v.dimensions[:1] == ("time",) and name != "time" for name, v in ds.variables.items()):
            raise _not_a_run(path, "no variable over time (density, positions or diagnostics)")

        def get(name):
            if name not in ds.variables:
                return None
            v = ds[name]
            v.set_auto_mask(False)
            return np.asarray(v[...], float)

        data = RunData(path, grid, get("time"), get("density"), get("position"),
                       get("transformer_position"))
        for name, v in ds.variables.items():
            if v.dimensions == ("time",) and name != "time":
                data.series[name] = get(name)
                data.long_names[name] = getattr(v, "long_name", name)
                if name.endswith("energy") and "beta" in v.ncattrs():
                    data.energy_beta = float(v.getncattr("beta"))
        if "config_json" in attrs:
            data.config = json.loads(ds.getncattr("config_json"))
            data.label = _config_label(data.config, data)
        data.status = str(ds.getncattr("status")) if "status" in attrs else "complete"
    if data.status != "complete":
        data.label += f" [{data.status} at t = {_last_written(data):g}]"
    return data


def _last_written(data: RunData) -> float:
    """The last output time at which any representation or diagnostic was written (NaN: none)."""
    written = np.zeros(data.times.size, bool)
    for a in (data.density, data.positions, data.tokens, *data.series.values()):
        if a is not None:
            written |= np.any(np.isfinite(a.reshape(a.shape[0], -1)), axis=1)
    return float(data.times[written][-1]) if written.any() else math.nan


def _sup(n: int) -> str:
    """n in superscript digits (S⁴)."""
    return str(n).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _config_label(cfg: dict, data: RunData) -> str:
    """``S², nlat 24, β = 30; density + 400 particles`` from the stored configuration."""
    parts = []
    g = cfg.get("grid", {})
    parts.append(f"S², nlat {g['nlat']}" if g.get("kind") == "sphere" and "nlat" in g
                 else f"S¹, n {g['n']}" if "n" in g
                 else f"S{_sup(g['dimension'] - 1)} ⊂ R{_sup(g['dimension'])}, no grid"
                 if "dimension" in g
                 else "")
    att = (cfg.get("dynamics") or {}).get("attention") or {}
    if "beta" in att:
        parts.append(f"β = {att['beta']:g}" if isinstance(att["beta"], (int, float)) else f"β = {att['beta']}")
    if (cfg.get("dynamics") or {}).get("noise"):
        parts.append(f"{cfg['dynamics']['noise'].get('activation', '')} noise")
    reps = []
    if data.density is not None:
        reps.append("density")
    if data.positions is not None:
        reps.append(f"{data.positions.shape[1]} particles")
    if data.tokens is not None:
        reps.append(f"transformer ({data.tokens.shape[1]} tokens)")
    return ", ".join(p for p in parts if p) + ("; " + " + ".join(reps) if reps else "")


# ---- choosing times and scales ----------------------------------------------------------------
def pick_times(data: RunData, k: int = 4) -> np.ndarray:
    """≤ k output indices to show: the first and last written, the minimum of ``w2_projection``
    (the metastable state) and the final switch of ``dist_eigenspace_V`` below ``dist_eigenspace``
    (the terminal phase) when the run has them, then evenly spaced times."""
    valid = data.valid()
    if valid.size <= k:
        return valid
    chosen = [valid[0], valid[-1]]
    s = data.series
    w2 = s.get("w2_projection", s.get("particles_w2_projection"))
    if w2 is not None and np.isfinite(w2[valid]).any():
        chosen.append(valid[int(np.nanargmin(np.where(np.isfinite(w2[valid]), w2[valid], np.inf)))])
    dE, dV = s.get("dist_eigenspace"), s.get("dist_eigenspace_V")
    if dE is not None and dV is not None:
        stays = np.flatnonzero(~(dV[valid] < dE[valid]))  # the final switch, as fits.switch_time
        j = 0 if stays.size == 0 else int(stays[-1]) + 1
        if j < valid.size:
            chosen.append(valid[j])
    gap = max(1, (valid.size - 1) // (2 * k))  # chosen times at least this many outputs apart
    out: list[int] = []
    for i in chosen + list(valid[np.linspace(0, valid.size - 1, k).round().astype(int)]):
        if len(out) < k and all(abs(int(i) - j) >= gap for j in out):
            out.append(int(i))
    return np.array(sorted(out))


def density_norm(values, log: bool | None = None):
    """A shared colour scale for the densities ``values`` (any shape): linear from 0, or
    logarithmic over :data:`LOG_DECADES` decades below the maximum when ``log`` is True or, for
    ``log=None``, when max/min of the positive values exceeds :data:`LOG_SPAN`."""
    from matplotlib.colors import LogNorm, Normalize

    v = np.asarray(values, float)
    vmax = float(np.nanmax(v)) if np.isfinite(v).any() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    pos = v[v > 0]
    if log is None:
        log = pos.size > 0 and vmax / float(pos.min()) > LOG_SPAN
    if log:
        return LogNorm(vmin=vmax * 10**-LOG_DECADES, vmax=vmax)
    return Normalize(vmin=0.0, vmax=vmax)


__all__ = ["LOG_DECADES", "LOG_SPAN", "RunData", "density_norm", "pick_times", "read_run"]
