"""Lagrangian baselines: the N-particle attention ODE on S^{d−1} (see :mod:`.particles`).

The NetCDF writer for particle runs is :func:`spherepde.io.particles.write_particles_netcdf`
(io sits on top of solvers).
"""
from __future__ import annotations

from spherepde.solvers.lagrangian.particles import (
    METHODS,
    ParticleODE,
    ParticleResult,
    retract,
)

__all__ = ["METHODS", "ParticleODE", "ParticleResult", "retract"]
