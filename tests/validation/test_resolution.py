"""The resolution check's arithmetic: change relative to max(|value|, 0.05) at every output time,
the worst quantity and time, the switch time, NaN/inf handling."""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.validation.resolution import (FLOOR, TOLERANCE, series_change, switch_change,
                                             trajectory_change)

T = np.linspace(0.0, 4.0, 5)


def test_change_is_relative_above_the_floor_and_absolute_below():
    fine = np.array([1.0, 0.5, 0.2, 0.01, 0.001])
    coarse = fine + np.array([0.01, 0.0, 0.0, 0.0005, 0.0])
    c = series_change(T, fine, coarse)
    assert c == {"change": pytest.approx(0.01), "t": 0.0}
    # a quantity near 0 is held to an absolute 0.05 · change: 0.0005 / 0.05 = 1 %
    c = series_change(T, fine, fine + np.array([0, 0, 0, 0.0009, 0]))
    assert c["t"] == 3.0 and c["change"] == pytest.approx(0.0009 / FLOOR)


def test_nan_in_both_is_skipped_and_in_one_is_an_infinite_change():
    a = np.array([1.0, math.nan, 1.0, 1.0, 1.0])
    assert series_change(T, a, a)["change"] == 0.0
    b = a.copy()
    b[2] = math.nan
    assert series_change(T, a, b) == {"change": math.inf, "t": 2.0}
    off = np.full(5, math.nan)
    assert math.isnan(series_change(T, off, off)["change"])


def test_trajectory_reports_the_worst_quantity_and_resolves_below_two_percent():
    fine = {"energy": np.linspace(1, 2, 5), "w2": np.linspace(1, 0.1, 5)}
    coarse = {"energy": fine["energy"] * 1.01, "w2": fine["w2"] + np.array([0, 0, 0, 0, 0.003])}
    r = trajectory_change(T, fine, coarse)
    assert r["worst"] == {"quantity": "w2", "t": 4.0}
    assert r["max_relative_change"] == pytest.approx(0.03)
    assert r["resolved"] is False and r["tolerance"] == TOLERANCE
    coarse["w2"] = fine["w2"]
    r = trajectory_change(T, fine, coarse)
    assert r["worst"]["quantity"] == "energy" and r["resolved"] is True
    off = {"energy": np.full(5, math.nan)}
    r = trajectory_change(T, off, off)
    assert math.isnan(r["max_relative_change"]) and r["resolved"] is False and r["worst"] is None


def test_bad_shapes_and_missing_quantities_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        series_change(T, np.ones(5), np.ones(4))
    with pytest.raises(ValueError, match="lacks the quantities"):
        trajectory_change(T, {"energy": np.ones(5)}, {})


def test_switch_time_change():
    old = np.ones(5)
    new_f = np.array([2.0, 1.5, 0.5, 0.2, 0.1])  # crosses 1 at t = 1.5
    new_c = np.array([2.0, 1.8, 1.2, 0.6, 0.1])  # crosses 1 at t = 2 + 0.2/0.6
    r = switch_change(T, (old, new_f), (old, new_c))
    assert r["switch_time"] == pytest.approx([2 + 1 / 3, 1.5])
    assert r["switch_time_change"] == pytest.approx((2 + 1 / 3 - 1.5) / 1.5)
    never = 2 * old
    assert switch_change(T, (old, new_f), (old, never))["switch_time_change"] == math.inf
    assert math.isnan(switch_change(T, (old, never), (old, never))["switch_time_change"])
