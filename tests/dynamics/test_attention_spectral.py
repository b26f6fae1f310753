"""Spectral (Funk–Hecke) fast path of DensityAttention (spherepde.dynamics.attention).

Every check compares against the float64 log-domain reference of :meth:`Attention.mean`
(``method="reference"``) on the same discrete measure ρ = Σ_j rho_j |cell_j| δ_{y_j}, or against
sums in ``np.longdouble`` written out here.  Accuracy criteria (tol = 1e-8 unless stated):
* density-weighted relative error  Σ_i ρ(x_i)|m_i − m_ref,i| / Σ_i ρ(x_i)|m_ref,i| ≤ tol, with ρ the
  analytic density at the targets, and
* max_i |m_i − m_ref,i| / |m_ref,i| ≤ 10·tol over targets with |m_ref,i| ≥ M_TINY.
Targets: cell centres, the face points of the FFSL transport, and points far from the mass.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ive

from spherepde.dynamics import attention as A
from spherepde.dynamics.attention import circle_sums, compiled, grid_sums
from spherepde.dynamics.attention import density as density_module
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.solvers.eulerian.transport import FFSLCircle, FFSLSphere
from conftest import random_rotation as rotation, unit

TOL = 1e-8
M_TINY = 1e-3
MU = np.array([0.4, -0.7, 0.3]) / np.linalg.norm([0.4, -0.7, 0.3])
PHI0 = 0.7  # centre of the concentrated density on S¹


def vmf(p, mu, kappa):
    """von Mises–Fisher density on S² at points p (..., 3), normalised."""
    return kappa / (2 * np.pi * (1 - np.exp(-2 * kappa))) * np.exp(kappa * (p @ mu - 1.0))


SPHERE_DENSITIES = {
    "uniform": lambda p: np.full(p.shape[:-1], 1 / (4 * np.pi)),
    "smooth": lambda p: 1.0 + 0.5 * (p @ MU) + 0.3 * p[..., 2] ** 2,
    "vmf100": lambda p: vmf(p, MU, 100.0) + 1e-12,
}


def circle_density(name, p):
    th = np.arctan2(p[..., 1], p[..., 0])
    if name == "uniform":
        return np.full(th.shape, 1 / (2 * np.pi))
    if name == "smooth":
        return 1.0 + 0.5 * np.cos(th - PHI0)
    return np.exp(100.0 * (np.cos(th - PHI0) - 1.0)) * math.sqrt(100 / (2 * np.pi)) + 1e-12


def errors(m, ref, weight):
    """(density-weighted relative error, max relative error where |m_ref| ≥ M_TINY)."""
    dm = np.linalg.norm(m - ref, axis=1)
    nr = np.linalg.norm(ref, axis=1)
    wrel = float(np.sum(weight * dm) / np.sum(weight * nr))
    big = nr >= M_TINY
    return wrel, float(np.max(dm[big] / nr[big]))


def reference(att, grid, rho, x):
    if hasattr(grid, "xyz"):
        y, w = grid.xyz.reshape(-1, 3), (rho * grid.cell_area).reshape(-1)
    else:
        y, w = grid.xy, rho * grid.cell_length
    return att.mean(x, y, w, method="reference")


# ---- Bessel coefficients ------------------------------------------------------------------------
@pytest.mark.parametrize("kappa", [1e-3, 0.5, 1.0, 10.0, 50.0, 300.0, 3000.0])
def test_bessel_coefficients_match_scipy(kappa):
    L = int(3 * math.sqrt(2 * kappa * 40)) + 20
    ours = A.spherical_ive(kappa, L)
    scipy_vals = np.sqrt(np.pi / (2 * kappa)) * ive(np.arange(L + 1) + 0.5, kappa)
    ok = scipy_vals > 1e-250
    # scipy's ive itself is only good to ~1e-13 relative here (our recurrence: ~1e-15, checked
    # against mpmath when written)
    np.testing.assert_allclose(ours[ok], scipy_vals[ok], rtol=1e-12, atol=0)
    assert np.all(ours[~ok] < 1e-240)
    theirs = ive(np.arange(L + 1), kappa)
    ok = theirs > 1e-250
    np.testing.assert_allclose(A.circular_ive(kappa, L)[ok], theirs[ok], rtol=1e-12, atol=0)
    # Funk–Hecke of the scaled kernel at t = 1: Σ (2l+1) ĩ_l = 1; Σ_k Ĩ_k = 1
    big = A.spherical_ive(kappa, L + 200)
    assert math.fsum((2 * np.arange(L + 201) + 1) * big) == pytest.approx(1.0, rel=1e-14)
    np.testing.assert_allclose(A.funk_hecke_coefficients(kappa, 5), 4 * np.pi * ours[:6], rtol=1e-14)


def test_orthogonal_scale():
    rng = np.random.default_rng(0)
    R = rotation(rng)
    assert A.orthogonal_scale(2.0 * R) == pytest.approx(2.0, rel=1e-15)
    assert A.orthogonal_scale(np.diag([1.0, -1.0, 1.0])) == pytest.approx(1.0)  # reflection
    assert A.orthogonal_scale(np.diag([0.1, 1.0, 1.0])) is None
    assert A.orthogonal_scale(np.diag([1.0, 1.0, 1.0 + 1e-11])) is None
    assert A.orthogonal_scale(np.zeros((3, 3))) is None


# ---- the spectral sums and their error model --------------------------------------------------------
@pytest.mark.parametrize("nlat, kappa, where", [
    (32, 3.0, "mid"), (64, 20.0, "mid"), (64, 60.0, "pole"), (128, 100.0, "pole"),
])
def test_spectral_sums_within_error_model(nlat, kappa, where):
    """S_f(u) = Σ_j w_j e^{κ(⟨u,y_j⟩−1)} f(y_j) against longdouble sums with the grid's own cell
    areas: the absolute error stays below the model err·Σw (truncation + round-off).  The pole
    cases fail without the correction for the backend's Gauss weights (scipy's weights are off by
    up to 5e-11 at the polar rings: measured errors 3e-13·Σw on GaussGrid(64) and 4.5e-12·Σw on
    GaussGrid(128), against models of 3e-14·Σw and 2e-14·Σw)."""
    g = GaussGrid(nlat)
    mu = np.array([0.0, 0.0, 1.0]) if where == "pole" else MU
    w = (vmf(g.xyz, mu, 200.0) + 1e-12) * g.cell_area
    spec = grid_sums._SpectralSphere(g, kappa)
    rng = np.random.default_rng(nlat)
    u = np.concatenate([unit(rng.normal(size=(150, 3))), unit(mu + 0.05 * rng.normal(size=(50, 3)))])
    S = spec.sums(w, u)
    y = g.xyz.reshape(-1, 3).astype(np.longdouble)
    E = np.exp(kappa * (u.astype(np.longdouble) @ y.T - 1)) * w.reshape(-1).astype(np.longdouble)
    want = np.concatenate([(E @ y).T, E.sum(axis=1)[None]]).astype(float)
    err = np.abs(S - want).max() / w.sum()
    assert err <= spec.err, (err, spec.err)
    assert spec.err <= 4e-14  # the model itself stays small (round-off level)


@pytest.mark.parametrize("nlat, kappa, sample", [(32, 3.0, 1), (48, 20.0, 1), (128, 100.0, 157)])
def test_ring_sums_at_face_points_within_error_model(nlat, kappa, sample):
    """The same error model at the FFSL face points, which take the ring synthesis (Legendre sums
    per ring, then an inverse FFT per ring of equispaced longitudes, grids.rings.RingLayout);
    at nlat 128 the long-double reference is formed at every ``sample``-th face point."""
    g = GaussGrid(nlat)
    pts = FFSLSphere(g, lambda t, x: 0 * x).points
    w = (vmf(g.xyz, MU, 200.0) + 1e-12) * g.cell_area
    spec = grid_sums._SpectralSphere(g, kappa)
    S = spec.sums(w, pts)[:, ::sample]
    u = pts[::sample]
    assert not grid_sums._SphereTargets(spec, pts, False).scattered  # the ring path was taken
    y = g.xyz.reshape(-1, 3).astype(np.longdouble)
    E = np.exp(kappa * (u.astype(np.longdouble) @ y.T - 1)) * w.reshape(-1).astype(np.longdouble)
    want = np.concatenate([(E @ y).T, E.sum(axis=1)[None]]).astype(float)
    err = np.abs(S - want).max() / w.sum()
    assert err <= spec.err, (err, spec.err)


def test_ring_evaluation_equals_point_evaluation():
    """Targets on few latitude rings (face points) take the per-ring Legendre path; scattered
    targets the general SphericalHarmonics.evaluate — both give the same sums."""
    g = GaussGrid(48)
    pts = FFSLSphere(g, lambda t, x: 0 * x).points
    spec = grid_sums._SpectralSphere(g, 20.0)
    w = SPHERE_DENSITIES["vmf100"](g.xyz) * g.cell_area
    ring = spec.sums(w, pts)
    sh = spec._transform()
    dens = w * spec._inv_area
    f = np.stack([dens * g.xyz[..., 0], dens * g.xyz[..., 1], dens * g.xyz[..., 2], dens])
    q = sh.analyse(f) * spec.coef[sh.l]
    lon, lat = np.arctan2(pts[:, 1], pts[:, 0]), np.arcsin(np.clip(pts[:, 2], -1, 1))
    # two summation orders of the same series: within twice the sums' round-off model
    np.testing.assert_allclose(ring, sh.evaluate(q, lon, lat), rtol=0, atol=2 * spec.err * w.sum())


# ---- accuracy against the reference ---------------------------------------------------------------
def sphere_targets(g, rng, step):
    pts = FFSLSphere(g, lambda t, x: 0 * x).points[::step]
    cells = g.xyz.reshape(-1, 3)[::step]
    far = unit(-MU + 0.3 * rng.normal(size=(100, 3)))
    far2 = unit(np.cross(MU, [0.0, 0.0, 1.0]) + 0.3 * rng.normal(size=(100, 3)))
    return np.concatenate([pts, cells, far, far2])


# (nlat, target stride): the reference costs targets × nlat·2nlat pairs
SPHERE_GRIDS = [(32, 1), (48, 3), (64, 6)]


@pytest.mark.parametrize("nlat, step", SPHERE_GRIDS)
@pytest.mark.parametrize("density", sorted(SPHERE_DENSITIES))
def test_sphere_spectral_matches_reference(nlat, step, density):
    g = GaussGrid(nlat)
    rng = np.random.default_rng(nlat)
    R = rotation(rng)
    x = sphere_targets(g, rng, step)
    rho = SPHERE_DENSITIES[density](g.xyz)
    weight = SPHERE_DENSITIES[density](x)
    for bc in (0.5, 1.0, 10.0, 50.0):
        # B = QᵀK = 2R (c = 2, R a rotation ≠ I), β = βc/2
        att = Attention(np.eye(3), 2.0 * R, rng.normal(size=(3, 3)), bc / 2)
        da = DensityAttention(att, g)
        need = grid_sums._SpectralSphere(g, bc).degree_needed(TOL)
        assert da.spectral == (need <= g.lmax), (bc, need)
        if not da.spectral:
            assert "beyond" in da.spectral_reason
            continue
        m, stats = da.mean_and_stats(x, rho)
        st = stats
        assert st["method"] == "spectral" and st["targets"] == x.shape[0]
        ref = reference(att, g, rho, x)
        wrel, mrel = errors(m, ref, weight)
        assert wrel <= TOL and mrel <= 10 * TOL, (bc, st, wrel, mrel)
        if density != "vmf100":  # smooth densities: every target certified spectrally
            assert st["spectral"] == x.shape[0], st
        # the velocity is P_x V m
        v = da(0.0, x, rho)
        vm = m @ att.V.T
        np.testing.assert_allclose(v, vm - np.sum(vm * x, axis=1, keepdims=True) * x,
                                   rtol=0, atol=1e-15)


def test_sphere_far_field_uses_split_and_exact_passes():
    """A concentrated density (vMF κ = 100 + 1e-12 floor) at β = 50: the plain spectral sums
    certify only targets near the mass; the others go through the split pass (spectral floor +
    culled exact bulk) and stay within tol, and the split pass sums far fewer pairs than the
    reference (measured: 7 % here)."""
    g = GaussGrid(64)
    rng = np.random.default_rng(3)
    x = sphere_targets(g, rng, 4)
    rho = SPHERE_DENSITIES["vmf100"](g.xyz)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 50.0)
    da = DensityAttention(att, g)
    pairs = []
    direct, compiled_sums = density_module._sums_direct, compiled.sums

    def spy(z, y, *args):
        pairs.append(z.shape[0] * y.shape[0])
        return direct(z, y, *args)

    def spy_compiled(*args, **kw):
        out = compiled_sums(*args, **kw)
        pairs.append(out[3])  # the pairs the compiled sums actually summed
        return out

    density_module._sums_direct = spy
    compiled.sums = spy_compiled
    try:
        m, stats = da.mean_and_stats(x, rho)
    finally:
        density_module._sums_direct, compiled.sums = direct, compiled_sums
    st = stats
    assert st["spectral"] > 0 and st["split"] > st["spectral"], st
    assert pairs and sum(pairs) < 0.15 * st["split"] * rho.size, sum(pairs) / (st["split"] * rho.size)
    ref = reference(att, g, rho, x)
    wrel, mrel = errors(m, ref, SPHERE_DENSITIES["vmf100"](x))
    assert wrel <= TOL and mrel <= 10 * TOL, (wrel, mrel)


@pytest.mark.parametrize("tol", [1e-4, 1e-6, 1e-12])
def test_sphere_other_tolerances(tol):
    g = GaussGrid(48)
    rng = np.random.default_rng(7)
    x = sphere_targets(g, rng, 3)
    rho = SPHERE_DENSITIES["vmf100"](g.xyz)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)
    da = DensityAttention(att, g, tol=tol)
    assert da.spectral
    m, stats = da.mean_and_stats(x, rho)
    ref = reference(att, g, rho, x)
    wrel, mrel = errors(m, ref, SPHERE_DENSITIES["vmf100"](x))
    assert wrel <= tol and mrel <= 10 * tol, (tol, stats, wrel, mrel)


def test_sphere_usa_variant():
    g = GaussGrid(48)
    rng = np.random.default_rng(11)
    R = rotation(rng)
    x = sphere_targets(g, rng, 3)
    for density in ("smooth", "vmf100"):
        rho = SPHERE_DENSITIES[density](g.xyz)
        for c, beta in ((1.0, 10.0), (0.8, 20.0)):  # c < 1: m carries e^{β(c−1)}
            att = Attention(np.eye(3), c * R, np.eye(3), beta, kind="usa")
            da = DensityAttention(att, g, method="spectral")
            m, stats = da.mean_and_stats(x, rho)
            ref = reference(att, g, rho, x)
            nr = np.linalg.norm(ref, axis=1)
            rel = np.linalg.norm(m - ref, axis=1) / nr
            assert rel[nr >= 1e-300].max() <= TOL, (density, c, rel.max(), stats)


@pytest.mark.parametrize("kind,scale", [("softmax", 1e-312), ("softmax", 1e150),
                                        ("usa", 1e-150), ("usa", 1e150)])
def test_sphere_spectral_at_any_mass_scale(kind, scale):
    """The error bound of the certification is formed for unit mass (a total mass of 1e-312
    made η = err·Σw underflow to 0, so that targets with S_1 = 0 passed): at any scale of ρ the
    means are finite and within tol of the reference, near and far from the mass."""
    g = GaussGrid(64)
    rng = np.random.default_rng(5)
    x = sphere_targets(g, rng, 6)
    rho = scale * SPHERE_DENSITIES["vmf100"](g.xyz)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 50.0, kind=kind)
    da = DensityAttention(att, g, method="spectral")
    m, stats = da.mean_and_stats(x, rho)
    assert np.all(np.isfinite(m)), stats
    ref = reference(att, g, rho, x)
    nr = np.linalg.norm(ref, axis=1)
    dm = np.linalg.norm(m - ref, axis=1)
    big = nr >= M_TINY * nr.max()
    assert np.count_nonzero(big) >= 200, np.count_nonzero(big)  # (usa: only near the mass)
    assert np.all(dm[big] <= 10 * TOL * nr[big]) and np.all(dm <= 10 * TOL * nr.max())


def test_non_unit_targets_are_evaluated_exactly():
    """The kernel series assumes |Bᵀx| = c; points off the sphere take the exact path."""
    g = GaussGrid(32)
    rng = np.random.default_rng(5)
    x = np.concatenate([unit(rng.normal(size=(50, 3))), 1.1 * unit(rng.normal(size=(20, 3)))])
    rho = SPHERE_DENSITIES["smooth"](g.xyz)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 5.0)
    da = DensityAttention(att, g)
    m, stats = da.mean_and_stats(x, rho)
    assert stats["spectral"] == 50 and stats["exact"] == 20
    ref = reference(att, g, rho, x)
    assert np.abs(m - ref).max() <= TOL


# ---- the circle -----------------------------------------------------------------------------------
@pytest.mark.parametrize("density", ["uniform", "smooth", "vmf100"])
@pytest.mark.parametrize("n", [64, 256])
def test_circle_spectral_matches_reference(n, density):
    g = CircleGrid(n)
    rng = np.random.default_rng(n)
    faces = FFSLCircle(g, lambda t, x: 0 * x).points
    far = unit(-np.array([math.cos(PHI0), math.sin(PHI0)]) + 0.3 * rng.normal(size=(50, 2)))
    x = np.concatenate([faces, g.xy, far])
    rho = circle_density(density, g.xy)
    weight = circle_density(density, x)
    th = 1.1
    R = np.array([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]])
    for bc in (0.5, 1.0, 10.0, 50.0):
        att = Attention(np.eye(2), 2.0 * R, np.eye(2), bc / 2)
        da = DensityAttention(att, g)
        need = circle_sums._SpectralCircle(g, bc).degree_needed(TOL)
        assert da.spectral == (need <= n // 2), (bc, need)
        if not da.spectral:
            continue
        m, stats = da.mean_and_stats(x, rho)
        ref = reference(att, g, rho, x)
        wrel, mrel = errors(m, ref, weight)
        assert wrel <= TOL and mrel <= 10 * TOL, (bc, stats, wrel, mrel)


def test_circle_forced_spectral_beyond_half_the_cells():
    """On S¹ the DFT of the weights is n-periodic in k, so any number of terms is exact:
    'spectral' may be forced where 'auto' declines (more terms than n/2)."""
    g = CircleGrid(32)
    att = Attention(np.eye(2), np.eye(2), np.eye(2), 200.0)
    assert not DensityAttention(att, g).spectral
    da = DensityAttention(att, g, method="spectral")
    assert da.spectral and da.spectral_degree > g.n
    x = np.concatenate([FFSLCircle(g, lambda t, x: 0 * x).points, g.xy])
    rho = circle_density("smooth", g.xy)
    ref = reference(att, g, rho, x)
    wrel, mrel = errors(da.mean(x, rho), ref, circle_density("smooth", x))
    assert wrel <= TOL and mrel <= 10 * TOL


# ---- the point-table cache (TARGET_CACHE) ------------------------------------------------------
# The tables that depend only on the targets are kept between calls with the same targets; every
# result must be bitwise the one computed without the cache.

def uncached(monkeypatch, make, calls):
    """Results of ``calls(obj)`` for a fresh ``make()`` with the cache switched off."""
    monkeypatch.setattr(grid_sums, "TARGET_CACHE", False)
    out = calls(make())
    monkeypatch.setattr(grid_sums, "TARGET_CACHE", True)
    return out


def assert_bitwise(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("rot, density", [(False, "smooth"), (False, "vmf100"), (True, "vmf100")])
def test_cache_bitwise_for_repeated_calls(monkeypatch, rot, density):
    """Repeated calls at the FFSL face points (the ring synthesis; with B = 2R, R ≠ I, the scattered
    targets of SphericalHarmonics.evaluate): cached results equal the uncached ones bit for bit,
    also in the split pass (vMF: concentrated), and the tables are really kept."""
    g = GaussGrid(48)
    pts = FFSLSphere(g, lambda t, x: 0 * x).points
    K = 2.0 * rotation(np.random.default_rng(7)) if rot else np.eye(3)
    att = Attention(np.eye(3), K, np.eye(3), 15.0)
    rho = SPHERE_DENSITIES[density](g.xyz)
    want = uncached(monkeypatch, lambda: DensityAttention(att, g),
                    lambda da: [da(0.0, pts, rho) for _ in range(3)])
    da = DensityAttention(att, g)
    got = [da(0.0, pts, rho) for _ in range(3)]
    assert_bitwise(got, want)
    tables = da._spec._targets.tables
    assert tables is not None and tables.scattered == rot
    if not rot:
        assert tables._Y is not None and tables.layout is not None
    if density == "vmf100":
        assert da.last_stats["split"] > 0, da.last_stats


def test_cache_invalidated_when_points_change(monkeypatch):
    """New targets (another array, or the same array changed in place) are not served from the
    tables of the old ones; going back to the old targets gives their results again."""
    g = GaussGrid(32)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)
    rho = SPHERE_DENSITIES["vmf100"](g.xyz)
    faces = FFSLSphere(g, lambda t, x: 0 * x).points
    cells = g.xyz.reshape(-1, 3)
    moved = faces.copy()

    def calls(da):
        out = [da(0.0, faces, rho), da(0.0, faces, rho), da(0.0, cells, rho), da(0.0, cells, rho)]
        moved[:] = faces
        out += [da(0.0, moved, rho), da(0.0, moved, rho)]
        moved[::5] = faces[::-5][: moved[::5].shape[0]]  # in place, same shape
        out += [da(0.0, moved, rho), da(0.0, moved, rho), da(0.0, faces, rho)]
        return out

    want = uncached(monkeypatch, lambda: DensityAttention(att, g), calls)
    da = DensityAttention(att, g)
    assert_bitwise(calls(da), want)
    assert not np.array_equal(want[6], want[0])  # the in-place change did change the targets
    # the same for the spectral sums given the caller's own array, changed in place
    w = rho * g.cell_area
    spec = grid_sums._SpectralSphere(g, 10.0)
    u = faces.copy()
    spec.sums(w, u)
    spec.sums(w, u)
    u[::5] = faces[::-5][: u[::5].shape[0]]
    np.testing.assert_array_equal(spec.sums(w, u), grid_sums._SpectralSphere(g, 10.0).sums(w, u))


def test_cache_with_a_new_density_at_the_same_points(monkeypatch):
    """Same targets, new density (as in a time step): the kept tables serve, the results are those
    of the new density (bitwise the uncached ones)."""
    g = GaussGrid(32)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)
    pts = FFSLSphere(g, lambda t, x: 0 * x).points
    rhos = [SPHERE_DENSITIES["vmf100"](g.xyz), SPHERE_DENSITIES["smooth"](g.xyz),
            vmf(g.xyz, unit([1.0, 0.0, -1.0]), 30.0) + 1e-12]

    def calls(da):
        return [da(0.0, pts, r) for r in rhos for _ in range(2)]

    want = uncached(monkeypatch, lambda: DensityAttention(att, g), calls)
    da = DensityAttention(att, g)
    da(0.0, pts, rhos[2])
    da(0.0, pts, rhos[2])
    kept = da._spec._targets.tables
    assert kept is not None and kept._Y is not None
    assert_bitwise(calls(da), want)
    assert da._spec._targets.tables is kept  # never rebuilt
    assert not np.array_equal(want[0], want[2])


@pytest.mark.parametrize("legendre_kept", [True, False])
def test_cache_serves_subsets_of_the_targets(monkeypatch, legendre_kept):
    """The split pass evaluates at some rows of the targets of the call before: the sums at any
    rows (sorted or not, some rings or all, few rows: then scattered) equal the uncached sums,
    also when the Legendre table does not fit in TARGET_CACHE_BYTES."""
    g = GaussGrid(40)
    pts = FFSLSphere(g, lambda t, x: 0 * x).points
    w = SPHERE_DENSITIES["vmf100"](g.xyz) * g.cell_area
    w2 = SPHERE_DENSITIES["smooth"](g.xyz) * g.cell_area
    rng = np.random.default_rng(2)
    subsets = [np.arange(pts.shape[0]), rng.permutation(pts.shape[0])[:3000],
               np.flatnonzero(pts[:, 2] > 0.5), rng.choice(pts.shape[0], 100, replace=False)]
    spec = grid_sums._SpectralSphere(g, 12.0)
    if not legendre_kept:
        monkeypatch.setattr(grid_sums, "TARGET_CACHE_BYTES", 1000)
    spec.sums(w, pts)
    spec.sums(w, pts)  # the second call in a row keeps the tables
    kept = spec._targets.tables
    assert kept.layout is not None and (kept._Y is not None) == legendre_kept
    fresh = grid_sums._SpectralSphere(g, 12.0)
    monkeypatch.setattr(grid_sums, "TARGET_CACHE", False)
    want = [fresh.sums(w2, pts[r]) for r in subsets]
    monkeypatch.setattr(grid_sums, "TARGET_CACHE", True)
    # the same products, but over a subset of the rings: a BLAS may pick another kernel for
    # another row count (or gemv for one ring), so equal to a few ulps, not bit for bit
    got = [spec.sums(w2, pts[r], r) for r in subsets]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=8 * np.finfo(float).eps * np.abs(b).max())
    # rows that do not match the targets are not trusted
    wrong = subsets[1] + 1
    assert spec._targets.rows(pts[subsets[1]], wrong) is None
    np.testing.assert_array_equal(spec.sums(w2, pts[subsets[1]], wrong), want[1])


def test_cache_memory_bound(monkeypatch):
    """Tables beyond TARGET_CACHE_BYTES are not kept (recomputed each call): same results."""
    g = GaussGrid(32)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)
    pts = FFSLSphere(g, lambda t, x: 0 * x).points
    rho = SPHERE_DENSITIES["vmf100"](g.xyz)
    want = uncached(monkeypatch, lambda: DensityAttention(att, g),
                    lambda da: [da(0.0, pts, rho) for _ in range(3)])
    monkeypatch.setattr(grid_sums, "TARGET_CACHE_BYTES", 1000)
    da = DensityAttention(att, g)
    assert_bitwise([da(0.0, pts, rho) for _ in range(3)], want)
    assert da._spec._targets.tables._Y is None


@pytest.mark.parametrize("density", ["smooth", "vmf"])
def test_cache_bitwise_on_the_circle(monkeypatch, density):
    g = CircleGrid(256)
    pts = FFSLCircle(g, lambda t, x: 0 * x).points
    rho = circle_density(density, g.xy)
    rho2 = circle_density(density, g.xy[::-1])
    att = Attention(np.eye(2), np.eye(2), np.eye(2), 100.0)

    def calls(da):
        return [da(0.0, pts, rho), da(0.0, pts, rho), da(0.0, pts, rho2), da(0.0, g.xy, rho2),
                da(0.0, pts, rho), da(0.0, pts, rho)]

    want = uncached(monkeypatch, lambda: DensityAttention(att, g, method="spectral"), calls)
    da = DensityAttention(att, g, method="spectral")
    assert_bitwise(calls(da), want)
    assert da._spec._targets.tables._E is not None
    if density == "vmf":
        assert da.last_stats["split"] > 0, da.last_stats


def test_cache_bitwise_in_meanfield_steps(monkeypatch):
    """A few steps of the mean-field stepper (two evaluations per step at the face points, the
    density changing) give bitwise the states computed without the cache."""
    from spherepde.solvers import make_stepper  # noqa: PLC0415
    from spherepde.solvers.controller import Controller  # noqa: PLC0415

    g = GaussGrid(24)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)
    rho0 = vmf(g.xyz, MU, 20.0) + 1e-12
    dt = 0.8 * g.dlon

    def run(da):
        st = make_stepper("meanfield-ffsl", g, da, courant=0.8)
        return [Controller(st, dt=dt).run(rho0, (0.0, 4 * dt)).state]

    want = uncached(monkeypatch, lambda: DensityAttention(att, g), run)
    assert_bitwise(run(DensityAttention(att, g)), want)


# ---- the automatic choice ---------------------------------------------------------------------------
def test_auto_choice():
    rng = np.random.default_rng(1)
    R = rotation(rng)
    g = GaussGrid(32)
    yes = DensityAttention(Attention(np.eye(3), 2.0 * R, np.eye(3), 2.0), g)
    assert yes.spectral and yes.spectral_reason is None
    # B not ∝ orthogonal: the per-target Funk–Hecke path up to β‖B‖ = GENERAL_MAX_KAPPA
    general = DensityAttention(Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.eye(3), 2.0), g)
    assert general.spectral and isinstance(general._spec, grid_sums._TargetBessel)
    no = DensityAttention(Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.eye(3), 200.0),
                          GaussGrid(64))
    assert not no.spectral and "orthogonal" in no.spectral_reason
    assert "compiled direct sums are faster" in no.spectral_reason
    inf = DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), math.inf), g)
    assert not inf.spectral
    hot = DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), 300.0), g)  # L > lmax
    assert not hot.spectral and "beyond 31" in hot.spectral_reason
    assert DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), 300.0), GaussGrid(256)).spectral
    for method in ("reference", "culled", "float32"):
        assert not DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), 2.0), g,
                                    method=method).spectral
    # the non-spectral paths are Attention's own, unchanged
    g = no.grid
    rho = SPHERE_DENSITIES["smooth"](g.xyz)
    x = unit(rng.normal(size=(30, 3)))
    att = no.attention
    want = att.velocity(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1))
    np.testing.assert_array_equal(no(0.0, x, rho), want)
    assert no.last_stats["method"] == "direct"  # Attention's choice among the direct sums
    ref = DensityAttention(yes.attention, g, method="reference")
    np.testing.assert_array_equal(
        ref(0.0, x, rho),
        yes.attention.velocity(x, g.xyz.reshape(-1, 3), (rho * g.cell_area).reshape(-1),
                               method="reference"))
    # β = ∞ ignores the density, as before
    rho32 = SPHERE_DENSITIES["smooth"](inf.grid.xyz)
    np.testing.assert_array_equal(inf(0.0, x, None), inf(0.0, x, rho32))


# ---- bad input -----------------------------------------------------------------------------------
def test_bad_arguments():
    g = GaussGrid(16)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 2.0)
    for tol in (0.0, 1.0, -1e-3, 2.0, math.nan, "tight", None):
        with pytest.raises(ValueError, match="tol"):
            DensityAttention(att, g, tol=tol)
    for method in ("fast", "Spectral", None, 3):
        with pytest.raises(ValueError, match="method"):
            DensityAttention(att, g, method=method)
    with pytest.raises(ValueError, match="spectral.*orthogonal"):  # (and β‖B‖ > lmax²/2)
        DensityAttention(Attention(np.eye(3), np.diag([0.1, 1, 1.0]), np.eye(3), 2000.0), g,
                         method="spectral")
    with pytest.raises(ValueError, match="spectral.*beyond"):
        DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), 500.0), g, method="spectral")
    with pytest.raises(ValueError, match="spectral.*beta = inf"):
        DensityAttention(Attention(np.eye(3), np.eye(3), np.eye(3), math.inf), g,
                         method="spectral")
    da = DensityAttention(att, g)
    x = unit(np.ones((2, 3)))
    with pytest.raises(ValueError, match="w"):
        da(0.0, x, -np.ones(g.shape))
    with pytest.raises(ValueError, match="w"):
        da(0.0, x, np.zeros(g.shape))
    with pytest.raises(ValueError, match="w"):
        da(0.0, x, np.full(g.shape, np.nan))
    with pytest.raises(ValueError, match="y and w"):
        da(0.0, x, None)
