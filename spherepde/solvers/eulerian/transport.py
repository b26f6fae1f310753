"""Conservative transport ∂_t ρ + div_S(ρ u) = 0 by a prescribed tangent velocity u(t, x).

Scheme (``"ffsl-ppm"``): dimensionally split flux-form semi-Lagrangian finite volumes with
PPM sub-cell profiles, in the spirit of Lin & Rood (1996) — chosen because on a lat–lon grid
its time step is limited by the *meridional* Courant number only: the zonal sweeps take
departure points any number of cells away, so converging meridians near the poles do not
shrink the step.  One step of length Δt (velocity frozen at t + Δt/2, Strang splitting):

    ρ ← Z(Δt/2) ρ,   ρ ← M(Δt) ρ,   ρ ← Z(Δt/2) ρ,

Z: along each latitude ring, the 1-D continuity equation in the longitude index with
   velocity  λ̇ = u_east(φ̃_j) Δφ_j / w_j  (φ̃_j the mid-latitude of the face: the flux through a
   meridian face is ρ ∫u dφ ≈ ρ u(φ̃_j) Δφ_j, finite and second-order even for the ring next
   to the pole, whether u → 0 or not there);
M: along each meridian, in colatitude ϑ, for the mass per unit (λ, ϑ)  ρ cos φ  with
   velocity ϑ̇ = −v_north; the poles are faces of zero length, closed to flux.
Each sweep is exactly conservative, second order in time (frozen midpoint velocity + midpoint
departure points + Strang), third order in space (PPM), and positive with the ``"positive"``
or ``"monotone"`` limiter.  A sweep whose deformation number Δt·max|∂a/∂x| exceeds
``max_lipschitz`` is sub-stepped (ring by ring in Z), never taken silently wrong.

The Courant number is  Δt · max|u| / Δλ  (the grid spacing at the equator, Δλ = π/nlat).
With a positive limiter the round-off negatives a step leaves in emptied cells (differences of
equal fluxes, ~1e-20 of the maximum) are set to exactly 0 (:data:`ROUNDOFF`), so the density is
never negative; the mass changes by less than that round-off.

Polar cap (the default from nlat 8 on, ``FFSLSphere(..., polar="auto")``): after the split step the
first K rings around each pole are overwritten by an unsplit, positive departure-cell remap
rescaled to the cap mass the split step produced (:mod:`.polar_cap`): flow across the poles at
second order (Williamson 1 at α = π/2; the split step alone is first-to-second order there and
does not converge for a hill parked on the pole).  It needs the velocity at the cap vertices
(:attr:`FFSLSphere.cap_points`; :meth:`FFSLSphere.advance` takes them as ``v_cap``).  A cap
whose departure points leave its ``cap_buffer`` rings, or whose departure cells fold, keeps
the split step's values for that step (counted in ``cap_fallbacks``): positive and
conservative either way.  ``polar="split"`` is the scheme above alone.

On :class:`~spherepde.grids.CircleGrid` the same 1-D sweep advances the density on S¹.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.geometry import east_north_basis, lonlat_to_xyz
from spherepde.solvers.eulerian import ffsl, ppm, polar_cap
from spherepde.solvers.eulerian.polar_cap import POLAR
from spherepde.solvers.registry import register_stepper
from spherepde.checks import check_positive

Velocity = Callable[[float, np.ndarray], np.ndarray]
"""A tangent velocity: ``velocity(t, x) -> v`` with x, v of shape (..., d) Cartesian."""

RADIAL_TOL = 1e-8
#: velocities are compared with at least this speed in the tangency check: a field that is zero
#: up to round-off (a radial attention mean projected, |v| ~ 1e-16) has a radial part of the same
#: size, which is not a user's mistake; radial parts above RADIAL_TOL · RADIAL_SCALE are refused
RADIAL_SCALE = 1e-4
#: the midpoint departure rule keeps departure points ordered while L(1 + L/2) < 1, i.e. for
#: deformation numbers L < √3 − 1 ≈ 0.732; sub-stepping keeps L at most this
MAX_LIPSCHITZ = 0.7


#: after a step with a positive limiter, values in [−ROUNDOFF·max|ρ|, 0) are the flux
#: differences' round-off in emptied cells (measured ~1e-20·max) and are set to exactly 0
ROUNDOFF = 1e-14


def _zero_roundoff(q: np.ndarray, limiter: str) -> np.ndarray:
    """q (in place) with its round-off negatives set to 0 (positive limiters only: ``"none"``
    transports signed fields).  Changes the mass by at most ROUNDOFF·max|ρ| per such cell."""
    if limiter != "none":
        q[(q < 0.0) & (q >= -ROUNDOFF * float(np.max(np.abs(q), initial=0.0)))] = 0.0
    return q


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_i a[..., i] b[..., i] over the (short) last axis — bitwise ``np.sum(a * b, axis=-1)``.

    Explicit component products are several times faster than the reduction for d = 2, 3.
    They are added in order like the reduction, which starts from +0: adding +0 at the end
    turns a −0 result (every term −0) into +0 as the reduction does.
    """
    out = a[..., 0] * b[..., 0]
    for i in range(1, a.shape[-1]):
        out += a[..., i] * b[..., i]
    out += 0.0
    return out


def _tangent_components(vec: np.ndarray, xyz: np.ndarray, bases, name="velocity"):
    """Project Cartesian vectors on the given unit bases after checking they are tangent."""
    vec = np.asarray(vec, float)
    if vec.shape != xyz.shape:
        raise ValueError(f"{name} must return an array of shape {xyz.shape}, got {vec.shape}")
    if not np.all(np.isfinite(vec)):
        raise ValueError(f"{name} returned NaN or inf")
    vmax = float(np.sqrt(np.max(_dot(vec, vec), initial=0.0)))
    radial = float(np.max(np.abs(_dot(vec, xyz)), initial=0.0))
    if radial > RADIAL_TOL * max(vmax, RADIAL_SCALE):
        raise ValueError(
            f"{name} has a radial component (max |v·x| = {radial:.3g}, max |v| = {vmax:.3g}); "
            "a velocity on the sphere must be tangent (use P_x v = v − ⟨x, v⟩x)"
        )
    return [_dot(vec, b) for b in bases], vmax


class _FFSLBase:
    name = "ffsl-ppm"
    _dx: float  #: the cell width in index units of the periodic sweeps (set by the subclass)

    def __init__(self, grid, velocity: Velocity, *, limiter: str = "positive",
                 courant: float = 0.8, max_lipschitz: float = 0.5):
        if not callable(velocity):
            raise TypeError("velocity must be callable as velocity(t, x) -> tangent vectors")
        self.grid = grid
        self.velocity = velocity
        self.limiter = ppm.check_limiter(limiter)
        self.courant = check_positive(courant, "courant", upper=4.0)
        self.max_lipschitz = check_positive(max_lipschitz, "max_lipschitz", upper=MAX_LIPSCHITZ)
        self.substeps = 0  # extra sweeps taken because of the deformation limit (diagnostic)

    def options(self) -> dict:
        return {"stepper": self.name, "limiter": self.limiter, "courant": self.courant,
                "max_lipschitz": self.max_lipschitz}

    @property
    def velocity_points(self) -> np.ndarray:
        """Every point where a step needs the velocity (the face points here)."""
        return self.points

    def split_velocities(self, v: np.ndarray):
        """Cartesian velocities at :attr:`velocity_points` → the arguments of :meth:`advance`
        after rho (and the max |v|): :meth:`face_velocities` here."""
        return self.face_velocities(v)

    def stable_dt(self, rho: np.ndarray, t: float) -> float:
        """Δt giving the requested Courant number for the velocity at time t (inf if u ≡ 0)."""
        vmax = self._face_velocities(t)[-1]
        return np.inf if vmax == 0.0 else self.courant * self._dx / vmax

    def courant_number(self, t: float, dt: float) -> float:
        return dt * self._face_velocities(t)[-1] / self._dx

    # ---- defined by FFSLSphere / FFSLCircle ----
    @property
    def points(self) -> np.ndarray:
        """The face points where the transport needs the velocity."""
        raise NotImplementedError

    def face_velocities(self, v: np.ndarray) -> tuple:
        """Cartesian velocities at the face points → face velocities, max |v|."""
        raise NotImplementedError

    def _face_velocities(self, t: float) -> tuple:
        """The face velocities at time t (cached per t), max |v| last."""
        raise NotImplementedError


@register_stepper("ffsl-ppm")
def ffsl_ppm(grid, velocity: Velocity, **options):
    """Dimensionally split FFSL–PPM transport on a GaussGrid (S²) or a CircleGrid (S¹)."""
    if isinstance(grid, GaussGrid):
        return FFSLSphere(grid, velocity, **options)
    if isinstance(grid, CircleGrid):
        for key in ("polar", "cap_rings"):
            if key in options:
                raise ValueError(f"{key} applies to the sphere (GaussGrid) only, not to a CircleGrid")
        return FFSLCircle(grid, velocity, **options)
    raise TypeError(f"grid must be a GaussGrid or CircleGrid, got {type(grid).__name__}")


#: polar="auto" takes the cap from this many latitudes on (2 cap rings per pole), the split below
AUTO_CAP_NLAT = 8
#: rings per pole of the cap when cap_rings is not given (at most nlat/4)
DEFAULT_CAP_RINGS = 4


def resolve_polar(polar, nlat: int, cap_rings=None, limiter: str = "positive") -> tuple[str, int]:
    """``(polar, cap_rings)`` with the defaults filled in: ``"auto"`` is ``"cap"`` on grids of
    at least AUTO_CAP_NLAT latitudes with the default limiter ``"positive"``, and ``"split"``
    below or with the other limiters (the cap is positive but not monotone, and its profiles
    are limited to be ≥ 0, so it cannot carry the signed fields of ``"none"``);
    ``cap_rings`` None is min(DEFAULT_CAP_RINGS, nlat // 4)."""
    if polar == "auto":
        polar = "cap" if nlat >= AUTO_CAP_NLAT and limiter == "positive" else "split"
    if cap_rings is None:
        cap_rings = min(DEFAULT_CAP_RINGS, nlat // 4)
    return polar, cap_rings


def courant_cap_buffer(nlat: int, cap_rings: int, courant: float) -> int:
    """The cap's default buffer, ceil(courant) + 2 rings (at most nlat − cap_rings): a departure
    point moves at most about ``courant`` rings in a step at that Courant number."""
    return min(int(np.ceil(courant)) + 2, nlat - cap_rings)


def check_polar(polar, cap_rings, nlat: int, cap_buffer=None, limiter: str = "positive") -> None:
    """ValueError unless ``polar`` is in POLAR, ``cap_rings`` is None or (for "cap") an integer
    in [2, nlat/4], ``cap_buffer`` is None or an integer in [1, nlat − cap_rings], and "cap"
    comes with a positive limiter."""
    if polar not in POLAR:
        raise ValueError(f"polar must be one of {POLAR}, got {polar!r}")
    if cap_rings is not None and (isinstance(cap_rings, bool)
                                  or not isinstance(cap_rings, (int, np.integer))):
        raise ValueError(f"cap_rings must be None or an integer, got {cap_rings!r}")
    polar, rings = resolve_polar(polar, nlat, cap_rings, limiter)
    if polar == "cap" and limiter == "none":
        raise ValueError("polar='cap' needs a positive limiter ('positive' or 'monotone'): its "
                         "profiles are limited to be ≥ 0, and limiter='none' transports signed "
                         "fields; use polar='split' or 'auto' with limiter='none'")
    if polar == "cap" and not 2 <= rings <= nlat // 4:
        raise ValueError(f"cap_rings must be an integer in [2, nlat/4] = [2, {nlat // 4}] for "
                         f"polar='cap' at nlat {nlat}, got {rings!r}"
                         + (" (polar='cap' needs nlat ≥ 8; use 'split' or 'auto')" if nlat < 8 else ""))
    if cap_buffer is not None and (
            isinstance(cap_buffer, bool) or not isinstance(cap_buffer, (int, np.integer))
            or not 1 <= cap_buffer <= nlat - rings):
        raise ValueError(f"cap_buffer must be None or an integer in [1, nlat − cap_rings] = "
                         f"[1, {nlat - rings}], got {cap_buffer!r}")


class FFSLSphere(_FFSLBase):
    """FFSL–PPM transport on a :class:`GaussGrid`; see the module docstring.

    ``polar``: ``"cap"`` (the first ``cap_rings`` rings around each pole, default
    min(4, nlat/4), by the positive unsplit remap of :mod:`.polar_cap`, with ``cap_buffer``
    rings (default ``ceil(courant) + 2``) that its departure points may reach), ``"split"`` (the
    split step everywhere) or ``"auto"`` (the default: the cap from nlat 8 on, the split on the
    smaller grids, :func:`resolve_polar`); :attr:`polar` is the resolved value.
    """

    def __init__(self, grid: GaussGrid, velocity: Velocity, *, polar: str = "auto",
                 cap_rings: int | None = None, cap_buffer: int | None = None, **options):
        super().__init__(grid, velocity, **options)
        check_polar(polar, cap_rings, grid.nlat, cap_buffer, self.limiter)
        polar, cap_rings = resolve_polar(polar, grid.nlat, cap_rings, self.limiter)
        self.polar = polar
        self.cap_rings = int(cap_rings)
        g = grid
        self._dx = g.dlon
        # face points: zonal faces (λ_{i−1/2}, mid-latitude of the face), meridional faces (λ_i, φ_{j±1/2})
        # the zonal flux through a meridian face is ρ ∫ u dφ: midpoint rule in φ, exact for
        # u linear in φ (so also at the polar rings, where u ∝ colatitude or → const)
        lat_mid = 0.5 * (g.lat_faces[:-1] + g.lat_faces[1:])
        lonz, latz = np.meshgrid(g.lon_faces[:-1], lat_mid, indexing="xy")
        lonm, latm = np.meshgrid(g.lon, g.lat_faces, indexing="xy")
        self._xz = lonlat_to_xyz(lonz, latz)
        self._xm = lonlat_to_xyz(lonm, latm)
        self._east_z = east_north_basis(lonz, latz)[0]
        self._north_m = east_north_basis(lonm, latm)[1]
        self._nz = self._xz.shape[0] * self._xz.shape[1]
        self._points = np.concatenate([self._xz.reshape(-1, 3), self._xm.reshape(-1, 3)])
        # zonal index velocity factor Δφ_j / (w_j Δλ); meridional line in colatitude
        self._zfac = (g.meridian_face_length / (g.weights * g.dlon))[:, None]
        self._line = ffsl.BoundedLine(np.pi / 2 - g.lat_faces)
        self._cache: tuple | None = None
        self._caps: tuple[polar_cap.PolarCap, ...] = ()
        self.cap_fallbacks = 0  # cap remaps replaced by the split step's values (diagnostic)
        if polar == "cap":
            buffer = courant_cap_buffer(g.nlat, self.cap_rings, self.courant) \
                if cap_buffer is None else int(cap_buffer)
            self._caps = tuple(polar_cap.PolarCap(g, self.cap_rings, buffer, s) for s in (1, -1))
            self._cap_points = np.concatenate([c.vertices_xyz for c in self._caps])
            self._velocity_points = np.concatenate([self._points, self._cap_points])

    def options(self) -> dict:
        out = {**super().options(), "polar": self.polar}
        if self.polar == "cap":
            out.update(cap_rings=self.cap_rings, cap_buffer=self._caps[0].B)
        return out

    @property
    def points(self) -> np.ndarray:
        """Face points where velocities are needed: (nlat·nlon + (nlat+1)·nlon, 3)."""
        return self._points

    def face_velocities(self, v: np.ndarray):
        """Cartesian velocities at :attr:`points` → (a_zonal (nlat, nlon) in cells per unit
        time, a_meridional (nlon, nlat+1) in colatitude per unit time, max |v|)."""
        v = np.asarray(v, dtype=float)
        if v.shape != self._points.shape:
            raise ValueError(f"velocity must return an array of shape {self._points.shape} "
                             f"(one Cartesian vector per point), got {v.shape}")
        nz = self._nz
        (u,), vmax1 = _tangent_components(v[:nz].reshape(self._xz.shape), self._xz, [self._east_z])
        (vn,), vmax2 = _tangent_components(v[nz:].reshape(self._xm.shape), self._xm, [self._north_m])
        return u * self._zfac, np.ascontiguousarray(-vn.T), max(vmax1, vmax2)

    @property
    def velocity_points(self) -> np.ndarray:
        """Every point where a step needs the velocity: :attr:`points`, then (``polar="cap"``)
        :attr:`cap_points`."""
        return self._velocity_points if self._caps else self._points

    def split_velocities(self, v: np.ndarray):
        """Cartesian velocities at :attr:`velocity_points` → (a_zonal, a_meridional, max |v|)
        of :meth:`face_velocities`, and with ``polar="cap"`` the velocities at the cap vertices
        (the ``v_cap`` of :meth:`advance`)."""
        if not self._caps:
            return self.face_velocities(v)
        v = np.asarray(v, dtype=float)
        if v.shape != self._velocity_points.shape:
            raise ValueError(f"velocity must return an array of shape {self._velocity_points.shape} "
                             f"(the face points, then the polar-cap vertices), got {v.shape}")
        npt = self._points.shape[0]
        return (*self.face_velocities(v[:npt]), v[npt:])

    def _face_velocities(self, t: float):
        """(a_zonal, a_meridional, max |v|) at time t; the velocity is evaluated once at every
        point of :attr:`velocity_points` and cached with the cap-vertex part."""
        if self._cache is None or self._cache[0] != t:
            self._cache = (t, self.split_velocities(self.velocity(t, self.velocity_points)))
        return self._cache[1][:3]

    def _zonal_plan(self, a: np.ndarray, tau: float):
        """Departure geometry of the zonal sweeps Z(tau) for velocities a (nlat, nlon).

        Rings whose deformation number tau·max|Δa| exceeds ``max_lipschitz`` take nsub_j
        sweeps of tau / nsub_j; sweep k advances the rings with nsub_j > k.  Returns
        (nsub (nlat,), [(rings or None for all, departures), ...] one entry per sweep k).
        """
        nsub = np.maximum(1, np.ceil(tau * ffsl.lipschitz_periodic(a) / self.max_lipschitz)).astype(int)
        sweeps: list[tuple[np.ndarray | None, ffsl.PeriodicDepartures]] = []
        for k in range(int(nsub.max())):
            rows = np.nonzero(nsub > k)[0]
            if rows.size == a.shape[0]:
                sweeps.append((None, ffsl.periodic_departures(a, tau / nsub)))
            else:
                sweeps.append((rows, ffsl.periodic_departures(a[rows], tau / nsub[rows])))
        return nsub, sweeps

    def _zonal(self, q: np.ndarray, plan) -> np.ndarray:
        """Apply the zonal sweeps of :meth:`_zonal_plan` to q (nlat, nlon)."""
        nsub, sweeps = plan
        self.substeps += int(np.sum(nsub - 1))
        for rows, dep in sweeps:
            if rows is None:
                q = ffsl.sweep_periodic_departed(q, dep, self.limiter)
            else:  # never the first sweep (it covers every ring): q is already a new array
                q[rows] = ffsl.sweep_periodic_departed(q[rows], dep, self.limiter)
        return q

    def _meridional(self, rho: np.ndarray, a: np.ndarray, tau: float) -> np.ndarray:
        w = self.grid.weights
        m = np.ascontiguousarray((rho * w[:, None]).T)  # (nlon, nlat) mass per unit λ
        nsub = max(1, int(np.ceil(tau * self._line.lipschitz(a) / self.max_lipschitz)))
        self.substeps += nsub - 1
        for _ in range(nsub):
            m = self._line.sweep(m, a, tau / nsub, self.limiter)
        return m.T / w[:, None]

    @property
    def cap_points(self) -> np.ndarray | None:
        """The polar-cap vertices where the cap needs velocities, (P_cap, 3) (both poles), or
        None with ``polar="split"``."""
        return self._cap_points if self._caps else None

    def advance(self, rho: np.ndarray, az: np.ndarray, am: np.ndarray, dt: float,
                v_cap: np.ndarray | None = None) -> np.ndarray:
        """Transport by frozen face velocities (from :meth:`face_velocities`) over dt (Strang);
        with ``polar="cap"`` also by the frozen Cartesian velocities ``v_cap`` (P_cap, 3) at
        :attr:`cap_points`."""
        if not self._caps:
            return self._advance_split(rho, az, am, dt)
        if v_cap is None:
            raise ValueError("polar='cap': advance needs v_cap, the velocities at cap_points")
        return self._advance_cap(rho, az, am, v_cap, dt)

    def _advance_split(self, rho, az, am, dt):
        # both zonal half-steps have the same velocities and length: same departure points
        zonal = self._zonal_plan(az, 0.5 * dt)
        rho = self._zonal(rho, zonal)
        rho = self._meridional(rho, am, dt)
        return _zero_roundoff(self._zonal(rho, zonal), self.limiter)

    def step(self, rho: np.ndarray, t: float, dt: float) -> np.ndarray:
        """One step of length dt from time t, velocity frozen at t + dt/2."""
        az, am, _ = self._face_velocities(t + 0.5 * dt)
        assert self._cache is not None  # set by _face_velocities
        return self.advance(rho, az, am, dt, *self._cache[1][3:])  # v_cap with polar="cap"

    def _remap_cap(self, cap, mass, v, dt):
        """The cap's remapped masses, or None (counted in :attr:`cap_fallbacks`) where a departure
        point leaves the buffer rings or a departure cell folds: a velocity too rough for the
        cap over dt (a noise increment), for which the split step's own cap values are kept."""
        try:
            return cap.remap(mass, v, dt)
        except polar_cap.CapDepartureError:
            self.cap_fallbacks += 1
            return None

    def _advance_cap(self, rho, az, am, v, dt):
        """Split step on the whole sphere, then each cap's rings from the remap of rho by the
        vertex velocities v, rescaled to the split's cap mass (:func:`polar_cap.fit_cap_mass`)."""
        v = np.asarray(v, dtype=float)
        if v.shape != self._cap_points.shape or not np.all(np.isfinite(v)):
            raise ValueError(f"velocity must return finite values of shape {self._cap_points.shape} "
                             f"at the polar-cap vertices, got shape {v.shape}")
        cellA = self.grid.weights * self.grid.dlon
        mass = rho * cellA[:, None]
        nv = self._caps[0].vertices_xyz.shape[0]
        remapped = [self._remap_cap(cap, mass[cap.rows], v[k * nv:(k + 1) * nv], dt)
                    for k, cap in enumerate(self._caps)]
        scale = float(np.max(np.abs(mass)))
        new = self._advance_split(rho, az, am, dt)
        for cap, m in zip(self._caps, remapped):
            if m is None:  # the cap could not be remapped this step: keep the split's values
                continue
            rows = cap.rows[:self.cap_rings]
            split = new[rows] * cellA[rows, None]
            new[rows] = polar_cap.fit_cap_mass(m, split, scale) / cellA[rows, None]
        return new


class FFSLCircle(_FFSLBase):
    """FFSL–PPM transport on a :class:`CircleGrid` (exactly the zonal sweep of the sphere)."""

    def __init__(self, grid: CircleGrid, velocity: Velocity, **options):
        super().__init__(grid, velocity, **options)
        self._dx = grid.dtheta
        th = grid.theta_faces[:-1]
        self._xf = np.stack([np.cos(th), np.sin(th)], axis=-1)
        self._tf = np.stack([-np.sin(th), np.cos(th)], axis=-1)
        self._cache = None

    @property
    def points(self) -> np.ndarray:
        """Face points θ_{i−1/2} where velocities are needed, (n, 2)."""
        return self._xf

    def face_velocities(self, v: np.ndarray):
        """Cartesian velocities at :attr:`points` → (a (n,) in cells per unit time, max |v|)."""
        (u,), vmax = _tangent_components(v, self._xf, [self._tf])
        return u / self._dx, vmax

    def _face_velocities(self, t: float):
        if self._cache is not None and self._cache[0] == t:
            return self._cache[1:]
        out = self.face_velocities(self.velocity(t, self._xf))
        self._cache = (t,) + out
        return out

    def advance(self, rho: np.ndarray, a: np.ndarray, dt: float) -> np.ndarray:
        """Transport by frozen face velocities a (cells per unit time) over dt."""
        nsub = max(1, int(np.ceil(dt * ffsl.lipschitz_periodic(a[None])[0] / self.max_lipschitz)))
        self.substeps += nsub - 1
        q = rho[None, :]
        for _ in range(nsub):
            q = ffsl.sweep_periodic(q, a[None, :], dt / nsub, self.limiter)
        return _zero_roundoff(q[0], self.limiter)

    def step(self, rho: np.ndarray, t: float, dt: float) -> np.ndarray:
        """One step of length dt from time t, velocity frozen at t + dt/2."""
        a, _ = self._face_velocities(t + 0.5 * dt)
        return self.advance(rho, a, dt)
