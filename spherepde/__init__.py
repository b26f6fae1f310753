"""spherepde — mean-field dynamics of transformers on the sphere, as densities on spherical grids.

The package is layered, imports going one way::

    grids  <-  noise, dynamics  <-  solvers  <-  validation  <-  io  <-  experiments  <-  cli

``validation`` (metrics, exact solutions, transport cases, fits) runs nothing and writes nothing;
``experiments`` is the one layer that assembles runs (configurations, the paper experiments).
"""
from __future__ import annotations

__version__ = "0.1.0"

from spherepde.grids import CircleGrid, GaussGrid

__all__ = ["CircleGrid", "GaussGrid", "__version__"]
