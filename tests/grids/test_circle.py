"""CircleGrid: geometry, quadrature, tangent vectors, immutability, serialisation, bad input."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from spherepde.grids import CircleGrid, grid_from_dict

NS = [4, 5, 7, 16, 64]
ARRAY_ATTRS = ["theta", "theta_faces", "cell_length", "xy"]


@pytest.mark.parametrize("n", NS)
def test_geometry(n):
    g = CircleGrid(n)
    assert g.shape == (n,) and g.dtheta == pytest.approx(2 * np.pi / n, rel=1e-15)
    assert g.theta.shape == g.cell_length.shape == (n,) and g.theta_faces.shape == (n + 1,)
    assert g.theta[0] == 0.0
    np.testing.assert_allclose(np.diff(g.theta), g.dtheta, rtol=1e-13)
    np.testing.assert_allclose(np.diff(g.theta_faces), g.dtheta, rtol=1e-13)
    # faces bracket the centres, half a cell either side; the faces close the circle
    np.testing.assert_allclose(0.5 * (g.theta_faces[:-1] + g.theta_faces[1:]), g.theta, atol=1e-14)
    assert g.theta_faces[-1] - g.theta_faces[0] == pytest.approx(2 * np.pi, rel=1e-15)
    assert g.cell_length.sum() == pytest.approx(2 * np.pi, rel=1e-15)
    np.testing.assert_allclose(np.linalg.norm(g.xy, axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(np.mod(np.arctan2(g.xy[:, 1], g.xy[:, 0]), 2 * np.pi),
                               np.mod(g.theta + 1e-12, 2 * np.pi) - 1e-12, atol=1e-14)


@pytest.mark.parametrize("n", [5, 16])
def test_integrate_trig_polynomials_exact(n):
    g = CircleGrid(n)
    th = g.theta
    assert g.integrate(np.ones(n)) == pytest.approx(2 * np.pi, rel=1e-15)
    for k in range(1, n):  # midpoint rule: exact for e^{ikθ}, |k| < n
        assert abs(g.integrate(np.cos(k * th))) < 1e-13
        assert abs(g.integrate(np.sin(k * th))) < 1e-13
    assert abs(g.integrate(np.cos(n * th)) - 2 * np.pi) < 1e-12  # aliasing at k = n: not exact
    # leading axes are batched
    out = g.integrate(np.stack([np.ones(n), np.cos(th) ** 2]))
    np.testing.assert_allclose(out, [2 * np.pi, np.pi], rtol=1e-14)


def test_tangent_round_trip_and_radial_refused():
    g = CircleGrid(16)
    rng = np.random.default_rng(0)
    u = rng.standard_normal(16)
    vec = g.to_cartesian(u)
    assert vec.shape == (16, 2)
    np.testing.assert_allclose(np.sum(vec * g.xy, axis=-1), 0.0, atol=1e-15)
    # the tangent is counter-clockwise: d/dθ (cos θ, sin θ)
    np.testing.assert_allclose(g.to_cartesian(np.ones(16)), np.stack([-g.xy[:, 1], g.xy[:, 0]], -1))
    np.testing.assert_allclose(g.from_cartesian(vec), u, atol=1e-15)
    with pytest.raises(ValueError, match="radial"):
        g.from_cartesian(vec + 1e-6 * g.xy)
    with pytest.raises(ValueError, match="radial"):
        g.from_cartesian(np.array(g.xy))
    g.from_cartesian(vec + 1e-14 * g.xy)
    np.testing.assert_allclose(g.from_cartesian(vec + 3.0 * g.xy, radial_tol=None), u, atol=1e-14)


def test_frozen_read_only_equality_hash():
    g = CircleGrid(8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.n = 9
    for name in ARRAY_ATTRS:
        a = getattr(g, name)
        assert not a.flags.writeable, name
        with pytest.raises(ValueError):
            a.flat[0] = 1.0
    b = CircleGrid(np.int64(8))
    assert type(b.n) is int and b == g and hash(b) == hash(g)
    assert g != CircleGrid(9)
    assert len({g, b, CircleGrid(9)}) == 2


def test_dict_round_trip_and_pickle():
    g = CircleGrid(10)
    d = g.to_dict()
    assert d == {"kind": "circle", "n": 10}
    assert CircleGrid.from_dict(d) == g and grid_from_dict(d) == g
    g.theta, g.xy
    g2 = pickle.loads(pickle.dumps(g))
    assert g2 == g and hash(g2) == hash(g)
    np.testing.assert_array_equal(g2.xy, g.xy)
    for bad in ({"kind": "gauss", "nlat": 10}, {"n": 10}):
        with pytest.raises(ValueError, match="CircleGrid"):
            CircleGrid.from_dict(bad)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_arrays_stay_read_only_after_pickle_and_deepcopy(how):
    g = CircleGrid(8)
    g.theta, g.xy
    g2 = pickle.loads(pickle.dumps(g)) if how == "pickle" else copy.deepcopy(g)
    assert not g2.theta.flags.writeable and not g2.xy.flags.writeable


@pytest.mark.parametrize("bad", [3, 0, -8, 1])
def test_bad_n_values(bad):
    with pytest.raises(ValueError, match=r"\bn\b"):
        CircleGrid(bad)


@pytest.mark.parametrize("bad", [8.0, True, "8", None, np.float32(8)])
def test_bad_n_types(bad):
    with pytest.raises(TypeError, match=r"\bn\b"):
        CircleGrid(bad)
