"""The McKean–Vlasov SPDE with common transport noise (docs/equations.md, Paper 2, eq. 1.10).

Stratonovich form, discretised here:

    dρ + div_S(ρ X[ρ]) dt + div_S(ρ P_x ∘ W(dt, x)) = 0,

W the truncated Brownian field of a :class:`~spherepde.noise.field.NoiseField` driven by a
:class:`~spherepde.noise.brownian.BrownianPath`.  For one realisation the density is
*transported* by the random velocity X[ρ] + P_x Ẇ; only its mean over realisations diffuses,
E[ρ] following ∂_t E[ρ] = (κ(1)/2) Δ_S E[ρ] when the drift is off.

Step ``"spde-ffsl"`` (Stratonovich, Wong–Zakai): with the increment ΔW = W(t + Δt) − W(t) of
the path, the noise velocity u_W = P_x ΔW(x)/Δt is frozen over the step and the *same* u_W is
used in every stage of the midpoint rule of :mod:`.meanfield`:

    ρ* = T(X[ρⁿ] + u_W, Δt/2) ρⁿ,      ρⁿ⁺¹ = T(X[ρ*] + u_W, Δt) ρⁿ,

T the FFSL–PPM transport (exactly conservative, positive).  Without drift one transport per
step; without noise this is exactly ``"meanfield-ffsl"``.  Transport by a velocity frozen over
the step converges to the Stratonovich solution (Wong–Zakai); weak order 1 in Δt.

Large increments: the transport sub-steps a sweep whose deformation number Δt·max|∂a/∂x|
exceeds its limit (so a rough increment never crosses departure points), and a step is
*refused* (``ValueError``) when the root-mean-square displacement the noise gives a token in
one step, sqrt((d − 1) κ_{n_max}(1) Δt), exceeds :data:`MAX_NOISE_DISPLACEMENT` radians — such
a Δt does not resolve the noise at all.  An adaptive time step is refused too (``stable_dt``
raises): the step must not depend on the path.

``scheme="ito-euler"`` exists only to show what goes wrong: the explicit step
ρⁿ⁺¹ = ρⁿ − div_S(ρⁿ P_x ΔW) (spectral divergence on S², FFT on S¹) of the Stratonovich form is
first order in the increment, so E[ρ] does not diffuse at all (its mean is conserved exactly)
and single paths lose positivity.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.geometry import east_north_basis
from spherepde.solvers.eulerian.meanfield import MeanFieldFFSL
from spherepde.solvers.eulerian.transport import check_polar, courant_cap_buffer, resolve_polar
from spherepde.solvers.registry import register_stepper

SCHEMES = ("stratonovich", "ito-euler")
#: refuse steps whose rms noise displacement sqrt((d − 1) κ(1) Δt) exceeds this (radians)
MAX_NOISE_DISPLACEMENT = 0.5
#: the polar cap's buffer reaches this many rms noise displacements past the cap (cap_buffer_for)
CAP_REACH_SIGMAS = 4.0


def cap_buffer_for(grid, noise, dt: float, cap_rings: int = 4, courant: float = 0.8) -> int:
    """Buffer rings for ``polar="cap"`` under noise with steps of ``dt``: enough rings past the
    cap's K = ``cap_rings`` rings that a departure point CAP_REACH_SIGMAS rms noise displacements
    sqrt((d − 1) κ(1) Δt) away from the cap stays inside, plus the Courant-number buffer
    ceil(courant) + 2 the transport takes without noise (so at least that; at most nlat − K).
    Departure points that still leave the buffer make that cap fall back to the split step's
    values for the step (``transport.cap_fallbacks``)."""
    base = courant_cap_buffer(grid.nlat, cap_rings, courant)
    if noise is None:
        return base
    reach = CAP_REACH_SIGMAS * math.sqrt(2.0 * noise.variance * dt)
    colat = np.pi / 2 - np.asarray(grid.lat_faces)  # faces from the north pole
    need = int(np.searchsorted(colat - colat[cap_rings], reach)) - cap_rings
    return int(min(max(base, need + 1), grid.nlat - cap_rings))


class _NoDrift:
    """The zero drift (a velocity(t, x, rho) that does not depend on the density)."""

    depends_on_density = False

    def __call__(self, t, x, rho):
        return np.zeros_like(x)


_no_drift = _NoDrift()


class SPDEFFSL(MeanFieldFFSL):
    """Stratonovich stepper for attention drift (optional) plus common transport noise (optional):
    :class:`~spherepde.solvers.eulerian.meanfield.MeanFieldFFSL` (the same midpoint rule and
    transport) with the frozen noise velocity u_W added to the drift in every stage.

    Parameters
    ----------
    grid : GaussGrid or CircleGrid
    drift : callable ``drift(t, x, rho) -> (P, d)`` tangent vectors, or None
        E.g. :class:`~spherepde.dynamics.attention.DensityAttention`.
    noise : NoiseField or None
    path : BrownianPath or None
        Needed with ``noise``; its shape must be ``noise.shape``.
    scheme : "stratonovich" (default) or "ito-euler" (demonstration only, see module docstring)
    dt : float, optional
        The fixed step the run will take: with noise and the polar cap (``polar``, default
        "auto") it sizes the cap's buffer to the noise increments (:func:`cap_buffer_for`)
        unless ``cap_buffer`` is given.
    **options : FFSL–PPM options (``limiter``, ``courant``, ``max_lipschitz``, ``polar``,
        ``cap_rings``, ``cap_buffer``).
    """

    name = "spde-ffsl"

    def __init__(self, grid, drift=None, *, noise=None, path=None, scheme: str = "stratonovich",
                 dt: float | None = None, **options) -> None:
        if not isinstance(grid, (GaussGrid, CircleGrid)):
            raise TypeError(f"grid must be a GaussGrid or CircleGrid, got {type(grid).__name__}")
        d = 3 if isinstance(grid, GaussGrid) else 2
        if drift is not None and not callable(drift):
            raise TypeError("drift (the velocity) must be None or callable as drift(t, x, rho)")
        if (noise is None) != (path is None):
            raise ValueError("noise and path go together: give both or neither")
        if noise is not None:
            if noise.d != d:
                raise ValueError(f"noise lives on S^{noise.d - 1} but the grid is S^{d - 1}")
            if tuple(path.shape) != tuple(noise.shape):
                raise ValueError(f"path.shape must be the noise field's coefficient shape "
                                 f"{noise.shape}, got {path.shape}")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if scheme == "ito-euler" and (noise is None or drift is not None):
            raise ValueError("scheme='ito-euler' is a noise-only demonstration: give noise and no drift")
        if dt is not None and not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be None or a positive finite number, got {dt!r}")
        if (noise is not None and dt is not None and isinstance(grid, GaussGrid)
                and options.get("cap_buffer") is None):
            polar, rings, limiter = (options.get("polar", "auto"), options.get("cap_rings"),
                                     options.get("limiter", "positive"))
            check_polar(polar, rings, grid.nlat, limiter=limiter)
            polar, rings = resolve_polar(polar, grid.nlat, rings, limiter)
            if polar == "cap":
                options["cap_buffer"] = cap_buffer_for(grid, noise, dt, rings,
                                                       options.get("courant", 0.8))
        super().__init__(grid, _no_drift if drift is None else drift, **options)
        self.drift = drift
        self.noise = noise
        self.path = path
        self.scheme = scheme
        self.d = d
        self._zero = np.zeros_like(self._points)
        self._noise_cache: tuple[float, float, np.ndarray] | None = None  # (t, dt, noise velocity at the face points)
        self._u: np.ndarray = self._zero
        self._u_key: tuple[float, float] | None = None  # the current step's noise velocity and (t, dt)

    # ---- parameters --------------------------------------------------------------------
    def options(self) -> dict:
        out = {**super().options(), "scheme": self.scheme, "drift": self.drift is not None}
        if self.noise is not None:
            out.update(noise=self.noise.to_dict(), path=self.path.to_dict())
        return out

    def noise_displacement(self, dt: float) -> float:
        """rms displacement sqrt((d − 1) κ_{n_max}(1) Δt) of a token by the noise over dt."""
        return 0.0 if self.noise is None else math.sqrt((self.d - 1) * self.noise.variance * dt)

    def check_dt(self, dt: float) -> None:
        """Refuse a step the noise would make meaningless (see the module docstring)."""
        disp = self.noise_displacement(dt)
        if disp > MAX_NOISE_DISPLACEMENT:
            limit = MAX_NOISE_DISPLACEMENT ** 2 / ((self.d - 1) * self.noise.variance)
            raise ValueError(
                f"dt={dt:g} is too large for the noise: a token moves sqrt((d−1)κ(1)dt) = "
                f"{disp:.3g} rad per step (limit {MAX_NOISE_DISPLACEMENT}); use dt ≤ {limit:.3g}")

    # ---- velocities --------------------------------------------------------------------
    def _noise_velocity(self, t: float, dt: float) -> np.ndarray:
        if self.noise is None:
            return self._zero
        c = self._noise_cache
        if c is not None and c[0] == t and c[1] == dt:
            return c[2]
        self.check_dt(dt)
        dw = self.path.increment(t, t + dt)
        u = self.noise.tangent_values(dw, self._points) / dt
        self._noise_cache = (t, dt, u)
        return u

    def _velocity_values(self, t: float, rho) -> np.ndarray:
        """drift(t, ·, rho) + u_W at the face points (either alone when the other is absent)."""
        if self.drift is None:
            return self._u
        v = super()._velocity_values(t, rho)
        if self.noise is None:
            return v  # the transport checks its shape
        v = np.asarray(v, dtype=float)
        if v.shape != self._u.shape:
            raise ValueError(f"velocity must return an array of shape {self._u.shape}, got {v.shape}")
        return v + self._u

    def _cache_key(self):
        return self._u_key

    def stable_dt(self, rho: np.ndarray, t: float) -> float:
        if self.noise is not None:
            raise ValueError("an adaptive time step cannot be combined with noise (the step would "
                             "depend on the path); give a fixed dt")
        return super().stable_dt(rho, t)

    def prime(self) -> None:
        """Set the noise field's evaluation cache as the steps before t left it (a run continued
        from t > t0: its next step then has the bits of the uninterrupted run; see
        :meth:`NoiseField.prime`)."""
        if self.noise is not None and self.scheme != "ito-euler":
            self.noise.prime(self._points)

    # ---- the step ----------------------------------------------------------------------
    def step(self, rho: np.ndarray, t: float, dt: float) -> np.ndarray:
        """One step from t to t + dt with the path increment over [t, t + dt]: the mean-field
        midpoint step with u_W (frozen over the step) added in both stages."""
        if self.scheme == "ito-euler":
            return self._ito_euler(rho, t, dt)
        if self.noise is not None:
            self._u, self._u_key = self._noise_velocity(t, dt), (t, dt)
        return super().step(rho, t, dt)

    def _ito_euler(self, rho, t, dt):
        """ρ − div_S(ρ P_x ΔW) at the cell centres (demonstration of the wrong calculus)."""
        self.check_dt(dt)
        g = self.grid
        dw = self.path.increment(t, t + dt)
        if isinstance(g, GaussGrid):
            from spherepde.grids.sht import SphericalHarmonics
            if getattr(self, "_sht", None) is None:
                self._sht = SphericalHarmonics(g)
                self._centres = g.xyz.reshape(-1, 3)
                self._basis = east_north_basis(g.lon2d, g.lat2d)
            v = self.noise.tangent_values(dw, self._centres).reshape(g.shape + (3,))
            east = np.sum(v * self._basis[0], axis=-1)
            north = np.sum(v * self._basis[1], axis=-1)
            div = self._sht.synthesise(self._sht.divergence(rho * east, rho * north))
            return rho - div
        x = np.stack([np.cos(g.theta), np.sin(g.theta)], axis=-1)
        v = self.noise.tangent_values(dw, x)
        vt = -v[:, 0] * np.sin(g.theta) + v[:, 1] * np.cos(g.theta)
        k = np.fft.rfftfreq(g.n, d=1.0 / g.n)
        flux = np.fft.rfft(rho * vt)
        return rho - np.fft.irfft(1j * k * flux, n=g.n)


@register_stepper("spde-ffsl")
def spde_ffsl(grid, velocity, **options) -> SPDEFFSL:
    """Stratonovich SPDE with a drift ``velocity(t, x, rho)`` and common noise (``noise=``,
    ``path=``) on a GaussGrid or CircleGrid; build :class:`SPDEFFSL` directly for noise only."""
    if not callable(velocity):
        raise TypeError("velocity must be callable as velocity(t, x, rho)")
    return SPDEFFSL(grid, velocity, **options)
