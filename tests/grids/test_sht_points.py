"""SphericalHarmonics.analyse_points: coefficients of a point measure, the adjoint of evaluate.

a_lm = Σ_p v_p Y*_lm(λ_p, φ_p) is checked against scipy's sph_harm_y (Condon–Shortley phase removed),
against the Gauss-quadrature analysis of a grid field (values × cell areas at the nodes), and the
adjoint identity Σ_p v_p f(p) = Σ_l [Re(q_l0 a*_l0) + 2 Re Σ_{m>0} q_lm a*_lm].  Tolerances: 1e-13
relative to Σ|v| · max|Y_lm| (round-off of O(lmax) terms).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import sph_harm_y

from spherepde.grids.gauss import GaussGrid
from spherepde.grids.sht import SphericalHarmonics


def make(lmax):
    return SphericalHarmonics(GaussGrid(max(32, lmax + 1 + (lmax + 1) % 2)), lmax=lmax)


@pytest.mark.parametrize("lmax", [1, 6, 31])
def test_against_scipy(lmax):
    rng = np.random.default_rng(lmax)
    sh = make(lmax)
    lon = rng.uniform(-4.0, 7.0, 150)
    lat = rng.uniform(-np.pi / 2, np.pi / 2, 150)
    lat[:3] = [np.pi / 2, -np.pi / 2, 0.0]  # poles and equator
    v = rng.normal(size=(2, 150))
    a = sh.analyse_points(v, lon, lat)
    assert a.shape == (2, sh.nlm) and a.dtype == np.complex128
    Y = np.array([sph_harm_y(l, m, np.pi / 2 - lat, lon) * (-1.0) ** m for l, m in zip(sh.l, sh.m)])
    want = v @ np.conj(Y).T
    scale = np.abs(v).sum() * np.sqrt((2 * lmax + 1) / (4 * np.pi))
    assert np.max(np.abs(a - want)) <= 1e-13 * scale
    assert np.all(a[:, sh.m == 0].imag == 0.0)


@pytest.mark.parametrize("nlat", [32, 64])
def test_reproduces_grid_analysis(nlat):
    rng = np.random.default_rng(nlat)
    g = GaussGrid(nlat)
    sh = SphericalHarmonics(g)
    f = rng.normal(size=g.shape)
    a = sh.analyse_points((f * g.cell_area).ravel(), g.lon2d.ravel(), g.lat2d.ravel())
    q = sh.analyse(f)
    assert np.max(np.abs(a - q)) <= 1e-12 * np.abs(q).max()


def test_adjoint_of_evaluate():
    rng = np.random.default_rng(5)
    sh = make(40)
    lon, lat = rng.uniform(0, 2 * np.pi, 300), rng.uniform(-np.pi / 2, np.pi / 2, 300)
    v = rng.normal(size=300)
    q = rng.normal(size=sh.nlm) + 1j * rng.normal(size=sh.nlm)
    q[sh.m == 0] = q[sh.m == 0].real
    lhs = np.sum(v * sh.evaluate(q, lon, lat))
    a = sh.analyse_points(v, lon, lat)
    rhs = np.sum(np.where(sh.m == 0, 1.0, 2.0) * (q * np.conj(a)).real)
    assert abs(lhs - rhs) <= 1e-12 * np.abs(v).sum() * np.abs(q).sum()


def test_bad_input():
    sh = make(4)
    with pytest.raises(ValueError, match="must match"):
        sh.analyse_points(np.ones(3), np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        sh.analyse_points(np.array([1.0, np.nan]), np.zeros(2), np.zeros(2))
