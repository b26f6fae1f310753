"""The whole tree, :class:`RunConfig`, and the rules that join its sections."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from spherepde.runs.config.values import GRIDLESS_INITIAL_KINDS, MAX_PARTICLES, _GRID_D
from spherepde.runs.config.section import _Section
from spherepde.runs.config.model import AttentionConfig, DynamicsConfig, GridConfig, InitialConfig
from spherepde.runs.config.numerics import OutputsConfig, RepresentationsConfig, SteppingConfig


@dataclass(frozen=True)
class RunConfig(_Section):
    """The whole run (module docstring); the cross-section rules are checked here."""

    PATH: ClassVar[str] = ""
    SUBSECTIONS: ClassVar[dict] = {"grid": GridConfig, "initial": InitialConfig,
                                   "dynamics": DynamicsConfig,
                                   "representations": RepresentationsConfig,
                                   "stepping": SteppingConfig, "outputs": OutputsConfig}
    REQUIRED: ClassVar[tuple] = ("dynamics",)

    grid: GridConfig = field(default_factory=GridConfig)
    initial: InitialConfig = field(default_factory=InitialConfig)
    dynamics: DynamicsConfig = field(default_factory=lambda: DynamicsConfig(attention=AttentionConfig()))
    representations: RepresentationsConfig = field(default_factory=RepresentationsConfig)
    stepping: SteppingConfig = field(default_factory=SteppingConfig)
    outputs: OutputsConfig = field(default_factory=OutputsConfig)

    def __post_init__(self) -> None:
        for key, cls in self.SUBSECTIONS.items():
            if not isinstance(getattr(self, key), cls):
                raise ValueError(f"{key}: must be a table of keys, got {getattr(self, key)!r}")
        d, kind = self.grid.d, self.grid.kind
        att, noise = self.dynamics.attention, self.dynamics.noise
        self.initial.check_dimension(d)
        if att is not None:
            att.check_dimension(d, kind)
        reps, step, out = self.representations, self.stepping, self.outputs
        if kind == "none":
            self._check_gridless()
        dens = reps.density
        if dens is not None and kind != "sphere":
            if dens.scheme == "lagrangian-remap" or (dens.scheme == "amr" and kind != "circle"):
                raise ValueError(f"representations.density.scheme: {dens.scheme!r} needs "
                                 f"grid.kind = 'sphere'{' or circle' if dens.scheme == 'amr' else ''}, "
                                 f"got {kind!r} (use 'ffsl-ppm')")
            if dens.polar != "auto":
                raise ValueError(f"representations.density.polar: the polar rings are on the "
                                 f"sphere, and grid.kind = {kind!r}; leave it out")
        if reps.particles is not None and reps.particles.initial == "quadrature":
            if kind != "sphere":
                raise ValueError(f"representations.particles.initial: 'quadrature' (the weighted "
                                 f"cell centres of ρ_0) needs grid.kind = 'sphere', got {kind!r}")
            if 2 * self.grid.nlat ** 2 > MAX_PARTICLES:
                raise ValueError(f"representations.particles.initial: 'quadrature' puts a particle "
                                 f"on each of the 2·nlat² cells, at most {MAX_PARTICLES}; got "
                                 f"grid.nlat = {self.grid.nlat}")
        ini = self.initial
        if ini.kind == "random-phase":
            if kind != "circle":
                raise ValueError(f"initial.kind: 'random-phase' is a density on the circle (grid.kind "
                                 f"= 'circle'), got grid.kind = {kind!r}")
            if ini.max_degree is not None and 2 * ini.max_degree > self.grid.n:  # set by __post_init__
                raise ValueError(f"initial.max_degree: at most grid.n/2 = {self.grid.n // 2} (the "
                                 f"modes must be resolved and sum to 0 on the grid), got {ini.max_degree}")
        if noise is not None:
            if noise.calculus == "ito" and reps.density:
                raise ValueError(
                    "dynamics.noise.calculus: 'ito' has no density scheme here (the density stepper "
                    "spde-ffsl integrates the Stratonovich SPDE); use 'stratonovich', or run "
                    "particles alone (representations.density = false, Euler–Maruyama)")
            if step.dt is None:
                raise ValueError("stepping.dt: required with dynamics.noise (a fixed step that "
                                 "does not depend on the path; stepping.courant is for noise-free runs)")
        if reps.particles is not None and reps.particles.per_realisation and noise is None:
            raise ValueError("representations.particles.per_realisation: needs dynamics.noise (the "
                             "tokens are drawn per realisation of the noise)")
        tr = reps.transformer
        if tr is not None:
            p = tr.PATH
            if tr.width is not None and noise is None:
                raise ValueError(f"{p}.width: an MLP needs dynamics.noise (its activation, sigma_u, "
                                 "sigma_w); without noise leave width out (attention only)")
            if tr.width is None and noise is not None:
                raise ValueError(f"{p}.width: required with dynamics.noise (an integer m, or inf for "
                                 "the Gaussian layers on the run's Brownian path)")
            if tr.depth % step.n_outputs and step.n_outputs % tr.depth:
                raise ValueError(f"{p}.depth: must be a multiple or a divisor of the number of "
                                 f"output intervals t_end/output_every = {step.n_outputs}, got "
                                 f"{tr.depth}")
        names = set(out.diagnostics)
        if "w2_particles_density" in names and not (reps.density and reps.particles is not None):
            raise ValueError("outputs.diagnostics: 'w2_particles_density' needs both "
                             "representations.density = true and representations.particles")
        for name in ("dist_eigenspace", "w2_projection"):
            if name in names and (att is None or not _symmetric(_A(att))):
                raise ValueError(f"outputs.diagnostics: {name!r} needs dynamics.attention "
                                 "with A = V Bᵀ (B = QᵀK) symmetric")
        if "dist_eigenspace_V" in names and (att is None or not _symmetric(_matrix(att.V))):
            raise ValueError("outputs.diagnostics: 'dist_eigenspace_V' needs dynamics.attention "
                             "with V symmetric")
        if "moments" in names:
            lmax, top = out.moments_lmax, (self.grid.nlat - 1 if kind == "sphere" else self.grid.n // 2)
            if kind == "none":
                raise ValueError(f"outputs.diagnostics: 'moments' are harmonic moments on S² or S¹ "
                                 f"(grid.kind 'sphere' or 'circle'), not on S^{d - 1}")
            if lmax is not None and lmax > top:  # set by OutputsConfig.__post_init__
                raise ValueError(f"outputs.moments_lmax: at most {top} on this grid (grid."
                                 f"{'nlat - 1' if kind == 'sphere' else 'n/2'}), got {lmax}")
        if noise is not None and noise.antithetic and kind == "none":
            raise ValueError("dynamics.noise.antithetic: needs a Brownian path (grid.kind 'sphere' "
                             "or 'circle'); the exact point noise of grid.kind = 'none' is drawn "
                             "step by step from its generator")
        if {"mass", "min_density", "max_density"} & names and not reps.density:
            raise ValueError("outputs.diagnostics: 'mass', 'min_density' and 'max_density' need "
                             "representations.density = true")

    def _check_gridless(self) -> None:
        """The rules of ``grid.kind = "none"`` (tokens on S^{d−1}, d ≥ 4, no grid)."""
        d, noise, reps = self.grid.d, self.dynamics.noise, self.representations
        if reps.density:
            raise ValueError(f"representations.density: a density needs a grid, and grid.kind = "
                             f"'none' (d = {d}) has none; set representations.density = false "
                             f"(particles and the transformer run without a grid) or use "
                             f"grid.kind = 'sphere' (d = 3) or 'circle' (d = 2)")
        if self.initial.kind not in GRIDLESS_INITIAL_KINDS:
            raise ValueError(f"initial.kind: {self.initial.kind!r} needs a grid; with grid.kind = "
                             f"'none' the tokens are sampled exactly from one of "
                             f"{list(GRIDLESS_INITIAL_KINDS)}")
        if noise is not None:
            if noise.n_max is not None:
                raise ValueError("dynamics.noise.n_max: not used with grid.kind = 'none' (the noise "
                                 "there is the exact Gaussian field at the tokens, not truncated)")
        tr = reps.transformer
        if tr is not None and tr.width is not None and math.isinf(tr.width):
            raise ValueError(f"{tr.PATH}.width: inf builds the layers from the Karhunen–Loève "
                             f"field on S² or S¹, which grid.kind = 'none' (d = {d}) has not; give "
                             f"an integer width m")
        if self.stepping.dt is None:
            raise ValueError("stepping.dt: required with grid.kind = 'none' (stepping.courant is "
                             "the Courant number of a grid)")
        if "w2_projection" in self.outputs.diagnostics:
            raise ValueError("outputs.diagnostics: 'w2_projection' needs ρ_0 on a grid (its "
                             "two-point weight), not available with grid.kind = 'none'")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunConfig":
        d = None
        if isinstance(data, Mapping) and isinstance(data.get("grid", {}), Mapping):
            try:
                d = GridConfig.from_dict(data.get("grid", {})).d
            except ValueError:
                pass  # reported below, with its key path
        token = _GRID_D.set(d)
        try:
            return super().from_dict(data)
        finally:
            _GRID_D.reset(token)

    # ---- derived values ------------------------------------------------------------------
    @property
    def d(self) -> int:
        return self.grid.d

    def energy_beta(self) -> float:
        """β of the energy diagnostic (outputs.energy_beta, else the attention's when finite, else 1)."""
        if self.outputs.energy_beta is not None:
            return self.outputs.energy_beta
        att = self.dynamics.attention
        return att.beta if att is not None and math.isfinite(att.beta) else 1.0

    def seeds(self) -> dict:
        """Every seed of the run, by what it seeds (None where that part is absent)."""
        noise, reps = self.dynamics.noise, self.representations
        return {"initial": self.initial.seed, "noise": None if noise is None else noise.seed,
                "particles": None if reps.particles is None else reps.particles.seed,
                "transformer": None if reps.transformer is None else reps.transformer.seed}


def _matrix(m):
    import numpy as np

    return np.asarray(m, float)


def _A(att: AttentionConfig):
    import numpy as np

    Q, K, V = (np.asarray(m, float) for m in (att.Q, att.K, att.V))
    return V @ (Q.T @ K).T


def _symmetric(A) -> bool:
    import numpy as np

    return bool(np.allclose(A, A.T, rtol=1e-10, atol=1e-12 * max(float(np.abs(A).max()), 1e-300)))


__all__ = ["RunConfig"]
