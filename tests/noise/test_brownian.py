"""BrownianPath: a function of (seed, realisation, t) alone — the same increments for every run
length, the law of a two-sided Brownian motion (tested at stated confidence), refinement
consistency, truncation prefix, seeding, frozen values, caching."""
import hashlib
import itertools
import math
import pickle

import numpy as np
import pytest
from scipy import stats

import spherepde.noise.brownian as brownian
from spherepde.noise.brownian import CHUNK, BrownianPath


def _loop(path, t_end, dt):
    """The increments of a stepping loop to t_end (times accumulated as a controller does)."""
    out, t = [], 0.0
    while t < t_end - 1e-12:
        out.append(path.increment(t, t + dt))
        t += dt
    return out


# ---- (a) no horizon: the increments do not depend on how long the run is ------------------------
def test_increments_bitwise_equal_for_two_run_lengths():
    """Two stepping loops of the same seed to t_end = 1.3 and 4.7 (step 0.1, so the first crosses
    one unit interval, the second four): their common increments are equal bit for bit, and so
    are those of a fresh path asked only for the last common step."""
    short = _loop(BrownianPath((40, 3), seed=7, realisation=2), 1.3, 0.1)
    long = _loop(BrownianPath((40, 3), seed=7, realisation=2), 4.7, 0.1)
    assert len(short) == 13 and len(long) == 47
    for a, b in zip(short, long):
        assert np.array_equal(a, b)
    ta = sum([0.1] * 12, 0.0)
    assert np.array_equal(BrownianPath((40, 3), seed=7, realisation=2).increment(ta, ta + 0.1),
                          short[-1])


def test_values_do_not_depend_on_the_order_of_the_queries():
    times = [3.7, -2.25, 0.5, 11.01, -0.001, 2.0, 7.999, 1e-9]
    fresh = {t: BrownianPath(7, seed=3)(t) for t in times}  # one fresh object per time
    for order in (times, times[::-1], sorted(times)):
        p = BrownianPath(7, seed=3)
        for t in order:
            assert np.array_equal(p(t), fresh[t]), t


def test_small_caches_change_no_bit(monkeypatch):
    """Evicted node values and integer points are recomputed to the same bits."""
    monkeypatch.setattr(brownian, "CACHE_BYTES", 0)  # the minimum: 64 entries
    p = BrownianPath(5, seed=2)
    assert p._max_nodes == 64
    far = [p(t) for t in (90.5, -80.25, 3.3, 150.125, -2.6)]
    q = BrownianPath(5, seed=2)
    for t, v in zip((90.5, -80.25, 3.3, 150.125, -2.6), far):
        assert np.array_equal(BrownianPath(5, seed=2)(t), v)
        assert np.array_equal(q(t), v)


def test_zero_at_zero_and_integer_points_are_running_sums():
    p = BrownianPath(6, seed=4, realisation=1)
    assert np.array_equal(p(0.0), np.zeros(6)) and np.array_equal(p(-0.0), np.zeros(6))
    units = {k: p._normals(k, 0, 0) for k in range(-3, 3)}
    b = np.zeros(6)
    for k in range(3):
        b = b + units[k]
        assert np.array_equal(p(k + 1), b)
    b = np.zeros(6)
    for k in range(-1, -4, -1):
        b = b - units[k]
        assert np.array_equal(p(k), b)


# ---- (b) the law: fixed seeds, many realisations, 99.9 % confidence ------------------------------
#: the disjoint intervals tested: negative times, across integers, inside one unit interval, long
INTERVALS = [(-2.7, -1.3), (-1.3, -0.45), (-0.45, 0.2), (0.2, 0.9), (0.9, 0.995), (0.995, 1.005),
             (1.005, 2.35), (2.35, 5.2)]
REALISATIONS, COMPONENTS = 128, 128  # n = 16 384 independent samples of each increment


@pytest.fixture(scope="module")
def standardised():
    """z[j] = (B(b_j) − B(a_j))/sqrt(b_j − a_j) over realisations 0..127 × 128 components of seed
    2026: under the law of Brownian motion, i.i.d. N(0, 1) samples, independent across j."""
    z = np.empty((len(INTERVALS), REALISATIONS * COMPONENTS))
    for r in range(REALISATIONS):
        p = BrownianPath(COMPONENTS, seed=2026, realisation=r)
        for j, (a, b) in enumerate(INTERVALS):
            z[j, r * COMPONENTS:(r + 1) * COMPONENTS] = p.increment(a, b) / math.sqrt(b - a)
    return z


def _two_sided(m: int, confidence: float = 0.999) -> float:
    """The N(0, 1) quantile that holds m statistics at once at ``confidence`` (Bonferroni)."""
    return float(stats.norm.ppf(1 - (1 - confidence) / (2 * m)))


def test_increments_have_mean_zero_and_variance_dt(standardised):
    z = standardised
    m, n = z.shape
    # mean: sqrt(n)·z̄ ~ N(0, 1) exactly; 8 intervals held together at 99.9 %
    assert np.all(np.abs(z.mean(axis=1)) * math.sqrt(n) < _two_sided(m))
    # variance: Σ z² ~ χ²_n exactly; both tails, 8 intervals together at 99.9 %
    alpha = 0.001 / (2 * m)
    lo, hi = stats.chi2.ppf(alpha, n), stats.chi2.ppf(1 - alpha, n)
    ss = np.sum(z * z, axis=1)
    assert np.all((lo < ss) & (ss < hi)), (ss / n, lo / n, hi / n)


def test_disjoint_increments_are_uncorrelated(standardised):
    """sqrt(n)·mean(z_i z_j) → N(0, 1) for independent i ≠ j (variance E z_i² E z_j² = 1): all 28
    pairs of the 8 disjoint intervals together at 99.9 % (Bonferroni), with the same bound
    catching the correlation 1 of an interval with itself."""
    z = standardised
    m, n = z.shape
    pairs = list(itertools.combinations(range(m), 2))
    bound = _two_sided(len(pairs))
    for i, j in pairs:
        assert abs(np.mean(z[i] * z[j])) * math.sqrt(n) < bound, (INTERVALS[i], INTERVALS[j])
    assert np.mean(z[0] * z[0]) * math.sqrt(n) > bound  # the test can fail


def test_values_have_covariance_min_for_same_signs_and_zero_across_zero():
    """Cov(B(s), B(t)) = min(|s|, |t|) for s, t on one side of 0 and 0 across it: the sample
    covariance over 64 realisations × 256 components (n = 16 384) is within its 99.9 % bound
    (normal approximation with the exact variance E(XY)² − (EXY)² = |s·t| + c², the 10 pairs
    together)."""
    times = (-2.6, -0.7, 0.3, 1.55)
    vals = np.stack([np.concatenate([BrownianPath(256, seed=99, realisation=r)(t) for r in range(64)])
                     for t in times])
    n = vals.shape[1]
    pairs = [(i, j) for i in range(len(times)) for j in range(i, len(times))]  # 10, together
    bound = _two_sided(len(pairs))
    for i, j in pairs:
        s, t = times[i], times[j]
        c = min(abs(s), abs(t)) if s * t > 0 else 0.0
        var = abs(s * t) + c * c
        assert abs(np.mean(vals[i] * vals[j]) - c) < bound * math.sqrt(var / n), (s, t)


def test_realisations_seeds_and_antithetic():
    a = BrownianPath(4, seed=1, realisation=0)(0.5)
    b = BrownianPath(4, seed=1, realisation=1)(0.5)
    c = BrownianPath(4, seed=2, realisation=0)(0.5)
    assert not np.allclose(a, b) and not np.allclose(a, c)
    for t in (0.5, -1.75, 3.1):
        np.testing.assert_array_equal(BrownianPath(4, seed=1, antithetic=True)(t),
                                      -BrownianPath(4, seed=1)(t))


# ---- refinement and truncation -------------------------------------------------------------------
def test_same_path_at_every_step_size():
    p = BrownianPath((5, 3), seed=7)
    coarse = [p.increment(k * 0.1, (k + 1) * 0.1) for k in range(-5, 20)]
    q = BrownianPath((5, 3), seed=7)  # a fresh object: nothing cached
    fine = [q.increment(k * 0.05, (k + 1) * 0.05) for k in range(-10, 40)]
    for k in range(25):
        np.testing.assert_allclose(fine[2 * k] + fine[2 * k + 1], coarse[k], rtol=0, atol=1e-13)
    np.testing.assert_array_equal(p(1.234), q(1.234))


def test_prefix_kept_when_the_size_grows():
    small = BrownianPath(10, seed=3)
    big = BrownianPath(CHUNK + 50, seed=3)
    for t in (0.3, 0.71, 1.0, 2.5, -1.2):
        np.testing.assert_array_equal(big(t)[:10], small(t))


# ---- input, frozen values, caching ---------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"shape": 0, "seed": 1}, "shape"),
    ({"shape": (3, -1), "seed": 1}, "shape"),
    ({"shape": 3, "seed": -1}, "seed"),
    ({"shape": 3, "seed": 1, "realisation": -2}, "realisation"),
])
def test_bad_input(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        BrownianPath(**kw)


@pytest.mark.parametrize("t", [math.inf, -math.inf, math.nan])
def test_non_finite_times_refused(t):
    with pytest.raises(ValueError, match="finite"):
        BrownianPath(3, seed=0)(t)


def test_no_interval_arguments():
    """The horizon is gone from the API: t0/t1 are refused, not silently ignored."""
    with pytest.raises(TypeError):
        BrownianPath(3, seed=0, t1=1.0)  # type: ignore[call-arg]


@pytest.mark.parametrize("shape, seed, realisation, antithetic, times, digest", [
    ((1089, 3), 11, 0, False, (0.0123 * 37, 1.0 / 3.0, 6.0),
     "09921956450756e003f599762359058cd3b0b45649869c78201c0fff947fc52c"),
    ((25, 3), 0, 2, True, (0.07, 0.5, 0.999),
     "e05c686f1412015062498763e235a83acd58f1dfef2e1c0f02c85d016ffd926e"),
    ((2100,), 2**40 + 3, 2**33, False, (-1.0, 0.0, 2.4999),
     "76e050f44deea640e0306f5e3253f85b863c3e9a66a0e0cf9a7d11d2f7adbbdf"),
])
def test_values_frozen(shape, seed, realisation, antithetic, times, digest):
    """sha256 of B(t) at a few times and of one increment, as computed by the unit-interval
    implementation (scheme "unit-interval-bridge"): a change to the code or to numpy's
    SeedSequence / PCG64 / standard_normal streams would break the reproducibility of stored
    runs (and their --restart)."""
    p = BrownianPath(shape, seed, realisation=realisation, antithetic=antithetic)
    h = hashlib.sha256()
    for t in times:
        h.update(p(t).tobytes())
    h.update(p.increment(times[0], times[1]).tobytes())
    assert h.hexdigest() == digest


def test_to_dict_names_the_scheme():
    d = BrownianPath((4, 3), seed=5, realisation=6, antithetic=True).to_dict()
    assert d == {"shape": [4, 3], "seed": 5, "realisation": 6, "antithetic": True,
                 "scheme": "unit-interval-bridge", "unit": 1.0, "depth": brownian.DEPTH,
                 "chunk": CHUNK}


def test_stepping_loop_descends_once_per_step_and_matches_a_fresh_path(monkeypatch):
    path = BrownianPath((289, 3), seed=3, realisation=1)
    calls = []
    real = path._bridge
    monkeypatch.setattr(path, "_bridge", lambda k, s: calls.append((k, s)) or real(k, s))
    dt, t, incs = 0.0123, 0.0, []
    for _ in range(200):
        incs.append(path.increment(t, t + dt))
        t += dt
    assert len(calls) == 200  # one new end per step (B(0) needs no descent)
    assert len(path._nodes) <= path._max_nodes and len(path._points) <= path._max_nodes
    fresh = BrownianPath((289, 3), seed=3, realisation=1)  # no cache history
    for k in range(0, 200, 37):
        ta = sum([dt] * k, 0.0)  # the same accumulated times as the loop
        assert np.array_equal(fresh.increment(ta, ta + dt), incs[k])


def test_cache_bounded_and_not_pickled():
    path = BrownianPath((1089, 3), seed=0)
    assert path._max_nodes * 8 * path.size <= brownian.CACHE_BYTES
    for t in np.linspace(-3.0, 5.0, 60):
        path(t)
    assert len(path._nodes) <= path._max_nodes and len(path._points) <= path._max_nodes
    copy = pickle.loads(pickle.dumps(path))
    assert len(copy._nodes) == 0 and len(copy._points) == 0 and copy._last is None
    assert np.array_equal(copy(0.3), path(0.3)) and np.array_equal(copy(-2.2), path(-2.2))
