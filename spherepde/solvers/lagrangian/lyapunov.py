"""Benettin's algorithm for the top Lyapunov exponent of a particle flow, as a stepper of the run
loop (:class:`~spherepde.solvers.controller.Controller`).

A pair of tokens (x, y) with |y − x| = δ₀ is moved by one step of the particle system (the
same step, hence the same noise, for both: common noise); the separation δ = |y⁺ − x⁺| is
logged and y⁺ is reset to R(x⁺ + δ₀ (y⁺ − x⁺)/δ) along the same direction.  After n steps of
size h the exponent is λ ≈ Σ_k log(δ_k/δ₀) / (n h).

The state is one array (3, d): rows x, y and (L, 0, …, 0) with L = Σ log(δ_k/δ₀) so far, so the
accumulated log is part of what the loop carries (an interrupted run's
``Controller.result.state`` holds the log of the steps it completed).

The stepper takes the fixed step ``h`` it was built with: the controller's even split of an
interval that is n·h long gives steps τ that equal h up to round-off (a relative 1e-9 at most,
:data:`~spherepde.solvers.controller.SPLIT_RTOL`; checked), and stepping with h itself keeps
the numbers those of a plain loop ``for k in range(n): step(state, k h, h)`` bit for bit.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.solvers.controller import SPLIT_RTOL, StateSpace
from spherepde.solvers.lagrangian.particles import retract


class BenettinStepper:
    """One Benettin step (step the pair, log the separation, renormalise) per controller step.

    Parameters
    ----------
    system : ParticleODE or ParticleSDE
        Its ``step(x, t, h)`` moves the pair (2, d) (both rows with the same noise).
    delta0 : float
        The separation the pair is reset to after every step, > 0.
    h : float
        The fixed step, > 0 (the controller's steps must equal it up to round-off).
    """

    name = "benettin"

    def __init__(self, system, delta0: float, h: float) -> None:
        delta0, h = float(delta0), float(h)
        if not (math.isfinite(delta0) and delta0 > 0):
            raise ValueError(f"delta0 must be a positive finite number, got {delta0}")
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"h must be a positive finite number, got {h}")
        self.system, self.delta0, self.h = system, delta0, h
        self.grid = StateSpace(3, int(system.d))

    def pack(self, x: np.ndarray, y: np.ndarray, log_sum: float = 0.0) -> np.ndarray:
        """The state (3, d) of the pair (x, y) with the accumulated log ``log_sum``."""
        out = np.zeros(self.grid.shape)
        out[0], out[1], out[2, 0] = x, y, log_sum
        return out

    @staticmethod
    def log_sum(state: np.ndarray) -> float:
        """Σ_k log(δ_k/δ₀) over the steps taken so far."""
        return float(state[2, 0])

    def stable_dt(self, state, t):
        raise ValueError("the Benettin stepper takes its fixed step h (give the controller dt=h)")

    def step(self, state: np.ndarray, t: float, dt: float) -> np.ndarray:
        if not abs(dt - self.h) <= 4 * SPLIT_RTOL * self.h:
            raise ValueError(f"the Benettin stepper's step is h = {self.h}, the controller asked "
                             f"for {dt} (give the controller dt=h and an interval of whole steps)")
        pair = self.system.step(state[:2], t, self.h)
        sep = pair[1] - pair[0]
        dist = float(np.linalg.norm(sep))
        out = np.zeros_like(state)
        out[0] = pair[0]
        out[1] = retract(pair[0] + self.delta0 * sep / dist)
        out[2, 0] = state[2, 0] + math.log(dist / self.delta0)
        return out


__all__ = ["BenettinStepper"]
