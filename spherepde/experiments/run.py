"""Run a :class:`~spherepde.experiments.config.RunConfig`: ``spherepde run CONFIG.toml``.

:func:`build` turns the configuration into the objects of a run (grid, ρ_0, attention, noise
field and Brownian path, steppers, initial particles) — every error a ``ValueError`` naming the
key path, before any file exists.  :func:`run` then drives the density and the particles
through the one run loop (:class:`~spherepde.solvers.controller.Controller`) with the same
step sizes and, where there is noise, the same :class:`~spherepde.noise.BrownianPath`, so that
both see the same increments ΔW over the same steps.  Trackers write each output time into
``DIR/run.nc`` (:class:`~spherepde.experiments.output.RunFile`); ``DIR/summary.json`` and
``DIR/config.toml`` (the validated configuration) sit beside it.

:func:`restart` (``spherepde run --restart DIR/run.nc``) continues a stopped or finished run
from the exact state ``run.nc`` keeps (:mod:`spherepde.experiments.output`) and writes the
whole run to a new file that equals an uninterrupted run's bit for bit.  What makes the bits
equal: each representation continues from its last complete output with the state stored in
float64 (and the transformer's generator states, one per realisation); output i is at i·output_every, so the
controller's even split of each output interval — a function of the interval's two ends and
the step only — takes the same steps; the Brownian path is a pure function of (seed, t) on
[0, horizon], so a new path object gives the same increments; caches are either keyed by
exact equality or (the noise field's evaluation tables) primed as the earlier steps left them.

The velocity and noise formulas are those of :mod:`spherepde.dynamics.attention`
(:class:`DensityAttention`, :class:`Attention`) and :mod:`spherepde.noise`; the steppers are
``meanfield-ffsl`` / ``spde-ffsl`` (density), :class:`ParticleODE` (RK4) /
:class:`ParticleSDE` (Heun: Stratonovich; Euler–Maruyama: Itô) for the particles, and
:class:`DiscreteTransformer` (:class:`TransformerStepper`, one layer per step of Δt = t_end/L, the
stepper of ``DiscreteTransformer.run``) for the transformer.
"""
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
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.experiments.config import RunConfig, dumps_toml
from spherepde.experiments.initial import initial_density, sample_initial
from spherepde.checks import check_output_dir
from spherepde.experiments.output import RunFile
from spherepde.io.summary import jsonable
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.sampling import sample_density
from spherepde.noise import BrownianPath, NoiseField, NoiseKernel
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller, Lane, run_lanes
from spherepde.solvers.eulerian.spde import SPDEFFSL
from spherepde.solvers.lagrangian import DiscreteTransformer, ParticleODE, ParticleSDE, retract
from spherepde.solvers.lagrangian.particles import ParticleStepper
from spherepde.solvers.lagrangian.remap import LagrangianRemap, RemapStepper, points_from_density
from spherepde.solvers.lagrangian.transformer import TransformerStepper
from spherepde.solvers.trackers import RunProgress, Tracker
from spherepde.validation.metrics import (as_measure, dist_to_subspace, interaction_energy,
                                          moment_degrees, moments, top_eigenspace,
                                          two_point_weight, w2_two_point, w2_with_bound)

#: the stochastic calculus each stepper integrates (checked against dynamics.noise.calculus)
DENSITY_CALCULUS = {"stratonovich": "stratonovich", "ito-euler": "ito"}
PARTICLE_CALCULUS = {"heun": "stratonovich", "euler-maruyama": "ito"}


# ---- the objects of a run -----------------------------------------------------------------
@dataclass
class Model:
    """Everything :func:`run` needs, built and checked by :func:`build`.

    grid : GaussGrid or CircleGrid (None for grid.kind = "none"); rho0 : grid.shape, mass 1
    (None without a grid); times : (k,) output times;
    dt : the fixed step; attention, noise, path : Attention / NoiseField / BrownianPath or None;
    density : the density stepper or None; particles : ParticleStepper or None; x0 : (N, d);
    transformer : TransformerStepper or None; z0 : its tokens (N_T, d), or (R, N_T, d) with
    ``representations.transformer.realisations`` R (the same tokens in every realisation);
    eigenspace : (d, k) basis of the top eigenspace of VBᵀ or None; eigenspace_V : the same
    for V (largest |eigenvalue|); projection : (e, a) of Π_#ρ_0 = a δ_e + (1 − a) δ_{−e} or None;
    density0 : the density stepper's initial state (ρ_0 itself, or for ``lagrangian-remap`` its
    points packed as :class:`~spherepde.solvers.lagrangian.remap.RemapStepper` rows);
    kernel : the NoiseKernel of the exact point noise (grid.kind = "none"), else None;
    weights : the particles' weights (N,) (representations.particles.initial = "quadrature"),
    None for equal weights 1/N.
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
    density0: np.ndarray | None = None
    kernel: NoiseKernel | None = None
    weights: np.ndarray | None = None


def _named(prefix: str, err: Exception) -> ValueError:
    msg = str(err)
    return ValueError(msg if msg.startswith(prefix) else f"{prefix}: {msg}")


def build(config: RunConfig) -> Model:
    """The objects of a run (see :class:`Model`); ValueError naming the key path on bad input."""
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
    g, st = config.grid, config.stepping
    if g.kind == "none":
        return _build_gridless(config)
    grid = GaussGrid(g.nlat) if g.kind == "sphere" else CircleGrid(g.n)
    rho0 = initial_density(config.initial, grid)
    a = config.dynamics.attention
    att = _attention(config)
    # output i at i·output_every (not linspace(0, t_end)): the times are then a function of
    # output_every and i alone, so a run extended by --restart hits the same times (bit for bit)
    times = st.output_every * np.arange(st.n_outputs + 1, dtype=float)
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
        # each representation evaluates its own copy of the field: the evaluation cache
        # (NoiseField.prime) then sees the same points whatever the order of the steps
        nmax = noise.nmax
        # antithetic: realisations 2j and 2j + 1 are path j and −path j (NoiseConfig)
        r, flip = (n.realisation // 2, bool(n.realisation % 2)) if n.antithetic else (n.realisation, False)
        path = BrownianPath(noise.shape, seed=n.seed, realisation=r, antithetic=flip,
                            t1=st.t_end if n.horizon is None else n.horizon)
        try:
            SPDEFFSL(grid, noise=noise, path=path).check_dt(dt)
        except ValueError as err:
            raise _named("stepping.dt", err) from None

    def own_noise() -> NoiseField | None:
        """A new NoiseField equal to ``noise`` (one per representation, see above)."""
        return None if noise is None else NoiseField(noise.kernel, nmax=nmax)

    def particle_system(weights=None):
        """The particle ODE/SDE of this model (the density points' and the particles' own)."""
        return _particle_system(att, None if noise is None else n, config.d, weights,
                                noise=own_noise(), path=path)

    density = density0 = None
    if config.representations.density and g.scheme == "lagrangian-remap":
        x, w = points_from_density(grid, rho0)
        remap = LagrangianRemap(particle_system(w), grid_nlat=g.remap_nlat or g.nlat,
                                cells_per_width=g.cells_per_width, remap_every=g.remap_every)
        density = RemapStepper(remap, grid, max(w.size, 2 * remap.grid_nlat ** 2))
        density0 = density.pack(x, w)
    elif config.representations.density:
        try:
            drift = None if att is None else DensityAttention(att, grid, method=a.method)
        except (ValueError, ImportError) as err:
            raise _named("dynamics.attention.method", err) from None
        polar = {"polar": g.polar} if g.kind == "sphere" else {}
        try:
            if noise is None:
                density = make_stepper("meanfield-ffsl", grid, drift, limiter=g.limiter, **polar)
            else:
                density = SPDEFFSL(grid, drift, noise=noise, path=path, scheme="stratonovich",
                                   limiter=g.limiter, dt=dt, **polar)
        except ValueError as err:
            raise _named("grid.polar" if "cap_" in str(err) or "polar=" in str(err) else "grid.limiter",
                         err) from None
        if noise is not None and DENSITY_CALCULUS[density.scheme] != n.calculus:
            raise ValueError(f"dynamics.noise.calculus: {n.calculus!r} but the density stepper "
                             f"{density.name} integrates the {DENSITY_CALCULUS[density.scheme]} form")
    particles = x0 = weights = None
    p = config.representations.particles
    if p is not None:
        if p.initial == "quadrature":  # the weighted cell centres of ρ_0 (no Monte Carlo error)
            x0, weights = points_from_density(grid, rho0)
        else:
            x0 = retract(sample_density(grid, rho0, p.n, seed=_particle_seed(p, n)))
        particles = ParticleStepper(particle_system(weights), x0.shape[0])
    transformer = z0 = None
    tc = config.representations.transformer
    if tc is not None:
        kw = {} if n is None else {"activation": n.activation, "sigma_u": n.sigma_u,
                                   "sigma_w": n.sigma_w}
        tr = DiscreteTransformer(d=config.d, depth=tc.depth, T=st.t_end, width=tc.width,
                                 attention=att, **kw)
        transformer = _transformer_stepper(tr, tc, n, own_noise(), path)
        z0 = _token_state(tc, retract(sample_density(grid, rho0, tc.n, seed=tc.seed)))
    basis, basis_v, projection = _reference_sets(config, att, grid, rho0)
    return Model(config, grid, rho0, times, float(dt), att, noise, path, density, particles, x0,
                 transformer, z0, basis, basis_v, projection,
                 density0=rho0 if density0 is None else density0, weights=weights)


def _transformer_stepper(tr: DiscreteTransformer, tc, n=None, noise=None, path=None) -> TransformerStepper:
    """The transformer on tokens (N_T, d) (or (R, N_T, d) with ``tc.realisations``), one layer per
    step of Δt = t_end/L.  Realisation k uses noise realisation j = r + k, r =
    ``dynamics.noise.realisation`` (``n``): for width m its layers are drawn in order from the
    generator ``SeedSequence(tc.seed).spawn(j + 1)[j]``; for m = ∞ they are built from the
    Brownian path j over the step (for k = 0 the run's ``path``: its noise is the increment
    W(t + Δt) − W(t) the density and the particles see)."""
    R = tc.realisations
    if not tr.has_mlp:
        return TransformerStepper(tr, tc.n, realisations=R)
    first = 0 if n is None else n.realisation
    js = range(first, first + tc.r)
    if tr.is_gaussian:
        paths = [path] + [BrownianPath(path.shape, seed=path.seed, t0=path.t0, t1=path.t1,
                                       realisation=j, antithetic=path.antithetic) for j in js[1:]]
        return TransformerStepper(tr, tc.n, realisations=R, noise=noise,
                                  path=path if R is None else paths)
    rngs = [np.random.default_rng(np.random.SeedSequence(tc.seed, spawn_key=(j,))) for j in js]
    return TransformerStepper(tr, tc.n, realisations=R, rngs=rngs)


def _token_state(tc, z: np.ndarray) -> np.ndarray:
    """The transformer's initial state: the tokens z (N, d), or R copies (R, N, d)."""
    return z if tc.realisations is None else np.broadcast_to(z, (tc.realisations, *z.shape)).copy()


def transformer_anchors(n_outputs: int, depth: int) -> np.ndarray:
    """For every output i = 0..K (K = ``n_outputs``), the output at which its tokens were reached:
    i itself when the K output intervals hold whole layers (L a multiple of K), else (K a
    multiple of L, q = K/L outputs per layer) ⌊i/q⌋·q, the output at the end of layer ⌊iL/K⌋:
    output i holds X_{⌊iL/K⌋} (K + 1,)."""
    i = np.arange(n_outputs + 1)
    if depth % n_outputs == 0:
        return i
    q = n_outputs // depth
    return (i // q) * q


def _particle_seed(p, n) -> int:
    """The seed of the particles' draw: ``p.seed``, or with ``p.per_realisation`` one derived from
    (seed, noise realisation) by ``SeedSequence`` (a different draw for every realisation)."""
    if not p.per_realisation:
        return p.seed
    return int(np.random.SeedSequence([p.seed, n.realisation]).generate_state(1)[0])


def _particle_system(att, n, d: int, weights=None, **noise_source):
    """ParticleODE (``n`` None: no noise) or ParticleSDE with the scheme of ``n.calculus`` and
    the noise given by ``noise_source`` (a NoiseField and path, or an exact point kernel and
    its seed); ValueError naming dynamics.noise.calculus if the scheme integrates another form."""
    if n is None:
        return ParticleODE(att, weights=weights)
    method = "heun" if n.calculus == "stratonovich" else "euler-maruyama"
    system = ParticleSDE(att, method=method, d=d, weights=weights, **noise_source)
    if PARTICLE_CALCULUS[system.method] != n.calculus:
        raise ValueError(f"dynamics.noise.calculus: {n.calculus!r} but the particle scheme "
                         f"{system.method} integrates the {PARTICLE_CALCULUS[system.method]} form")
    return system


def _attention(config: RunConfig) -> Attention | None:
    a = config.dynamics.attention
    if a is None:
        return None
    try:
        return Attention(np.array(a.Q), np.array(a.K), np.array(a.V), a.beta, kind=a.kind)
    except (ValueError, TypeError) as err:
        raise _named("dynamics.attention", err) from None


def _reference_sets(config: RunConfig, att, grid, rho0) -> tuple:
    """(eigenspace of VBᵀ, eigenspace of V, (e, a) of Π_#ρ_0) where the diagnostics need them."""
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
    return basis, basis_v, projection


def _build_gridless(config: RunConfig) -> Model:
    """:func:`build` for ``grid.kind = "none"``: tokens on S^{d−1} sampled exactly
    (:func:`sample_initial`), the noise the exact Gaussian field at the tokens
    (``ParticleSDE(kernel=…)``, generator seeded by (noise seed, realisation)); no density."""
    d, st = config.d, config.stepping
    att = _attention(config)
    times = st.output_every * np.arange(st.n_outputs + 1, dtype=float)
    n, kernel = config.dynamics.noise, None
    if n is not None:
        try:
            kernel = NoiseKernel(n.activation, d=d, sigma_u=n.sigma_u, sigma_w=n.sigma_w)
        except (ValueError, TypeError) as err:
            raise _named("dynamics.noise", err) from None
    particles = x0 = None
    p = config.representations.particles
    if p is not None:
        system = (_particle_system(att, None, d) if kernel is None else
                  _particle_system(att, n, d, kernel=kernel, seed=[n.seed, n.realisation]))
        particles = ParticleStepper(system, p.n)
        x0 = sample_initial(config.initial, d, p.n, _particle_seed(p, n))
    transformer = z0 = None
    tc = config.representations.transformer
    if tc is not None:
        kw = {} if n is None else {"activation": n.activation, "sigma_u": n.sigma_u,
                                   "sigma_w": n.sigma_w}
        tr = DiscreteTransformer(d=d, depth=tc.depth, T=st.t_end, width=tc.width,
                                 attention=att, **kw)
        transformer = _transformer_stepper(tr, tc, n)
        z0 = _token_state(tc, sample_initial(config.initial, d, tc.n, tc.seed))
    basis, basis_v, projection = _reference_sets(config, att, None, None)
    return Model(config, None, None, times, float(st.dt), att, None, None, None, particles, x0,
                 transformer, z0, basis, basis_v, projection, kernel=kernel)


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
    "moment_re": "real part of the harmonic moments int conj(Y_lm) d rho (S2) or "
                 "int exp(-i k theta) d rho (S1) of {what}",
    "moment_im": "imaginary part of the harmonic moments of {what}",
}
#: the (time, moment) variables of the diagnostic "moments" (the others are (time,))
MOMENT_SERIES = ("moment_re", "moment_im")
_WHAT = {"particles_": "the particles", "transformer_": "the transformer's tokens"}


def series_attrs(name: str) -> dict:
    """CF attributes of the (time,) variable ``name`` (e.g. ``particles_energy``)."""
    what, base = "the density", name
    for prefix, text in _WHAT.items():
        if name.startswith(prefix) and name[len(prefix):] in SERIES_LONG_NAMES:
            what, base = text, name[len(prefix):]
    attrs = {"units": "1", "long_name": SERIES_LONG_NAMES[base].format(what=what)}
    if base in MOMENT_SERIES:
        attrs["dims"] = ("moment",)
    return attrs


def _measure_diagnostics(model: Model, names, prefix: str) -> dict:
    """name -> f(x, w) for the measure diagnostics in ``names`` (energy, dist_eigenspace, …);
    ``moments`` (key ``PREFIXmoments``) returns the complex moments (moment,), which
    :func:`_evaluate` writes as the two variables :data:`MOMENT_SERIES`."""
    beta = model.config.energy_beta()
    out = {}
    if "moments" in names:
        lmax = model.config.outputs.moments_lmax
        out[prefix + "moments"] = lambda x, w: moments(x, w, lmax)
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


def _variables(key: str) -> list[str]:
    """The run.nc variables of the measure diagnostic ``key`` (``PREFIXmoments``: two)."""
    if key.endswith("moments"):
        return [key[:-len("moments")] + m for m in MOMENT_SERIES]
    return [key]


def series_names(model: Model) -> list[str]:
    """The diagnostic variables of run.nc for this model, in order ((time,), moments (time, moment))."""
    names, cfg = model.config.outputs.diagnostics, model.config

    def measures(prefix):
        return [v for k in _measure_diagnostics(model, names, prefix) for v in _variables(k)]

    out = [k for k in ("mass", "min_density", "max_density") if k in names]
    if cfg.representations.density:
        out += measures("")
    if model.particles is not None:
        out += measures("particles_")
        if "w2_particles_density" in names:
            out.append("w2_particles_density")
    if model.transformer is not None:
        out += measures("transformer_")
    return out


def _evaluate(measures: dict, x, w) -> dict:
    """The diagnostics ``measures`` (name -> f(x, w)) of the measure (x, w) by variable: floats,
    and the real and imaginary parts (moment,) of the moments (computed once)."""
    out = {}
    for k, f in measures.items():
        v = f(x, w)
        if k.endswith("moments"):
            out.update(zip(_variables(k), (np.real(v), np.imag(v))))
        else:
            out[k] = float(v)
    return out


class DensityOutput(Tracker):
    """Write ρ and its diagnostics at every output time; keeps the snapshots when ``keep``."""

    name = "density-output"

    def __init__(self, file: RunFile, model: Model, *, keep: bool = False, start: int = 0,
                 snapshots: dict | None = None) -> None:
        super().__init__()
        self.file, self.model, self.keep, self.start = file, model, keep, start
        grid, names, st = model.grid, model.config.outputs.diagnostics, model.density
        # a field on the grid, or weighted points (lagrangian-remap) with their field and measure
        self.points = isinstance(st, RemapStepper)
        self.field = st.field if self.points else (lambda r: r)
        self.measure = st.measure if self.points else (
            lambda r: as_measure(grid, np.clip(r, 0.0, None)))
        self.mass = st.mass if self.points else grid.integrate
        self.scalars = {k: f for k, f in (("mass", self.mass),
                                          ("min_density", lambda r: np.min(self.field(r))),
                                          ("max_density", lambda r: np.max(self.field(r))))
                        if k in names}
        self.measures = _measure_diagnostics(model, names, "")
        self.fields = model.config.outputs.fields
        self._given = dict(snapshots or {})  # output index -> ρ, from the file being restarted
        self.snapshots: dict[int, np.ndarray] = dict(self._given)
        self.last: dict = {}

    def initialize(self, state, t, info) -> None:
        self.i, self.snapshots = self.start, dict(self._given)

    def handle(self, state, t) -> None:
        values = {k: float(f(state)) for k, f in self.scalars.items()}
        if self.measures:
            x, w = self.measure(state)
            values.update(_evaluate(self.measures, x, w))
        if self.fields:
            values["density"] = self.field(state)
            if self.points:
                values["density_points"] = state  # the exact state behind the field
        self.file.write(self.i, **values)
        if self.keep:
            self.snapshots[self.i] = np.array(state, copy=True)
        self.file.save_state("density", self.i, state,
                             self.model.density.restart_info() if self.points else None)
        self.last = {k: v for k, v in values.items() if isinstance(v, float)}
        self.i += 1


class ParticleOutput(Tracker):
    """Write the positions (variable ``variable``) and diagnostics (names starting ``prefix``) of
    a weighted point set at every output time; W₂ against the kept density snapshots of a
    :class:`DensityOutput` when given.  A state (R, N, d) (the transformer's realisations) gets
    its diagnostics per realisation, (R,).  ``blocks``: the output indices each call writes
    (default: one, counting from ``start``); ``rng``: a generator or a list of them whose states
    are kept with the restart state."""

    name = "particle-output"

    def __init__(self, file: RunFile, model: Model, weights: np.ndarray,
                 density: DensityOutput | None = None, *, prefix: str = "particles_",
                 variable: str = "position", rep: str = "particles", start: int = 0,
                 rng: np.random.Generator | list | None = None, blocks: list | None = None) -> None:
        super().__init__()
        self.file, self.model, self.w, self.density = file, model, weights, density
        self.rep, self.start, self.rng, self.blocks = rep, start, rng, blocks
        self.measures = _measure_diagnostics(model, model.config.outputs.diagnostics, prefix)
        self.positions = model.config.outputs.positions
        self.variable = variable
        self.last: dict = {}

    def initialize(self, state, t, info) -> None:
        self.i = self.start

    def _rng_state(self):
        if self.rng is None:
            return None
        if isinstance(self.rng, list):
            return [g.bit_generator.state for g in self.rng]
        return self.rng.bit_generator.state

    def handle(self, state, t) -> None:
        if state.ndim == 3:  # realisations (R, N, d): each diagnostic per realisation
            per = [_evaluate(self.measures, s, self.w) for s in state]
            values = {k: np.array([v[k] for v in per], float) for k in per[0]}
        else:
            values = _evaluate(self.measures, state, self.w)
        if self.density is not None:
            x, w = self.density.measure(self.density.snapshots[self.i])
            values["w2_particles_density"] = float(w2_with_bound(state, self.w, x, w).value)
        if self.positions:
            values[self.variable] = state
        block = [self.i] if self.blocks is None else self.blocks[self.i - self.start]
        for i in block:
            self.file.write(i, **values)
            self.file.save_state(self.rep, i, state, self._rng_state())
        self.last = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in values.items()
                     if k != self.variable and not k.endswith(MOMENT_SERIES)}
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


def run(config: RunConfig, output: str | os.PathLike, *, progress: bool = True) -> dict:
    """Build, validate and run ``config``; write ``output/run.nc``, ``output/summary.json`` and
    ``output/config.toml``; return the summary.

    Nothing is created before the whole configuration is built (:func:`build`).  On
    KeyboardInterrupt the file keeps every output written, the summary says
    ``"interrupted": true``, and the interrupt is re-raised.
    """
    model = build(config)
    outdir = prepare_output(output)
    return _execute(model, outdir, progress=progress)


def run_model(model: Model, output: str | os.PathLike, *, progress: bool = True) -> dict:
    """:func:`run` of a model :func:`build` made (its steppers can be read afterwards)."""
    return _execute(model, prepare_output(output), progress=progress)


@dataclass
class _Resume:
    """What :func:`restart` read from the file it continues (see :func:`read_restart`)."""

    source: Path
    config: dict
    times: np.ndarray
    index: dict            # rep -> last complete output index (−1: not started)
    state: dict            # rep -> its exact state at that output (None for −1)
    rng_state: dict        # rep -> generator state (JSON dict) at that output, or None
    rows: list             # names of the (time, …) variables (NaN where not written)
    slots: dict            # restart variable -> (array (2, …), attributes)
    snapshots: dict | None = None    # output index -> ρ the particles' W₂ needs (resume_snapshots)


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


def _execute(model: Model, outdir: Path, *, progress: bool, resume: _Resume | None = None) -> dict:
    """Run the representations of ``model`` into ``outdir`` (from where ``resume`` says)."""
    with _blas_one_thread(model):
        return _execute_run(model, outdir, progress=progress, resume=resume)


def _execute_run(model: Model, outdir: Path, *, progress: bool, resume: _Resume | None) -> dict:
    config = model.config
    cfg = config.to_dict()
    (outdir / "config.toml").write_text(dumps_toml(cfg))
    nc = outdir / "run.nc"
    reps = config.representations
    n_part = None if model.particles is None else model.particles.grid.shape
    n_tok = None if model.transformer is None else tuple(model.transformer.grid.shape[-2:])
    tc = reps.transformer
    weights = (None if n_part is None else model.weights if model.weights is not None
               else np.full(n_part[0], 1.0 / n_part[0]))
    static = {}
    if model.attention is not None:
        for name in ("Q", "K", "V"):
            static[name] = (getattr(model.attention, name), ("dim_row", "dim_col"),
                            {"units": "1", "long_name": f"attention matrix {name}"})
    if "moments" in config.outputs.diagnostics:
        for name, values in zip(("moment_l", "moment_m"),
                                moment_degrees(config.d, config.outputs.moments_lmax)):
            static[name] = (values, ("moment",), {"units": "1", "long_name": (
                "degree l" if name == "moment_l" else "order m") + " of the harmonic moment "
                "(S1: both are the wavenumber k)"})
    names = series_names(model)
    file = RunFile(nc, model.grid, model.times, config=cfg, seeds=config.seeds(),
                   fields=reps.density and config.outputs.fields, particles=n_part,
                   weights=weights, positions=config.outputs.positions, tokens=n_tok,
                   token_realisations=None if tc is None else tc.realisations,
                   series={k: series_attrs(k) for k in names}, static=static,
                   density=reps.density,
                   density_points=(model.density0.shape[0] if reps.density and
                                   config.grid.scheme == "lagrangian-remap" else None),
                   precision=config.outputs.precision)
    summary: dict = {"file": str(nc), "summary": str(outdir / "summary.json"),
                     "config_file": str(outdir / "config.toml"), "version": __version__,
                     "seeds": config.seeds(), "dt": model.dt, "outputs": int(model.times.size),
                     "interrupted": False}
    if model.noise is not None:
        summary["noise"] = {**model.noise.to_dict(), "calculus": config.dynamics.noise.calculus}
    elif model.kernel is not None:
        k = model.kernel
        summary["noise"] = {"d": int(k.d), "sampler": "exact Gaussian field at the tokens",
                            "kappa1": float(k.kappa1), "lambda_1": float(k.lambda_1),
                            "calculus": config.dynamics.noise.calculus}
    if resume is not None:
        _copy_into(file, resume)
        summary["restart"] = {"from": str(resume.source),
                              "outputs_before": {k: v + 1 for k, v in resume.index.items()}}
    t_start = time.perf_counter()
    status = "interrupted"  # until every representation has reached t_end
    bar = RunProgress(disable=None if progress else True)
    lanes: list[_RepLane] = []
    try:
        lanes = _lanes(model, file, resume, bar)
        run_lanes([rl.lane for rl in lanes if rl.lane is not None])
        status = "complete"
    except KeyboardInterrupt:
        summary["interrupted"] = True
        raise
    finally:
        bar.close()
        summary.update({rl.rep: rl.summary() for rl in lanes})
        file.close(status)
        summary["seconds"] = round(time.perf_counter() - t_start, 2)
        summary["config"] = cfg
        (outdir / "summary.json").write_text(json.dumps(jsonable(summary), indent=2))
    return summary


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


def _lanes(model: Model, file: RunFile, resume: _Resume | None, bar: RunProgress) -> list[_RepLane]:
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

    def lane(stepper, output, dt, first: int, state, t0: float, outs) -> Lane:
        return Controller(stepper, [output, bar.tracker()], dt=dt).start(
            state, (t0, times[-1]), output_times=outs)

    lanes, dens = [], None
    if model.density is not None:
        keep = "w2_particles_density" in config.outputs.diagnostics
        first, state = begin("density", model.density0)
        given = {} if resume is None or not keep else resume.snapshots
        dens = DensityOutput(file, model, keep=keep, start=first, snapshots=given)
        if first >= 2 and callable(getattr(model.density, "prime", None)):
            model.density.prime()  # caches as the uninterrupted run's first steps left them
        if first > 0 and dens.points:
            model.density.resume(resume.rng_state["density"])  # the steps to the next remap
        rl = _RepLane("density", None, dens, {"scheme": config.grid.scheme})
        if first <= last:
            rl.lane = lane(model.density, dens, model.dt, first, state, times[max(first - 1, 0)],
                           times[first:])

            def extra(state, dens=dens) -> dict:
                out = {"mass_error": float(dens.mass(state)) - 1.0,
                       "min_density": float(np.min(dens.field(state)))}
                if dens.points:
                    out.update(points=int(np.count_nonzero(state[:, 3])),
                               **model.density.restart_info())
                elif getattr(model.density.transport, "polar", "split") == "cap":
                    out["cap_fallbacks"] = model.density.transport.cap_fallbacks
                return out

            rl.extra = extra
        lanes.append(rl)
    if model.particles is not None:
        n_part = model.particles.grid.shape[0]
        weights = model.weights if model.weights is not None else np.full(n_part, 1.0 / n_part)
        first, state = begin("particles", model.x0)
        sampler = getattr(model.particles.system, "sampler", None)
        prng = None if sampler is None else sampler.rng  # the exact point noise draws from it
        if first > 0 and prng is not None:
            prng.bit_generator.state = resume.rng_state["particles"]
        parts = ParticleOutput(file, model, weights,
                               dens if dens is not None and dens.keep else None, start=first,
                               rng=prng)
        rl = _RepLane("particles", None, parts, {"n": n_part})
        if first <= last:
            rl.lane = lane(model.particles, parts, model.dt, first, state,
                           times[max(first - 1, 0)], times[first:])
        lanes.append(rl)
    if model.transformer is not None:
        ts, tc = model.transformer, config.representations.transformer
        tr = ts.transformer
        rngs = ts.rngs  # R generators (width m), restored from the file on a restart
        first, state = begin("transformer", model.z0)
        if first > 0 and rngs is not None:
            saved = resume.rng_state["transformer"]
            for g, st in zip(rngs, [saved] if tc.realisations is None else saved):
                g.bit_generator.state = st
        # output i holds the tokens reached at output anchor[i] (X_{⌊iL/K⌋}); the lane stops
        # at the distinct anchors from output first on, and writes each one's outputs
        anchor = transformer_anchors(last, tr.depth)
        stops = np.unique(anchor[first:])
        toks = ParticleOutput(file, model, np.full(tc.n, 1.0 / tc.n),
                              prefix="transformer_", variable="transformer_position",
                              rep="transformer", start=first,
                              rng=None if rngs is None else (rngs[0] if tc.realisations is None else rngs),
                              blocks=[[i for i in range(first, last + 1) if anchor[i] == a]
                                      for a in stops])
        rl = _RepLane("transformer", None, toks, {"n": tc.n, "realisations": tc.r,
                                                  "depth": tr.depth, "width": tr.width},
                      steps="layers")
        if first <= last:
            t0 = times[anchor[first - 1]] if first > 0 else times[0]
            rl.lane = lane(ts, toks, tr.dt, first, state, t0, times[stops])
        lanes.append(rl)
    return lanes


# ---- restart ----------------------------------------------------------------------------------
#: keys ``--set`` may change on ``--restart`` (anything else would make it another model)
RESTART_KEYS = ("stepping.t_end",)


def read_restart(path: str | os.PathLike) -> _Resume:
    """Read what a restart needs from a ``run.nc`` (ValueError naming the path when it is
    missing, not NetCDF, not a spherepde run, or written without restart state)."""
    import netCDF4

    from spherepde.experiments.output import RESTART_VARIABLES

    path = Path(path)
    if not path.exists():
        raise ValueError(f"--restart: no such file {str(path)!r}")
    if path.is_dir():
        raise ValueError(f"--restart: {str(path)!r} is a folder; give the run file, "
                         f"{str(path / 'run.nc')!r}")
    if not os.access(path, os.R_OK):
        raise ValueError(f"--restart: {str(path)!r} is not readable")
    try:
        ds = netCDF4.Dataset(path, "r")
    except OSError as err:
        raise ValueError(f"--restart: {str(path)!r} is not a NetCDF file ({err})") from None
    try:
        ds.set_auto_mask(False)
        attrs = ds.ncattrs()
        title = ds.getncattr("title") if "title" in attrs else None
        if "config_json" not in attrs or title != "spherepde run":
            raise ValueError(f"--restart: {str(path)!r} is not a spherepde run file (no title "
                             f"'spherepde run' and config_json; written by spherepde run)")
        if "restart_slot" not in ds.dimensions:
            raise ValueError(f"--restart: {str(path)!r} holds no restart state (written by an "
                             f"older spherepde); run it again")
        try:
            config = json.loads(ds.getncattr("config_json"))
        except json.JSONDecodeError as err:
            raise ValueError(f"--restart: {str(path)!r}: config_json is not JSON ({err})") from None
        times = np.array(ds["time"][:], dtype=float)
        index, state, rng_state, slots = {}, {}, {}, {}
        for rep, name in RESTART_VARIABLES.items():
            if name not in ds.variables:
                continue
            v = ds[name]
            k = int(v.getncattr("output_index"))
            data = np.array(v[...], dtype=float)
            slots[name] = (data, {a: v.getncattr(a) for a in v.ncattrs()
                                  if a == "output_index" or a.startswith("rng_state_")})
            index[rep] = k
            state[rep] = None if k < 0 else data[k % 2]
            key = f"rng_state_{k % 2}"
            rng_state[rep] = json.loads(v.getncattr(key)) if k >= 0 and key in v.ncattrs() else None
        rows = [name for name, v in ds.variables.items()
                if v.dimensions[:1] == ("time",) and name != "time"]
    finally:
        ds.close()
    return _Resume(path, config, times, index, state, rng_state, rows, slots)


def resume_snapshots(resume: _Resume, model: Model) -> dict:
    """The density fields the particles' ``w2_particles_density`` needs from the file (the
    outputs the density reached before the restart and the particles had not)."""
    kd, kp = resume.index.get("density", -1), resume.index.get("particles", -1)
    need = range(kp + 1, min(kd, model.times.size - 1) + 1)
    if not need:
        return {}
    name = "density_points" if model.config.grid.scheme == "lagrangian-remap" else "density"
    if name not in resume.rows:
        raise ValueError(f"outputs.diagnostics: 'w2_particles_density' of the particles from "
                         f"output {kp + 1} on needs the density fields of outputs {kp + 1}..{kd}, "
                         f"and {str(resume.source)!r} holds none (outputs.fields = false); "
                         f"run it again from the start")
    import netCDF4

    with netCDF4.Dataset(resume.source, "r") as src:
        src.set_auto_mask(False)
        return {i: np.array(src[name][i], dtype=float) for i in need}


def _copy_into(file: RunFile, resume: _Resume) -> None:
    """Copy the outputs (and the restart state) of the file being restarted into the new one,
    one output at a time."""
    import netCDF4

    ds = file.dataset
    k = ds.dimensions["time"].size
    with netCDF4.Dataset(resume.source, "r") as src:
        src.set_auto_mask(False)
        for name in resume.rows:
            if name in ds.variables:
                v, m = src[name], min(k, src.dimensions["time"].size)
                if v.ndim == 1:
                    ds[name][:m] = v[:m]
                else:
                    for i in range(m):
                        ds[name][i, ...] = v[i, ...]
    for name, (data, attrs) in resume.slots.items():
        if name in ds.variables:
            ds[name][...] = data
            ds[name].setncatts(attrs)
    ds.sync()


def _leaves(d, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_leaves(v, key))
        else:
            out[key] = v
    return out


def restart_config(resume: _Resume, overrides=()) -> RunConfig:
    """The configuration of the continued run: the stored one with ``overrides`` (only
    :data:`RESTART_KEYS`), the Brownian path's horizon frozen; ValueError naming the key."""
    from spherepde.experiments.config import apply_set

    old = resume.config
    raw = old
    for assignment in overrides:
        raw = apply_set(raw, assignment)
    a, b = _leaves(old), _leaves(raw)
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
    noise = old_cfg.dynamics.noise
    if noise is not None and old_cfg.grid.kind != "none":  # no Brownian path without a grid
        horizon = t_old if noise.horizon is None else noise.horizon
        if isinstance(new_t, (int, float)) and not isinstance(new_t, bool) and new_t > horizon:
            raise ValueError(
                f"stepping.t_end: {new_t:g} lies beyond the end {horizon:g} of this run's Brownian "
                f"path (dynamics.noise.horizon, default the first run's stepping.t_end): the "
                f"noise after it is not the one an uninterrupted run would see; for runs to be "
                f"extended set --set dynamics.noise.horizon=<the longest t_end> from the start")
        raw = json.loads(json.dumps(raw))
        raw["dynamics"]["noise"]["horizon"] = horizon
    if old_cfg.representations.transformer is not None and new_t != t_old:
        raise ValueError(f"stepping.t_end: a run with representations.transformer cannot be "
                         f"extended (its layers have Δt = t_end/depth = {t_old:g}/"
                         f"{old_cfg.representations.transformer.depth}); continue it to "
                         f"stepping.t_end = {t_old:g}")
    return RunConfig.from_dict(raw)


_MISSING = object()


def restart(path: str | os.PathLike, overrides=(), output: str | os.PathLike | None = None, *,
            progress: bool = True) -> dict:
    """Continue the run stored in ``path`` (a ``run.nc``) and write the whole run, earlier
    outputs copied and new ones computed, to ``output/run.nc`` (default: the folder of
    ``path`` with ``-restart`` appended; the original file is only read).

    Each representation continues from its last complete output, from the exact state kept
    in the file (:mod:`spherepde.experiments.output`), on the same Brownian path, step sizes
    and output times, so the new file equals the one an uninterrupted run writes, bit for bit
    (data and time coordinate).  ``overrides`` are ``--set`` assignments; only
    ``stepping.t_end`` may change (to at least the time reached), the Brownian path's horizon
    must cover it, and a run with a transformer keeps its t_end.
    """
    resume = read_restart(path)
    config = restart_config(resume, overrides)
    model = build(config)
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
    outdir = prepare_output(outdir)  # the first thing created, after every check
    return _execute(model, outdir, progress=progress, resume=resume)


__all__ = ["DensityOutput", "Model", "ParticleOutput", "ParticleStepper",
           "RESTART_KEYS", "TransformerStepper", "build", "prepare_output", "read_restart",
           "restart", "restart_config", "run", "run_model", "series_names"]
