"""A seeded, refinement-consistent Brownian path: B(t) as a deterministic function of
(seed, realisation, t) alone.

:class:`BrownianPath` is a standard two-sided Brownian motion B: R → R^shape (independent
components, B(0) = 0), defined for every finite t, with no interval or horizon to choose:

* **unit increments**: on each fixed unit interval [k, k + 1) (k any integer, negative ones
  too) the increment ΔW_k = B(k + 1) − B(k) ~ N(0, I) is drawn from its own random stream,
  keyed by (seed, realisation, k) only (a numpy ``SeedSequence(seed, spawn_key=(realisation,
  κ(k), 0, 0, chunk))``, κ(k) = 2k for k ≥ 0 and −2k − 1 for k < 0).  The values at the
  integers are the running sums B(0) = 0, B(k + 1) = B(k) + ΔW_k (k ≥ 0) and B(k) = B(k + 1) −
  ΔW_k (k < 0), always added in this order, so B(k) has the same bits whatever was asked before;
* **a Brownian-bridge tree inside each unit interval** (a virtual Brownian tree as in diffrax,
  one per interval): with b(s) = B(k + s) − B(k), b(0) = 0, b(1) = ΔW_k, every dyadic midpoint
  c of an interval [a, e] ⊂ [0, 1] is

      b(c) = (b(a) + b(e))/2 + sqrt((e − a)/4) · Z_node,      Z_node ~ N(0, I),

  with Z_node from the stream keyed by (seed, realisation, k, level, index).  A query
  B(t) = B(k) + b(t − k), k = ⌊t⌋, descends the tree of interval k to depth :data:`DEPTH`
  (intervals of 2^−DEPTH) and interpolates linearly inside the last one (an error of order
  2^−DEPTH/2 ≈ 3e-8, far below any time step).

So the increment over [ta, tb] is the same, bit for bit, for every run length (``t_end``): a run
extended by ``--restart``, or two runs of different lengths with the same seed, see the same
noise on their common times.  Negative times work too (B(t) for t < 0 is the other side of the
two-sided motion, independent of B on [0, ∞)).

Consequences a user relies on:

* **the same path at every Δt**: B(t) does not depend on which times were asked before, so
  increments over [t, t + Δt] are the sums of the increments over [t, t + Δt/2] and
  [t + Δt/2, t + Δt] (telescoping, up to round-off), for any Δt, and a density run and a particle
  run given the same path see the same noise;
* **the same path at every truncation**: the normals of a node are drawn in chunks of
  :data:`CHUNK` keyed by the chunk number, so the first k components of a path of size n > k
  equal the path of size k (expansions ordered by degree keep their low modes when n_max grows);
* **independent realisations**: realisation r uses the key (seed, r, …); ``antithetic`` gives −B
  exactly.

Cost: a query visits DEPTH nodes of its unit interval.  Node values and the values B(k) at the
integers are cached (at most :data:`CACHE_BYTES` each, or 64 entries for paths of more than
32 768 components; least recently used dropped first; a value depends only on the key, so
caching changes no bit).  A query computes only the nodes below where its path leaves the
previous one (≈ DEPTH − log2(1/Δt) of them in a stepping loop), each drawing ``size`` normals,
and B(k) from the nearest cached integer towards 0 (one unit increment per interval in a
stepping loop; the first query at a time t far from 0 draws ⌈|t|⌉ unit increments).  The last
queried B(t) is kept and :meth:`increment` asks for its start first, so the increments of a
time-stepping loop descend the tree once per step.  Pickling drops the caches.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from spherepde.checks import check_seed

#: how the path is built (stored with runs, see :meth:`BrownianPath.to_dict`)
SCHEME = "unit-interval-bridge"
#: depth of the bridge tree inside a unit interval: queries resolve B to intervals of 2^−DEPTH
DEPTH = 48
#: normals are drawn per node in chunks of this many (keeps lower components when size grows)
CHUNK = 1024
#: node-value cache (and integer-point cache) of a path: at most this many bytes each (and 4096
#: entries, at least 64)
CACHE_BYTES = 16 * 2**20


def _interval_code(k: int) -> int:
    """κ(k): the unit interval [k, k + 1) as a non-negative spawn-key entry (0, 1, −1, 2, −2, …
    ↦ 0, 2, 1, 4, 3, …)."""
    return 2 * k if k >= 0 else -2 * k - 1


class BrownianPath:
    """Two-sided Brownian motion B on R with B(0) = 0 and values of shape ``shape``, a function
    of (seed, realisation, t) alone (see the module docstring).

    Parameters
    ----------
    shape : int or tuple of int
        Shape of B(t) (e.g. ``(n_coefficients, d)`` for the noise field).
    seed : int ≥ 0
    realisation : int ≥ 0
        Index of an independent path with the same seed.
    antithetic : bool
        Return −B (the mirror path, equal in law): pairs (B, −B) cancel odd powers of the noise
        in ensemble means (variance reduction).

    There is no time interval: B(t) is defined for every finite t, and the increments over
    [ta, tb] do not depend on how long a run is.
    """

    def __init__(self, shape, seed: int, realisation: int = 0, antithetic: bool = False):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not shape or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1
                            for s in shape):
            raise ValueError(f"shape must be a positive int or a tuple of positive ints, got {shape!r}")
        self.shape = tuple(int(s) for s in shape)
        self.size = int(np.prod(self.shape))
        self.seed = check_seed(seed)
        self.realisation = check_seed(realisation, "realisation")
        self.antithetic = bool(antithetic)
        self._sign = -1.0 if self.antithetic else 1.0
        self._max_nodes = max(64, min(4096, CACHE_BYTES // (8 * self.size)))
        self._reset_caches()

    def _reset_caches(self) -> None:
        self._nodes: OrderedDict = OrderedDict()  # (k, level, index) -> b at the node's midpoint
        self._points: OrderedDict = OrderedDict()  # k -> B(k) (flat)
        self._last: tuple | None = None  # (t, B(t)) of the last query: increments chain end to start

    def __getstate__(self) -> dict:  # the caches are not pickled (e.g. to dask workers)
        return {**self.__dict__, "_nodes": OrderedDict(), "_points": OrderedDict(), "_last": None}

    def __repr__(self) -> str:
        return (f"BrownianPath(shape={self.shape}, seed={self.seed}, "
                f"realisation={self.realisation}, antithetic={self.antithetic})")

    def to_dict(self) -> dict:
        """Every parameter needed to rebuild the path, and how it is built (``scheme``,
        ``depth``, ``chunk``: a run file keeps them, so a restart can check its path is this one)."""
        return {"shape": list(self.shape), "seed": self.seed, "realisation": self.realisation,
                "antithetic": self.antithetic, "scheme": SCHEME, "unit": 1.0, "depth": DEPTH,
                "chunk": CHUNK}

    def _normals(self, k: int, level: int, index: int) -> np.ndarray:
        """N(0, I) of length ``size`` for node (level, index) of unit interval k (level 0: the
        unit increment ΔW_k), chunked (see the module docstring)."""
        out = np.empty(self.size)
        code = _interval_code(k)
        for c, a in enumerate(range(0, self.size, CHUNK)):
            b = min(self.size, a + CHUNK)
            ss = np.random.SeedSequence(self.seed, spawn_key=(self.realisation, code, level, index, c))
            # the first b − a normals of the chunk's stream (the same numbers as the first b − a
            # of CHUNK draws: the generator fills them in order)
            out[a:b] = np.random.Generator(np.random.PCG64(ss)).standard_normal(b - a)
        return self._sign * out

    def _cache(self, store: OrderedDict, key, value: np.ndarray) -> None:
        store[key] = value
        if len(store) > self._max_nodes:
            store.popitem(last=False)

    def _point(self, k: int) -> np.ndarray:
        """B(k) at the integer k (flat; cached: never write into the result)."""
        if k == 0:
            return np.zeros(self.size)
        value = self._points.get(k)
        if value is not None:
            self._points.move_to_end(k)
            return value
        step = 1 if k > 0 else -1
        # start from the cached integer nearest to k on the side of 0 (B is summed outwards from 0)
        j = max((i for i in self._points if 0 < i * step < k * step), key=abs, default=0)
        value = self._points[j] if j else np.zeros(self.size)
        while j != k:
            if step > 0:
                value = value + self._normals(j, 0, 0)  # B(j + 1) = B(j) + ΔW_j
            else:
                value = value - self._normals(j - 1, 0, 0)  # B(j − 1) = B(j) − ΔW_{j−1}
            j += step
        self._cache(self._points, k, value)
        return value

    def _midpoint(self, k: int, level: int, index: int, left: np.ndarray, right: np.ndarray,
                  h: float):
        """b at the midpoint of node (level, index) of unit interval k, with end values left,
        right and length h (cached: never write into the result)."""
        key = (k, level, index)
        value = self._nodes.get(key)
        if value is None:
            value = 0.5 * (left + right) + (0.5 * math.sqrt(h)) * self._normals(k, level, index)
            self._cache(self._nodes, key, value)
        else:
            self._nodes.move_to_end(key)
        return value

    def __call__(self, t: float) -> np.ndarray:
        """B(t), shape ``shape`` (a new array); t any finite real."""
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"t must be finite, got {t}")
        last = self._last
        if last is not None and last[0] == t:
            return last[1].reshape(self.shape).copy()
        k = math.floor(t)
        value = self._point(k)
        s = t - k  # exact in floating point
        if s > 0.0:
            value = value + self._bridge(k, s)
        self._last = (t, value)
        return value.reshape(self.shape).copy()

    def _bridge(self, k: int, s: float) -> np.ndarray:
        """b(s) = B(k + s) − B(k), 0 < s < 1 (flat), by descending the tree of interval k."""
        lo, hi = 0.0, 1.0
        left, right = np.zeros(self.size), self._unit(k)
        index = 0
        for level in range(1, DEPTH + 1):
            if s == lo:
                return left
            mid = 0.5 * (lo + hi)
            bm = self._midpoint(k, level, index, left, right, hi - lo)
            if s < mid:
                hi, right, index = mid, bm, 2 * index
            else:
                lo, left, index = mid, bm, 2 * index + 1
        frac = (s - lo) / (hi - lo)
        return (1.0 - frac) * left + frac * right

    def _unit(self, k: int) -> np.ndarray:
        """ΔW_k (flat; cached as node (k, 0, 0))."""
        key = (k, 0, 0)
        value = self._nodes.get(key)
        if value is None:
            value = self._normals(k, 0, 0)
            self._cache(self._nodes, key, value)
        else:
            self._nodes.move_to_end(key)
        return value

    def increment(self, ta: float, tb: float) -> np.ndarray:
        """B(tb) − B(ta), shape ``shape``.  B(ta) is asked first: in a stepping loop it is the
        previous step's B(tb), which is kept."""
        a = self(ta)
        return self(tb) - a
