"""The shared argument checks (spherepde.checks): one text per check, the wrong type reported as
an error that is both a TypeError and a ValueError (the layers reported it as either)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.checks import ArgumentTypeError, check_int, check_positive, check_real, check_seed


def test_check_int():
    assert check_int("n", np.int64(3), 1) == 3 and type(check_int("n", np.int64(3), 1)) is int
    for bad in (True, 2.0, "3", None):
        with pytest.raises(ArgumentTypeError, match=r"n must be an int >= 1, got "):
            check_int("n", bad, 1)
    with pytest.raises(ValueError, match=r"^n must be >= 1, got 0$"):
        check_int("n", 0, 1)
    assert issubclass(ArgumentTypeError, TypeError) and issubclass(ArgumentTypeError, ValueError)


def test_check_real():
    assert check_real("t", 1) == 1.0 and check_real("s", 0, nonnegative=True) == 0.0
    for bad in (True, "1", None):
        with pytest.raises(ArgumentTypeError, match="t must be a real number"):
            check_real("t", bad)
    with pytest.raises(ValueError, match="t must be finite, got inf"):
        check_real("t", math.inf)
    with pytest.raises(ValueError, match="t must be > 0, got 0.0"):
        check_real("t", 0, positive=True)
    with pytest.raises(ValueError, match="s must be >= 0, got -1.0"):
        check_real("s", -1, nonnegative=True)


def test_check_seed():
    assert check_seed(np.uint8(7)) == 7 and check_seed(None, none_ok=True) is None
    with pytest.raises(ArgumentTypeError, match="^seed must be a non-negative int, got None$"):
        check_seed(None)
    with pytest.raises(ArgumentTypeError, match="realisation must be a non-negative int or None, got 1.5"):
        check_seed(1.5, "realisation", none_ok=True)
    with pytest.raises(ValueError, match="seed must be a non-negative int, got -1"):
        check_seed(-1)


def test_check_positive():
    assert check_positive("0.5", "courant", upper=4.0) == 0.5
    with pytest.raises(ValueError, match=r"courant must be in \(0, 4.0\], got 5"):
        check_positive(5, "courant", upper=4.0)
    with pytest.raises(TypeError, match="courant must be a number"):
        check_positive(object(), "courant")
