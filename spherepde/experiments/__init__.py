"""Runs of the model from one configuration tree (:mod:`.config`) by :mod:`.run`.

Sits above io and below the command line: grids ← dynamics ← solvers ← validation ← io ←
experiments ← cli.
"""
from __future__ import annotations

from spherepde.experiments.config import RunConfig, default_config, load

__all__ = ["RunConfig", "default_config", "load"]
