r"""The N-particle attention ODE on the sphere S^{d−1} (docs/equations.md, Paper 1), for any d ≥ 2.

Tokens :math:`x_1, \dots, x_N \in S^{d-1} \subset \mathbb{R}^d` move by

.. math::

    \dot x_i = X_\beta[\mu^N](x_i), \qquad \mu^N = \sum_j w_j \delta_{x_j},
    \qquad X_\beta[\mu](x) = P_x V m_\beta[\mu](x),

with :math:`w_j = 1/N` by default and :math:`m_\beta` the softmax (or unnormalised) attention
mean of :class:`~spherepde.dynamics.attention.Attention`, which is the one implementation
of the velocity used here (``attention.velocity(x, x, w)``; log-domain, any β including ∞).

Time stepping with retraction
-----------------------------
Write :math:`R(x) = x/|x|` and :math:`\tilde f(x) = f(R(x))` for the velocity
:math:`f(x) = X_\beta[\mu^N](x)`.  A stage of the explicit Runge–Kutta method evaluates the
velocity at the retracted stage point, i.e. it uses :math:`\tilde f`, and the step result is
retracted.  For the classical RK4

.. math::

    k_1 = \tilde f(x),\; k_2 = \tilde f(x + \tfrac{h}{2}k_1),\; k_3 = \tilde f(x + \tfrac{h}{2}k_2),
    \; k_4 = \tilde f(x + h k_3),\qquad
    x_{n+1} = R\big(x + \tfrac{h}{6}(k_1 + 2k_2 + 2k_3 + k_4)\big),

and for RK2 (explicit midpoint) :math:`x_{n+1} = R(x + h\,\tilde f(x + \tfrac{h}{2}\tilde f(x)))`.
(The whole particle configuration is one state in :math:`\mathbb{R}^{N\times d}`; the
measure :math:`\mu^N` at a stage is built from the retracted stage points.)

Why the order is unchanged: :math:`\tilde f` is a smooth extension of the velocity to
:math:`\mathbb{R}^d\setminus 0`, homogeneous of degree 0 and tangent to every sphere
(:math:`\tilde f(x)\cdot x = |x|\, f(R x)\cdot R x = 0`), so the flow of
:math:`\dot x = \tilde f(x)` keeps :math:`|x|` constant and agrees with the flow on the
sphere.  Before the final retraction the scheme is the plain explicit RK method for this
smooth ODE, of order p; its result is :math:`O(h^{p+1})` from the exact solution, hence
:math:`O(h^{p+1})` from the sphere, so the retraction moves it by :math:`O(h^{p+1})` and the
order stays p.  The retraction keeps :math:`|x_i| = 1` to round-off (a few ulps) for all
time, instead of a drift that grows with the number of steps.

Step sizes follow :mod:`spherepde.solvers.controller`: output times (and ``t_end``) are hit
exactly, and what is left before the next output time is split into the fewest equal steps
of size ≤ dt (relative tolerance :data:`~spherepde.solvers.controller.SPLIT_RTOL`).

Cost: one velocity evaluation is :math:`O(N^2 d)` (all pairs, in blocks of targets, float64),
except on S² (d = 3) with B = QᵀK = c·R (R orthogonal), where :meth:`Attention.mean`'s "auto"
takes the spectral (Funk–Hecke) point sums when its cost model finds them cheaper:
:math:`O(N L^2 + L^3)` with :math:`L \approx \sqrt{2\beta c \ln(1/\varepsilon)}` (L = 28 at β = 10,
80 at β = 100), every particle certified to the tolerance or summed directly
(``benchmarks/bench_particles.py``).  RK4 takes 4 evaluations per step, RK2 two.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spherepde.dynamics.attention import torch_sums
from spherepde.dynamics.attention import METHODS as ATTENTION_METHODS
from spherepde.dynamics.attention import Attention
from spherepde.solvers.controller import Controller, StateSpace, _check_time, check_time_span
from spherepde.solvers.trackers import MemoryTracker, ProgressTracker

#: integrator name -> number of velocity evaluations per step
#: the ODE integrators of :class:`ParticleODE` (its ``method``) and their orders
ODE_INTEGRATORS = {"rk4": 4, "rk2": 2}

#: points whose norm differs from 1 by more than this are refused as initial data
SPHERE_TOL = 1e-8

@dataclass(frozen=True, eq=False)
class ParticleResult:
    """Outcome of :meth:`ParticleODE.run`.

    Attributes
    ----------
    times : ndarray, shape (k,)
        Output times reached (all requested ones unless interrupted), exactly as requested.
    positions : ndarray, shape (k, N, d)
        Particle positions at ``times`` (unit vectors).
    n_steps : int
        Time steps taken.
    wall_time : float
        Wall-clock seconds of the run.
    interrupted : bool
        True if the run was stopped by ``KeyboardInterrupt``.
    t : float
        Time of the last completed step (``t_end`` unless interrupted).
    state : ndarray, shape (N, d)
        Positions at ``t`` (useful after an interruption between output times).
    weights : ndarray, shape (N,)
        The particle weights w_i of μ^N.
    method : str
        The integrator ("rk4" or "rk2").
    """

    times: np.ndarray
    positions: np.ndarray
    n_steps: int
    wall_time: float
    interrupted: bool = False
    t: float = math.nan
    state: np.ndarray | None = None
    weights: np.ndarray | None = None
    method: str = "rk4"

    @property
    def n_particles(self) -> int:
        return int(self.positions.shape[1])

    @property
    def d(self) -> int:
        return int(self.positions.shape[2])


def retract(x: np.ndarray) -> np.ndarray:
    """R(x) = x/|x| row-wise, shape (N, d) → (N, d)."""
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class ParticleODE:
    r"""N tokens on :math:`S^{d-1}` moved by their own attention velocity.

    .. math:: \dot x_i = P_{x_i} V m_\beta[\mu^N](x_i), \qquad \mu^N = \sum_j w_j \delta_{x_j}

    Parameters
    ----------
    attention : Attention
        Q, K, V (d×d), β (``math.inf`` allowed) and the normalisation ("softmax" or "usa").
        The dimension d of the tokens is ``attention.d``.
    method : {"rk4", "rk2"}
        Classical RK4 (default) or explicit midpoint RK2, with stages evaluated at retracted
        points and the step retracted to the sphere (module docstring).
    weights : array_like, shape (N,), optional
        Non-negative weights w_i with positive sum; default ``1/N``.  They are used as given
        (not renormalised): with ``kind="softmax"`` only ratios matter, with ``kind="usa"``
        the velocity is proportional to the total mass (1 for the default).  Fixes N.
    block : int, optional
        Targets per block passed to :meth:`Attention.mean` (each temporary holds
        ``block × N`` float64); default: Attention's own default.  A tuning knob only: the
        result does not depend on it beyond round-off.  Smaller blocks (temporaries of
        ~16 MiB, e.g. ``2**21 // N``) can be 2–3× faster at N = 10⁴ when BLAS runs
        single-threaded (``OPENBLAS_NUM_THREADS=1``) and the allocator keeps the freed
        blocks, but not in every environment, so it is not the default.
    attention_method : str, default "auto"
        The ``method`` of :meth:`Attention.mean` (e.g. "torch" or "torch-float32" for PyTorch
        on a GPU; "auto" picks them itself when a GPU is present).
    tol : float in (0, 1), default 1e-8
        The accuracy ``tol`` passed to :meth:`Attention.mean` ("auto" honours it; with a GPU
        and tol ≥ 1e-6·max(1, β‖B‖)·sqrt(max(1, N/2¹⁶)) it takes float32).

    Examples
    --------
    >>> att = Attention(np.eye(3), np.eye(3), np.eye(3), beta=4.0)      # doctest: +SKIP
    >>> res = ParticleODE(att).run(x0, (0.0, 10.0), dt=0.05, output_times=[0, 5, 10])
    >>> res.positions.shape                                           # (3, N, 3)
    """

    def __init__(self, attention: Attention, *, method: str = "rk4", weights=None,
                 block: int | None = None, attention_method: str = "auto",
                 tol: float = 1e-8) -> None:

        if not isinstance(attention, Attention):
            raise TypeError(f"attention must be an Attention, got {type(attention).__name__}")
        if method not in ODE_INTEGRATORS:
            raise ValueError(f"method must be one of {sorted(ODE_INTEGRATORS)}, got {method!r}")
        self.attention: Attention | None = attention  # None only in a ParticleSDE
        self.method = method
        self.weights = None if weights is None else self._check_weights(weights)
        if block is not None and (isinstance(block, bool) or not isinstance(block, (int, np.integer))
                                  or block < 1):
            raise ValueError(f"block must be a positive int or None, got {block!r}")
        self.block = None if block is None else int(block)
        self._set_attention_options(attention_method, tol)
        self.result: ParticleResult | None = None
        self.last_stats: dict = {}  #: what the last attention evaluation did (see velocity)

    def _set_attention_options(self, attention_method: str, tol: float) -> None:
        if attention_method not in ATTENTION_METHODS:
            raise ValueError(f"attention_method must be one of {ATTENTION_METHODS}, "
                             f"got {attention_method!r}")
        if attention_method.startswith("torch") and self.attention is not None:
            torch_sums.require()
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0.0 < tol < 1.0:
            raise ValueError(f"tol must be a number in (0, 1), got {tol!r}")
        self.attention_method, self.tol = attention_method, float(tol)

    @staticmethod
    def _check_weights(weights) -> np.ndarray:
        try:
            w = np.array(weights, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("weights must be a 1-d array of non-negative numbers") from None
        if w.ndim != 1 or w.size == 0:
            raise ValueError(f"weights must be a non-empty 1-d array (one per particle), got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be finite and non-negative")
        if not w.sum() > 0:
            raise ValueError("weights must have a positive sum")
        w.setflags(write=False)
        return w

    @property
    def d(self) -> int:
        """Ambient dimension: tokens live on S^{d−1} ⊂ R^d."""
        assert self.attention is not None  # ParticleSDE overrides d
        return self.attention.d

    @property
    def n_evals_per_step(self) -> int:
        return ODE_INTEGRATORS[self.method]

    def _weights_for(self, n: int) -> np.ndarray:
        if self.weights is None:
            return np.full(n, 1.0 / n)
        if self.weights.shape[0] != n:
            raise ValueError(f"x0 has {n} particles but weights has {self.weights.shape[0]} entries")
        return self.weights

    def _check_x(self, x, name: str = "x0") -> np.ndarray:
        if np.iscomplexobj(x):
            raise ValueError(f"{name} must be real")
        try:
            a = np.array(x, dtype=np.float64)  # a copy: the caller's array is never touched
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a real array of shape (N, {self.d})") from None
        d = self.d
        if a.ndim != 2 or a.shape[1] != d or a.shape[0] < 1:
            raise ValueError(
                f"{name} must have shape (N, d) with N >= 1 and d = attention.d = {d} "
                f"(points on S^{d - 1}), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite (it contains NaN or inf)")
        dev = float(np.max(np.abs(np.linalg.norm(a, axis=1) - 1.0)))
        if dev > SPHERE_TOL:
            raise ValueError(
                f"{name}: points must lie on the unit sphere (max ||x| - 1| = {dev:.3g} > "
                f"{SPHERE_TOL:g}); normalise them first")
        return a

    # ---- the right-hand side and one step -------------------------------------------------
    def velocity(self, x: np.ndarray) -> np.ndarray:
        r"""The velocity :math:`X_\beta[\mu^N](x_i)` of every particle, shape (N, d).

        ``x`` (N, d) are the particle positions (unit vectors); μ^N is built from them.
        What the attention evaluation did (:meth:`Attention.mean_and_stats`) is recorded in
        ``last_stats``.
        """
        x = np.asarray(x, dtype=np.float64)
        att = self.attention
        assert att is not None  # a ParticleSDE without attention has velocity 0 (its own)
        block = {} if self.block is None else {"block": self.block}
        m, self.last_stats = att.mean_and_stats(x, x, self._weights_for(x.shape[0]),
                                                method=self.attention_method, tol=self.tol, **block)
        return att.velocity_from_mean(x, m)

    def _f(self, x: np.ndarray) -> np.ndarray:
        """f̃(x) = f(R(x)): the velocity at the retracted points."""
        return self.velocity(retract(x))

    def step(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        """One step of size ``dt`` from positions ``x`` (N, d) at time ``t``; returns (N, d).

        The system is autonomous, so ``t`` is not used (it is part of the stepper interface).
        ``x`` is not modified; the result is retracted onto the sphere.
        """
        h = float(dt)
        if self.method == "rk4":
            k1 = self._f(x)
            k2 = self._f(x + (0.5 * h) * k1)
            k3 = self._f(x + (0.5 * h) * k2)
            k4 = self._f(x + h * k3)
            return retract(x + (h / 6.0) * (k1 + 2.0 * (k2 + k3) + k4))
        k1 = self._f(x)
        k2 = self._f(x + (0.5 * h) * k1)
        return retract(x + h * k2)

    # ---- the run loop -----------------------------------------------------------------
    def run(
        self,
        x0,
        t_span: tuple[float, float],
        *,
        dt: float,
        output_times: Sequence[float] | None = None,
        progress: bool = False,
    ) -> ParticleResult:
        """Integrate from ``t_span[0]`` to ``t_span[1]`` with steps of at most ``dt``.

        The loop is the one run loop of the package (:class:`~spherepde.solvers.controller.Controller`,
        with this system as its stepper on a state of shape (N, d)), so particles and densities
        take the same steps between the same output times.

        Parameters
        ----------
        x0 : array_like, shape (N, d)
            Initial positions, d = ``attention.d``, unit vectors (``||x| − 1| <= 1e-8``; they
            are renormalised to round-off).  Copied, never modified.
        t_span : (float, float)
            ``(t0, t_end)`` with ``t_end > t0``.
        dt : float
            Largest step, ``> 0``.  Each interval between consecutive output times is split
            into the fewest equal steps of size ``<= dt``.
        output_times : sequence of float, optional
            Strictly increasing times in ``[t0, t_end]`` at which positions are stored, hit
            exactly; default ``(t0, t_end)``.  ``t_end`` is reached even if it is not listed.
        progress : bool
            Show a tqdm progress bar (over model time) on stderr.

        Returns
        -------
        ParticleResult
            Also stored as ``self.result``.

        Raises
        ------
        ValueError, TypeError
            Bad input, before any work.
        KeyboardInterrupt
            Re-raised after ``self.result`` is set to the partial run (``interrupted=True``,
            the output times reached so far, and the last completed step in ``t``/``state``).
        FloatingPointError
            The positions became NaN or inf.
        """
        x = self._check_x(x0)
        w = self._weights_for(x.shape[0]).copy()
        x = retract(x)
        check_time_span(t_span, output_times)
        h = _check_time("dt", dt)
        if h <= 0:
            raise ValueError(f"dt must be > 0, got {h}")
        snaps = MemoryTracker(name="positions")
        desc = f"particles ({self.method})"
        trackers = [snaps] + ([ProgressTracker(disable=False, desc=desc)] if progress else [])
        controller = Controller(ParticleStepper(self, x.shape[0]), trackers, dt=h)
        self.result = None

        def result(res, interrupted: bool) -> ParticleResult:
            kept = snaps.result
            return ParticleResult(times=kept["time"], positions=kept["state"], n_steps=res.n_steps,
                                  wall_time=res.wall_time, interrupted=interrupted, t=res.t,
                                  state=np.array(res.state, copy=True), weights=w, method=self.method)

        try:
            res = controller.run(x, t_span, output_times=output_times)
        except KeyboardInterrupt as err:
            self.result = result(controller.result, interrupted=True)
            err.add_note(
                f"spherepde: particle run interrupted at t={self.result.t} after "
                f"{self.result.n_steps} steps; partial result in ParticleODE.result")
            raise
        self.result = result(res, interrupted=False)
        return self.result

    def __repr__(self) -> str:
        a = self.attention
        assert a is not None  # ParticleSDE has its own __repr__
        return f"ParticleODE(d={a.d}, beta={a.beta}, kind={a.kind!r}, method={self.method!r})"


class ParticleStepper:
    """A :class:`ParticleODE`/:class:`ParticleSDE` as a controller stepper: state (N, d), fixed
    steps only (``step`` is the particle system's own, retracted to the sphere)."""

    name = "particles"

    def __init__(self, system: ParticleODE, n: int) -> None:
        self.system = system
        self.grid = StateSpace(n, system.d)

    def stable_dt(self, x, t):
        raise ValueError("particles take the fixed step of stepping.dt / stepping.courant")

    def step(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        return self.system.step(x, t, dt)


__all__ = ["ODE_INTEGRATORS", "ParticleODE", "ParticleResult", "ParticleStepper", "retract"]
