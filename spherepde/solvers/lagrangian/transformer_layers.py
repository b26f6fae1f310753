r"""The layers of the discrete transformer (:mod:`spherepde.solvers.lagrangian.transformer`).

:class:`MLPLayer` is one random MLP block G(y) = W σ(U y/√d + b_U)/√m + b_W; :class:`GaussianLayer`
is one layer of the m = ∞ transformer, the Gaussian field of a truncated Karhunen–Loève
expansion (:class:`~spherepde.noise.field.NoiseField`).  Both are frozen, validated on
construction, and evaluate their field when called.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from spherepde.checks import check_real
from spherepde.noise.activations import Activation, get_activation
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.solvers.lagrangian.particles import retract

__all__ = ["GaussianLayer", "MLPLayer"]


# ---- argument checks ---------------------------------------------------------------------
def _check_array(name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real array of shape {shape}") from None
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (it contains NaN or inf)")
    return a


# ---- the MLP field ------------------------------------------------------------------------
def _mlp_field(y, U, b_U, W, b_W, f) -> np.ndarray:
    """G(y) = W σ(U y/√d + b_U)/√m + b_W, batched: y (..., n, d), U (..., m, d), b_U (..., m),
    W (..., d, m), b_W (..., d), the leading dims broadcasting; returns (..., n, d)."""
    m, d = U.shape[-2:]
    h = np.matmul(y, np.swapaxes(U, -1, -2))
    h *= 1.0 / math.sqrt(d)
    h += b_U[..., None, :]
    g = np.matmul(f(h), np.swapaxes(W, -1, -2))
    g *= 1.0 / math.sqrt(m)
    g += b_W[..., None, :]
    return g


@dataclass(frozen=True, eq=False)
class MLPLayer:
    r"""One random MLP block :math:`G(y) = \frac{1}{\sqrt m} W \sigma(U y/\sqrt d + b_U) + b_W`.

    Attributes
    ----------
    U : ndarray, shape (m, d)
    b_U : ndarray, shape (m,)
    W : ndarray, shape (d, m)
    b_W : ndarray, shape (d,)
    activation : Activation
        σ (a name or callable is converted by :func:`~spherepde.noise.activations.get_activation`).

    Calling the layer evaluates the field: ``layer(y)`` with y (..., d) returns G(y) (..., d),
    at any points of R^d (not only unit vectors), e.g. at grid nodes to expand the field in
    spherical harmonics.  The arrays are copied and read-only.
    """

    U: np.ndarray
    b_U: np.ndarray
    W: np.ndarray
    b_W: np.ndarray
    activation: Activation = field(default_factory=lambda: get_activation("relu"))

    def __post_init__(self) -> None:
        U = np.asarray(self.U)
        if U.ndim != 2 or U.shape[0] < 1 or U.shape[1] < 2:
            raise ValueError(f"U must have shape (m, d) with m >= 1, d >= 2, got {U.shape}")
        m, d = U.shape
        arrays = {"U": _check_array("U", U, (m, d)), "b_U": _check_array("b_U", self.b_U, (m,)),
                  "W": _check_array("W", self.W, (d, m)), "b_W": _check_array("b_W", self.b_W, (d,))}
        for name, a in arrays.items():
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        object.__setattr__(self, "activation", get_activation(self.activation))

    @property
    def d(self) -> int:
        return int(self.U.shape[1])

    @property
    def width(self) -> int:
        return int(self.U.shape[0])

    def __call__(self, y) -> np.ndarray:
        """G(y) for points y of shape (..., d); returns (..., d)."""
        y = np.asarray(y, dtype=np.float64)
        if y.ndim < 1 or y.shape[-1] != self.d:
            raise ValueError(f"y must have shape (..., {self.d}), got {y.shape}")
        flat = y.reshape(-1, self.d)
        g = _mlp_field(flat, self.U, self.b_U, self.W, self.b_W, self.activation.f)
        return g.reshape(y.shape)


@dataclass(frozen=True, eq=False)
class GaussianLayer:
    r"""One layer of the m = ∞ transformer: the Gaussian field of a truncated KL expansion,

    .. math:: G(y) = \sum_{n \le n_{\max}} \sum_i \sqrt{C_n}\, Y_{n,i}(y)\, \xi_{n,i}
              \qquad(\text{``field.values(xi, y)``}),

    with covariance :math:`E[G(x)G(y)^T] = \kappa_{n_{\max}}(\langle x, y\rangle) I_d` when ξ has
    iid N(0, 1) entries (κ truncated at degree n_max, :attr:`NoiseField.captured_variance`).

    Attributes
    ----------
    field : NoiseField
        The expansion (d = 3: S², d = 2: S¹).
    xi : ndarray, shape (n_coefficients, d) = ``field.shape``
        The standard coefficients ξ (copied, read-only).

    Calling the layer evaluates the field: ``layer(y)`` with y (..., d) returns G(y) (..., d).
    The field lives on the sphere: a point y ≠ 0 off it is evaluated at y/|y|.
    :meth:`from_path` builds the layer whose noise √Δt·G is a Brownian-field increment.
    """

    field: NoiseField
    xi: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.field, NoiseField):
            raise TypeError(f"field must be a NoiseField, got {type(self.field).__name__}")
        xi = _check_array("xi", self.xi, self.field.shape)
        xi.setflags(write=False)
        object.__setattr__(self, "xi", xi)

    @classmethod
    def from_path(cls, field: NoiseField, path: BrownianPath, t0: float, t1: float) -> "GaussianLayer":
        r"""The layer with ξ = (B(t1) − B(t0))/√(t1 − t0), so that
        :math:`\sqrt{t_1 - t_0}\,G(y) = W(t_1, y) - W(t_0, y)` (up to round-off), W the Brownian
        field of ``field`` driven by ``path`` (shape ``field.shape``), t0 < t1."""
        if not isinstance(path, BrownianPath):
            raise TypeError(f"path must be a BrownianPath, got {type(path).__name__}")
        if not isinstance(field, NoiseField):
            raise TypeError(f"field must be a NoiseField, got {type(field).__name__}")
        if tuple(path.shape) != tuple(field.shape):
            raise ValueError(f"path.shape must be field.shape = {field.shape}, got {path.shape}")
        t0, t1 = check_real("t0", t0), check_real("t1", t1)
        if not t1 > t0:
            raise ValueError(f"need t0 < t1, got t0 = {t0}, t1 = {t1}")
        return cls(field, path.increment(t0, t1) / math.sqrt(t1 - t0))

    @property
    def d(self) -> int:
        return int(self.field.d)

    @property
    def width(self) -> float:
        """m = ∞."""
        return math.inf

    def __call__(self, y) -> np.ndarray:
        """G(y) for points y of shape (..., d) (y ≠ 0); returns (..., d)."""
        y = np.asarray(y, dtype=np.float64)
        if y.ndim < 1 or y.shape[-1] != self.d:
            raise ValueError(f"y must have shape (..., {self.d}), got {y.shape}")
        flat = retract(y.reshape(-1, self.d))
        return self.field.values(self.xi, flat).reshape(y.shape)
