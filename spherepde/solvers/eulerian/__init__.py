"""Eulerian (density-on-a-grid) solvers."""
from __future__ import annotations

from spherepde.solvers.eulerian.amr import AMRDensity
from spherepde.solvers.eulerian.meanfield import MeanFieldFFSL, meanfield_ffsl
from spherepde.solvers.eulerian.spde import SPDEFFSL, spde_ffsl
from spherepde.solvers.eulerian.transport import FFSLCircle, FFSLSphere, ffsl_ppm

__all__ = ["AMRDensity", "FFSLCircle", "FFSLSphere", "MeanFieldFFSL", "SPDEFFSL", "ffsl_ppm", "meanfield_ffsl",
           "spde_ffsl"]
