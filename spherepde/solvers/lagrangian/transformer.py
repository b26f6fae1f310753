r"""The discrete transformer of Paper 2 (docs/equations.md): attention + random MLP layers on S^{d−1}.

Tokens :math:`X_0^i \in S^{d-1}`, :math:`i = 1..N`; layers :math:`\ell = 0..L-1`,
:math:`\Delta t = T/L`:

.. math::

    Y_\ell^i     &= \mathrm{LN}\big(X_\ell^i + \Delta t\, s_{\rm att}\, \mathrm{Attn}_{X_\ell}(X_\ell^i)\big),\\
    X_{\ell+1}^i &= \mathrm{LN}\big(Y_\ell^i + \sqrt{\Delta t}\, G_{\ell+1}(Y_\ell^i)\big),

with :math:`\mathrm{LN}(v) = v/|v|` and

* attention :math:`\mathrm{Attn}_X(x) = V m_\beta(x)`, where :math:`m_\beta` is the softmax mean
  of :meth:`Attention.mean <spherepde.dynamics.attention.Attention.mean>` over the current
  tokens with weights 1/N:
  :math:`m_\beta(x) = \sum_j e^{\beta\langle Qx, KX^j\rangle} X^j / \sum_k e^{\beta\langle Qx, KX^k\rangle}`.
  The paper folds β into Q, K; its head (Q', K', V) is ``Attention(Q', K', V, beta=1)``, and
  ``Attention(Q, K, V, beta)`` is the paper's head with Q' = βQ, K' = K (only B = QᵀK
  enters).  :math:`s_{\rm att}` (``attention_scale``) is +1 (attractive), 0 (off) or −1
  (repulsive) in the paper's panels; ``attention=None`` switches attention off.
  (Attn is not projected: LN removes its radial part, see below.)  Q, K, V are shared by all
  layers.
* the MLP of layer ℓ+1, drawn afresh and iid for every layer:

  .. math:: G(y) = \tfrac{1}{\sqrt m}\, W\, \sigma\big(U y/\sqrt d + b_U\big) + b_W,

  :math:`W \in \mathbb R^{d\times m}`, :math:`U \in \mathbb R^{m\times d}` with iid N(0, 1)
  entries, :math:`b_U \sim N(0, \sigma_U^2 I_m)`, :math:`b_W \sim N(0, \sigma_W^2 I_d)`
  (:class:`MLPLayer`).  ``width=None`` switches the MLP off (the attention-only transformer).
* ``width=math.inf``: the m = ∞ transformer, whose layer ℓ+1 is a *Gaussian* field
  (:class:`GaussianLayer`), the truncated Karhunen–Loève field of
  :class:`~spherepde.noise.field.NoiseField` (S², S¹ only):

  .. math:: G_{\ell+1}(y) = \sum_{n\le n_{\max}}\sum_i \sqrt{C_n}\, Y_{n,i}(y)\, \xi^{\ell+1}_{n,i},
            \qquad \xi^{\ell+1} = \frac{B(t_{\ell+1}) - B(t_\ell)}{\sqrt{\Delta t}},

  with B the :class:`~spherepde.noise.brownian.BrownianPath` of shape ``field.shape``
  (:meth:`DiscreteTransformer.gaussian_layers`), so that
  :math:`\sqrt{\Delta t}\,G_{\ell+1}(y) = W(t_{\ell+1}, y) - W(t_\ell, y)` exactly: the transformer
  is driven by the increments of the same Brownian field W that drives the limit SDE
  (:class:`~spherepde.solvers.lagrangian.sde.ParticleSDE` with ``noise=field, path=path``).
  This is the pathwise coupling of depth L and the limit SDE (Thm 1.1 with m = ∞); the
  layers are not drawn from a seed but built from a field and a path (or from iid standard
  normal ξ for a run in law).

Noise semantics.  For every m, G is a random field with covariance
:math:`E[G(x)G(y)^T] = \kappa(\langle x,y\rangle) I_d` (docs/equations.md), so the layer-ℓ noise
:math:`\sqrt{\Delta t}\,G_{\ell+1}` (:meth:`DiscreteTransformer.noise_increment`) plays the part of
the Brownian-field increment :math:`W(t_{\ell+1},\cdot) - W(t_\ell,\cdot)`,
:math:`t_\ell = \ell\Delta t`, which has the same covariance :math:`\Delta t\,\kappa`.  LN of the
MLP step makes the Itô radial drift :math:`-\kappa(1)(d-1)/2\cdot X\,\Delta t` of the limit SDE:
:math:`E[X_{\ell+1} - Y_\ell] = -\Delta t\,\kappa(1)\tfrac{d-1}{2} Y_\ell + O(\Delta t^2)`.
Without MLP the scheme is the explicit Euler method with retraction for the attention ODE
:math:`\dot x_i = s_{\rm att} P_{x_i} V m_\beta(x_i)` (first order in Δt):
:math:`\mathrm{LN}(x + \Delta t\,v) = \mathrm{LN}\big(x + \tfrac{\Delta t}{1 + \Delta t\langle x, v\rangle} P_x v\big)`.

Randomness (reproducible runs).  Realisation r of a run with seed ``seed`` and R realisations
uses the generator ``numpy.random.default_rng(child_r)`` (PCG64), ``child_r`` the r-th child
of ``SeedSequence(seed).spawn(R)``: realisation r does not depend on R
(:meth:`DiscreteTransformer.realisation_rngs`).  From its generator, layer after layer
ℓ = 0..L−1, each layer is drawn in this fixed order (:meth:`DiscreteTransformer.draw_layer`):
U (m·d standard normals, row-major), b_U (m), W (d·m, row-major), b_W (d); the biases are
the standard normals times σ_U, σ_W.  They are drawn even when σ = 0, so that runs that differ
only in σ_U, σ_W use the same U, W (coupled runs).  Only one layer per realisation is held
at a time (memory 2·R·m·d floats).  With ``width=math.inf`` there is nothing to draw:
``run`` needs the ``layers`` (:meth:`DiscreteTransformer.gaussian_layers`).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spherepde.checks import check_int, check_real
from spherepde.dynamics.attention import Attention
from spherepde.noise.activations import get_activation
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.solvers.controller import Controller, StateSpace
from spherepde.solvers.lagrangian.particles import SPHERE_TOL, retract
from spherepde.solvers.lagrangian.transformer_layers import GaussianLayer, MLPLayer, _mlp_field
from spherepde.solvers.trackers import ProgressTracker, Tracker

#: values accepted by ``record`` besides a positive int stride
RECORD_MODES = ("all", "final")


# ---- result -------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TransformerResult:
    """Outcome of :meth:`DiscreteTransformer.run`.

    Attributes
    ----------
    times : ndarray, shape (n_rec,)
        Recorded model times ℓ·Δt.
    layers : ndarray of int, shape (n_rec,)
        Recorded layer indices ℓ (0 = the input tokens, L = the output).
    x : ndarray, shape (R, n_rec, N, d)
        Tokens X_ℓ (unit vectors) of every realisation at the recorded layers.
    config : dict
        Every parameter of the run, JSON-serialisable (see :meth:`DiscreteTransformer.config`),
        plus ``realisations``, ``n_tokens``, ``record``, and the seed: ``seed_entropy`` and
        ``seed_spawn_key`` of the SeedSequence the realisations were spawned from (None when
        pre-drawn ``layers`` were given; then ``layers`` is "given").
    wall_time : float
        Seconds of the run.
    """

    times: np.ndarray
    layers: np.ndarray
    x: np.ndarray
    config: dict
    wall_time: float = math.nan

    @property
    def realisations(self) -> int:
        return int(self.x.shape[0])

    @property
    def n_tokens(self) -> int:
        return int(self.x.shape[2])

    @property
    def d(self) -> int:
        return int(self.x.shape[3])

    def to_dict(self) -> dict:
        """The configuration (a copy of ``config``) for output files; arrays are not included."""
        return dict(self.config)


# ---- the transformer ----------------------------------------------------------------------
class DiscreteTransformer:
    r"""The discrete transformer of Paper 2 (module docstring for the equations).

    Parameters
    ----------
    d : int
        Token dimension, tokens on :math:`S^{d-1} \subset \mathbb R^d`, d >= 2.
    depth : int
        Number of layers L >= 1.
    T : float
        Final time, > 0; the step is Δt = T/L.
    width : int, math.inf or None
        MLP width m >= 1; ``math.inf`` for the Gaussian m = ∞ layers (:class:`GaussianLayer`,
        passed to :meth:`run` as ``layers``, e.g. from :meth:`gaussian_layers`); None for no
        MLP (attention only).
    activation : str, Activation or callable
        σ of the MLP (:func:`~spherepde.noise.activations.get_activation`); default "relu".
    sigma_u, sigma_w : float
        Standard deviations σ_U, σ_W >= 0 of the biases b_U, b_W.
    attention : Attention or None
        The head (Q, K, V, β, kind) shared by all layers, ``attention.d == d``; None for no
        attention.
    attention_scale : float
        s_att, multiplies the attention term (+1 attractive, 0 off, −1 repulsive).
    """

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

    def _record_layers(self, record) -> np.ndarray:
        L = self.depth
        if isinstance(record, str):
            if record not in RECORD_MODES:
                raise ValueError(f"record must be one of {RECORD_MODES} or a stride int >= 1, "
                                 f"got {record!r}")
            return np.arange(L + 1) if record == "all" else np.array([L])
        stride = check_int("record", record, 1)
        return np.union1d(np.arange(0, L + 1, stride), [L])

    # ---- the run --------------------------------------------------------------------------
    def run(self, x0, *, seed=None, realisations: int | None = None,
            layers: Sequence | None = None, record="all", progress: bool = False) -> TransformerResult:
        """Push tokens through the L layers, for R realisations of the MLPs at once.

        The loop is the package's one run loop (:class:`~spherepde.solvers.controller.Controller`)
        with a :class:`TransformerStepper` on the state (R, N, d): one layer per step of
        Δt = T/L, model time t = ℓ·Δt, the recorded layers its output times.

        Parameters
        ----------
        x0 : array_like, shape (N, d) or (R, N, d)
            Input tokens, unit vectors (||x| − 1| <= 1e-8; renormalised).  (N, d): the same
            tokens for every realisation.
        seed : None, int >= 0 or SeedSequence
            Realisation r draws its layers from ``realisation_rngs(seed, R)[r]`` (module
            docstring), so it does not depend on R.  None: fresh entropy, recorded in
            ``result.config``.  Must be None when ``layers`` is given.
        realisations : int, optional
            R >= 1; default 1, or the leading dimension of a 3-d ``x0``.
        layers : sequence, optional
            Pre-drawn MLPs (for coupled runs): L :class:`MLPLayer` shared by all realisations,
            or R sequences of L.  Used as given (their biases need not match σ_U, σ_W).
            Required for ``width=math.inf``: L :class:`GaussianLayer` (or R sequences of L),
            e.g. ``[self.gaussian_layers(field, path_r) for path_r in paths]``.
        record : "all", "final" or int
            Record every layer ℓ = 0..L, only ℓ = L, or every ``record``-th layer (and L).
        progress : bool
            Show a tqdm progress bar (over model time) on stderr.

        Returns
        -------
        TransformerResult
            ``x`` of shape (R, n_rec, N, d).

        Raises
        ------
        ValueError, TypeError
            Bad input, before any work.
        FloatingPointError
            The tokens became non-finite (e.g. an MLP step hit Y + √Δt G(Y) = 0).
        KeyboardInterrupt
            Re-raised by the controller (nothing is returned).
        """
        if realisations is not None:
            realisations = check_int("realisations", realisations, 1)
        x = self._check_x0(x0, realisations)
        R, N, d = x.shape
        rec = self._record_layers(record)
        cfg = self.config()
        cfg.update(realisations=R, n_tokens=N,
                   record=record if isinstance(record, str) else int(record))
        given = None
        rngs: list[np.random.Generator] = []
        if self.is_gaussian and layers is None:
            raise ValueError("the m = ∞ transformer (width=inf) needs its Gaussian layers: pass "
                             "layers=gaussian_layers(field, path) (or R such lists)")
        if layers is not None:
            if seed is not None:
                raise ValueError("give seed or layers, not both (the layers fix all randomness)")
            given = self._check_layers(layers, R)
            cfg.update(seed_entropy=None, seed_spawn_key=None, layers="given")
        else:
            ss = self.seed_sequence(seed)
            cfg.update(seed_entropy=ss.entropy, seed_spawn_key=list(ss.spawn_key), layers="drawn")
            if self.has_mlp:
                rngs = [np.random.default_rng(c) for c in ss.spawn(R)]

        rec_t = rec * self.dt
        stepper = TransformerStepper(self, N, realisations=R, rngs=rngs or None, layers=given)
        recorder = _LayerRecorder(np.empty((R, len(rec), N, d)))
        trackers = [recorder] + ([ProgressTracker(disable=False, desc="transformer")] if progress else [])
        # t = ℓ·Δt; the last output is t_end, so the L steps land on it (no extra short step)
        res = Controller(stepper, trackers, dt=self.dt, max_steps=self.depth).run(
            x, (0.0, float(rec_t[-1])), output_times=rec_t)
        if res.n_steps != self.depth or recorder.k != len(rec):  # pragma: no cover - a guard
            raise RuntimeError(f"the run took {res.n_steps} steps and recorded {recorder.k} layers, "
                               f"expected L = {self.depth} and {len(rec)}")
        return TransformerResult(times=rec_t, layers=rec, x=recorder.out, config=cfg,
                                 wall_time=res.wall_time)

    def __repr__(self) -> str:
        att = "None" if self.attention is None else f"beta={self.attention.beta}"
        return (f"DiscreteTransformer(d={self.d}, depth={self.depth}, T={self.T}, width={self.width}, "
                f"activation={self.activation.name!r}, attention={att}, "
                f"attention_scale={self.attention_scale})")


# ---- the transformer as a controller stepper ----------------------------------------------
class TransformerStepper:
    r"""A :class:`DiscreteTransformer` as a controller stepper: one layer per step of
    Δt = T/L, at model time t = ℓ·Δt (layer ℓ maps X_ℓ to X_{ℓ+1}).

    Parameters
    ----------
    transformer : DiscreteTransformer
    n : int
        Number of tokens N.
    realisations : int or None
        R: the state is (R, N, d), all realisations advanced at once (the loop of
        :meth:`DiscreteTransformer.run`).  None: the state is (N, d) and a step is
        :meth:`DiscreteTransformer.step` (which checks and renormalises its input), as in
        ``spherepde run``.
    rngs : sequence of numpy Generators, optional
        One per realisation (one for ``realisations=None``): layer after layer, realisation r
        draws its MLP from ``rngs[r]`` in the documented order (module docstring); only one layer
        per realisation is held at a time.
    layers : sequence, optional
        R sequences (one for ``realisations=None``) of L layers (:class:`MLPLayer`, or
        :class:`GaussianLayer` for width = ∞); the step at t uses layer ℓ = round(t/Δt).
    noise, path : NoiseField, BrownianPath (or R BrownianPaths), optional
        Width = ∞: the layer of realisation r for the step (t, t + Δt) is
        ``GaussianLayer.from_path(noise, path_r, t, t + Δt)``, so its noise is the increment
        W(t + Δt) − W(t) of path r (the one the density and the particles see, for the path
        they are given).  One path for ``realisations=None``, a sequence of R otherwise.

    A transformer with an MLP needs exactly one of ``rngs``, ``layers``, (``noise``, ``path``)
    (``rngs`` only for finite width); one without needs none.  Steps must be Δt (the controller
    with ``dt=transformer.dt``; ``stable_dt`` refuses).  ``step`` raises FloatingPointError
    naming the layer when the tokens become non-finite.
    """

    name = "transformer"

    def __init__(self, transformer: DiscreteTransformer, n: int, *, realisations: int | None = None,
                 rngs: Sequence[np.random.Generator] | None = None, layers: Sequence | None = None,
                 noise: NoiseField | None = None,
                 path: BrownianPath | Sequence[BrownianPath] | None = None) -> None:
        if not isinstance(transformer, DiscreteTransformer):
            raise TypeError(f"transformer must be a DiscreteTransformer, got {type(transformer).__name__}")
        tr = self.transformer = transformer
        n = check_int("n", n, 1)
        self.realisations = None if realisations is None else check_int("realisations", realisations, 1)
        R = 1 if self.realisations is None else self.realisations
        self.grid = StateSpace(n, tr.d) if self.realisations is None else StateSpace(R, n, tr.d)
        given = [k for k, v in (("rngs", rngs), ("layers", layers), ("noise", noise), ("path", path))
                 if v is not None]
        if not tr.has_mlp:
            if given:
                raise ValueError(f"a transformer without MLP (width=None) takes no {' or '.join(given)}")
        else:
            options = [["layers"], ["noise", "path"]] if tr.is_gaussian else [["rngs"], ["layers"]]
            if given not in options:
                raise ValueError("the layers of this transformer come from exactly one of "
                                 f"{' | '.join(' and '.join(o) for o in options)}, got {given or 'none'}")
        self.rngs = None if rngs is None else list(rngs)
        if self.rngs is not None and (len(self.rngs) != R or not all(
                isinstance(g, np.random.Generator) for g in self.rngs)):
            raise ValueError(f"rngs must be {R} numpy Generators (one per realisation)")
        self.layers = None if layers is None else tr._check_layers(layers, R)
        self.noise, self.path = noise, path
        self.paths = None
        if noise is not None:
            paths = [path] if isinstance(path, BrownianPath) else path
            if not isinstance(paths, Sequence) or not all(isinstance(p, BrownianPath) for p in paths):
                raise TypeError(f"path must be a BrownianPath or a sequence of {R}, got {type(path).__name__}")
            if len(paths) != R:
                raise ValueError(f"path: one BrownianPath per realisation ({R}), got {len(paths)}")
            self.paths = list(paths)
            tr._check_field(noise, "noise")
        if tr.has_mlp and not tr.is_gaussian and self.realisations is not None:
            m, d = tr._require_mlp(), tr.d  # the layer buffers of all realisations (memory 2·R·m·d floats)
            self._buffers = (np.empty((R, m, d)), np.empty((R, m)), np.empty((R, d, m)), np.empty((R, d)))

    def stable_dt(self, x, t):
        raise ValueError("the transformer takes one layer per step, Δt = T/depth")

    def layer_index(self, t: float, dt: float) -> int:
        """ℓ of the step from t = ℓ·Δt of size Δt (RuntimeError for any other step)."""
        h = self.transformer.dt
        if abs(dt - h) > 1e-9 * h:
            raise RuntimeError(f"the transformer steps by Δt = T/L = {h}, asked for {dt}")
        ell = round(t / h)
        if abs(t / h - ell) > 1e-6 or not 0 <= ell < self.transformer.depth:
            raise RuntimeError(f"t = {t} is not a layer time ℓ·Δt, 0 <= ℓ < L = {self.transformer.depth}")
        return int(ell)

    def _layer(self, r: int, ell: int, t: float, dt: float) -> MLPLayer | GaussianLayer:
        if self.transformer.is_gaussian:
            return self._gaussian_layer(r, ell, t, dt)
        if self.layers is not None:
            return self.layers[r][ell]
        assert self.rngs is not None  # __init__: rngs or layers
        return self.transformer.draw_layer(self.rngs[r])

    def _gaussian_layer(self, r: int, ell: int, t: float, dt: float) -> GaussianLayer:
        """Realisation r's layer ℓ of the m = ∞ transformer: given, or from noise and path."""
        if self.layers is not None:
            lay = self.layers[r][ell]
            assert isinstance(lay, GaussianLayer)  # _check_layers
            return lay
        assert self.noise is not None and self.paths is not None  # __init__: noise and path
        return GaussianLayer.from_path(self.noise, self.paths[r], t, t + dt)

    def step(self, x: np.ndarray, t: float, dt: float) -> np.ndarray:
        """Layer ℓ = t/Δt: X_ℓ -> X_{ℓ+1} for the state x ((R, N, d) or (N, d)); a new array
        (the same one for a transformer with neither attention nor MLP)."""
        tr = self.transformer
        ell = self.layer_index(t, dt)
        if self.realisations is None:
            new = tr.step(x, self._layer(0, ell, t, dt) if tr.has_mlp else None)
        else:
            new = tr._attention_half(x)
            R = x.shape[0]
            if tr.is_gaussian:
                new = tr._gaussian_half(new, [self._gaussian_layer(r, ell, t, dt) for r in range(R)])
            elif tr.has_mlp:
                U, b_U, W, b_W = self._buffers
                for r in range(R):
                    if self.rngs is not None:
                        tr._draw_into(self.rngs[r], U[r], b_U[r], W[r], b_W[r])
                    else:
                        assert self.layers is not None  # __init__: rngs or layers
                        lay = self.layers[r][ell]
                        assert isinstance(lay, MLPLayer)  # _check_layers
                        U[r], b_U[r], W[r], b_W[r] = lay.U, lay.b_U, lay.W, lay.b_W
                new = tr._mlp_half(new, U, b_U, W, b_W, tr.activation.f)
        if not np.all(np.isfinite(new)):
            raise FloatingPointError(f"the tokens became non-finite in layer {ell}")
        return new


class _LayerRecorder(Tracker):
    """Writes the state at the k-th output time into ``out[:, k]`` (out: (R, n_rec, N, d))."""

    name = "layers"

    def __init__(self, out: np.ndarray) -> None:
        super().__init__()
        self.out, self.k = out, 0

    def handle(self, state, t) -> None:
        self.out[:, self.k] = state
        self.k += 1


__all__ = ["DiscreteTransformer", "GaussianLayer", "MLPLayer", "RECORD_MODES", "TransformerResult",
           "TransformerStepper"]
