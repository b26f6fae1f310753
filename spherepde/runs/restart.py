"""``spherepde run --restart DIR/run.nc``: continue a stopped or finished run bit for bit.

:func:`restart` continues a stopped or finished run
from the exact state ``run.nc`` keeps (:mod:`spherepde.io.runfile`) and writes the
whole run to a new file that equals an uninterrupted run's bit for bit.  What makes the bits
equal: each representation continues from its last complete output with the state stored in
float64 (and the transformer's generator states, one per realisation); output i is at i·output_every, so the
controller's even split of each output interval — a function of the interval's two ends and
the step only — takes the same steps; the Brownian path is a pure function of (seed,
realisation, t) for every t (:class:`~spherepde.noise.brownian.BrownianPath`; the file keeps
its ``brownian_path_json``, checked here), so a new path object gives the same increments, also
past the first run's ``t_end``; caches are either keyed by exact equality or (the noise field's
evaluation tables) primed as the earlier steps left them."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from spherepde.io.runfile import RestartState, read_restart
from spherepde.noise.brownian import SCHEME
from spherepde.runs.build import Model, build
from spherepde.runs.config import RunConfig
from spherepde.runs.execute import _execute, guard_run, prepare_output


#: keys ``--set`` may change on ``--restart`` (anything else would make it another model)
RESTART_KEYS = ("stepping.t_end",)


def resume_snapshots(resume: RestartState, model: Model) -> dict:
    """The density fields the particles' ``w2_particles_density`` needs from the file (the
    outputs the density reached before the restart and the particles had not)."""
    kd, kp = resume.index.get("density", -1), resume.index.get("particles", -1)
    need = range(kp + 1, min(kd, model.times.size - 1) + 1)
    if not need:
        return {}
    scheme = getattr(model.config.representations.density, "scheme", None)
    name = {"lagrangian-remap": "density_points", "amr": "density_leaves"}.get(str(scheme), "density")
    if name not in resume.rows:
        raise ValueError(f"outputs.diagnostics: 'w2_particles_density' of the particles from "
                         f"output {kp + 1} on needs the density fields of outputs {kp + 1}..{kd}, "
                         f"and {str(resume.source)!r} holds none (outputs.fields = false); "
                         f"run it again from the start")
    import netCDF4

    with netCDF4.Dataset(resume.source, "r") as src:
        src.set_auto_mask(False)
        return {i: np.array(src[name][i], dtype=float) for i in need}


def restart_config(resume: RestartState, overrides=()) -> RunConfig:
    """The configuration of the continued run: the stored one with ``overrides`` (only
    :data:`RESTART_KEYS`); ValueError naming the key."""
    from spherepde.runs.config import apply_set, key_paths

    old = resume.config
    _check_path_scheme(resume)
    raw = old
    for assignment in overrides:
        raw = apply_set(raw, assignment)
    a, b = key_paths(old), key_paths(raw)
    for key in sorted(set(a) | set(b)):
        if key in RESTART_KEYS:
            continue
        # a table turned into a value or back shows as leaves on one side only
        if a.get(key, _MISSING) != b.get(key, _MISSING):
            raise ValueError(f"--set {key}: cannot be changed on --restart (the continued run must "
                             f"be the same model; only {', '.join(RESTART_KEYS)} may change); "
                             f"start a new run for another one")
    old_cfg = RunConfig.from_dict(old)
    t_old = old_cfg.stepping.t_end
    new_t = b.get("stepping.t_end", t_old)
    if old_cfg.representations.transformer is not None and new_t != t_old:
        raise ValueError(f"stepping.t_end: a run with representations.transformer cannot be "
                         f"extended (its layers have Δt = t_end/depth = {t_old:g}/"
                         f"{old_cfg.representations.transformer.depth}); continue it to "
                         f"stepping.t_end = {t_old:g}")
    return RunConfig.from_dict(raw)


_MISSING = object()


def _check_path_scheme(resume: RestartState) -> None:
    """ValueError when the run had a Brownian path (noise on a grid) and its file does not say
    it was drawn as this version draws it (runs of earlier releases: a path with a horizon)."""
    cfg = resume.config
    noise = (cfg.get("dynamics") or {}).get("noise")
    grid = cfg.get("grid") or {}
    if not isinstance(noise, dict) or grid.get("kind", "sphere") == "none":
        return  # no Brownian path (no noise, or the exact field at the tokens)
    stored = resume.brownian_path
    if stored is None or stored.get("scheme") != SCHEME:
        raise ValueError(f"--restart: {str(resume.source)!r} was driven by the Brownian path of "
                         f"an earlier spherepde (one that depended on the run's horizon, "
                         f"dynamics.noise.horizon), which this version does not draw; run it "
                         f"again from the start")


def restart(path: str | os.PathLike, overrides=(), output: str | os.PathLike | None = None, *,
            progress: bool = True, overwrite: bool | None = None) -> dict:
    """Continue the run stored in ``path`` (a ``run.nc``) and write the whole run, earlier
    outputs copied and new ones computed, to ``output/run.nc`` (default: the folder of
    ``path`` with ``-restart`` appended; the original file is only read).

    Each representation continues from its last complete output, from the exact state kept
    in the file (:mod:`spherepde.io.runfile`), on the same Brownian path, step sizes
    and output times, so the new file equals the one an uninterrupted run writes, bit for bit
    (data and time coordinate).  ``overrides`` are ``--set`` assignments; only
    ``stepping.t_end`` may change (to at least the time reached, past the first run's end too:
    the Brownian path has no horizon), and a run with a transformer keeps its t_end.  A folder
    ``output`` that holds another result, or a run of another configuration, is refused unless
    ``overwrite`` (:func:`~spherepde.runs.execute.guard_run`).
    """
    resume = read_restart(path)
    config = restart_config(resume, overrides)
    model = build(config)
    if model.path is not None and model.path.to_dict() != resume.brownian_path:
        raise ValueError(f"--restart: the Brownian path stored in {str(resume.source)!r} "
                         f"({resume.brownian_path}) is not the one its configuration builds "
                         f"({model.path.to_dict()}); run it again from the start")
    n = min(model.times.size, resume.times.size)
    if not np.array_equal(model.times[:n], resume.times[:n]):
        raise ValueError(f"--restart: the output times of {str(resume.source)!r} are not those "
                         f"of its configuration (written by another spherepde version)")
    last = model.times.size - 1
    reached = max([k for k in resume.index.values() if k >= 0], default=-1)
    if reached > last:
        raise ValueError(f"stepping.t_end: {config.stepping.t_end:g} is before t = "
                         f"{resume.times[reached]:g}, which the run already reached")
    if all(k >= last for k in resume.index.values()):
        raise ValueError(f"stepping.t_end: the run in {str(resume.source)!r} is complete at "
                         f"t = {model.times[-1]:g}; give a larger one "
                         f"(--set stepping.t_end=…) to extend it")
    src_dir = resume.source.resolve().parent
    outdir = Path(output) if output is not None else src_dir.with_name(src_dir.name + "-restart")
    if (outdir.resolve() / "run.nc") == resume.source.resolve():
        raise ValueError(f"--output: {str(outdir)!r} holds the file being restarted; give "
                         f"another folder (the original is never overwritten)")
    if "w2_particles_density" in config.outputs.diagnostics:
        resume.snapshots = resume_snapshots(resume, model)
    guard_run(outdir, config, overwrite)
    outdir = prepare_output(outdir)  # the first thing created, after every check
    return _execute(model, outdir, progress=progress, resume=resume)
