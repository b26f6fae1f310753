"""Paper 1, ``spherepde experiment circle-clusters``: S¹ with Q = K = V = I from a perturbed
uniform density — the number and positions of the metastable clusters against β and t
(counted by :func:`spherepde.validation.clusters.find_clusters`).

The runs are ``spherepde run`` configurations (:func:`setup_run_config`, the structure of
``examples/circle_clusters.toml``), one per β: the grid size depends on β (``cells(beta)``
cells), so they are not one sweep (a sweep's members share everything but the swept keys) but
one :func:`~spherepde.runs.execute.run` each into ``DIR/runs/beta{β:g}/`` (``run.nc``,
``summary.json``, ``config.toml``); a re-run skips a β whose ``run.nc`` is complete and holds
the same configuration.  The clusters are counted on the densities read back from ``run.nc``.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde.experiments.study import study
from spherepde.validation.clusters import find_clusters
from spherepde.validation.fits import fit_order


@dataclass(frozen=True)
class CircleClustersConfig:
    """``spherepde experiment circle-clusters``: S¹ (d = 2), Q = K = V = I, from the uniform
    density plus a seeded perturbation of relative size ``eps`` in the first ``modes`` Fourier
    modes (``initial.kind = "random-phase"``).  The grid has ``cells_per_width`` cells per
    kernel width β^{−1/2} (at least ``min_cells``), so every β is resolved."""

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


def setup_run_config(config: CircleClustersConfig, beta: float) -> dict:
    """The ``spherepde run`` configuration (a raw dict for :class:`RunConfig`) of ``config`` at
    ``beta``: the density on ``CircleGrid(config.cells(beta))`` from the random-phase
    perturbation (``eps``, ``modes``, ``seed``), Q = K = V = I, stepped at ``config.courant``
    to ``config.t_end`` with ``config.n_outputs`` output intervals.  It is
    ``examples/circle_clusters.toml`` with grid.n, β, t_end and output_every set and no
    particles (checked by a test)."""
    eye = [[1.0, 0.0], [0.0, 1.0]]
    return {"grid": {"kind": "circle", "n": config.cells(beta)},
            "initial": {"kind": "random-phase", "amplitude": float(config.eps),
                        "max_degree": config.modes, "seed": config.seed},
            "dynamics": {"attention": {"Q": eye, "K": eye, "V": eye, "beta": float(beta)}},
            "representations": {"density": True},
            "stepping": {"t_end": float(config.t_end), "courant": float(config.courant),
                         "output_every": config.t_end / config.n_outputs},
            "outputs": {"diagnostics": ["mass", "min_density", "max_density", "energy"]}}


def run_configs(config: CircleClustersConfig) -> dict:
    """β → its validated :class:`RunConfig` (every model is built here: errors before any work)."""
    from spherepde.runs.config import RunConfig
    from spherepde.runs.build import build

    out = {}
    for beta in config.betas:
        try:
            cfg = RunConfig.from_dict(setup_run_config(config, beta))
            build(cfg)
        except ValueError as err:
            raise ValueError(f"circle-clusters, β = {beta:g}: {err}") from None
        out[beta] = cfg
    return out


def run_circle_clusters(config: CircleClustersConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.runs.execute import run
    from spherepde.runs.sweep import finished_run
    from spherepde.grids import CircleGrid
    from spherepde.io.netcdf import open_dataset

    configs = run_configs(config)
    times = None
    with study("circle-clusters", config, outdir) as job:
        outdir, runs = job.outdir, job.runs
        for beta, cfg in configs.items():
            folder = outdir / "runs" / f"beta{beta:g}"
            if finished_run(cfg, folder):
                info = json.loads((folder / "summary.json").read_text())
            else:
                info = run(cfg, folder, progress=progress)
            nc = folder / "run.nc"
            grid = CircleGrid(cfg.grid.n)
            with open_dataset(nc) as ds:
                states = np.asarray(ds["density"].values)
                times = np.asarray(ds["time"].values)
            clusters = [find_clusters(grid.theta, s, config.peak_factor, config.min_mass_ratio)
                        for s in states]
            runs.append({"beta": beta, "cells": grid.n, "steps": info["density"]["steps"],
                         "n_clusters": [len(c) for c in clusters],
                         "final_clusters": clusters[-1],
                         "mass_error": float(grid.integrate(states[-1]) - 1.0),
                         "min_density": float(states[-1].min()), "file": str(nc)})
        final = np.array([r["n_clusters"][-1] for r in runs], float)
        b = np.array([r["beta"] for r in runs])
        assert times is not None  # read with the first run
        summary = {**job.header, "times": times.tolist(), "runs": runs}
        ok = final > 0
        if ok.sum() >= 3:
            slope, se = fit_order(b[ok], final[ok])
            summary["fit_clusters_vs_beta"] = {"exponent": slope, "stderr": se,
                                               "note": "final number of clusters ∝ β^exponent"}
        return job.finish(summary, lambda summ: plot_circle_clusters(summ, outdir))


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
        ax.pcolormesh(np.degrees(np.asarray(ds["theta"].values)), ds["time"].values,
                      np.log10(np.maximum(field * 2 * np.pi, 1e-3)),
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



__all__ = ["CircleClustersConfig", "plot_circle_clusters", "run_circle_clusters", "run_configs",
           "setup_run_config"]
