"""Geometry only (no time): the Gauss–Legendre grid on S², the uniform grid on S¹, point
geometry, and the spherical-harmonic transform wrapper."""
from __future__ import annotations

from spherepde.grids.circle import CircleGrid
from spherepde.grids.gauss import GaussGrid


def grid_from_dict(d: dict) -> GaussGrid | CircleGrid:
    """Rebuild a grid from its ``to_dict()`` description."""
    kind = d.get("kind")
    if kind == "gauss":
        return GaussGrid.from_dict(d)
    if kind == "circle":
        return CircleGrid.from_dict(d)
    raise ValueError(f"unknown grid kind {kind!r}; allowed: 'gauss', 'circle'")


__all__ = ["CircleGrid", "GaussGrid", "grid_from_dict"]
