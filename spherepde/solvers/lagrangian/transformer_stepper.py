r"""The discrete transformer as a controller stepper (:mod:`spherepde.solvers.lagrangian.transformer`).

:class:`TransformerStepper` advances the tokens one layer per step of Δt = T/L at model time
t = ℓ·Δt, for :meth:`DiscreteTransformer.run
<spherepde.solvers.lagrangian.transformer.DiscreteTransformer.run>` and for ``spherepde run``;
:class:`LayerRecorder` is the tracker that ``run`` records the layers with.  The stepper knows the
transformer through :class:`~spherepde.solvers.lagrangian.transformer_block.TransformerBlock`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spherepde.checks import check_int
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.solvers.controller import StateSpace
from spherepde.solvers.lagrangian.transformer_block import TransformerBlock
from spherepde.solvers.lagrangian.transformer_layers import GaussianLayer, MLPLayer
from spherepde.solvers.trackers import Tracker

__all__ = ["LayerRecorder", "TransformerStepper"]


class TransformerStepper:
    r"""A :class:`DiscreteTransformer` as a controller stepper: one layer per step of
    Δt = T/L, at model time t = ℓ·Δt (layer ℓ maps X_ℓ to X_{ℓ+1}).

    Parameters
    ----------
    transformer : DiscreteTransformer (a TransformerBlock)
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

    def __init__(self, transformer: TransformerBlock, n: int, *, realisations: int | None = None,
                 rngs: Sequence[np.random.Generator] | None = None, layers: Sequence | None = None,
                 noise: NoiseField | None = None,
                 path: BrownianPath | Sequence[BrownianPath] | None = None) -> None:
        if not isinstance(transformer, TransformerBlock):
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


class LayerRecorder(Tracker):
    """Writes the state at the k-th output time into ``out[:, k]`` (out: (R, n_rec, N, d))."""

    name = "layers"

    def __init__(self, out: np.ndarray) -> None:
        super().__init__()
        self.out, self.k = out, 0

    def handle(self, state, t) -> None:
        self.out[:, self.k] = state
        self.k += 1
