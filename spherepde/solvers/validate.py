"""Input checks shared by solvers: clear errors naming the argument, before any work."""
from __future__ import annotations

import numpy as np


def check_positive(value, name: str, *, upper: float | None = None, inclusive_upper=True) -> float:
    """A finite number in (0, upper] (or (0, upper)), else ValueError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    ok = np.isfinite(v) and v > 0
    if ok and upper is not None:
        ok = v <= upper if inclusive_upper else v < upper
    if not ok:
        rng = f"(0, {upper}]" if upper is not None and inclusive_upper else (
            f"(0, {upper})" if upper is not None else "(0, inf)")
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v
