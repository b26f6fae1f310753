"""Lagrangian baselines: the N-particle attention ODE (:mod:`.particles`), the limit SDE with
common noise (:mod:`.sde`) and the discrete transformer itself (:mod:`.transformer`).

The NetCDF writer for particle runs is :func:`spherepde.io.particles.write_particles_netcdf`
(io sits on top of solvers).
"""
from __future__ import annotations

from spherepde.solvers.lagrangian.particles import ODE_INTEGRATORS, ParticleODE, ParticleResult, retract
from spherepde.solvers.lagrangian.sde import SDE_INTEGRATORS, ParticleSDE, PointGaussianNoise
from spherepde.solvers.lagrangian.transformer import DiscreteTransformer, MLPLayer, TransformerResult

__all__ = ["ODE_INTEGRATORS", "SDE_INTEGRATORS", "DiscreteTransformer", "MLPLayer", "ParticleODE",
           "ParticleResult", "ParticleSDE", "PointGaussianNoise", "TransformerResult", "retract"]
