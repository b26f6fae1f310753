"""Tests for spherepde.grids.sht.SphericalHarmonics (both backends, fixed seeds, fast)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import sph_harm_y

import spherepde.grids.sht as sht_mod
import spherepde.grids.sht_backends as sht_backends
from spherepde.grids.gauss import GaussGrid
from spherepde.grids.sht import SphericalHarmonics

HAVE_SHTNS = sht_mod.shtns_available()
needs_shtns = pytest.mark.skipif(not HAVE_SHTNS, reason="shtns not importable")

# (nlat, backend) pairs: pyshtools only below 32 latitudes, both from 32 on
CASES = [(8, "pyshtools"), (16, "pyshtools"), (32, "pyshtools"), (64, "pyshtools")]
CASES += [pytest.param(n, "shtns", marks=needs_shtns) for n in (32, 64)]
RTOL = 1e-12  # relative to the largest magnitude involved


def make(nlat, backend, lmax=None):
    return SphericalHarmonics(GaussGrid(nlat), lmax=lmax, backend=backend)


def random_coeffs(sh, rng, *batch, decay=0.0):
    """Random complex coefficients of a real field (m = 0 coefficients real)."""
    q = rng.standard_normal(batch + (sh.nlm,)) + 1j * rng.standard_normal(batch + (sh.nlm,))
    q.imag[..., sh.m == 0] = 0.0
    return q / (1.0 + sh.l) ** decay


def assert_close(a, b, scale=None, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(np.abs(b).max(), 1.0) if scale is None else scale
    err = np.abs(a - b).max()
    assert err <= rtol * scale, f"max error {err:.3e} > {rtol:g} × {scale:.3e}"


def xyz_coeffs(sh):
    """Exact coefficients of x = cos φ cos λ, y = cos φ sin λ, z = sin φ."""
    x, y, z = np.zeros((3, sh.nlm), complex)
    x[sh.index(1, 1)] = math.sqrt(2 * math.pi / 3)
    y[sh.index(1, 1)] = -1j * math.sqrt(2 * math.pi / 3)
    z[sh.index(1, 0)] = math.sqrt(4 * math.pi / 3)
    return x, y, z


def scipy_field(sh, q, lon, lat, lmax):
    """Σ_l [q_l0 Y_l0 + 2 Re Σ_m q_lm Y_lm] with Y_lm = (−1)^m scipy.sph_harm_y (independent)."""
    theta, f = 0.5 * np.pi - lat, np.zeros(np.broadcast(lon, lat).shape)
    for l in range(lmax + 1):
        for m in range(l + 1):
            y = (-1) ** m * sph_harm_y(l, m, theta, lon)
            c = q[sh.index(l, m)]
            f += (c * y).real if m == 0 else 2.0 * (c * y).real
    return f


# ---- construction -------------------------------------------------------------------------
def test_backend_selection_and_attributes():
    sh = make(8, "auto")
    assert sh.backend == "pyshtools" and sh.lmax == 7 and sh.nlm == 36 and sh.shape == (8, 16)
    if HAVE_SHTNS:
        assert make(32, "auto").backend == "shtns"
    assert not sh.l.flags.writeable and not sh.m.flags.writeable
    assert sh.index(0, 0) == 0 and sh.index(7, 7) == sh.nlm - 1
    idx = sh.index(sh.l, sh.m)
    np.testing.assert_array_equal(idx, np.arange(sh.nlm))
    assert make(32, "pyshtools", lmax=5).nlm == 21


@needs_shtns
def test_layout_matches_shtns():
    sh = make(32, "shtns", lmax=20)
    raw = sh._impl.sh
    np.testing.assert_array_equal(sh.l, raw.l)
    np.testing.assert_array_equal(sh.m, raw.m)
    for l, m in [(0, 0), (5, 3), (20, 0), (20, 20), (13, 7)]:
        assert sh.index(l, m) == raw.idx(l, m)
    # the wrapper returns exactly what shtns computes (v_theta = −v_north, v_phi = u_east)
    rng = np.random.default_rng(2)
    f = rng.standard_normal(sh.shape)
    np.testing.assert_array_equal(sh.analyse(f), raw.analys(f))
    q = random_coeffs(sh, rng)
    np.testing.assert_array_equal(sh.synthesise(q), raw.synth(q))
    vt, vp = raw.synth(q, 0.5 * q)
    u, v = sh.synthesise_vector(q, 0.5 * q)
    np.testing.assert_array_equal(u, vp)
    np.testing.assert_array_equal(v, -vt)


def test_bad_constructor_arguments():
    g = GaussGrid(16)
    with pytest.raises(ValueError, match="backend"):
        SphericalHarmonics(g, backend="fftw")
    with pytest.raises(ValueError, match="'pyshtools'"):
        SphericalHarmonics(g, backend="SHTNS")
    for bad in (0, -3, 16, 100):
        with pytest.raises(ValueError, match="lmax"):
            SphericalHarmonics(g, lmax=bad)
    with pytest.raises(TypeError, match="lmax"):
        SphericalHarmonics(g, lmax=3.5)
    with pytest.raises(TypeError, match="GaussGrid"):
        SphericalHarmonics(16)
    if HAVE_SHTNS:  # must raise, not let shtns exit() the interpreter
        with pytest.raises(ValueError, match="nlat"):
            SphericalHarmonics(g, backend="shtns")
    with pytest.raises(ValueError, match=r"0 <= m <= l <= lmax"):
        SphericalHarmonics(g).index(3, 4)


def test_fallback_warns_once(monkeypatch):
    monkeypatch.setattr(sht_backends, "_shtns_mod", False)  # pretend shtns is not importable
    monkeypatch.setattr(sht_mod, "_warned_no_shtns", False)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        a = SphericalHarmonics(GaussGrid(32))
        b = SphericalHarmonics(GaussGrid(34))
        c = SphericalHarmonics(GaussGrid(8))  # small grids fall back silently anyway
    assert a.backend == b.backend == c.backend == "pyshtools"
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 1 and "shtns" in msgs[0] and "pyshtools" in msgs[0]
    with pytest.raises(ImportError):
        SphericalHarmonics(GaussGrid(32), backend="shtns")


def test_small_grid_falls_back_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make(16, "auto").backend == "pyshtools"


# ---- scalar transforms ----------------------------------------------------------------------
@pytest.mark.parametrize("nlat,backend", CASES)
def test_round_trip(nlat, backend):
    rng = np.random.default_rng(nlat)
    for lmax in (None, nlat // 2 + 1):
        sh = make(nlat, backend, lmax)
        q = random_coeffs(sh, rng)
        f = sh.synthesise(q)
        assert f.shape == (nlat, 2 * nlat) and f.dtype == np.float64
        q2 = sh.analyse(f)
        assert q2.shape == (sh.nlm,) and q2.dtype == np.complex128
        assert_close(q2, q, scale=np.abs(q).max())
        assert np.all(q2.imag[sh.m == 0] == 0.0)


@needs_shtns
@pytest.mark.parametrize("nlat,lmax", [(32, None), (64, None), (64, 40)])
def test_backends_agree(nlat, lmax):
    rng = np.random.default_rng(1000 + nlat)
    a, b = make(nlat, "shtns", lmax), make(nlat, "pyshtools", lmax)
    # analysis of an arbitrary (not band-limited) field
    f = rng.standard_normal((nlat, 2 * nlat))
    qa, qb = a.analyse(f), b.analyse(f)
    assert_close(qb, qa, scale=np.abs(qa).max())
    # synthesis of the same coefficients
    q = random_coeffs(a, rng)
    fa, fb = a.synthesise(q), b.synthesise(q)
    assert_close(fb, fa)
    # vectors
    S, T = random_coeffs(a, rng, decay=1), random_coeffs(a, rng, decay=1)
    ua, va = a.synthesise_vector(S, T)
    ub, vb = b.synthesise_vector(S, T)
    scale = max(np.abs(ua).max(), np.abs(va).max())
    assert_close(ub, ua, scale=scale)
    assert_close(vb, va, scale=scale)
    u, v = rng.standard_normal((2, nlat, 2 * nlat))
    (Sa, Ta), (Sb, Tb) = a.analyse_vector(u, v), b.analyse_vector(u, v)
    scale = max(np.abs(Sa).max(), np.abs(Ta).max())
    assert_close(Sb, Sa, scale=scale)
    assert_close(Tb, Ta, scale=scale)


@pytest.mark.parametrize("nlat,backend", CASES)
def test_normalisation_and_closed_forms(nlat, backend):
    sh = make(nlat, backend)
    g = sh.grid
    q = sh.analyse(np.ones(g.shape))
    expect = np.zeros(sh.nlm, complex)
    expect[0] = math.sqrt(4 * math.pi)
    assert_close(q, expect, scale=1.0)
    e = np.zeros(sh.nlm, complex)
    e[0] = 1.0
    assert_close(sh.synthesise(e), np.full(g.shape, 1 / math.sqrt(4 * math.pi)), scale=1.0)
    # x, y, z: Y_10 = sqrt(3/4π) μ, Y_11 = +sqrt(3/8π) cos φ e^{iλ} (no Condon–Shortley phase)
    xyz = np.moveaxis(g.xyz, -1, 0)
    for fld, expect in zip(xyz, xyz_coeffs(sh)):
        assert_close(sh.analyse(fld), expect, scale=1.0)
        assert_close(sh.synthesise(expect), fld, scale=1.0)
    # orthonormality: ∫ |Y_lm|² = 1, with the factor 2 of the real-field convention for m > 0
    rng = np.random.default_rng(3)
    for k in rng.choice(sh.nlm, 5, replace=False):
        e = np.zeros(sh.nlm, complex)
        e[k] = 1.0
        f = sh.synthesise(e)
        expect = 1.0 if sh.m[k] == 0 else 2.0
        assert abs(g.integrate(f * f) - expect) < 1e-12


# ---- derivatives ------------------------------------------------------------------------------
@pytest.mark.parametrize("nlat,backend", CASES)
def test_gradient_known_fields(nlat, backend):
    sh = make(nlat, backend)
    lat, lon = sh.grid.lat2d, sh.grid.lon2d
    z, x = xyz_coeffs(sh)[::-2]
    u, v = sh.gradient(z)  # ∇z = cos φ n
    assert_close(u, np.zeros_like(u), scale=1.0)
    assert_close(v, np.cos(lat), scale=1.0)
    u, v = sh.gradient(x)  # ∇x = −sin λ e − sin φ cos λ n
    assert_close(u, -np.sin(lon), scale=1.0)
    assert_close(v, -np.sin(lat) * np.cos(lon), scale=1.0)


@pytest.mark.parametrize(
    "nlat,backend,lmax",
    [(16, "pyshtools", None), (32, "pyshtools", 12), pytest.param(32, "shtns", 12, marks=needs_shtns)],
)
def test_gradient_against_scipy(nlat, backend, lmax):
    sh = make(nlat, backend, lmax)
    rng = np.random.default_rng(7)
    q = random_coeffs(sh, rng)
    theta, lon = 0.5 * np.pi - sh.grid.lat2d, sh.grid.lon2d
    east = np.zeros(sh.shape)
    north = np.zeros(sh.shape)
    for k in range(sh.nlm):
        l, m = int(sh.l[k]), int(sh.m[k])
        y, dy = sph_harm_y(l, m, theta, lon, diff_n=1)
        w = (1.0 if m == 0 else 2.0) * (-1) ** m * q[k]
        east += (w * 1j * m * y).real / np.sin(theta)
        north -= (w * dy[..., 0]).real
    u, v = sh.gradient(q)
    scale = max(np.abs(east).max(), np.abs(north).max())
    assert_close(u, east, scale=scale, rtol=1e-11)
    assert_close(v, north, scale=scale, rtol=1e-11)


@pytest.mark.parametrize("nlat,backend", CASES)
def test_vector_round_trip_and_convention(nlat, backend):
    sh = make(nlat, backend)
    rng = np.random.default_rng(11 + nlat)
    S, T = random_coeffs(sh, rng), random_coeffs(sh, rng)
    S[0] = T[0] = 0.0
    u, v = sh.synthesise_vector(S, T)
    v_copy = v.copy()
    S2, T2 = sh.analyse_vector(u, v)
    np.testing.assert_array_equal(v, v_copy)  # inputs untouched
    scale = max(np.abs(S).max(), np.abs(T).max())
    assert_close(S2, S, scale=scale)
    assert_close(T2, T, scale=scale)
    # spheroidal part is the gradient of S
    ug, vg = sh.gradient(S)
    u_s, v_s = sh.synthesise_vector(S, np.zeros_like(T))
    assert_close(u_s, ug)
    assert_close(v_s, vg)
    # toroidal sign: T = sin φ gives u = ∂T/∂φ = cos φ (eastward solid-body rotation), v = 0
    lat, lon = sh.grid.lat2d, sh.grid.lon2d
    Tx, _, Tz = xyz_coeffs(sh)
    u, v = sh.synthesise_vector(np.zeros_like(Tz), Tz)
    assert_close(u, np.cos(lat), scale=1.0)
    assert_close(v, np.zeros_like(v), scale=1.0)
    # T = x = cos φ cos λ: u = ∂T/∂φ = −sin φ cos λ, v = −(1/cos φ) ∂T/∂λ = sin λ
    u, v = sh.synthesise_vector(np.zeros_like(Tx), Tx)
    assert_close(u, -np.sin(lat) * np.cos(lon), scale=1.0)
    assert_close(v, np.sin(lon), scale=1.0)
    # vorticity of solid-body rotation cos φ e is 2 sin φ; divergence of ∇x is ∇²x = −2x
    assert_close(sh.vorticity(np.cos(lat), np.zeros(sh.shape)), 2 * Tz, scale=10.0)
    assert_close(sh.divergence(np.cos(lat), np.zeros(sh.shape)), 0 * Tz, scale=10.0)
    gx = sh.gradient(Tx)
    assert_close(sh.divergence(*gx), -2 * Tx, scale=10.0)
    assert_close(sh.vorticity(*gx), 0 * Tx, scale=10.0)


@pytest.mark.parametrize("nlat,backend", CASES)
def test_laplacian(nlat, backend):
    sh = make(nlat, backend)
    rng = np.random.default_rng(5)
    for k in rng.choice(sh.nlm, 4, replace=False):
        e = np.zeros(sh.nlm, complex)
        e[k] = 1.0 - 0.5j * (sh.m[k] > 0)
        l = sh.l[k]
        assert_close(sh.synthesise(sh.laplacian(e)), -l * (l + 1) * sh.synthesise(e))
    q = random_coeffs(sh, rng)
    lap = sh.laplacian(q)
    assert_close(sh.divergence(*sh.gradient(q)), lap, scale=np.abs(lap).max())
    q0 = q.copy()
    q0[0] = 0.0
    assert_close(sh.inverse_laplacian(lap), q0, scale=np.abs(q).max())
    for c in xyz_coeffs(sh):
        assert_close(sh.laplacian(c), -2 * c, scale=10.0)


# ---- point evaluation -------------------------------------------------------------------------
@pytest.mark.parametrize("nlat,backend", CASES)
def test_evaluate_at_grid_points(nlat, backend):
    sh = make(nlat, backend)
    q = random_coeffs(sh, np.random.default_rng(21))
    f = sh.synthesise(q)
    assert_close(sh.evaluate(q, sh.grid.lon2d, sh.grid.lat2d), f)
    # a shifted copy of the grid: rows are (lat, lon + 2π k) etc.
    assert_close(sh.evaluate(q, sh.grid.lon2d + 2 * np.pi, sh.grid.lat2d), f)


@pytest.mark.parametrize("nlat,lmax", [(16, None), (32, 12)])
def test_evaluate_against_scipy(nlat, lmax):
    sh = make(nlat, "auto", lmax)
    rng = np.random.default_rng(31)
    q = random_coeffs(sh, rng)
    lon = rng.uniform(-np.pi, 3 * np.pi, 200)
    lat = np.arcsin(rng.uniform(-1, 1, 200))
    lat[:4] = [np.pi / 2, -np.pi / 2, np.pi / 2 - 1e-9, -np.pi / 2 + 1e-7]
    ref = scipy_field(sh, q, np.mod(lon, 2 * np.pi), lat, sh.lmax)
    val = sh.evaluate(q, lon, lat)
    assert val.shape == (200,)
    assert_close(val, ref)
    # broadcasting, batches and a latitude beyond the pole (read as the reflected point)
    Q = np.stack([q, 2j * q * (sh.m > 0)])
    grid_vals = sh.evaluate(Q, lon[:5, None], lat[None, :7])
    assert grid_vals.shape == (2, 5, 7)
    assert_close(grid_vals[0], scipy_field(sh, q, np.mod(lon[:5, None], 2 * np.pi), lat[None, :7], sh.lmax))
    assert_close(grid_vals[1], sh.evaluate(Q[1], lon[:5, None], lat[None, :7]))
    over = sh.evaluate(q, 0.3, np.pi / 2 + 0.2)
    assert over.shape == ()
    assert_close(over, sh.evaluate(q, 0.3 + np.pi, np.pi / 2 - 0.2))


def test_evaluate_higher_degree_against_synthesis():
    sh = make(64, "auto")
    q = random_coeffs(sh, np.random.default_rng(41))
    g = sh.grid
    rows = [0, 1, 31, 32, 62, 63]
    assert_close(sh.evaluate(q, g.lon2d[rows], g.lat2d[rows]), sh.synthesise(q)[rows])


# ---- pyshtools interoperability -------------------------------------------------------------------
@pytest.mark.parametrize("nlat,backend", CASES)
def test_pyshtools_conversion(nlat, backend):
    from pyshtools.expand import MakeGridPoint

    sh = make(nlat, backend)
    rng = np.random.default_rng(51)
    g = sh.grid
    latd, lond = np.degrees(g.lat2d[:, :5]).ravel(), np.degrees(g.lon2d[:, :5]).ravel()
    for normalization, norm, cs in [("4pi", 1, 1), ("ortho", 4, 1), ("4pi", 1, -1), ("ortho", 4, -1)]:
        cilm = rng.standard_normal((2, sh.lmax + 1, sh.lmax + 1))
        cilm[:, np.triu_indices(sh.lmax + 1, 1)[0], np.triu_indices(sh.lmax + 1, 1)[1]] = 0.0
        cilm[1, :, 0] = 0.0
        q = sh.from_pyshtools(cilm, normalization=normalization, csphase=cs)
        ref = MakeGridPoint(cilm, latd, lond, norm=norm, csphase=cs)
        assert_close(sh.synthesise(q)[:, :5].ravel(), ref)
        np.testing.assert_allclose(
            sh.to_pyshtools(q, normalization=normalization, csphase=cs), cilm, atol=1e-14
        )
    q = random_coeffs(sh, rng, 3)
    c = sh.to_pyshtools(q)
    assert c.shape == (3, 2, sh.lmax + 1, sh.lmax + 1)
    assert_close(sh.from_pyshtools(c), q, scale=np.abs(q).max())
    # other degrees: truncated or zero-padded
    big = np.zeros((2, sh.lmax + 4, sh.lmax + 4))
    big[..., : sh.lmax + 1, : sh.lmax + 1] = c[0]
    big[0, sh.lmax + 2, 1] = 5.0
    assert_close(sh.from_pyshtools(big), q[0], scale=np.abs(q).max())
    small = sh.from_pyshtools(c[0, :, :3, :3])
    assert np.all(small[sh.l >= 3] == 0) and np.allclose(small[sh.l < 3], q[0][sh.l < 3])
    with pytest.raises(ValueError, match="normalization"):
        sh.to_pyshtools(q, normalization="schmidt")
    with pytest.raises(ValueError, match="cilm"):
        sh.from_pyshtools(np.zeros((3, 4, 4)))


# ---- batches and input handling -------------------------------------------------------------------
@pytest.mark.parametrize("nlat,backend", [(16, "pyshtools"), pytest.param(32, "shtns", marks=needs_shtns)])
def test_batches(nlat, backend):
    sh = make(nlat, backend)
    rng = np.random.default_rng(61)
    q = random_coeffs(sh, rng, 2, 3)
    f = sh.synthesise(q)
    assert f.shape == (2, 3) + sh.shape
    assert_close(f[1, 2], sh.synthesise(q[1, 2]))
    assert_close(sh.analyse(f), q, scale=np.abs(q).max())
    u, v = sh.synthesise_vector(q, 0.5 * q)
    assert u.shape == v.shape == (2, 3) + sh.shape
    u1, v1 = sh.synthesise_vector(q[0, 1], 0.5 * q[0, 1])
    assert_close(u[0, 1], u1)
    assert_close(v[0, 1], v1)
    S, T = sh.analyse_vector(u, v)
    assert S.shape == T.shape == (2, 3, sh.nlm)
    assert_close(S[0, 1], sh.analyse_vector(u1, v1)[0])
    gu, gv = sh.gradient(q)
    assert_close(gu[1, 0], sh.gradient(q[1, 0])[0])
    assert sh.laplacian(q).shape == (2, 3, sh.nlm)


@pytest.mark.parametrize("nlat,backend", [(16, "pyshtools"), pytest.param(32, "shtns", marks=needs_shtns)])
def test_accepts_other_dtypes_and_layouts(nlat, backend):
    sh = make(nlat, backend)
    rng = np.random.default_rng(71)
    f = rng.standard_normal(sh.shape)
    ref = sh.analyse(f)
    assert_close(sh.analyse(np.asfortranarray(f)), ref)
    assert_close(sh.analyse(f.tolist()), ref)
    wide = np.zeros((nlat, 4 * nlat))
    wide[:, ::2] = f
    assert_close(sh.analyse(wide[:, ::2]), ref)
    assert_close(sh.analyse(f.astype(np.float32)), sh.analyse(f.astype(np.float32).astype(float)))
    q = random_coeffs(sh, rng)
    qq = np.zeros(2 * sh.nlm, complex)
    qq[::2] = q
    assert_close(sh.synthesise(qq[::2]), sh.synthesise(q))


@pytest.mark.parametrize("nlat,backend", [(16, "pyshtools"), pytest.param(32, "shtns", marks=needs_shtns)])
def test_bad_inputs(nlat, backend):
    sh = make(nlat, backend)
    nlon = 2 * nlat
    good = np.zeros((nlat, nlon))
    for bad in (np.zeros((nlon, nlat)), np.zeros(nlat * nlon), np.zeros((nlat, nlon + 1))):
        with pytest.raises(ValueError, match=rf"field.*\(\.\.\., {nlat}, {nlon}\)"):
            sh.analyse(bad)
        with pytest.raises(ValueError, match="u_east"):
            sh.analyse_vector(bad, good)
        with pytest.raises(ValueError, match="v_north"):
            sh.analyse_vector(good, bad)
    with pytest.raises(ValueError, match="same shape"):
        sh.analyse_vector(np.zeros((2, nlat, nlon)), good)
    with pytest.raises(ValueError, match="real"):
        sh.analyse(good + 0j)
    for bad in (np.zeros(sh.nlm + 1, complex), np.zeros((sh.nlm, 2), complex), np.zeros(()),):
        with pytest.raises(ValueError, match=rf"coeffs.*\(\.\.\., {sh.nlm}\)"):
            sh.synthesise(bad)
        with pytest.raises(ValueError, match="coeffs"):
            sh.gradient(bad)
        with pytest.raises(ValueError, match="coeffs"):
            sh.laplacian(bad)
        with pytest.raises(ValueError, match="coeffs"):
            sh.evaluate(bad, 0.0, 0.0)
    with pytest.raises(ValueError, match="T"):
        sh.synthesise_vector(np.zeros(sh.nlm), np.zeros(sh.nlm - 1))
    # non-finite values anywhere, including the polar rows
    rng = np.random.default_rng(81)
    for j, i, val in [(0, 0, np.nan), (nlat - 1, nlon - 1, np.inf), (nlat // 2, 3, -np.inf), (1, 7, np.nan)]:
        f = rng.standard_normal((nlat, nlon))
        f[j, i] = val
        with pytest.raises(ValueError, match=rf"field contains NaN or inf \(first at index \({j}, {i}\)\)"):
            sh.analyse(f)
        with pytest.raises(ValueError, match="NaN or inf"):
            sh.analyse(np.stack([good, f]))
        with pytest.raises(ValueError, match="u_east contains NaN or inf"):
            sh.analyse_vector(f, good)
        with pytest.raises(ValueError, match="v_north contains NaN or inf"):
            sh.analyse_vector(good, f)
        with pytest.raises(ValueError, match="NaN or inf"):
            sh.divergence(good, f)
    q = np.zeros(sh.nlm, complex)
    for k, val in [(0, np.nan), (sh.nlm - 1, np.inf), (5, complex(0, np.nan))]:
        qb = q.copy()
        qb[k] = val
        for call in (sh.synthesise, sh.gradient, lambda c: sh.synthesise_vector(c, q),
                     lambda c: sh.synthesise_vector(q, c), lambda c: sh.evaluate(c, 0.1, 0.2)):
            with pytest.raises(ValueError, match="NaN or inf"):
                call(qb)
    with pytest.raises(ValueError, match="finite"):
        sh.evaluate(q, np.nan, 0.0)
    with pytest.raises(ValueError, match="broadcast"):
        sh.evaluate(q, np.zeros(3), np.zeros(4))
    # huge but finite values are not mistaken for non-finite ones
    huge = np.full((nlat, nlon), 1e308)
    sh.analyse(huge)
