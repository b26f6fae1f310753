"""The objects of a run, built and checked from a RunConfig: :func:`build` → :class:`Model`.

:func:`build` turns the configuration into the objects of a run (grid, ρ_0, attention, noise
field and Brownian path, steppers, initial particles) — every error a ``ValueError`` naming the
key path, before any file exists.  :func:`spherepde.runs.execute.run` then drives the
representations in step through the output times with the same step sizes and, where there is
noise, the same :class:`~spherepde.noise.BrownianPath`, so that all see the same increments ΔW
over the same steps; each representation evaluates its own copy of the noise field.

The velocity and noise formulas are those of :mod:`spherepde.dynamics.attention`
(:class:`DensityAttention`, :class:`Attention`) and :mod:`spherepde.noise`; the steppers are
``meanfield-ffsl`` / ``spde-ffsl`` (density), :class:`ParticleODE` (RK4) /
:class:`ParticleSDE` (Heun: Stratonovich; Euler–Maruyama: Itô) for the particles, and
:class:`DiscreteTransformer` (:class:`TransformerStepper`, one layer per step of Δt = t_end/L, the
stepper of ``DiscreteTransformer.run``) for the transformer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, TypeVar

import numpy as np

from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.sampling import sample_density
from spherepde.noise import BrownianPath, NoiseField, NoiseKernel, get_activation
from spherepde.runs.config import NoiseConfig, RunConfig, TransformerConfig
from spherepde.runs.initial import density_function, initial_density, sample_initial
from spherepde.solvers import make_stepper
from spherepde.solvers.eulerian.amr import AMRDensity
from spherepde.solvers.eulerian.spde import SPDEFFSL
from spherepde.solvers.lagrangian import DiscreteTransformer, ParticleODE, ParticleSDE, retract
from spherepde.solvers.lagrangian.particles import ParticleStepper
from spherepde.solvers.lagrangian.remap import LagrangianRemap, RemapStepper, points_from_density
from spherepde.solvers.lagrangian.transformer_stepper import TransformerStepper
from spherepde.validation.metrics import (top_eigenspace, two_point_weight_cells,
                                          two_point_weight_function)

#: the stochastic calculus each stepper integrates (checked against dynamics.noise.calculus)
DENSITY_CALCULUS = {"stratonovich": "stratonovich", "ito-euler": "ito"}
PARTICLE_CALCULUS = {"heun": "stratonovich", "euler-maruyama": "ito"}




# ---- the objects of a run -----------------------------------------------------------------
@dataclass(frozen=True)
class DensityRep:
    """The density representation: its stepper (finite volumes, lagrangian-remap or amr) and
    the stepper's initial state (ρ_0 itself, or for ``lagrangian-remap`` its points packed as
    :class:`~spherepde.solvers.lagrangian.remap.RemapStepper` rows, for ``amr`` the leaf state
    of :class:`~spherepde.solvers.eulerian.amr.AMRDensity`)."""

    stepper: Any
    state0: np.ndarray
    grid: GaussGrid | CircleGrid
    name: ClassVar[str] = "density"


@dataclass(frozen=True)
class ParticleRep:
    """The particles: their stepper, initial positions (N, d) and weights (N,)
    (``representations.particles.initial = "quadrature"``; None for equal weights 1/N)."""

    stepper: ParticleStepper
    x0: np.ndarray
    weights: np.ndarray | None = None
    name: ClassVar[str] = "particles"


@dataclass(frozen=True)
class TransformerRep:
    """The discrete transformer: its stepper, tokens (N_T, d), or (R, N_T, d) with
    ``representations.transformer.realisations`` R (the same tokens in every realisation), and
    its configuration section."""

    stepper: TransformerStepper
    z0: np.ndarray
    config: TransformerConfig
    name: ClassVar[str] = "transformer"


Representation = DensityRep | ParticleRep | TransformerRep


# ---- what the measure diagnostics need ------------------------------------------------------
@dataclass(frozen=True)
class Moments:
    """``moments``: the harmonic moments up to degree ``lmax``."""

    lmax: int
    name: ClassVar[str] = "moments"


@dataclass(frozen=True)
class Energy:
    """``energy``: e^{−β} E_β at ``beta`` (outputs.energy_beta, else the attention's)."""

    beta: float
    name: ClassVar[str] = "energy"


@dataclass(frozen=True)
class SubspaceDistance:
    """``dist_eigenspace`` (top eigenspace of VBᵀ) or ``dist_eigenspace_V`` (of V): the
    distance to the span of ``basis`` (d, k)."""

    name: str
    basis: np.ndarray


@dataclass(frozen=True)
class ProjectionDistance:
    """``w2_projection``: W₂ to Π_#ρ_0 = a δ_e + (1 − a) δ_{−e}, e the top eigenvector of VBᵀ."""

    e: np.ndarray
    a: float
    name: ClassVar[str] = "w2_projection"


#: one measure diagnostic of ``outputs.diagnostics`` with what it needs (never None)
MeasureDiagnostic = Moments | Energy | SubspaceDistance | ProjectionDistance
#: the order of the measure diagnostics in run.nc
MEASURE_ORDER = ("moments", "energy", "dist_eigenspace", "dist_eigenspace_V", "w2_projection")


@dataclass
class Model:
    """Everything :func:`run` needs, built and checked by :func:`build`.

    grid : GaussGrid or CircleGrid (None for grid.kind = "none"); rho0 : grid.shape, mass 1
    (None without a grid); times : (k,) output times;
    dt : the fixed step; attention, noise, path : Attention / NoiseField / BrownianPath or None;
    representations : the enabled ones, in the order their lanes advance (density, particles,
    transformer), each a record with what it needs (:class:`DensityRep`, :class:`ParticleRep`,
    :class:`TransformerRep`); ``density_rep``, ``particle_rep``, ``transformer_rep`` return one
    or None, and ``density``, ``particles``, ``transformer`` its stepper;
    measures : the measure diagnostics of ``outputs.diagnostics``, in the order of run.nc, each
    with what it needs (:data:`MeasureDiagnostic`: the eigenspaces of VBᵀ and V, Π_#ρ_0);
    kernel : the NoiseKernel of the exact point noise (grid.kind = "none"), else None.
    """

    config: RunConfig
    grid: GaussGrid | CircleGrid | None
    rho0: np.ndarray | None
    times: np.ndarray
    dt: float
    attention: Attention | None
    noise: NoiseField | None
    path: BrownianPath | None
    representations: tuple[Representation, ...]
    measures: tuple[MeasureDiagnostic, ...] = ()
    kernel: NoiseKernel | None = None

    @property
    def noise_field(self) -> NoiseField:
        """``noise``, for a run that has one (dynamics.noise on a grid); ValueError otherwise."""
        if self.noise is None:
            raise ValueError("this run has no noise field (dynamics.noise with a grid)")
        return self.noise

    @property
    def density_rep(self) -> DensityRep | None:
        return next((r for r in self.representations if isinstance(r, DensityRep)), None)

    @property
    def particle_rep(self) -> ParticleRep | None:
        return next((r for r in self.representations if isinstance(r, ParticleRep)), None)

    @property
    def transformer_rep(self) -> TransformerRep | None:
        return next((r for r in self.representations if isinstance(r, TransformerRep)), None)

    @property
    def density(self) -> Any:
        """The density stepper, or None."""
        rep = self.density_rep
        return None if rep is None else rep.stepper

    @property
    def particles(self) -> ParticleStepper | None:
        rep = self.particle_rep
        return None if rep is None else rep.stepper

    @property
    def transformer(self) -> TransformerStepper | None:
        rep = self.transformer_rep
        return None if rep is None else rep.stepper


def _representations(density: DensityRep | None, particles: ParticleRep | None,
                     transformer: TransformerRep | None) -> tuple[Representation, ...]:
    """The enabled representations, in the order their lanes advance."""
    return tuple(r for r in (density, particles, transformer) if r is not None)


class _MLPOptions(TypedDict, total=False):
    """The transformer's MLP options taken from dynamics.noise (none without noise)."""

    activation: str
    sigma_u: float
    sigma_w: float


def _mlp_options(n: NoiseConfig | None) -> _MLPOptions:
    return {} if n is None else {"activation": n.activation, "sigma_u": n.sigma_u, "sigma_w": n.sigma_w}


_Resolved = TypeVar("_Resolved", int, float)


def _resolved(value: _Resolved | None, key: str) -> _Resolved:
    """A value that the configuration resolves (SteppingConfig: output_every, courant, dt where
    required; OutputsConfig: moments_lmax with 'moments')."""
    assert value is not None, f"{key} is resolved by the configuration"
    return value


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
    every = _resolved(st.output_every, "stepping.output_every")
    times = every * np.arange(st.n_outputs + 1, dtype=float)
    if st.dt is not None:
        dt = st.dt
    else:  # |X| ≤ ‖V‖₂: the Courant number of the attention velocity stays ≤ courant
        dx = grid.dlon if isinstance(grid, GaussGrid) else grid.dtheta
        assert att is not None, "stepping.courant needs dynamics.attention"
        vnorm = float(np.linalg.norm(att.V, 2))
        dt = min(_resolved(st.courant, "stepping.courant") * dx / vnorm, every) if vnorm > 0 else every
    noise = path = None
    n = config.dynamics.noise
    if n is not None:
        try:
            kernel = NoiseKernel(get_activation(n.activation), d=config.d, sigma_u=n.sigma_u,
                                 sigma_w=n.sigma_w)
            noise = (NoiseField(kernel, nmax=n.n_max) if n.n_max is not None
                     else NoiseField(kernel, variance_fraction=n.variance_fraction))
        except (ValueError, TypeError) as err:
            raise _named("dynamics.noise", err) from None
        # each representation evaluates its own copy of the field: the evaluation cache
        # (NoiseField.prime) then sees the same points whatever the order of the steps
        nmax = noise.nmax
        # antithetic: realisations 2j and 2j + 1 are path j and −path j (NoiseConfig)
        r, flip = (n.realisation // 2, bool(n.realisation % 2)) if n.antithetic else (n.realisation, False)
        # a function of (seed, r, t) alone: the same noise for every t_end (and --restart)
        path = BrownianPath(noise.shape, seed=n.seed, realisation=r, antithetic=flip)
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

    density: Any = None
    density0 = None
    dc = config.representations.density  # the density's numerics (None: no density)
    if dc is not None and dc.scheme == "lagrangian-remap":
        x, w = points_from_density(grid, rho0)
        remap = LagrangianRemap(particle_system(w), grid_nlat=dc.remap_nlat or g.nlat,
                                cells_per_width=dc.cells_per_width, remap_every=dc.remap_every)
        density = RemapStepper(remap, grid, max(w.size, 2 * remap.grid_nlat ** 2))
        density0 = density.pack(x, w)
    elif dc is not None and dc.scheme == "amr":
        # RunConfig: "amr" needs dynamics.attention or dynamics.noise
        if n is not None and n.calculus != "stratonovich":
            raise ValueError(f"dynamics.noise.calculus: {n.calculus!r} but the density stepper amr-fv "
                             f"integrates the stratonovich form")
        density, density0 = _amr(dc, grid, att, "auto" if a is None else a.method, config.initial,
                                 rho0, noise=noise, path=path)
    elif dc is not None:
        try:
            drift = None if att is None or a is None else DensityAttention(att, grid, method=a.method)
        except (ValueError, ImportError) as err:
            raise _named("dynamics.attention.method", err) from None
        polar = {"polar": dc.polar} if g.kind == "sphere" else {}
        try:
            if noise is None:
                density = make_stepper("meanfield-ffsl", grid, drift, limiter=dc.limiter, **polar)
            else:
                density = SPDEFFSL(grid, drift, noise=noise, path=path, scheme="stratonovich",
                                   limiter=dc.limiter, dt=dt, **polar)
        except ValueError as err:
            raise _named("representations.density.polar" if "cap_" in str(err) or "polar=" in str(err)
                         else "representations.density.limiter",
                         err) from None
        if n is not None and noise is not None and DENSITY_CALCULUS[density.scheme] != n.calculus:
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
        tr = DiscreteTransformer(d=config.d, depth=tc.depth, T=st.t_end, width=tc.width,
                                 attention=att, **_mlp_options(n))
        transformer = _transformer_stepper(tr, tc, n, own_noise(), path)
        z0 = _token_state(tc, retract(sample_density(grid, rho0, tc.n, seed=tc.seed)))
    measures = _measures(config, att, grid, rho0)
    reps = _representations(
        None if density is None else DensityRep(density, rho0 if density0 is None else density0, grid),
        None if particles is None or x0 is None else ParticleRep(particles, x0, weights),
        None if transformer is None or z0 is None or tc is None else TransformerRep(transformer, z0, tc))
    return Model(config, grid, rho0, times, float(dt), att, noise, path, reps, measures)


def _amr(dc, grid: GaussGrid | CircleGrid, att: Attention | None, method: str, initial,
         rho0: np.ndarray, noise=None, path=None):
    """(AMRDensity, its initial state) for ``representations.density.scheme = "amr"``: ρ_0 by
    leaf integrals of its formula where it has one, else remapped from its grid cell averages;
    with the run's noise field and Brownian path when it has noise (Stratonovich; the drift
    None for noise only); ValueError naming the key."""
    names = {"nlat0": "base_nlat", "lmax": "max_level"}
    try:
        base = dc.base_nlat or (grid.nlat if isinstance(grid, GaussGrid) else max(2, grid.n // 2))
        st = AMRDensity(att, grid, nlat0=base, lmax=dc.max_level,
                        mass_per_cell=dc.mass_per_cell, max_cells=dc.max_cells,
                        polar_merge=dc.polar_merge, pole=dc.pole,
                        attention_method=method, noise=noise, path=path)
        f = density_function(initial, 3 if isinstance(grid, GaussGrid) else 2)
        return st, st.initial_state(rho0 if f is None else f)
    except (ValueError, RuntimeError) as err:
        msg = str(err)
        for old, new in names.items():
            msg = msg.replace(old, new)
        raise ValueError(f"representations.density: {msg}") from None


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
        paths = [path] + [BrownianPath(path.shape, seed=path.seed, realisation=j,
                                       antithetic=path.antithetic) for j in js[1:]]
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
    integrator = "heun" if n.calculus == "stratonovich" else "euler-maruyama"
    system = ParticleSDE(att, method=integrator, d=d, weights=weights, **noise_source)
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


def _measures(config: RunConfig, att, grid, rho0) -> tuple[MeasureDiagnostic, ...]:
    """The measure diagnostics of ``outputs.diagnostics`` with what they need (the eigenspaces of
    VBᵀ and V, (e, a) of Π_#ρ_0), in the order of run.nc."""
    names, out = config.outputs.diagnostics, config.outputs
    found: dict[str, MeasureDiagnostic] = {}
    if "moments" in names:
        found["moments"] = Moments(_resolved(out.moments_lmax, "outputs.moments_lmax"))
    if "energy" in names:
        found["energy"] = Energy(config.energy_beta())
    if {"dist_eigenspace", "w2_projection"} & set(names):
        basis = top_eigenspace(att.A).basis
        if "dist_eigenspace" in names:
            found["dist_eigenspace"] = SubspaceDistance("dist_eigenspace", basis)
        if "w2_projection" in names:
            if basis.shape[1] != 1:
                raise ValueError(f"outputs.diagnostics: 'w2_projection' needs a one-dimensional top "
                                 f"eigenspace of A = V Bᵀ, this one has dimension {basis.shape[1]}")
            e = basis[:, 0]
            found["w2_projection"] = ProjectionDistance(e, initial_two_point_weight(config, grid, rho0, e))
    if "dist_eigenspace_V" in names:
        found["dist_eigenspace_V"] = SubspaceDistance("dist_eigenspace_V",
                                                      top_eigenspace(att.V, by_magnitude=True).basis)
    return tuple(found[k] for k in MEASURE_ORDER if k in found)


def initial_two_point_weight(config: RunConfig, grid, rho0, e: np.ndarray) -> float:
    """a of Π_#ρ_0 = a δ_e + (1 − a) δ_{−e}: ρ_0's mass on the side ⟨x, e⟩ > 0, from its formula
    where ``initial`` has one (:func:`~spherepde.validation.metrics.two_point_weight_function`,
    what every density scheme starts from as h → 0; the grid's cell averages are O(h²) off, and
    late in a run, with the mass gathered at ±e, W₂ feels that like its square root), else from
    ρ_0 on the grid (cells split by area)."""
    f = density_function(config.initial, 3 if isinstance(grid, GaussGrid) else 2)
    return two_point_weight_cells(grid, rho0, e) if f is None else two_point_weight_function(f, e)


def _build_gridless(config: RunConfig) -> Model:
    """:func:`build` for ``grid.kind = "none"``: tokens on S^{d−1} sampled exactly
    (:func:`sample_initial`), the noise the exact Gaussian field at the tokens
    (``ParticleSDE(kernel=…)``, generator seeded by (noise seed, realisation)); no density."""
    d, st = config.d, config.stepping
    att = _attention(config)
    times = _resolved(st.output_every, "stepping.output_every") * np.arange(st.n_outputs + 1, dtype=float)
    n, kernel = config.dynamics.noise, None
    if n is not None:
        try:
            kernel = NoiseKernel(get_activation(n.activation), d=d, sigma_u=n.sigma_u, sigma_w=n.sigma_w)
        except (ValueError, TypeError) as err:
            raise _named("dynamics.noise", err) from None
    particles = x0 = None
    p = config.representations.particles
    if p is not None:
        system = (_particle_system(att, None, d) if kernel is None or n is None else
                  _particle_system(att, n, d, kernel=kernel, seed=[n.seed, n.realisation]))
        particles = ParticleStepper(system, p.n)
        x0 = sample_initial(config.initial, d, p.n, _particle_seed(p, n))
    transformer = z0 = None
    tc = config.representations.transformer
    if tc is not None:
        tr = DiscreteTransformer(d=d, depth=tc.depth, T=st.t_end, width=tc.width,
                                 attention=att, **_mlp_options(n))
        transformer = _transformer_stepper(tr, tc, n)
        z0 = _token_state(tc, sample_initial(config.initial, d, tc.n, tc.seed))
    measures = _measures(config, att, None, None)
    dt = _resolved(st.dt, "stepping.dt")  # required with grid.kind = "none"
    reps = _representations(
        None, None if particles is None or x0 is None else ParticleRep(particles, x0),
        None if transformer is None or z0 is None or tc is None else TransformerRep(transformer, z0, tc))
    return Model(config, None, None, times, float(dt), att, None, None, reps, measures, kernel=kernel)
