"""Run a :class:`~spherepde.experiments.config.RunConfig`: ``spherepde run CONFIG.toml``.

:func:`build` turns the configuration into the objects of a run (grid, ρ_0, attention, noise
field and Brownian path, steppers, initial particles) — every error a ``ValueError`` naming the
key path, before any file exists.  :func:`run` then drives the density and the particles
through the one run loop (:class:`~spherepde.solvers.controller.Controller`) with the same
step sizes and, where there is noise, the same :class:`~spherepde.noise.BrownianPath`, so that
both see the same increments ΔW over the same steps.  Trackers write each output time into
``DIR/run.nc`` (:class:`~spherepde.experiments.output.RunFile`); ``DIR/summary.json`` and
``DIR/config.toml`` (the validated configuration) sit beside it.

The velocity and noise formulas are those of :mod:`spherepde.dynamics.attention`
(:class:`DensityAttention`, :class:`Attention`) and :mod:`spherepde.noise`; the steppers are
``meanfield-ffsl`` / ``spde-ffsl`` (density), :class:`ParticleODE` (RK4) /
:class:`ParticleSDE` (Heun: Stratonovich; Euler–Maruyama: Itô) for the particles, and
:class:`DiscreteTransformer` (one layer per step of Δt = t_end/L) for the transformer.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spherepde import __version__
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.experiments.config import RunConfig, dumps_toml
from spherepde.experiments.initial import initial_density
from spherepde.checks import check_output_dir
from spherepde.experiments.output import RunFile
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.sampling import sample_density
from spherepde.noise import BrownianPath, NoiseField, NoiseKernel
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian.spde import SPDEFFSL
from spherepde.solvers.lagrangian import DiscreteTransformer, ParticleODE, ParticleSDE, retract
from spherepde.solvers.lagrangian.transformer import GaussianLayer
from spherepde.solvers.trackers import ProgressTracker, Tracker
from spherepde.validation.metrics import (as_measure, dist_to_subspace, interaction_energy,
                                          top_eigenspace, two_point_weight, w2_two_point,
                                          w2_with_bound)

#: the stochastic calculus each stepper integrates (checked against dynamics.noise.calculus)
DENSITY_CALCULUS = {"stratonovich": "stratonovich", "ito-euler": "ito"}
PARTICLE_CALCULUS = {"heun": "stratonovich", "euler-maruyama": "ito"}


# ---- the objects of a run -----------------------------------------------------------------
class ParticleSpace:
    """The "grid" of a particle state for the controller: only its shape (N, d)."""

    def __init__(self, n: int, d: int) -> None:
        self.shape = (n, d)

    def __eq__(self, other) -> bool:
        return isinstance(other, ParticleSpace) and other.shape == self.shape

    def __repr__(self) -> str:
        return f"ParticleSpace(N={self.shape[0]}, d={self.shape[1]})"


class ParticleStepper:
    """A :class:`ParticleODE`/:class:`ParticleSDE` as a controller stepper: state (N, d), fixed
    steps only (``step`` is the particle system's own, retracted to the sphere)."""

    name = "particles"

    def __init__(self, system: ParticleODE, n: int) -> None:
        self.system = system
        self.grid = ParticleSpace(n, system.d)

    def stable_dt(self, x, t):
        raise ValueError("particles take the fixed step of stepping.dt / stepping.courant")

    def step(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        return self.system.step(x, t, dt)


class TransformerStepper:
    """A :class:`DiscreteTransformer` as a controller stepper: one layer per step of Δt = T/L,
    state (N_T, d).  Layer ℓ is drawn from the transformer's generator (width m) in order, or
    for m = ∞ built from the Brownian path over the step (:meth:`GaussianLayer.from_path`), so
    that its noise is the increment W(t + Δt) − W(t) the density and the particles see."""

    name = "transformer"

    def __init__(self, transformer: DiscreteTransformer, n: int, seed: int, noise=None,
                 path=None) -> None:
        self.transformer = transformer
        self.grid = ParticleSpace(n, transformer.d)
        self.rng = DiscreteTransformer.realisation_rngs(seed, 1)[0]
        self.noise, self.path = noise, path

    def stable_dt(self, x, t):
        raise ValueError("the transformer takes one layer per step, Δt = t_end/depth")

    def step(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        tr = self.transformer
        if abs(dt - tr.dt) > 1e-9 * tr.dt:
            raise RuntimeError(f"the transformer steps by Δt = T/L = {tr.dt}, asked for {dt}")
        layer = None
        if tr.is_gaussian:
            layer = GaussianLayer.from_path(self.noise, self.path, t, t + dt)
        elif tr.has_mlp:
            layer = tr.draw_layer(self.rng)
        return tr.step(x, layer)


@dataclass
class Model:
    """Everything :func:`run` needs, built and checked by :func:`build`.

    grid : GaussGrid or CircleGrid; rho0 : grid.shape, mass 1; times : (k,) output times;
    dt : the fixed step; attention, noise, path : Attention / NoiseField / BrownianPath or None;
    density : the density stepper or None; particles : ParticleStepper or None; x0 : (N, d);
    transformer : TransformerStepper or None; z0 : its tokens (N_T, d);
    eigenspace : (d, k) basis of the top eigenspace of VBᵀ or None; eigenspace_V : the same
    for V (largest |eigenvalue|); projection : (e, a) of Π_#ρ_0 = a δ_e + (1 − a) δ_{−e} or None.
    """

    config: RunConfig
    grid: Any
    rho0: np.ndarray
    times: np.ndarray
    dt: float
    attention: Attention | None
    noise: NoiseField | None
    path: BrownianPath | None
    density: Any
    particles: ParticleStepper | None
    x0: np.ndarray | None
    transformer: TransformerStepper | None
    z0: np.ndarray | None
    eigenspace: np.ndarray | None
    eigenspace_V: np.ndarray | None = None
    projection: tuple | None = None


def _named(prefix: str, err: Exception) -> ValueError:
    msg = str(err)
    return ValueError(msg if msg.startswith(prefix) else f"{prefix}: {msg}")


def build(config: RunConfig) -> Model:
    """The objects of a run (see :class:`Model`); ValueError naming the key path on bad input."""
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
    g, st = config.grid, config.stepping
    grid = GaussGrid(g.nlat) if g.kind == "sphere" else CircleGrid(g.n)
    rho0 = initial_density(config.initial, grid)
    a = config.dynamics.attention
    att = None
    if a is not None:
        try:
            att = Attention(np.array(a.Q), np.array(a.K), np.array(a.V), a.beta, kind=a.kind)
        except (ValueError, TypeError) as err:
            raise _named("dynamics.attention", err) from None
    times = np.linspace(0.0, st.t_end, st.n_outputs + 1)
    if st.dt is not None:
        dt = st.dt
    else:  # |X| ≤ ‖V‖₂: the Courant number of the attention velocity stays ≤ courant
        dx = grid.dlon if isinstance(grid, GaussGrid) else grid.dtheta
        vnorm = float(np.linalg.norm(att.V, 2))
        dt = min(st.courant * dx / vnorm, st.output_every) if vnorm > 0 else st.output_every
    noise = path = None
    n = config.dynamics.noise
    if n is not None:
        try:
            kernel = NoiseKernel(n.activation, d=config.d, sigma_u=n.sigma_u, sigma_w=n.sigma_w)
            noise = (NoiseField(kernel, nmax=n.n_max) if n.n_max is not None
                     else NoiseField(kernel, variance_fraction=n.variance_fraction))
        except (ValueError, TypeError) as err:
            raise _named("dynamics.noise", err) from None
        path = BrownianPath(noise.shape, seed=n.seed, t1=st.t_end)
        try:
            SPDEFFSL(grid, noise=noise, path=path).check_dt(dt)
        except ValueError as err:
            raise _named("stepping.dt", err) from None
    density = None
    if config.representations.density:
        try:
            drift = None if att is None else DensityAttention(att, grid, method=a.method)
        except (ValueError, ImportError) as err:
            raise _named("dynamics.attention.method", err) from None
        try:
            if noise is None:
                density = make_stepper("meanfield-ffsl", grid, drift, limiter=g.limiter)
            else:
                density = SPDEFFSL(grid, drift, noise=noise, path=path, scheme="stratonovich",
                                   limiter=g.limiter)
        except ValueError as err:
            raise _named("grid.limiter", err) from None
        if noise is not None and DENSITY_CALCULUS[density.scheme] != n.calculus:
            raise ValueError(f"dynamics.noise.calculus: {n.calculus!r} but the density stepper "
                             f"{density.name} integrates the {DENSITY_CALCULUS[density.scheme]} form")
    particles = x0 = None
    p = config.representations.particles
    if p is not None:
        if noise is None:
            system = ParticleODE(att)
        else:
            method = "heun" if n.calculus == "stratonovich" else "euler-maruyama"
            system = ParticleSDE(att, noise=noise, path=path, method=method, d=config.d)
            if PARTICLE_CALCULUS[system.method] != n.calculus:
                raise ValueError(f"dynamics.noise.calculus: {n.calculus!r} but the particle "
                                 f"scheme {system.method} integrates the "
                                 f"{PARTICLE_CALCULUS[system.method]} form")
        particles = ParticleStepper(system, p.n)
        x0 = retract(sample_density(grid, rho0, p.n, seed=p.seed))
    transformer = z0 = None
    tc = config.representations.transformer
    if tc is not None:
        kw = {} if n is None else {"activation": n.activation, "sigma_u": n.sigma_u,
                                   "sigma_w": n.sigma_w}
        tr = DiscreteTransformer(d=config.d, depth=tc.depth, T=st.t_end, width=tc.width,
                                 attention=att, **kw)
        transformer = TransformerStepper(tr, tc.n, tc.seed, noise, path)
        z0 = retract(sample_density(grid, rho0, tc.n, seed=tc.seed))
    names = config.outputs.diagnostics
    basis = top_eigenspace(att.A).basis if {"dist_eigenspace", "w2_projection"} & set(names) else None
    basis_v = top_eigenspace(att.V, by_magnitude=True).basis if "dist_eigenspace_V" in names else None
    projection = None
    if "w2_projection" in names:
        if basis.shape[1] != 1:
            raise ValueError(f"outputs.diagnostics: 'w2_projection' needs a one-dimensional top "
                             f"eigenspace of A = V Bᵀ, this one has dimension {basis.shape[1]}")
        e = basis[:, 0]
        projection = (e, two_point_weight(*as_measure(grid, rho0), e))
    return Model(config, grid, rho0, times, float(dt), att, noise, path, density, particles, x0,
                 transformer, z0, basis, basis_v, projection)


# ---- diagnostics and the trackers that write run.nc -------------------------------------
SERIES_LONG_NAMES = {  # {what}: "the density", "the particles", "the transformer's tokens"
    "mass": "total mass of {what} (integral of rho)",
    "min_density": "minimum of {what} over the cells",
    "max_density": "maximum of {what} over the cells",
    "energy": "scaled interaction energy exp(-beta) E_beta of {what}",
    "dist_eigenspace": "(int |P_perp x|^2 drho)^(1/2), distance of {what} to the top eigenspace of "
                       "A = V B^T",
    "dist_eigenspace_V": "distance of {what} to the eigenspace of V of largest |eigenvalue|",
    "w2_projection": "W2 distance (chordal) of {what} to the projected initial measure "
                     "a delta_e + (1 - a) delta_-e (Paper 1)",
    "w2_particles_density": "W2 distance (chordal cost) between the particles and the density",
}
_WHAT = {"particles_": "the particles", "transformer_": "the transformer's tokens"}


def series_attrs(name: str) -> dict:
    """CF attributes of the (time,) variable ``name`` (e.g. ``particles_energy``)."""
    what, base = "the density", name
    for prefix, text in _WHAT.items():
        if name.startswith(prefix) and name[len(prefix):] in SERIES_LONG_NAMES:
            what, base = text, name[len(prefix):]
    return {"units": "1", "long_name": SERIES_LONG_NAMES[base].format(what=what)}


def _measure_diagnostics(model: Model, names, prefix: str) -> dict:
    """name -> f(x, w) for the measure diagnostics in ``names`` (energy, dist_eigenspace)."""
    beta = model.config.energy_beta()
    out = {}
    if "energy" in names:
        out[prefix + "energy"] = lambda x, w: interaction_energy(x, w, beta)
    if "dist_eigenspace" in names:
        out[prefix + "dist_eigenspace"] = lambda x, w: dist_to_subspace(x, w, model.eigenspace)
    if "dist_eigenspace_V" in names:
        out[prefix + "dist_eigenspace_V"] = lambda x, w: dist_to_subspace(x, w, model.eigenspace_V)
    if "w2_projection" in names:
        e, a = model.projection
        out[prefix + "w2_projection"] = lambda x, w: w2_two_point(x, w, e, a)
    return out


def series_names(model: Model) -> list[str]:
    """The (time,) variables of run.nc for this model, in order."""
    names, cfg = model.config.outputs.diagnostics, model.config
    out = [k for k in ("mass", "min_density", "max_density") if k in names]
    if cfg.representations.density:
        out += list(_measure_diagnostics(model, names, ""))
    if model.particles is not None:
        out += list(_measure_diagnostics(model, names, "particles_"))
        if "w2_particles_density" in names:
            out.append("w2_particles_density")
    if model.transformer is not None:
        out += list(_measure_diagnostics(model, names, "transformer_"))
    return out


class DensityOutput(Tracker):
    """Write ρ and its diagnostics at every output time; keeps the snapshots when ``keep``."""

    name = "density-output"

    def __init__(self, file: RunFile, model: Model, *, keep: bool = False) -> None:
        super().__init__()
        self.file, self.model, self.keep = file, model, keep
        grid, names = model.grid, model.config.outputs.diagnostics
        self.scalars = {k: f for k, f in (("mass", lambda r: grid.integrate(r)),
                                          ("min_density", np.min), ("max_density", np.max))
                        if k in names}
        self.measures = _measure_diagnostics(model, names, "")
        self.fields = model.config.outputs.fields
        self.snapshots: list[np.ndarray] = []
        self.last: dict = {}

    def initialize(self, state, t, info) -> None:
        self.i, self.snapshots = 0, []

    def handle(self, state, t) -> None:
        values = {k: float(f(state)) for k, f in self.scalars.items()}
        if self.measures:
            x, w = as_measure(self.model.grid, np.clip(state, 0.0, None))
            values.update({k: float(f(x, w)) for k, f in self.measures.items()})
        if self.fields:
            values["density"] = state
        self.file.write(self.i, **values)
        if self.keep:
            self.snapshots.append(np.array(state, copy=True))
        self.last = {k: v for k, v in values.items() if k != "density"}
        self.i += 1


class ParticleOutput(Tracker):
    """Write the positions (variable ``variable``) and diagnostics (names starting ``prefix``) of
    a weighted point set at every output time; W₂ against the kept density snapshots of a
    :class:`DensityOutput` when given."""

    name = "particle-output"

    def __init__(self, file: RunFile, model: Model, weights: np.ndarray,
                 density: DensityOutput | None = None, *, prefix: str = "particles_",
                 variable: str = "position") -> None:
        super().__init__()
        self.file, self.model, self.w, self.density = file, model, weights, density
        self.measures = _measure_diagnostics(model, model.config.outputs.diagnostics, prefix)
        self.positions = model.config.outputs.positions
        self.variable = variable
        self.last: dict = {}

    def initialize(self, state, t, info) -> None:
        self.i = 0

    def handle(self, state, t) -> None:
        values = {k: float(f(state, self.w)) for k, f in self.measures.items()}
        if self.density is not None:
            x, w = as_measure(self.model.grid, np.clip(self.density.snapshots[self.i], 0.0, None))
            values["w2_particles_density"] = float(w2_with_bound(state, self.w, x, w).value)
        if self.positions:
            values[self.variable] = state
        self.file.write(self.i, **values)
        self.last = {k: v for k, v in values.items() if k != self.variable}
        self.i += 1


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


def _jsonable(obj):
    """Plain JSON: NaN → null, ±inf → "inf"/"-inf", numpy scalars → numbers."""
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def run(config: RunConfig, output: str | os.PathLike, *, progress: bool = True) -> dict:
    """Build, validate and run ``config``; write ``output/run.nc``, ``output/summary.json`` and
    ``output/config.toml``; return the summary.

    Nothing is created before the whole configuration is built (:func:`build`).  On
    KeyboardInterrupt the file keeps every output written, the summary says
    ``"interrupted": true``, and the interrupt is re-raised.
    """
    model = build(config)
    outdir = prepare_output(output)
    cfg = config.to_dict()
    (outdir / "config.toml").write_text(dumps_toml(cfg))
    nc = outdir / "run.nc"
    reps = config.representations
    n_part = None if model.particles is None else model.particles.grid.shape
    n_tok = None if model.transformer is None else model.transformer.grid.shape
    weights = None if n_part is None else np.full(n_part[0], 1.0 / n_part[0])
    static = {}
    if model.attention is not None:
        for name in ("Q", "K", "V"):
            static[name] = (getattr(model.attention, name), ("dim_row", "dim_col"),
                            {"units": "1", "long_name": f"attention matrix {name}"})
    names = series_names(model)
    file = RunFile(nc, model.grid, model.times, config=cfg, seeds=config.seeds(),
                   fields=reps.density and config.outputs.fields, particles=n_part,
                   weights=weights, positions=config.outputs.positions, tokens=n_tok,
                   series={k: series_attrs(k) for k in names}, static=static)
    summary: dict = {"file": str(nc), "summary": str(outdir / "summary.json"),
                     "config_file": str(outdir / "config.toml"), "version": __version__,
                     "seeds": config.seeds(), "dt": model.dt, "outputs": int(model.times.size),
                     "interrupted": False}
    if model.noise is not None:
        summary["noise"] = {**model.noise.to_dict(), "calculus": config.dynamics.noise.calculus}
    t_start = time.perf_counter()
    quiet = None if progress else True
    span = (0.0, config.stepping.t_end)
    status = "interrupted"  # until every representation has reached t_end
    try:
        dens = None
        if model.density is not None:
            keep = "w2_particles_density" in config.outputs.diagnostics
            dens = DensityOutput(file, model, keep=keep)
            res = Controller(model.density, [dens, ProgressTracker(disable=quiet, desc="density")],
                             dt=model.dt).run(model.rho0, span, output_times=model.times)
            mass = float(model.grid.integrate(res.state))
            summary["density"] = {"steps": res.n_steps, "seconds": round(res.wall_time, 2),
                                  "mass_error": mass - 1.0, "min_density": float(res.state.min()),
                                  "final": dens.last}
        if model.particles is not None:
            parts = ParticleOutput(file, model, weights,
                                   dens if dens is not None and dens.keep else None)
            res = Controller(model.particles, [parts, ProgressTracker(disable=quiet, desc="particles")],
                             dt=model.dt).run(model.x0, span, output_times=model.times)
            summary["particles"] = {"n": n_part[0], "steps": res.n_steps,
                                    "seconds": round(res.wall_time, 2), "final": parts.last}
        if model.transformer is not None:
            toks = ParticleOutput(file, model, np.full(n_tok[0], 1.0 / n_tok[0]),
                                  prefix="transformer_", variable="transformer_position")
            res = Controller(model.transformer,
                             [toks, ProgressTracker(disable=quiet, desc="transformer")],
                             dt=model.transformer.transformer.dt).run(model.z0, span,
                                                                      output_times=model.times)
            tr = model.transformer.transformer
            summary["transformer"] = {"n": n_tok[0], "depth": tr.depth, "width": tr.width,
                                      "layers": res.n_steps, "seconds": round(res.wall_time, 2),
                                      "final": toks.last}
        status = "complete"
    except KeyboardInterrupt:
        summary["interrupted"] = True
        raise
    finally:
        file.close(status)
        summary["seconds"] = round(time.perf_counter() - t_start, 2)
        summary["config"] = cfg
        (outdir / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2))
    return summary


__all__ = ["DensityOutput", "Model", "ParticleOutput", "ParticleSpace", "ParticleStepper",
           "TransformerStepper", "build", "prepare_output", "run", "series_names"]
