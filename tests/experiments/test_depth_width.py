"""Paper 2, Thm 1.1 experiment (spherepde.experiments.depth_width) on small configurations."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import xarray as xr

from spherepde.dynamics.attention import Attention
from spherepde.noise import NoiseKernel
from spherepde.solvers.lagrangian import ParticleODE
from spherepde.solvers.lagrangian.transformer import DiscreteTransformer
from spherepde.experiments import depth_width as dw
from spherepde.experiments.registry import EXPERIMENTS
from spherepde.runs.sweep import expand, select

# N = 8 tokens, the field truncated at degree 4, depths 4..64, reference 16 Heun steps per
# layer of L = 64 (dt = 1/1024), 4 paths, the runs in this process: about 20 s.
SMALL = dw.DepthWidthConfig(n_tokens=8, nmax=4, depths=(4, 8, 16, 32, 64), paths=4,
                            ref_steps_per_layer=16, widths=(2, 8), width_depth=4,
                            width_realisations=60, batch=25, seed=0, workers=0)


def test_the_studies_are_sweeps_of_one_run_configuration():
    """Every run is the base configuration with its representation switched on: the depth
    sweep over depth × path, the reference and check over the paths (same tokens: same n and
    seed), the width sweeps over disjoint blocks of noise realisations (no two widths, and no
    two batches, share a layer generator or a path)."""
    base = dw.run_config(SMALL)
    raws = {**dw.depth_sweeps(SMALL), **dw.width_sweeps(SMALL)}
    assert sorted(raws) == ["check", "depth", "reference", "width-2", "width-8", "width-inf"]
    for raw in raws.values():
        assert {k: v for k, v in raw.items() if k not in ("representations", "sweep", "stepping")} == \
            {k: v for k, v in base.items() if k not in ("representations", "stepping")}
    sweeps = {k: expand(v) for k, v in raws.items()}
    assert sweeps["depth"].dims == {dw.DEPTH: list(SMALL.depths), dw.PATH: [0, 1, 2, 3]}
    assert sweeps["reference"].dims == sweeps["check"].dims == {dw.PATH: [0, 1, 2, 3]}
    ref = sweeps["reference"].members[0].config
    assert ref.stepping.output_every == ref.stepping.dt == SMALL.dt_ref
    assert sweeps["check"].members[0].config.stepping.dt == 2 * SMALL.dt_ref
    tr = sweeps["depth"].members[0].config.representations.transformer
    assert (tr.n, tr.seed) == (ref.representations.particles.n, ref.representations.particles.seed)
    B, nb = dw.width_batches(SMALL)
    assert (B, nb) == (25, 3)
    used = [r + k for name in ("width-2", "width-8", "width-inf")
            for r in sweeps[name].dims[dw.PATH] for k in range(B)]
    assert len(used) == len(set(used)) == 3 * B * nb


def test_gaussian_transformer_converges_to_the_limit_sde_on_the_same_path(tmp_path):
    """The m = ∞ transformer and the limit SDE driven by the same Brownian path: the error
    E max_ℓ (1/N) Σ|X_ℓ − X̄(t_ℓ)|² falls with L.  Strong order 1/2 predicts slope −1.
    Measured on this configuration (the Brownian path of issue 22.10) for seeds 0..5 (4 paths
    each): slopes −1.14, −1.01, −1.13, −0.80, −1.05, −0.90 (mean −1.01, sd 0.13) — pre-asymptotic
    and noisy with 4 paths; the threshold −0.5 is more than 3 sd above the mean
    (docs/prototypes/issue22_noise/depth_width_small_seeds.json)."""
    d = dw.depth_study(SMALL, tmp_path)
    err = d["errors"].mean(axis=1)
    fits = dw.depth_fits(SMALL.depths, d["errors"])
    assert fits["slope_vs_L"] < -0.5
    assert err[-1] < err[0] / 4
    # Thm 1.1's sup over t contains the layer times and falls too (measured slopes for seeds
    # 0..5: −0.77, −0.82, −0.87, −0.76, −0.88, −0.62)
    assert np.all(d["errors_sup_t"] >= d["errors"])
    assert dw.depth_fits(SMALL.depths, d["errors_sup_t"])["slope_vs_L"] < -0.5
    # the reference is converged well below the error of the deepest transformer (measured
    # ratio 0.054 for seed 0; 0.020..0.085 over seeds 0..5, err[-1]/err[0] 0.042..0.095; with
    # 8 reference steps per layer, the former setting, seed 0 gives 0.138 on this path, and the
    # former path gave 0.055..0.12 over seeds 0..5: 8 steps did not hold the bound for every draw)
    assert d["ref_check"].mean() < 0.1 * err[-1]
    # control: against the reference of a *different* path the error does not fall (it is
    # the coupling, not the law, that converges)
    other = d["x_reference"]  # the reference of path 0, the deepest transformer on path 1
    with xr.open_dataset(d["files"]["depth"]) as ds:
        x1 = select(ds, "transformer_position", {dw.DEPTH: SMALL.depths[-1], dw.PATH: 1})
    np.testing.assert_array_equal(x1[0], other[0])  # the same tokens
    assert dw.sup_error(x1, other) > 10 * err[-1]


def test_without_noise_the_transformer_converges_to_the_attention_ode_at_first_order(tmp_path):
    """Noise off: the transformer is explicit Euler (split, with LN) for the attention ODE,
    so the squared error falls like L^{-2}.  Measured slope −1.89 over L = 4..64 (deterministic;
    the pre-asymptotic range makes it slightly shallower than −2)."""
    d = dw.depth_study(SMALL, tmp_path, noise=False)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "control-check", "control-depth", "control-reference"]
    # the reference is the run's ParticleODE (RK4, error O(dt⁴) at dt = 1/512): its check
    # against 2dt is ~1e-26 (measured 5.4e-27), far below the bound
    assert d["errors"].shape == (5, 1) and d["ref_check"][0] < 1e-12
    slope = dw.depth_fits(SMALL.depths, d["errors"])["slope_vs_L"]
    assert -2.15 < slope < -1.75
    # and RK4 at dt = 1e-3 from the same tokens agrees with it to O(1e-3⁴) (1e-12 ≪ 2e-7),
    # far below the transformer's error at L = 64 (sqrt(3.6e-6) ≈ 2e-3)
    x0 = d["x_reference"][0]
    att = Attention(np.eye(3), np.eye(3), np.eye(3), SMALL.beta)
    ode = ParticleODE(att, method="rk4").run(x0, (0.0, SMALL.t_end), dt=1e-3)
    np.testing.assert_allclose(d["x_reference"][-1], ode.positions[-1], rtol=0, atol=2e-7)


def test_width_study_gives_finite_differences_with_standard_errors(tmp_path):
    w = dw.width_study(SMALL, tmp_path / "a")
    assert set(w["samples"]) == {2, 8, "inf"}
    for obs in w["samples"].values():
        assert set(obs) == set(dw.OBSERVABLES)
        assert all(a.shape == (SMALL.width_realisations,) and np.all(np.isfinite(a)) for a in obs.values())
        assert np.all((obs["cosine"] >= -1) & (obs["cosine"] <= 1))
    diffs = dw.width_differences(SMALL.widths, w["samples"])
    for entry in diffs.values():
        for row in entry["rows"]:
            assert math.isfinite(row["diff"]) and row["stderr"] > 0
        assert entry["resolution"] > 0 and isinstance(entry["statement"], str)
    # reproducible from the seed
    w2 = dw.width_study(SMALL, tmp_path / "b")
    np.testing.assert_array_equal(w2["samples"][2]["energy"], w["samples"][2]["energy"])
    np.testing.assert_array_equal(w2["samples"]["inf"]["energy"], w["samples"]["inf"]["energy"])


def test_width_differences_fit_and_resolution_on_synthetic_samples():
    """Samples with a known width effect 1/m (se 0.01): the resolved widths are fitted with
    q ≈ 1; without an effect, the statement gives the resolution instead of a fit."""
    rng = np.random.default_rng(0)
    R, widths = 20000, (1, 2, 4, 1024)
    base = {n: rng.normal(size=R) for n in dw.OBSERVABLES}
    effect = {"inf": base, **{m: {n: rng.normal(size=R) + 1.0 / m for n in dw.OBSERVABLES} for m in widths}}
    out = dw.width_differences(widths, effect)["cosine"]
    assert [r["resolved"] for r in out["rows"]] == [True, True, True, False]
    assert out["q"] == pytest.approx(1.0, abs=0.15) and out["fitted_widths"] == [1, 2, 4]
    none = {"inf": base, **{m: {n: rng.normal(size=R) for n in dw.OBSERVABLES} for m in widths}}
    entry = dw.width_differences(widths, none)["energy"]
    assert "q" not in entry and "below the Monte Carlo resolution" in entry["statement"]
    assert entry["resolution"] == pytest.approx(3 * math.sqrt(2 / R), rel=0.05)
    # the pooled comparison sees an m-independent offset that no single width resolves:
    # standardised samples (mean 0, sd 1 exactly) shifted by 0.025 are 2.5 se per width
    # (se = sqrt(2/R) = 0.01) and 3.2 se pooled (se = sqrt(1/(4R) + 1/R) = 0.0079)
    def std_normal():
        z = rng.normal(size=R)
        return (z - z.mean()) / z.std(ddof=1)
    offset = {"inf": {n: std_normal() for n in dw.OBSERVABLES},
              **{m: {n: std_normal() + 0.025 for n in dw.OBSERVABLES} for m in widths}}
    entry = dw.width_differences(widths, offset)["first_moment"]
    assert not any(r["resolved"] for r in entry["rows"]) and entry["pooled"]["resolved"]
    assert entry["pooled"]["diff"] == pytest.approx(0.025, abs=1e-12)


def test_mlp_excess_kurtosis_matches_sampled_mlp():
    """The width enters the law only through cumulants ≥ 4: one component of the MLP field at
    a point has excess kurtosis mlp_excess_kurtosis/m (ReLU: 3 Var(h²)/κ(1)², closed form
    3(3s⁴/2 − s⁴/4)/κ(1)²).  Sampled: 3 components × 20000 layers of width 2; tolerance 4
    standard errors of the sample fourth moment."""
    kernel = NoiseKernel("relu", 3, 0.5, 0.5)
    c = dw.mlp_excess_kurtosis(kernel)
    s2 = kernel.s2
    assert c == pytest.approx(3 * (1.5 * s2**2 - 0.25 * s2**2) / kernel.kappa1**2, rel=1e-8)
    m = 2
    tr = DiscreteTransformer(d=3, depth=1, T=1.0, width=m, sigma_u=0.5, sigma_w=0.5)
    rng = np.random.default_rng(5)
    y = np.array([[0.0, 0.6, 0.8]])
    g = np.array([tr.draw_layer(rng)(y)[0] for _ in range(20000)]).ravel() / math.sqrt(kernel.kappa1)
    z4 = g**4
    kurt = z4.mean() - 3.0
    assert abs(kurt - c / m) < 4 * z4.std() / math.sqrt(z4.size)


def test_quick_experiment_writes_its_files(tmp_path):
    cfg = dataclasses.replace(SMALL, depths=(4, 8, 16), paths=3, ref_steps_per_layer=4,
                              width_realisations=20, batch=20)
    s = dw.run_depth_width(cfg, tmp_path)
    for key in ("experiment", "config", "version", "runs", "depth", "width", "kernel", "plot", "file"):
        assert key in s
    dep = s["depth"]
    assert math.isfinite(dep["reference"]["difference"])
    for part in ("layer_times", "sup_t"):
        for key in ("slope_vs_L", "slope_vs_L_stderr", "p_vs_logL_over_L", "p_vs_logL_over_L_stderr",
                    "slope_vs_L_stderr_bootstrap", "p_vs_logL_over_L_stderr_bootstrap"):
            assert math.isfinite(dep[part][key])
        assert len(dep[part]["error"]) == 3 and all(e > 0 for e in dep[part]["error"])
    js = json.loads((tmp_path / "summary.json").read_text())
    assert js["experiment"] == "depth-width" and js["config"]["depths"] == [4, 8, 16]
    assert set(js["width"]["differences"]) == set(dw.OBSERVABLES)
    ds = xr.open_dataset(tmp_path / "depth_width.nc")
    assert ds["position_transformer"].shape == (17, 8, 3) == ds["position_reference"].shape
    assert ds["sup_error"].shape == (3, 3) == ds["sup_t_error"].shape and ds["width_diff"].shape == (2, 3)
    np.testing.assert_allclose(np.linalg.norm(ds["position_reference"].values, axis=-1), 1.0, atol=1e-12)
    assert json.loads(ds.attrs["config_json"])["experiment"] == "depth-width"
    ds.close()
    for png in ("depth_width_depth.png", "depth_width_width.png"):
        assert (tmp_path / png).stat().st_size > 10_000
    assert sorted(s["sweep_files"]) == ["check", "depth", "reference", "width-2", "width-8", "width-inf"]
    assert all((tmp_path / "runs" / name / "sweep.nc").is_file() for name in s["sweep_files"])
    assert EXPERIMENTS["depth-width"].load() == (dw.DepthWidthConfig, dw.run_depth_width)
    assert dw.DepthWidthConfig.quick().depths[-1] < dw.DepthWidthConfig().depths[-1]


@pytest.mark.parametrize("kw, exc, name", [
    (dict(n_tokens=1), ValueError, "n_tokens"),
    (dict(n_tokens=8.0), TypeError, "n_tokens"),
    (dict(t_end=0.0), ValueError, "t_end"),
    (dict(t_end=math.inf), ValueError, "t_end"),
    (dict(beta=-1.0), ValueError, "beta"),
    (dict(attention_scale=math.nan), ValueError, "attention_scale"),
    (dict(sigma_u=-0.5), ValueError, "sigma_u"),
    (dict(activation="bogus"), ValueError, "activation"),
    (dict(nmax=0), ValueError, "nmax"),
    (dict(depths=(8,)), ValueError, "depths"),
    (dict(depths=(16, 8)), ValueError, "increasing"),
    (dict(depths=(8, 12)), ValueError, "divide"),
    (dict(depths=(0, 8)), ValueError, "depths"),
    (dict(widths=(4, 4)), ValueError, "widths"),
    (dict(paths=1), ValueError, "paths"),
    (dict(ref_steps_per_layer=3), ValueError, "even"),
    (dict(width_realisations=1), ValueError, "width_realisations"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(workers=-1), ValueError, "workers"),
    # a run configuration's limit, named with its key path and the runs it is in
    (dict(width_realisations=200_000, batch=200_000), ValueError, "width-2 runs.*realisations"),
])
def test_bad_config(kw, exc, name):
    with pytest.raises(exc, match=name):
        dataclasses.replace(SMALL, **kw)


def test_bad_runner_input(tmp_path):
    with pytest.raises(TypeError, match="DepthWidthConfig"):
        dw.run_depth_width({"depths": (4, 8)}, tmp_path)
