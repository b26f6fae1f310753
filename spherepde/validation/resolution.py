"""Is a run resolved?  The change of its time series between two resolutions of the same model.

A run and the same run at another resolution (``spherepde run --refine F``, or the coarser
grid of an experiment's resolution check) give time series q(t) at the same output times.
For each quantity the change at time t is

    |q_fine(t) − q_coarse(t)| / max(|q_fine(t)|, floor),   floor = 0.05,

so that quantities going to 0 (a distance to a point measure, to an eigenspace) are held to an
absolute 0.05·tolerance rather than to a relative change of a tiny number.  The run counts as
resolved when the largest change over all output times and quantities is below ``TOLERANCE``
(2 %).  Pure functions of arrays, no runs and no files.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from spherepde.validation.fits import switch_time

#: values below this size are compared absolutely (see the module docstring)
FLOOR = 0.05
#: a trajectory is resolved when no quantity changes by this much at any output time
TOLERANCE = 0.02


def series_change(t, fine, coarse, floor: float = FLOOR) -> dict:
    """Largest change of one time series: ``{"change", "t"}`` (the change and where it is).

    Output times where both values are NaN (a diagnostic that is off) are skipped; a time where
    only one of them is finite counts as an infinite change.  ``change`` is NaN when no time
    has a value in either run."""
    t, a, b = (np.asarray(v, float) for v in (t, fine, coarse))
    if not (a.shape == b.shape == t.shape):
        raise ValueError(f"the two series and the times must have one shape, got {a.shape}, "
                         f"{b.shape} and {t.shape}")
    both = np.isfinite(a) & np.isfinite(b)
    one = np.isfinite(a) ^ np.isfinite(b)
    rel = np.full(t.shape, -1.0)
    rel[both] = np.abs(a[both] - b[both]) / np.maximum(np.abs(a[both]), floor)
    rel[one] = math.inf
    if not (both | one).any():
        return {"change": math.nan, "t": math.nan}
    i = int(np.argmax(rel))
    return {"change": float(rel[i]), "t": float(t[i])}


def trajectory_change(t, fine: Mapping[str, object], coarse: Mapping[str, object],
                      floor: float = FLOOR, tolerance: float = TOLERANCE) -> dict:
    """The change of every quantity of ``fine`` (name → series over ``t``) against ``coarse``.

    Returns ``per_quantity`` (name → :func:`series_change`), ``max_relative_change`` (the
    largest of them, NaN if none could be compared), ``worst`` (its quantity and time),
    ``floor``, ``tolerance`` and ``resolved`` (max_relative_change < tolerance)."""
    missing = sorted(set(fine) - set(coarse))
    if missing:
        raise ValueError(f"the coarse run lacks the quantities {missing}")
    per = {name: series_change(t, fine[name], coarse[name], floor) for name in fine}
    known = {n: c for n, c in per.items() if not math.isnan(c["change"])}
    if not known:
        worst, largest = None, math.nan
    else:
        worst = max(known, key=lambda n: known[n]["change"])
        largest = known[worst]["change"]
    return {"per_quantity": per, "max_relative_change": largest,
            "worst": None if worst is None else {"quantity": worst, "t": per[worst]["t"]},
            "floor": floor, "tolerance": tolerance,
            "resolved": bool(largest < tolerance)}  # NaN compares False: not shown resolved


def switch_change(t, fine: tuple, coarse: tuple) -> dict:
    """The switch time (:func:`~spherepde.validation.fits.switch_time`: the first time at which
    the second series drops below the first) of both runs, and ``switch_time_change`` =
    |t_fine − t_coarse| / t_fine: NaN when neither run switches, inf when only one does."""
    tf, tc = switch_time(t, *fine), switch_time(t, *coarse)
    if math.isnan(tf) and math.isnan(tc):
        change = math.nan
    elif math.isnan(tf) or math.isnan(tc):
        change = math.inf
    else:
        change = abs(tf - tc) / tf if tf > 0 else abs(tf - tc)
    return {"switch_time": [tc, tf], "switch_time_change": change}


__all__ = ["FLOOR", "TOLERANCE", "series_change", "switch_change", "trajectory_change"]
