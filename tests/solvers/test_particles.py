"""The N-particle attention ODE (spherepde.solvers.lagrangian) and its NetCDF files."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from spherepde import __version__
from spherepde.dynamics.attention import Attention
from spherepde.io.netcdf import open_dataset, read_config
from spherepde.io.particles import read_particles_netcdf, write_particles_netcdf
from spherepde.solvers.lagrangian import ParticleODE, ParticleResult
from conftest import unit_points


def generic_attention(d: int = 3, beta: float = 1.0, seed: int = 3, kind: str = "softmax") -> Attention:
    rng = np.random.default_rng(seed)
    q = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    k = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    v = np.eye(d) + 0.5 * rng.normal(size=(d, d))
    return Attention(q, k, v, beta, kind)


# ---- convergence order ---------------------------------------------------------------------
@pytest.mark.parametrize("method, dts, order", [
    ("rk4", [0.2, 0.1, 0.05, 0.025], 4.0),
    ("rk2", [0.1, 0.05, 0.025, 0.0125], 2.0),
])
def test_order_of_accuracy(method, dts, order):
    """Retracted stages keep the classical order (N = 50, β = 1, t = 1)."""
    att = generic_attention()
    x0 = unit_points(50, 3, seed=3)
    ref = ParticleODE(att, method="rk4").run(x0, (0.0, 1.0), dt=1e-3).positions[-1]
    assert np.max(np.abs(ref - x0)) > 0.3  # the particles really move
    errs = [np.max(np.abs(ParticleODE(att, method=method).run(x0, (0.0, 1.0), dt=h).positions[-1] - ref))
            for h in dts]
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.25, (slope, errs)


def test_particles_stay_on_sphere():
    att = generic_attention(d=4, beta=5.0, seed=8)
    res = ParticleODE(att).run(unit_points(40, 4, seed=1), (0.0, 20.0), dt=0.05,
                               output_times=np.linspace(0, 20, 11))
    assert res.n_steps == 400
    assert np.max(np.abs(np.linalg.norm(res.positions, axis=-1) - 1.0)) < 1e-14
    for method in ("rk2", "rk4"):
        x = unit_points(30, 3, seed=2)
        ode = ParticleODE(generic_attention(beta=2.0), method=method)
        for _ in range(200):
            x = ode.step(x, 0.0, 0.1)
        assert np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0)) < 1e-14


# ---- exact solutions -----------------------------------------------------------------------
def test_beta_inf_follows_characteristics():
    """β = ∞, A = VBᵀ symmetric: x(t) = e^{s(t)A}x0/|e^{s(t)A}x0|, ds/dt = 1/|Bᵀx(t)|."""
    d = 3
    rng = np.random.default_rng(5)
    q = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    k = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    b = q.T @ k
    r = np.linalg.qr(rng.normal(size=(d, d)))[0]
    a = r @ np.diag([1.0, 0.3, -0.5]) @ r.T
    att = Attention(q, k, a @ np.linalg.inv(b.T), math.inf)
    np.testing.assert_allclose(att.A, att.A.T, atol=1e-14)
    lam, u = np.linalg.eigh(a)

    def flow(s: float, x0: np.ndarray) -> np.ndarray:
        y = u @ (np.exp(s * lam) * (u.T @ x0))
        return y / np.linalg.norm(y)

    x0 = unit_points(12, d, seed=6)
    outs = [0.0, 0.5, 1.0, 2.0]
    res = ParticleODE(att).run(x0, (0.0, 2.0), dt=0.01, output_times=outs)
    for i in range(x0.shape[0]):
        sol = solve_ivp(lambda t, s, i=i: [1.0 / np.linalg.norm(b.T @ flow(s[0], x0[i]))],
                        (0.0, 2.0), [0.0], t_eval=outs, rtol=1e-12, atol=1e-14, method="DOP853")
        exact = np.array([flow(s, x0[i]) for s in sol.y[0]])
        np.testing.assert_allclose(res.positions[:, i], exact, rtol=0, atol=1e-9)


def test_two_particles_attract_on_circle():
    """Q = K = V = I on S¹: two (non-antipodal) particles approach each other."""
    att = Attention(np.eye(2), np.eye(2), np.eye(2), 1.0)
    th = np.array([0.0, 2.0])
    x0 = np.stack([np.cos(th), np.sin(th)], axis=1)
    res = ParticleODE(att).run(x0, (0.0, 5.0), dt=0.05, output_times=np.linspace(0, 5, 21))
    dist = np.linalg.norm(res.positions[:, 0] - res.positions[:, 1], axis=1)
    assert np.all(np.diff(dist) < 0)
    assert dist[-1] < 0.5 * dist[0]
    # symmetric configuration: the midpoint direction (angle 1) is preserved
    mid = res.positions[-1].sum(axis=0)
    np.testing.assert_allclose(np.arctan2(mid[1], mid[0]), 1.0, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_single_particle_does_not_move(d):
    """N = 1, softmax, Q = K = V = I: m = x, so P_x V x = 0."""
    att = Attention(np.eye(d), np.eye(d), np.eye(d), 7.0)
    x0 = unit_points(1, d, seed=d)
    res = ParticleODE(att).run(x0, (0.0, 3.0), dt=0.1)
    np.testing.assert_allclose(res.positions[-1], x0, atol=1e-14)


def test_weights_and_usa():
    """Weights enter μ^N; for softmax only their ratios matter; usa scales with the mass."""
    x = unit_points(6, 3, seed=4)
    w = np.array([1.0, 2.0, 0.0, 1.0, 3.0, 1.0])
    sm = generic_attention(beta=2.0)
    np.testing.assert_allclose(ParticleODE(sm, weights=w).velocity(x),
                               ParticleODE(sm, weights=5 * w).velocity(x), atol=1e-15)
    usa = generic_attention(beta=2.0, kind="usa")
    np.testing.assert_allclose(ParticleODE(usa, weights=5 * w).velocity(x),
                               5 * ParticleODE(usa, weights=w).velocity(x), rtol=1e-13)
    np.testing.assert_allclose(ParticleODE(usa).velocity(x),
                               usa.velocity(x, x, np.full(6, 1 / 6)), atol=0)


def test_block_size_only_changes_round_off():
    att = generic_attention(beta=20.0)
    x = unit_points(300, 3, seed=9)
    v = ParticleODE(att).velocity(x)
    for block in (1, 7, 64, 5000):
        np.testing.assert_allclose(ParticleODE(att, block=block).velocity(x), v, rtol=0, atol=1e-14)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="block"):
            ParticleODE(att, block=bad)


# ---- the run loop --------------------------------------------------------------------------
def test_output_times_hit_exactly_and_even_splitting():
    att = generic_attention()
    x0 = unit_points(10, 3, seed=0)
    outs = [0.0, 0.25, 1.0 / 3.0, 1.0]
    ode = ParticleODE(att)
    res = ode.run(x0, (0.0, 1.2), dt=0.3, output_times=outs)
    assert isinstance(res, ParticleResult) and ode.result is res
    np.testing.assert_array_equal(res.times, outs)
    # 0→0.25: 1 step; →1/3: 1; →1 (0.667/0.3 = 2.2): 3; →1.2: 1
    assert res.n_steps == 6
    assert res.t == 1.2 and not res.interrupted
    assert res.positions.shape == (4, 10, 3) and res.state.shape == (10, 3)
    np.testing.assert_array_equal(res.positions[0], x0 / np.linalg.norm(x0, axis=1, keepdims=True))
    np.testing.assert_array_equal(res.positions[1], ode.step(res.positions[0], 0.0, 0.25))
    # t0 not an output: the first stored state is at the first output time
    res2 = ode.run(x0, (0.0, 1.0), dt=0.1, output_times=[0.5])
    np.testing.assert_array_equal(res2.times, [0.5])
    assert res2.t == 1.0 and res2.n_steps == 10
    # same dt that divides the interval exactly: every step is dt
    res3 = ode.run(x0, (0.0, 1.0), dt=0.1)
    assert res3.n_steps == 10
    np.testing.assert_array_equal(res3.times, [0.0, 1.0])


def test_progress_bar(capsys):
    att = generic_attention()
    x0 = unit_points(5, 3, seed=0)
    a = ParticleODE(att).run(x0, (0.0, 1.0), dt=0.1, progress=True)
    b = ParticleODE(att).run(x0, (0.0, 1.0), dt=0.1)
    np.testing.assert_array_equal(a.positions, b.positions)
    assert "particles" in capsys.readouterr().err


def test_keyboard_interrupt_keeps_partial_result():
    att = generic_attention()
    x0 = unit_points(5, 3, seed=0)
    ode = ParticleODE(att)
    calls = {"n": 0}
    real = ode.velocity

    def flaky(x):
        calls["n"] += 1
        if calls["n"] > 4 * 7:  # fail in the 8th step
            raise KeyboardInterrupt
        return real(x)

    ode.velocity = flaky
    with pytest.raises(KeyboardInterrupt) as info:
        ode.run(x0, (0.0, 1.0), dt=0.1, output_times=[0.0, 0.5, 1.0])
    assert any("interrupted" in n for n in getattr(info.value, "__notes__", []))
    res = ode.result
    assert res.interrupted and res.n_steps == 7
    np.testing.assert_array_equal(res.times, [0.0, 0.5])
    assert res.positions.shape == (2, 5, 3)
    assert res.t == pytest.approx(0.7)
    full = ParticleODE(att).run(x0, (0.0, 1.0), dt=0.1, output_times=[0.0, 0.5, 0.7, 1.0])
    np.testing.assert_array_equal(res.positions, full.positions[:2])
    np.testing.assert_allclose(res.state, full.positions[2], atol=1e-15)


def test_nonfinite_state_raises():
    ode = ParticleODE(generic_attention())
    ode.velocity = lambda x: np.full_like(x, np.nan)
    with pytest.raises(FloatingPointError, match="non-finite"):
        ode.run(unit_points(3, 3, seed=0), (0.0, 1.0), dt=0.1)


# ---- bad input ---------------------------------------------------------------------------
def test_bad_input():
    att = generic_attention()
    x0 = unit_points(4, 3, seed=0)
    ode = ParticleODE(att)
    with pytest.raises(ValueError, match=r"x0.*d = attention.d = 3"):
        ode.run(unit_points(4, 2, seed=0), (0, 1), dt=0.1)
    with pytest.raises(ValueError, match="x0"):
        ode.run(x0[0], (0, 1), dt=0.1)
    with pytest.raises(ValueError, match="unit sphere"):
        ode.run(1.001 * x0, (0, 1), dt=0.1)
    bad = x0.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="x0.*finite"):
        ode.run(bad, (0, 1), dt=0.1)
    with pytest.raises(ValueError, match="dt"):
        ode.run(x0, (0, 1), dt=0.0)
    with pytest.raises(ValueError, match="dt"):
        ode.run(x0, (0, 1), dt=-0.1)
    with pytest.raises(ValueError, match="dt"):
        ode.run(x0, (0, 1), dt=math.nan)
    with pytest.raises(ValueError, match="t_span"):
        ode.run(x0, (1, 1), dt=0.1)
    with pytest.raises(ValueError, match="t_span"):
        ode.run(x0, (0, math.nan), dt=0.1)
    with pytest.raises(ValueError, match="output_times"):
        ode.run(x0, (0, 1), dt=0.1, output_times=[0.5, 0.2])
    with pytest.raises(ValueError, match="output_times"):
        ode.run(x0, (0, 1), dt=0.1, output_times=[0.5, 2.0])
    with pytest.raises(ValueError, match="method"):
        ParticleODE(att, method="euler")
    with pytest.raises(TypeError, match="attention"):
        ParticleODE(np.eye(3))
    for w, msg in (([1.0, -1.0, 1.0, 1.0], "non-negative"), ([0.0] * 4, "positive"),
                   ([[1.0, 1.0]], "1-d"), ([1.0, math.nan, 1.0, 1.0], "finite")):
        with pytest.raises(ValueError, match=msg):
            ParticleODE(att, weights=w)
    with pytest.raises(ValueError, match="weights"):
        ParticleODE(att, weights=np.ones(3)).run(x0, (0, 1), dt=0.1)
    assert ode.result is None  # nothing ran
    # slightly off the sphere (within 1e-8) is accepted and renormalised
    res = ode.run(x0 * (1 + 1e-10), (0, 0.1), dt=0.1)
    assert np.max(np.abs(np.linalg.norm(res.positions[0], axis=1) - 1)) < 1e-15


# ---- NetCDF --------------------------------------------------------------------------------
def test_netcdf_round_trip(tmp_path):
    att = generic_attention(d=4, beta=math.inf)
    x0 = unit_points(7, 4, seed=11)
    res = ParticleODE(att, method="rk2").run(x0, (0.0, 1.0), dt=0.1, output_times=[0.0, 0.3, 1.0])
    config = {"experiment": "particles", "beta": math.inf, "N": 7, "Q": att.Q}
    path = write_particles_netcdf(tmp_path / "p.nc", res, config=config, seed=17, attention=att)
    ds = open_dataset(path)
    assert ds["position"].dims == ("time", "particle", "dim")
    assert ds.sizes == {"time": 3, "particle": 7, "dim": 4, "dim_row": 4, "dim_col": 4}
    np.testing.assert_array_equal(ds["position"].values, res.positions)
    np.testing.assert_array_equal(ds["time"].values, res.times)
    np.testing.assert_array_equal(ds["weight"].values, np.full(7, 1 / 7))
    np.testing.assert_array_equal(ds["V"].values, att.V)
    assert ds["time"].attrs["units"] == "1" and "axis" not in ds["time"].attrs  # not a CF time axis
    assert ds.attrs["status"] == "complete"
    assert ds["position"].attrs["units"] == "1" and "long_name" in ds["position"].attrs
    assert ds.attrs["Conventions"] == "CF-1.8"
    assert ds.attrs["spherepde_version"] == __version__
    assert ds.attrs["seed"] == 17
    assert ds.attrs["method"] == "rk2" and ds.attrs["n_steps"] == res.n_steps
    assert ds.attrs["attention_beta"] == math.inf
    cfg = json.loads(ds.attrs["config_json"])
    assert cfg["beta"] == math.inf and cfg["N"] == 7
    assert read_config(path)["experiment"] == "particles"
    back = read_particles_netcdf(path)
    np.testing.assert_array_equal(back.positions, res.positions)
    np.testing.assert_array_equal(back.state, res.state)
    assert (back.n_steps, back.method, back.interrupted, back.t) == (res.n_steps, "rk2", False, 1.0)


def test_netcdf_bad_input(tmp_path):
    res = ParticleODE(generic_attention()).run(unit_points(3, 3, seed=0), (0, 0.2), dt=0.1)
    with pytest.raises(ValueError, match="path"):
        write_particles_netcdf(tmp_path / "missing" / "p.nc", res, config={}, seed=None)
    with pytest.raises(TypeError, match="result"):
        write_particles_netcdf(tmp_path / "p.nc", {"positions": 1}, config={}, seed=None)
    with pytest.raises(TypeError, match="config"):
        write_particles_netcdf(tmp_path / "p.nc", res, config=[1], seed=None)
    with pytest.raises(TypeError, match="seed"):
        write_particles_netcdf(tmp_path / "p.nc", res, config={}, seed="x")
    with pytest.raises(ValueError, match="attention"):
        write_particles_netcdf(tmp_path / "p.nc", res, config={}, seed=1,
                               attention=generic_attention(d=2))
    assert not (tmp_path / "p.nc").exists()
    write_particles_netcdf(tmp_path / "p.nc", res, config={}, seed=None)
    assert open_dataset(tmp_path / "p.nc").attrs["seed"] == "none"
