"""Observables of token configurations (the papers' figures): cosine similarities and the
interaction energy of the empirical measure, for one set of tokens (N, d) or a batch (..., N, d)."""
from __future__ import annotations

import numpy as np

from spherepde.checks import check_real
from spherepde.dynamics.energy import scaled_interaction_energy
from spherepde.solvers.lagrangian.particles import retract



def _check_tokens(x) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("x must be a real array of shape (..., N, d)") from None
    if a.ndim < 2 or a.shape[-2] < 1 or a.shape[-1] < 2:
        raise ValueError(f"x must have shape (..., N, d) with N >= 1, d >= 2, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("x must be finite (it contains NaN or inf)")
    if np.any(np.linalg.norm(a, axis=-1) == 0):
        raise ValueError("x must not contain zero vectors")
    return a


def cosine_similarity(x) -> np.ndarray:
    """Pairwise cosine similarities ⟨x_i, x_j⟩/(|x_i||x_j|) of tokens x (..., N, d), clipped
    to [−1, 1]; shape (..., N, N)."""
    u = retract(_check_tokens(x))
    return np.clip(np.matmul(u, np.swapaxes(u, -1, -2)), -1.0, 1.0)


ENERGY_FORMS = ("scaled", "raw", "log")


def token_interaction_energy(x, beta: float, *, form: str = "scaled") -> np.ndarray:
    r"""Interaction energy of the empirical measure of tokens x (..., N, d) (unit vectors),

    .. math:: E_\beta(\mu) = \frac{1}{2N^2}\sum_{i,j}\big(e^\beta - e^{\beta\langle x_i, x_j\rangle}\big)
              = e^\beta\,\tfrac12\,\mathrm{mean}_{ij}\big(1 - e^{-\beta(1 - \langle x_i,x_j\rangle)}\big),

    zero exactly when all tokens coincide.  ``form``: "scaled" (default) e^{−β}E_β (never
    overflows; the convention of :func:`spherepde.validation.metrics.interaction_energy`, equal
    to it with weights 1/N), "raw" E_β (inf when e^β overflows), or "log" log E_β (−inf at a
    single cluster).  β > 0 finite.  Returns shape (...,).  The one implementation of the
    energy (:func:`spherepde.dynamics.energy.scaled_interaction_energy`, weights 1/N).
    """
    b = check_real("beta", beta, positive=True)
    if form not in ENERGY_FORMS:
        raise ValueError(f"form must be one of {ENERGY_FORMS}, got {form!r}")
    u = retract(_check_tokens(x))
    n = u.shape[-2]
    flat = u.reshape(-1, n, u.shape[-1])
    w = np.full(n, 1.0 / n)
    scaled = np.array([scaled_interaction_energy(xi, w, b) for xi in flat]).reshape(u.shape[:-2])
    if form == "scaled":
        return scaled
    if form == "raw":
        with np.errstate(over="ignore"):
            return np.exp(b) * scaled
    with np.errstate(divide="ignore"):
        return b + np.log(scaled)


__all__ = ["ENERGY_FORMS", "cosine_similarity", "token_interaction_energy"]
