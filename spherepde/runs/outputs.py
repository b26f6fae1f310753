"""The diagnostics of a run and the trackers that write them into run.nc at every output
time (:class:`DensityOutput` for the density, :class:`ParticleOutput` for particles and tokens)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from spherepde.io.runfile import RunFile
from spherepde.runs.build import (
    DensityRep,
    Energy,
    MeasureDiagnostic,
    Model,
    Moments,
    ParticleRep,
    ProjectionDistance,
    SubspaceDistance,
    TransformerRep,
)
from spherepde.solvers.trackers import Tracker
from spherepde.validation.metrics import (
    as_measure,
    dist_to_subspace,
    interaction_energy,
    moments,
    two_point_weight,
    w2_two_point,
    w2_with_bound,
)

# ---- diagnostics and the trackers that write run.nc -------------------------------------
SERIES_LONG_NAMES = {  # {what}: "the density", "the particles", "the transformer's tokens"
    "mass": "total mass of {what} (integral of rho)",
    "min_density": "minimum of {what} over the cells",
    "max_density": "maximum of {what} over the cells",
    "energy": "scaled interaction energy exp(-beta) E_beta of {what}",
    "dist_eigenspace": "(int |P_perp x|^2 drho)^(1/2), distance of {what} to the top eigenspace of "
                       "A = V B^T",
    "dist_eigenspace_V": "distance of {what} to the eigenspace of V of largest |eigenvalue|",
    "w2_projection": "W2 distance (chordal) of {what} to the projection of its own initial measure "
                     "a delta_e + (1 - a) delta_-e (Paper 1)",
    "w2_projection_rho0": "W2 distance (chordal) of {what} to the projection of the density's "
                          "initial measure a delta_e + (1 - a) delta_-e, a from rho_0's formula (else "
                          "from rho_0 on the grid)",
    "w2_particles_density": "W2 distance (chordal cost) between the particles and the density",
    "moment_re": "real part of the harmonic moments int conj(Y_lm) d rho (S2) or "
                 "int exp(-i k theta) d rho (S1) of {what}",
    "moment_im": "imaginary part of the harmonic moments of {what}",
}
#: the (time, moment) variables of the diagnostic "moments" (the others are (time,))
MOMENT_SERIES = ("moment_re", "moment_im")
_WHAT = {"particles_": "the particles", "transformer_": "the transformer's tokens"}
#: a point representation's prefix of its diagnostics and the variable of its positions in run.nc
PREFIX = {"particles": "particles_", "transformer": "transformer_"}
POSITIONS = {"particles": "position", "transformer": "transformer_position"}
Points = ParticleRep | TransformerRep
Measure = Callable[[np.ndarray, np.ndarray], float | np.ndarray]


def series_attrs(name: str, energy_beta: float = 1.0) -> dict:
    """CF attributes of the (time,) variable ``name`` (e.g. ``particles_energy``); the energy's
    carry its β (``energy_beta``) in the long_name and as the attribute ``beta``."""
    what, base = "the density", name
    for prefix, text in _WHAT.items():
        if name.startswith(prefix) and name[len(prefix):] in SERIES_LONG_NAMES:
            what, base = text, name[len(prefix):]
    attrs: dict[str, object] = {"units": "1", "long_name": SERIES_LONG_NAMES[base].format(what=what)}
    if base == "energy":
        attrs["long_name"] = f"{attrs['long_name']}, beta = {energy_beta:g}"
        attrs["beta"] = float(energy_beta)
    if base in MOMENT_SERIES:
        attrs["dims"] = ("moment",)
    return attrs


def particle_weights(model: Model, n: int) -> np.ndarray:
    """The weights of the model's n particles: its own (quadrature) or 1/n each."""
    rep = model.particle_rep
    return rep.weights if rep is not None and rep.weights is not None else np.full(n, 1.0 / n)


def _own_initial(model: Model, rep: Points) -> tuple[np.ndarray, np.ndarray]:
    """The initial measure (x, w) of ``rep``: the particles' draw (or quadrature) with their
    weights, the transformer's tokens (the first realisation's: all realisations start from
    the same tokens) with 1/n each."""
    if isinstance(rep, ParticleRep):
        return rep.x0, particle_weights(model, rep.x0.shape[0])
    z = rep.z0[0] if rep.z0.ndim == 3 else rep.z0
    return z, np.full(z.shape[0], 1.0 / z.shape[0])


def _measure(m: MeasureDiagnostic) -> Measure:
    """f(x, w) of the measure diagnostic ``m`` (``w2_projection``: to the density's Π_#ρ_0)."""
    if isinstance(m, Moments):
        return lambda x, w: moments(x, w, m.lmax)
    if isinstance(m, Energy):
        return lambda x, w: interaction_energy(x, w, m.beta)
    if isinstance(m, SubspaceDistance):
        return lambda x, w: dist_to_subspace(x, w, m.basis)
    return lambda x, w: w2_two_point(x, w, m.e, m.a)


def measure_diagnostics(model: Model, rep: Points | None = None) -> dict[str, Measure]:
    """name -> f(x, w) for the measure diagnostics of the model (``model.measures``: energy,
    dist_eigenspace, …) of the density (``rep`` None) or of the point representation ``rep``
    (names prefixed by :data:`PREFIX`); ``moments`` (key ``PREFIXmoments``) returns the complex
    moments (moment,), which :func:`evaluate` writes as the two variables :data:`MOMENT_SERIES`.

    ``w2_projection`` compares like with like: each representation's distance to the projection
    Π_#μ_0 of its own initial measure μ_0 (the density's ρ_0: a from its formula where it has one,
    :func:`~spherepde.runs.build.initial_two_point_weight`; the particles' draw,
    the transformer's tokens), so that it tends to 0 in the metastable state whatever the
    sampling; particles and tokens also get ``w2_projection_rho0``, the distance to the
    density's Π_#ρ_0 (whose weight a differs from theirs by the sampling error of a)."""
    prefix = "" if rep is None else PREFIX[rep.name]
    out: dict[str, Measure] = {}
    for m in model.measures:
        if isinstance(m, ProjectionDistance) and rep is not None:
            own = ProjectionDistance(m.e, two_point_weight(*_own_initial(model, rep), m.e))
            out[prefix + m.name] = _measure(own)
            out[prefix + "w2_projection_rho0"] = _measure(m)
        else:
            out[prefix + m.name] = _measure(m)
    return out


def _variables(key: str) -> list[str]:
    """The run.nc variables of the measure diagnostic ``key`` (``PREFIXmoments``: two)."""
    if key.endswith("moments"):
        return [key[:-len("moments")] + m for m in MOMENT_SERIES]
    return [key]


def series_names(model: Model) -> list[str]:
    """The diagnostic variables of run.nc for this model, in order ((time,), moments (time, moment))."""
    names, cfg = model.config.outputs.diagnostics, model.config

    def measures(rep: Points | None) -> list[str]:
        return [v for k in measure_diagnostics(model, rep) for v in _variables(k)]

    out = [k for k in ("mass", "min_density", "max_density") if k in names]
    if cfg.representations.density:
        out += measures(None)
    if (pr := model.particle_rep) is not None:
        out += measures(pr)
        if "w2_particles_density" in names:
            out.append("w2_particles_density")
    if (tr := model.transformer_rep) is not None:
        out += measures(tr)
    return out


def evaluate(measures: dict, x, w) -> dict:
    """The diagnostics ``measures`` (name -> f(x, w)) of the measure (x, w) by variable: floats,
    and the real and imaginary parts (moment,) of the moments (computed once)."""
    out: dict[str, float | np.ndarray] = {}
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

    def __init__(self, file: RunFile, model: Model, rep: DensityRep, *, keep: bool = False,
                 start: int = 0, snapshots: dict | None = None) -> None:
        super().__init__()
        self.file, self.model, self.keep, self.start = file, model, keep, start
        grid, names, st = rep.grid, model.config.outputs.diagnostics, rep.stepper
        self.stepper = st
        # a field on the grid, or a native state (lagrangian-remap's weighted points, amr's
        # leaves) with its field on the grid, its measure and its own variable in run.nc
        self.points = hasattr(st, "native_variable")
        self.field = st.field if self.points else (lambda r: r)
        self.measure = st.measure if self.points else (
            lambda r: as_measure(grid, np.clip(r, 0.0, None)))
        self.mass = st.mass if self.points else grid.integrate
        self.scalars = {k: f for k, f in (("mass", self.mass),
                                          ("min_density", lambda r: np.min(self.field(r))),
                                          ("max_density", lambda r: np.max(self.field(r))))
                        if k in names}
        self.measures = measure_diagnostics(model)
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
            values.update(evaluate(self.measures, x, w))
        if self.fields:
            values["density"] = self.field(state)
            if self.points:
                values[str(self.stepper.native_variable)] = state  # the state behind the field
        self.file.write(self.i, **values)
        if self.keep:
            self.snapshots[self.i] = np.array(state, copy=True)
        self.file.save_state("density", self.i, state,
                             self.stepper.restart_info() if self.points else None)
        self.last = {k: v for k, v in values.items() if isinstance(v, float)}
        self.i += 1


class ParticleOutput(Tracker):
    """Write the positions (variable :data:`POSITIONS` of ``rep``) and diagnostics (names
    starting :data:`PREFIX` of ``rep``) of a weighted point set, the particles or the
    transformer's tokens, at every output time; W₂ against the kept density snapshots of a
    :class:`DensityOutput` when given.  A state (R, N, d) (the transformer's realisations) gets
    its diagnostics per realisation, (R,).  ``blocks``: the output indices each call writes
    (default: one, counting from ``start``); ``rng``: a generator or a list of them whose states
    are kept with the restart state."""

    name = "particle-output"

    def __init__(self, file: RunFile, model: Model, rep: Points, weights: np.ndarray,
                 density: DensityOutput | None = None, *, start: int = 0,
                 rng: np.random.Generator | list | None = None, blocks: list | None = None) -> None:
        super().__init__()
        self.file, self.model, self.w, self.density = file, model, weights, density
        self.rep, self.start, self.rng, self.blocks = rep.name, start, rng, blocks
        self.measures = measure_diagnostics(model, rep)
        self.positions = model.config.outputs.positions
        self.variable = POSITIONS[rep.name]
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
            per = [evaluate(self.measures, s, self.w) for s in state]
            values: dict[str, float | np.ndarray] = {k: np.array([v[k] for v in per], float) for k in per[0]}
        else:
            values = evaluate(self.measures, state, self.w)
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
