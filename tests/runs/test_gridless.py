"""``grid.kind = "none"``: tokens on S^{d−1}, d ≥ 4, for particles and the transformer without a
grid — configuration rules (a density refused naming the key), the exact initial samplers
against their moments, a d = 5 run end to end, its restart bit for bit, and its picture."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ive

from spherepde.cli import main
from spherepde.runs.config import RunConfig, apply_set
from spherepde.runs.initial import sample_initial
from spherepde.runs.restart import restart
from spherepde.runs.execute import run
from spherepde.io.netcdf import open_dataset
from spherepde.solvers import controller as controller_module

D = 5
E1 = [1.0, 0.0, 0.0, 0.0, 0.0]
SYNC = {  # noise only, 12 tokens on S⁴, small
    "grid": {"kind": "none", "dimension": D},
    "initial": {"kind": "vmf", "centres": [E1], "kappas": [20.0]},
    "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "seed": 3}},
    "representations": {"density": False, "particles": {"n": 12, "seed": 1}},
    "stepping": {"t_end": 1.0, "dt": 0.05, "output_every": 0.25},
    "outputs": {"diagnostics": ["energy"], "energy_beta": 1.0},
}


def _bad(*sets, base=SYNC):
    raw = base
    for s in sets:
        raw = apply_set(raw, s)
    return raw


BAD = [
    (_bad("grid.dimension=false"), ["grid.dimension", "required with grid.kind = 'none'"]),
    (_bad("grid.dimension=3"), ["grid.dimension", "4..1024", "'sphere'"]),
    (_bad("grid.dimension=4.0"), ["grid.dimension", "integer"]),
    (_bad("grid.kind=sphere"), ["grid.dimension", "not used with grid.kind = 'sphere'"]),
    (_bad("grid.nlat=16"), ["grid.nlat", "not used with grid.kind = 'none'"]),
    (_bad("representations.density=true"), ["representations.density", "needs a grid",
                                            "grid.kind = 'none'"]),
    (_bad("initial={kind = 'low-mode'}"), ["initial.kind", "'low-mode'", "needs a grid"]),
    (_bad("dynamics.noise.n_max=4"), ["dynamics.noise.n_max", "not used with grid.kind = 'none'"]),
    (_bad("dynamics.noise.horizon=2.0"), ["dynamics.noise.horizon", "no longer a key"]),
    (_bad("dynamics.noise.realisation=-1"), ["dynamics.noise.realisation", "integer >= 0"]),
    (_bad("stepping.dt=false"), ["stepping.dt", "required with grid.kind = 'none'"]),
    (_bad("representations.transformer={depth = 4, width = inf}"),
     ["representations.transformer.width", "integer width"]),
    (_bad("initial.centres=[[1.0, 0.0, 0.0]]"), ["initial.centres", "5 entries"]),
]


@pytest.mark.parametrize("raw, words", BAD, ids=[w[0] + ":" + w[-1] for _, w in BAD])
def test_bad_gridless_input_names_the_key(raw, words):
    with pytest.raises(ValueError) as err:
        RunConfig.from_dict(raw)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_density_in_d5_refused_by_the_command_before_any_file(tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(SYNC))
    out = tmp_path / "never"
    rc = main(["run", str(cfg), "--set", "representations.density=true", "--output", str(out)])
    assert rc == 2 and "representations.density" in capsys.readouterr().err and not out.exists()


def test_round_trip_keeps_the_dimension():
    c = RunConfig.from_dict(SYNC)
    assert c.d == D and c.to_dict()["grid"] == {"kind": "none", "dimension": D}
    assert RunConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c


# ---- the exact samplers: sample means against the law's moments, within 5 standard errors ------
N_SAMPLE = 20_000


def _within(sample: np.ndarray, expected: float, sd: float) -> None:
    """|mean − expected| ≤ 5 σ/√n (σ the law's standard deviation of the observable)."""
    assert abs(float(sample.mean()) - expected) <= 5 * sd / math.sqrt(sample.size)


def test_uniform_sampler_moments():
    x = sample_initial(RunConfig.from_dict(_bad("initial={kind = 'uniform'}")).initial, D, N_SAMPLE, 0)
    assert x.shape == (N_SAMPLE, D) and np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    for j in range(D):  # E x_j = 0, E x_j² = 1/d, Var x_j² = E x_j⁴ − 1/d² = 3/(d(d+2)) − 1/d²
        _within(x[:, j], 0.0, math.sqrt(1 / D))
        _within(x[:, j] ** 2, 1 / D, math.sqrt(3 / (D * (D + 2)) - 1 / D**2))


def test_cosine_sampler_moments():
    a = 0.8  # ρ ∝ 1 + a t, t = ⟨x, e⟩: E t = a E_u t² = a/d, E t² = E_u t² = 1/d (odd moments vanish)
    cfg = RunConfig.from_dict(_bad(f"initial={{kind = 'cosine', direction = {E1}, amplitude = {a}}}")).initial
    t = sample_initial(cfg, D, N_SAMPLE, 1)[:, 0]
    _within(t, a / D, math.sqrt(1 / D - (a / D) ** 2))


def test_vmf_mixture_sampler_moments():
    kappa = 6.0  # mean resultant length A_d(κ) = I_{d/2}(κ)/I_{d/2−1}(κ)
    e2 = [0.0, 1.0, 0.0, 0.0, 0.0]
    cfg = RunConfig.from_dict(_bad(f"initial={{kind = 'vmf', centres = [{E1}, {e2}], kappas = "
                                   f"[{kappa}, 0.0], weights = [3.0, 1.0]}}")).initial
    x = sample_initial(cfg, D, N_SAMPLE, 2)
    A = ive(D / 2, kappa) / ive(D / 2 - 1, kappa)
    # mixture 3/4 vMF(e1, κ) + 1/4 uniform: E⟨x, e1⟩ = (3/4) A, E⟨x, e2⟩ = 0; |t| ≤ 1 bounds σ ≤ 1
    _within(x[:, 0], 0.75 * A, 1.0)
    _within(x[:, 1], 0.0, 1.0)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)


# ---- a d = 5 run end to end ----------------------------------------------------------------------
def test_d5_noise_only_run_writes_particles_in_r5(tmp_path):
    summary = run(RunConfig.from_dict(SYNC), tmp_path / "o", progress=False)
    ds = open_dataset(tmp_path / "o" / "run.nc")
    assert ds["position"].dims == ("time", "particle", "dim") and ds["position"].shape == (5, 12, D)
    pos = ds["position"].values
    assert np.all(np.isfinite(pos))
    assert np.allclose(np.linalg.norm(pos, axis=-1), 1.0, atol=1e-12)
    assert json.loads(ds.attrs["grid_json"]) == {"kind": "none", "dimension": D}
    assert not {"density", "lat", "lon", "cell_area"} & set(ds.variables)
    assert summary["noise"]["d"] == D and summary["noise"]["lambda_1"] < 0
    e = ds["particles_energy"].values
    assert np.all(np.isfinite(e)) and e[0] > 0
    # the same configuration gives the same bits; another realisation another path
    run(RunConfig.from_dict(SYNC), tmp_path / "again", progress=False)
    assert np.array_equal(open_dataset(tmp_path / "again" / "run.nc")["position"].values, pos)
    run(RunConfig.from_dict(_bad("dynamics.noise.realisation=1")), tmp_path / "r1", progress=False)
    other = open_dataset(tmp_path / "r1" / "run.nc")["position"].values
    assert np.array_equal(other[0], pos[0]) and not np.array_equal(other[-1], pos[-1])


def test_d5_transformer_and_attention_run(tmp_path):
    eye = np.eye(D).tolist()
    raw = _bad(f"dynamics.attention={{Q = {eye}, K = {eye}, V = {eye}, beta = 2.0}}",
               "representations.transformer={depth = 8, width = 6, n = 10, seed = 2}",
               "outputs.diagnostics=['energy', 'dist_eigenspace']")
    run(RunConfig.from_dict(raw), tmp_path / "o", progress=False)
    ds = open_dataset(tmp_path / "o" / "run.nc")
    assert ds["transformer_position"].shape == (5, 10, D)
    for name in ("particles_energy", "transformer_energy", "particles_dist_eigenspace"):
        assert np.all(np.isfinite(ds[name].values)), name


def _variables(path) -> dict:
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        return {name: np.array(v[...]) for name, v in ds.variables.items()}


def test_d5_run_interrupted_then_restarted_equals_the_uninterrupted_bits(tmp_path, monkeypatch):
    """The exact point noise draws from a generator: its state is kept with the restart slot, so
    the continued run draws the same normals (bit for bit, as for the grids' Brownian path)."""
    raw = apply_set(SYNC, "representations.transformer={depth = 8, width = 6, n = 10, seed = 2}")
    run(RunConfig.from_dict(raw), tmp_path / "full", progress=False)
    calls, original = {"n": 0}, controller_module.next_step

    def next_step(*args):  # Ctrl-C in the 10th step: inside the particles (20 steps)
        calls["n"] += 1
        if calls["n"] > 9:
            raise KeyboardInterrupt
        return original(*args)

    monkeypatch.setattr(controller_module, "next_step", next_step)
    with pytest.raises(KeyboardInterrupt):
        run(RunConfig.from_dict(raw), tmp_path / "stopped", progress=False)
    monkeypatch.undo()
    restart(tmp_path / "stopped" / "run.nc", output=tmp_path / "resumed", progress=False)
    a, b = _variables(tmp_path / "full" / "run.nc"), _variables(tmp_path / "resumed" / "run.nc")
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name
    assert np.all(np.isfinite(a["position"])) and np.all(np.isfinite(a["transformer_position"]))


def test_plot_of_a_d5_run_draws_the_diagnostics_only(tmp_path, capsys):
    raw = apply_set(apply_set(SYNC, "stepping.t_end=4.0"), "stepping.output_every=0.25")
    run(RunConfig.from_dict(raw), tmp_path / "o", progress=False)
    rc = main(["plot", str(tmp_path / "o" / "run.nc"), "--output", str(tmp_path / "fig"), "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert [p.split("/")[-1] for p in res["figures"]] == ["diagnostics.png"]
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == ["diagnostics.png"]
    assert (tmp_path / "fig" / "diagnostics.png").stat().st_size > 10_000


@pytest.mark.slow
def test_synchronisation_rate_of_the_d5_example_over_realisations(tmp_path):
    """Paper 2: once concentrated, log e^{−β}E_β falls at the pathwise rate 2λ₁ (λ₁ < 0 the top
    Lyapunov exponent of the noise flow).  The example, shrunk to 16 tokens, over 16 realisations
    (a sweep over dynamics.noise.realisation): the mean of the per-path fitted rates (t ≥ t_end/4,
    as `spherepde plot` fits) lies within 4 standard errors of 2λ₁ — the error model is the
    path-to-path spread of finite-time rates, estimated from the sample (Student t, 15 degrees of
    freedom: |t| > 4 has probability 0.1 %)."""
    import xarray as xr

    from spherepde.runs.config import read_raw
    from spherepde.runs.sweep import run_sweep
    from spherepde.io.series import RATE_FIT_FROM
    from spherepde.noise.kernel import synchronisation_rate
    from spherepde.validation.fits import log_rate
    from spherepde.noise import NoiseKernel

    example = read_raw(Path(__file__).parents[2] / "examples" / "synchronization_d5.toml")
    raw = apply_set(apply_set(example, "representations.particles.n=16"), "stepping.output_every=0.2")
    raw["sweep"] = {"dynamics.noise.realisation": list(range(16))}
    s = run_sweep(raw, tmp_path, workers=0, progress=False)
    with xr.open_dataset(s["file"]) as ds:
        t, e = ds["time"].values, ds["particles_energy"].values
    assert e.shape == (16, t.size) and np.all(np.isfinite(e)) and np.all(e > 0)
    fit = t >= RATE_FIT_FROM * t[-1]
    rates = np.array([log_rate(t[fit], ei[fit])[0] for ei in e])
    noise = example["dynamics"]["noise"]
    lam1 = NoiseKernel(noise["activation"], d=D, sigma_u=noise["sigma_u"], sigma_w=noise["sigma_w"]).lambda_1
    assert synchronisation_rate(example) == pytest.approx(2 * lam1, rel=1e-15)
    se = rates.std(ddof=1) / math.sqrt(rates.size)
    print(f"mean rate {rates.mean():.3f} ± {se:.3f}, 2λ₁ = {2 * lam1:.3f}")
    assert abs(rates.mean() - 2 * lam1) <= 4 * se
