"""Covariance kernel κ of the MLP noise field (docs/equations.md, Paper 2) and the rates built from it.

The MLP of one layer, with width m, is

    G(y) = (1/√m) W σ(U y/√d + b_U) + b_W,     y ∈ S^{d−1} ⊂ R^d,

U ∈ R^{m×d}, W ∈ R^{d×m} with iid N(0, 1) entries, b_U ~ N(0, σ_U² I_m), b_W ~ N(0, σ_W² I_d).
For every m its covariance is E[G(x) G(y)ᵀ] = κ(⟨x, y⟩) I_d with

    κ(t) = E[σ(a) σ(b)] + σ_W²,   (a, b) centred Gaussian, Var a = Var b = s² = 1/d + σ_U²,
                                   Cov(a, b) = c(t) = t/d + σ_U²,

and by Price's theorem κ′(t) = (1/d) E[σ′(a) σ′(b)].  The correlation is ρ(t) = c(t)/s², and
1 − ρ = (1 − t)/(d s²) is what the code carries (it is exact near t = 1, where 1 − ρ is small).

ReLU uses the arc-cosine closed form (θ = arccos ρ):
    κ(t) = (s²/2π)(sin θ + (π − θ) cos θ) + σ_W²,   κ′(t) = (π − θ)/(2π d).
Every other activation uses a tensor Gauss–Hermite rule for the 2-D Gaussian expectation,
writing a = s z₁, b = s(ρ z₁ + √(1 − ρ²) z₂) with z₁, z₂ iid N(0, 1); for |ρ| = 1 the rule is
the 1-D one (b = ρ a).  With the default 96 nodes per axis the named smooth activations are
converged to ~1e-13 for s ≲ 1 (the tests check that doubling the nodes changes nothing beyond
that).  For a user callable the same rule is used: it is accurate only for smooth σ (a kink
makes it converge algebraically), and σ′ is then a central difference (≈1e-10 accurate).

From κ (docs/equations.md, "Synchronization by noise"):
    λ₁  = ((d−3)/2) κ′(1) − ((d−1)/2) κ(1)            (top Lyapunov exponent of the noise flow)
    λ̄  = (d−1) κ′(1) − (d−3) κ(1)                      (Assumption 1 needs λ̄ < 0)
    λ̄′ = −inf_{u∈[−1,1]} F(u),  F(u) = β e^{βu} G(u)/(e^β − e^{βu}),
    G(u) = κ(u)(d − 2 + u² − βu(1 − u²)) + κ(1)(β(1 − u²) − (d − 1)u),   lim_{u→1} F = −λ̄.

Karhunen–Loève (Funk–Hecke) coefficients, see :meth:`NoiseKernel.kl_coefficients`.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.optimize import minimize_scalar
from scipy.special import roots_hermitenorm

from spherepde.checks import check_int
from spherepde.noise.activations import ACTIVATIONS, Activation, get_activation

Array = np.ndarray

_T_SLACK = 1e-12          # t this far outside [−1, 1] is clipped, further is an error
_PANEL = 32              # Gauss–Legendre nodes per panel of the θ rule
_CHUNK = 1 << 21          # quadrature points evaluated at once (memory ≈ 16 MiB per array)
_VARIANCE_TOL = 1e-6      # largest round-off bound accepted on a captured variance fraction


@lru_cache(maxsize=8)
def _hermite_rule(n: int) -> tuple[Array, Array]:
    """Nodes z and weights w (Σ w = 1) with Σ w f(z) ≈ E[f(Z)], Z ~ N(0, 1)."""
    z, w = roots_hermitenorm(n)
    return z, w / w.sum()


@lru_cache(maxsize=8)
def _theta_rule(nodes: int) -> tuple[Array, Array]:
    """Composite Gauss–Legendre rule for ∫_0^π f(θ) dθ: ⌈nodes/32⌉ equal panels of 32 nodes.

    Panels rather than one high-order rule: the weights of a single rule with ~1000 nodes are
    only ~1e-8 accurate near the ends (Golub–Welsch), which puts a ~1e-13 bias on every KL
    coefficient; 32-node weights are accurate to a few ε.
    """
    x, w = leggauss(_PANEL)
    panels = -(-nodes // _PANEL)
    h = np.pi / panels
    theta = (h * np.arange(panels)[:, None] + 0.5 * h * (x[None, :] + 1.0)).ravel()
    return theta, np.tile(0.5 * h * w, panels)


def _log_area(d: int) -> float:
    """log ω_d, ω_d = 2π^{d/2}/Γ(d/2) the surface area of S^{d−1} ⊂ R^d."""
    return math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d)


#: memory allowed for the (nmax + 1) × nodes Legendre tables of :meth:`NoiseKernel._kl`
KL_MEMORY_LIMIT = 2**30


def _kl_bytes(nmax: int, nodes: int) -> int:
    """Bytes of the two float64 tables P_n(cos θ_j) and |P_n(cos θ_j)| of the KL integrals."""
    return 2 * 8 * (nmax + 1) * nodes


def max_kl_degree() -> int:
    """The largest nmax whose KL integrals (default nodes 2·nmax + 200) fit in KL_MEMORY_LIMIT."""
    n = int(math.isqrt(KL_MEMORY_LIMIT // 32))
    while _kl_bytes(n, 2 * n + 200) > KL_MEMORY_LIMIT:
        n -= 1
    while _kl_bytes(n + 1, 2 * n + 202) <= KL_MEMORY_LIMIT:
        n += 1
    return n


def _check_sigma(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be ≥ 0 and finite, got {value!r}")
    return value


def gegenbauer(nmax: int, d: int, t) -> Array:
    """P_n^{(d)}(t) for n = 0..nmax, shape (nmax+1,) + t.shape: the Legendre polynomials of S^{d−1}.

    Normalised P_n(1) = 1 (d = 2: Chebyshev T_n; d = 3: Legendre P_n; in general the Gegenbauer
    C_n^{((d−2)/2)} divided by its value at 1), by the stable three-term recurrence
        P_{n+1}(t) = ((2n + d − 2) t P_n(t) − n P_{n−1}(t)) / (n + d − 2),   P_0 = 1, P_1 = t.
    """
    nmax, d = check_int("nmax", nmax, 0), check_int("d", d, 2)
    t = np.asarray(t, dtype=float)
    p = np.empty((nmax + 1,) + t.shape)
    p[0] = 1.0
    if nmax >= 1:
        p[1] = t
    for n in range(1, nmax):
        p[n + 1] = ((2 * n + d - 2) * t * p[n] - n * p[n - 1]) / (n + d - 2)
    return p


def _relu_theta(delta: Array) -> Array:
    """θ = arccos(1 − δ) for δ = 1 − ρ ∈ [0, 2], accurate for small δ."""
    return 2.0 * np.arcsin(np.sqrt(np.clip(0.5 * delta, 0.0, 1.0)))


@dataclass(frozen=True)
class NoiseKernel:
    """κ, κ′, the rates λ₁, λ̄, λ̄′ and the Karhunen–Loève spectrum of the MLP noise field on S^{d−1}.

    activation: a name in ``ACTIVATIONS`` (relu, tanh, silu, sigmoid, gelu), an
        :class:`~spherepde.noise.activations.Activation` or a callable (stored as an Activation).
    d: ambient dimension (tokens live on S^{d−1}), integer ≥ 2.
    sigma_u, sigma_w: standard deviations of the biases b_U and b_W, ≥ 0 and finite.
    quad_nodes: Gauss–Hermite nodes per axis for activations without a closed form (≥ 8).

    κ, κ′ and F take t (or u) of any shape in [−1, 1] and return float arrays of that shape
    (0-d for a scalar); κ(1), κ′(1), λ₁, λ̄ are cached float properties.
    """

    activation: Activation
    d: int
    sigma_u: float = 0.0
    sigma_w: float = 0.0
    quad_nodes: int = 96

    def __post_init__(self):
        object.__setattr__(self, "activation", get_activation(self.activation))
        object.__setattr__(self, "d", check_int("d", self.d, 2))
        object.__setattr__(self, "sigma_u", _check_sigma("sigma_u", self.sigma_u))
        object.__setattr__(self, "sigma_w", _check_sigma("sigma_w", self.sigma_w))
        object.__setattr__(self, "quad_nodes", check_int("quad_nodes", self.quad_nodes, 8))

    # ---------------------------------------------------------------- κ and κ′
    @property
    def s2(self) -> float:
        """s² = 1/d + σ_U², the variance of each pre-activation."""
        return 1.0 / self.d + self.sigma_u ** 2

    @property
    def _closed_form(self) -> bool:
        return self.activation is ACTIVATIONS["relu"]

    def _one_minus_t(self, t) -> Array:
        t = np.asarray(t, dtype=float)
        if not np.all(np.isfinite(t)) or np.any(np.abs(t) > 1.0 + _T_SLACK):
            raise ValueError(f"t must lie in [-1, 1], got values in [{np.min(t)}, {np.max(t)}]")
        return 1.0 - np.clip(t, -1.0, 1.0)

    def _pair(self, f, g, delta: Array, gap: bool = False) -> Array:
        """E[f(a) g(b)] (or ½E[(f(a) − f(b))²] if gap) for a, b ~ N(0, s²) with correlation 1 − δ."""
        if gap:
            g = f
        z, w = _hermite_rule(self.quad_nodes)
        s = math.sqrt(self.s2)
        fa = f(s * z)
        delta = np.asarray(delta, dtype=float)
        flat = delta.ravel()
        out = np.empty(flat.shape)
        rho = 1.0 - flat
        c = np.sqrt(flat * (2.0 - flat))           # √(1 − ρ²)
        one_d = c == 0.0                            # ρ = ±1: b = ρ a, a 1-D expectation
        for i in np.flatnonzero(one_d):
            gb = g(s * rho[i] * z)
            out[i] = 0.5 * w @ (fa - gb) ** 2 if gap else w @ (fa * gb)
        idx = np.flatnonzero(~one_d)
        step = max(1, _CHUNK // z.size ** 2)
        for start in range(0, idx.size, step):
            k = idx[start:start + step]
            b = s * (rho[k, None, None] * z[None, :, None] + c[k, None, None] * z[None, None, :])
            gb = g(b)
            if gap:
                out[k] = 0.5 * np.einsum("i,j,kij->k", w, w, (fa[None, :, None] - gb) ** 2)
            else:
                out[k] = np.einsum("i,j,kij->k", w * fa, w, gb)
        return out.reshape(delta.shape)

    def _kappa_eps(self, eps: Array) -> Array:
        """κ(1 − ε) for ε ∈ [0, 2]."""
        delta = np.asarray(eps, dtype=float) / (self.d * self.s2)
        if self._closed_form:
            theta = _relu_theta(delta)
            val = self.s2 / (2 * np.pi) * (np.sqrt(delta * (2.0 - delta)) + (np.pi - theta) * (1.0 - delta))
        else:
            f = self.activation.f
            val = self._pair(f, f, delta)
        return val + self.sigma_w ** 2

    def _gap_eps(self, eps: Array) -> Array:
        """κ(1) − κ(1 − ε) ≥ 0 without cancellation, = ½E[(σ(a) − σ(b))²] (a, b have equal law)."""
        delta = np.asarray(eps, dtype=float) / (self.d * self.s2)
        if self._closed_form:
            # (s²/2π)(π(1 − cos θ) − (sin θ − θ cos θ)), the bracket by its series for small θ
            theta = _relu_theta(delta)
            th2 = theta * theta
            series = theta * th2 / 3.0 * (1.0 - th2 / 10.0 * (1.0 - th2 / 28.0 * (1.0 - th2 / 54.0)))
            direct = np.sin(theta) - theta * np.cos(theta)
            bracket = np.where(theta < 1e-2, series, direct)
            return self.s2 / (2 * np.pi) * (np.pi * delta - bracket)
        return self._pair(self.activation.f, None, delta, gap=True)

    def kappa(self, t) -> Array:
        """κ(t) = E[σ(a)σ(b)] + σ_W² for t ∈ [−1, 1] (any shape; returns an array of t's shape).

        Values within 1e-12 outside [−1, 1] are clipped, others raise ValueError.
        """
        return self._kappa_eps(self._one_minus_t(t))

    def kappa_prime(self, t) -> Array:
        """κ′(t) = (1/d) E[σ′(a)σ′(b)] (Price), same shapes and checks as :meth:`kappa`."""
        delta = self._one_minus_t(t) / (self.d * self.s2)
        if self._closed_form:
            return (np.pi - _relu_theta(delta)) / (2 * np.pi * self.d)
        df = self.activation.df
        return self._pair(df, df, delta) / self.d

    @cached_property
    def kappa1(self) -> float:
        """κ(1) = E[σ(sZ)²] + σ_W² (1-D Gauss–Hermite; ReLU: s²/2 + σ_W²)."""
        if self._closed_form:
            return 0.5 * self.s2 + self.sigma_w ** 2
        z, w = _hermite_rule(self.quad_nodes)
        return float(w @ self.activation.f(math.sqrt(self.s2) * z) ** 2) + self.sigma_w ** 2

    @cached_property
    def kappa_prime1(self) -> float:
        """κ′(1) = (1/d) E[σ′(sZ)²] (ReLU: 1/(2d))."""
        if self._closed_form:
            return 0.5 / self.d
        z, w = _hermite_rule(self.quad_nodes)
        return float(w @ self.activation.df(math.sqrt(self.s2) * z) ** 2) / self.d

    # ---------------------------------------------------------------- rates
    @property
    def lambda_1(self) -> float:
        """λ₁ = ((d−3)/2) κ′(1) − ((d−1)/2) κ(1), the top Lyapunov exponent of the noise-only flow."""
        d = self.d
        return 0.5 * (d - 3) * self.kappa_prime1 - 0.5 * (d - 1) * self.kappa1

    @property
    def lambda_bar(self) -> float:
        """λ̄ = (d−1) κ′(1) − (d−3) κ(1); Assumption 1 of Thm 1.4 needs λ̄ < 0."""
        d = self.d
        return (d - 1) * self.kappa_prime1 - (d - 3) * self.kappa1

    def _F_eps(self, eps, beta: float) -> Array:
        """F(1 − ε) of Thm 1.4, evaluated without overflow or cancellation, F(1) = −λ̄.

        With u = 1 − ε, G(u) = κ(1) ε (d − 2 − u + βε(1 + u)) − (κ(1) − κ(u))(d − 2 + u² − βu(1 − u²))
        and F = (βε/expm1(βε)) · G/ε; (κ(1) − κ(u))/ε → κ′(1) and βε/expm1(βε) → 1 as ε → 0.
        """
        eps = np.atleast_1d(np.asarray(eps, dtype=float))
        u = 1.0 - eps
        pos = eps > 0
        gap_ratio = np.full(eps.shape, self.kappa_prime1)
        gap_ratio[pos] = self._gap_eps(eps[pos]) / eps[pos]
        g_ratio = (self.kappa1 * (self.d - 2 - u + beta * eps * (1.0 + u))
                   - gap_ratio * (self.d - 2 + u * u - beta * u * (1.0 - u * u)))
        x = beta * eps
        factor = np.ones(eps.shape)
        factor[pos] = x[pos] * np.exp(-x[pos]) / -np.expm1(-x[pos])   # = x/expm1(x), no overflow
        return factor * g_ratio

    def F(self, u, beta: float) -> Array:
        """F(u) of Thm 1.4 for u ∈ [−1, 1] (array of u's shape; u = 1 gives the limit −λ̄)."""
        beta = self._check_beta(beta)
        eps = self._one_minus_t(u)
        return self._F_eps(eps.ravel(), beta).reshape(eps.shape)

    @staticmethod
    def _check_beta(beta) -> float:
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (0 < float(beta) < math.inf):
            raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
        return float(beta)

    def lambda_bar_prime(self, beta: float) -> float:
        """λ̄′ = −inf_{u∈[−1,1]} F(u) of Thm 1.4 (E[E_β(μ_t)] ≤ e^{(ε + λ̄′)t} E[E_β(μ_0)]).

        F is evaluated on 801 equispaced u and 200 u = 1 − ε with ε log-spaced in [1e-10, 0.1]
        (F varies on the scale ε ~ 1/β near u = 1), plus the endpoint limit F(1) = −λ̄; the best
        grid point is refined by bounded scalar minimisation between its neighbours.
        Hence λ̄′ ≥ λ̄.
        """
        beta = self._check_beta(beta)
        eps = np.unique(np.concatenate([np.linspace(0.0, 2.0, 801), np.geomspace(1e-10, 0.1, 200)]))
        values = self._F_eps(eps, beta)
        i = int(np.argmin(values))
        best = float(values[i])
        lo, hi = eps[max(i - 1, 0)], eps[min(i + 1, eps.size - 1)]
        if hi > lo:
            res = minimize_scalar(lambda e: float(self._F_eps(e, beta)[0]), bounds=(lo, hi),
                                  method="bounded", options={"xatol": 1e-12 + 1e-9 * lo})
            best = min(best, float(res.fun))
        return -best + 0.0          # + 0.0: no −0.0 where F underflows to 0 (large β)

    @property
    def odd(self) -> bool:
        """True iff G(−y) = −G(y) for every draw: σ odd and both biases zero (excluded by Assumption 1)."""
        return bool(self.activation.odd and self.sigma_u == 0.0 and self.sigma_w == 0.0)

    # ---------------------------------------------------------------- Karhunen–Loève
    def multiplicity(self, n: int) -> int:
        """N_n(d), the dimension of the degree-n spherical harmonics on S^{d−1}.

        N_0 = 1, N_n = C(n+d−1, d−1) − C(n+d−3, d−1) for n ≥ 1 (d = 2: 2; d = 3: 2n + 1).
        """
        n = check_int("n", n, 0)
        if n == 0:
            return 1
        return math.comb(n + self.d - 1, self.d - 1) - math.comb(n + self.d - 3, self.d - 1)

    @property
    def surface_area(self) -> float:
        """ω = |S^{d−1}| = 2π^{d/2}/Γ(d/2) (2π on S¹, 4π on S²)."""
        return math.exp(_log_area(self.d))

    def _kl(self, nmax: int, nodes: int | None) -> tuple[Array, Array]:
        """Funk–Hecke integrals I_n = ∫_0^π κ(cos θ) P_n(cos θ) sin^{d−2}θ dθ and round-off bounds.

        Composite Gauss–Legendre in θ: κ(cos θ) is analytic in θ even for ReLU (whose κ has (1 ∓ t)^{3/2}
        terms in t), so the rule converges geometrically once it resolves P_n(cos θ).
        The bound is (32 + n/4) ε_mach Σ_j |w_j κ_j P_n(t_j)| sin^{d−2}θ_j: the error of the
        rounded nodes grows like n ε_mach (measured: ≤ (15 + n/11) ε_mach Σ_j|…| for d = 2..16).
        """
        nmax = check_int("nmax", nmax, 0)
        nodes = 2 * nmax + 200 if nodes is None else check_int("nodes", nodes, nmax + 1)
        need = _kl_bytes(nmax, nodes)
        if need > KL_MEMORY_LIMIT:
            raise ValueError(f"nmax = {nmax} with {nodes} nodes needs {need / 2**30:.3g} GiB for the KL "
                             f"integrals (limit {KL_MEMORY_LIMIT / 2**30:g} GiB): nmax must be in "
                             f"0..{max_kl_degree()} (default nodes)")
        theta, w = _theta_rule(nodes)
        weight = w * np.sin(theta) ** (self.d - 2)
        kap = self._kappa_eps(2.0 * np.sin(0.5 * theta) ** 2)      # 1 − cos θ without cancellation
        if self.d == 2:      # Chebyshev: T_n(cos θ) = cos nθ exactly (the recurrence loses O(n²) ε there)
            p = np.cos(np.arange(nmax + 1)[:, None] * theta[None, :])
        else:
            p = gegenbauer(nmax, self.d, np.cos(theta))
        integral = p @ (weight * kap)
        bound = (32.0 + 0.25 * np.arange(nmax + 1)) * np.finfo(float).eps * (np.abs(p) @ np.abs(weight * kap))
        return integral, bound

    def _resolved(self, nmax: int, nodes: int | None) -> tuple[Array, Array]:
        """The integrals of :meth:`_kl` with those inside their round-off bound set to 0, and the bounds."""
        integral, bound = self._kl(nmax, nodes)
        if np.any(integral < -bound):
            n = int(np.flatnonzero(integral < -bound)[0])
            raise ArithmeticError(f"KL coefficient C_{n} is negative beyond round-off ({integral[n]:.3e} < "
                                  f"-{bound[n]:.1e}); use more nodes")
        return np.where(integral > bound, integral, 0.0), bound

    def kl_coefficients(self, nmax: int, nodes: int | None = None) -> Array:
        """C_n, n = 0..nmax (shape (nmax+1,)), with κ(⟨x,y⟩) = Σ_n C_n Σ_i Y_{n,i}(x) Y_{n,i}(y).

        Y_{n,i} are real spherical harmonics on S^{d−1} orthonormal for the surface measure
        (∫ Y² dσ = 1), so G(x) = Σ_{n,i} √C_n Y_{n,i}(x) ξ_{n,i}. By Funk–Hecke

            C_n = ω_{d−1} ∫_{−1}^{1} κ(t) P_n^{(d)}(t) (1 − t²)^{(d−3)/2} dt
                = ω_{d−1} ∫_0^π κ(cos θ) P_n^{(d)}(cos θ) sin^{d−2}θ dθ,

        ω_{d−1} = |S^{d−2}| = 2π^{(d−1)/2}/Γ((d−1)/2) (d = 3: C_n = 2π∫κ P_n dt; d = 2:
        C_n = ∫_0^{2π} κ(cos φ) cos(nφ) dφ). The constant follows from the addition theorem
        Σ_i Y_{n,i}(x)Y_{n,i}(y) = N_n P_n(⟨x,y⟩)/ω_d and ∫P_n² (1−t²)^{(d−3)/2} dt = ω_d/(ω_{d−1} N_n),
        and gives κ(t) = Σ_n C_n N_n P_n(t)/ω_d.

        ``nodes``: Gauss–Legendre nodes in θ (composite, default 2·nmax + 200).
        C_n ≥ 0 in exact arithmetic. A computed C_n of either sign within its round-off bound
        (32 + n/4) ε_mach ω_{d−1} Σ_j |w_j κ_j P_n(t_j)| sin^{d−2}θ_j (≲ 1e-14 κ(1) on S¹, S² for
        n ≤ 500) is set to 0 — so round-off negatives are clipped; a negative C_n beyond its bound
        raises ArithmeticError (quadrature not converged).
        Large d: C_n N_n/ω is resolved only to ≈ ε_mach √N_n κ(1), so high degrees drown in
        round-off (d = 64: n ≳ 17); :meth:`captured_variance` refuses such degrees.
        """
        integral, _ = self._resolved(nmax, nodes)
        return math.exp(_log_area(self.d - 1)) * integral

    def _variance_terms(self, nmax: int) -> tuple[Array, Array]:
        """C_n N_n/(ω κ(1)) for n = 0..nmax and their round-off bounds (no overflow for large N_n)."""
        integral, bound = self._resolved(nmax, None)
        log_ratio = _log_area(self.d - 1) - _log_area(self.d) - math.log(self.kappa1)
        log_mult = np.array([math.log(self.multiplicity(n)) for n in range(nmax + 1)])
        log_scale = log_mult + log_ratio
        with np.errstate(divide="ignore", over="ignore"):     # log 0 = −inf → 0; huge bounds → inf
            terms = np.exp(np.log(integral) + log_scale)
            return terms, np.exp(np.log(bound) + log_scale)

    def captured_variance(self, nmax: int) -> float:
        """Σ_{n≤nmax} C_n N_n / (ω κ(1)): the fraction of the pointwise variance κ(1) kept at degree ≤ nmax.

        Raises ValueError where round-off in the coefficients could move it by more than 1e-6
        (only for large d and high degree).
        """
        terms, bounds = self._variance_terms(nmax)
        if bounds.sum() > _VARIANCE_TOL:
            raise ValueError(f"nmax = {nmax} is beyond what double precision resolves on S^{self.d - 1}: "
                             f"round-off could move the captured variance by {bounds.sum():.1e}")
        return float(terms.sum())

    def truncation_degree(self, fraction: float, nmax_limit: int = 1000) -> int:
        """Smallest n_max with captured_variance(n_max) ≥ fraction, for fraction ∈ (0, 1).

        ValueError if no n_max ≤ nmax_limit is enough, or if the degree needed is beyond what
        double precision resolves (see :meth:`captured_variance`; large d only).
        """
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be a number in (0, 1), got {fraction!r}")
        nmax_limit = check_int("nmax_limit", nmax_limit, 0)
        terms, bounds = self._variance_terms(nmax_limit)
        captured = np.cumsum(terms)
        unresolved = np.flatnonzero(np.cumsum(bounds) > _VARIANCE_TOL)
        top = int(unresolved[0]) - 1 if unresolved.size else nmax_limit   # highest trusted degree
        reached = np.flatnonzero(captured[:top + 1] >= fraction)
        if reached.size:
            return int(reached[0])
        if unresolved.size:
            raise ValueError(f"fraction {fraction} needs a degree above {top}, the highest that double "
                             f"precision resolves on S^{self.d - 1} (captured {captured[top]:.12g} there)")
        raise ValueError(f"fraction {fraction} is not reached by degree nmax_limit = {nmax_limit} "
                         f"(captured {captured[-1]:.12g}); raise nmax_limit")

    def summary(self, beta: float = 1.0) -> dict:
        """κ(1), κ′(1), λ₁, λ̄, λ̄′(β) and oddness as plain Python values (JSON-ready)."""
        beta = self._check_beta(beta)
        return {"activation": self.activation.name, "d": self.d, "sigma_u": self.sigma_u,
                "sigma_w": self.sigma_w, "beta": float(beta), "kappa": float(self.kappa1),
                "kappa_prime": float(self.kappa_prime1), "lambda_1": float(self.lambda_1),
                "lambda_bar": float(self.lambda_bar), "lambda_bar_prime": float(self.lambda_bar_prime(beta)),
                "odd": self.odd}


def kernel_table(activations=("relu", "silu", "sigmoid", "tanh", "gelu"), dims=(3, 4, 5, 64),
                 sigmas=(0.0, 0.1), beta: float = 1.0) -> str:
    """Markdown table of κ(1), κ′(1), λ₁, λ̄, λ̄′(β) and oddness, with σ_U = σ_W = σ."""
    lines = [f"| activation | d | σ_U = σ_W | κ(1) | κ′(1) | λ₁ | λ̄ | λ̄′ (β = {beta:g}) | odd |",
             "|---|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for name in activations:
        for d in dims:
            for sig in sigmas:
                s = NoiseKernel(name, d, sig, sig).summary(beta)
                lines.append(f"| {name} | {d} | {sig:g} | {s['kappa']:.6g} | {s['kappa_prime']:.6g} | "
                             f"{s['lambda_1']:.6g} | {s['lambda_bar']:.6g} | {s['lambda_bar_prime']:.6g} | "
                             f"{'yes' if s['odd'] else 'no'} |")
    return "\n".join(lines)


def synchronisation_rate(config: dict) -> float | None:
    """2λ₁ of a noise-only run (no attention), λ₁ = ((d−3)/2)κ'(1) − ((d−1)/2)κ(1) of the
    untruncated kernel (:attr:`NoiseKernel.lambda_1`): once concentrated, e^{−β}E_β ≈
    (β/4)∬|x − y|² shrinks at the pathwise rate 2λ₁.  ``config``: a run configuration as a
    plain dict (run.nc's config_json).  None for runs with attention or no noise."""
    dyn = (config or {}).get("dynamics") or {}
    noise = dyn.get("noise")
    if not noise or dyn.get("attention"):
        return None
    g = config.get("grid") or {}
    d = {"sphere": 3, "circle": 2}.get(str(g.get("kind")), g.get("dimension"))
    if d is None:
        return None
    k = NoiseKernel(noise.get("activation", "relu"), d=int(d), sigma_u=noise.get("sigma_u", 0.0),
                    sigma_w=noise.get("sigma_w", 0.0))
    return 2.0 * float(k.lambda_1)

__all__ = ["synchronisation_rate", "NoiseKernel", "gegenbauer", "kernel_table"]
