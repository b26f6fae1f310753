"""BrownianPath: law of the increments, refinement consistency, truncation prefix, seeding,
frozen values, caching."""
import hashlib
import math
import pickle

import numpy as np
import pytest

import spherepde.noise.brownian as brownian
from spherepde.noise.brownian import CHUNK, BrownianPath


def test_same_path_at_every_step_size():
    p = BrownianPath((5, 3), seed=7, t1=2.0)
    coarse = [p.increment(k * 0.1, (k + 1) * 0.1) for k in range(20)]
    q = BrownianPath((5, 3), seed=7, t1=2.0)  # a fresh object: nothing cached
    fine = [q.increment(k * 0.05, (k + 1) * 0.05) for k in range(40)]
    for k in range(20):
        np.testing.assert_allclose(fine[2 * k] + fine[2 * k + 1], coarse[k], rtol=0, atol=1e-13)
    # and B(t) does not depend on the order of the queries
    np.testing.assert_array_equal(p(1.234), q(1.234))


def test_prefix_kept_when_the_size_grows():
    small = BrownianPath(10, seed=3, t1=1.0)
    big = BrownianPath(CHUNK + 50, seed=3, t1=1.0)
    for t in (0.3, 0.71, 1.0):
        np.testing.assert_array_equal(big(t)[:10], small(t))


def test_realisations_seeds_and_antithetic():
    a = BrownianPath(4, seed=1, realisation=0)(0.5)
    b = BrownianPath(4, seed=1, realisation=1)(0.5)
    c = BrownianPath(4, seed=2, realisation=0)(0.5)
    assert not np.allclose(a, b) and not np.allclose(a, c)
    np.testing.assert_array_equal(BrownianPath(4, seed=1, antithetic=True)(0.5), -a)


def test_increments_are_independent_gaussians_with_variance_dt():
    # 2000 independent components × 8 disjoint increments of 1/8: each standardised increment
    # is N(0, 1); sample mean and variance within 5 standard errors (fixed seed)
    p = BrownianPath(2000, seed=11, t1=1.0)
    t = np.linspace(0, 1, 9)
    z = np.stack([p.increment(a, b) for a, b in zip(t[:-1], t[1:])]) / math.sqrt(1 / 8)
    n = z.size
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / n)
    # increments over disjoint intervals are uncorrelated
    r = np.mean(z[:-1] * z[1:])
    assert abs(r) < 5 / math.sqrt(z[:-1].size)


def test_bridge_at_non_dyadic_times():
    # Var B(t) = t at times that are not dyadic (deep in the tree), over many components
    p = BrownianPath(4000, seed=5, t1=3.0)
    for t in (0.1, 1.0 / 3.0, 2.9):
        v = p(t)
        assert abs(v.var() / t - 1) < 5 * math.sqrt(2 / v.size)


@pytest.mark.parametrize("kw, match", [
    ({"shape": 0, "seed": 1}, "shape"),
    ({"shape": (3, -1), "seed": 1}, "shape"),
    ({"shape": 3, "seed": -1}, "seed"),
    ({"shape": 3, "seed": 1, "t0": 1.0, "t1": 1.0}, "t0 < t1"),
])
def test_bad_input(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        BrownianPath(**kw)


def test_query_outside_the_interval():
    with pytest.raises(ValueError, match="t must lie"):
        BrownianPath(3, seed=0, t1=1.0)(1.5)


@pytest.mark.parametrize("shape, seed, realisation, antithetic, t0, t1, times, digest", [
    ((1089, 3), 11, 0, False, 0.0, 6.0, (0.0123 * 37, 1.0 / 3.0, 6.0),
     "e370505cdeaaf04f2111b6d7e46712427d79406d9a82dfa7dae53109347592ce"),
    ((25, 3), 0, 2, True, 0.0, 1.0, (0.07, 0.5, 0.999),
     "056b1520c1ee1ed16d4cab1349fd4015c3aeba44d65a68d1079e1e6a103614e3"),
    ((2100,), 2**40 + 3, 2**33, False, -1.5, 2.5, (-1.0, 0.0, 2.4999),
     "72b193d3bc44665a061a47d9dbddeeab1388ea83609b56917eea06d8a0e0ed85"),
])
def test_values_frozen(shape, seed, realisation, antithetic, t0, t1, times, digest):
    """sha256 of B(t) at a few times and of one increment, as computed by the implementation that
    every stored run used (before the node-value cache): a change to the code or to numpy's
    PCG64 / standard_normal streams would break the reproducibility of stored runs."""
    p = BrownianPath(shape, seed, t0=t0, t1=t1, realisation=realisation, antithetic=antithetic)
    h = hashlib.sha256()
    for t in times:
        h.update(p(t).tobytes())
    h.update(p.increment(times[0], times[1]).tobytes())
    assert h.hexdigest() == digest


def test_stepping_loop_descends_once_per_step_and_matches_a_fresh_path(monkeypatch):
    path = BrownianPath((289, 3), seed=3, t1=6.0, realisation=1)
    calls = []
    real = path._descend
    monkeypatch.setattr(path, "_descend", lambda t: calls.append(t) or real(t))
    dt, t, incs = 0.0123, 0.0, []
    for _ in range(200):
        incs.append(path.increment(t, t + dt))
        t += dt
    assert len(calls) == 201  # B(0) once, then one new end per step
    assert len(path._nodes) <= path._max_nodes
    fresh = BrownianPath((289, 3), seed=3, t1=6.0, realisation=1)  # no cache history
    for k in range(0, 200, 37):
        ta = sum([dt] * k, 0.0)  # the same accumulated times as the loop
        assert np.array_equal(fresh.increment(ta, ta + dt), incs[k])


def test_cache_bounded_and_not_pickled():
    path = BrownianPath((1089, 3), seed=0, t1=1.0)
    assert path._max_nodes * 8 * path.size <= brownian.CACHE_BYTES
    for t in np.linspace(0.0, 1.0, 400):
        path(t)
    assert len(path._nodes) <= path._max_nodes
    copy = pickle.loads(pickle.dumps(path))
    assert len(copy._nodes) == 0 and copy._last is None
    assert np.array_equal(copy(0.3), path(0.3))
