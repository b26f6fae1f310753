"""The allowed values and limits of the configuration tree, and the checks of single values
(each error names the key path, the allowed values and, for a choice, the closest one)."""
from __future__ import annotations

import contextvars
import difflib
import math

from spherepde import checks


GRID_KINDS = ("sphere", "circle", "none")
#: density schemes: the finite-volume Gauss-grid transport, and weighted points remapped onto a
#: grid adapted to the mass (sphere only; spherepde.solvers.lagrangian.remap), adaptive finite
#: volumes refined where the mass is (sphere only; spherepde.solvers.eulerian.amr)
SCHEMES = ("ffsl-ppm", "lagrangian-remap", "amr")
#: the keys only one scheme uses (ignored, and kept at their defaults, with the other)
SCHEME_KEYS = {"ffsl-ppm": ("limiter", "polar"),
               "lagrangian-remap": ("remap_every", "cells_per_width", "remap_nlat"),
               "amr": ("base_nlat", "max_level", "mass_per_cell", "max_cells", "polar_merge", "pole")}
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


__all__ = ["ACTIVATIONS", "ATTENTION_KINDS", "ATTENTION_METHODS", "CALCULI", "DIAGNOSTICS",
           "GRIDLESS_INITIAL_KINDS", "GRID_KINDS", "INITIAL_KINDS", "LIMITERS", "MAX_CIRCLE_N",
           "MAX_DIMENSION", "MAX_MOMENT_DEGREE", "MAX_NLAT", "MAX_NOISE_DEGREE", "MAX_OUTPUTS",
           "MAX_PARTICLES", "MAX_TOKENS_IN_ALL", "MAX_TOKEN_REALISATIONS", "MIN_DIMENSION",
           "PARTICLE_INITIAL", "POLAR", "PRECISIONS", "SCHEMES", "SCHEME_KEYS", "check_bool",
           "check_choice", "check_float", "check_int", "check_matrix", "check_vector"]
