"""The interaction energy of the attention dynamics (Paper 1: the dynamics with V = Q = K = I is
its gradient ascent; Paper 2: the synchronisation observable), one implementation for densities,
particles and transformer tokens.

.. math:: e^{-\\beta} E_\\beta(\\rho) = \\tfrac12 \\iint \\big(1 - e^{\\beta(\\langle x, y\\rangle - 1)}\\big)
          \\, d\\rho(x)\\, d\\rho(y)

for ρ = Σ_i w_i δ_{x_i} (a density enters as its cell centres and cell masses).  Zero exactly at
a single Dirac mass; the e^{−β} scaling keeps it finite at any β.  The integrand is written
−expm1(β(⟨x, y⟩ − 1)) with ⟨x, y⟩ − 1 from :func:`~spherepde.grids.geometry.cosine_minus_one`,
so nearly clustered points keep their relative accuracy.
"""
from __future__ import annotations

import numpy as np

from spherepde.grids.geometry import cosine_minus_one


def scaled_interaction_energy(x: np.ndarray, w: np.ndarray, beta: float, *, block: int = 4096) -> float:
    """e^{−β} E_β of the weighted points ``x`` (n, d) unit vectors, ``w`` (n,) ≥ 0 (unchecked:
    callers validate), β ≥ 0 finite; rows in blocks of ``block`` (memory O(block · n))."""
    total = 0.0
    for s in range(0, x.shape[0], block):
        c1 = np.clip(cosine_minus_one(x[s:s + block], x), -2.0, 0.0)  # exactly 0 for x_i = x_j
        total += float(np.sum(w[s:s + block, None] * w[None, :] * -np.expm1(beta * c1)))
    return 0.5 * total


__all__ = ["scaled_interaction_energy"]
