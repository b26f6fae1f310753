"""Self-attention velocity fields on the sphere S^{d−1} (docs/equations.md, Paper 1).

For a measure ρ = Σ_j w_j δ_{y_j} (a density on a grid: y_j the cell centres,
w_j = ρ_j |cell_j|; or N particles with w_j = 1/N) and B = QᵀK:

    softmax:  m_β[ρ](x) = Σ_j w_j e^{β⟨Bᵀx, y_j⟩} y_j / Σ_j w_j e^{β⟨Bᵀx, y_j⟩}
    usa:      m_β[ρ](x) = Σ_j w_j e^{β⟨Bᵀx, y_j⟩ − β} y_j          (unnormalised, rescaled by e^{−β})
    β = ∞:    m_∞(x)    = Bᵀx / |Bᵀx|                               (softmax, full support)

    X_β[ρ](x) = P_x V m_β[ρ](x),   P_x = I − x xᵀ.

Modules, in the order they import each other (each imports only those above it):

* :mod:`.compiled`, :mod:`.torch_sums` — the direct log-domain sums in numba (fused, every
  core, culled per target) and in PyTorch (a GPU when present);
* :mod:`.direct` — the same sums in numpy: the float64/float32 reference and the culled sums;
* :mod:`.funk_hecke` — the kernel's Funk–Hecke series: ĩ_l(κ), Ĩ_k(κ), tail bounds, B = c·R,
  the per-target synthesis for any B;
* :mod:`.grid_sums`, :mod:`.circle_sums`, :mod:`.point_sums` — spectral sums of cell weights on
  a GaussGrid / CircleGrid and of weighted points on S², with their target caches;
* :mod:`.certify` — every spectral target accepted within ``tol`` or redone exactly;
* :mod:`.model` — :class:`Attention` (the head, its mean for weighted points and the cost
  model of "auto");
* :mod:`.density` — :class:`DensityAttention`, the velocity of a density for the solvers.
"""
from __future__ import annotations

from spherepde.dynamics.attention.density import DENSITY_METHODS, GENERAL_MAX_KAPPA, DensityAttention
from spherepde.dynamics.attention.funk_hecke import (circular_ive, funk_hecke_coefficients,
                                                     orthogonal_scale, spherical_ive)
from spherepde.dynamics.attention.model import (KINDS, METHODS, TORCH_MIN_PAIRS, Attention,
                                                nonnegative_weights, spectral_cost)

__all__ = ["Attention", "DensityAttention", "KINDS", "METHODS", "DENSITY_METHODS",
           "TORCH_MIN_PAIRS", "GENERAL_MAX_KAPPA", "nonnegative_weights", "spectral_cost",
           "spherical_ive", "circular_ive", "funk_hecke_coefficients", "orthogonal_scale"]
