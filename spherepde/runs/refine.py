"""``spherepde run CONFIG --refine F``: the same model with every resolution parameter of every
representation scaled by F, for a one-command convergence check.

What F scales (h is a length on the sphere, so the grid counts go like F, the sample counts
like F², the time step like 1/F):

==============================================  =========================================
``grid.nlat`` (sphere), ``grid.n`` (circle)     × F, nlat rounded to an even number
``representations.density.base_nlat`` (amr)     × F, even (the finest cell h shrinks by F;
                                                the refinement threshold mass_per_cell·h²
                                                follows h, so ``mass_per_cell`` stays)
``representations.density.max_cells`` (amr)     × F² on the sphere, × F on the circle
``representations.density.remap_nlat``          × F, even
``representations.particles.n`` (sample)        × F²
``representations.transformer.n``               × F²
``representations.transformer.depth`` L         × F, to the nearest L that is still a
                                                multiple or a divisor of the output count
``representations.transformer.width`` m         × F² (finite m)
``stepping.dt``                                 / F (``stepping.courant`` stays: Δt already
                                                follows the grid)
==============================================  =========================================

The model (matrices, β, noise, initial density, t_end, outputs) is left as it is.  The refined
configuration is an ordinary one: run.nc stores it, so ``spherepde run DIR/config.toml``
repeats the refined run without ``--refine``.
"""
from __future__ import annotations

import math

from spherepde.runs.config import RunConfig

#: the factors ``--refine`` accepts (a coarsening below 1 is allowed, for a cheap check)
MIN_FACTOR, MAX_FACTOR = 0.25, 4.0


def check_factor(factor) -> float:
    """``factor`` as a float, or a ValueError naming ``--refine`` and the allowed range."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) \
            or not MIN_FACTOR <= factor <= MAX_FACTOR:
        raise ValueError(f"--refine: must be a number in [{MIN_FACTOR:g}, {MAX_FACTOR:g}] (1.5 "
                         f"multiplies the grid resolution by 1.5, the particle count by 2.25 and "
                         f"the number of steps by 1.5), got {factor!r}")
    return float(factor)


def _even(n: float) -> int:
    """n rounded to an even number ≥ 4, halves upwards (33 → 34)."""
    return max(4, 2 * math.floor(n / 2 + 0.5))


def _count(n: float) -> int:
    """n rounded to an integer ≥ 1, halves upwards."""
    return max(1, math.floor(n + 0.5))


def _depth(depth: int, factor: float, n_outputs: int) -> int:
    """depth·F rounded to the nearest number of layers that is a multiple or a divisor of the
    number of output intervals (the transformer's layers must line up with the outputs)."""
    target = depth * factor
    divisors = [k for k in range(1, n_outputs + 1) if n_outputs % k == 0]
    multiples = [n_outputs * max(1, math.floor(target / n_outputs)),
                 n_outputs * max(1, math.ceil(target / n_outputs))]
    return min(divisors + multiples, key=lambda k: (abs(k - target), -k))


def refine(config: RunConfig, factor: float) -> RunConfig:
    """``config`` with every resolution parameter scaled by ``factor`` (see the module's table);
    validated like any configuration (a scaled value out of its range is refused with its key
    path, prefixed by ``--refine F``)."""
    f = check_factor(factor)
    raw = config.to_dict()
    grid = raw["grid"]
    if grid["kind"] == "sphere":
        grid["nlat"] = _even(grid["nlat"] * f)
    elif grid["kind"] == "circle":
        grid["n"] = _even(grid["n"] * f)
    reps = raw["representations"]
    dens = reps.get("density")
    if isinstance(dens, dict):
        for key in ("base_nlat", "remap_nlat"):
            if dens.get(key) is not None:
                dens[key] = _even(dens[key] * f)
        if dens.get("max_cells") is not None:
            dens["max_cells"] = _count(dens["max_cells"] * (f if grid["kind"] == "circle" else f * f))
    parts = reps.get("particles")
    if isinstance(parts, dict) and parts.get("initial", "sample") == "sample":
        parts["n"] = _count(parts["n"] * f * f)
    tr = reps.get("transformer")
    if isinstance(tr, dict):
        tr["n"] = _count(tr["n"] * f * f)
        tr["depth"] = _depth(tr["depth"], f, config.stepping.n_outputs)
        if tr.get("width") is not None and math.isfinite(float(tr["width"])):
            tr["width"] = _count(tr["width"] * f * f)
    step = raw["stepping"]
    if step.get("dt") is not None:
        step["dt"] = step["dt"] / f
    try:
        return RunConfig.from_dict(raw)
    except ValueError as err:
        raise ValueError(f"--refine {f:g}: {err}") from None


__all__ = ["MAX_FACTOR", "MIN_FACTOR", "check_factor", "refine"]
