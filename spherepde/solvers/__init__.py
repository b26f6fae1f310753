"""Time integration: Eulerian (grid) and Lagrangian (particle) solvers, the stepper registry,
the run controller and its trackers."""
from __future__ import annotations

from spherepde.solvers import eulerian  # noqa: F401  (registers the steppers)
from spherepde.solvers.registry import STEPPERS, make_stepper, register_stepper

__all__ = ["STEPPERS", "make_stepper", "register_stepper"]
