"""``amr-fv`` with common transport noise (Stratonovich; spherepde.solvers.eulerian.amr).

Independent reference: for a noise field truncated at degree 0 the field is a constant vector
c = σ₀ ΔW/Δt projected, u(x) = P_x c, whose flow moves every point along its great circle towards
ĉ with tan(θ/2) ↦ tan(θ/2)·e^{−|c|τ} (θ the angle to ĉ) — an exact map, applied to a fine
quadrature of ρ₀ step after step on the same Brownian path (the Wong–Zakai flow the scheme
integrates with its velocity frozen over each step)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from spherepde.grids import GaussGrid
from spherepde.noise.activations import get_activation
from spherepde.noise.brownian import BrownianPath
from spherepde.noise.field import NoiseField
from spherepde.noise.kernel import NoiseKernel
from spherepde.solvers.eulerian.amr import AMRDensity

C0 = np.array([0.48, 0.6, 0.64])


def _field(nmax: int = 4, d: int = 3) -> NoiseField:
    return NoiseField(NoiseKernel(get_activation("relu"), d=d, sigma_u=0.5, sigma_w=0.5), nmax=nmax)


def _vmf(kappa=10.0):
    return lambda x: np.exp(kappa * (x @ C0 - 1.0))


def _stepper(nmax=4, seed=3, **kw):
    noise = _field(nmax)
    opts = {"nlat0": 8, "lmax": 2, "mass_per_cell": 0.5, **kw}
    return AMRDensity(None, GaussGrid(16), noise=noise, path=BrownianPath(noise.shape, seed=seed), **opts)


def _run(st, state, k0, n, dt):
    """Steps k0 .. k0 + n − 1 of [k·dt, (k + 1)·dt] (the same times whatever k0)."""
    for k in range(k0, k0 + n):
        t = k * dt
        state = st.step(state, t, (k + 1) * dt - t)
    return state


@pytest.mark.parametrize("substeps", ["frozen", "path"])
def test_mass_exact_and_positive_with_noise(substeps):
    st = _stepper(noise_substeps=substeps)
    state = st.initial_state(_vmf())
    for k in range(20):
        state = st.step(state, 0.02 * k, 0.02)
        _, m, _ = st.unpack(state)
        assert abs(m.sum() - 1.0) <= 1e-13
        assert m.min() >= 0.0
    assert st.field(state).min() >= 0.0
    assert int(state[0, 1]) >= 20  # steps taken (positivity sub-steps count)


def test_restart_with_noise_is_bit_for_bit():
    st = _stepper()
    s0 = st.initial_state(_vmf())
    whole = _run(st, s0, 0, 12, 0.025)
    half = _run(st, s0, 0, 6, 0.025)
    saved = np.array(half, copy=True)
    fresh = _stepper()  # a new stepper, noise field and path: the state holds everything
    again = _run(fresh, saved, 6, 6, 0.025)
    assert np.array_equal(whole, again)


def _exact_map(x, c, tau):
    """The flow of u(x) = P_x c over time tau (rows of x on S²)."""
    nc = float(np.linalg.norm(c))
    if nc == 0.0:
        return x
    e = c / nc
    cos = np.clip(x @ e, -1.0, 1.0)
    theta = np.arccos(cos)
    perp = x - cos[:, None] * e
    pn = np.linalg.norm(perp, axis=1)
    ok = pn > 1e-300
    w = np.where(ok[:, None], perp / np.where(ok, pn, 1.0)[:, None], 0.0)
    new = 2.0 * np.arctan(np.tan(theta / 2.0) * math.exp(-nc * tau))
    return np.cos(new)[:, None] * e + np.sin(new)[:, None] * w


def test_degree_zero_noise_converges_to_the_exact_flow():
    """The mean ∫ x dρ after 20 steps against the exact pushforward of a GaussGrid(96) quadrature of
    ρ₀ on the same path: the error falls under refinement (nlat0 8 → 16 → 32, lmax 1) and is small."""
    noise = _field(nmax=0)
    dt, n = 0.05, 20
    g = GaussGrid(96)
    y = g.xyz.reshape(-1, 3)
    w = _vmf()(y) * g.cell_area.reshape(-1)
    w /= w.sum()
    path = BrownianPath(noise.shape, seed=7)
    sig = noise.values(np.eye(1)[:, :, None] * np.ones(3), np.array([[0.0, 0.0, 1.0]]))[0, 0, 0]
    for k in range(n):
        c = sig * path.increment(k * dt, (k + 1) * dt)[0] / ((k + 1) * dt - k * dt)
        y = _exact_map(y, c, (k + 1) * dt - k * dt)
    exact_mean = w @ y
    assert np.linalg.norm(exact_mean - w @ g.xyz.reshape(-1, 3)) > 0.05  # the noise moved it
    errs = []
    for nlat0 in (8, 16, 32):
        st = AMRDensity(None, GaussGrid(16), nlat0=nlat0, lmax=1, mass_per_cell=0.5, noise=_field(0),
                        path=BrownianPath(noise.shape, seed=7))
        s = _run(st, st.initial_state(_vmf()), 0, n, dt)
        x, m = st.measure(s)
        errs.append(float(np.linalg.norm(m @ x - exact_mean)))
    assert errs[0] > errs[1] > errs[2], errs
    assert errs[2] < 0.01, errs


def test_noise_velocity_is_the_fields_own():
    st = _stepper()
    s0 = st.initial_state(_vmf())
    mesh = st.unpack(s0)[0]
    u = st.noise_velocity(mesh, 0.1, 0.02)
    v = _field().tangent_values(st.path.increment(0.1, 0.1 + 0.02), mesh.xc) / 0.02
    np.testing.assert_allclose(u, v, rtol=0, atol=1e-12 * np.abs(v).max())


def test_bad_noise_input_is_refused():
    noise = _field()
    path = BrownianPath(noise.shape, seed=0)
    with pytest.raises(ValueError, match="noise and path go together"):
        AMRDensity(None, GaussGrid(16), nlat0=8, lmax=1, noise=noise)
    with pytest.raises(TypeError, match="None only with noise"):
        AMRDensity(None, GaussGrid(16), nlat0=8, lmax=1)
    with pytest.raises(ValueError, match="path.shape"):
        AMRDensity(None, GaussGrid(16), nlat0=8, lmax=1, noise=noise, path=BrownianPath((3, 3), seed=0))
    with pytest.raises(ValueError, match="noise must act in R\\^3"):
        AMRDensity(None, GaussGrid(16), nlat0=8, lmax=1, noise=_field(d=2),
                   path=BrownianPath(_field(d=2).shape, seed=0))
    with pytest.raises(ValueError, match="noise_substeps"):
        AMRDensity(None, GaussGrid(16), nlat0=8, lmax=1, noise=noise, path=path, noise_substeps="equal")
    st = _stepper()
    s0 = st.initial_state(_vmf())
    with pytest.raises(ValueError, match="adaptive time step cannot be combined with noise"):
        st.stable_dt(s0, 0.0)
    with pytest.raises(ValueError, match="dt must be a positive finite number"):
        st.step(s0, 0.0, 0.0)


def test_run_config_amr_with_noise_builds_and_refuses_ito():
    from spherepde.runs.build import build
    from spherepde.runs.config import RunConfig
    from spherepde.solvers.eulerian.amr import AMRDensity as A
    raw = {"grid": {"kind": "sphere", "nlat": 16},
           "initial": {"kind": "vmf", "centres": [list(C0)], "kappas": [10.0]},
           "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 4}},
           "representations": {"density": {"scheme": "amr", "base_nlat": 8, "max_level": 1}},
           "stepping": {"t_end": 0.1, "dt": 0.01, "output_every": 0.1}}
    model = build(RunConfig.from_dict(raw))
    assert isinstance(model.density, A) and model.density.noise is not None
    assert model.density.velocity is None
    raw["dynamics"]["noise"]["calculus"] = "ito"
    with pytest.raises(ValueError, match="calculus"):
        build(RunConfig.from_dict(raw))


def test_sync_path_config_for_amr_and_two_clusters():
    from spherepde.experiments.sync_path import SECOND_DIRECTION, SyncPathConfig
    raw = SyncPathConfig(scheme="amr", clusters=2, nlat=16, t_end=0.5).run_config()
    dens = raw["representations"]["density"]
    assert dens["scheme"] == "amr" and dens["base_nlat"] == 8 and dens["max_level"] == 4
    assert len(raw["initial"]["centres"]) == 2
    assert abs(np.dot(C0, SECOND_DIRECTION)) < 1e-12 and abs(np.linalg.norm(SECOND_DIRECTION) - 1) < 1e-15
    with pytest.raises(ValueError, match="clusters must be 1 or 2"):
        SyncPathConfig(clusters=3)
    with pytest.raises(ValueError, match="base_nlat must be None or an even integer"):
        SyncPathConfig(scheme="amr", base_nlat=7)
    with pytest.raises(ValueError, match="noise_substeps"):
        SyncPathConfig(scheme="amr", noise_substeps="shares")
