"""The field's standard transport tests on the unit sphere, and their error norms.

Sources (definitions and published numbers: ``docs/transport-references.md``):
* Williamson et al. (1992), test 1: solid-body rotation of a cosine bell, axis tilted by α,
  one revolution in T = 12 time units (the paper's 12 days), u0 = 2π/T.
* Nair & Lauritzen (2010), cases 1–3, and Lauritzen et al. (2012): case 4 (non-divergent,
  with a zonal translation) and the divergent standard (case 3 plus translation); period T = 5.
  The exact solution at t = T is the initial condition.
Latitude is θ in the formulas below (as in the sources); u is eastward, v northward.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from spherepde.grids.geometry import east_north_basis, great_circle_distance, xyz_to_lonlat

CASES = ("williamson1", "nl-case1", "nl-case2", "nl-case3", "nl-case4", "l2012-divergent")
FIELDS = ("gaussian-hills", "cosine-bells", "slotted-cylinders", "cosine-bell")


@dataclass(frozen=True)
class TransportCase:
    """A velocity u(t, λ, θ), v(t, λ, θ) with its period and default initial field."""

    name: str
    period: float
    uv: Callable  # (t, lon, lat) -> (u, v)
    divergent: bool
    default_field: str

    def velocity(self, t: float, xyz: np.ndarray) -> np.ndarray:
        """Cartesian tangent velocity at unit points ``xyz`` (..., 3)."""
        lon, lat = xyz_to_lonlat(xyz)
        u, v = self.uv(t, lon, lat)
        e, n = east_north_basis(lon, lat)
        return u[..., None] * e + v[..., None] * n


def _nl(kind: int, k: float, translate: bool, T: float = 5.0):
    def uv(t, lon, lat):
        lam = lon - 2.0 * np.pi * t / T if translate else lon
        ct = np.cos(np.pi * t / T)
        if kind == 1:
            u = k * np.sin(lam / 2) ** 2 * np.sin(2 * lat) * ct
            v = (k / 2) * np.sin(lam) * np.cos(lat) * ct
        elif kind == 2:
            u = k * np.sin(lam) ** 2 * np.sin(2 * lat) * ct
            v = k * np.sin(2 * lam) * np.cos(lat) * ct
        else:
            u = -k * np.sin(lam / 2) ** 2 * np.sin(2 * lat) * np.cos(lat) ** 2 * ct
            v = (k / 2) * np.sin(lam) * np.cos(lat) ** 3 * ct
        if translate:
            u = u + 2.0 * np.pi / T * np.cos(lat)
        return u, v

    return uv


def make_case(name: str, alpha: float = 0.0) -> TransportCase:
    """The transport case ``name`` (one of :data:`CASES`); ``alpha`` tilts Williamson's axis."""
    if name not in CASES:
        raise ValueError(f"case must be one of {CASES}, got {name!r}")
    if not np.isfinite(alpha) or not (0.0 <= alpha <= np.pi / 2 + 1e-12):
        raise ValueError(f"alpha must be in [0, π/2], got {alpha!r}")
    if name == "williamson1":
        T = 12.0
        u0 = 2.0 * np.pi / T

        def uv(t, lon, lat):
            u = u0 * (np.cos(lat) * np.cos(alpha) + np.sin(lat) * np.cos(lon) * np.sin(alpha))
            v = -u0 * np.sin(lon) * np.sin(alpha)
            return u, v

        return TransportCase(name, T, uv, False, "cosine-bell")
    if alpha != 0.0:
        raise ValueError(f"alpha applies to williamson1 only, got alpha={alpha!r} for case {name!r}")
    kind, k, translate, div = {
        "nl-case1": (1, 2.4, False, False),
        "nl-case2": (2, 2.0, False, False),
        "nl-case3": (3, 1.0, False, True),
        "nl-case4": (2, 2.0, True, False),
        "l2012-divergent": (3, 1.0, True, True),
    }[name]
    return TransportCase(name, 5.0, _nl(kind, k, translate), div, "gaussian-hills")


_CENTRES = ((5 * np.pi / 6, 0.0), (7 * np.pi / 6, 0.0))


def _centre_xyz(lon, lat):
    return np.array([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


def initial_field(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """The initial condition ``name`` (one of :data:`FIELDS`) as a function of unit points."""
    if name not in FIELDS:
        raise ValueError(f"field must be one of {FIELDS}, got {name!r}")
    if name == "gaussian-hills":
        def f(x):
            return sum(0.95 * np.exp(-5.0 * np.sum((x - _centre_xyz(*c)) ** 2, axis=-1))
                       for c in _CENTRES)
    elif name == "cosine-bell":
        R, h0 = 1.0 / 3.0, 1000.0
        c0 = _centre_xyz(3 * np.pi / 2, 0.0)

        def f(x):
            r = great_circle_distance(x, np.broadcast_to(c0, x.shape))
            return np.where(r < R, 0.5 * h0 * (1.0 + np.cos(np.pi * r / R)), 0.0)
    elif name == "cosine-bells":
        R, b, c = 0.5, 0.1, 0.9

        def f(x):
            out = np.full(x.shape[:-1], b)
            for lc in _CENTRES:
                r = great_circle_distance(x, np.broadcast_to(_centre_xyz(*lc), x.shape))
                out = out + np.where(r < R, c * 0.5 * (1.0 + np.cos(np.pi * r / R)), 0.0)
            return out
    else:  # slotted cylinders
        R, b, c = 0.5, 0.1, 1.0

        def f(x):
            lon, lat = xyz_to_lonlat(x)
            out = np.full(x.shape[:-1], b)
            for i, (lc, tc) in enumerate(_CENTRES):
                r = great_circle_distance(x, np.broadcast_to(_centre_xyz(lc, tc), x.shape))
                dlon = np.abs(lon - lc)
                inside = r <= R
                body = inside & (dlon >= R / 6)
                if i == 0:
                    tail = inside & (dlon < R / 6) & (lat - tc < -5 * R / 12)
                else:
                    tail = inside & (dlon < R / 6) & (lat - tc > 5 * R / 12)
                out = np.where(body | tail, c, out)
            return out
    return f


def error_norms(grid, psi: np.ndarray, exact: np.ndarray) -> dict:
    """Normalised errors of Williamson (1992) / Lauritzen (2012), area-weighted.

    l1 = I|ψ−ψT|/I|ψT|,  l2 = sqrt(I(ψ−ψT)²/IψT²),  l∞ = max|ψ−ψT|/max|ψT|,
    lmax = (max ψ − max ψT)/(max ψT − min ψT),  lmin = (min ψ − min ψT)/(max ψT − min ψT).
    """
    I = grid.integrate
    d = psi - exact
    rng = exact.max() - exact.min()
    if rng == 0.0 or not np.any(exact):
        raise ValueError("error_norms needs a non-constant exact field (the norms divide by its range)")
    return {
        "l1": float(I(np.abs(d)) / I(np.abs(exact))),
        "l2": float(np.sqrt(I(d * d) / I(exact * exact))),
        "linf": float(np.abs(d).max() / np.abs(exact).max()),
        "lmax": float((psi.max() - exact.max()) / rng),
        "lmin": float((psi.min() - exact.min()) / rng),
    }
