"""Exact solutions of transport on the sphere by characteristics.

For ∂_t ρ + div_S(ρ u) = 0 with a smooth tangent velocity u(x) (steady), along a
characteristic x(t):   dx/dt = u(x),   d/dt log ρ(t, x(t)) = −div_S u(x(t)).
Integrating both backward from a target point gives ρ(t, x) = ρ0(x0) exp(−∫ div_S u) exactly
(to the ODE tolerance).  For u = P_x f(x) with f smooth on R^d,

    div_S(P_x f)(x) = tr(P_x Df(x)) − (d − 1) ⟨x, f(x)⟩.

Zero-temperature attention (docs/equations.md, β = ∞): f(x) = V Bᵀx/|Bᵀx|,
Df = V (I/|z| − z zᵀ/|z|³) Bᵀ with z = Bᵀx.  With A = VBᵀ symmetric the characteristics are
x(t) = e^{s(t)A}x0/|e^{s(t)A}x0|, ds/dt = 1/|Bᵀx(t)| — used in the tests as an independent check.
"""
from __future__ import annotations

import numpy as np

from spherepde.grids.geometry import project_tangent


class ZeroTemperatureFlow:
    """u(x) = P_x V Bᵀx/|Bᵀx| and its surface divergence, for unit points x (..., d)."""

    def __init__(self, B: np.ndarray, V: np.ndarray):
        self.B = np.asarray(B, float)
        self.V = np.asarray(V, float)

    def f(self, x):
        z = x @ self.B
        return (z / np.linalg.norm(z, axis=-1, keepdims=True)) @ self.V.T

    def velocity(self, x):
        f = self.f(x)
        return project_tangent(x, f)

    def divergence(self, x):
        """div_S u = tr(VBᵀ)/|z| − zᵀBᵀVz/|z|³ − (d−1)⟨x, f(x)⟩  (f is 0-homogeneous, so Df x = 0)."""
        d = x.shape[-1]
        z = x @ self.B
        nz = np.linalg.norm(z, axis=-1)
        tr = np.trace(self.V @ self.B.T) / nz - np.einsum("...i,ij,...j->...", z, self.B.T @ self.V, z) / nz**3
        return tr - (d - 1) * np.sum(x * self.f(x), axis=-1)


def characteristics_solution(flow, rho0, x: np.ndarray, t: float, *, steps: int | None = None) -> np.ndarray:
    """ρ(t, x) for the steady flow ``flow`` (``velocity(x)``, ``divergence(x)``) and initial
    density ``rho0(x)``, at unit points x (..., d), by classical RK4 integrated backward.

    ``steps`` defaults to 100·max(1, t) (RK4; error ≈ 1e-11 for the O(1) Lipschitz fields here).
    """
    n = steps or int(np.ceil(100 * max(1.0, t)))
    h = -t / n
    y = x.reshape(-1, x.shape[-1]).copy()
    logj = np.zeros(y.shape[0])

    def rhs(p):
        p = p / np.linalg.norm(p, axis=-1, keepdims=True)
        return flow.velocity(p), -flow.divergence(p)

    for _ in range(n):
        k1, l1 = rhs(y)
        k2, l2 = rhs(y + 0.5 * h * k1)
        k3, l3 = rhs(y + 0.5 * h * k2)
        k4, l4 = rhs(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        logj = logj + h / 6 * (l1 + 2 * l2 + 2 * l3 + l4)
        y /= np.linalg.norm(y, axis=-1, keepdims=True)
    # integrating dlogj/dt = −div backward from t to 0 leaves logj = ∫_0^t div u ds, and
    # log ρ(t, x) = log ρ0(x0) − ∫_0^t div u ds
    return (rho0(y) * np.exp(-logj)).reshape(x.shape[:-1])
