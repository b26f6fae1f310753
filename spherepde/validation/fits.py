"""Fits of measured numbers against a model: order of convergence, exponential rates, times.

Pure functions of arrays (no runs, no files): the experiments in :mod:`spherepde.experiments`
and the tests call them on what the runs measured.
"""
from __future__ import annotations

import math

import numpy as np


def fit_order(h, err) -> tuple[float, float]:
    """Least-squares slope of log(err) against log(h) and its standard error."""
    x, y = np.log(np.asarray(h, float)), np.log(np.asarray(err, float))
    A = np.vstack([x, np.ones_like(x)]).T
    coef, res, *_ = np.linalg.lstsq(A, y, rcond=None)
    n = len(x)
    if n > 2:
        s2 = float(np.sum((y - A @ coef) ** 2) / (n - 2))
        se = float(np.sqrt(s2 / np.sum((x - x.mean()) ** 2)))
    else:
        se = float("nan")
    return float(coef[0]), se


def log_rate(t, y) -> tuple[float, float]:
    """Slope of log y against t (least squares) over the points with y > 0, and its stderr."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    ok = y > 0
    if ok.sum() < 3:
        return math.nan, math.nan
    A = np.vstack([t[ok], np.ones(ok.sum())]).T
    coef, *_ = np.linalg.lstsq(A, np.log(y[ok]), rcond=None)
    resid = np.log(y[ok]) - A @ coef
    se = math.sqrt(float(resid @ resid) / max(ok.sum() - 2, 1) / np.sum((t[ok] - t[ok].mean()) ** 2))
    return float(coef[0]), se


def fit_vs_log_beta(beta, t) -> dict | None:
    """Least squares t = slope · log β + intercept over the finite entries (≥ 3), with the
    standard error of the slope; None when fewer than three times are finite."""
    b, t = np.asarray(beta, float), np.asarray(t, float)
    ok = np.isfinite(b) & np.isfinite(t)
    if ok.sum() < 3:
        return None
    lb = np.log(b[ok])
    X = np.vstack([lb, np.ones(ok.sum())]).T
    coef, *_ = np.linalg.lstsq(X, t[ok], rcond=None)
    resid = t[ok] - X @ coef
    s2 = float(resid @ resid / max(ok.sum() - 2, 1))
    se = math.sqrt(s2 / np.sum((lb - lb.mean()) ** 2))
    return {"slope": float(coef[0]), "intercept": float(coef[1]), "stderr_slope": se}


def exit_time(t: np.ndarray, w: np.ndarray, band: float) -> float:
    """First time after the minimum of w(t) at which w exceeds band × min (nan if never)."""
    i = int(np.argmin(w))
    above = np.nonzero(w[i:] > band * w[i])[0]
    if above.size == 0:
        return float("nan")
    j = i + above[0]  # linear interpolation of the crossing
    t0, t1, w0, w1 = t[j - 1], t[j], w[j - 1], w[j]
    return float(t0 + (band * w[i] - w0) * (t1 - t0) / (w1 - w0))


def switch_time(t, d_old, d_new) -> float:
    """The time of the final switch: from when on d_new < d_old up to the last time (linear
    interpolation of d_new − d_old between the outputs around it); t[0] when d_new < d_old
    throughout, NaN when d_new ≥ d_old at the last time.  The final switch, not the first
    crossing: two nearly equal distances at t = 0 (e.g. both of a near-uniform density) may
    cross and cross back by round-off."""
    t, diff = np.asarray(t, float), np.asarray(d_new, float) - np.asarray(d_old, float)
    above = np.flatnonzero(~(diff < 0))  # NaN counts as not switched
    if above.size == 0:
        return float(t[0])
    j = int(above[-1])
    if j == diff.size - 1:
        return float("nan")
    return float(t[j] + diff[j] * (t[j + 1] - t[j]) / (diff[j] - diff[j + 1]))


__all__ = ["exit_time", "fit_order", "fit_vs_log_beta", "log_rate", "switch_time"]
