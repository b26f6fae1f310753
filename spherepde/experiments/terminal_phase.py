"""Paper 1, ``spherepde experiment terminal-phase``: the metastability set-up run longer, the
mass leaving the top eigenspace of VBᵀ (±e_y) for V's (±e_x, Conjecture 1); the switch time
against β, fitted against log β, and maps of the density.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spherepde.experiments.metastability import (MetastabilityConfig, amr_pole, beta_key,
                                                 check_beside, plot_metastability, resolution_check,
                                                 sphere_runs, w2_minimum)
from spherepde.experiments.study import study
from spherepde.validation.fits import fit_vs_log_beta, switch_time


@dataclass(frozen=True)
class TerminalPhaseConfig(MetastabilityConfig):
    """``spherepde experiment terminal-phase``: the metastability set-up run longer.  VBᵀ's top
    eigenvector is e_y but V's is e_x, so after the metastable phase the mass moves from ±e_y
    towards ±e_x (Conjecture 1).  The switch time is the first output time at which
    dist_E(V) < dist_E(VBᵀ); maps of the density are drawn at ``map_times``.  The largest β is
    run again at ``check_nlat`` and its whole trajectory compared
    (:func:`~spherepde.experiments.metastability.resolution_check`: ``switch_time_change``
    among its keys).  The amr mesh's pole is that of the metastability experiment
    (``amr_pole``: :func:`~spherepde.experiments.metastability.default_pole` by default)."""

    betas: tuple = (10.0, 30.0, 100.0)
    t_end: float = 40.0
    n_outputs: int = 80
    map_times: tuple = (0.0, 4.0, 12.0, 24.0, 40.0)

    @classmethod
    def quick(cls) -> "TerminalPhaseConfig":
        return cls(nlat=16, betas=(5.0, 10.0, 20.0), t_end=24.0, n_outputs=24,
                   map_times=(0.0, 4.0, 12.0, 24.0), amr_levels=(2, 1.0))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "experiment": "terminal-phase"}


def run_terminal_phase(config: TerminalPhaseConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.io.plots import plot_snapshots

    with study("terminal-phase", config, outdir) as job, \
            check_beside(config, job.outdir, "terminal_check") as child:
        outdir, rows = job.outdir, job.runs
        for info, row, snaps in sphere_runs(config, outdir, "terminal", progress):
            times = info["times"]
            row["switch_time"] = switch_time(times, row["dist_E_VBt"], row["dist_E_V"])
            row.update(w2_minimum(row, times, config.band))
            pick = [int(np.argmin(np.abs(times - tm))) for tm in config.map_times if tm <= config.t_end]
            tag = beta_key(row["beta"])
            row["maps"] = str(plot_snapshots(info["grid"], times[pick], snaps[pick],
                                             outdir / f"terminal_maps_beta{tag}.png",
                                             title=f"terminal phase, β = {tag}", log=True))
            rows.append(row)
        if child is not None:
            child.join()
        check = resolution_check(config, max(rows, key=lambda r: r["beta"]), outdir, progress,
                                 prefix="terminal_check")
        summary = {**job.header,
                   "e_VBt": None if info["EA"] is None else info["EA"].basis[:, 0].tolist(),
                   "e_V": None if info["EV"] is None else info["EV"].basis[:, 0].tolist(),
                   "amr_pole": amr_pole(config),
                   "times": times.tolist(), "runs": rows, "resolution_check": check}
        fit = fit_vs_log_beta([r["beta"] for r in rows], [r["switch_time"] for r in rows])
        if fit is not None:
            summary["fit_switch_time_vs_log_beta"] = fit
        return job.finish(summary, lambda summ: plot_metastability(summ, outdir / "terminal_phase.png"))



__all__ = ["TerminalPhaseConfig", "run_terminal_phase"]
