"""Paper 1, ``spherepde experiment circle-clusters``: S¹ with Q = K = V = I from a perturbed
uniform density — the number and positions of the metastable clusters against β and t
(counted by :func:`spherepde.validation.clusters.find_clusters`).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.io.netcdf import NetCDFTracker
from spherepde.io.summary import summary_on_interrupt, write_summary
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.trackers import MemoryTracker, ProgressTracker
from spherepde.validation.clusters import find_clusters
from spherepde.validation.fits import fit_order


@dataclass(frozen=True)
class CircleClustersConfig:
    """``spherepde experiment circle-clusters``: S¹ (d = 2), Q = K = V = I, from the uniform
    density plus a seeded perturbation of relative size ``eps`` in the first ``modes`` Fourier
    modes.  The grid has ``cells_per_width`` cells per kernel width β^{−1/2} (at least
    ``min_cells``), so every β is resolved."""

    betas: tuple = (3.0, 10.0, 30.0, 100.0)
    t_end: float = 30.0
    n_outputs: int = 30
    eps: float = 1e-2
    modes: int = 64
    seed: int = 0
    cells_per_width: float = 6.0
    min_cells: int = 128
    courant: float = 0.8
    peak_factor: float = 3.0  # a cluster peaks above peak_factor × the mean density
    min_mass_ratio: float = 0.2  # … and ≥ this fraction of a neighbour's mass (else merged)

    @classmethod
    def quick(cls) -> "CircleClustersConfig":
        return cls(betas=(3.0, 10.0, 30.0), t_end=20.0, n_outputs=20, cells_per_width=4.0)

    def to_dict(self) -> dict:
        return {"experiment": "circle-clusters", **asdict(self)}

    def cells(self, beta: float) -> int:
        n = int(np.ceil(self.cells_per_width * 2 * np.pi * math.sqrt(beta)))
        return max(self.min_cells, n + n % 2)


def run_circle_clusters(config: CircleClustersConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.grids import CircleGrid

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    amp = rng.normal(size=config.modes) / math.sqrt(config.modes)
    phase = rng.uniform(0.0, 2 * np.pi, config.modes)
    times = np.linspace(0.0, config.t_end, config.n_outputs + 1)
    I2 = np.eye(2)
    runs = []
    t_start = time.perf_counter()
    partial = {"experiment": "circle-clusters", "config": config.to_dict(), "version": __version__, "runs": runs}
    with summary_on_interrupt(outdir, partial):
        for beta in config.betas:
            grid = CircleGrid(config.cells(beta))
            k = np.arange(1, config.modes + 1)[:, None]
            pert = np.sum(amp[:, None] * np.cos(k * grid.theta[None, :] + phase[:, None]), axis=0)
            rho0 = (1.0 + config.eps * pert) / (2 * np.pi)
            att = Attention(I2, I2, I2, beta)
            stepper = make_stepper("meanfield-ffsl", grid, DensityAttention(att, grid), courant=config.courant)
            nc = outdir / f"circle_beta{beta:g}.nc"
            mem = MemoryTracker()
            trackers = [mem, NetCDFTracker(nc, grid, config={**config.to_dict(), "beta": beta}, seed=config.seed),
                        ProgressTracker(disable=not progress, desc=f"beta={beta:g}")]
            res = Controller(stepper, trackers, dt=config.courant * grid.dtheta).run(
                rho0, (0.0, config.t_end), output_times=times)
            clusters = [find_clusters(grid.theta, s, config.peak_factor, config.min_mass_ratio)
                        for s in mem.result["state"]]
            runs.append({"beta": beta, "cells": grid.n, "steps": res.n_steps,
                         "n_clusters": [len(c) for c in clusters],
                         "final_clusters": clusters[-1],
                         "mass_error": float(grid.integrate(res.state) - 1.0),
                         "min_density": float(res.state.min()), "file": str(nc)})
        final = np.array([r["n_clusters"][-1] for r in runs], float)
        b = np.array([r["beta"] for r in runs])
        summary = {"experiment": "circle-clusters", "config": config.to_dict(), "version": __version__,
                   "times": times.tolist(), "runs": runs, "seconds": round(time.perf_counter() - t_start, 1)}
        ok = final > 0
        if ok.sum() >= 3:
            slope, se = fit_order(b[ok], final[ok])
            summary["fit_clusters_vs_beta"] = {"exponent": slope, "stderr": se,
                                               "note": "final number of clusters ∝ β^exponent"}
        summary["plot"] = str(plot_circle_clusters(summary, outdir))
        summary["interrupted"] = False
        write_summary(outdir, summary)
    return summary


def plot_circle_clusters(summary: dict, outdir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spherepde.io.netcdf import open_dataset

    runs = summary["runs"]
    fig, axes = plt.subplots(1, len(runs) + 1, figsize=(3.4 * (len(runs) + 1), 3.6), layout="constrained")
    for ax, r in zip(axes, runs):
        ds = open_dataset(r["file"])
        field = np.asarray(ds["density"].values)
        ax.pcolormesh(np.degrees(np.asarray(ds["theta"].values)), ds["time"].values, np.log10(np.maximum(field * 2 * np.pi, 1e-3)),
                      shading="nearest", cmap="magma", vmin=-1, vmax=2)
        ax.set_title(f"β = {r['beta']:g}: {r['n_clusters'][-1]} clusters", fontsize=9)
        ax.set_xlabel("θ (°)")
        ax.set_ylabel("t")
    t = np.asarray(summary["times"])
    for r in runs:
        axes[-1].plot(t, r["n_clusters"], label=f"β = {r['beta']:g}")
    axes[-1].set_xlabel("t")
    axes[-1].set_ylabel("number of clusters")
    axes[-1].legend(fontsize=8)
    path = outdir / "circle_clusters.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path



__all__ = ["CircleClustersConfig", "plot_circle_clusters", "run_circle_clusters"]
