"""Registry of time steppers by name, so that tests and the CLI can loop over all of them.

A stepper is any object with ``name``, ``grid``, ``stable_dt(rho, t) -> float`` and
``step(rho, t, dt) -> rho_new`` (see :class:`spherepde.solvers.controller.Controller`).
"""
from __future__ import annotations

from typing import Callable

STEPPERS: dict[str, Callable] = {}


def register_stepper(name: str):
    """Class/factory decorator: ``make_stepper(name, grid, ...)`` will call it."""

    def deco(factory):
        if name in STEPPERS:
            raise ValueError(f"stepper {name!r} registered twice")
        STEPPERS[name] = factory
        return factory

    return deco


def make_stepper(name: str, grid, velocity, **options):
    """Build the stepper registered as ``name`` for ``grid`` and ``velocity``."""
    if name not in STEPPERS:
        raise ValueError(f"unknown stepper {name!r}; allowed: {sorted(STEPPERS)}")
    return STEPPERS[name](grid, velocity, **options)
