"""Trackers: objects the :class:`~spherepde.solvers.controller.Controller` shows the state to.

A tracker's life during one run (py-pde style)::

    initialize(state, t0, info)     once, before the first step, with the initial state
    handle(state, t)                at every output time, in the order the trackers were given
    on_step(t)                      after every step (cheap hook; only progress bars use it)
    abort(error)                    when the run stops on Ctrl-C, SIGTERM or an error, just
                                    before finalize (files record that they are incomplete)
    finalize()                      once, always — also after Ctrl-C or an error — so files close

``result`` returns what the tracker collected.  Trackers are registered by name in
:data:`TRACKERS` (see :func:`register_tracker`), so the controller accepts a name for
trackers that need no arguments and tests can loop over all of them.

Trackers must not modify the state they are shown; those that keep it store a copy.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid

Grid = GaussGrid | CircleGrid

#: name -> tracker class
TRACKERS: dict[str, type[Tracker]] = {}


def register_tracker(cls: type[Tracker]) -> type[Tracker]:
    """Class decorator: register ``cls`` in :data:`TRACKERS` under ``cls.name``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} needs a non-empty class attribute 'name'")
    if name in TRACKERS and TRACKERS[name] is not cls:
        raise ValueError(f"a tracker named {name!r} is already registered ({TRACKERS[name]})")
    TRACKERS[name] = cls
    return cls


def cell_measure(grid: Grid) -> np.ndarray:
    """Cell areas (GaussGrid, shape (nlat, nlon)) or cell lengths (CircleGrid, shape (n,))."""
    return grid.cell_area if isinstance(grid, GaussGrid) else grid.cell_length


class Tracker:
    """Base class; subclasses override the hooks they need.

    Parameters
    ----------
    name : str, optional
        Key of this tracker's result in ``RunResult.trackers``; defaults to the class's
        registry name.  Give two trackers of the same class different names.
    """

    name: str = "tracker"

    def __init__(self, *, name: str | None = None) -> None:
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ValueError(f"name must be a non-empty str, got {name!r}")
            self.name = name

    def initialize(self, state: np.ndarray, t: float, info: Mapping[str, Any]) -> None:
        """Called once before the first step.

        ``info`` holds ``grid``, ``stepper`` (its name), ``t_span``, ``output_times`` and
        ``dt`` (None when the stepper's stable step is used).
        """

    def handle(self, state: np.ndarray, t: float) -> None:
        """Called at every output time ``t`` with the state at exactly that time."""

    def on_step(self, t: float) -> None:
        """Called after every step with the new time (keep it cheap)."""

    def abort(self, error: BaseException) -> None:
        """Called before :meth:`finalize` when the run ends with ``error`` (KeyboardInterrupt
        included) instead of reaching ``t_end``."""

    def finalize(self) -> None:
        """Called once at the end of the run, whether it succeeded or not."""

    @property
    def result(self) -> Any:
        """What the tracker collected (None for trackers that only have side effects)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


@register_tracker
class MemoryTracker(Tracker):
    """Keep a copy of the state at every output time (for tests and small runs).

    ``result`` is ``{"time": (n,) array, "state": (n, *grid.shape) array}``.
    """

    name = "memory"

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.times: list[float] = []
        self.states: list[np.ndarray] = []

    def initialize(self, state, t, info) -> None:
        self.times, self.states = [], []
        self._shape = np.shape(state)

    def handle(self, state, t) -> None:
        self.times.append(float(t))
        self.states.append(np.array(state, copy=True))

    @property
    def result(self) -> dict[str, np.ndarray]:
        shape = getattr(self, "_shape", (0,))
        states = np.stack(self.states) if self.states else np.empty((0, *shape))
        return {"time": np.array(self.times, dtype=float), "state": states}


@register_tracker
class DiagnosticsTracker(Tracker):
    r"""Record scalar diagnostics at every output time.

    Built in: ``time``, ``mass`` :math:`M(t) = \int \rho\,d\sigma \approx \sum_c \rho_c |c|`
    (cell areas on S², cell lengths on S¹), ``min``, ``max`` and
    ``rel_mass_error`` :math:`(M(t) - M(t_0)) / |M(t_0)|` (the absolute error if
    :math:`M(t_0) = 0`), :math:`t_0` being the start of the run.

    Parameters
    ----------
    extra : dict, optional
        More diagnostics, ``name -> f(state, t) -> float``; names must not clash with the
        built-in ones.
    name : str, optional
        Result key (default ``"diagnostics"``).

    ``result`` is a dict ``name -> (n,) float array``.
    """

    name = "diagnostics"
    BUILTIN = ("time", "mass", "min", "max", "rel_mass_error")

    def __init__(
        self,
        extra: Mapping[str, Callable[[np.ndarray, float], float]] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        extra = dict(extra or {})
        for k, f in extra.items():
            if k in self.BUILTIN or not isinstance(k, str):
                raise ValueError(f"extra: name {k!r} clashes with a built-in diagnostic {self.BUILTIN}")
            if not callable(f):
                raise TypeError(f"extra[{k!r}] must be callable f(state, t) -> float")
        self.extra = extra
        self._data: dict[str, list[float]] = {k: [] for k in (*self.BUILTIN, *extra)}

    def initialize(self, state, t, info) -> None:
        self._measure = cell_measure(info["grid"])
        self.mass0 = self._mass(state)
        self._data = {k: [] for k in (*self.BUILTIN, *self.extra)}

    def _mass(self, state: np.ndarray) -> float:
        return float(np.sum(state * self._measure))

    def handle(self, state, t) -> None:
        m = self._mass(state)
        d = self._data
        d["time"].append(float(t))
        d["mass"].append(m)
        d["min"].append(float(np.min(state)))
        d["max"].append(float(np.max(state)))
        d["rel_mass_error"].append((m - self.mass0) / abs(self.mass0) if self.mass0 else m - self.mass0)
        for k, f in self.extra.items():
            d[k].append(float(f(state, t)))

    @property
    def result(self) -> dict[str, np.ndarray]:
        return {k: np.array(v, dtype=float) for k, v in self._data.items()}


@register_tracker
class ProgressTracker(Tracker):
    """A tqdm progress bar over simulated time, on stderr.

    Parameters
    ----------
    disable : bool or None
        True: no bar; False: always a bar; None (default): a bar only if stderr is a terminal.
    desc : str
        Label in front of the bar.
    """

    name = "progress"

    def __init__(self, *, disable: bool | None = None, desc: str = "spherepde",
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.disable = disable
        self.desc = desc
        self._bar = None

    def initialize(self, state, t, info) -> None:
        from tqdm import tqdm

        t0, t_end = info["t_span"]
        disable = self.disable
        if disable is None:
            disable = not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
        self._t0, self._t = float(t0), float(t0)
        self._bar = tqdm(total=float(t_end - t0), desc=self.desc, unit="t", file=sys.stderr,
                         disable=disable, dynamic_ncols=True,
                         bar_format="{l_bar}{bar}| t={n:.4g}/{total:.4g} [{elapsed}<{remaining}]")

    def on_step(self, t) -> None:
        if self._bar is not None:
            self._bar.update(float(t) - self._t)
            self._t = float(t)

    def finalize(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@register_tracker
class StepTimer(Tracker):
    """Wall-clock seconds spent stepping, without what the trackers given before it spend at
    output times.  Give it last: its clock restarts after the others' ``handle`` at every output
    and at every step (``on_step``), so it sums the time from there to the end of the next step
    (including the other trackers' ``on_step``, which are cheap).  ``result``: the seconds."""

    name = "step-timer"

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.seconds = 0.0

    def initialize(self, state, t, info) -> None:
        self.seconds, self._mark = 0.0, time.perf_counter()

    def handle(self, state, t) -> None:
        self._mark = time.perf_counter()

    def on_step(self, t) -> None:
        now = time.perf_counter()
        self.seconds += now - self._mark
        self._mark = now

    @property
    def result(self) -> float:
        return self.seconds


class RunProgress:
    """One progress display for the representations of a run advanced in step
    (:func:`~spherepde.solvers.controller.run_lanes`): :meth:`tracker` gives each lane a tracker
    that adds its simulated time to the shared count.

    On a terminal: a tqdm bar over the lanes' simulated time together.  Off a terminal (a batch
    job's log): a plain line ``spherepde: t=… steps=… elapsed=…s`` at an output time at most
    every ``every`` seconds (the first one after ``every`` seconds), so short runs print nothing.

    Parameters
    ----------
    disable : bool or None
        True: nothing; False: always a bar; None (default): a bar on a terminal, else log lines.
    every : float
        Seconds between log lines off a terminal.
    """

    def __init__(self, *, disable: bool | None = None, desc: str = "run", every: float = 10.0) -> None:
        self.disable, self.desc, self.every = disable, desc, every
        self.total = self.done = 0.0
        self.steps = 0
        self._bar = None
        self._start = self._last = time.perf_counter()

    def tracker(self) -> Tracker:
        """A tracker for one lane (give each lane its own)."""
        return _LaneProgress(self)

    @property
    def _tty(self) -> bool:
        return self.disable is False or (
            self.disable is None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty())

    def _add_lane(self, t0: float, t_end: float) -> None:
        self.total += float(t_end - t0)
        if self._bar is None and self._tty:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit="t", file=sys.stderr,
                             dynamic_ncols=True, bar_format="{l_bar}{bar}| [{elapsed}<{remaining}]")
        elif self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def _advance(self, dt: float) -> None:
        self.done += dt
        self.steps += 1
        if self._bar is not None:
            self._bar.update(dt)

    def _output(self, t: float) -> None:
        if self.disable is not None or self._tty:
            return
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            print(f"spherepde: t={t:.6g} steps={self.steps} elapsed={now - self._start:.0f}s "
                  f"({100.0 * self.done / max(self.total, 1e-300):.0f}%)", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class _LaneProgress(Tracker):
    """One lane's share of a :class:`RunProgress`."""

    name = "progress"

    def __init__(self, shared: RunProgress) -> None:
        super().__init__()
        self.shared = shared

    def initialize(self, state, t, info) -> None:
        t0, t_end = info["t_span"]
        self._t = float(t0)
        self.shared._add_lane(t0, t_end)

    def on_step(self, t) -> None:
        self.shared._advance(float(t) - self._t)
        self._t = float(t)

    def handle(self, state, t) -> None:
        self.shared._output(float(t))


__all__ = [
    "TRACKERS",
    "DiagnosticsTracker",
    "MemoryTracker",
    "ProgressTracker",
    "RunProgress",
    "StepTimer",
    "Tracker",
    "cell_measure",
    "register_tracker",
]
