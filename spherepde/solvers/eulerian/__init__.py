"""Eulerian (density-on-a-grid) solvers."""
from __future__ import annotations

from spherepde.solvers.eulerian.transport import FFSLCircle, FFSLSphere, ffsl_ppm

__all__ = ["FFSLCircle", "FFSLSphere", "ffsl_ppm"]
