r"""One layer of the discrete transformer (:mod:`spherepde.solvers.lagrangian.transformer`).

:class:`TransformerBlock` holds the parameters of a
:class:`~spherepde.solvers.lagrangian.transformer.DiscreteTransformer` and its layer map
X_ℓ → X_{ℓ+1}: the attention half, the MLP (or Gaussian) half, the random draws of the MLP
layers (seeds, order) and the checks of tokens and layers.  It is the base of
``DiscreteTransformer`` (which adds the run through the L layers) and what
:class:`~spherepde.solvers.lagrangian.transformer_stepper.TransformerStepper` steps with, so the
stepper and the run need not import each other.  The equations, the noise semantics and the
order of the random draws are in the docstring of
:mod:`~spherepde.solvers.lagrangian.transformer`.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from spherepde.checks import check_int, check_real
from spherepde.dynamics.attention import Attention
from spherepde.noise.activations import get_activation
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.solvers.lagrangian.particles import SPHERE_TOL, retract
from spherepde.solvers.lagrangian.transformer_layers import GaussianLayer, MLPLayer, _mlp_field

__all__ = ["TransformerBlock"]


class TransformerBlock:
    r"""The parameters and the layer map of a discrete transformer; the base of
    :class:`~spherepde.solvers.lagrangian.transformer.DiscreteTransformer`, whose docstring
    lists the parameters."""
    def __init__(self, *, d: int, depth: int, T: float, width: int | float | None = None,
                 activation="relu", sigma_u: float = 0.0, sigma_w: float = 0.0,
                 attention: Attention | None = None, attention_scale: float = 1.0) -> None:
        self.d = check_int("d", d, 2)
        self.depth = check_int("depth", depth, 1)
        self.T = check_real("T", T, positive=True)
        if isinstance(width, numbers.Real) and not isinstance(width, (bool, numbers.Integral)) \
                and width == math.inf:
            self.width: int | float | None = math.inf
        else:
            self.width = None if width is None else check_int("width", width, 1)
        self.activation = get_activation(activation)
        self.sigma_u = check_real("sigma_u", sigma_u, nonnegative=True)
        self.sigma_w = check_real("sigma_w", sigma_w, nonnegative=True)
        if attention is not None:
            if not isinstance(attention, Attention):
                raise TypeError(
                    f"attention must be an Attention or None, got {type(attention).__name__}")
            if attention.d != self.d:
                raise ValueError(f"attention.d must equal d = {self.d}, got {attention.d}")
        self.attention = attention
        self.attention_scale = check_real("attention_scale", attention_scale)

    @property
    def dt(self) -> float:
        """Δt = T/L."""
        return self.T / self.depth

    @property
    def has_attention(self) -> bool:
        return self.attention is not None and self.attention_scale != 0.0

    @property
    def has_mlp(self) -> bool:
        """True when the layers have a noise block (an MLP of width m, or Gaussian for m = ∞)."""
        return self.width is not None

    @property
    def is_gaussian(self) -> bool:
        """True for the m = ∞ transformer (``width=math.inf``, :class:`GaussianLayer` blocks)."""
        return self.width == math.inf

    def config(self) -> dict:
        """The parameters, JSON-serialisable (Q, K, V as nested lists)."""
        return {
            "model": "discrete_transformer", "d": self.d, "depth": self.depth, "T": self.T,
            "dt": self.dt, "width": self.width, "activation": self.activation.name,
            "sigma_u": self.sigma_u, "sigma_w": self.sigma_w,
            "attention": None if self.attention is None else self.attention.to_dict(),
            "attention_scale": self.attention_scale,
            "rng": "numpy PCG64, default_rng(SeedSequence(seed).spawn(R)[r]); per layer U, b_U, W, b_W",
        }

    # ---- random layers ------------------------------------------------------------------
    @staticmethod
    def seed_sequence(seed) -> np.random.SeedSequence:
        """The SeedSequence a run spawns its realisations from.

        ``seed``: None (fresh OS entropy, recorded in the result), an int >= 0, or a
        SeedSequence (copied from its entropy and spawn key, so that earlier ``spawn`` calls on
        it do not change the result).
        """
        if seed is None:
            return np.random.SeedSequence()
        if isinstance(seed, np.random.SeedSequence):
            return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key,
                                          pool_size=seed.pool_size)
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed must be None, an int >= 0 or a numpy SeedSequence, got {seed!r}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        return np.random.SeedSequence(int(seed))

    @classmethod
    def realisation_rngs(cls, seed, realisations: int) -> list[np.random.Generator]:
        """The generators of realisations 0..R−1 (module docstring); ``seed`` as in
        :meth:`seed_sequence` (None gives unreproducible fresh entropy)."""
        R = check_int("realisations", realisations, 1)
        return [np.random.default_rng(c) for c in cls.seed_sequence(seed).spawn(R)]

    def _require_mlp(self) -> int:
        if self.width is None:
            raise ValueError("this transformer has no MLP (width=None): there are no layers to draw")
        if self.is_gaussian:
            raise ValueError("the layers of the m = ∞ transformer (width=inf) are Gaussian fields, "
                             "not drawn from a generator: build them with "
                             "gaussian_layers(field, path) or GaussianLayer(field, xi)")
        assert isinstance(self.width, int)  # check_int
        return self.width

    def _draw_into(self, rng: np.random.Generator, U, b_U, W, b_W) -> None:
        """Fill U (m, d), b_U (m,), W (d, m), b_W (d,) from ``rng`` in the documented order."""
        rng.standard_normal(out=U)
        rng.standard_normal(out=b_U)
        b_U *= self.sigma_u
        rng.standard_normal(out=W)
        rng.standard_normal(out=b_W)
        b_W *= self.sigma_w

    def draw_layer(self, rng: np.random.Generator) -> MLPLayer:
        """One MLP layer drawn from ``rng`` (order: U, b_U, W, b_W; module docstring)."""
        m, d = self._require_mlp(), self.d
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
        U, b_U, W, b_W = np.empty((m, d)), np.empty(m), np.empty((d, m)), np.empty(d)
        self._draw_into(rng, U, b_U, W, b_W)
        return MLPLayer(U, b_U, W, b_W, self.activation)

    def draw_layers(self, rng: np.random.Generator) -> list[MLPLayer]:
        """All L layers of one realisation, in order ℓ = 0..L−1 (memory 2·L·m·d floats).

        ``draw_layers(realisation_rngs(seed, R)[r])`` are the layers realisation r of
        ``run(x0, seed=seed, realisations=R)`` uses.
        """
        self._require_mlp()
        return [self.draw_layer(rng) for _ in range(self.depth)]

    def gaussian_layers(self, field: NoiseField, path: BrownianPath) -> list[GaussianLayer]:
        r"""The L Gaussian layers of the m = ∞ transformer driven by ``path``: layer ℓ has
        :math:`\xi = (B(t_{\ell+1}) - B(t_\ell))/\sqrt{\Delta t}`, :math:`t_\ell = \ell\Delta t`,
        so its noise √Δt·G(y) is the field increment W(t_{ℓ+1}, y) − W(t_ℓ, y) (module
        docstring).  ``path`` has shape ``field.shape``; ``field.d == d`` and its
        kernel must have this transformer's activation, σ_U and σ_W.  Memory L·n_coefficients·d
        floats.  For R realisations pass ``[gaussian_layers(field, p) for p in paths]`` to
        :meth:`run`.
        """
        if not isinstance(path, BrownianPath):
            raise TypeError(f"path must be a BrownianPath, got {type(path).__name__}")
        if not self.is_gaussian:
            raise ValueError(f"Gaussian layers belong to the m = ∞ transformer (width=inf), this one "
                             f"has width = {self.width}")
        self._check_field(field, "field")
        return [GaussianLayer.from_path(field, path, ell * self.dt, (ell + 1) * self.dt)
                for ell in range(self.depth)]

    def noise_increment(self, layer: MLPLayer | GaussianLayer, y) -> np.ndarray:
        """The layer's noise √Δt·G(y) at points y (..., d): the stand-in for the Brownian-field
        increment over one layer (module docstring); for a layer from :meth:`gaussian_layers` it
        is that increment."""
        return math.sqrt(self.dt) * layer(y)

    # ---- one layer ------------------------------------------------------------------------
    def _attention_half(self, x: np.ndarray) -> np.ndarray:
        """Y = LN(X + Δt s_att V m(X)) for every realisation; x (R, N, d) -> (R, N, d)."""
        if not self.has_attention:
            return x
        att, n = self.attention, x.shape[1]
        assert att is not None  # has_attention
        w = np.full(n, 1.0 / n)
        y = np.empty_like(x)
        for r in range(x.shape[0]):
            y[r] = att.mean(x[r], x[r], w) @ att.V.T
        y *= self.dt * self.attention_scale
        y += x
        return retract(y)

    def _gaussian_half(self, y: np.ndarray, layers: Sequence[GaussianLayer]) -> np.ndarray:
        """X = LN(Y + √Δt G(Y)) with realisation r's Gaussian layer ``layers[r]``; y (R, N, d)."""
        g = np.stack([self.noise_increment(lay, y[r]) for r, lay in enumerate(layers)])
        g += y
        return retract(g)

    def _mlp_half(self, y: np.ndarray, U, b_U, W, b_W, f) -> np.ndarray:
        """X = LN(Y + √Δt G(Y)); y (R, N, d), layer arrays with a leading R axis."""
        g = _mlp_field(y, U, b_U, W, b_W, f)
        g *= math.sqrt(self.dt)
        g += y
        return retract(g)

    def step(self, x, layer: MLPLayer | GaussianLayer | None = None) -> np.ndarray:
        """One layer X_ℓ -> X_{ℓ+1} for tokens x (N, d) (unit vectors) with MLP ``layer``
        (needed iff the transformer has an MLP; a :class:`GaussianLayer` for width=inf);
        returns (N, d)."""
        if np.ndim(x) != 2:
            raise ValueError(f"x must have shape (N, {self.d}), got {np.shape(x)}")
        x = self._check_x0(x, 1)
        y = self._attention_half(x)
        if self.is_gaussian:
            x = self._gaussian_half(y, [self._check_gaussian_layer(layer, "layer")])
        elif self.has_mlp:
            lay = self._check_mlp_layer(layer, "layer")
            x = self._mlp_half(y, lay.U[None], lay.b_U[None], lay.W[None], lay.b_W[None],
                               lay.activation.f)
        elif layer is not None:
            raise ValueError("layer must be None for a transformer without MLP (width=None)")
        else:
            x = y
        return x[0]

    # ---- checks ---------------------------------------------------------------------------
    def _check_x0(self, x0, realisations: int | None) -> np.ndarray:
        """x0 (N, d) or (R, N, d), unit rows -> a float copy of shape (R, N, d)."""
        if np.iscomplexobj(x0):
            raise TypeError("x0 must be real")
        try:
            a = np.array(x0, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"x0 must be a real array of shape (N, {self.d}) or (R, N, {self.d})") from None
        if a.ndim not in (2, 3) or a.shape[-1] != self.d or a.shape[-2] < 1 or a.shape[0] < 1:
            raise ValueError(f"x0 must have shape (N, {self.d}) or (R, N, {self.d}) with N >= 1, "
                             f"got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("x0 must be finite (it contains NaN or inf)")
        dev = float(np.max(np.abs(np.linalg.norm(a, axis=-1) - 1.0)))
        if dev > SPHERE_TOL:
            raise ValueError(f"x0: tokens must lie on the unit sphere (max ||x| - 1| = {dev:.3g} > "
                             f"{SPHERE_TOL:g}); normalise them first")
        if a.ndim == 2:
            R = 1 if realisations is None else realisations
            a = np.broadcast_to(a, (R, *a.shape)).copy()
        elif realisations is not None and realisations != a.shape[0]:
            raise ValueError(f"realisations = {realisations} does not match x0 of shape {a.shape} "
                             f"({a.shape[0]} realisations)")
        return retract(a)

    def _check_layer(self, layer, name: str) -> MLPLayer | GaussianLayer:
        if self.is_gaussian:
            return self._check_gaussian_layer(layer, name)
        return self._check_mlp_layer(layer, name)

    def _check_mlp_layer(self, layer, name: str) -> MLPLayer:
        if not isinstance(layer, MLPLayer):
            raise TypeError(f"{name} must be an MLPLayer, got {type(layer).__name__}")
        if (layer.width, layer.d) != (self.width, self.d):
            raise ValueError(f"{name} must have width m = {self.width} and d = {self.d}, "
                             f"got m = {layer.width}, d = {layer.d}")
        if layer.activation.name != self.activation.name:
            raise ValueError(f"{name} has activation {layer.activation.name!r}, the transformer "
                             f"{self.activation.name!r}")
        return layer

    def _check_field(self, field, name: str) -> NoiseField:
        """``field`` must live in d and have this transformer's activation, σ_U, σ_W."""
        if not isinstance(field, NoiseField):
            raise TypeError(f"{name} must be a NoiseField, got {type(field).__name__}")
        k = field.kernel
        if field.d != self.d:
            raise ValueError(f"{name}: the field lives in d = {field.d}, the transformer in d = {self.d}")
        if (k.activation.name, k.sigma_u, k.sigma_w) != (self.activation.name, self.sigma_u, self.sigma_w):
            raise ValueError(f"{name}: the field's kernel (activation {k.activation.name!r}, sigma_u = "
                             f"{k.sigma_u}, sigma_w = {k.sigma_w}) is not the m = ∞ limit of this "
                             f"transformer's MLP ({self.activation.name!r}, {self.sigma_u}, {self.sigma_w})")
        return field

    def _check_gaussian_layer(self, layer, name: str) -> GaussianLayer:
        if not isinstance(layer, GaussianLayer):
            raise TypeError(f"{name} must be a GaussianLayer for the m = ∞ transformer (width=inf), "
                            f"got {type(layer).__name__}")
        self._check_field(layer.field, name)
        return layer

    def _check_layers(self, layers, R: int) -> list[list[MLPLayer | GaussianLayer]]:
        """``layers``: L layers (shared by all realisations) or R sequences of L."""
        if not self.has_mlp:
            raise ValueError("layers must be None for a transformer without MLP (width=None)")
        kind = "GaussianLayers" if self.is_gaussian else "MLPLayers"
        if not isinstance(layers, Sequence) or len(layers) == 0:
            raise TypeError(f"layers must be a sequence of L {kind} or of R such sequences")
        nested = not isinstance(layers[0], (MLPLayer, GaussianLayer))
        per_r = list(layers) if nested else [layers] * R
        if len(per_r) != R:
            raise ValueError(f"layers must hold one sequence per realisation ({R}), got {len(per_r)}")
        out = []
        for r, seq in enumerate(per_r):
            if not isinstance(seq, Sequence) or len(seq) != self.depth:
                raise ValueError(f"layers must hold L = {self.depth} layers per realisation"
                                 + (f" (realisation {r})" if nested else ""))
            out.append([self._check_layer(lay, "layers[...]") for lay in seq])
        return out

    def __repr__(self) -> str:
        att = "None" if self.attention is None else f"beta={self.attention.beta}"
        return (f"{type(self).__name__}(d={self.d}, depth={self.depth}, T={self.T}, width={self.width}, "
                f"activation={self.activation.name!r}, attention={att}, "
                f"attention_scale={self.attention_scale})")
