"""Everything that assembles runs: the model from one configuration tree (:mod:`.config`,
:mod:`.run`, :mod:`.sweep`, :mod:`.demo`), the paper experiments (one module each, listed in
:mod:`.registry`, from which ``spherepde experiment`` is generated), the SPDE ensembles
(:mod:`.ensemble`), the transport runs (:mod:`.transport`) and the sync-path validation
(:mod:`.sync_path`).

Sits above io and below the command line: grids ← dynamics ← solvers ← validation ← io ←
experiments ← cli.
"""
from __future__ import annotations

from spherepde.runs.config import RunConfig, default_config, load

__all__ = ["RunConfig", "default_config", "load"]
