"""The files of ``spherepde experiment depth-width`` (:mod:`spherepde.experiments.depth_width`):
``depth_width.nc`` (path 0's trajectories at the largest L, the per-path errors, the width
differences) and the two figures, from the studies' results and the summary."""
from __future__ import annotations

from pathlib import Path

import numpy as np

#: the observables of the width study and their long names
OBSERVABLES = {
    "cosine": "mean pairwise cosine similarity (i ≠ j)",
    "energy": "scaled interaction energy e^{-β} E_β",
    "first_moment": "|mean of the tokens|",
}
#: a width difference counts as resolved when |diff| > RESOLVED_SE · se
RESOLVED_SE = 3.0


def write_depth_width_netcdf(path: Path, config, dep: dict, wid: dict, diffs: dict) -> Path:
    """One NetCDF: trajectories of path 0 (largest L and reference), per-path errors, width data
    (``config`` the study's DepthWidthConfig)."""
    import xarray as xr

    from spherepde.io.netcdf_layout import TIME_ATTRS
    from spherepde.io.netcdf_writer import write_dataset

    Lmax = config.depths[-1]
    names = list(OBSERVABLES)
    widths = np.asarray(config.widths, dtype=np.int64)
    ds = xr.Dataset(
        {"position_transformer": (("time", "particle", "dim"), dep["x_transformer"],
                                  {"units": "1",
                                   "long_name": f"tokens of the m = inf transformer, L = {Lmax}, path 0"}),
         "position_reference": (("time", "particle", "dim"), dep["x_reference"],
                                {"units": "1", "long_name": "limit SDE (Heun) on the same Brownian path, path 0"}),
         "sup_error": (("depth", "path"), dep["errors"],
                       {"units": "1", "long_name": "max_l (1/N) sum_i |X_l - Xbar(t_l)|^2"}),
         "sup_t_error": (("depth", "path"), dep["errors_sup_t"],
                         {"units": "1", "long_name": "sup_t (1/N) sum_i |X_floor(Lt/T) - Xbar(t)|^2"}),
         "reference_check": (("path",), dep["ref_check"],
                             {"units": "1", "long_name": "max_k (1/N) sum_i |Xbar_dt(t_k) - Xbar_2dt(t_k)|^2"}),
         "width_diff": (("width", "observable"),
                        np.array([[diffs[n]["rows"][i]["diff"] for n in names] for i in range(len(widths))]),
                        {"units": "1", "long_name": "mean(observable, width m) - mean(observable, m = inf)"}),
         "width_diff_stderr": (("width", "observable"),
                               np.array([[diffs[n]["rows"][i]["stderr"] for n in names] for i in range(len(widths))]),
                               {"units": "1", "long_name": "standard error of width_diff"})},
        coords={"time": ("time", np.linspace(0.0, config.t_end, Lmax + 1), dict(TIME_ATTRS)),
                "particle": ("particle", np.arange(config.n_tokens), {"long_name": "token index", "units": "1"}),
                "dim": ("dim", np.arange(3), {"long_name": "Cartesian component index", "units": "1"}),
                "depth": ("depth", np.asarray(config.depths, dtype=np.int64),
                          {"long_name": "number of layers L", "units": "1"}),
                "path": ("path", np.arange(dep["errors"].shape[1]), {"long_name": "Brownian path index", "units": "1"}),
                "width": ("width", widths, {"long_name": "MLP width m", "units": "1"}),
                "observable": ("observable", names, {"long_name": "observable name"})},
        attrs={"title": "spherepde depth-width experiment (Paper 2, Thm 1.1)"})
    write_dataset(path, ds, config=config.to_dict(), seed=config.seed)
    return path


def plot_depth(summary: dict, path: Path) -> Path:
    from spherepde.io.plots import _plt

    plt = _plt()
    dep = summary["depth"]
    L = np.asarray(dep["depths"], float)
    g = np.log(L) / L
    fig, ax = plt.subplots(figsize=(6.5, 4.8), layout="constrained")
    for key, label in (("layer_times", "max over layer times"), ("sup_t", "sup over t (Thm 1.1)")):
        d = dep[key]
        e, s = np.asarray(d["error"]), np.asarray(d["stderr"])
        bars = ax.errorbar(L, e, yerr=s, fmt="o", capsize=3, label=f"{label}, ±1 se")
        col = bars[0].get_color()
        ax.plot(L, np.exp(np.mean(np.log(e) - d["slope_vs_L"] * np.log(L))) * L ** d["slope_vs_L"], "-",
                color=col, label=f"fit ∝ L^({d['slope_vs_L']:.2f} ± {d['slope_vs_L_stderr_bootstrap']:.2f}); "
                                 f"p = {d['p_vs_logL_over_L']:.2f} vs log L/L")
        ax.plot(L, g * np.exp(np.mean(np.log(e / g))), "--", color=col, lw=0.8)
    ax.axhline(dep["reference"]["difference"], color="gray", ls=":",
               label="reference check |X̄(dt) − X̄(2dt)|²")
    ax.plot([], [], "k--", lw=0.8, label="∝ log L / L (Thm 1.1 bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.set_ylabel("E sup (1/N) Σ|X − X̄|²")
    ax.set_title(f"m = ∞ transformer vs limit SDE on the same path ({dep['paths']} paths)", fontsize=10)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_width(summary: dict, path: Path) -> Path:
    from spherepde.io.plots import _plt

    plt = _plt()
    w = summary["width"]
    fig, axes = plt.subplots(1, len(OBSERVABLES), figsize=(4.2 * len(OBSERVABLES), 3.8), layout="constrained")
    for ax, (name, text) in zip(axes, OBSERVABLES.items()):
        rows = w["differences"][name]["rows"]
        m = np.array([r["width"] for r in rows], float)
        d = np.array([r["diff"] for r in rows])
        s = np.array([r["stderr"] for r in rows])
        ax.errorbar(m, d, yerr=RESOLVED_SE * s, fmt="o", capsize=3, label=f"mean_m − mean_∞ (±{RESOLVED_SE:g} se)")
        ax.axhline(0.0, color="gray", lw=0.8)
        band = RESOLVED_SE * w["differences"][name]["stderr_inf"]
        ax.axhspan(-band, band, color="gray", alpha=0.15,
                   label=f"±{RESOLVED_SE:g} se of the shared m = ∞ mean")
        ax.set_xscale("log")
        ax.set_xlabel("width m")
        ax.set_title(text, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"width, in law: L = {w['depth']}, R = {w['realisations']} per width", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["plot_depth", "plot_width", "write_depth_width_netcdf"]
