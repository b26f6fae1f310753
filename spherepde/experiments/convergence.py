"""Convergence plots of a sweep (``spherepde plot DIR/sweep.nc``): final-time errors against a
swept resolution, on log–log axes, with least-squares slopes and a reference rate.

For every swept key of :data:`RESOLUTION_KEYS` in ``sweep.nc`` one figure
``OUT/convergence_<dim>.png`` (dim the sweep dimension, e.g.
``representations__particles__n``) shows, at the last output time t_K that every member
reached, the errors e(x) against the swept value x:

* **between representations** on the same path and steps (what run.nc already holds):
  ``w2_particles_density`` = W₂(μ^N, ρ) itself, and |particles_q − q| for the observables q
  both the particles and the density have (energy, dist_eigenspace, …) — for the particle count
  N; |transformer_q − particles_q| (the discrete transformer against the limit SDE) for the depth
  L and the width m;
* **self-convergence** against the finest member x* (largest nlat or n, smallest Δt):
  |q(x) − q(x*)| for every diagnostic q but the mass and the cell extremes
  (:data:`GRID_SAMPLED`), at x ≠ x* (the error of x* itself is in it: the last point flattens
  when x* is not much finer);

each averaged over the other swept dimensions as a root mean square,
e(x) = (mean_other |·|²)^{1/2}.  The fitted slope p̂ of log e = p log x + c (least squares,
:func:`~spherepde.validation.fits.fit_order`, with its standard error when there are
more than two points) is printed in the legend; the reference line x^p of :data:`RESOLUTION_KEYS`
passes through the first point of the first series.  Values e ≤ 0 (equal bits) and NaN are left
out of the fit and the plot (a series keeps at least two points or is dropped).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spherepde.io.runfile import sweep_dim as _dim_name
from spherepde.io.plots import _plt
from spherepde.validation.fits import fit_order


@dataclass(frozen=True)
class Resolution:
    """A resolution-like key: its symbol, the reference exponent p (e ∝ x^p), the reference's
    label, whether the finest member is the largest value, and the error kind ("between" for
    errors between representations, "self" for self-convergence)."""

    symbol: str
    order: float
    reference: str
    finest_is_largest: bool
    errors: str


#: the swept keys that get a convergence plot
RESOLUTION_KEYS = {
    "representations.particles.n": Resolution("N", -0.5, "N^(-1/2) (Monte Carlo)", True, "between"),
    "representations.transformer.depth": Resolution("L", -1.0, "L^(-1)", True, "between"),
    "representations.transformer.width": Resolution("m", -0.5, "m^(-1/2)", True, "between"),
    "grid.nlat": Resolution("nlat", -2.0, "nlat^(-2) (h², second order)", True, "self"),
    "grid.n": Resolution("n", -2.0, "n^(-2) (h², second order)", True, "self"),
    "stepping.dt": Resolution("Δt", 2.0, "Δt² (second order)", False, "self"),
}
#: diagnostics left out of self-convergence: the mass (conserved to round-off, not an error of
#: the resolution) and the extremes over the cells (they sample the field at the cell centres of
#: each grid, so they jump between grids instead of converging)
GRID_SAMPLED = ("mass", "min_density", "max_density")
#: the observables compared between representations (prefix "" density, particles_, transformer_)
OBSERVABLES = ("energy", "dist_eigenspace", "dist_eigenspace_V", "w2_projection")


def _not_a_sweep(path, why: str) -> ValueError:
    return ValueError(f"{str(path)!r} is not a spherepde sweep file ({why}); give the sweep.nc "
                      f"that `spherepde sweep` wrote")


def is_sweep_file(path: str | os.PathLike) -> bool:
    """True when ``path`` is a NetCDF file with ``title = "spherepde sweep"``."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as ds:
            return getattr(ds, "title", None) == "spherepde sweep"
    except OSError:
        return False


def _final_index(ds, names) -> int:
    """The last output index at which every series in ``names`` is finite in every member."""
    ok = np.ones(ds.sizes["time"], bool)
    for n in names:
        v = ds[n].transpose(..., "time").values
        ok &= np.all(np.isfinite(v.reshape(-1, v.shape[-1])), axis=0)
    idx = np.flatnonzero(ok)
    return int(idx[-1]) if idx.size else -1


def _rms_over_others(da, dim: str) -> np.ndarray:
    """(len(dim),) root mean square of |da| over every dimension but ``dim``."""
    others = [d for d in da.dims if d != dim]
    return np.sqrt((np.abs(da) ** 2).mean(dim=others).values) if others else np.abs(da.values)


def convergence_series(ds, key: str) -> tuple[float, dict]:
    """(t_K, {label: (x, e)}): the errors of the sweep ``ds`` (an xarray Dataset) along ``key``
    at the last output time t_K every member reached (module docstring); (nan, {}) when none."""
    res, dim = RESOLUTION_KEYS[key], _dim_name(key)
    x = np.asarray(ds[dim].values, float)
    series = [n for n, v in ds.data_vars.items() if v.dims[-1:] == ("time",) and dim in v.dims]
    k = _final_index(ds, series)
    if k < 0:
        return math.nan, {}
    at = {n: ds[n].isel(time=k) for n in series}
    out = {}
    if res.errors == "between":
        if "w2_particles_density" in at and key == "representations.particles.n":
            out["W₂(particles, density)"] = (x, _rms_over_others(at["w2_particles_density"], dim))
        pairs = ((("particles_", ""), "particles − density") if key == "representations.particles.n"
                 else (("transformer_", "particles_"), "transformer − SDE particles"))
        (a, b), what = pairs
        for q in OBSERVABLES:
            if a + q in at and (b + q) in ds:
                diff = at[a + q] - ds[b + q].isel(time=k)
                out[f"|{q}: {what}|"] = (x, _rms_over_others(diff, dim))
    else:
        ref = int(np.argmax(x) if res.finest_is_largest else np.argmin(x))
        keep = np.arange(x.size) != ref
        for n in series:
            if n in GRID_SAMPLED:
                continue
            diff = at[n] - at[n].isel({dim: ref})
            out[f"|{n} − {n}({res.symbol} = {x[ref]:g})|"] = (x[keep], _rms_over_others(diff, dim)[keep])
    return float(ds["time"].values[k]), out


def plot_convergence_sweep(ds, key: str, path, *, dpi: int = 120) -> dict | None:
    """One log–log convergence figure of ``ds`` along ``key`` to ``path``; returns what the
    axes show ({"file", "key", "xlabel", "ylabel", "xscale", "yscale", "lines": [{"label",
    "slope", "stderr"}], "reference"}), or None when no series has two positive errors."""
    res = RESOLUTION_KEYS[key]
    lines = []
    t_final, series = convergence_series(ds, key)
    for label, (x, e) in series.items():
        ok = np.isfinite(e) & (e > 0)
        if ok.sum() >= 2:
            lines.append((label, x[ok], e[ok]))
    if not lines:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 4.4), layout="constrained")
    drawn = []
    for i, (label, x, e) in enumerate(lines):
        slope, se = fit_order(x, e)
        text = f"{label}: slope {slope:.2f}" + (f" ± {se:.2f}" if math.isfinite(se) else "")
        ax.loglog(x, e, "o", color=f"C{i}", label=text)
        xs = np.geomspace(x.min(), x.max(), 50)
        c = np.exp(np.mean(np.log(e) - slope * np.log(x)))  # the least-squares line itself
        ax.loglog(xs, c * xs ** slope, "-", color=f"C{i}", lw=1.0)
        drawn.append({"label": text, "slope": slope, "stderr": se})
    x0, e0 = lines[0][1], lines[0][2]
    xs = np.geomspace(min(l[1].min() for l in lines), max(l[1].max() for l in lines), 50)
    i0 = int(np.argmin(x0))
    ax.loglog(xs, e0[i0] * (xs / x0[i0]) ** res.order, "k--", lw=1.0,
              label=f"reference {res.reference}")
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = np.unique(np.concatenate([l[1] for l in lines]))
    ax.xaxis.set_major_locator(FixedLocator(ticks.tolist()))  # the swept values, written plainly
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(f"{res.symbol} ({key})")
    ax.set_ylabel(f"error at the final time t = {t_final:g}")
    title = json.loads(ds.attrs.get("config_json", "{}")) if "config_json" in ds.attrs else {}
    ax.set_title(f"convergence in {res.symbol}" + (f" ({_describe(title)})" if title else ""),
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    info = {"file": str(path), "key": key, "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "xscale": ax.get_xscale(), "yscale": ax.get_yscale(), "lines": drawn,
            "reference": {"label": res.reference, "order": res.order}}
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return info


def _describe(cfg: dict) -> str:
    g = cfg.get("grid") or {}
    where = {"sphere": "S²", "circle": "S¹"}.get(g.get("kind", ""), f"d = {g.get('dimension')}")
    dyn = cfg.get("dynamics") or {}
    parts = [where]
    if dyn.get("attention"):
        parts.append(f"β = {dyn['attention'].get('beta')}")
    if dyn.get("noise"):
        parts.append(f"{dyn['noise'].get('activation')} noise")
    return ", ".join(parts)


def plot_sweep(path: str | os.PathLike, output: str | os.PathLike | None = None, *,
               dpi: int = 120) -> dict:
    """Convergence figures of a sweep.nc for each swept key of :data:`RESOLUTION_KEYS`, into
    ``output`` (default the file's folder); returns {"file", "figures", "plots" (what each
    figure's axes show), "skipped" (key → why no figure)}.  ValueError naming the path when the file is not a
    sweep, sweeps no resolution-like key, or the output folder cannot be written."""
    import xarray as xr

    from spherepde.runs.execute import prepare_output

    path = Path(path)
    if not path.is_file() or not is_sweep_file(path):
        raise _not_a_sweep(path, "no title 'spherepde sweep'")
    with xr.open_dataset(path) as ds:
        keys = [k for k in RESOLUTION_KEYS if _dim_name(k) in ds.dims and ds.sizes[_dim_name(k)] >= 2]
        if not keys:
            swept = json.loads(ds.attrs.get("members_json", "[{}]"))[0]
            raise ValueError(f"{str(path)!r}: a convergence plot needs a sweep over one of "
                             f"{list(RESOLUTION_KEYS)} with at least 2 values; this one sweeps "
                             f"{sorted(k for k in swept if k != 'name')}")
        out = prepare_output(path.parent if output is None else output)
        figures, plots, skipped = [], [], {}
        for key in keys:
            info = plot_convergence_sweep(ds, key, out / f"convergence_{_dim_name(key)}.png", dpi=dpi)
            if info is not None:
                figures.append(info["file"])
                plots.append(info)
            else:
                skipped[key] = ("no error series with two positive values (for N, L, m the run "
                                "needs two representations to compare; see the module docstring)")
    return {"file": str(path), "figures": figures, "plots": plots, "skipped": skipped}


__all__ = ["OBSERVABLES", "RESOLUTION_KEYS", "Resolution", "convergence_series", "is_sweep_file",
           "plot_convergence_sweep", "plot_sweep"]
