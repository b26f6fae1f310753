"""The time loop: drive a stepper from ``t0`` to ``t_end`` and show the state to trackers.

The loop (py-pde style)::

    trackers.initialize(rho0, t0, info)
    for each target in sorted(output_times ∪ {t_end}):
        while t < target:
            h   = dt  (fixed)  or  stepper.stable_dt(rho, t)
            n   = max(1, ceil((target − t) / h · (1 − 1e-9)))
            τ   = (target − t) / n              # even split of what is left
            rho = stepper.step(rho, t, τ);  t = target if n == 1 else t + τ
            trackers.on_step(t)
        if target is an output time: trackers.handle(rho, target)
    trackers.finalize()                 # after trackers.abort(error) if the loop raised

The loop is a :class:`Lane` advanced target by target; :func:`run_lanes` advances several
lanes (the representations of one run) in step, so an interrupt leaves them all at the same
last output time, and each takes exactly the steps it would take alone.

Step-size policy (even splitting)
---------------------------------
Output times and ``t_end`` are hit exactly (``t`` is *set* to the target on the last step, so
there are no time offsets).  Instead of a full step followed by a short remainder, what is
left before the next target is split into ``n`` equal steps, the fewest with ``τ <= h``.
Hence every step satisfies ``h/2 < τ <= h·(1 + 1e-9)`` unless the whole interval to the next
target is shorter than ``h`` — there is never a tiny last step, and a step exceeds the stable
step ``h`` by at most a relative ``1e-9`` (round-off in ``(target − t)/h``).  With a fixed
``dt`` that divides the output intervals, every step is ``dt`` (up to round-off).

Interruption
------------
On ``KeyboardInterrupt`` (Ctrl-C) anywhere in the loop, every started tracker is finalized
(files are closed and valid), :attr:`Controller.result` is set to a :class:`RunResult` with
``interrupted=True`` (the last completed step), and the ``KeyboardInterrupt`` is re-raised:
a library call should not swallow Ctrl-C; a command line catches it and reads
``controller.result``.  Any other exception also finalizes the trackers, then propagates.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers.trackers import TRACKERS, Tracker

#: relative tolerance of the even split: (target − t)/h = k·(1 + δ) with δ <= this gives k steps
SPLIT_RTOL = 1e-9


@runtime_checkable
class Stepper(Protocol):
    """What the controller needs from a time stepper."""

    name: str

    @property
    def grid(self) -> GaussGrid | CircleGrid | StateSpace:
        """The state's space: a grid, or a :class:`StateSpace` (the controller reads its shape)."""

    def stable_dt(self, rho: np.ndarray, t: float) -> float:
        """Largest stable step at ``(rho, t)``."""

    def step(self, rho: np.ndarray, t: float, dt: float) -> np.ndarray:
        """One step of size ``dt`` from ``(rho, t)``; returns a new array."""


@dataclass(frozen=True, eq=False)
class RunResult:
    """Outcome of :meth:`Controller.run`.

    Attributes
    ----------
    state : ndarray
        Final state, shape ``grid.shape`` (the last completed step if interrupted).
    t : float
        Its time (``t_end`` unless interrupted).
    n_steps : int
        Steps taken.
    wall_time : float
        Wall-clock seconds of the run, trackers included.
    interrupted : bool
        True if the run was stopped by ``KeyboardInterrupt``.
    trackers : dict
        ``tracker.name -> tracker.result``.
    step_time : float
        Wall-clock seconds inside ``stepper.step`` alone.
    """

    state: np.ndarray
    t: float
    n_steps: int
    wall_time: float
    interrupted: bool = False
    trackers: dict[str, Any] = field(default_factory=dict)
    step_time: float = 0.0


def _check_time(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def check_time_span(t_span, output_times) -> tuple[float, float, np.ndarray]:
    """Validate ``t_span = (t0, t_end)`` and ``output_times`` (default ``[t0, t_end]``):
    finite, t_end > t0, output times strictly increasing inside [t0, t_end].  Returns
    (t0, t_end, output times).  Shared by every time loop (densities and particles)."""
    try:
        t0, t_end = t_span
    except (TypeError, ValueError):
        raise ValueError(f"t_span must be a pair (t0, t_end), got {t_span!r}") from None
    t0, t_end = _check_time("t_span[0]", t0), _check_time("t_span[1]", t_end)
    if not t_end > t0:
        raise ValueError(f"t_span: t_end must be > t0, got t_span=({t0}, {t_end})")
    if output_times is None:
        return t0, t_end, np.array([t0, t_end])
    outs = np.atleast_1d(np.asarray(output_times, dtype=float))
    if outs.ndim != 1 or outs.size == 0:
        raise ValueError("output_times must be a non-empty 1-d sequence of times")
    if not np.all(np.isfinite(outs)):
        raise ValueError("output_times must be finite")
    if np.any(np.diff(outs) <= 0):
        raise ValueError("output_times must be strictly increasing")
    if outs[0] < t0 or outs[-1] > t_end:
        raise ValueError(
            f"output_times must lie within t_span=[{t0}, {t_end}], got [{outs[0]}, {outs[-1]}]")
    return t0, t_end, outs


def even_steps(remaining: float, h: float) -> int:
    """The fewest equal steps ≤ h (up to SPLIT_RTOL) that cover ``remaining``."""
    return max(1, math.ceil(remaining / h * (1.0 - SPLIT_RTOL)))


def next_step(t: float, target: float, h: float) -> tuple[float, float]:
    """The next step (τ, t + τ) from t towards ``target`` with steps of at most h, split evenly;
    the last step lands on ``target`` exactly.  Raises RuntimeError if τ underflows."""
    remaining = target - t
    n = even_steps(remaining, h)
    tau = remaining / n
    t_new = target if n == 1 else t + tau
    if not t_new > t:
        raise RuntimeError(f"step {tau} underflows at t={t}")
    return tau, t_new


class StateSpace:
    """The ``grid`` of a state that is not a field on a grid — particles (N, d), weighted points
    packed as rows (M, 4) — for the controller: only its ``shape``."""

    def __init__(self, *shape: int) -> None:
        self.shape = tuple(int(s) for s in shape)

    def __eq__(self, other) -> bool:
        return isinstance(other, StateSpace) and other.shape == self.shape

    def __repr__(self) -> str:
        return f"StateSpace{self.shape}"


class Controller:
    """Run a stepper over a time span, showing the state to trackers at output times.

    Parameters
    ----------
    stepper : Stepper
        Has ``grid``, ``step(rho, t, dt)`` and ``stable_dt(rho, t)`` (see :class:`Stepper`).
    trackers : Tracker, str or iterable of them
        Called in the given order; a ``str`` is looked up in
        :data:`~spherepde.solvers.trackers.TRACKERS` and built without arguments.  Result
        names must be unique.
    dt : float, optional
        Fixed step, ``> 0``.  If None, ``stepper.stable_dt(rho, t)`` is asked before every
        step.  Either way steps are shortened to land on output times (module docstring).
        With a fixed ``dt`` ``stable_dt`` is never called.
    max_steps : int, optional
        Refuse to take more steps than this (``RuntimeError``, trackers finalized).

    Attributes
    ----------
    result : RunResult or None
        Result of the last run, also set when it was interrupted.
    """

    def __init__(
        self,
        stepper: Stepper,
        trackers: Tracker | str | Iterable[Tracker | str] = (),
        *,
        dt: float | None = None,
        max_steps: int | None = None,
    ) -> None:
        if not (callable(getattr(stepper, "step", None)) and hasattr(stepper, "grid")):
            raise TypeError("stepper must have a grid and a step(rho, t, dt) method")
        if dt is not None:
            dt = _check_time("dt", dt)
            if dt <= 0:
                raise ValueError(f"dt must be > 0, got {dt}")
        elif not callable(getattr(stepper, "stable_dt", None)):
            raise TypeError("dt is None, so the stepper needs a stable_dt(rho, t) method")
        if max_steps is not None:
            if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)):
                raise TypeError(f"max_steps must be an int or None, got {max_steps!r}")
            if max_steps < 1:
                raise ValueError(f"max_steps must be >= 1, got {max_steps}")
            max_steps = int(max_steps)
        self.stepper = stepper
        self.trackers = self._build_trackers(trackers)
        self.dt = dt
        self.max_steps = max_steps
        self.result: RunResult | None = None

    @staticmethod
    def _build_trackers(trackers: Tracker | str | Iterable[Tracker | str]) -> list[Tracker]:
        if isinstance(trackers, (Tracker, str)):
            trackers = [trackers]
        out: list[Tracker] = []
        for tr in trackers:
            if isinstance(tr, str):
                if tr not in TRACKERS:
                    raise ValueError(f"trackers: unknown tracker {tr!r}; registered: {sorted(TRACKERS)}")
                tr = TRACKERS[tr]()
            if not isinstance(tr, Tracker):
                raise TypeError(f"trackers must be Tracker instances or names, got {type(tr).__name__}")
            out.append(tr)
        names = [tr.name for tr in out]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"trackers: names must be unique, repeated {dupes} (pass name=...)")
        return out

    # ---- validation --------------------------------------------------------------------
    def _validate(
        self, rho0: Any, t_span: Sequence[float], output_times: Sequence[float] | np.ndarray | None
    ) -> tuple[np.ndarray, float, float, np.ndarray]:
        t0, t_end, outs = check_time_span(t_span, output_times)

        if np.iscomplexobj(rho0):
            raise TypeError("rho0 must be real")
        try:
            rho = np.array(rho0, dtype=np.float64)  # a copy: the caller's array is never touched
        except (TypeError, ValueError) as err:
            raise TypeError(f"rho0 must be a real array: {err}") from None
        shape = tuple(self.stepper.grid.shape)
        if rho.shape != shape:
            raise ValueError(f"rho0 has shape {rho.shape}, the stepper's grid needs {shape}")
        if not np.all(np.isfinite(rho)):
            raise ValueError("rho0 must be finite (it contains NaN or inf)")
        return rho, t0, t_end, outs

    def _step_size(self, rho: np.ndarray, t: float) -> float:
        if self.dt is not None:
            return self.dt
        h = self.stepper.stable_dt(rho, t)
        try:
            h = float(h)
        except (TypeError, ValueError):
            raise TypeError(f"stepper.stable_dt returned {h!r}, not a number") from None
        if not (math.isfinite(h) and h > 0):
            raise RuntimeError(f"stepper.stable_dt returned {h} at t={t}; need a finite step > 0")
        return h

    # ---- the loop ----------------------------------------------------------------------
    def start(
        self,
        rho0: np.ndarray,
        t_span: tuple[float, float],
        *,
        output_times: Sequence[float] | np.ndarray | None = None,
    ) -> Lane:
        """Validate the input and initialize the trackers; the returned :class:`Lane` then
        advances on demand (:meth:`Lane.advance`).  :meth:`run` is ``start`` followed by
        advancing through every target; :func:`run_lanes` advances several lanes in step."""
        return Lane(self, *self._validate(rho0, t_span, output_times))

    def run(
        self,
        rho0: np.ndarray,
        t_span: tuple[float, float],
        *,
        output_times: Sequence[float] | np.ndarray | None = None,
    ) -> RunResult:
        """Integrate from ``t_span[0]`` to ``t_span[1]``.

        Parameters
        ----------
        rho0 : ndarray
            Initial state, shape ``stepper.grid.shape``, finite (copied, never modified).
        t_span : (float, float)
            ``(t0, t_end)`` with ``t_end > t0``.
        output_times : sequence of float, optional
            Strictly increasing times in ``[t0, t_end]`` at which trackers ``handle`` the
            state; default ``(t0, t_end)``.  ``t_end`` is reached even if it is not listed.

        Returns
        -------
        RunResult

        Raises
        ------
        ValueError, TypeError
            Bad input, before any work (nothing is created).
        KeyboardInterrupt
            Re-raised after the trackers are finalized; ``self.result`` holds the partial run.
        FloatingPointError
            The stepper produced NaN or inf (trackers finalized first).
        RuntimeError
            ``max_steps`` exceeded or an invalid ``stable_dt``.
        """
        return run_lanes([self.start(rho0, t_span, output_times=output_times)])[0]



def interrupt_inside(err: SystemError) -> BaseException:
    """The KeyboardInterrupt (Ctrl-C, or SIGTERM as :class:`~spherepde.cli.Terminated`) behind a
    SystemError, else the SystemError itself.  A signal handler that raises while a compiled
    (numba) kernel returns makes CPython report "returned a result with an exception set",
    with the interrupt as its cause; the run must stop as interrupted, not fail."""
    inner = err.__cause__ or err.__context__
    return inner if isinstance(inner, KeyboardInterrupt) else err

class Lane:
    """One controller's run, advanced target by target (made by :meth:`Controller.start`).

    ``targets`` are the output times and ``t_end`` (sorted); :meth:`advance` steps to the next
    one and shows the state to the trackers if it is an output time; :meth:`close` finalizes
    the trackers (after ``abort(error)``) and sets ``controller.result``.  Several lanes advanced
    in step (:func:`run_lanes`) take exactly the steps each would take alone: the steps of an
    interval depend only on its two ends and the step size (:func:`next_step`).
    """

    def __init__(self, controller: Controller, rho: np.ndarray, t0: float, t_end: float,
                 outs: np.ndarray) -> None:
        self.controller, self.state, self.t, self.n_steps = controller, rho, t0, 0
        targets = np.union1d(outs, [t_end])
        self.targets = targets.tolist()
        self._is_output = dict(zip(self.targets, np.isin(targets, outs).tolist()))
        self.wall_time = self.step_time = 0.0
        self._started: list[Tracker] = []
        controller.result = None
        info = {
            "grid": controller.stepper.grid,
            "stepper": getattr(controller.stepper, "name", type(controller.stepper).__name__),
            "t_span": (t0, t_end),
            "output_times": outs.copy(),
            "dt": controller.dt,
        }
        try:
            for tr in controller.trackers:
                self._started.append(tr)
                tr.initialize(rho, t0, info)
        except BaseException as err:
            self.close(err)
            raise

    @property
    def done(self) -> bool:
        """True when every target has been reached."""
        return not self.targets

    def advance(self, target: float) -> None:
        """Step from ``t`` to ``target`` (the next of :attr:`targets`) and hand the state to the
        trackers there if it is an output time."""
        if not self.targets or target != self.targets[0]:
            raise ValueError(f"advance: the next target is {self.targets[:1]}, not {target}")
        ctl, wall0 = self.controller, time.perf_counter()
        rho, t = self.state, self.t
        try:
            while t < target:
                if ctl.max_steps is not None and self.n_steps >= ctl.max_steps:
                    raise RuntimeError(f"max_steps={ctl.max_steps} reached at t={t} < {target}")
                tau, t_new = next_step(t, target, ctl._step_size(rho, t))
                step0 = time.perf_counter()
                new = np.asarray(ctl.stepper.step(rho, t, tau))
                self.step_time += time.perf_counter() - step0
                if new.shape != rho.shape:
                    raise RuntimeError(f"stepper.step returned shape {new.shape}, expected {rho.shape}")
                if not np.all(np.isfinite(new)):
                    raise FloatingPointError(
                        f"the state became non-finite in the step from t={t} to t={t_new}"
                    )
                rho, t = new, t_new
                self.state, self.t = rho, t
                self.n_steps += 1
                for tr in ctl.trackers:
                    tr.on_step(t)
            self.targets.pop(0)
            if self._is_output[target]:
                for tr in ctl.trackers:
                    tr.handle(rho, t)
        except SystemError as err:
            raise interrupt_inside(err) from None
        finally:
            self.wall_time += time.perf_counter() - wall0

    def result(self, interrupted: bool) -> RunResult:
        """The run so far as a :class:`RunResult`."""
        return RunResult(state=self.state, t=self.t, n_steps=self.n_steps,
                         wall_time=self.wall_time, interrupted=interrupted,
                         trackers={tr.name: tr.result for tr in self.controller.trackers},
                         step_time=self.step_time)

    def close(self, pending: BaseException | None = None) -> RunResult:
        """Finalize the started trackers (after ``abort(pending)``); set and return the
        controller's result (``interrupted`` when ``pending`` is a KeyboardInterrupt).  Without
        ``pending``, the first tracker failure is raised."""
        started, self._started = self._started, []
        errors = _finalize(started, pending)
        if pending is None and errors:
            raise errors[0]
        result = self.result(interrupted=isinstance(pending, KeyboardInterrupt))
        if pending is None or isinstance(pending, KeyboardInterrupt):
            self.controller.result = result
        return result


def run_lanes(lanes: Sequence[Lane]) -> list[RunResult]:
    """Advance ``lanes`` in step: through the sorted union of their targets, each lane (in the
    given order) advances to a time when it is its next target.  An interrupt (or error)
    therefore leaves every lane at its last target before that time.  Every lane is closed at
    the end, on error too (KeyboardInterrupt: each lane's ``controller.result`` is its partial
    run, and the interrupt is re-raised with a note).  Returns the lanes' results."""
    times = sorted(set().union(*(lane.targets for lane in lanes)))
    try:
        for target in times:
            for lane in lanes:
                if lane.targets and lane.targets[0] == target:
                    lane.advance(target)
    except KeyboardInterrupt as err:
        for lane in lanes:
            lane.close(err)
        at = ", ".join(f"t={lane.t} after {lane.n_steps} steps" for lane in lanes)
        err.add_note(f"spherepde: run interrupted at {at}; trackers finalized, "
                     "partial result in Controller.result")
        raise
    except BaseException as err:
        for lane in lanes:
            lane.close(err)
        raise
    results, errors = [], []
    for lane in lanes:
        try:
            results.append(lane.close())
        except Exception as e:  # noqa: BLE001 - close the other lanes first
            errors.append(e)
    if errors:
        raise errors[0]
    return results


def _finalize(trackers: list[Tracker], pending: BaseException | None) -> list[Exception]:
    """Finalize every tracker even if some fail (after ``abort(pending)`` when the run ended
    with the exception ``pending``); failures are noted on ``pending``."""
    errors: list[Exception] = []
    for tr in trackers:
        hooks = ((tr.abort, (pending,)),) if pending is not None else ()
        for hook, hook_args in (*hooks, (tr.finalize, ())):
            try:
                hook(*hook_args)
            except Exception as e:  # noqa: BLE001 - keep finalizing the others
                errors.append(e)
                if pending is not None:
                    pending.add_note(f"tracker {tr.name!r} failed to {hook.__name__}: {e!r}")
    return errors


__all__ = ["Controller", "Lane", "RunResult", "interrupt_inside", "run_lanes", "Stepper", "SPLIT_RTOL",
           "check_time_span", "even_steps", "next_step"]
