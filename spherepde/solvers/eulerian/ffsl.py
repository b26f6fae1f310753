"""One-dimensional flux-form semi-Lagrangian (FFSL) sweeps with PPM sub-cell profiles.

A sweep solves the 1-D continuity equation  ∂_t m + ∂_x (m a) = 0  over one step of length
``dt`` for a velocity ``a(x)`` frozen over the step, on a batch of independent lines.  The
flux through face f is the mass that lies, at the start of the step, between the face and
the departure point of the characteristic that reaches it,

    F_f = M(x_f) − M(x_d(f)),    M the cumulative mass of the PPM reconstruction,

and the new cell mass is m_i − (F_{i+1/2} − F_{i−1/2}).  The update is conservative by
construction, has no Courant-number limit (departure points may lie many cells away), and
is positive whenever the reconstruction is positive and the departure points stay ordered —
which needs the deformation (Lipschitz) number  dt · max |∂_x a|  below 1; callers sub-step to
keep it below ``max_lipschitz``.  Departure points are traced with the explicit midpoint rule
on the piecewise-linear interpolant of the face velocities (second order in time).
"""
from __future__ import annotations

import numpy as np

from spherepde.solvers.eulerian import ppm


class DepartureOrderError(RuntimeError):
    """Departure points crossed: the step deforms cells more than the scheme allows."""


def _check_order(xd: np.ndarray) -> None:
    if np.any(np.diff(xd, axis=-1) < 0.0):
        raise DepartureOrderError(
            "departure points crossed within one sweep: the step deforms cells too much "
            "(deformation number dt·max|Δa| must stay below √3 − 1 ≈ 0.732); reduce dt"
        )


def lipschitz_periodic(a: np.ndarray) -> np.ndarray:
    """max_f |a_{f+1} − a_f| per row for periodic face velocities a (nrows, n), in index units."""
    return np.max(np.abs(np.roll(a, -1, axis=-1) - a), axis=-1)


def sweep_periodic(q: np.ndarray, a: np.ndarray, dt, limiter: str) -> np.ndarray:
    """Advance periodic uniform lines by one FFSL step.

    Parameters
    ----------
    q : (nrows, n) cell means (cells of unit width in index coordinates).
    a : (nrows, n) velocity at the left face of each cell, in cells per unit time.
    dt : float or (nrows,) array — step per row.
    limiter : one of :data:`ppm.LIMITERS`.

    Returns
    -------
    (nrows, n) new cell means.
    """
    nrows, n = q.shape
    dt = np.broadcast_to(np.asarray(dt, float), (nrows,))[:, None]
    f = np.arange(n, dtype=float)[None, :]
    # departure points by the midpoint rule on the periodic linear interpolant of a
    xm = f - 0.5 * dt * a
    i0 = np.floor(xm)
    fr = xm - i0
    i0 = i0.astype(np.intp) % n
    rows = np.arange(nrows)[:, None]
    am = (1.0 - fr) * a[rows, i0] + fr * a[rows, (i0 + 1) % n]
    xd = f - dt * am
    _check_order(xd)

    # parabolas
    eL = ppm.edges_periodic_uniform(q)
    eR = np.roll(eL, -1, axis=-1)
    if limiter == "monotone":
        eL, eR = ppm.bound_edges(eL, eR, np.roll(q, 1, axis=-1), q, np.roll(q, -1, axis=-1))
    qL, dq, q6 = ppm.parabola(q, eL, eR, limiter)

    k = np.floor(xd)
    s = xd - k
    k = k.astype(np.intp)
    kk = k % n
    pl = ppm.partial_mass_left(qL[rows, kk], dq[rows, kk], q6[rows, kk], s)
    # whole cells between the departure cell and the face: S(f) − S(k)
    fi = np.arange(n)[None, :]
    shift = fi - k  # number of whole cells (can be negative)
    csum = np.concatenate([np.zeros((nrows, 1)), np.cumsum(q, axis=-1)], axis=-1)
    total = csum[:, -1:]
    # unwrap the departure cell: S(k) = floor(k / n) * total + C[k mod n]
    whole = csum[rows, fi] - csum[rows, kk] - np.floor_divide(k, n) * total
    # exact values for the usual one-cell cases (avoids cancellation in the cumulative sum)
    whole = np.where(shift == 1, q[rows, kk], whole)
    whole = np.where(shift == 0, 0.0, whole)
    flux = whole - pl
    return q - (np.roll(flux, -1, axis=-1) - flux)


class BoundedLine:
    """Fixed geometry of non-periodic lines with closed ends (no flux through the end faces).

    Parameters
    ----------
    faces : (n+1,) increasing face coordinates, shared by every line of a batch.
    """

    def __init__(self, faces: np.ndarray):
        self.faces = np.asarray(faces, float)
        self.h = np.diff(self.faces)
        if np.any(self.h <= 0):
            raise ValueError("faces must be strictly increasing")

        self.n = self.h.size
        self.start, self.w = ppm.edge_weights(self.faces)

    def lipschitz(self, a: np.ndarray) -> float:
        """dt-free deformation number max |Δa / h| over all cells, for face velocities a."""
        return float(np.max(np.abs(np.diff(a, axis=-1)) / self.h))

    def sweep(self, m: np.ndarray, a: np.ndarray, dt: float, limiter: str) -> np.ndarray:
        """Advance the lines by one FFSL step.

        Parameters
        ----------
        m : (nrows, n) cell masses.
        a : (nrows, n+1) face velocities in coordinate units per unit time (the end faces are
            held fixed whatever their velocity).
        dt : step.

        Returns
        -------
        (nrows, n) new cell masses.
        """
        X, h, n = self.faces, self.h, self.n
        nrows = m.shape[0]
        rows = np.arange(nrows)[:, None]
        Xi = X[None, 1:-1]
        xm = Xi - 0.5 * dt * a[:, 1:-1]

        def interp(x):
            i = np.clip(np.searchsorted(X, x, side="right") - 1, 0, n - 1)
            fr = (x - X[i]) / h[i]
            return (1.0 - fr) * a[rows, i] + fr * a[rows, i + 1]

        xd = np.clip(Xi - dt * interp(np.clip(xm, X[0], X[-1])), X[0], X[-1])
        _check_order(xd)

        qbar = m / h
        e = ppm.edges_nonuniform(m, self.start, self.w)
        eL, eR = e[:, :-1], e[:, 1:]
        extremum = None
        if limiter == "monotone":
            qprev = np.concatenate([qbar[:, :1], qbar[:, :-1]], axis=-1)
            qnext = np.concatenate([qbar[:, 1:], qbar[:, -1:]], axis=-1)
            eL, eR = ppm.bound_edges(eL, eR, qprev, qbar, qnext)
            extremum = (eR - qbar) * (qbar - eL) <= 0.0
            extremum[:, [0, -1]] = False  # the end cells have no outer neighbour: never flagged
        qL, dq, q6 = ppm.parabola(qbar, eL, eR, limiter, extremum)

        k = np.clip(np.searchsorted(X, xd, side="right") - 1, 0, n - 1)
        s = np.clip((xd - X[k]) / h[k], 0.0, 1.0)
        pl = h[k] * ppm.partial_mass_left(qL[rows, k], dq[rows, k], q6[rows, k], s)
        csum = np.concatenate([np.zeros((nrows, 1)), np.cumsum(m, axis=-1)], axis=-1)
        fi = np.arange(1, n)[None, :]
        whole = csum[:, 1:-1] - csum[rows, k]
        whole = np.where(fi - k == 1, m[rows, k], whole)
        whole = np.where(fi == k, 0.0, whole)
        flux = np.zeros((nrows, n + 1))
        flux[:, 1:-1] = whole - pl
        return m - np.diff(flux, axis=-1)
