"""PNG figures of fields on the sphere and of diagnostics (matplotlib, Agg backend)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_snapshots(grid, times, fields, path, *, title: str = "", label: str = "density",
                   log: bool = False):
    """Lon–lat maps of ``fields`` (k, nlat, nlon) at ``times`` (k,), one panel each, to PNG.

    ``log`` uses a logarithmic colour scale over three decades below the maximum (for densities
    that concentrate), shared by the panels; a panel whose own range is under one decade (a
    nearly uniform ρ₀, whose perturbation the shared scale would hide) gets a linear scale and a
    colour bar of its own."""
    plt = _plt()
    from matplotlib.colors import LogNorm

    k = len(times)
    ncol = min(k, 3)
    nrow = int(np.ceil(k / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 2.6 * nrow + 0.6), squeeze=False,
                             layout="constrained")
    vmin, vmax = float(np.min(fields)), float(np.max(fields))
    norm = LogNorm(vmin=1e-3 * vmax, vmax=vmax) if log else None
    lon = np.degrees(grid.lon_faces)
    lat = np.degrees(grid.lat_faces)
    for ax in axes.flat[k:]:
        ax.set_visible(False)
    shared, shared_im = [], None
    for ax, t, f in zip(axes.flat, times, fields):
        lo, hi = float(np.min(f)), float(np.max(f))
        if log and lo > 0 and hi < 10 * lo:  # under one decade: its own linear scale
            im = ax.pcolormesh(lon, lat, f, vmin=lo, vmax=hi, cmap="viridis", shading="flat")
            fig.colorbar(im, ax=ax, shrink=0.85, label=f"{label} (own linear scale)")
        elif log:
            shared_im = ax.pcolormesh(lon, lat, np.maximum(f, 1e-3 * vmax), norm=norm, cmap="viridis",
                                      shading="flat")
            shared.append(ax)
        else:
            shared_im = ax.pcolormesh(lon, lat, f, vmin=vmin, vmax=vmax, cmap="viridis", shading="flat")
            shared.append(ax)
        ax.set_title(f"t = {t:.3g}", fontsize=9)
        ax.set_xlim(lon[0], lon[-1])
        ax.set_ylim(-90, 90)
        ax.set_xlabel("longitude (°)", fontsize=8)
        ax.set_ylabel("latitude (°)", fontsize=8)
        ax.tick_params(labelsize=7)
    if shared_im is not None:
        fig.colorbar(shared_im, ax=shared, shrink=0.85, label=label + (", log scale" if log else ""))
    if title:
        fig.suptitle(title, fontsize=10)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_convergence(h, errors: dict, path, *, xlabel="grid spacing (°)", title=""):
    """log–log error against resolution for several named error sequences, to PNG."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4))
    for name, e in errors.items():
        ax.loglog(h, e, "o-", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("normalised error")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
