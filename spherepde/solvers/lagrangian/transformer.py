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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spherepde.checks import check_int
from spherepde.solvers.controller import Controller
from spherepde.solvers.lagrangian.transformer_block import TransformerBlock
from spherepde.solvers.lagrangian.transformer_layers import GaussianLayer, MLPLayer
from spherepde.solvers.lagrangian.transformer_stepper import LayerRecorder, TransformerStepper
from spherepde.solvers.trackers import ProgressTracker

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
class DiscreteTransformer(TransformerBlock):
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

    The parameters, the layer map (:meth:`step`), the random layers and the checks are those of
    :class:`~spherepde.solvers.lagrangian.transformer_block.TransformerBlock`; this class adds
    the run through the L layers.
    """

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
        recorder = LayerRecorder(np.empty((R, len(rec), N, d)))
        trackers = [recorder] + ([ProgressTracker(disable=False, desc="transformer")] if progress else [])
        # t = ℓ·Δt; the last output is t_end, so the L steps land on it (no extra short step)
        res = Controller(stepper, trackers, dt=self.dt, max_steps=self.depth).run(
            x, (0.0, float(rec_t[-1])), output_times=rec_t)
        if res.n_steps != self.depth or recorder.k != len(rec):  # pragma: no cover - a guard
            raise RuntimeError(f"the run took {res.n_steps} steps and recorded {recorder.k} layers, "
                               f"expected L = {self.depth} and {len(rec)}")
        return TransformerResult(times=rec_t, layers=rec, x=recorder.out, config=cfg,
                                 wall_time=res.wall_time)


__all__ = ["DiscreteTransformer", "GaussianLayer", "MLPLayer", "RECORD_MODES", "TransformerResult",
           "TransformerStepper"]
