"""One model description: the configuration tree of a run (``spherepde run CONFIG.toml``).

A run is described by one :class:`RunConfig`, a tree of frozen dataclasses::

    grid             kind (sphere | circle | none), nlat (sphere) or n (circle); dimension (none:
                     tokens on S^{d−1}, d ≥ 4, particles/transformer only)
    initial          kind (uniform | cosine | vmf | low-mode | netcdf) and that kind's keys
    dynamics
      attention      Q, K, V (d×d; d = 3 on S², 2 on S¹), beta (> 0, inf allowed), kind, method
      noise          activation, sigma_u, sigma_w, n_max or variance_fraction, seed, calculus
    representations  density (true/false, or a table: scheme (ffsl-ppm | lagrangian-remap | amr)
                     and its keys: limiter, polar; remap_every, cells_per_width, remap_nlat;
                     base_nlat, max_level, mass_per_cell, max_cells);
                     particles (n, seed; or initial = "quadrature": the
                     weighted cell centres of ρ_0) on the same noise path;
                     transformer (depth L, width m or inf, n, seed, realisations)
    stepping         t_end, dt or courant, output_every
    outputs          fields, positions, diagnostics, energy_beta

Every section round-trips: ``RunConfig.from_dict(c.to_dict()) == c``; :func:`dumps_toml`
writes TOML that :mod:`tomllib` reads back, JSON via :func:`json.dumps` of ``to_dict()``.
Validation is complete at construction, before any file is created: every error is a
``ValueError`` naming the key path (``dynamics.attention.Q``), the allowed values, and for an
unknown key the closest valid key.  Optional sections (``dynamics.attention``,
``dynamics.noise``, ``representations.particles``) and optional values (``stepping.dt``,
``stepping.courant``, …) are absent, or switched off with ``false`` (handy with ``--set``).
"""
from __future__ import annotations

import contextvars
import difflib
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar

from spherepde import checks

GRID_KINDS = ("sphere", "circle", "none")
#: density schemes: the finite-volume Gauss-grid transport, and weighted points remapped onto a
#: grid adapted to the mass (sphere only; spherepde.solvers.lagrangian.remap), adaptive finite
#: volumes refined where the mass is (sphere only; spherepde.solvers.eulerian.amr)
SCHEMES = ("ffsl-ppm", "lagrangian-remap", "amr")
#: the keys only one scheme uses (ignored, and kept at their defaults, with the other)
SCHEME_KEYS = {"ffsl-ppm": ("limiter", "polar"),
               "lagrangian-remap": ("remap_every", "cells_per_width", "remap_nlat"),
               "amr": ("base_nlat", "max_level", "mass_per_cell", "max_cells")}
LIMITERS = ("positive", "monotone", "none")
POLAR = ("auto", "split", "cap")  # spherepde.solvers.eulerian.polar_cap.POLAR (checked by a test)
INITIAL_KINDS = ("uniform", "cosine", "vmf", "low-mode", "random-phase", "netcdf")
ATTENTION_KINDS = ("softmax", "usa")
ATTENTION_METHODS = ("auto", "spectral", "reference", "culled", "float32", "torch", "torch-float32")
ACTIVATIONS = ("gelu", "relu", "sigmoid", "silu", "tanh")
CALCULI = ("stratonovich", "ito")
DIAGNOSTICS = ("mass", "min_density", "max_density", "energy", "dist_eigenspace",
               "dist_eigenspace_V", "w2_projection", "w2_particles_density", "moments")
#: storage types of the fields and positions in run.nc (the restart state is always float64)
PRECISIONS = ("float64", "float32")
#: the grid's dimension d while a RunConfig is read (so that a wrong-sized matrix is blamed itself)
_GRID_D: contextvars.ContextVar = contextvars.ContextVar("grid_d", default=None)
#: limits that keep a configuration inside what this machine can hold
MAX_NLAT, MAX_CIRCLE_N, MAX_PARTICLES, MAX_NOISE_DEGREE, MAX_OUTPUTS = 512, 65536, 100_000, 128, 10_000
MAX_MOMENT_DEGREE = 64
#: the most realisations of the transformer in one run (representations.transformer.realisations)
MAX_TOKEN_REALISATIONS = 100_000
#: the most tokens of all the transformer's realisations together (its state, R·n·d floats)
MAX_TOKENS_IN_ALL = 1_000_000
#: the token dimension d of grid.kind = "none" (d = 2, 3 have grids: "circle", "sphere")
MIN_DIMENSION, MAX_DIMENSION = 4, 1024
#: initial kinds that can be sampled exactly on S^{d−1} without a grid (grid.kind = "none")
GRIDLESS_INITIAL_KINDS = ("uniform", "cosine", "vmf")
#: how the particles start: n samples of ρ_0, or its quadrature on the grid (weighted cell centres)
PARTICLE_INITIAL = ("sample", "quadrature")


# ---- checks of single values ---------------------------------------------------------------
def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_int(path: str, v, lo: int, hi: int | None = None) -> int:
    """An int (not a bool, not a float, not a numpy integer: no TOML value) in [lo, hi]: the
    shared :func:`spherepde.checks.check_int`, with the key path and the range in one message."""
    rng = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
    try:
        if not isinstance(v, int):
            raise ValueError(v)
        v = checks.check_int(path, v, lo)
    except ValueError:  # checks.ArgumentTypeError is one too
        raise ValueError(f"{path}: must be {rng}, got {v!r}") from None
    if hi is not None and v > hi:
        raise ValueError(f"{path}: must be {rng}, got {v}")
    return v


def check_float(path: str, v, *, lo: float = -math.inf, hi: float = math.inf,
                lo_open: bool = False, hi_open: bool = False, inf_ok: bool = False) -> float:
    """A real number in the interval (``lo_open``/``hi_open`` exclude the ends); ``inf_ok``
    admits +inf (also written "inf")."""
    if isinstance(v, str) and v.strip().lower() in ("inf", "+inf", "infinity") and inf_ok:
        v = math.inf
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"
    if math.isinf(hi):
        allowed = f"a number {'>' if lo_open else '>='} {lo:g}" + (" (inf allowed)" if inf_ok else ", finite")
    else:
        allowed = f"a number in {left}{lo:g}, {hi:g}{right}"
    if not _is_number(v) or math.isnan(v):
        raise ValueError(f"{path}: must be {allowed}, got {v!r}")
    v = float(v)
    if math.isinf(v) and not (inf_ok and v > 0):
        raise ValueError(f"{path}: must be {allowed}, got {v}")
    if math.isinf(v):
        return v
    if v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
        raise ValueError(f"{path}: must be {allowed}, got {v!r}")
    return v


def check_bool(path: str, v) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{path}: must be true or false, got {v!r}")
    return v


def check_choice(path: str, v, allowed) -> str:
    if not isinstance(v, str) or v not in allowed:
        hint = difflib.get_close_matches(str(v), list(allowed), n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ValueError(f"{path}: must be one of {list(allowed)}, got {v!r}{extra}")
    return v


def check_vector(path: str, v, n: int | None = None) -> tuple:
    """A finite list of numbers (of length n if given), as a tuple of floats."""
    if not isinstance(v, (list, tuple)) or not v or not all(_is_number(a) for a in v):
        raise ValueError(f"{path}: must be a non-empty list of numbers, got {v!r}")
    if n is not None and len(v) != n:
        raise ValueError(f"{path}: must have {n} entries, got {len(v)}")
    if not all(math.isfinite(a) for a in v):
        raise ValueError(f"{path}: must be finite (no NaN or inf), got {list(v)}")
    return tuple(float(a) for a in v)


def check_matrix(path: str, v, d: int | None = None) -> tuple:
    """A square d×d (any d ≥ 2 if None) finite matrix given as a list of rows."""
    if not isinstance(v, (list, tuple)) or not v or not all(isinstance(r, (list, tuple)) for r in v):
        raise ValueError(f"{path}: must be a square matrix given as a list of rows, got {v!r}")
    n = len(v)
    shape = (n, *{len(r) for r in v})
    if len(shape) != 2 or shape[1] != n or (d is not None and n != d) or n < 2:
        want = f"{d}×{d}" if d is not None else "square, at least 2×2"
        got = f"{n}×{shape[1]}" if len(shape) == 2 else f"{n} rows of lengths {sorted(shape[1:])}"
        raise ValueError(f"{path}: must be a {want} matrix, got {got}")
    rows = tuple(check_vector(f"{path}[{i}]", r, n) for i, r in enumerate(v))
    return rows


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _set(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)


# ---- the generic section -------------------------------------------------------------------
class _Section:
    """Mixin of every configuration section: ``from_dict`` (unknown keys refused with the closest
    valid one), ``to_dict`` (only the keys that apply, no None) and ``replace``.

    Class attributes: ``PATH`` (the section's key path), ``SUBSECTIONS`` (field → section
    class), ``OPTIONAL`` (subsections that may be absent or ``false``), ``REQUIRED`` (keys that
    must be given), ``KIND_KEYS`` (kind → the keys that kind uses, besides ``kind``).
    """

    PATH: ClassVar[str] = ""
    SUBSECTIONS: ClassVar[dict] = {}
    OPTIONAL: ClassVar[tuple] = ()
    REQUIRED: ClassVar[tuple] = ()
    KIND_KEYS: ClassVar[dict | None] = None
    KIND_REQUIRED: ClassVar[dict] = {}
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every section is a dataclass
    #: keys of earlier releases that are gone: key → why (refused with that reason)
    REMOVED: ClassVar[dict] = {}

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        path = cls.PATH
        if not isinstance(data, Mapping):
            raise ValueError(f"{path or 'configuration'}: must be a table (a dict of keys), "
                             f"got {data!r}")
        names = cls.keys()
        for key in data:
            if key in cls.REMOVED:
                raise ValueError(f"{_join(path, str(key))}: {cls.REMOVED[key]}")
            if key not in names:
                hint = difflib.get_close_matches(str(key), names, n=1, cutoff=0.5)
                extra = f"; did you mean {_join(path, hint[0])!r}?" if hint else ""
                raise ValueError(f"{_join(path, str(key))}: unknown key{extra} "
                                 f"(valid keys of {path or 'the configuration'}: {names})")
        required = list(cls.REQUIRED)
        if cls.KIND_KEYS is not None:
            kind = data.get("kind", cls.__dataclass_fields__["kind"].default)
            kind = check_choice(_join(path, "kind"), kind, tuple(cls.KIND_KEYS))
            allowed = {"kind", *cls.KIND_KEYS[kind]}
            for key in data:
                if key not in allowed:
                    raise ValueError(f"{_join(path, key)}: not used with {_join(path, 'kind')} = "
                                     f"{kind!r} (its keys: {sorted(allowed)})")
            required += list(cls.KIND_REQUIRED.get(kind, ()))
        kw: dict[str, Any] = {}
        for key, value in data.items():
            if key in cls.SUBSECTIONS:
                sub = cls.SUBSECTIONS[key]
                if value is False and key in cls.OPTIONAL:
                    kw[key] = None
                    continue
                if value is True and key in cls.OPTIONAL:
                    value = {}
                kw[key] = sub.from_dict(value)
            elif value is False and cls.__dataclass_fields__[key].default is None:
                continue  # an optional value switched off: as if absent
            else:
                kw[key] = value
        for key in required:  # after the given keys: a misspelt key is reported as such first
            if key not in data:
                raise ValueError(f"{_join(path, key)}: required, missing")
        return cls(**kw)

    def _kept(self) -> list[str]:
        if self.KIND_KEYS is None:
            return self.keys()
        return ["kind", *self.KIND_KEYS[getattr(self, "kind")]]  # a section with KIND_KEYS has a kind

    def to_dict(self) -> dict:
        """Plain nested dict (lists for vectors and matrices), only the keys that apply."""
        out = {}
        for key in self._kept():
            v = getattr(self, key)
            if v is None:
                continue
            if isinstance(v, _Section):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = [list(r) if isinstance(r, tuple) else r for r in v]
            out[key] = v
        return out

    def replace(self, **changes):
        return replace(self, **changes)


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
    * ``"amr"`` (sphere or circle, no noise): adaptive finite volumes
      (:mod:`spherepde.solvers.eulerian.amr`) on a ``base_nlat`` (default ``grid.nlat``; on the
      circle ``grid.n``/2 and 2·base_nlat arcs) lon-lat grid refined ``max_level`` times where a
      cell holds more than ``mass_per_cell``·h² (h the finest cell width; h on the circle), at
      most ``max_cells`` leaves (default: the stepper's); the output field is the conservative
      remap of the leaves onto the grid, the leaves themselves are kept as ``density_leaves``.

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
        check_int(f"{p}.max_level", self.max_level, 0, 10)
        _set(self, "mass_per_cell", check_float(f"{p}.mass_per_cell", self.mass_per_cell,
                                                lo=1e-6, hi=1e6))
        if self.max_cells is not None:
            check_int(f"{p}.max_cells", self.max_cells, 32, 10_000_000)
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
        if dens is not None and dens.scheme == "amr" and (noise is not None or att is None):
            raise ValueError("representations.density.scheme: 'amr' integrates the attention "
                             "dynamics without noise (dynamics.attention given, no dynamics.noise); "
                             "use 'ffsl-ppm' for the SPDE")
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


# ---- files, --set and --seed ---------------------------------------------------------------
def read_raw(path: str | Path) -> dict:
    """The raw configuration dict of a ``.toml`` or ``.json`` file (not validated)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config: no such file {str(path)!r}")
    try:
        if path.suffix == ".toml":
            return tomllib.loads(path.read_text())
        if path.suffix == ".json":
            return json.loads(path.read_text())
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"config: {str(path)!r} is not valid {path.suffix[1:].upper()}: {err}") from None
    raise ValueError(f"config: file must end in .toml or .json, got {path.name!r}")


def load(path: str | Path) -> RunConfig:
    """Read and validate a configuration file."""
    return RunConfig.from_dict(read_raw(path))


def parse_value(text: str):
    """A ``--set`` value as a TOML literal (``30``, ``inf``, ``[[1, 0], [0, 1]]``, ``"relu"``,
    ``true``); anything that is not a literal is taken as a bare string (``relu``)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def assign(raw: dict, key: str, value, *, label: str = "--set") -> dict:
    """A deep copy of the raw configuration ``raw`` with the dotted ``key`` set to ``value``;
    missing tables (and sections switched off with true/false) are created.  Errors start with
    ``label`` (the option or table the key came from)."""
    parts = key.strip().split(".")
    if not all(p.strip() for p in parts):
        raise ValueError(f"{label}: bad key path {key!r}")
    out = json.loads(json.dumps(raw))  # a deep copy of plain data
    node = out
    for i, p in enumerate(parts[:-1]):
        nxt = node.get(p)
        if nxt is None or nxt is False or nxt is True:
            nxt = node[p] = {}
        if not isinstance(nxt, dict):
            raise ValueError(f"{label} {key}: {'.'.join(parts[:i + 1])} is a value, not a table")
        node = nxt
    node[parts[-1]] = value
    return out


def apply_set(raw: dict, assignment: str) -> dict:
    """Apply one ``key.path=value`` to a raw configuration dict (returns a new dict)."""
    if "=" not in assignment:
        raise ValueError(f"--set: expected KEY.PATH=VALUE, got {assignment!r}")
    key, text = assignment.split("=", 1)
    return assign(raw, key, parse_value(text.strip()))


def apply_seed(raw: dict, seed: int) -> dict:
    """Set every seed of a raw configuration (noise path, particle draw, low-mode and random-phase
    initial density)
    to ``seed``; sections that are absent stay absent."""
    check_int("--seed", seed, 0)
    out = json.loads(json.dumps(raw))
    dyn = out.get("dynamics")
    if isinstance(dyn, dict) and isinstance(dyn.get("noise"), dict):
        dyn["noise"]["seed"] = seed
    reps = out.get("representations")
    for key in ("particles", "transformer"):
        if isinstance(reps, dict) and isinstance(reps.get(key), dict):
            reps[key]["seed"] = seed
    init = out.get("initial")
    if isinstance(init, dict) and init.get("kind") in ("low-mode", "random-phase"):
        init["seed"] = seed
    return out


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(a) for a in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps_toml(data: Mapping[str, Any]) -> str:
    """A nested dict of TOML-representable values (no None) as TOML text: scalars first, then
    one ``[a.b]`` table per nested dict."""
    lines: list[str] = []

    def emit(table: Mapping[str, Any], prefix: tuple[str, ...]) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
        subs = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
        if prefix and (scalars or not subs):
            lines.append(f"\n[{'.'.join(prefix)}]")
        for k, v in scalars:
            lines.append(f"{k} = {_toml_value(v)}")
        for k, v in subs:
            emit(v, (*prefix, k))

    emit(data, ())
    return "\n".join(lines).lstrip("\n") + "\n"


#: the embedded default: Paper 1's metastability set-up (Q = I, K = diag(0.1, 1, 1),
#: V = diag(1, 0.5, 0.1), β = 30) on S², density beside 500 particles, about a minute here
DEFAULT = {
    "grid": {"kind": "sphere", "nlat": 24},
    "initial": {"kind": "cosine", "direction": [0.6, 0.5, 0.3], "amplitude": 0.5},
    "dynamics": {"attention": {"Q": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                               "K": [[0.1, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                               "V": [[1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.1]],
                               "beta": 30.0}},
    "representations": {"density": True, "particles": {"n": 500, "seed": 0}},
    "stepping": {"t_end": 16.0, "courant": 0.8, "output_every": 0.5},
    "outputs": {"diagnostics": ["mass", "min_density", "energy", "dist_eigenspace",
                                "w2_projection", "w2_particles_density"]},
}


def default_config() -> RunConfig:
    """The embedded default configuration (:data:`DEFAULT`)."""
    return RunConfig.from_dict(DEFAULT)


__all__ = ["AttentionConfig", "DEFAULT", "DynamicsConfig", "GridConfig", "InitialConfig",
           "NoiseConfig", "OutputsConfig", "ParticlesConfig", "RepresentationsConfig", "RunConfig",
           "SteppingConfig", "TransformerConfig", "apply_seed", "apply_set", "assign", "default_config", "dumps_toml",
           "load",
           "parse_value", "read_raw"]
