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

Backends.  The numpy functions below are the reference implementation.  The sweeps
(:func:`periodic_departures`, :func:`sweep_periodic_departed` and so :func:`sweep_periodic`,
:meth:`BoundedLine.sweep`) and the deformation numbers (:func:`lipschitz_periodic`,
:meth:`BoundedLine.lipschitz`) also exist as compiled numba kernels
(:mod:`spherepde.solvers.eulerian.ffsl_numba`: bitwise the same results, several times faster).
:data:`BACKEND` picks one at call time: ``"numba"`` when numba can be imported, else
``"numpy"``; the environment variable ``SPHEREPDE_FFSL_BACKEND=numpy|numba`` (read at import)
overrides that, and assigning ``ffsl.BACKEND`` switches at run time.  The numpy version of a
dispatched function stays callable as ``<function>.numpy``.
"""
from __future__ import annotations

import functools
import os
from typing import Any, NamedTuple

import numpy as np

from spherepde.solvers.eulerian import ppm

BACKENDS = ("numpy", "numba")
BACKEND_ENV = "SPHEREPDE_FFSL_BACKEND"


def _choose_backend() -> str:
    """``$SPHEREPDE_FFSL_BACKEND`` if set (``numba`` then must be importable), else ``"numba"``
    if numba imports, else ``"numpy"``."""
    choice = os.environ.get(BACKEND_ENV, "").strip()
    if choice and choice not in BACKENDS:
        raise ValueError(f"{BACKEND_ENV} must be one of {BACKENDS}, got {choice!r}")
    if choice == "numpy":
        return "numpy"
    try:
        import numba  # noqa: F401
    except ImportError as err:
        if choice == "numba":
            raise ImportError(f"{BACKEND_ENV}=numba, but numba cannot be imported: {err}") from err
        return "numpy"
    return "numba"


#: backend of the sweeps, "numpy" (reference) or "numba"; may be reassigned at run time
BACKEND: str = _choose_backend()
_kernels: Any = None  # the ffsl_numba module, imported on first use


def _dispatch(kernel: str):
    """Decorator: calls go to ``_numba_<kernel>`` below (the compiled kernels of ffsl_numba;
    same arguments, same results) while
    ``BACKEND == "numba"``, to the decorated numpy function (kept as ``.numpy``) otherwise."""
    def decorate(numpy_fn):
        @functools.wraps(numpy_fn)
        def dispatch(*args, **kwargs):
            global _kernels
            if BACKEND == "numpy":
                return numpy_fn(*args, **kwargs)
            if BACKEND != "numba":
                raise ValueError(f"ffsl.BACKEND must be one of {BACKENDS}, got {BACKEND!r}")
            if _kernels is None:
                from spherepde.solvers.eulerian import ffsl_numba as _kernels
            return globals()[f"_numba_{kernel}"](*args, **kwargs)

        dispatch.numpy = numpy_fn
        return dispatch

    return decorate


class DepartureOrderError(RuntimeError):
    """Departure points crossed: the step deforms cells more than the scheme allows."""


DEPARTURE_ORDER_MESSAGE = (
    "departure points crossed within one sweep: the step deforms cells too much "
    "(deformation number dt·max|Δa| must stay below √3 − 1 ≈ 0.732); reduce dt"
)


def _check_order(xd: np.ndarray) -> None:
    if (xd[..., 1:] < xd[..., :-1]).any():
        raise DepartureOrderError(DEPARTURE_ORDER_MESSAGE)


def _gather(arr: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """``arr[r, k]`` for every entry of ``flat = r · ncols + k`` (arr of shape (nrows, ncols)).

    One ``take`` on the flattened array: several times faster than the 2-D fancy index
    ``arr[rows, k]`` (same values).  ``ravel`` copies only if ``arr`` is not C-contiguous.
    """
    return np.ravel(arr).take(flat)


def _row_offsets(nrows: int, ncols: int) -> np.ndarray:
    """(nrows, 1) flat index of the first entry of each row of a C-contiguous (nrows, ncols)."""
    return np.arange(0, nrows * ncols, ncols)[:, None]


@_dispatch("lipschitz_periodic")
def lipschitz_periodic(a: np.ndarray) -> np.ndarray:
    """max_f |a_{f+1} − a_f| per row for periodic face velocities a (nrows, n), in index units."""
    return np.max(np.abs(np.roll(a, -1, axis=-1) - a), axis=-1)


class PeriodicDepartures(NamedTuple):
    """Departure geometry of one periodic sweep: everything that depends on the velocity and
    the step only, not on the transported field (so one set serves every sweep with the same
    ``a`` and ``dt``).  Arrays have the shape (nrows, n) of the lines; see
    :func:`periodic_departures`."""

    s: np.ndarray         #: fraction x_d − k ∈ [0, 1) of the departure cell left of x_d
    flat_index: np.ndarray  #: flat index r · n + (k mod n) of the departure cell
    wraps: np.ndarray     #: ⌊k / n⌋: whole periods between x_d and line 0..n (< 0: left of it)
    one_cell: np.ndarray  #: k = f − 1 (departure point in the cell just left of face f)
    same_cell: np.ndarray  #: k = f (departure point in the cell just right of face f)


@_dispatch("periodic_departures")
def periodic_departures(a: np.ndarray, dt) -> PeriodicDepartures:
    """Departure points x_d(f) = f − dt · a(f − dt/2 · a_f) of every face of periodic lines.

    Midpoint rule on the periodic linear interpolant of the face velocities.

    Parameters
    ----------
    a : (nrows, n) velocity at the left face of each cell, in cells per unit time.
    dt : float or (nrows,) array — step per row.

    Raises :class:`DepartureOrderError` if the departure points of a line are not ordered.
    """
    nrows, n = a.shape
    dt = np.broadcast_to(np.asarray(dt, float), (nrows,))[:, None]
    f = np.arange(n, dtype=float)[None, :]
    row0 = _row_offsets(nrows, n)
    xm = f - 0.5 * dt * a
    i0 = np.floor(xm)
    fr = xm - i0
    i0 = i0.astype(np.intp) % n
    i1 = np.where(i0 == n - 1, 0, i0 + 1)  # (i0 + 1) mod n
    am = (1.0 - fr) * _gather(a, i0 + row0) + fr * _gather(a, i1 + row0)
    xd = f - dt * am
    _check_order(xd)
    k = np.floor(xd)
    s = xd - k
    k = k.astype(np.intp)
    wraps, kk = np.divmod(k, n)
    shift = np.arange(n)[None, :] - k  # number of whole cells between x_d and the face
    return PeriodicDepartures(s=s, flat_index=kk + row0, wraps=wraps,
                              one_cell=shift == 1, same_cell=shift == 0)


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
    return sweep_periodic_departed(q, periodic_departures(a, dt), limiter)


@_dispatch("sweep_periodic_departed")
def sweep_periodic_departed(q: np.ndarray, dep: PeriodicDepartures, limiter: str) -> np.ndarray:
    """:func:`sweep_periodic` with the departure geometry already computed.

    q : (nrows, n) cell means; dep : from :func:`periodic_departures` for lines of that shape.
    Returns the (nrows, n) new cell means.
    """
    nrows, n = q.shape
    # parabolas
    e = ppm.edges_periodic_uniform(q)  # (nrows, n+1): cell i has edges e[:, i], e[:, i+1]
    eL, eR = e[:, :-1], e[:, 1:]
    if limiter == "monotone":
        eL, eR = ppm.bound_edges(eL, eR, np.roll(q, 1, axis=-1), q, np.roll(q, -1, axis=-1))
    elif limiter == "positive":
        # Colella–Sekora on every face and cell (two ghost cells each side), then the scaling
        qp = ppm.periodic_pad(q)  # column k: q_{k−2}
        e = ppm.extremum_limit_edges(e, qp[:, 0:n + 1], qp[:, 1:n + 2], qp[:, 2:n + 3],
                                     qp[:, 3:n + 4])
        eL, eR = ppm.extremum_limit_cells(e[:, :-1], e[:, 1:], qp[:, 0:n], qp[:, 1:n + 1], q,
                                          qp[:, 3:n + 3], qp[:, 4:n + 4])
    qL, dq, q6 = ppm.parabola(q, eL, eR, limiter)

    idx = dep.flat_index
    pl = ppm.partial_mass_left(_gather(qL, idx), _gather(dq, idx), _gather(q6, idx), dep.s)
    # whole cells between the departure cell and the face: S(f) − S(k), with the exclusive
    # cumulative sum C[:, j] = Σ_{i<j} q_i (j = 0..n−1) and the ring total S(n)
    csum = np.empty((nrows, n))
    csum[:, 0] = 0.0
    np.cumsum(q[:, :-1], axis=-1, out=csum[:, 1:])
    total = csum[:, -1:] + q[:, -1:]  # the last step of the cumulative sum
    # unwrap the departure cell: S(k) = floor(k / n) * total + C[k mod n]
    flux = np.empty((nrows, n + 1))
    whole = flux[:, :n]
    np.subtract(csum, _gather(csum, idx), out=whole)
    whole -= dep.wraps * total
    # exact values for the usual one-cell cases (avoids cancellation in the cumulative sum):
    # one whole cell, k = f − 1, is cell f − 1 (mod n); none when k = f
    np.copyto(whole[:, 1:], q[:, :-1], where=dep.one_cell[:, 1:])
    np.copyto(whole[:, :1], q[:, -1:], where=dep.one_cell[:, :1])
    np.copyto(whole, 0.0, where=dep.same_cell)
    whole -= pl
    flux[:, n] = flux[:, 0]  # face n ≡ face 0
    return q - (flux[:, 1:] - flux[:, :n])


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
        self._interior = np.arange(1, self.n)  # interior faces 1..n−1

    @_dispatch("bounded_lipschitz")
    def lipschitz(self, a: np.ndarray) -> float:
        """dt-free deformation number max |Δa / h| over all cells, for face velocities a."""
        return float(np.max(np.abs(np.diff(a, axis=-1)) / self.h))

    def _cell_of(self, x: np.ndarray) -> np.ndarray:
        """Cell k with X_k ≤ x < X_{k+1}, clipped to 0..n−1, of points x (nrows, n−1) traced
        back from the interior faces — i.e. ``clip(searchsorted(X, x, "right") − 1, 0, n−1)``.

        Such points mostly lie in one of the two cells next to their face (the meridional
        Courant number is usually below 1), so those are tried first and the binary search
        runs only on the points where that guess is wrong.
        """
        X, n = self.faces, self.n
        k = self._interior - (x < X[1:-1])  # face f: cell f, or f − 1 left of the face
        ok = (X[k] <= x) & (x < X[k + 1])
        if not ok.all():
            wrong = ~ok
            k[wrong] = np.clip(np.searchsorted(X, x[wrong], side="right") - 1, 0, n - 1)
        return k

    @_dispatch("bounded_sweep")
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
        face0 = _row_offsets(nrows, n + 1)  # row offsets into a (n+1 faces per line)
        Xi = X[None, 1:-1]
        xm = Xi - 0.5 * dt * a[:, 1:-1]

        def interp(x):
            i = self._cell_of(x)
            fr = (x - X[i]) / h[i]
            j = i + face0
            return (1.0 - fr) * _gather(a, j) + fr * _gather(a, j + 1)

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
        elif limiter == "positive":
            # Colella–Sekora where its stencil lies on the line: faces 2..n−2 (cells f−2..f+1)
            # and cells 2..n−3 (cells i−2..i+2); the two cells at each closed end keep the
            # unlimited edge values at their outer faces and get the scaling only
            e[:, 2:n - 1] = ppm.extremum_limit_edges(e[:, 2:n - 1], qbar[:, 0:n - 3],
                                                     qbar[:, 1:n - 2], qbar[:, 2:n - 1],
                                                     qbar[:, 3:n])
            eL, eR = e[:, :-1].copy(), e[:, 1:].copy()
            eL[:, 2:n - 2], eR[:, 2:n - 2] = ppm.extremum_limit_cells(
                e[:, 2:n - 2], e[:, 3:n - 1], qbar[:, 0:n - 4], qbar[:, 1:n - 3], qbar[:, 2:n - 2],
                qbar[:, 3:n - 1], qbar[:, 4:n])
        qL, dq, q6 = ppm.parabola(qbar, eL, eR, limiter, extremum)

        k = self._cell_of(xd)
        hk = h[k]
        s = np.clip((xd - X[k]) / hk, 0.0, 1.0)
        idx = k + _row_offsets(nrows, n)
        pl = hk * ppm.partial_mass_left(_gather(qL, idx), _gather(dq, idx), _gather(q6, idx), s)
        # whole cells between the departure cell and interior face f: S(f) − S(k), with the
        # exclusive cumulative sum C[:, j] = Σ_{i<j} m_i (j = 0..n−1)
        csum = np.empty((nrows, n))
        csum[:, 0] = 0.0
        np.cumsum(m[:, :-1], axis=-1, out=csum[:, 1:])
        flux = np.zeros((nrows, n + 1))  # the end faces are closed
        whole = flux[:, 1:-1]
        np.subtract(csum[:, 1:], _gather(csum, idx), out=whole)
        # exact values for the usual one-cell cases: cell f − 1 when k = f − 1, none when k = f
        fi = self._interior[None, :]
        np.copyto(whole, m[:, :-1], where=k == fi - 1)
        np.copyto(whole, 0.0, where=k == fi)
        whole -= pl
        return m - (flux[:, 1:] - flux[:, :-1])


# ---- the numba backend's entry points (ffsl_numba holds the compiled kernels) --------------------------------------
def _c_lines(x, name: str) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must have shape (nrows, n), got {x.shape}")
    return x


def _numba_lipschitz_periodic(a: np.ndarray) -> np.ndarray:
    """:func:`lipschitz_periodic` (same result)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        return lipschitz_periodic.numpy(a)
    out = np.empty(a.shape[0])
    _kernels._lipschitz_periodic(a, out)
    return out


def _numba_bounded_lipschitz(line: BoundedLine, a: np.ndarray) -> float:
    """:meth:`BoundedLine.lipschitz` (same result)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.ndim != 2 or a.size == 0 or a.shape[1] != line.n + 1:
        return BoundedLine.lipschitz.numpy(line, a)
    return float(_kernels._lipschitz_bounded(a, line.h))


def _numba_periodic_departures(a: np.ndarray, dt) -> PeriodicDepartures:
    """:func:`periodic_departures` (same arguments, same result, same errors)."""
    a = _c_lines(a, "a")
    if a.size == 0:  # no lines or empty lines: nothing to compile for
        return periodic_departures.numpy(a, dt)
    nrows, n = a.shape
    dt = np.ascontiguousarray(np.broadcast_to(np.asarray(dt, float), (nrows,)))
    s = np.empty((nrows, n))
    index = np.empty((nrows, n), np.intp)
    wraps = np.empty((nrows, n), np.intp)
    one_cell = np.empty((nrows, n), bool)
    same_cell = np.empty((nrows, n), bool)
    if not _kernels._periodic_departures(a, dt, s, index, wraps, one_cell, same_cell):
        raise DepartureOrderError(DEPARTURE_ORDER_MESSAGE)
    return PeriodicDepartures(s=s, flat_index=index, wraps=wraps,
                                   one_cell=one_cell, same_cell=same_cell)


def _numba_sweep_periodic_departed(q: np.ndarray, dep: PeriodicDepartures, limiter: str) -> np.ndarray:
    """:func:`sweep_periodic_departed` (same arguments, same values; the result has the
    other memory layout than ``q``, see the module docstring)."""
    code = _kernels._limiter_code(limiter)
    q = np.asarray(q, dtype=np.float64)
    # an F-ordered q (the transposed result of a meridional sweep) is read as columns of q.T
    columns = q.ndim == 2 and q.flags.f_contiguous and not q.flags.c_contiguous
    q = q if columns else _c_lines(q, "q")
    if q.size == 0:
        return sweep_periodic_departed.numpy(q, dep, limiter)
    s = np.ascontiguousarray(dep.s, dtype=np.float64)
    index = np.ascontiguousarray(dep.flat_index, dtype=np.intp)
    wraps = np.ascontiguousarray(dep.wraps, dtype=np.intp)
    one_cell = np.ascontiguousarray(dep.one_cell, dtype=bool)
    same_cell = np.ascontiguousarray(dep.same_cell, dtype=bool)
    if not (s.shape == index.shape == wraps.shape == one_cell.shape == same_cell.shape
            == q.shape):
        raise ValueError(f"departures of shape {s.shape} do not fit lines of shape {q.shape}")
    # the output takes the other layout (C-ordered lines in, F-ordered out and vice versa): in a
    # Strang step the first zonal result is transposed for the meridional sweep (free for an
    # F-ordered array) and the meridional result comes back F-ordered
    out_columns = not columns and q.shape[0] > 1 and q.shape[1] > 1
    out = np.empty(q.shape, order="F" if out_columns else "C")
    _kernels._sweep_periodic(q.T if columns else q, columns, s, index, wraps, one_cell, same_cell, code,
                    out.T if out_columns else out, out_columns)
    return out


def _numba_bounded_sweep(line: BoundedLine, m: np.ndarray, a: np.ndarray, dt: float,
                  limiter: str) -> np.ndarray:
    """:meth:`BoundedLine.sweep` (same arguments, same result, same errors)."""
    code = _kernels._limiter_code(limiter)
    m = _c_lines(m, "m")
    a = _c_lines(a, "a")
    n = line.n
    if m.shape[1] != n or a.shape != (m.shape[0], n + 1):
        raise ValueError(f"masses {m.shape} and face velocities {a.shape} do not fit a line of "
                         f"{n} cells: expected (nrows, {n}) and (nrows, {n + 1})")
    out = np.empty_like(m)
    if not _kernels._sweep_bounded(m, a, float(dt), line.faces, line.h, line.start, line.w, code, out):
        raise DepartureOrderError(DEPARTURE_ORDER_MESSAGE)
    return out
