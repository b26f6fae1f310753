"""Mean-field continuity equation ∂_t ρ + div_S(ρ X[ρ]) = 0 with a density-dependent velocity.

Time stepping (``"meanfield-ffsl"``): the explicit midpoint rule wrapped around the FFSL–PPM
transport of :mod:`.transport`,

    ρ* = T(X[ρⁿ], Δt/2) ρⁿ,      ρⁿ⁺¹ = T(X[ρ*], Δt) ρⁿ,

where T(u, τ) transports by the velocity u frozen over τ.  Second order in time, exactly
conservative and positive (each T is).  The velocity is evaluated at the face points of the
transport scheme (two evaluations per step).  A velocity that does not depend on the density
(``velocity.depends_on_density`` false, e.g. attention at β = ∞) is transported directly
(one evaluation per step).  With ``polar="cap"`` (sphere) the velocity is also evaluated at
the transport's polar-cap vertices, frozen with the face velocities over each T.

Limiters.  ``limiter="none"`` is refused (``ValueError``, before any work) for a velocity that
declares ``depends_on_density`` true — :class:`~spherepde.dynamics.attention.DensityAttention`
at finite β does — unless it also declares ``accepts_signed_density = True``: the unlimited
parabolas undershoot below zero at steep profiles (a forming cluster), and the attention
velocity is defined for non-negative densities only (its weights are checked, and the run used
to stop mid-way with "w must be non-negative").  A plain callable that declares nothing is
taken as it comes (prescribed velocities, noise only, β = ∞ keep the unlimited scheme); one that
wraps the attention should copy its ``depends_on_density``.

:class:`~spherepde.solvers.eulerian.spde.SPDEFFSL` extends this stepper with a common noise
velocity (the hooks :meth:`MeanFieldFFSL._velocity_values` and :meth:`MeanFieldFFSL._cache_key`).
"""
from __future__ import annotations

import numpy as np

from spherepde.grids import GaussGrid
from spherepde.solvers.eulerian.transport import ffsl_ppm
from spherepde.solvers.registry import register_stepper


class MeanFieldFFSL:
    """Midpoint-in-time FFSL–PPM stepper for ``velocity(t, x, rho)``; see the module docstring."""

    name = "meanfield-ffsl"

    def __init__(self, grid, velocity, **options) -> None:
        if not callable(velocity):
            raise TypeError("velocity must be callable as velocity(t, x, rho)")
        self.velocity = velocity
        self.grid = grid
        self.transport = ffsl_ppm(grid, lambda t, x: velocity(t, x, None), **options)
        if (self.transport.limiter == "none" and getattr(velocity, "depends_on_density", False)
                and not getattr(velocity, "accepts_signed_density", False)):
            raise ValueError(
                f"limiter='none' cannot be combined with a density-dependent velocity "
                f"({type(velocity).__name__}): the unlimited parabolas undershoot below zero "
                f"where the density is steep, and the velocity is then evaluated on a signed "
                f"density (attention needs non-negative weights). Use limiter='positive' (the "
                f"default) or 'monotone'; a velocity defined for signed densities may declare "
                f"accepts_signed_density = True")
        self._sphere = isinstance(grid, GaussGrid)
        #: (t, rho, face velocities, key) of the last evaluation
        self._last: tuple[float, np.ndarray | None, tuple, object] | None = None
        # the velocity is evaluated at the face points and, with polar="cap", the cap vertices
        self._cap = getattr(self.transport, "cap_points", None) is not None
        self._points = self.transport.velocity_points

    @property
    def substeps(self) -> int:
        return self.transport.substeps

    def options(self) -> dict:
        return {**self.transport.options(), "stepper": self.name}

    def _velocity_values(self, t: float, rho: np.ndarray | None) -> np.ndarray:
        """The velocity (P, d) at the transport's face points (then its polar-cap vertices, with
        ``polar="cap"``) for the density ``rho``."""
        return self.velocity(t, self._points, rho)

    def _cache_key(self):
        """What else the velocity depends on besides (t, ρ) (None here; the noise increment in
        the SPDE stepper)."""
        return None

    def _faces(self, t: float, rho: np.ndarray | None):
        # reuse the last evaluation only for the same time, key and values (a copy is kept: the
        # caller may change its array in place between stable_dt and step)
        key = self._cache_key()
        if (self._last is not None and self._last[0] == t and self._last[3] == key
                and (rho is None) == (self._last[1] is None)
                and (rho is None or (self._last[1] is not None and np.array_equal(self._last[1], rho)))):
            return self._last[2]
        # (az, am, max |v|) on S², (a, max |v|) on S¹; with the cap also v at its vertices
        out = self.transport.split_velocities(self._velocity_values(t, rho))
        self._last = (t, None if rho is None else np.array(rho, copy=True), out, key)
        return out

    def _advance(self, rho, faces, dt):
        if not self._cap:
            return self.transport.advance(rho, *faces[:-1], dt)
        az, am, _, v_cap = faces
        return self.transport.advance(rho, az, am, dt, v_cap)

    def stable_dt(self, rho: np.ndarray, t: float) -> float:
        vmax = self._faces(t, rho)[2 if self._cap else -1]
        return np.inf if vmax == 0.0 else self.transport.courant * self.transport._dx / vmax

    def step(self, rho: np.ndarray, t: float, dt: float) -> np.ndarray:
        if not getattr(self.velocity, "depends_on_density", True):
            return self._advance(rho, self._faces(t + 0.5 * dt, None), dt)
        half = self._advance(rho, self._faces(t, rho), 0.5 * dt)
        return self._advance(rho, self._faces(t + 0.5 * dt, half), dt)


@register_stepper("meanfield-ffsl")
def meanfield_ffsl(grid, velocity, **options) -> MeanFieldFFSL:
    """Mean-field continuity equation on a GaussGrid or CircleGrid (FFSL–PPM, midpoint in time)."""
    return MeanFieldFFSL(grid, velocity, **options)
