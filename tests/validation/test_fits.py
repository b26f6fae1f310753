"""Fits of measured numbers (spherepde.validation.fits): exit and switch times."""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.validation import fits


def test_exit_time_and_switch_time_helpers():
    t = np.linspace(0, 10, 11)
    w = np.array([5, 3, 1, 1, 1.5, 2.5, 4, 5, 5, 5, 5], float)
    assert fits.exit_time(t, w, 2.0) == pytest.approx(4.5)  # crosses 2·min = 2 between t = 4, 5
    assert math.isnan(fits.exit_time(t, np.linspace(5, 1, 11), 2.0))
    d_old = np.linspace(1, 0, 11) * 0 + 0.5
    d_new = np.linspace(1, 0, 11)
    assert fits.switch_time(t, d_old, d_new) == pytest.approx(5.0)
    # the final switch: a round-off crossing at t = 0 (equal distances) is not the switch
    early = d_new.copy()
    early[0], early[1] = 0.5 - 1e-16, 0.7
    assert fits.switch_time(t, d_old, early) == pytest.approx(5.0)
    assert fits.switch_time(t, d_old, d_old - 0.1) == 0.0  # below throughout
    assert math.isnan(fits.switch_time(t, d_old, d_new[::-1]))  # above at the end
