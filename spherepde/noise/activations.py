"""Activation functions σ of the MLP blocks (docs/equations.md, Paper 2) with their derivatives.

An :class:`Activation` holds σ and σ′ as vectorised numpy functions and whether σ is odd
(σ(−z) = −σ(z)), which decides whether the MLP noise field can be odd (Assumption 1).
Named activations: ``relu``, ``tanh``, ``silu``, ``sigmoid``, ``gelu`` (exact, erf form).
A user callable σ is accepted too; its derivative is then a central difference and its
oddness is tested numerically on [−8, 8].
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import erf, expit

Array = np.ndarray

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True, eq=False)
class Activation:
    """σ, σ′ and oddness of an activation; ``name`` is what is written to output files."""

    name: str
    f: Callable[[Array], Array]
    df: Callable[[Array], Array]
    odd: bool

    def __call__(self, z):
        return self.f(np.asarray(z, dtype=float))


def _relu(z):
    return np.maximum(z, 0.0)


def _drelu(z):
    return (z > 0).astype(float)


def _dtanh(z):
    return 1.0 - np.tanh(z) ** 2


def _silu(z):
    return z * expit(z)


def _dsilu(z):
    s = expit(z)
    return s * (1.0 + z * (1.0 - s))


def _dsigmoid(z):
    s = expit(z)
    return s * (1.0 - s)


def _gelu(z):
    return 0.5 * z * (1.0 + erf(z / _SQRT2))


def _dgelu(z):
    return 0.5 * (1.0 + erf(z / _SQRT2)) + z * _INV_SQRT_2PI * np.exp(-0.5 * z * z)


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation("relu", _relu, _drelu, False),
    "tanh": Activation("tanh", np.tanh, _dtanh, True),
    "silu": Activation("silu", _silu, _dsilu, False),
    "sigmoid": Activation("sigmoid", expit, _dsigmoid, False),
    "gelu": Activation("gelu", _gelu, _dgelu, False),
}


def get_activation(activation) -> Activation:
    """An :class:`Activation` from a name in :data:`ACTIVATIONS`, an Activation, or a callable.

    A callable must map float arrays to float arrays of the same shape; its derivative is a
    central difference (step 1e-6) and it is called odd when |σ(z) + σ(−z)| ≤ 1e-12·(1 + |σ(z)|)
    on 801 points of [−8, 8].
    """
    if isinstance(activation, Activation):
        return activation
    if isinstance(activation, str):
        key = activation.strip().lower()
        if key not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)} or a callable, "
                             f"got {activation!r}")
        return ACTIVATIONS[key]
    if not callable(activation):
        raise TypeError(f"activation must be a name in {sorted(ACTIVATIONS)} or a callable, "
                        f"got {type(activation).__name__}")
    z = np.linspace(-8.0, 8.0, 801)
    try:
        fz = np.asarray(activation(z), dtype=float)
    except Exception as err:  # noqa: BLE001 - report any failure of the user's function
        raise ValueError(f"activation callable failed on a float array: {err}") from err
    if fz.shape != z.shape or not np.all(np.isfinite(fz)):
        raise ValueError("activation callable must return finite values of the input's shape")
    odd = bool(np.all(np.abs(fz + np.asarray(activation(-z), float)) <= 1e-12 * (1 + np.abs(fz))))
    h = 1e-6

    def f(x):
        return np.asarray(activation(x), dtype=float)

    def df(x):
        return (f(x + h) - f(x - h)) / (2 * h)

    name = getattr(activation, "__name__", "callable")
    return Activation(f"callable:{name}", f, df, odd)
