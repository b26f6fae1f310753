"""Uniform finite-volume grid on the circle S¹ (unit radius).

Cell ``i`` is centred at ``θ_i = 2π i / n`` with faces ``θ_{i±1/2}``; arrays have shape (n,).
Points are ``(cos θ, sin θ)``; the unit tangent is ``t = (−sin θ, cos θ)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from spherepde.grids.geometry import check_tangent

MIN_N = 4


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class CircleGrid:
    """``n`` uniform cells on S¹ (``n >= 4``)."""

    n: int

    def __post_init__(self) -> None:
        n = self.n
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if n < MIN_N:
            raise ValueError(f"n must be an integer >= {MIN_N}, got {n}")
        object.__setattr__(self, "n", int(n))

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    @property
    def dtheta(self) -> float:
        return 2.0 * np.pi / self.n

    @cached_property
    def theta(self) -> np.ndarray:
        """Cell-centre angles, shape (n,)."""
        return _readonly(self.dtheta * np.arange(self.n))

    @cached_property
    def theta_faces(self) -> np.ndarray:
        """Face angles θ_{i−1/2}, shape (n+1,)."""
        return _readonly(self.dtheta * (np.arange(self.n + 1) - 0.5))

    @cached_property
    def cell_length(self) -> np.ndarray:
        return _readonly(np.full(self.n, self.dtheta))

    @cached_property
    def xy(self) -> np.ndarray:
        """Cartesian cell centres, shape (n, 2)."""
        return _readonly(np.stack([np.cos(self.theta), np.sin(self.theta)], axis=-1))

    def to_cartesian(self, u: np.ndarray) -> np.ndarray:
        """Tangential component u (n,) → Cartesian vectors (n, 2)."""
        return np.asarray(u)[..., None] * np.stack([-np.sin(self.theta), np.cos(self.theta)], -1)

    def from_cartesian(self, vec: np.ndarray, *, radial_tol: float | None = 1e-10) -> np.ndarray:
        """Cartesian vectors (n, 2) → tangential component; radial parts are refused (see
        :meth:`GaussGrid.from_cartesian`)."""
        vec = np.asarray(vec, float)
        if radial_tol is not None:
            check_tangent(vec, self.xy, radial_tol)
        return -vec[..., 0] * np.sin(self.theta) + vec[..., 1] * np.cos(self.theta)

    def integrate(self, field: np.ndarray) -> np.ndarray:
        """∫_{S¹} f dθ by the midpoint rule; ``field`` has shape (..., n)."""
        return np.sum(field, axis=-1) * self.dtheta

    # pickling keeps only the defining integer: cached arrays are rebuilt read-only
    def __getstate__(self) -> dict:
        return {"n": self.n}

    def __setstate__(self, state: dict) -> None:
        object.__setattr__(self, "n", state["n"])

    def to_dict(self) -> dict:
        return {"kind": "circle", "n": self.n}

    @classmethod
    def from_dict(cls, d: dict) -> "CircleGrid":
        if d.get("kind") != "circle":
            raise ValueError(f"not a CircleGrid description: {d!r}")
        return cls(int(d["n"]))
