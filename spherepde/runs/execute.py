"""Run a built model: every representation advances in step through the output times
(one :class:`~spherepde.solvers.controller.Lane` each, :func:`~spherepde.solvers.controller.run_lanes`),
writing run.nc, summary.json and config.toml."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spherepde import __version__
from spherepde.checks import check_output_dir, storage_error
from spherepde.io.runfile import RestartState, RunFile, copy_restart
from spherepde.io.summary import jsonable
from spherepde.runs.build import Model, build, transformer_anchors
from spherepde.runs.config import RunConfig, dumps_toml
from spherepde.runs.folders import guard
from spherepde.runs.outputs import (DensityOutput, ParticleOutput, particle_weights, series_attrs,
                                    series_names)
from spherepde.solvers.controller import Controller, Lane, run_lanes
from spherepde.solvers.trackers import RunProgress
from spherepde.validation.metrics import moment_degrees


# ---- the run --------------------------------------------------------------------------------
def prepare_output(outdir: str | os.PathLike) -> Path:
    """Create the output folder; ValueError naming the path when it is a file or not writable."""
    outdir = check_output_dir(outdir, "--output")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--output: cannot create the folder {str(outdir)!r}: "
                         f"{err.strerror or err}") from None
    if not os.access(outdir, os.W_OK | os.X_OK):
        raise ValueError(f"--output: the folder {str(outdir)!r} is not writable")
    return outdir


def guard_run(output: str | os.PathLike, config: RunConfig, overwrite: bool | None = None) -> None:
    """Refuse ``output`` when it holds another result, or a run of another configuration
    (:func:`spherepde.runs.folders.guard`); the same configuration is run again."""
    guard(output, "run", json.loads(json.dumps(config.to_dict())), overwrite=overwrite)


def run(config: RunConfig, output: str | os.PathLike, *, progress: bool = True,
        overwrite: bool | None = None) -> dict:
    """Build, validate and run ``config``; write ``output/run.nc``, ``output/summary.json`` and
    ``output/config.toml``; return the summary.

    Nothing is created before the whole configuration is built (:func:`build`).  On
    KeyboardInterrupt the file keeps every output written, the summary says
    ``"interrupted": true``, and the interrupt is re-raised.  A folder that holds another
    result or a run of another configuration is refused (:func:`guard_run`) unless
    ``overwrite`` (None: :data:`spherepde.runs.folders.OVERWRITE`).  A file that cannot be
    written (a full disk) raises :class:`~spherepde.checks.StorageError` naming it.
    """
    model = build(config)
    guard_run(output, config, overwrite)
    outdir = prepare_output(output)
    return _execute(model, outdir, progress=progress)


def run_model(model: Model, output: str | os.PathLike, *, progress: bool = True,
              overwrite: bool | None = None) -> dict:
    """:func:`run` of a model :func:`build` made (its steppers can be read afterwards)."""
    guard_run(output, model.config, overwrite)
    return _execute(model, prepare_output(output), progress=progress)


def _blas_one_thread(model: Model):
    """A context that keeps BLAS on one thread for the exact point noise (``model.kernel``): its
    N×N eigendecompositions (N ~ 10²) gain nothing from threads, and two OpenBLAS threads on
    busy cores were measured 100–300× slower than one (1 s against 3 ms for N = 128 at load 9
    on 2 cores).  Other runs (and a missing threadpoolctl) get a context that does nothing."""
    if model.kernel is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _execute(model: Model, outdir: Path, *, progress: bool, resume: RestartState | None = None) -> dict:
    """Run the representations of ``model`` into ``outdir`` (from where ``resume`` says)."""
    with _blas_one_thread(model):
        return _execute_run(model, outdir, progress=progress, resume=resume)


def _execute_run(model: Model, outdir: Path, *, progress: bool, resume: RestartState | None) -> dict:
    config = model.config
    cfg = config.to_dict()
    (outdir / "summary.json").unlink(missing_ok=True)  # an earlier run's: never left beside this one
    _write_text(outdir / "config.toml", dumps_toml(cfg))
    nc = outdir / "run.nc"
    reps = config.representations
    n_part = None if model.particles is None else model.particles.grid.shape
    n_tok = None if model.transformer is None else tuple(model.transformer.grid.shape[-2:])
    tc = reps.transformer
    weights = None if n_part is None else particle_weights(model, n_part[0])
    static: dict[str, tuple] = {}
    if model.attention is not None:
        for name in ("Q", "K", "V"):
            static[name] = (getattr(model.attention, name), ("dim_row", "dim_col"),
                            {"units": "1", "long_name": f"attention matrix {name}"})
    if "moments" in config.outputs.diagnostics:
        assert config.outputs.moments_lmax is not None  # resolved by OutputsConfig
        for name, values in zip(("moment_l", "moment_m"),
                                moment_degrees(config.d, config.outputs.moments_lmax)):
            static[name] = (values, ("moment",), {"units": "1", "long_name": (
                "degree l" if name == "moment_l" else "order m") + " of the harmonic moment "
                "(S1: both are the wavenumber k)"})
    names = series_names(model)
    remap_rows = None  # the point rows of a lagrangian-remap density's state
    dr = model.density_rep
    if dr is not None and reps.density is not None and reps.density.scheme == "lagrangian-remap":
        remap_rows = dr.state0.shape[0]  # build packs the points
    file = RunFile(nc, model.grid, model.times, config=cfg, seeds=config.seeds(),
                   fields=reps.density is not None and config.outputs.fields, particles=n_part,
                   weights=weights, positions=config.outputs.positions, tokens=n_tok,
                   token_realisations=None if tc is None else tc.realisations,
                   series={k: series_attrs(k, model.config.energy_beta()) for k in names}, static=static,
                   density=reps.density is not None,
                   density_points=remap_rows,
                   density_leaves=(model.density.grid.shape[0] if reps.density is not None and
                                   reps.density.scheme == "amr" else None),
                   precision=config.outputs.precision,
                   brownian_path=None if model.path is None else model.path.to_dict())
    summary: dict = {"file": str(nc), "summary": str(outdir / "summary.json"),
                     "config_file": str(outdir / "config.toml"), "version": __version__,
                     "seeds": config.seeds(), "dt": model.dt, "outputs": int(model.times.size),
                     "interrupted": False}
    calculus = None if config.dynamics.noise is None else config.dynamics.noise.calculus
    if model.noise is not None:
        summary["noise"] = {**model.noise.to_dict(), "calculus": calculus}
        if model.path is not None:
            summary["noise"]["brownian_path"] = model.path.to_dict()
    elif model.kernel is not None:
        k = model.kernel
        summary["noise"] = {"d": int(k.d), "sampler": "exact Gaussian field at the tokens",
                            "kappa1": float(k.kappa1), "lambda_1": float(k.lambda_1),
                            "calculus": calculus}
    if resume is not None:
        copy_restart(file, resume)
        summary["restart"] = {"from": str(resume.source),
                              "outputs_before": {k: v + 1 for k, v in resume.index.items()}}
    t_start = time.perf_counter()
    status = "interrupted"  # until every representation has reached t_end
    bar = RunProgress(disable=None if progress else True)
    lanes: list[_RepLane] = []
    failed: BaseException | None = None
    try:
        lanes = _lanes(model, file, resume, bar)
        run_lanes([rl.lane for rl in lanes if rl.lane is not None])
        status = "complete"
    except KeyboardInterrupt as err:
        summary["interrupted"] = True
        failed = err
        raise
    except BaseException as err:  # e.g. a full disk: the summary says so, not "complete"
        summary["interrupted"] = True
        summary["error"] = (f"{err.strerror}: {err.filename}" if isinstance(err, OSError) and err.filename
                            else f"{type(err).__name__}: {err}")
        failed = err
        raise
    finally:
        bar.close()
        # after an error the cleaning up may fail the same way (a full disk): the first error
        # is the one reported, the others are noted on it
        with _secondary(failed):
            summary.update({rl.rep: rl.summary() for rl in lanes})
        with _secondary(failed):
            file.close(status)
        summary["seconds"] = round(time.perf_counter() - t_start, 2)
        summary["config"] = cfg
        with _secondary(failed):
            _write_text(outdir / "summary.json", json.dumps(jsonable(summary), indent=2))
    return summary


def _write_text(path: Path, text: str) -> None:
    """``path.write_text(text)``; an error names the cause and the file (StorageError)."""
    try:
        path.write_text(text)
    except OSError as err:
        path.unlink(missing_ok=True)  # not a truncated file left behind
        raise storage_error(err, path) from err


@contextlib.contextmanager
def _secondary(failed: BaseException | None):
    """Run the block; if ``failed`` (an error on its way out) is set, an error of the block is
    added to it as a note instead of replacing it."""
    if failed is None:
        yield
        return
    try:
        yield
    except Exception as err:  # noqa: BLE001 - the first error goes on
        failed.add_note(f"spherepde: then also: {err}")


@dataclass
class _RepLane:
    """One representation of a run: its controller lane (None when it was complete before a
    restart), its output tracker, what its summary adds (``info``, and ``extra(state)`` at the
    end), and the summary's name for its steps."""

    rep: str
    lane: Lane | None
    output: Any
    info: dict
    extra: Any = None
    steps: str = "steps"

    def summary(self) -> dict:
        if self.lane is None:
            return {**self.info, self.steps: 0, "complete_before_restart": True}
        res = self.lane.result(interrupted=not self.lane.done)
        out = {**self.info, self.steps: res.n_steps, "seconds": round(res.wall_time, 2),
               "step_seconds": round(res.step_time, 2)}
        out.update({} if self.extra is None else self.extra(res.state))
        return {**out, "final": self.output.last}


def _lanes(model: Model, file: RunFile, resume: RestartState | None, bar: RunProgress) -> list[_RepLane]:
    """The representations of ``model`` as controller lanes from where ``resume`` says: density,
    particles, transformer, in the order each output time is handled (the particles' W₂ to
    the density needs the density's snapshot of the same time)."""
    config, times = model.config, model.times
    last = times.size - 1

    def begin(rep: str, initial: np.ndarray) -> tuple[int, np.ndarray]:
        """(index of the first output to compute, state to start from)."""
        if resume is None or resume.index.get(rep, -1) < 0:
            return 0, initial
        return resume.index[rep] + 1, resume.state[rep]

    def lane(stepper, output, dt, state, t0: float, outs) -> Lane:
        return Controller(stepper, [output, bar.tracker()], dt=dt).start(
            state, (t0, times[-1]), output_times=outs)

    lanes, dens = [], None
    if (dr := model.density_rep) is not None:
        keep = "w2_particles_density" in config.outputs.diagnostics
        first, state = begin("density", dr.state0)
        given = {} if resume is None or not keep else resume.snapshots
        dens = DensityOutput(file, model, dr, keep=keep, start=first, snapshots=given)
        if first >= 2 and callable(getattr(dr.stepper, "prime", None)):
            dr.stepper.prime()  # caches as the uninterrupted run's first steps left them
        if first > 0 and dens.points:
            assert resume is not None  # first > 0 only on a restart
            dr.stepper.resume(resume.rng_state["density"])  # the steps to the next remap
        scheme = getattr(config.representations.density, "scheme", None)
        rl = _RepLane("density", None, dens, {"scheme": scheme})
        if first <= last:
            rl.lane = lane(dr.stepper, dens, model.dt, state, times[max(first - 1, 0)],
                           times[first:])

            def extra(state, dens=dens, st=dr.stepper) -> dict:
                out = {"mass_error": float(dens.mass(state)) - 1.0,
                       "min_density": float(np.min(dens.field(state)))}
                if dens.points:
                    out.update(st.info(state))
                elif getattr(st.transport, "polar", "split") == "cap":
                    out["cap_fallbacks"] = st.transport.cap_fallbacks
                return out

            rl.extra = extra
        lanes.append(rl)
    if (pr := model.particle_rep) is not None:
        n_part = pr.stepper.grid.shape[0]
        weights = particle_weights(model, n_part)
        first, state = begin("particles", pr.x0)
        sampler = getattr(pr.stepper.system, "sampler", None)
        prng = None if sampler is None else sampler.rng  # the exact point noise draws from it
        if first > 0 and prng is not None:
            assert resume is not None  # first > 0 only on a restart
            prng.bit_generator.state = resume.rng_state["particles"]
        parts = ParticleOutput(file, model, pr, weights,
                               dens if dens is not None and dens.keep else None, start=first,
                               rng=prng)
        rl = _RepLane("particles", None, parts, {"n": n_part})
        if first <= last:
            rl.lane = lane(pr.stepper, parts, model.dt, state, times[max(first - 1, 0)],
                           times[first:])
        lanes.append(rl)
    if (trep := model.transformer_rep) is not None:
        ts, tc = trep.stepper, trep.config
        tr = ts.transformer
        rngs = ts.rngs  # R generators (width m), restored from the file on a restart
        first, state = begin("transformer", trep.z0)
        if first > 0 and rngs is not None:
            assert resume is not None  # first > 0 only on a restart
            saved = resume.rng_state["transformer"]
            for g, st in zip(rngs, [saved] if tc.realisations is None else saved):
                g.bit_generator.state = st
        # output i holds the tokens reached at output anchor[i] (X_{⌊iL/K⌋}); the lane stops
        # at the distinct anchors from output first on, and writes each one's outputs
        anchor = transformer_anchors(last, tr.depth)
        stops = np.unique(anchor[first:])
        toks = ParticleOutput(file, model, trep, np.full(tc.n, 1.0 / tc.n), start=first,
                              rng=None if rngs is None else (rngs[0] if tc.realisations is None else rngs),
                              blocks=[[i for i in range(first, last + 1) if anchor[i] == a]
                                      for a in stops])
        rl = _RepLane("transformer", None, toks, {"n": tc.n, "realisations": tc.r,
                                                  "depth": tr.depth, "width": tr.width},
                      steps="layers")
        if first <= last:
            t0 = times[anchor[first - 1]] if first > 0 else times[0]
            rl.lane = lane(ts, toks, tr.dt, state, t0, times[stops])
        lanes.append(rl)
    return lanes
