r"""N tokens under attention and common MLP noise: the limit SDE of docs/equations.md (Paper 2).

Stratonovich form (the one the density solver discretises):

    dX^i = s · P_{X^i} V m_β[μ^N_t](X^i) dt + P_{X^i} ∘ W(dt, X^i),

Itô form: the same with  P_{X^i} W(dt, X^i)  and the radial drift  −κ(1)(d − 1)/2 · X^i dt.
The **same** field W moves every token (common noise).  s = ``attention_scale`` (+1 attractive,
0 off, −1 repulsive, as in the paper's panels).

Where the noise comes from
--------------------------
* ``noise=NoiseField, path=BrownianPath`` (d = 2, 3): the truncated expansion of
  :mod:`spherepde.noise.field` evaluated at the tokens, ΔW = W(t + Δt) − W(t) from the path —
  the same numbers a density run with that path uses, so particles and density can be compared
  realisation by realisation.
* ``kernel=NoiseKernel, seed=…`` (any d ≥ 2, no truncation): :class:`PointGaussianNoise` draws
  the field's increment at the current tokens exactly in law, ΔW(X) ~ N(0, Δt κ(X Xᵀ) ⊗ I_d),
  and for the Heun corrector the increment at the predicted tokens *conditionally* on it
  (the same realisation of the field at new points).  Not refinement-consistent in Δt.

Schemes (velocity f = s P_x V m_β, all tokens one state in R^{N×d}, R(x) = x/|x|):

* ``"heun"`` (Stratonovich, default): with the same ΔW in both stages,
  X̃ = R(X + f(X)Δt + P_X ΔW(X)),
  X⁺ = R(X + ½(f(X) + f(X̃))Δt + ½(P_X ΔW(X) + P_X̃ ΔW(X̃))).
* ``"euler-maruyama"`` (Itô): X⁺ = R(X + (f(X) − κ(1)(d − 1)/2 X)Δt + P_X ΔW(X)).  The radial
  drift keeps |X| = 1 in mean; the retraction removes the O(√Δt) fluctuation of |X| (a change
  of O(Δt^{3/2}) per step with mean zero, which keeps the weak order 1 of Euler–Maruyama).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import eigh

from spherepde.dynamics.attention import Attention
from spherepde.grids.geometry import project_tangent
from spherepde.solvers.lagrangian.particles import ParticleODE, retract

#: the SDE integrators of :class:`ParticleSDE` (its ``method``): Stratonovich, Itô
SDE_INTEGRATORS = ("heun", "euler-maruyama")


def _sqrt_psd(k: np.ndarray) -> np.ndarray:
    """A with A Aᵀ = k for a symmetric positive semi-definite k (eigenvalues < 0 from round-off → 0)."""
    lam, q = eigh(k)
    return q * np.sqrt(np.clip(lam, 0.0, None))


class PointGaussianNoise:
    """Exact Gaussian increments of the MLP noise field at token positions, any d.

    ``increment(x, dt)`` → ΔW(x) (N, d) with covariance Δt κ(⟨x_i, x_j⟩) δ_{αβ};
    ``conditional(x, w, y, dt)`` → ΔW(y) given ΔW(x) = w, for the same field realisation:
    mean K_yx K_xx⁺ w, covariance Δt(K_yy − K_yx K_xx⁺ K_xy) (K = κ of the inner products;
    the pseudo-inverse handles coinciding tokens, i.e. synchronised states).
    """

    #: Chebyshev degree of the κ table and the relative accuracy it must reach to be used
    TABLE_DEGREE, TABLE_RTOL = 128, 1e-12

    def __init__(self, kernel, seed: int | None = None):
        self.kernel = kernel
        self.d = int(kernel.d)
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self._kappa = self._table(kernel)

    @classmethod
    def _table(cls, kernel):
        """κ as a Chebyshev interpolant on [−1, 1] when that is accurate to TABLE_RTOL·κ(1) at
        1001 check points (smooth activations: quadrature per matrix entry would cost ~10⁴ σ
        evaluations each); otherwise κ itself (ReLU's closed form is cheap; kinked callables
        stay exact)."""
        from numpy.polynomial.chebyshev import Chebyshev

        table = Chebyshev.interpolate(kernel.kappa, cls.TABLE_DEGREE)
        t = np.cos(np.linspace(0.0, np.pi, 1001) + 0.5 * np.pi / 1000)
        t = np.concatenate([t, [1.0, -1.0, 1 - 1e-9]])
        err = float(np.max(np.abs(table(t) - kernel.kappa(t))))
        return table if err <= cls.TABLE_RTOL * abs(kernel.kappa1) else kernel.kappa

    def _k(self, a, b):
        return self._kappa(np.clip(a @ b.T, -1.0, 1.0))

    def increment(self, x: np.ndarray, dt: float) -> np.ndarray:
        a = _sqrt_psd(self._k(x, x))
        return math.sqrt(dt) * (a @ self.rng.standard_normal((x.shape[0], self.d)))

    def conditional(self, x: np.ndarray, w: np.ndarray, y: np.ndarray, dt: float) -> np.ndarray:
        kxx, kyx, kyy = self._k(x, x), self._k(y, x), self._k(y, y)
        lam, q = eigh(kxx)
        keep = lam > 1e-12 * max(lam[-1], 1e-300)
        pinv = (q[:, keep] / lam[keep]) @ q[:, keep].T
        g = kyx @ pinv
        mean = g @ w
        cov = kyy - g @ kyx.T
        cov = 0.5 * (cov + cov.T)
        return mean + math.sqrt(dt) * (_sqrt_psd(cov) @ self.rng.standard_normal(w.shape))


class ParticleSDE(ParticleODE):
    """The N-token limit SDE (see the module docstring); ``run`` as :class:`ParticleODE`.

    Parameters
    ----------
    attention : Attention or None
        The drift (None: noise only).
    noise, path : NoiseField and BrownianPath (d = 2, 3; shared with a density run), or
    kernel, seed : NoiseKernel and an int (exact Gaussian increments, any d).
        Neither: the deterministic attention flow (Heun = RK2 trapezoid).
    method : "heun" (Stratonovich) or "euler-maruyama" (Itô, with the radial drift).
    attention_scale : float
        s multiplying the attention velocity.
    d : int, optional
        Needed only when there is neither attention nor a noise that fixes it.
    attention_method, tol : as for :class:`ParticleODE` (the drift's :meth:`Attention.mean`).
    """

    def __init__(self, attention: Attention | None = None, *, noise=None, path=None, kernel=None,
                 seed: int | None = None, method: str = "heun", attention_scale: float = 1.0,
                 weights=None, d: int | None = None, attention_method: str = "auto",
                 tol: float = 1e-8) -> None:
        if attention is not None and not isinstance(attention, Attention):
            raise TypeError(f"attention must be an Attention or None, got {type(attention).__name__}")
        if method not in SDE_INTEGRATORS:
            raise ValueError(f"method must be one of {SDE_INTEGRATORS}, got {method!r}")
        if (noise is None) != (path is None):
            raise ValueError("noise and path go together: give both or neither")
        if noise is not None and kernel is not None:
            raise ValueError("give either noise+path (expansion) or kernel (exact sampler), not both")
        dims = {a for a in (None if attention is None else attention.d,
                            None if noise is None else noise.d,
                            None if kernel is None else int(kernel.d), d) if a is not None}
        if len(dims) != 1:
            raise ValueError(f"the dimensions of attention, noise, kernel and d must agree and at "
                             f"least one must be given, got {sorted(dims)}")
        if noise is not None and tuple(path.shape) != tuple(noise.shape):
            raise ValueError(f"path.shape must be {noise.shape}, got {path.shape}")
        scale = float(attention_scale)
        if not math.isfinite(scale):
            raise ValueError(f"attention_scale must be finite, got {attention_scale!r}")
        self.attention = attention
        self.method = method
        self.weights = None if weights is None else self._check_weights(weights)
        self.block = None
        self._set_attention_options(attention_method, tol)
        self.result = None
        self._d = dims.pop()
        self.noise, self.path = noise, path
        self.sampler = None if kernel is None else PointGaussianNoise(kernel, seed)
        self.kernel = kernel if kernel is not None else (None if noise is None else noise.kernel)
        self.attention_scale = scale

    @property
    def d(self) -> int:
        return self._d

    @property
    def kappa1(self) -> float:
        """Variance κ(1) of the noise actually used (truncated for an expansion); 0 without noise."""
        if self.noise is not None:
            return self.noise.variance
        return 0.0 if self.sampler is None else float(self.sampler.kernel.kappa(1.0))

    def velocity(self, x: np.ndarray) -> np.ndarray:
        if self.attention is None or self.attention_scale == 0.0:
            return np.zeros_like(x)
        return self.attention_scale * super().velocity(x)

    def _dw(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        if self.noise is not None:
            if getattr(self, "_inc_key", None) != (t, dt):
                self._inc = self.path.increment(t, t + dt)
                self._inc_key = (t, dt)
            return self.noise.values(self._inc, x)
        assert self.sampler is not None  # called only with noise
        return self.sampler.increment(x, dt)

    def step(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        h = float(dt)
        has_noise = self.noise is not None or self.sampler is not None
        f0 = self._f(x)
        w0 = self._dw(x, t, h) if has_noise else np.zeros_like(x)
        if self.method == "euler-maruyama":
            radial = -0.5 * self.kappa1 * (self.d - 1) * x
            return retract(x + (f0 + radial) * h + project_tangent(x, w0))
        g0 = project_tangent(x, w0)
        xp = retract(x + f0 * h + g0)
        f1 = self._f(xp)
        if not has_noise:
            g1 = np.zeros_like(x)
        elif self.noise is not None:
            g1 = project_tangent(xp, self._dw(xp, t, h))
        else:
            assert self.sampler is not None  # has_noise
            g1 = project_tangent(xp, self.sampler.conditional(x, w0, xp, h))
        return retract(x + 0.5 * (f0 + f1) * h + 0.5 * (g0 + g1))

    def config(self) -> dict:
        """Parameters to write to output files."""
        out = {"method": self.method, "attention_scale": self.attention_scale, "d": self.d,
               "attention": None if self.attention is None else self.attention.to_dict()}
        if self.noise is not None:
            out.update(noise=self.noise.to_dict(), path=self.path.to_dict())
        if self.sampler is not None:
            out.update(noise="exact-gaussian-at-points", seed=self.sampler.seed)
        return out

    def __repr__(self) -> str:
        src = "expansion" if self.noise is not None else ("exact" if self.sampler else "none")
        return f"ParticleSDE(d={self.d}, method={self.method!r}, noise={src})"


__all__ = ["SDE_INTEGRATORS", "ParticleSDE", "PointGaussianNoise"]
