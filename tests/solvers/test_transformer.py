"""The discrete transformer of Paper 2 (spherepde.solvers.lagrangian.transformer)."""
from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from spherepde.dynamics.attention import Attention
from spherepde.solvers.lagrangian import ParticleODE
from spherepde.solvers.lagrangian.transformer import (
    DiscreteTransformer,
    MLPLayer,
    TransformerResult,
)
from spherepde.solvers.lagrangian.tokens import cosine_similarity, token_interaction_energy
from spherepde.validation.metrics import interaction_energy
from spherepde.validation.fits import fit_order
from conftest import unit_points


def generic_attention(d: int, beta: float = 2.0, seed: int = 3) -> Attention:
    rng = np.random.default_rng(seed)
    q = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    k = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    v = np.eye(d) + 0.5 * rng.normal(size=(d, d))
    return Attention(q, k, v, beta)


def relu_kappa(t, d: int, sigma_u: float, sigma_w: float):
    """Arc-cosine kernel κ(t) of the ReLU MLP field (docs/equations.md, Paper 2)."""
    s2 = 1.0 / d + sigma_u**2
    theta = np.arccos(np.clip((np.asarray(t) / d + sigma_u**2) / s2, -1.0, 1.0))
    return s2 / (2 * np.pi) * (np.sin(theta) + (np.pi - theta) * np.cos(theta)) + sigma_w**2


# ---- shapes, sphere, recording ----------------------------------------------------------------
def test_shapes_norms_and_recording():
    d, N, L = 5, 6, 7
    tr = DiscreteTransformer(d=d, depth=L, T=1.4, width=16, sigma_u=0.1, sigma_w=0.1,
                             attention=generic_attention(d), attention_scale=-1.0)
    x0 = unit_points(N, d, 0)
    res = tr.run(x0, seed=1, realisations=3)
    assert isinstance(res, TransformerResult)
    assert res.x.shape == (3, L + 1, N, d)
    np.testing.assert_array_equal(res.layers, np.arange(L + 1))
    np.testing.assert_allclose(res.times, np.arange(L + 1) * 0.2, rtol=0, atol=1e-15)
    # LN keeps every token on the sphere to round-off (a few ulps)
    assert np.max(np.abs(np.linalg.norm(res.x, axis=-1) - 1.0)) < 1e-14
    # layer 0 is x0 renormalised (a change of round-off size)
    np.testing.assert_allclose(res.x[:, 0], np.broadcast_to(x0, (3, N, d)), rtol=0, atol=1e-15)
    assert not np.allclose(res.x[:, -1], res.x[:, 0])  # the tokens did move
    stride = tr.run(x0, seed=1, realisations=3, record=3)
    np.testing.assert_array_equal(stride.layers, [0, 3, 6, 7])
    np.testing.assert_array_equal(stride.x, res.x[:, [0, 3, 6, 7]])
    final = tr.run(x0, seed=1, realisations=3, record="final")
    np.testing.assert_array_equal(final.layers, [L])
    np.testing.assert_array_equal(final.x[:, 0], res.x[:, -1])
    cfg = res.to_dict()
    for key in ("d", "depth", "T", "dt", "width", "activation", "sigma_u", "sigma_w",
                "attention", "attention_scale", "realisations", "n_tokens", "seed_entropy"):
        assert key in cfg
    assert cfg["seed_entropy"] == 1 and cfg["attention_scale"] == -1.0
    # per-realisation initial tokens (R, N, d)
    x03 = np.stack([unit_points(N, d, s) for s in range(3)])
    assert tr.run(x03, seed=1).x.shape == (3, L + 1, N, d)


def test_step_matches_run():
    d, N = 4, 5
    tr = DiscreteTransformer(d=d, depth=3, T=0.6, width=8, activation="tanh",
                             attention=generic_attention(d))
    x0 = unit_points(N, d, 2)
    layers = tr.draw_layers(np.random.default_rng(9))
    x = x0
    for lay in layers:
        x = tr.step(x, lay)
    np.testing.assert_allclose(x, tr.run(x0, layers=layers).x[0, -1], rtol=0, atol=1e-14)
    y = unit_points(3, d, 4)
    np.testing.assert_allclose(tr.noise_increment(layers[0], y), math.sqrt(0.2) * layers[0](y),
                               rtol=0, atol=0)


# ---- reproducibility -------------------------------------------------------------------------
def test_reproducible_and_independent_of_number_of_realisations():
    d, N = 4, 6
    tr = DiscreteTransformer(d=d, depth=5, T=1.0, width=12, sigma_u=0.2, sigma_w=0.1,
                             attention=generic_attention(d))
    x0 = unit_points(N, d, 1)
    a = tr.run(x0, seed=7, realisations=2)
    np.testing.assert_array_equal(a.x, tr.run(x0, seed=7, realisations=2).x)
    b = tr.run(x0, seed=7, realisations=4)
    np.testing.assert_array_equal(a.x, b.x[:2])
    assert not np.allclose(b.x[0, -1], b.x[1, -1])  # realisations differ
    assert not np.allclose(tr.run(x0, seed=8).x, a.x[:1])
    # a SeedSequence gives the same as its int entropy, even after earlier spawns from it
    ss = np.random.SeedSequence(7)
    ss.spawn(3)
    np.testing.assert_array_equal(tr.run(x0, seed=ss, realisations=2).x, a.x)
    # seed=None: the recorded entropy reproduces the run
    c = tr.run(x0)
    again = tr.run(x0, seed=np.random.SeedSequence(c.config["seed_entropy"]))
    np.testing.assert_array_equal(c.x, again.x)
    # the layers realisation r uses are draw_layers(realisation_rngs(seed, R)[r]) (coupling)
    layers = tr.draw_layers(tr.realisation_rngs(7, 4)[3])
    np.testing.assert_array_equal(tr.run(x0, layers=layers).x[0], b.x[3])
    nested = [tr.draw_layers(g) for g in tr.realisation_rngs(7, 2)]
    np.testing.assert_array_equal(tr.run(x0, layers=nested, realisations=2).x, a.x)


def test_biases_scale_the_same_draws():
    """σ_U, σ_W only scale standard normals drawn in any case: runs at different σ are coupled."""
    d = 3
    l0 = DiscreteTransformer(d=d, depth=1, T=1.0, width=5).draw_layer(np.random.default_rng(4))
    l1 = DiscreteTransformer(d=d, depth=1, T=1.0, width=5, sigma_u=0.5,
                             sigma_w=2.0).draw_layer(np.random.default_rng(4))
    np.testing.assert_array_equal(l0.U, l1.U)
    np.testing.assert_array_equal(l0.W, l1.W)
    assert np.all(l0.b_U == 0) and np.all(l0.b_W == 0)
    rng = np.random.default_rng(4)
    rng.standard_normal((5, d))
    np.testing.assert_array_equal(l1.b_U, 0.5 * rng.standard_normal(5))
    rng.standard_normal((d, 5))
    np.testing.assert_array_equal(l1.b_W, 2.0 * rng.standard_normal(d))


# ---- limits ----------------------------------------------------------------------------------
def test_nothing_moves_without_attention_and_mlp():
    d, N = 5, 7
    x0 = unit_points(N, d, 3)
    for tr in (DiscreteTransformer(d=d, depth=10, T=3.0),
               DiscreteTransformer(d=d, depth=10, T=3.0, attention=generic_attention(d),
                                   attention_scale=0.0)):
        res = tr.run(x0, seed=0, realisations=2)
        # LN(x) = x/|x| of unit vectors: round-off only
        np.testing.assert_allclose(res.x, np.broadcast_to(x0, res.x.shape), rtol=0, atol=1e-15)


@pytest.mark.parametrize("scale", [1.0, -1.0])
def test_attention_only_converges_to_the_ode_at_first_order(scale):
    """No MLP: the transformer is explicit Euler + retraction for ẋ = s_att P_x V m_β(x).

    Reference: ParticleODE (RK4, dt = 2e-3; differs from dt = 1e-3 by ~1e-12, far below the
    errors 1e-2..1.5e-1 measured here).  Measured orders (max token error at T = 2 for
    L = 16..128): 1.019 (s_att = +1) and 1.028 (s_att = −1), the local slopes decreasing to 1
    (the O(Δt²) term fading); 1.03 and 1.06 for other initial tokens.  The window [0.8, 1.2] excludes
    orders 0 and 2 by a wide margin and leaves room for
    that pre-asymptotic term.
    """
    d, N, T = 4, 12, 2.0
    att = generic_attention(d, beta=2.0)
    x0 = unit_points(N, d, 11)
    ode_att = Attention(att.Q, att.K, scale * att.V, att.beta)
    ref = ParticleODE(ode_att).run(x0, (0.0, T), dt=2e-3).positions[-1]
    Ls = [16, 32, 64, 128]
    errs = []
    for L in Ls:
        tr = DiscreteTransformer(d=d, depth=L, T=T, attention=att, attention_scale=scale)
        errs.append(float(np.max(np.abs(tr.run(x0, record="final").x[0, -1] - ref))))
    order, _ = fit_order([T / L for L in Ls], errs)
    assert 0.8 <= order <= 1.2, (order, errs)


# ---- the MLP noise field ---------------------------------------------------------------------
@pytest.mark.parametrize("m, sigma_u, sigma_w", [(3, 0.0, 0.0), (64, 0.3, 0.2)])
def test_mlp_field_covariance_is_the_relu_kernel(m, sigma_u, sigma_w):
    """E[G(x)_α G(y)_β] = κ(⟨x,y⟩) δ_αβ, exactly for every width m (W, b_W are centred and
    independent of the hidden layer).  Monte Carlo over n iid layers; the per-layer statistics
    (1/d)Σ_α G(x)_α G(y)_α and the mean off-diagonal product are iid over layers, and each of
    the 8 checks must hold within 5 standard errors estimated from the samples."""
    d, n = 4, 20000
    tr = DiscreteTransformer(d=d, depth=1, T=1.0, width=m, sigma_u=sigma_u, sigma_w=sigma_w)
    x = np.eye(d)[0]
    ts = np.array([1.0, 0.6, 0.0, -0.8])
    ys = np.stack([t * x + math.sqrt(1 - t * t) * np.eye(d)[1] for t in ts])
    rng = np.random.default_rng(2024)
    diag = np.empty((n, len(ts)))
    off = np.empty((n, len(ts)))
    offmask = ~np.eye(d, dtype=bool)
    for i in range(n):
        lay = tr.draw_layer(rng)
        gx, gy = lay(x), lay(ys)  # (d,), (4, d)
        diag[i] = gy @ gx / d
        prod = gy[:, None, :] * gx[:, None]  # [k, α, β] = G(y_k)_β G(x)_α
        off[i] = prod[:, offmask].mean(axis=1)

    def se(samples):
        return samples.std(axis=0, ddof=1) / math.sqrt(n)

    kappa = relu_kappa(ts, d, sigma_u, sigma_w)
    assert np.all(np.abs(diag.mean(axis=0) - kappa) <= 5 * se(diag)), (diag.mean(0), kappa, se(diag))
    assert np.all(np.abs(off.mean(axis=0)) <= 5 * se(off))


def test_one_noise_layer_has_the_ito_radial_drift():
    """Noise only, one layer of size Δt: E[X_1 − X_0] = −Δt κ(1)(d−1)/2 X_0 + O(Δt²).

    The tangential mean is exactly 0 (G is invariant in law under reflections of R^d fixing
    X_0), and the radial one has relative bias c·Δt: measured c ≈ 0.2 from Δt = 0.2, 0.1, 0.05
    (relative deviations −3.9%, −2.0%, −1.1% with 2·10⁴ realisations, SE 0.36%).  At Δt = 0.01
    the bias is ≈ 0.2%; the tolerance is 5 SE + 0.3·Δt·|drift| (c with a 50% margin).
    Statistics: per realisation, the token mean of ⟨X_1, X_0⟩ − 1 (tokens share one field, so
    only realisations are independent)."""
    d, N, m, su, sw, dt, R = 4, 8, 32, 0.3, 0.2, 0.01, 40000
    kappa1 = (1.0 / d + su**2) / 2 + sw**2
    assert kappa1 == pytest.approx(float(relu_kappa(1.0, d, su, sw)), rel=1e-12)
    drift = -kappa1 * (d - 1) / 2
    x0 = unit_points(N, d, 1)
    tr = DiscreteTransformer(d=d, depth=1, T=dt, width=m, sigma_u=su, sigma_w=sw)
    x1 = tr.run(x0, seed=5, realisations=R, record="final").x[:, -1]
    radial = np.einsum("rnd,nd->rn", x1, x0) - 1.0  # ⟨X_1 − X_0, X_0⟩
    s = radial.mean(axis=1) / dt
    se = s.std(ddof=1) / math.sqrt(R)
    assert abs(s.mean() - drift) <= 5 * se + 0.3 * dt * abs(drift), (s.mean(), drift, se)
    tangential = (x1 - (1.0 + radial[..., None]) * x0).mean(axis=1) / dt  # (R, d)
    tse = tangential.std(axis=0, ddof=1) / math.sqrt(R)
    assert np.all(np.abs(tangential.mean(axis=0)) <= 5 * tse)


def test_memory_does_not_grow_with_depth():
    """Layers are drawn one at a time: the traced peak is the same for L = 2 and L = 8."""
    d, N, m, R = 16, 8, 256, 4
    x0 = unit_points(N, d, 0)
    peaks = []
    for L in (2, 8):
        tr = DiscreteTransformer(d=d, depth=L, T=0.1 * L, width=m, sigma_u=0.1)
        tracemalloc.start()
        tr.run(x0, seed=1, realisations=R, record="final")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    one_layer = 8 * 2 * R * m * d  # U and W of all realisations
    assert peaks[1] < peaks[0] + 0.25 * one_layer, peaks


# ---- observables -----------------------------------------------------------------------------
def test_cosine_similarity_and_energy():
    d, N, beta = 5, 9, 3.0
    x = np.stack([unit_points(N, d, s) for s in range(3)])  # (3, N, d)
    c = cosine_similarity(x)
    assert c.shape == (3, N, N)
    np.testing.assert_allclose(np.diagonal(c, axis1=1, axis2=2), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(c, np.swapaxes(c, 1, 2), rtol=0, atol=0)
    e = token_interaction_energy(x, beta)
    assert e.shape == (3,)
    for k in range(3):
        assert e[k] == pytest.approx(interaction_energy(x[k], np.full(N, 1.0 / N), beta), rel=1e-13)
        direct = 0.5 * np.mean(np.exp(beta) - np.exp(beta * (x[k] @ x[k].T)))
        assert token_interaction_energy(x[k], beta, form="raw") == pytest.approx(direct, rel=1e-12)
    np.testing.assert_allclose(token_interaction_energy(x, beta, form="log"), beta + np.log(e),
                               rtol=1e-15)
    cluster = np.broadcast_to(x[0, 0], (N, d))
    assert token_interaction_energy(cluster, beta) == 0.0
    assert token_interaction_energy(cluster, beta, form="log") == -np.inf
    # large β: the scaled form stays finite and accurate where e^β overflows
    assert np.isfinite(token_interaction_energy(x, 1e4)).all()
    assert np.isinf(token_interaction_energy(x[0], 1e4, form="raw"))


# ---- bad input -------------------------------------------------------------------------------
GOOD = dict(d=3, depth=2, T=1.0, width=4)


@pytest.mark.parametrize("kw, exc, name", [
    (dict(d=1), ValueError, "d"),
    (dict(d=2.5), TypeError, "d"),
    (dict(depth=0), ValueError, "depth"),
    (dict(depth=True), TypeError, "depth"),
    (dict(T=0.0), ValueError, "T"),
    (dict(T=-1.0), ValueError, "T"),
    (dict(T=math.nan), ValueError, "T"),
    (dict(T="1"), TypeError, "T"),
    (dict(width=0), ValueError, "width"),
    (dict(sigma_u=-0.1), ValueError, "sigma_u"),
    (dict(sigma_w=-1e-3), ValueError, "sigma_w"),
    (dict(sigma_w=math.nan), ValueError, "sigma_w"),
    (dict(activation="bogus"), ValueError, "activation"),
    (dict(activation=3), TypeError, "activation"),
    (dict(attention=np.eye(3)), TypeError, "attention"),
    (dict(attention=Attention(np.eye(4), np.eye(4), np.eye(4), 1.0)), ValueError, "attention.d"),
    (dict(attention_scale=math.inf), ValueError, "attention_scale"),
])
def test_bad_constructor_arguments(kw, exc, name):
    with pytest.raises(exc, match=name):
        DiscreteTransformer(**{**GOOD, **kw})


def test_bad_run_arguments():
    tr = DiscreteTransformer(**GOOD)
    x0 = unit_points(4, 3, 0)
    cases = [
        (dict(x0=2 * x0), ValueError, "unit sphere"),
        (dict(x0=unit_points(4, 4, 0)), ValueError, "x0"),
        (dict(x0=x0[0]), ValueError, "x0"),
        (dict(x0=np.where(np.arange(3) == 0, np.nan, x0)), ValueError, "x0"),
        (dict(x0=np.stack([x0, x0]), realisations=3), ValueError, "realisations"),
        (dict(x0=x0, realisations=0), ValueError, "realisations"),
        (dict(x0=x0, seed=-1), ValueError, "seed"),
        (dict(x0=x0, seed=1.5), TypeError, "seed"),
        (dict(x0=x0, record="some"), ValueError, "record"),
        (dict(x0=x0, record=0), ValueError, "record"),
        (dict(x0=x0, seed=1, layers=tr.draw_layers(np.random.default_rng(0))), ValueError, "layers"),
        (dict(x0=x0, layers=tr.draw_layers(np.random.default_rng(0))[:1]), ValueError, "layers"),
        (dict(x0=x0, layers=DiscreteTransformer(**{**GOOD, "width": 5}).draw_layers(
            np.random.default_rng(0))), ValueError, "layers"),
    ]
    for kw, exc, name in cases:
        with pytest.raises(exc, match=name):
            tr.run(**kw)
    with pytest.raises(ValueError, match="layers"):
        DiscreteTransformer(d=3, depth=2, T=1.0).run(x0, layers=tr.draw_layers(np.random.default_rng(0)))
    with pytest.raises(ValueError, match="width=None"):
        DiscreteTransformer(d=3, depth=2, T=1.0).draw_layer(np.random.default_rng(0))


def test_bad_layer_and_observable_arguments():
    with pytest.raises(ValueError, match="b_U"):
        MLPLayer(np.zeros((4, 3)), np.zeros(3), np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(ValueError, match="W"):
        MLPLayer(np.zeros((4, 3)), np.zeros(4), np.zeros((4, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="U"):
        MLPLayer(np.full((4, 3), np.nan), np.zeros(4), np.zeros((3, 4)), np.zeros(3))
    lay = MLPLayer(np.zeros((4, 3)), np.zeros(4), np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(ValueError, match="y"):
        lay(np.zeros((2, 4)))
    x = unit_points(4, 3, 0)
    with pytest.raises(ValueError, match="beta"):
        token_interaction_energy(x, 0.0)
    with pytest.raises(ValueError, match="form"):
        token_interaction_energy(x, 1.0, form="exp")
    with pytest.raises(ValueError, match="x"):
        cosine_similarity(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="x"):
        cosine_similarity(np.ones(3))


# ---- the m = ∞ transformer: Gaussian layers driven by a Brownian path --------------------------
def _field(nmax: int = 4, sigma: float = 0.5):
    from spherepde.noise import NoiseField, NoiseKernel

    return NoiseField(NoiseKernel("relu", 3, sigma, sigma), nmax=nmax)


def _gaussian_transformer(depth: int, T: float = 1.0, **kw):
    return DiscreteTransformer(d=3, depth=depth, T=T, width=math.inf, sigma_u=0.5, sigma_w=0.5,
                               attention=Attention(np.eye(3), np.eye(3), np.eye(3), 1.0), **kw)


def test_gaussian_layers_are_the_brownian_field_increments():
    """√Δt G_ℓ(y) = W(t_{ℓ+1}, y) − W(t_ℓ, y): the noise of layer ℓ is the increment of the field
    driven by the path (to round-off), whatever the depth."""
    from spherepde.noise import BrownianPath
    from spherepde.solvers.lagrangian.transformer import GaussianLayer

    field = _field()
    path = BrownianPath(field.shape, seed=3)
    y = unit_points(6, 3, 1)
    for L in (4, 8):
        tr = _gaussian_transformer(L, T=2.0)
        layers = tr.gaussian_layers(field, path)
        assert len(layers) == L and all(isinstance(lay, GaussianLayer) for lay in layers)
        for ell in (0, L - 1):
            t0, t1 = ell * 2.0 / L, (ell + 1) * 2.0 / L
            np.testing.assert_allclose(tr.noise_increment(layers[ell], y),
                                       field.values(path.increment(t0, t1), y), rtol=0, atol=1e-14)
    # the layer is a field on the sphere: y and 2y give the same value; shapes (..., d)
    lay = layers[0]
    np.testing.assert_allclose(lay(2 * y), lay(y), rtol=0, atol=1e-14)
    assert lay(y.reshape(2, 3, 3)).shape == (2, 3, 3) and lay.width == math.inf


def test_gaussian_step_matches_run_and_realisations():
    from spherepde.noise import BrownianPath

    field = _field()
    tr = _gaussian_transformer(5)
    paths = [BrownianPath(field.shape, seed=1, realisation=r) for r in range(2)]
    nested = [tr.gaussian_layers(field, p) for p in paths]
    x0 = unit_points(4, 3, 0)
    res = tr.run(x0, layers=nested, realisations=2)
    assert res.x.shape == (2, 6, 4, 3) and res.config["width"] == math.inf
    x = x0
    for lay in nested[1]:
        x = tr.step(x, lay)
    np.testing.assert_allclose(x, res.x[1, -1], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(tr.run(x0, layers=nested[0]).x[0], res.x[0])
    assert not np.allclose(res.x[0, -1], res.x[1, -1])
    # the stepper driven by the R paths themselves (layers from each path over the step) takes
    # the same layers up to where B is evaluated: the controller's step times may differ from
    # ℓ·Δt in the last bit, and B(t) is interpolated linearly in intervals of 2^-48, which moves
    # B by up to the interpolation error 3e-8 per evaluation (noise.brownian); over
    # 5 layers of 2 evaluations, with √κ(1) < 1, at most 3e-7 (measured 3.1e-9)
    from spherepde.solvers.controller import Controller
    from spherepde.solvers.lagrangian.transformer import TransformerStepper

    stepper = TransformerStepper(tr, 4, realisations=2, noise=field, path=paths)
    out = Controller(stepper, [], dt=tr.dt).run(res.x[:, 0], (0.0, tr.T)).state
    np.testing.assert_allclose(out, res.x[:, -1], rtol=0, atol=3e-7)


def test_bad_gaussian_arguments():
    from spherepde.noise import BrownianPath, NoiseField, NoiseKernel
    from spherepde.solvers.lagrangian.transformer import GaussianLayer

    field = _field()
    tr = _gaussian_transformer(3)
    x0 = unit_points(4, 3, 0)
    with pytest.raises(ValueError, match="gaussian_layers"):
        tr.run(x0)  # the m = ∞ layers are not drawn from a seed
    with pytest.raises(ValueError, match="Gaussian"):
        tr.draw_layer(np.random.default_rng(0))
    with pytest.raises(TypeError, match="GaussianLayer"):
        tr.run(x0, layers=DiscreteTransformer(d=3, depth=3, T=1.0, width=4).draw_layers(
            np.random.default_rng(0)))
    with pytest.raises(ValueError, match="kernel"):  # not the m = ∞ limit of this MLP
        tr.gaussian_layers(NoiseField(NoiseKernel("tanh", 3, 0.5, 0.5), nmax=4),
                           BrownianPath(field.shape, seed=0))
    with pytest.raises(ValueError, match="path.shape"):
        tr.gaussian_layers(field, BrownianPath((3, 3), seed=0))
    with pytest.raises(ValueError, match="width = 4"):
        DiscreteTransformer(d=3, depth=3, T=1.0, width=4).gaussian_layers(field, BrownianPath(field.shape, seed=0))
    with pytest.raises(ValueError, match="xi"):
        GaussianLayer(field, np.zeros((3, 3)))
    with pytest.raises(TypeError, match="field"):
        GaussianLayer(np.eye(3), np.zeros((3, 3)))
    with pytest.raises(TypeError, match="width"):
        DiscreteTransformer(d=3, depth=3, T=1.0, width=math.nan)


# ---- the run loop is the controller's: the same bits as the layer-by-layer loop ---------------
def _reference_run(tr, x0, *, seed=None, realisations=None, layers=None, record="all"):
    """The layer loop ``DiscreteTransformer.run`` had before it ran on the controller, written
    out over the two halves of a layer: realisation r draws U, b_U, W, b_W from
    ``realisation_rngs(seed, R)[r]`` layer after layer, or takes ``layers[r][ℓ]``."""
    x = tr._check_x0(x0, realisations)
    R, N, d = x.shape
    rec = tr._record_layers(record)
    given = None if layers is None else tr._check_layers(layers, R)
    rngs = tr.realisation_rngs(seed, R) if given is None and tr.has_mlp else None
    out = np.empty((R, len(rec), N, d))
    k = 0
    if rec[0] == 0:
        out[:, 0], k = x, 1
    for ell in range(tr.depth):
        y = tr._attention_half(x)
        if tr.is_gaussian:
            x = tr._gaussian_half(y, [given[r][ell] for r in range(R)])
        elif tr.has_mlp:
            m = tr.width
            U, b_U, W, b_W = np.empty((R, m, d)), np.empty((R, m)), np.empty((R, d, m)), np.empty((R, d))
            for r in range(R):
                if given is None:
                    tr._draw_into(rngs[r], U[r], b_U[r], W[r], b_W[r])
                else:
                    lay = given[r][ell]
                    U[r], b_U[r], W[r], b_W[r] = lay.U, lay.b_U, lay.W, lay.b_W
            x = tr._mlp_half(y, U, b_U, W, b_W, tr.activation.f)
        else:
            x = y
        if k < len(rec) and rec[k] == ell + 1:
            out[:, k], k = x, k + 1
    return rec, out


@pytest.mark.parametrize("L, T", [(7, 1.4), (10, 1.0), (3, 0.3), (13, 0.7)])
def test_run_equals_the_layer_loop_bit_for_bit(L, T):
    """Seeded draws per realisation, given layers (shared or nested), Gaussian layers, no MLP,
    no attention, every record mode: run gives exactly the reference loop's tokens, times and
    layers."""
    from spherepde.noise import BrownianPath

    d, N = 4, 5
    x0 = unit_points(N, d, 0)
    x03 = np.stack([unit_points(N, d, s) for s in range(3)])
    mlp = DiscreteTransformer(d=d, depth=L, T=T, width=6, sigma_u=0.2, sigma_w=0.1,
                              attention=generic_attention(d), attention_scale=-1.0)
    field = _field()
    gauss = _gaussian_transformer(L, T=T)
    paths = [BrownianPath(field.shape, seed=1, realisation=r) for r in range(2)]
    cases = [(mlp, dict(x0=x0, seed=11, realisations=3, record=rec))
             for rec in ("all", "final", 1, 3, 100)]
    cases += [
        (mlp, dict(x0=x03, seed=11)),
        (mlp, dict(x0=x0, layers=mlp.draw_layers(np.random.default_rng(2)), realisations=2)),
        (mlp, dict(x0=x0, layers=[mlp.draw_layers(g) for g in mlp.realisation_rngs(5, 2)],
                   realisations=2, record=2)),
        (DiscreteTransformer(d=d, depth=L, T=T, attention=generic_attention(d)), dict(x0=x0, record=2)),
        (DiscreteTransformer(d=d, depth=L, T=T), dict(x0=x0)),
        (DiscreteTransformer(d=d, depth=L, T=T, width=4, activation="tanh"),
         dict(x0=x0, seed=3, realisations=2, record="final")),
        (gauss, dict(x0=unit_points(N, 3, 1), layers=[gauss.gaussian_layers(field, p) for p in paths],
                     realisations=2, record=3)),
    ]
    for tr, kw in cases:
        res = tr.run(**kw)
        rec, ref = _reference_run(tr, **kw)
        np.testing.assert_array_equal(res.layers, rec)
        np.testing.assert_array_equal(res.times, rec * tr.dt)
        assert res.x.shape == ref.shape and res.x.flags.c_contiguous
        np.testing.assert_array_equal(res.x, ref)  # bit for bit


def test_non_finite_tokens_raise_floating_point_error_naming_the_layer():
    """Y + √Δt G(Y) = 0 in layer 2 (G ≡ b_W = −Y/√Δt, exactly): FloatingPointError, as before."""
    tr = DiscreteTransformer(d=3, depth=4, T=1.0, width=1)  # √Δt = 1/2
    zero = MLPLayer(np.zeros((1, 3)), np.zeros(1), np.zeros((3, 1)), np.zeros(3))
    bad = MLPLayer(np.zeros((1, 3)), np.zeros(1), np.zeros((3, 1)), np.array([-2.0, 0.0, 0.0]))
    x0 = np.array([[1.0, 0.0, 0.0]])
    with np.errstate(invalid="ignore"), pytest.raises(FloatingPointError, match="layer 2"):
        tr.run(x0, layers=[zero, zero, bad, zero])


@pytest.mark.parametrize("L, T", [(997, 0.7), (20011, 3.3), (3, 1e-7)])
def test_the_controller_takes_exactly_one_step_per_layer(monkeypatch, L, T):
    """t = ℓ·Δt in floating point: every record mode takes layers 0..L−1 once each, in order."""
    from spherepde.solvers.lagrangian.transformer import TransformerStepper

    seen = []
    original = TransformerStepper.layer_index

    def spy(self, t, dt):
        seen.append(original(self, t, dt))
        return seen[-1]

    monkeypatch.setattr(TransformerStepper, "layer_index", spy)
    tr = DiscreteTransformer(d=2, depth=L, T=T)  # the identity layer: cheap
    x0 = unit_points(2, 2, 0)
    for record in ("all", "final", 7):
        seen.clear()
        res = tr.run(x0, record=record)
        assert seen == list(range(L))
        assert res.layers[-1] == L and res.times[-1] == L * tr.dt


def test_stepper_on_one_realisation_is_the_step_loop_and_refuses_bad_sources():
    from spherepde.noise import BrownianPath
    from spherepde.solvers.controller import Controller
    from spherepde.solvers.lagrangian.transformer import TransformerStepper

    d, N = 4, 5
    tr = DiscreteTransformer(d=d, depth=6, T=0.9, width=8, sigma_u=0.2,
                             attention=generic_attention(d))
    x0 = unit_points(N, d, 3)
    for source in ("rngs", "layers"):
        layers = tr.draw_layers(np.random.default_rng(4))
        kw = {"rngs": [np.random.default_rng(4)]} if source == "rngs" else {"layers": layers}
        stepper = TransformerStepper(tr, N, **kw)
        assert stepper.grid.shape == (N, d)
        got = Controller(stepper, dt=tr.dt).run(x0, (0.0, tr.T)).state
        x = x0
        for lay in layers:
            x = tr.step(x, lay)
        np.testing.assert_array_equal(got, x)
    # the state (R, N, d) of run
    assert TransformerStepper(tr, N, realisations=3, rngs=tr.realisation_rngs(0, 3)).grid.shape == (3, N, d)
    stepper = TransformerStepper(tr, N, rngs=[np.random.default_rng(0)])
    with pytest.raises(ValueError, match="one layer per step"):
        stepper.stable_dt(x0, 0.0)
    with pytest.raises(RuntimeError, match="Δt"):
        stepper.step(x0, 0.0, tr.dt / 2)
    with pytest.raises(RuntimeError, match="layer time"):
        stepper.step(x0, tr.dt / 3, tr.dt)
    field = _field()
    gauss = _gaussian_transformer(4)
    path = BrownianPath(field.shape, seed=0)
    for t, kw, exc, match in [
        (tr, {}, ValueError, "exactly one of rngs | layers"),
        (tr, dict(rngs=[np.random.default_rng(0)], layers=layers), ValueError, "exactly one"),
        (tr, dict(noise=field, path=path), ValueError, "exactly one"),
        (tr, dict(rngs=[np.random.default_rng(0)] * 2), ValueError, "rngs"),
        (gauss, dict(rngs=[np.random.default_rng(0)]), ValueError, "layers | noise and path"),
        (gauss, dict(noise=field, path=path, realisations=2), ValueError, "one BrownianPath per realisation"),
        (gauss, dict(noise=field, path=[path, "x"], realisations=2), TypeError, "BrownianPath"),
        (gauss, dict(noise=field, path=np.zeros(3)), TypeError, "BrownianPath"),
        (DiscreteTransformer(d=d, depth=2, T=1.0), dict(rngs=[np.random.default_rng(0)]), ValueError,
         "without MLP"),
        (np.eye(3), {}, TypeError, "DiscreteTransformer"),
    ]:
        with pytest.raises(exc, match=match):
            TransformerStepper(t, N, **kw)


def test_progress_bar_does_not_change_the_run(capsys):
    tr = DiscreteTransformer(d=3, depth=4, T=1.0, width=4, attention=generic_attention(3))
    x0 = unit_points(4, 3, 0)
    a = tr.run(x0, seed=2, realisations=2, progress=True)
    assert "transformer" in capsys.readouterr().err
    np.testing.assert_array_equal(a.x, tr.run(x0, seed=2, realisations=2).x)
