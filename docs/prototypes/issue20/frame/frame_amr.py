"""Prototype (issue 20, item 5): the adaptive density in a frame that rotates with the mass.

The mesh of :class:`~spherepde.solvers.eulerian.amr.AMRDensity` stays fixed in frame
coordinates y; the physical point of y at time s is x = R(s) y, R(s) a rotation (the class's
``_R``, fixed for its ``pole`` option, here time-dependent).  Over each (sub-)step [t, t + h]
the frame turns with a constant angular velocity ω (frame components), chosen as the
mass-weighted least-squares rigid rotation of the frame velocity v_i = R(t)ᵀ u(R(t) y_i) at the
leaf centres,

    ω = argmin Σ m_i |v_i − ω × y_i|² = (Σ m_i (|y_i|² I − y_i y_iᵀ) + ε I)⁻¹ Σ m_i y_i × v_i

(ε = RIDGE·Σ m_i: a point cluster leaves the spin about its own axis undetermined), and

    R(s) = R(t)·expm([ω]× (s − t))   (Rodrigues),
    ẏ = R(s)ᵀ u(R(s) y) − ω × y       (so that ẋ = Ṙ y + R ẏ = u(x)).

u is the frozen Stratonovich noise velocity of the run's step, P_x Σ_k σ_k(x) ΔW_k/Δt (ΔW/Δt
of the run's step in every sub-step, as ``noise_substeps = "frozen"``), plus the drift if any.
Heun's first stage evaluates u at R(t) y, its second at R(t + h) y; after the sub-step
R ← R(t + h) (re-orthonormalised).  The positivity bound is AMRDensity's, applied to the frame
velocity.  ``omega_mode``: "substep" fits ω at the start of every sub-step, "step" once per run
step (at its first stage).

The noise at the turned points: AMRDensity tabulates the basis once per mesh (``noise_table``,
K × n); with a moving frame the physical points change every stage, so this evaluates the
field directly, ``noise.values(ΔW/Δt, R y)`` (one field of 3 components instead of the K basis
functions of the table: the same sum, a ninth of the work; :func:`table_cost` measures both),
and reuses a stage's value when the next stage asks at the same (mesh, R).

Prototype only: noise with ``noise_substeps = "frozen"`` on S²; R lives on the object, so a
restart from the state array alone is not supported.
"""
from __future__ import annotations

import math
import time

import numpy as np

from spherepde.solvers.eulerian.amr import _STAGE2, AMRDensity

#: ε of the ω fit, relative to the total mass
RIDGE = 1e-12
OMEGA_MODES = ("substep", "step")


def rodrigues(w: np.ndarray) -> np.ndarray:
    """expm([w]×): the rotation by |w| about w/|w|."""
    th = float(np.linalg.norm(w))
    K = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    if th < 1e-8:
        return np.eye(3) + K + 0.5 * K @ K
    return np.eye(3) + (math.sin(th) / th) * K + ((1.0 - math.cos(th)) / th**2) * K @ K


def orthonormal(R: np.ndarray) -> np.ndarray:
    """The nearest rotation to R (polar factor by SVD)."""
    U, _, Vt = np.linalg.svd(R)
    return U @ Vt


class FrameAMR(AMRDensity):
    """:class:`AMRDensity` whose mesh rotates with the mass (module docstring)."""

    def __init__(self, *args, omega_mode: str = "substep", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.circle or self.noise is None:
            raise ValueError("FrameAMR is a prototype for noise on S²")
        if omega_mode not in OMEGA_MODES:
            raise ValueError(f"omega_mode must be one of {OMEGA_MODES}, got {omega_mode!r}")
        self.omega_mode = omega_mode
        self._R = np.eye(3)  # frame → space, turned every sub-step
        self.angle_path = 0.0  # Σ |ω| h: the angle the frame has turned through
        self.noise_seconds = 0.0  # time in the noise evaluations
        self.noise_evaluations = 0
        self._memo: tuple | None = None  # (mesh, R bytes, coef bytes, frame noise velocity)
        #: which leaves set the sub-step: level of the leaf of min m/outflow -> count, and the
        #: mass (fraction of the total) of those leaves, summed
        self.bound_levels: dict[int, int] = {}
        self.bound_mass = 0.0

    def options(self) -> dict:
        out = super().options()
        out.pop("pole", None)
        out.update(frame="co-moving (prototype FrameAMR)", omega_mode=self.omega_mode)
        return out

    @property
    def angle_net(self) -> float:
        """The angle of the frame's rotation R (from the identity at t = 0)."""
        return float(math.acos(max(-1.0, min(1.0, 0.5 * (np.trace(self._R) - 1.0)))))

    # ---- velocities in the frame ----------------------------------------------------
    def _frame_noise(self, mesh, R: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """Rᵀ u_W(R y) (n, 3) at the leaf centres y: the frozen noise velocity ΔW/Δt evaluated
        at the physical points, turned into the frame."""
        c = self._memo
        key = (R.tobytes(), coef.tobytes())
        if c is not None and c[0] is mesh and c[1] == key:
            return c[2]
        t0 = time.perf_counter()
        x = mesh.xc @ R.T
        v = self.noise.values(coef, x)
        v = v - np.sum(v * x, axis=1, keepdims=True) * x
        out = v @ R
        self.noise_seconds += time.perf_counter() - t0
        self.noise_evaluations += 1
        self._memo = (mesh, key, out)
        return out

    def _frame_velocity(self, mesh, m, t, R, coef, omega=None):
        """Rᵀ u(R y) (noise plus drift, n × 3), minus ω × y when ω is given."""
        v = self._frame_noise(mesh, R, coef)
        if self.velocity is not None:  # the drift at the stage's frame (AMRDensity uses self._R)
            keep, self._R = self._R, R
            try:
                v = v + AMRDensity.leaf_velocity(self, mesh, m, t)
            finally:
                self._R = keep
        return v if omega is None else v - np.cross(omega, mesh.xc)

    def leaf_velocity(self, mesh, m, t, u=None):
        """The frame velocity ``u`` when given (it holds the drift already), else AMRDensity's."""
        return u if u is not None else AMRDensity.leaf_velocity(self, mesh, m, t)

    def noise_velocity(self, mesh, t, dt, coef=None):
        """u_W at the leaf centres in the frame at the current R (AMRDensity's interface)."""
        if coef is None:
            coef = np.asarray(self.path.increment(t, t + dt), float) / dt
        return self._frame_noise(mesh, self._R, np.asarray(coef, float))

    @staticmethod
    def fit_omega(y: np.ndarray, v: np.ndarray, m: np.ndarray) -> np.ndarray:
        """The mass-weighted least-squares rigid rotation ω of the velocities v at y."""
        w = m / m.sum()
        A = np.eye(3) * float(np.sum(w * np.sum(y * y, 1))) - (y * w[:, None]).T @ y
        b = np.sum(w[:, None] * np.cross(y, v), axis=0)
        return np.linalg.solve(A + RIDGE * np.eye(3), b)

    # ---- the step ---------------------------------------------------------------------
    def _step_noise(self, state, t, dt):
        if self.noise_substeps != "frozen":
            raise ValueError("FrameAMR supports noise_substeps = 'frozen' only")
        return super()._step_noise(state, t, dt)

    def _frame_heun(self, mesh, m, t, h, L0, o0, omega, coef, depth=0):
        """SSP-RK2 over [t, t + h] in the frame turning with ω from self._R; halved while a stage
        would break positivity.  Sets self._R = R(t + h); returns the masses."""
        if depth > 40:
            raise RuntimeError(f"FrameAMR: no positive step found at t = {t}")
        R0 = self._R
        if h <= self._dt_pos(m, o0) * (1 + 1e-9):
            R1 = orthonormal(R0 @ rodrigues(omega * h))
            m1 = m + h * L0
            L1, o1 = self.rhs(mesh, m1, t + h, self._frame_velocity(mesh, m1, t + h, R1, coef, omega))
            if h <= _STAGE2 * self._dt_euler(m1, o1):
                self._R = R1
                self.angle_path += float(np.linalg.norm(omega)) * h
                return 0.5 * m + 0.5 * (m1 + h * L1)
        hh = 0.5 * h
        mh = self._frame_heun(mesh, m, t, hh, L0, o0, omega, coef, depth + 1)
        vh = self._frame_velocity(mesh, mh, t + hh, self._R, coef, omega)
        return self._frame_heun(mesh, mh, t + hh, hh, *self.rhs(mesh, mh, t + hh, vh), omega, coef,
                                depth + 1)

    def _advance_frozen(self, mesh, m, steps, t, dt, coef):
        """The frozen field ΔW/Δt (plus the drift) over [t, t + dt] in the fewest equal sub-steps
        within the positivity bound of the frame velocity, each bound recomputed."""
        coef = np.asarray(coef, float)
        left, omega = dt, None
        while True:
            u0 = self._frame_velocity(mesh, m, t, self._R, coef)
            if omega is None or self.omega_mode == "substep":
                omega = self.fit_omega(mesh.xc, u0, m)
            L0, o0 = self.rhs(mesh, m, t, u0 - np.cross(omega, mesh.xc))
            bound = self._dt_pos(m, o0)
            if bound < left:
                pos = np.flatnonzero(o0 > 0)
                i = pos[np.argmin(m[pos] / o0[pos])]
                lev = int(mesh.level[i])
                self.bound_levels[lev] = self.bound_levels.get(lev, 0) + 1
                self.bound_mass += float(m[i] / m.sum())
            n = 1 if left <= bound * (1 + 1e-9) else math.ceil(left / bound)
            h = left / n
            m = self._frame_heun(mesh, m, t, h, L0, o0, omega, coef)
            mesh, m, steps, _ = self._finish_substep(mesh, m, steps, t)
            if n == 1:
                return mesh, m, steps
            t, left = t + h, left - h


def table_cost(stepper: AMRDensity, mesh, coef: np.ndarray, repeat: int = 3) -> dict:
    """Seconds of one tabulation of the noise basis at the mesh's leaf centres (AMRDensity's
    ``noise_table``, what a per-stage table would cost) against one direct evaluation of the
    frozen field (what FrameAMR does per stage), best of ``repeat``."""
    def best(f):
        out = math.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            f()
            out = min(out, time.perf_counter() - t0)
        return out

    def table():
        stepper._table = None
        return stepper.noise_table(mesh)

    noise = stepper.noise
    R = orthonormal(rodrigues(np.array([0.3, -0.2, 0.1])))

    def direct():
        noise.prime(np.full((1, 3), np.nan))
        return noise.values(coef, mesh.xc @ R.T)

    return {"leaves": int(mesh.n), "table_seconds": best(table), "direct_seconds": best(direct)}
