"""``spherepde demo``: Paper 1's low-temperature picture, run from an embedded configuration.

The configuration (:data:`DEMO`) is an ordinary :class:`~spherepde.runs.config.RunConfig`
run by :func:`spherepde.runs.execute.run` — no separate code path — followed by the figures
of :func:`spherepde.io.figures.plot_run`.  The matrices are those of ``examples/metastability.toml``
(:class:`~spherepde.experiments.metastability.MetastabilityConfig`): Q = I, K = B = diag(0.1, 1, 1),
V = diag(1, 0.5, 0.1), so
A = VBᵀ = diag(0.1, 0.5, 0.01) has top eigenvector e_y and V has e_x.  At β = 30 the density
ρ₀ ∝ 1 + ½⟨x, a⟩ first gathers into two metastable clusters near ±e_y (W₂ to Π#ρ₀ smallest at
t ≈ 6.5), then leaves them for V's eigenspace ±e_x (the terminal phase, t ≳ 11); 400 particles
drawn from ρ₀ run beside it on the same matrices and steps.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from spherepde.runs.config import DEFAULT, RunConfig
from spherepde.runs.execute import run
from spherepde.validation.fits import switch_time

#: the demo: the embedded default of ``spherepde run`` (Paper 1's metastability set-up, nlat 24,
#: β = 30) with 400 particles to t = 18 and every eigenspace diagnostic (about a minute here)
DEMO = {**DEFAULT,
        "representations": {"density": True, "particles": {"n": 400, "seed": 0}},
        "stepping": {"t_end": 18.0, "courant": 0.8, "output_every": 0.5},
        "outputs": {"diagnostics": ["mass", "min_density", "max_density", "energy", "dist_eigenspace",
                                    "dist_eigenspace_V", "w2_projection", "w2_particles_density"]}}

#: the reduced demo for tests (``spherepde demo --quick``): seconds, not a minute
QUICK = {**DEMO, "grid": {"kind": "sphere", "nlat": 12},
         "representations": {"density": True, "particles": {"n": 40, "seed": 0}},
         "stepping": {"t_end": 2.0, "courant": 0.8, "output_every": 0.5}}


def demo_config(quick: bool = False) -> RunConfig:
    """The demo's configuration (:data:`DEMO`, or :data:`QUICK`)."""
    return RunConfig.from_dict(QUICK if quick else DEMO)


def numbers(path: str | os.PathLike) -> dict:
    """The demo's quoted numbers from its run.nc: ``w2_min`` and its time ``t_w2_min`` (W₂ to
    Π#ρ₀), ``t_switch`` (from when on the distance to V's eigenspace stays below the distance to
    VBᵀ's: :func:`~spherepde.validation.fits.switch_time`; None before it happens), ``t_end`` and
    ``dist_V_end`` (the distance to V's eigenspace at the end), ``w2_particles_min``/``_max``.
    A number whose series is missing or all non-finite is None."""
    from spherepde.io.rundata import read_run

    data = read_run(path)
    valid = data.valid()
    t, s = data.times[valid], {k: v[valid] for k, v in data.series.items()}
    out: dict = dict.fromkeys(["w2_min", "t_w2_min", "t_switch", "dist_V_end", "w2_particles_min",
                               "w2_particles_max"])
    out["t_end"] = float(t[-1])
    y = s.get("w2_projection")
    if y is not None and np.isfinite(y).any():
        i = int(np.nanargmin(np.where(np.isfinite(y), y, np.inf)))
        out["w2_min"], out["t_w2_min"] = float(y[i]), float(t[i])
    dE, dV = s.get("dist_eigenspace"), s.get("dist_eigenspace_V")
    if dE is not None and dV is not None:
        out["dist_V_end"] = float(dV[-1])
        t_switch = switch_time(t, dE, dV)
        out["t_switch"] = None if np.isnan(t_switch) else t_switch
    wp = s.get("w2_particles_density")
    if wp is not None and np.isfinite(wp).any():
        out["w2_particles_min"], out["w2_particles_max"] = float(np.nanmin(wp)), float(np.nanmax(wp))
    return out


def reading(path: str | os.PathLike) -> str:
    """A one-paragraph reading of a demo run.nc, with the numbers of this run (:func:`numbers`)."""
    n = numbers(path)
    parts = ["The density starts almost uniform (ρ₀ ∝ 1 + ½⟨x, a⟩) and first gathers into two "
             "metastable clusters at ±e_y, the top eigenvector of VBᵀ (density_orthographic.png: "
             "near and far side"]
    if n["w2_min"] is not None:
        parts.append(f"; W₂ to the projected initial measure Π#ρ₀ reaches its minimum "
                     f"{n['w2_min']:.2f} at t = {n['t_w2_min']:.3g}")
    parts.append("). The clusters then leave ±e_y for V's top eigenvector e_x: the terminal phase "
                 "(density_mollweide.png, animation.gif)")
    if n["t_switch"] is not None:
        parts.append(f"; in diagnostics.png the distance to V's eigenspace drops below the "
                     f"distance to VBᵀ's at t ≈ {n['t_switch']:.3g} and ends at {n['dist_V_end']:.2f}")
    elif n["dist_V_end"] is not None:
        parts.append(f"; by t = {n['t_end']:.3g} the distance to V's eigenspace is "
                     f"{n['dist_V_end']:.2f} (the switch comes later)")
    parts.append(". The particles (red dots) drawn from ρ₀ follow the same two phases")
    if n["w2_particles_min"] is not None:
        parts.append(f"; their W₂ distance to the density stays between {n['w2_particles_min']:.2f} "
                     f"and {n['w2_particles_max']:.2f}, largest while the clusters travel, where a "
                     f"finite N leaves a cluster early or late")
    return "".join(parts) + "."


def run_demo(output: str | os.PathLike = "out/demo", *, progress: bool = True,
             quick: bool = False) -> dict:
    """Run the demo into ``output``: ``run.nc``, ``summary.json``, ``config.toml`` and the
    figures; return the run's summary with ``figures`` (paths), ``figure_times``, ``reading``
    (text) and ``seconds_total`` (run and figures) added."""
    from spherepde.io.figures import plot_run

    start = time.perf_counter()
    summary = run(demo_config(quick), output, progress=progress)
    figs = plot_run(summary["file"], Path(output))
    summary["seconds_total"] = round(time.perf_counter() - start, 2)  # the run and the figures
    summary["figures"] = figs["figures"]
    summary["figure_times"] = figs["times"]
    summary["reading"] = reading(summary["file"])
    return summary


__all__ = ["DEMO", "QUICK", "demo_config", "numbers", "reading", "run_demo"]
