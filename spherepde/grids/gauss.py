"""Gauss–Legendre latitude–longitude grid on the unit sphere S², as finite-volume cells.

Conventions (shared with shtns and pyshtools, so transforms need no reordering)
-------------------------------------------------------------------------------
* Arrays of cell values have shape ``(nlat, nlon)``; row ``j`` is a latitude ring, ordered
  **north to south** (``lat[0] ≈ +90°``); column ``i`` sits at longitude ``λ_i = 2π i / nlon``.
* ``nlat`` is even, ``nlon = 2 nlat``.  Cell centres are the Gauss–Legendre nodes
  ``μ_j = sin φ_j`` (roots of P_nlat).  In the equal-area coordinates ``(λ, μ)`` the sphere is
  the rectangle ``[0, 2π) × [−1, 1]`` with area element ``dλ dμ``; the cell faces in μ are
  ``μ_{j+1/2} = 1 − Σ_{k≤j} w_k`` (``w`` the Gauss weights, ``Σ w = 2``), so every cell area
  equals its quadrature weight: ``|cell_{j,i}| = w_j Δλ`` and ``Σ |cell| = 4π``.
* Cartesian ``x = cos φ cos λ, y = cos φ sin λ, z = sin φ``; unit east
  ``e = (−sin λ, cos λ, 0)``, unit north ``n = (−sin φ cos λ, −sin φ sin λ, cos φ)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from scipy.special import roots_legendre

from spherepde.grids.geometry import (
    cartesian_to_tangent,
    lonlat_to_xyz,
    tangent_to_cartesian,
)

MIN_NLAT = 4


@lru_cache(maxsize=32)
def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes μ_j (roots of P_n, **descending**, north to south) and weights w_j
    (Σ w = 2), exactly symmetric about the equator; read-only arrays of shape (n,), n even.

    scipy's roots, refined by two Newton steps on the three-term recurrence in ``np.longdouble``,
    and w_j = 2(1 − μ_j²)/(n P_{n−1}(μ_j))².  Against the polar-weighted moments
    ∫ ((1+μ)/2)^p dμ = 2/(p+1), p = n and 2n − 1 (exact for the rule): relative errors
    ≤ 7e-15 for n = 64…512, as shtns's weights and 10–20× below pyshtools' (scipy's own weights
    are off by 5e-11 at the poles of n = 128).  Where ``np.longdouble`` is no wider than float64,
    pyshtools' weights are used (imported only then).
    """
    x, w = roots_legendre(n)
    h = n // 2
    x = x[::-1][:h].astype(np.longdouble)  # the northern half, descending

    def p_n_and_n1(t):
        p0, p1 = np.ones_like(t), t.copy()
        for k in range(2, n + 1):
            p0, p1 = p1, ((2 * k - 1) * t * p1 - (k - 1) * p0) / k
        return p1, p0

    if np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant:
        for _ in range(2):
            pn, pn1 = p_n_and_n1(x)
            x = x - pn * (1 - x) * (1 + x) / (n * (pn1 - x * pn))
        _, pn1 = p_n_and_n1(x)
        wn = (2 * (1 - x) * (1 + x) / (n * pn1) ** 2).astype(np.float64)
    else:  # pragma: no cover - platforms whose long double is a double
        from pyshtools.expand import SHGLQ  # noqa: PLC0415

        wn = np.asarray(SHGLQ(n - 1)[1], float)[:h]
    xn = x.astype(np.float64)
    return _readonly(np.r_[xn, -xn[::-1]]), _readonly(np.r_[wn, wn[::-1]])


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class GaussGrid:
    """Finite-volume Gauss–Legendre grid with ``nlat`` latitudes and ``nlon = 2 nlat`` longitudes.

    Parameters
    ----------
    nlat : int
        Number of Gauss latitudes; even, ``>= 4``.  Spectral truncation ``lmax = nlat − 1``.
    """

    nlat: int

    def __post_init__(self) -> None:
        n = self.nlat
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"nlat must be an int, got {type(n).__name__}")
        if n < MIN_NLAT or n % 2:
            raise ValueError(f"nlat must be an even integer >= {MIN_NLAT}, got {n}")
        object.__setattr__(self, "nlat", int(n))

    # ---- sizes -------------------------------------------------------------------------
    @property
    def nlon(self) -> int:
        return 2 * self.nlat

    @property
    def shape(self) -> tuple[int, int]:
        return (self.nlat, self.nlon)

    @property
    def lmax(self) -> int:
        """Largest spherical-harmonic degree resolved exactly by the quadrature."""
        return self.nlat - 1

    @property
    def dlon(self) -> float:
        return 2.0 * np.pi / self.nlon

    # ---- latitude structure ------------------------------------------------------------
    @cached_property
    def _nodes(self) -> tuple[np.ndarray, np.ndarray]:
        return gauss_legendre(self.nlat)

    @cached_property
    def mu(self) -> np.ndarray:
        """sin(latitude) of the cell centres, shape (nlat,), descending."""
        return _readonly(self._nodes[0].copy())

    @cached_property
    def weights(self) -> np.ndarray:
        """Gauss weights w_j (Σ w = 2), shape (nlat,)."""
        return _readonly(self._nodes[1].copy())

    @cached_property
    def mu_faces(self) -> np.ndarray:
        """sin(latitude) of the cell faces, shape (nlat+1,), from +1 to −1 (0 at the equator)."""
        w = self._nodes[1]
        h = self.nlat // 2
        north = 1.0 - np.concatenate([[0.0], np.cumsum(w[:h])])
        north[-1] = 0.0
        f = np.concatenate([north, -north[:-1][::-1]])
        f[0], f[-1] = 1.0, -1.0
        return _readonly(f)

    @cached_property
    def lat(self) -> np.ndarray:
        """Latitude of the cell centres in radians, shape (nlat,), descending."""
        return _readonly(np.arcsin(self.mu))

    @cached_property
    def lat_faces(self) -> np.ndarray:
        """Latitude of the cell faces in radians, shape (nlat+1,), from π/2 to −π/2."""
        return _readonly(np.arcsin(np.clip(self.mu_faces, -1.0, 1.0)))

    @cached_property
    def lon(self) -> np.ndarray:
        """Longitude of the cell centres in radians, ``2π i / nlon``, shape (nlon,)."""
        return _readonly(self.dlon * np.arange(self.nlon))

    @cached_property
    def lon_faces(self) -> np.ndarray:
        """Longitude of the west faces ``λ_{i−1/2}``, shape (nlon+1,) (last = first + 2π)."""
        return _readonly(self.dlon * (np.arange(self.nlon + 1) - 0.5))

    @property
    def lat_deg(self) -> np.ndarray:
        return np.degrees(self.lat)

    @property
    def lon_deg(self) -> np.ndarray:
        return np.degrees(self.lon)

    # ---- cells and faces ---------------------------------------------------------------
    @cached_property
    def cell_area(self) -> np.ndarray:
        """Cell areas ``w_j Δλ`` on the unit sphere, shape (nlat, nlon); they sum to 4π."""
        return _readonly(np.repeat((self.weights * self.dlon)[:, None], self.nlon, axis=1))

    @cached_property
    def meridian_face_length(self) -> np.ndarray:
        """Length of the faces between zonal neighbours (meridian arcs), shape (nlat,)."""
        return _readonly(-np.diff(self.lat_faces))

    @cached_property
    def parallel_face_length(self) -> np.ndarray:
        """Length of the faces between meridional neighbours (arcs of parallels), shape
        (nlat+1,); zero at the poles."""
        c = np.sqrt(np.clip(1.0 - self.mu_faces**2, 0.0, None))
        return _readonly(c * self.dlon)

    # ---- coordinates -------------------------------------------------------------------
    @cached_property
    def lat2d(self) -> np.ndarray:
        return _readonly(np.repeat(self.lat[:, None], self.nlon, axis=1))

    @cached_property
    def lon2d(self) -> np.ndarray:
        return _readonly(np.repeat(self.lon[None, :], self.nlat, axis=0))

    @cached_property
    def xyz(self) -> np.ndarray:
        """Cartesian cell centres, shape (nlat, nlon, 3)."""
        return _readonly(lonlat_to_xyz(self.lon2d, self.lat2d))

    def to_cartesian(self, u_east: np.ndarray, v_north: np.ndarray) -> np.ndarray:
        """Tangent vectors (east, north components at the cell centres) → Cartesian (..., 3)."""
        return tangent_to_cartesian(u_east, v_north, self.lon2d, self.lat2d)

    def from_cartesian(self, vec: np.ndarray, *, radial_tol: float | None = 1e-10):
        """Cartesian vectors at the cell centres, shape (nlat, nlon, 3) → (east, north).

        Raises ``ValueError`` if the radial component exceeds ``radial_tol`` (relative to the
        largest vector); pass ``radial_tol=None`` to project instead.
        """
        return cartesian_to_tangent(vec, self.xyz, self.lon2d, self.lat2d, radial_tol=radial_tol)

    # ---- integration -------------------------------------------------------------------
    def integrate(self, field: np.ndarray) -> np.ndarray:
        """∫_{S²} f dσ by the cell (= Gauss) quadrature; ``field`` has shape (..., nlat, nlon)."""
        return np.einsum("...ji,j->...", field, self.weights) * self.dlon

    def cell_average(self, func, npts: int = 3) -> np.ndarray:
        """Cell averages of ``func(xyz) -> values`` by an ``npts × npts`` Gauss rule per cell.

        The rule is Gauss–Legendre in λ and in μ = sin φ (the area element is dλ dμ), so it is
        exact for cell averages of polynomials in (λ, μ) of degree < 2·npts.  ``func`` receives
        Cartesian points of shape (nlat, nlon, 3) and returns (nlat, nlon).
        """
        x, w = roots_legendre(npts)
        out = np.zeros(self.shape)
        mf = self.mu_faces
        for a, wa in zip(x, w):
            mu = 0.5 * (mf[:-1] + mf[1:]) + 0.5 * a * (mf[:-1] - mf[1:])
            lat = np.arcsin(np.clip(mu, -1.0, 1.0))
            for b, wb in zip(x, w):
                lon = self.lon + 0.5 * b * self.dlon
                out += 0.25 * wa * wb * func(lonlat_to_xyz(lon[None, :], lat[:, None]))
        return out

    # ---- serialisation -----------------------------------------------------------------
    # pickling keeps only the defining integer: cached arrays are rebuilt read-only
    def __getstate__(self) -> dict:
        return {"nlat": self.nlat}

    def __setstate__(self, state: dict) -> None:
        object.__setattr__(self, "nlat", state["nlat"])

    def to_dict(self) -> dict:
        return {"kind": "gauss", "nlat": self.nlat}

    @classmethod
    def from_dict(cls, d: dict) -> "GaussGrid":
        if d.get("kind", "gauss") != "gauss":
            raise ValueError(f"not a GaussGrid description: {d!r}")
        return cls(int(d["nlat"]))

    @classmethod
    def from_resolution(cls, degrees: float) -> "GaussGrid":
        """Grid whose latitude spacing is about ``degrees`` (``nlat = round(180/degrees)``, even)."""
        if not np.isfinite(degrees) or degrees <= 0:
            raise ValueError(f"degrees must be a positive number, got {degrees}")
        n = int(round(180.0 / degrees))
        return cls(max(MIN_NLAT, n + (n % 2)))

    @property
    def resolution_deg(self) -> float:
        return 180.0 / self.nlat
