"""``spherepde validate resolution RUN.nc REFINED.nc``: is a run resolved?  Its time series
against those of the same model at a finer resolution (``spherepde run CONFIG --refine F``).

Every diagnostic (time,) that both files hold is compared at every output time both wrote,
relative to max(|refined value|, 0.05)
(:func:`~spherepde.validation.resolution.trajectory_change`); the mass and the cell extremes
are left out (conserved to round-off, or sampled at cell centres that differ between grids).
Where the density's two eigenspace distances are there, the switch time (the distance to V's
eigenspace dropping below VBᵀ's for good) is compared too.  The two files must hold the same
model: initial density, dynamics, t_end and output times.
"""
from __future__ import annotations

import os

import numpy as np

from spherepde.io.rundata import read_run
from spherepde.runs.folders import SHOWN, differing_keys
from spherepde.validation.resolution import switch_change, trajectory_change

#: diagnostics not compared: conserved to round-off, or sampled at the cell centres of each grid
SKIPPED = ("mass", "min_density", "max_density")
#: configuration sections that must agree (the model); the rest is resolution
MODEL_SECTIONS = ("initial", "dynamics")


def _model(config: dict) -> dict:
    """The part of a stored configuration that must agree: the model sections, t_end, outputs."""
    model = {k: config.get(k) for k in MODEL_SECTIONS}
    step = config.get("stepping", {})
    model["stepping"] = {k: step.get(k) for k in ("t_end", "output_every")}
    return model


def compare_runs(run: str | os.PathLike, refined: str | os.PathLike) -> dict:
    """The change of every common diagnostic of ``run`` against ``refined`` (see the module).

    Returns ``run``, ``refined``, ``times`` (the output times compared), the keys of
    :func:`~spherepde.validation.resolution.trajectory_change` (``max_relative_change``,
    ``per_quantity``, ``worst``, ``resolved``, …) and, with the eigenspace distances,
    ``switch_time`` ([run, refined]) and ``switch_time_change``.  ValueError (naming the keys or
    files) when the two files do not hold the same model or the same output times."""
    a, b = read_run(run), read_run(refined)
    differ = differing_keys(_model(a.config), _model(b.config))
    if differ:
        raise ValueError(f"{str(run)!r} and {str(refined)!r} hold different models (differing keys: "
                         f"{', '.join(differ[:SHOWN])}{', …' if len(differ) > SHOWN else ''}); compare a run "
                         f"with the same configuration at another resolution (run --refine F)")
    if a.times.shape != b.times.shape or not np.allclose(a.times, b.times, rtol=0, atol=1e-9):
        raise ValueError(f"{str(run)!r} and {str(refined)!r} have different output times")
    both = np.intersect1d(a.valid(), b.valid())
    if both.size == 0:
        raise ValueError(f"{str(run)!r} and {str(refined)!r} have no output time written in both")
    t = b.times[both]
    names = sorted((set(a.series) & set(b.series)) - set(SKIPPED))
    if not names:
        raise ValueError(f"{str(run)!r} and {str(refined)!r} have no diagnostic in common to compare")
    out = {"run": str(run), "refined": str(refined), "times": t.tolist(),
           **trajectory_change(t, {n: b.series[n][both] for n in names},
                               {n: a.series[n][both] for n in names})}
    pair = ("dist_eigenspace", "dist_eigenspace_V")
    if all(n in names for n in pair):
        out.update(switch_change(t, tuple(b.series[n][both] for n in pair),
                                 tuple(a.series[n][both] for n in pair)))
    return out


__all__ = ["MODEL_SECTIONS", "SKIPPED", "compare_runs"]
