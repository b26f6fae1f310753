"""A seeded, refinement-consistent Brownian path: B(t) as a deterministic function of (seed, t).

:class:`BrownianPath` is a standard Brownian motion B: [t0, t1] → R^shape (independent
components, B(t0) = 0) built as a *virtual Brownian tree* (as in diffrax): B(t1) ~ N(0, t1 − t0)
is drawn first, then every dyadic midpoint c of an interval [a, b] by the Brownian bridge

    B(c) = (B(a) + B(b))/2 + sqrt((b − a)/4) · Z_node,      Z_node ~ N(0, I),

where Z_node comes from a random stream keyed by (seed, realisation, level, index) only.  A
query at time t descends the tree to depth :data:`DEPTH` (interval length (t1 − t0)·2^−DEPTH)
and interpolates linearly inside the last interval (an error of order
sqrt((t1 − t0)·2^−DEPTH) ≈ 3e-8·sqrt(t1 − t0), far below any time step).

Consequences a user relies on:

* **the same path at every Δt**: B(t) does not depend on which times were asked before, so
  increments over [t, t + Δt] are exactly the sums of the increments over [t, t + Δt/2] and
  [t + Δt/2, t + Δt] (telescoping), for any Δt, and a density run and a particle run given
  the same path see the same noise;
* **the same path at every truncation**: the normals of a node are drawn in chunks of
  :data:`CHUNK` keyed by the chunk number, so the first k components of a path of size n > k
  equal the path of size k (expansions ordered by degree keep their low modes when n_max grows);
* **independent realisations**: realisation r uses the key (seed, r, …).

Cost: a query visits DEPTH nodes.  The value B(c) of every visited node is cached (at most
:data:`CACHE_BYTES`, or 64 nodes for paths of more than 32 768 components; least recently used
dropped first; a node's value depends only on the tree,
so caching changes no bit), so a query computes only the nodes below where its path leaves the
previous one (≈ DEPTH − log2((t1 − t0)/Δt) of them in a stepping loop), each drawing ``size``
normals.  The last queried B(t) is kept and :meth:`increment` asks for its start first, so the
increments of a time-stepping loop descend the tree once per step.  Pickling drops the caches.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from spherepde.checks import check_seed

#: depth of the tree: queries resolve B to intervals of (t1 − t0)·2^−DEPTH
DEPTH = 48
#: normals are drawn per node in chunks of this many (keeps lower components when size grows)
CHUNK = 1024
#: node-value cache of a path: at most this many bytes (and 4096 nodes, at least 64)
CACHE_BYTES = 16 * 2**20


class BrownianPath:
    """Brownian motion B on [t0, t1] with values of shape ``shape`` (see the module docstring).

    Parameters
    ----------
    shape : int or tuple of int
        Shape of B(t) (e.g. ``(n_coefficients, d)`` for the noise field).
    seed : int ≥ 0
    t0, t1 : float
        The time interval, t0 < t1 (queries outside raise ``ValueError``).
    realisation : int ≥ 0
        Index of an independent path with the same seed.
    antithetic : bool
        Return −B (the mirror path, equal in law): pairs (B, −B) cancel odd powers of the noise
        in ensemble means (variance reduction).
    """

    def __init__(self, shape, seed: int, t0: float = 0.0, t1: float = 1.0, realisation: int = 0,
                 antithetic: bool = False):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not shape or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1
                            for s in shape):
            raise ValueError(f"shape must be a positive int or a tuple of positive ints, got {shape!r}")
        self.shape = tuple(int(s) for s in shape)
        self.size = int(np.prod(self.shape))
        self.seed = check_seed(seed)
        self.realisation = check_seed(realisation, "realisation")
        t0, t1 = float(t0), float(t1)
        if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
            raise ValueError(f"need finite t0 < t1, got t0={t0}, t1={t1}")
        self.t0, self.t1 = t0, t1
        self.antithetic = bool(antithetic)
        self._sign = -1.0 if self.antithetic else 1.0
        self._nodes: OrderedDict = OrderedDict()  # (level, index) -> B at the node's midpoint
        self._last: tuple | None = None  # (t, B(t)) of the last query: increments chain end to start
        self._max_nodes = max(64, min(4096, CACHE_BYTES // (8 * self.size)))
        self._end = math.sqrt(t1 - t0) * self._normals(0, 0)

    def __getstate__(self) -> dict:  # the caches are not pickled (e.g. to dask workers)
        return {**self.__dict__, "_nodes": OrderedDict(), "_last": None}

    def __repr__(self) -> str:
        return (f"BrownianPath(shape={self.shape}, seed={self.seed}, t0={self.t0}, t1={self.t1}, "
                f"realisation={self.realisation}, antithetic={self.antithetic})")

    def to_dict(self) -> dict:
        """Every parameter needed to rebuild the path."""
        return {"shape": list(self.shape), "seed": self.seed, "t0": self.t0, "t1": self.t1,
                "realisation": self.realisation, "antithetic": self.antithetic, "depth": DEPTH, "chunk": CHUNK}

    def _normals(self, level: int, index: int) -> np.ndarray:
        """N(0, I) of length ``size`` for a tree node (chunked, see the module docstring)."""
        out = np.empty(self.size)
        for c, a in enumerate(range(0, self.size, CHUNK)):
            b = min(self.size, a + CHUNK)
            key = [self.seed, self.realisation, level, index, c]
            # the first b − a normals of the chunk's stream (the same numbers as the first b − a
            # of CHUNK draws: the generator fills them in order)
            out[a:b] = np.random.Generator(np.random.PCG64(key)).standard_normal(b - a)
        return self._sign * out

    def _midpoint(self, level: int, index: int, left: np.ndarray, right: np.ndarray, h: float):
        """B at the midpoint of node (level, index) with end values left, right, length h
        (cached: never write into the result)."""
        key = (level, index)
        value = self._nodes.get(key)
        if value is None:
            value = 0.5 * (left + right) + (0.5 * math.sqrt(h)) * self._normals(level, index)
            self._nodes[key] = value
            if len(self._nodes) > self._max_nodes:
                self._nodes.popitem(last=False)
        else:
            self._nodes.move_to_end(key)
        return value

    def __call__(self, t: float) -> np.ndarray:
        """B(t), shape ``shape`` (a new array)."""
        t = float(t)
        slack = 1e-9 * (self.t1 - self.t0)  # round-off in accumulated step times
        if not (self.t0 - slack <= t <= self.t1 + slack):
            raise ValueError(f"t must lie in [t0, t1] = [{self.t0}, {self.t1}], got {t}")
        t = min(max(t, self.t0), self.t1)
        last = self._last
        if last is not None and last[0] == t:
            return last[1].reshape(self.shape).copy()
        value = self._descend(t)
        self._last = (t, value)
        return value.reshape(self.shape).copy()

    def _descend(self, t: float) -> np.ndarray:
        """B(t) (flat) by descending the tree."""
        s = (t - self.t0) / (self.t1 - self.t0)  # in [0, 1]
        lo, hi = 0.0, 1.0
        left, right = np.zeros(self.size), self._end
        index = 0
        for level in range(1, DEPTH + 1):
            if s == lo:
                return left
            if s == hi:
                return right
            mid = 0.5 * (lo + hi)
            bm = self._midpoint(level, index, left, right, (hi - lo) * (self.t1 - self.t0))
            if s < mid:
                hi, right, index = mid, bm, 2 * index
            else:
                lo, left, index = mid, bm, 2 * index + 1
        frac = (s - lo) / (hi - lo)
        return (1.0 - frac) * left + frac * right

    def increment(self, ta: float, tb: float) -> np.ndarray:
        """B(tb) − B(ta), shape ``shape``.  B(ta) is asked first: in a stepping loop it is the
        previous step's B(tb), which is kept."""
        a = self(ta)
        return self(tb) - a
