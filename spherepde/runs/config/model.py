"""The model's sections: the grid, the initial density and the dynamics (attention, noise)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from spherepde.runs.config.values import (ACTIVATIONS, ATTENTION_KINDS, ATTENTION_METHODS, CALCULI,
                                          GRID_KINDS, INITIAL_KINDS, MAX_CIRCLE_N, MAX_DIMENSION,
                                          MAX_NLAT, MAX_NOISE_DEGREE, MAX_OUTPUTS, MIN_DIMENSION,
                                          _GRID_D, _set, check_bool, check_choice, check_float,
                                          check_int, check_matrix, check_vector)
from spherepde.runs.config.section import _Section
from spherepde.runs.config.numerics import DensityConfig


# ---- sections ------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridConfig(_Section):
    """The grid: ``kind = "sphere"`` (Gauss–Legendre, ``nlat`` even latitudes, 2·nlat
    longitudes; d = 3), ``"circle"`` (``n`` uniform cells; d = 2) or ``"none"``: no grid,
    tokens on S^{d−1} ⊂ R^d with d = ``dimension`` (4..1024), for the representations that need
    none (particles, the discrete transformer); the density is refused there, ρ_0 is sampled
    exactly (uniform, cosine, vmf) and the noise is the exact Gaussian field at the tokens
    (:class:`~spherepde.solvers.lagrangian.sde.PointGaussianNoise`).  The density's numerics
    (scheme, limiter, polar rings, remap) are keys of ``representations.density``."""

    PATH: ClassVar[str] = "grid"
    KIND_KEYS: ClassVar[dict] = {"sphere": ("nlat",), "circle": ("n",), "none": ("dimension",)}
    KIND_REQUIRED: ClassVar[dict] = {"none": ("dimension",)}

    kind: str = "sphere"
    nlat: int = 24
    n: int = 128
    dimension: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        if isinstance(data, Mapping):
            for key in data:
                if key in DensityConfig.keys():
                    raise ValueError(f"grid.{key}: moved to representations.density.{key} (the "
                                     f"density's numerics are keys of its representation)")
        return super().from_dict(data)

    def __post_init__(self) -> None:
        p = self.PATH
        check_choice(f"{p}.kind", self.kind, GRID_KINDS)
        check_int(f"{p}.nlat", self.nlat, 4, MAX_NLAT)
        if self.nlat % 2:
            raise ValueError(f"{p}.nlat: must be an even integer in 4..{MAX_NLAT}, got {self.nlat}")
        check_int(f"{p}.n", self.n, 4, MAX_CIRCLE_N)
        if self.kind != "none":
            if self.dimension is not None:
                raise ValueError(f"{p}.dimension: not used with {p}.kind = {self.kind!r} (d = "
                                 f"{self.d} there); a token dimension d >= {MIN_DIMENSION} needs "
                                 f"{p}.kind = 'none'")
            return
        if self.dimension is None:
            raise ValueError(f"{p}.dimension: required with {p}.kind = 'none', missing")
        try:
            check_int(f"{p}.dimension", self.dimension, MIN_DIMENSION, MAX_DIMENSION)
        except ValueError as err:
            raise ValueError(f"{err} (d = 3 has grid.kind = 'sphere', d = 2 'circle'; with "
                             f"representations.density = false they run particles alone)") from None

    @property
    def d(self) -> int:
        """Ambient dimension: tokens on S^{d−1} ⊂ R^d."""
        d = {"sphere": 3, "circle": 2}.get(self.kind, self.dimension)
        assert d is not None  # grid.kind = "none" requires the dimension (__post_init__)
        return d


@dataclass(frozen=True)
class InitialConfig(_Section):
    """The initial density ρ_0 (normalised to mass 1 on the grid):

    * ``uniform``;
    * ``cosine``: ρ_0 ∝ 1 + amplitude·⟨x, â⟩, ``direction`` a (d), amplitude in [0, 1];
    * ``vmf``: Σ_k w_k vMF(x; c_k, κ_k), each component ∝ exp(κ_k ⟨x, ĉ_k⟩) normalised on the
      grid; ``centres`` (k × d), ``kappas`` (k, ≥ 0), ``weights`` (k, default equal);
    * ``low-mode``: ρ_0 ∝ 1 + amplitude·p(x), p a random combination (normal coefficients from
      ``seed``) of the real harmonics of degree 1..``max_degree`` (Fourier modes on S¹),
      scaled so that sup|p| ≤ 1; amplitude in [0, 1);
    * ``random-phase`` (S¹ only): ρ_0 = (1 + amplitude·p(θ))/2π, p = Σ_{k=1}^{max_degree}
      a_k cos(kθ + φ_k) with a_k ~ N(0, 1)/√max_degree and then φ_k ~ U[0, 2π) drawn from
      ``default_rng(seed)`` (the perturbation of ``spherepde experiment circle-clusters``);
      2·max_degree ≤ grid.n, so the modes sum to 0 on the grid and ρ_0 is not rescaled (mass 1
      up to round-off); amplitude ≥ 0 with ρ_0 > 0 (checked on the grid);
    * ``netcdf``: ``variable`` (default "density") of the file ``path`` at ``time_index``
      (default −1), on the run's grid.
    """

    PATH: ClassVar[str] = "initial"
    KIND_KEYS: ClassVar[dict] = {"uniform": (), "cosine": ("direction", "amplitude"),
                                 "vmf": ("centres", "kappas", "weights"),
                                 "low-mode": ("amplitude", "max_degree", "seed"),
                                 "random-phase": ("amplitude", "max_degree", "seed"),
                                 "netcdf": ("path", "variable", "time_index")}
    KIND_REQUIRED: ClassVar[dict] = {"cosine": ("direction",), "vmf": ("centres", "kappas"),
                                     "netcdf": ("path",)}

    kind: str = "uniform"
    direction: tuple | None = None
    amplitude: float | None = None
    centres: tuple | None = None
    kappas: tuple | None = None
    weights: tuple | None = None
    max_degree: int | None = None
    seed: int | None = None
    path: str | None = None
    variable: str | None = None
    time_index: int | None = None

    def __post_init__(self) -> None:
        p = self.PATH
        kind = check_choice(f"{p}.kind", self.kind, INITIAL_KINDS)
        for key in self.keys():
            if key != "kind" and key not in self.KIND_KEYS[kind] and getattr(self, key) is not None:
                raise ValueError(f"{p}.{key}: not used with {p}.kind = {kind!r}")
        for key in self.KIND_REQUIRED.get(kind, ()):
            if getattr(self, key) is None:
                raise ValueError(f"{p}.{key}: required with {p}.kind = {kind!r}, missing")
        if kind == "cosine":
            direction = check_vector(f"{p}.direction", self.direction)
            _set(self, "direction", direction)
            if not any(direction):
                raise ValueError(f"{p}.direction: must be a non-zero vector")
            amp = 0.5 if self.amplitude is None else self.amplitude
            _set(self, "amplitude", check_float(f"{p}.amplitude", amp, lo=0.0, hi=1.0))
        elif kind == "vmf":
            if not isinstance(self.centres, (list, tuple)) or not self.centres:
                raise ValueError(f"{p}.centres: must be a non-empty list of vectors, got {self.centres!r}")
            c = tuple(check_vector(f"{p}.centres[{i}]", v) for i, v in enumerate(self.centres))
            if len({len(v) for v in c}) != 1:
                raise ValueError(f"{p}.centres: all centres must have the same length")
            for i, v in enumerate(c):
                if not any(v):
                    raise ValueError(f"{p}.centres[{i}]: must be a non-zero vector")
            _set(self, "centres", c)
            k = check_vector(f"{p}.kappas", self.kappas, len(c))
            if any(a < 0 or a > 1e4 for a in k):
                raise ValueError(f"{p}.kappas: must be numbers in [0, 1e4], got {list(k)}")
            _set(self, "kappas", k)
            w = (1.0,) * len(c) if self.weights is None else check_vector(f"{p}.weights", self.weights, len(c))
            if any(a < 0 for a in w) or not sum(w) > 0:
                raise ValueError(f"{p}.weights: must be >= 0 with a positive sum, got {list(w)}")
            _set(self, "weights", w)
        elif kind == "low-mode":
            amp = 0.1 if self.amplitude is None else self.amplitude
            _set(self, "amplitude", check_float(f"{p}.amplitude", amp, lo=0.0, hi=1.0, hi_open=True))
            _set(self, "max_degree", check_int(f"{p}.max_degree", 4 if self.max_degree is None
                                               else self.max_degree, 1, 64))
            _set(self, "seed", check_int(f"{p}.seed", 0 if self.seed is None else self.seed, 0))
        elif kind == "random-phase":
            amp = 0.01 if self.amplitude is None else self.amplitude
            _set(self, "amplitude", check_float(f"{p}.amplitude", amp, lo=0.0))
            _set(self, "max_degree", check_int(f"{p}.max_degree", 4 if self.max_degree is None
                                               else self.max_degree, 1, MAX_CIRCLE_N // 2))
            _set(self, "seed", check_int(f"{p}.seed", 0 if self.seed is None else self.seed, 0))
        elif kind == "netcdf":
            if not isinstance(self.path, str) or not self.path:
                raise ValueError(f"{p}.path: must be a file name, got {self.path!r}")
            var = "density" if self.variable is None else self.variable
            if not isinstance(var, str) or not var.isidentifier():
                raise ValueError(f"{p}.variable: must be a variable name, got {var!r}")
            _set(self, "variable", var)
            _set(self, "time_index", -1 if self.time_index is None else
                 check_int(f"{p}.time_index", self.time_index, -MAX_OUTPUTS - 1, MAX_OUTPUTS))

    def check_dimension(self, d: int) -> None:
        """Vectors of this section must live in R^d."""
        p = self.PATH
        if self.kind == "cosine" and len(self.direction or ()) != d:  # set by __post_init__
            raise ValueError(f"{p}.direction: must have {d} entries (d = {d} for this grid), "
                             f"got {len(self.direction or ())}")
        if self.kind == "vmf" and self.centres is not None and len(self.centres[0]) != d:
            raise ValueError(f"{p}.centres: each centre must have {d} entries (d = {d} for this "
                             f"grid), got {len(self.centres[0])}")  # (vmf: centres set by __post_init__)


@dataclass(frozen=True)
class AttentionConfig(_Section):
    """One attention head: ``Q``, ``K``, ``V`` (d×d lists of rows, required), ``beta`` > 0 or
    inf (required), ``kind`` softmax | usa, ``method`` of the density's attention sums
    (:class:`~spherepde.dynamics.attention.DensityAttention`; particles use "auto")."""

    PATH: ClassVar[str] = "dynamics.attention"
    REQUIRED: ClassVar[tuple] = ("Q", "K", "V", "beta")

    Q: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    K: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    V: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    beta: float = 1.0
    kind: str = "softmax"
    method: str = "auto"

    def __post_init__(self) -> None:
        p = self.PATH
        d = _GRID_D.get()
        for key in ("Q", "K", "V"):
            try:
                _set(self, key, check_matrix(f"{p}.{key}", getattr(self, key), d))
            except ValueError as err:
                if d is None:
                    raise
                raise ValueError(f"{err} (d = {d} on this grid)") from None
            d = len(self.Q)
        _set(self, "beta", check_float(f"{p}.beta", self.beta, lo=0.0, lo_open=True, inf_ok=True))
        check_choice(f"{p}.kind", self.kind, ATTENTION_KINDS)
        check_choice(f"{p}.method", self.method, ATTENTION_METHODS)
        if math.isinf(self.beta) and self.kind != "softmax":
            raise ValueError(f"{p}.beta: inf is defined for {p}.kind = 'softmax' only")

    def check_dimension(self, d: int, grid_kind: str) -> None:
        if len(self.Q) != d:
            raise ValueError(f"{self.PATH}.Q: must be a {d}×{d} matrix on grid.kind = "
                             f"{grid_kind!r} (d = {d}), got {len(self.Q)}×{len(self.Q)}")


@dataclass(frozen=True)
class NoiseConfig(_Section):
    """The MLP noise of Paper 2 as a common transport noise: ``activation``, ``sigma_u``,
    ``sigma_w`` (≥ 0), the truncation ``n_max`` (degree) or ``variance_fraction`` (default
    0.99), the Brownian path's ``seed``, and the stochastic ``calculus`` the equation is written
    in ("stratonovich": density ``spde-ffsl`` and particles ``heun``; "ito": particles
    ``euler-maruyama`` only).  The Brownian path is a function of (seed, realisation, t) alone
    (:class:`~spherepde.noise.brownian.BrownianPath`): runs of any ``t_end`` with the same seed
    see the same noise on their common times, and ``--restart`` may extend any run.
    ``realisation`` r ≥ 0 (default 0) selects the independent path r of the seed — the path
    ``BrownianPath(shape, seed, realisation = r)`` that realisation r of ``spherepde ensemble``
    gets with the same seed — so a sweep over it is an ensemble.  On ``grid.kind = "none"``
    the noise is the exact Gaussian field at the tokens, drawn from the generator seeded by
    (seed, realisation); ``n_max`` and ``variance_fraction`` do not apply there.  (The key
    ``horizon`` of earlier releases, the end of a path that depended on it, is gone: giving it
    is an error that says so.)
    ``antithetic = true`` pairs the realisations: r = 2j and 2j + 1 are driven by path j and by
    −path j (every increment negated; equal in law, and odd powers of the noise cancel in pair
    means), the pairs of ``spherepde ensemble`` (grids only)."""

    PATH: ClassVar[str] = "dynamics.noise"
    REMOVED: ClassVar[dict] = {"horizon": (
        "no longer a key: the Brownian path is a function of (seed, realisation, t) alone, the "
        "same noise for every stepping.t_end, and --restart may extend any run; remove it")}

    activation: str = "relu"
    sigma_u: float = 0.0
    sigma_w: float = 0.0
    n_max: int | None = None
    variance_fraction: float | None = None
    seed: int = 0
    calculus: str = "stratonovich"
    realisation: int = 0
    antithetic: bool = False

    def __post_init__(self) -> None:
        p = self.PATH
        check_choice(f"{p}.activation", self.activation, ACTIVATIONS)
        for key in ("sigma_u", "sigma_w"):
            _set(self, key, check_float(f"{p}.{key}", getattr(self, key), lo=0.0, hi=10.0))
        if self.n_max is not None and self.variance_fraction is not None:
            raise ValueError(f"{p}.n_max, {p}.variance_fraction: give one of them, not both")
        if self.n_max is not None:
            check_int(f"{p}.n_max", self.n_max, 0, MAX_NOISE_DEGREE)
        else:
            f = 0.99 if self.variance_fraction is None else self.variance_fraction
            _set(self, "variance_fraction", check_float(f"{p}.variance_fraction", f, lo=0.0, hi=1.0,
                                                        lo_open=True, hi_open=True))
        check_int(f"{p}.seed", self.seed, 0)
        check_int(f"{p}.realisation", self.realisation, 0)
        check_bool(f"{p}.antithetic", self.antithetic)
        check_choice(f"{p}.calculus", self.calculus, CALCULI)


@dataclass(frozen=True)
class DynamicsConfig(_Section):
    """The velocity: attention drift and/or common noise (at least one)."""

    PATH: ClassVar[str] = "dynamics"
    SUBSECTIONS: ClassVar[dict] = {"attention": AttentionConfig, "noise": NoiseConfig}
    OPTIONAL: ClassVar[tuple] = ("attention", "noise")

    attention: AttentionConfig | None = None
    noise: NoiseConfig | None = None

    def __post_init__(self) -> None:
        for key, cls in self.SUBSECTIONS.items():
            v = getattr(self, key)
            if v is not None and not isinstance(v, cls):
                raise ValueError(f"dynamics.{key}: must be a table of keys, got {v!r}")
        if self.attention is None and self.noise is None:
            raise ValueError("dynamics: nothing moves; give dynamics.attention and/or dynamics.noise")


__all__ = ["AttentionConfig", "DynamicsConfig", "GridConfig", "InitialConfig", "NoiseConfig"]
