"""Exact sampling from piecewise-constant densities (spherepde.grids.sampling)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.geometry import xyz_to_lonlat
from spherepde.grids.sampling import sample_density

P_MIN = 1e-3  # significance of the (deterministic, fixed-seed) goodness-of-fit tests
SIGMAS = 5.0  # CLT bound on sample means


def _sphere_rho(grid: GaussGrid) -> np.ndarray:
    """Non-uniform density with some empty cells (never to be sampled)."""
    xyz = grid.xyz
    rho = np.exp(2.0 * xyz[..., 2]) * (1.2 + xyz[..., 0])
    rho[1, 3] = 0.0
    rho[-2, :5] = 0.0
    return rho


def _gauss_cells(grid: GaussGrid, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row j, column i) of the cell containing each point."""
    lon, _ = xyz_to_lonlat(pts)
    mu = pts[:, 2]
    j = np.searchsorted(-grid.mu_faces, -mu, side="right") - 1
    i = np.floor((lon - grid.lon_faces[0]) / grid.dlon).astype(int) % grid.nlon
    return j, i


def _exact_mean_sphere(grid: GaussGrid, rho: np.ndarray) -> np.ndarray:
    """∫ x ρ dσ / ∫ ρ dσ for the piecewise-constant density, in closed form per cell.

    Per cell (λ_w, λ_e) × (μ_s, μ_n), with dσ = dλ dμ:
    ∫ x = (sin λ_e − sin λ_w) S,  ∫ y = (cos λ_w − cos λ_e) S,  ∫ z = Δλ (μ_n² − μ_s²)/2,
    S = ∫ sqrt(1 − μ²) dμ = [μ sqrt(1 − μ²) + arcsin μ]/2.
    """
    lf, mf = grid.lon_faces, grid.mu_faces
    F = 0.5 * (mf * np.sqrt(np.clip(1 - mf**2, 0, None)) + np.arcsin(mf))
    S = (F[:-1] - F[1:])[:, None]
    ix = (np.sin(lf[1:]) - np.sin(lf[:-1]))[None, :] * S
    iy = (np.cos(lf[:-1]) - np.cos(lf[1:]))[None, :] * S
    iz = np.repeat((0.5 * grid.dlon * (mf[:-1] ** 2 - mf[1:] ** 2))[:, None], grid.nlon, axis=1)
    mass = np.sum(rho * grid.cell_area)
    return np.array([np.sum(rho * ix), np.sum(rho * iy), np.sum(rho * iz)]) / mass


# ---- S² ----------------------------------------------------------------------------------
def test_sphere_points_are_unit_and_in_positive_cells():
    grid = GaussGrid(8)
    rho = _sphere_rho(grid)
    pts = sample_density(grid, rho, 20_000, seed=1)
    assert pts.shape == (20_000, 3)
    assert np.max(np.abs(np.linalg.norm(pts, axis=1) - 1.0)) < 1e-14
    j, i = _gauss_cells(grid, pts)
    assert np.all(rho[j, i] > 0)


def test_sphere_chi_square_cell_counts():
    grid = GaussGrid(8)
    rho = _sphere_rho(grid)
    n = 200_000
    pts = sample_density(grid, rho, n, seed=12345)
    j, i = _gauss_cells(grid, pts)
    counts = np.zeros(grid.shape)
    np.add.at(counts, (j, i), 1)
    p = rho * grid.cell_area / np.sum(rho * grid.cell_area)
    keep = p > 0
    assert np.all(counts[~keep] == 0)
    stat = chisquare(counts[keep], n * p[keep])
    assert stat.pvalue > P_MIN, stat


def test_sphere_within_cell_uniform_in_mu_and_lon():
    """Concentrate the mass on one cell: (λ, μ) must be uniform on its rectangle."""
    grid = GaussGrid(6)
    rho = np.zeros(grid.shape)
    rho[1, 4] = 1.0
    pts = sample_density(grid, rho, 20_000, seed=7)
    lon, _ = xyz_to_lonlat(pts)
    u = (lon - grid.lon_faces[4]) / grid.dlon
    v = (pts[:, 2] - grid.mu_faces[2]) / (grid.mu_faces[1] - grid.mu_faces[2])
    for a in (u, v):
        assert a.min() >= 0 and a.max() <= 1
        counts = np.histogram(a, bins=20, range=(0, 1))[0]
        assert chisquare(counts).pvalue > P_MIN


def test_sphere_mean_matches_exact_integral():
    grid = GaussGrid(8)
    rho = _sphere_rho(grid)
    n = 100_000
    pts = sample_density(grid, rho, n, seed=2024)
    exact = _exact_mean_sphere(grid, rho)
    err = np.abs(pts.mean(axis=0) - exact)
    assert np.all(err < SIGMAS * pts.std(axis=0) / np.sqrt(n)), (err, exact)


# ---- S¹ ----------------------------------------------------------------------------------
def test_circle_chi_square_and_mean():
    grid = CircleGrid(24)
    rho = 1.0 + 0.8 * np.cos(grid.theta - 0.4) ** 3
    rho[5] = 0.0
    n = 100_000
    pts = sample_density(grid, rho, n, seed=99)
    assert pts.shape == (n, 2)
    assert np.max(np.abs(np.linalg.norm(pts, axis=1) - 1.0)) < 1e-14
    theta = np.mod(np.arctan2(pts[:, 1], pts[:, 0]) - grid.theta_faces[0], 2 * np.pi)
    k = np.minimum((theta / grid.dtheta).astype(int), grid.n - 1)
    counts = np.bincount(k, minlength=grid.n)
    p = rho / rho.sum()
    assert counts[5] == 0
    assert chisquare(counts[p > 0], n * p[p > 0]).pvalue > P_MIN
    f = grid.theta_faces
    exact = np.array([np.sum(rho * (np.sin(f[1:]) - np.sin(f[:-1]))),
                      np.sum(rho * (np.cos(f[:-1]) - np.cos(f[1:])))]) / np.sum(rho * grid.dtheta)
    err = np.abs(pts.mean(axis=0) - exact)
    assert np.all(err < SIGMAS * pts.std(axis=0) / np.sqrt(n))


# ---- reproducibility -----------------------------------------------------------------------
@pytest.mark.parametrize("grid", [GaussGrid(6), CircleGrid(8)], ids=["gauss", "circle"])
def test_reproducible_and_independent_of_global_state(grid):
    rho = np.linspace(0.5, 2.0, int(np.prod(grid.shape))).reshape(grid.shape)
    np.random.seed(0)
    a = sample_density(grid, rho, 500, seed=42)
    np.random.seed(1)
    np.random.random(10)
    b = sample_density(grid, rho, 500, seed=42)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, sample_density(grid, rho, 500, seed=43))
    # the first points of a larger draw are the smaller draw
    np.testing.assert_array_equal(sample_density(grid, rho, 1000, seed=42)[:500], a)
    # the normalisation of rho does not matter
    np.testing.assert_array_equal(sample_density(grid, 3.0 * rho, 500, seed=42), a)
    # the caller's array is not modified
    r0 = rho.copy()
    sample_density(grid, rho, 10, seed=1)
    np.testing.assert_array_equal(rho, r0)


def test_seed_none_and_single_point():
    grid = GaussGrid(4)
    assert sample_density(grid, np.ones(grid.shape), 1, seed=None).shape == (1, 3)
    assert sample_density(grid, np.ones(grid.shape), np.int64(3), seed=np.int32(5)).shape == (3, 3)


# ---- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rho": -np.ones((4, 8))}, "rho"),
        ({"rho": np.full((4, 8), np.nan)}, "rho"),
        ({"rho": np.full((4, 8), np.inf)}, "rho"),
        ({"rho": np.ones((8, 4))}, "rho"),
        ({"rho": np.zeros((4, 8))}, "rho"),
        ({"rho": "abc"}, "rho"),
        ({"rho": np.ones((4, 8), complex)}, "rho"),
        ({"n": 0}, "n"),
        ({"n": -3}, "n"),
        ({"n": 2.5}, "n"),
        ({"n": True}, "n"),
        ({"seed": 1.5}, "seed"),
        ({"seed": "1"}, "seed"),
        ({"seed": -1}, "seed"),
        ({"seed": True}, "seed"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"rho": np.ones((4, 8)), "n": 10, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        sample_density(GaussGrid(4), **args)


def test_bad_grid():
    with pytest.raises(TypeError, match="grid"):
        sample_density(object(), np.ones(4), 3, seed=0)
