"""The numerical sections: the representations (density, particles, transformer), the
stepping and the outputs."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from spherepde.runs.config.values import (DIAGNOSTICS, LIMITERS, MAX_MOMENT_DEGREE, MAX_NLAT,
                                          MAX_OUTPUTS, MAX_PARTICLES, MAX_TOKENS_IN_ALL,
                                          MAX_TOKEN_REALISATIONS, PARTICLE_INITIAL, POLAR,
                                          PRECISIONS, SCHEMES, SCHEME_KEYS, _set, check_bool,
                                          check_choice, check_float, check_int, check_vector)
from spherepde.runs.config.section import _Section


@dataclass(frozen=True)
class ParticlesConfig(_Section):
    """The N-particle baseline, moved by the same attention and (where there is noise) the same
    Brownian path as the density.  ``initial``: ``"sample"`` (default) draws ``n`` tokens from
    ρ_0 with ``seed``, each of weight 1/n; ``"quadrature"`` (grid.kind = "sphere") starts from
    the quadrature of ρ_0 instead: every cell centre y_j of the grid with the weight
    ρ_0(y_j)|cell_j| (cells of weight ≤ 1e-13·max left out, the rest normalised to Σ w = 1;
    :func:`~spherepde.solvers.lagrangian.remap.points_from_density`), so there is no Monte
    Carlo error — ``n`` and ``seed`` are not used then (kept at their defaults), the weights
    are written to run.nc (``weight(particle)``) and the attention sees them.
    ``per_realisation = true`` (with ``"sample"`` and noise) draws the tokens anew for every
    realisation of the noise: the generator is seeded by (``seed``,
    ``dynamics.noise.realisation``), so that an ensemble (a sweep over the realisation) averages
    over the initial tokens too."""

    PATH: ClassVar[str] = "representations.particles"

    n: int = 1000
    seed: int = 0
    initial: str = "sample"
    per_realisation: bool = False

    def __post_init__(self) -> None:
        check_choice(f"{self.PATH}.initial", self.initial, PARTICLE_INITIAL)
        check_int(f"{self.PATH}.n", self.n, 1, MAX_PARTICLES)
        check_int(f"{self.PATH}.seed", self.seed, 0)
        check_bool(f"{self.PATH}.per_realisation", self.per_realisation)
        if self.initial == "quadrature":
            if self.per_realisation:
                raise ValueError(f"{self.PATH}.per_realisation: only with initial = 'sample' (the "
                                 f"quadrature of ρ_0 draws nothing)")
            for key in ("n", "seed"):
                _set(self, key, self.__dataclass_fields__[key].default)

    def _kept(self) -> list[str]:
        if self.initial == "quadrature":
            return ["initial"]
        return ["n", "seed"] + (["per_realisation"] if self.per_realisation else [])


@dataclass(frozen=True)
class TransformerConfig(_Section):
    """The discrete transformer of Paper 2: ``n`` tokens drawn from ρ_0 with ``seed``, ``depth``
    L layers over [0, t_end] (Δt = t_end/L), MLP ``width`` m (an int: layers drawn from
    ``seed``; ``inf``: the Gaussian m = ∞ layers built from the run's Brownian path, so the
    transformer is coupled path by path with the density and the particles; absent: attention
    only, no noise).  Activation, σ_U, σ_W come from ``dynamics.noise``.

    The output intervals (``stepping.output_every``) hold whole layers (L a multiple of their
    number K) or divide them (K a multiple of L): then output t holds X_{⌊Lt/T⌋}, the tokens
    after the last layer that ended by t (Thm 1.1's interpolation).

    ``realisations`` R (absent: one, stored without a realisation dimension): R independent
    transformers on the same tokens, state (R, N, d), stored as
    ``transformer_position(time, transformer_realisation, token, dim)``.  With noise
    realisation r (``dynamics.noise.realisation``, default 0), realisation k uses noise
    realisation j = r + k: for width m the layer generator ``SeedSequence(seed).spawn(j + 1)[j]``
    (layer after layer, as ``DiscreteTransformer.run``), for inf the Brownian path j of the
    noise seed.  So realisation 0 is the one-realisation run, coupled with the density and the
    particles, and a sweep over ``dynamics.noise.realisation`` in steps of R runs disjoint
    batches."""

    PATH: ClassVar[str] = "representations.transformer"
    REQUIRED: ClassVar[tuple] = ("depth",)

    depth: int = 100
    width: float | int | None = None
    n: int = 256
    seed: int = 0
    realisations: int | None = None

    def __post_init__(self) -> None:
        p = self.PATH
        check_int(f"{p}.depth", self.depth, 1, 100_000)
        if self.width is not None:
            w = self.width
            if isinstance(w, str) and w.strip().lower() == "inf" or (isinstance(w, float) and w == math.inf):
                _set(self, "width", math.inf)
            else:
                try:
                    check_int(f"{p}.width", w, 1, 100_000)
                except ValueError:
                    raise ValueError(f"{p}.width: must be an integer in 1..100000 or inf, got {w!r}") from None
        check_int(f"{p}.n", self.n, 1, MAX_PARTICLES)
        check_int(f"{p}.seed", self.seed, 0)
        if self.realisations is not None:
            check_int(f"{p}.realisations", self.realisations, 1, MAX_TOKEN_REALISATIONS)
            if self.realisations * self.n > MAX_TOKENS_IN_ALL:
                raise ValueError(f"{p}.realisations: realisations × n must be at most "
                                 f"{MAX_TOKENS_IN_ALL} tokens in all, got {self.realisations} × {self.n}")

    @property
    def r(self) -> int:
        """The number of realisations R (1 when ``realisations`` is absent)."""
        return 1 if self.realisations is None else self.realisations


@dataclass(frozen=True)
class DensityConfig(_Section):
    """The density representation (``representations.density = true`` for the defaults, a
    table to choose, ``false`` for none) and its numerics, by ``scheme``:

    * ``"ffsl-ppm"``: finite volumes on the grid, with its PPM ``limiter`` and, on the sphere,
      its treatment of the ``polar`` rings: ``"cap"`` (the positive unsplit polar cap of
      :mod:`spherepde.solvers.eulerian.polar_cap`, min(4, nlat/4) rings, its buffer sized to
      the noise increments with ``dynamics.noise``), ``"split"`` (the split step alone) or
      ``"auto"`` (default: the cap from nlat 8 on, the split below);
    * ``"lagrangian-remap"`` (sphere): weighted points moved by the particle ODE/SDE, remapped
      every ``remap_every`` steps onto a grid of ``remap_nlat`` (default ``grid.nlat``) rings
      whose pole sits on the mass and whose polar cells are stretched so ``cells_per_width`` of
      them span the rms width (:mod:`spherepde.solvers.lagrangian.remap`); the output field is
      the points' mass per cell of the ``grid.nlat`` Gauss grid;
    * ``"amr"`` (sphere or circle; attention, noise (Stratonovich) or both): adaptive finite volumes
      (:mod:`spherepde.solvers.eulerian.amr`) on a ``base_nlat`` (default ``grid.nlat``; on the
      circle ``grid.n``/2 and 2·base_nlat arcs) lon-lat grid refined ``max_level`` times where a
      cell holds more than ``mass_per_cell``·h² (h the finest cell width; h on the circle), at
      most ``max_cells`` leaves (default: the stepper's), its polar base rows merged in longitude
      by at most ``polar_merge`` (a power of 2; 1: none; default: the reduced grid's, up to
      nlon0/4), its lon-lat raster turned so that its north pole is ``pole`` (3 numbers, sphere
      without noise; default e_z); the output field is the conservative remap of the leaves onto
      the grid (with ``pole``: 4 × 4 sub-points per leaf deposited in the grid's cells), the
      leaves themselves are kept as ``density_leaves``.

    A key of the other scheme is ignored (and kept at its default), so that a sweep can switch
    ``representations.density.scheme``."""

    PATH: ClassVar[str] = "representations.density"

    scheme: str = "ffsl-ppm"
    limiter: str = "positive"
    polar: str = "auto"
    remap_every: int = 25
    cells_per_width: float = 8.0
    remap_nlat: int | None = None
    base_nlat: int | None = None
    max_level: int = 3
    mass_per_cell: float = 3.3
    max_cells: int | None = None
    polar_merge: int | None = None
    pole: tuple | None = None

    def __post_init__(self) -> None:
        p = self.PATH
        check_choice(f"{p}.scheme", self.scheme, SCHEMES)
        check_choice(f"{p}.limiter", self.limiter, LIMITERS)
        check_choice(f"{p}.polar", self.polar, POLAR)
        check_int(f"{p}.remap_every", self.remap_every, 1, 1_000_000)
        _set(self, "cells_per_width", check_float(f"{p}.cells_per_width", self.cells_per_width,
                                                  lo=0.5, hi=1000.0))
        if self.remap_nlat is not None:
            check_int(f"{p}.remap_nlat", self.remap_nlat, 4, MAX_NLAT)
        if self.base_nlat is not None:
            check_int(f"{p}.base_nlat", self.base_nlat, 4, MAX_NLAT)
            if self.base_nlat % 2:
                raise ValueError(f"{p}.base_nlat: must be an even integer in 4..{MAX_NLAT}, got "
                                 f"{self.base_nlat}")
        check_int(f"{p}.max_level", self.max_level, 0, 16)
        _set(self, "mass_per_cell", check_float(f"{p}.mass_per_cell", self.mass_per_cell,
                                                lo=1e-6, hi=1e6))
        if self.max_cells is not None:
            check_int(f"{p}.max_cells", self.max_cells, 32, 10_000_000)
        if self.polar_merge is not None:
            check_int(f"{p}.polar_merge", self.polar_merge, 1, 1024)
            if self.polar_merge & (self.polar_merge - 1):
                raise ValueError(f"{p}.polar_merge: must be a power of 2 (1 = no merging), got "
                                 f"{self.polar_merge}")
        if self.pole is not None:
            pole = check_vector(f"{p}.pole", self.pole, 3)
            if not any(pole):
                raise ValueError(f"{p}.pole: must be a non-zero direction, got {list(pole)}")
            _set(self, "pole", pole)
        for scheme, keys in SCHEME_KEYS.items():
            if scheme != self.scheme:
                for key in keys:
                    _set(self, key, self.__dataclass_fields__[key].default)

    def _kept(self) -> list[str]:
        other = [k for s, keys in SCHEME_KEYS.items() if s != self.scheme for k in keys]
        return [k for k in super()._kept() if k not in other]


@dataclass(frozen=True)
class RepresentationsConfig(_Section):
    """What is run side by side: the density (a table of its numerics, ``true`` for the
    defaults), particles (the limit ODE/SDE) and the discrete transformer, each optional
    (``false`` or absent: not run; the density is run unless it is ``false``)."""

    PATH: ClassVar[str] = "representations"
    SUBSECTIONS: ClassVar[dict] = {"density": DensityConfig, "particles": ParticlesConfig,
                                   "transformer": TransformerConfig}
    OPTIONAL: ClassVar[tuple] = ("density", "particles", "transformer")

    density: DensityConfig | None = field(default_factory=DensityConfig)
    particles: ParticlesConfig | None = None
    transformer: TransformerConfig | None = None

    def __post_init__(self) -> None:
        if self.density is not None and not isinstance(self.density, DensityConfig):
            raise ValueError(f"{self.PATH}.density: true, false or a table of its keys "
                             f"({DensityConfig.keys()}), got {self.density!r}")
        for key, cls in self.SUBSECTIONS.items():
            v = getattr(self, key)
            if v is not None and not isinstance(v, cls):
                raise ValueError(f"{self.PATH}.{key}: must be a table of keys, got {v!r}")
        if not self.density and self.particles is None and self.transformer is None:
            raise ValueError("representations: nothing to run; set representations.density = true "
                             "and/or give representations.particles or representations.transformer")

    def to_dict(self) -> dict:
        out = super().to_dict()
        if self.density is None:  # absent would mean the default density
            out = {"density": False, **out}
        return out


@dataclass(frozen=True)
class SteppingConfig(_Section):
    """Time stepping: ``t_end``; a fixed ``dt``, or ``courant`` (dt = courant·Δx/‖V‖₂, Δx the
    longitude spacing; noise-free runs only); ``output_every`` (must divide t_end; default
    t_end/10).  Density and particles take the same steps."""

    PATH: ClassVar[str] = "stepping"

    t_end: float = 10.0
    dt: float | None = None
    courant: float | None = None
    output_every: float | None = None

    def __post_init__(self) -> None:
        p = self.PATH
        _set(self, "t_end", check_float(f"{p}.t_end", self.t_end, lo=0.0, hi=1e6, lo_open=True))
        if self.dt is not None and self.courant is not None:
            raise ValueError(f"{p}.dt, {p}.courant: give one of them, not both")
        if self.dt is not None:
            _set(self, "dt", check_float(f"{p}.dt", self.dt, lo=0.0, hi=self.t_end, lo_open=True))
        else:
            c = 0.8 if self.courant is None else self.courant
            _set(self, "courant", check_float(f"{p}.courant", c, lo=0.0, hi=4.0, lo_open=True))
        every = self.t_end / 10 if self.output_every is None else self.output_every
        every = check_float(f"{p}.output_every", every, lo=0.0, hi=self.t_end, lo_open=True)
        n = round(self.t_end / every)
        if n > MAX_OUTPUTS or abs(n * every - self.t_end) > 1e-9 * self.t_end:
            raise ValueError(f"{p}.output_every: must divide stepping.t_end = {self.t_end:g} into at "
                             f"most {MAX_OUTPUTS} equal intervals, got {every:g}")
        _set(self, "output_every", every)

    @property
    def n_outputs(self) -> int:
        """Number of output intervals (outputs at 0, every, …, t_end)."""
        every = self.output_every
        assert every is not None  # resolved by __post_init__
        return round(self.t_end / every)


@dataclass(frozen=True)
class OutputsConfig(_Section):
    """What ``run.nc`` holds: density ``fields``, particle ``positions``, and the time series
    ``diagnostics`` (of each representation where it applies):

    * ``mass``, ``min_density``, ``max_density`` — of the density;
    * ``energy`` — e^{−β} E_β of Paper 2 (β = ``energy_beta``, default the attention's β when
      finite, else 1);
    * ``dist_eigenspace`` — (∫ |P_{E⊥}x|² dρ)^{1/2}, E the top eigenspace of A = VBᵀ
      (symmetric A only); ``dist_eigenspace_V`` — the same for V's eigenspace of largest
      |eigenvalue| (symmetric V; the terminal phase of Paper 1);
    * ``w2_projection`` — W₂(·, Π_#ρ_0) (chordal), Π_#ρ_0 = a δ_e + (1 − a) δ_{−e} the
      projection of the initial density onto A's top eigenvector e (Paper 1's metastable
      state; symmetric A with a one-dimensional top eigenspace);
    * ``w2_particles_density`` — W₂ (chordal) between the particles and the density;
    * ``moments`` — the harmonic moments ∫ conj(Y_lm) dρ, 0 ≤ m ≤ l ≤ ``moments_lmax`` (S²), or
      ∫ e^{−ikθ} dρ, 0 ≤ k ≤ ``moments_lmax`` (S¹), of each representation
      (variables ``moment_re``/``moment_im``(time, moment), coordinates ``moment_l``,
      ``moment_m``; default lmax 3).

    ``precision`` ("float64" or "float32") is the storage type of the density fields and the
    positions; the restart state stays float64 (``--restart`` gives the same bits either way).
    """

    PATH: ClassVar[str] = "outputs"

    fields: bool = True
    positions: bool = True
    diagnostics: tuple = ("mass", "min_density", "energy")
    energy_beta: float | None = None
    moments_lmax: int | None = None
    precision: str = "float64"

    def __post_init__(self) -> None:
        p = self.PATH
        check_bool(f"{p}.fields", self.fields)
        check_bool(f"{p}.positions", self.positions)
        if not isinstance(self.diagnostics, (list, tuple)):
            raise ValueError(f"{p}.diagnostics: must be a list of names from {list(DIAGNOSTICS)}, "
                             f"got {self.diagnostics!r}")
        for i, name in enumerate(self.diagnostics):
            check_choice(f"{p}.diagnostics[{i}]", name, DIAGNOSTICS)
        if len(set(self.diagnostics)) != len(self.diagnostics):
            raise ValueError(f"{p}.diagnostics: names must not repeat, got {list(self.diagnostics)}")
        _set(self, "diagnostics", tuple(self.diagnostics))
        if self.energy_beta is not None:
            _set(self, "energy_beta", check_float(f"{p}.energy_beta", self.energy_beta, lo=0.0,
                                                  hi=1e4, lo_open=True))
        if "moments" in self.diagnostics:
            _set(self, "moments_lmax", check_int(f"{p}.moments_lmax", 3 if self.moments_lmax is None
                                                 else self.moments_lmax, 0, MAX_MOMENT_DEGREE))
        elif self.moments_lmax is not None:
            raise ValueError(f"{p}.moments_lmax: only used with 'moments' in {p}.diagnostics")
        check_choice(f"{p}.precision", self.precision, PRECISIONS)


__all__ = ["DensityConfig", "OutputsConfig", "ParticlesConfig", "RepresentationsConfig",
           "SteppingConfig", "TransformerConfig"]
