"""The noise the MLP blocks induce (docs/equations.md, Paper 2): activations, the covariance kernel κ and
its derived rates (:mod:`.kernel`), the Karhunen–Loève field on S² and S¹ (:mod:`.field`) and the
seeded, refinement-consistent Brownian path that drives it (:mod:`.brownian`)."""
from __future__ import annotations

from spherepde.noise.activations import ACTIVATIONS, Activation, get_activation
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.noise.kernel import NoiseKernel

__all__ = ["ACTIVATIONS", "Activation", "BrownianPath", "NoiseField", "NoiseKernel", "get_activation"]
