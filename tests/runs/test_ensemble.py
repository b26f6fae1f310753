"""Ensembles as sweeps over the Brownian path's realisations (``spherepde ensemble``): a real dask
cluster, sweep.nc with a sorted realisation dimension, antithetic pairs, the harmonic moments and
float32 fields of run.nc, bad input before any file."""
import json

import numpy as np
import pytest
from conftest import interrupt_after

from spherepde.runs import sweep as sweep_module
from spherepde.runs.config import RunConfig, apply_set
from spherepde.runs.ensemble import DEFAULT, ensemble_config, run_ensemble
from spherepde.runs.build import build
from spherepde.runs.execute import run
from spherepde.io.netcdf import open_dataset
from spherepde.validation.metrics import as_measure, moments

EPS = np.finfo(float).eps

#: a small ensemble on S¹ (noise only, von Mises–Fisher ρ_0), and the same on S²
CIRCLE = {"grid": {"kind": "circle", "n": 32},
          "initial": {"kind": "vmf", "centres": [[1.0, 0.0]], "kappas": [2.0]},
          "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5,
                                 "variance_fraction": 0.999, "seed": 0}},
          "representations": {"density": True},
          "stepping": {"t_end": 0.4, "dt": 0.05, "output_every": 0.1},
          "outputs": {"diagnostics": ["mass", "moments", "energy"], "precision": "float32"}}
SPHERE = {**DEFAULT, "grid": {"kind": "sphere", "nlat": 8},
          "stepping": {"t_end": 0.2, "dt": 0.05, "output_every": 0.1}}


def _with(raw, *assignments):
    for a in assignments:
        raw = apply_set(raw, a)
    return raw


def test_dask_ensemble_is_the_sweep_of_serial_runs(tmp_path, single_threaded):
    res = run_ensemble(CIRCLE, 4, tmp_path / "e", workers=2, progress=False)
    assert (res["members"], res["completed"], res["skipped"], res["realisations"]) == (4, 4, 0, 4)
    ds = open_dataset(tmp_path / "e" / "sweep.nc")
    assert ds["realisation"].values.tolist() == [0, 1, 2, 3]
    assert ds["density"].dims == ("realisation", "time", "theta") and ds["density"].dtype == np.float32
    assert ds["moment_re"].dims == ("realisation", "time", "moment")
    assert ds["moment_l"].values.tolist() == [0, 1, 2, 3]
    # member r is the run of realisation r alone, bit for bit (one thread, as in the workers)
    for r in (0, 3):
        with single_threaded():
            run(RunConfig.from_dict(_with(CIRCLE, f"dynamics.noise.realisation={r}")),
                tmp_path / f"alone{r}", progress=False)
        alone = open_dataset(tmp_path / f"alone{r}" / "run.nc")
        for name in ("density", "moment_re", "energy"):
            np.testing.assert_array_equal(ds[name].values[r], alone[name].values)
    # a positive conservative step keeps the mass to round-off: ≤ steps · 8 ε
    assert np.all(np.abs(ds["mass"].values - 1.0) <= 8 * 8 * EPS)
    assert np.max(np.abs(ds["density"].values[0, -1] - ds["density"].values[1, -1])) > 1e-3
    again = run_ensemble(CIRCLE, 4, tmp_path / "e", workers=0, progress=False)
    assert (again["completed"], again["skipped"]) == (0, 4)  # a re-run skips finished members


PICTURES = ["realisation0.png", "mean.png", "ensemble_diagnostics.png"]


@pytest.mark.parametrize("raw", [SPHERE, CIRCLE], ids=["sphere", "circle"])
def test_ensemble_draws_one_path_the_mean_and_the_diagnostics(raw, tmp_path, capsys):
    from spherepde.cli import main

    res = run_ensemble(raw, 2, tmp_path / "s", workers=0, progress=False)
    assert [p.rsplit("/", 1)[-1] for p in res["figures"]] == PICTURES
    for p in res["figures"]:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["realisations"] == 2 and summary["figures"] == res["figures"]
    # spherepde plot of the ensemble's sweep.nc redraws them (not convergence plots)
    assert main(["plot", str(tmp_path / "s" / "sweep.nc"), "--output", str(tmp_path / "p"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p.rsplit("/", 1)[-1] for p in out["figures"]] == PICTURES


def test_ensemble_without_fields_draws_its_diagnostics(tmp_path):
    """outputs.fields = false (what heat-kernel runs): no maps, the diagnostics of every path;
    ``spherepde plot`` of one member's run.nc draws its diagnostics alone, no empty maps."""
    from spherepde.io.figures import plot_run

    raw = _with(CIRCLE, "outputs.fields=false")
    res = run_ensemble(raw, 2, tmp_path / "e", workers=0, progress=False)
    assert [p.rsplit("/", 1)[-1] for p in res["figures"]] == ["ensemble_diagnostics.png"]
    out = plot_run(tmp_path / "e" / "members" / "member-0000" / "run.nc", tmp_path / "p")
    assert [p.rsplit("/", 1)[-1] for p in out["figures"]] == ["diagnostics.png"]


def test_antithetic_pairs_are_path_and_minus_path():
    raw = _with(CIRCLE, "dynamics.noise.antithetic=true")
    paths = [build(RunConfig.from_dict(_with(raw, f"dynamics.noise.realisation={r}"))).path
             for r in range(4)]
    plain = build(RunConfig.from_dict(_with(CIRCLE, "dynamics.noise.realisation=1"))).path
    for t in (0.05, 0.2, 0.4):
        np.testing.assert_array_equal(paths[1](t), -paths[0](t))
        np.testing.assert_array_equal(paths[3](t), -paths[2](t))
        np.testing.assert_array_equal(paths[2](t), plain(t))  # pair j = 1 is path 1
    assert not np.array_equal(paths[0](0.4), paths[2](0.4))


def test_antithetic_pair_mean_cancels_the_first_order_response(tmp_path):
    """One step of size Δt moves ρ by O(√Δt) (the noise, odd in the path) plus O(Δt) (the
    Stratonovich drift, even): the pair mean keeps only the even part, so at Δt = 0.01 it is at
    most a third of one path's change (√Δt/Δt = 10 between the two orders).  One draw: at
    Δt = 0.05 (√Δt/Δt ≈ 4.5) 9 of 40 seeds fail this bound, at 0.01 none (largest ratio 0.30;
    docs/prototypes/issue22_noise/antithetic_one_step.json)."""
    raw = _with(CIRCLE, "dynamics.noise.antithetic=true", "stepping.t_end=0.01", "stepping.dt=0.01",
                "stepping.output_every=0.01")
    rho = []
    for r in (0, 1):
        run(RunConfig.from_dict(_with(raw, f"dynamics.noise.realisation={r}")), tmp_path / str(r),
            progress=False)
        rho.append(open_dataset(tmp_path / str(r) / "run.nc")["density"].values.astype(float))
    one = np.abs(rho[0][1] - rho[0][0]).max()
    pair = np.abs(0.5 * (rho[0][1] + rho[1][1]) - rho[0][0]).max()
    assert one > 1e-3 and pair < one / 3


@pytest.mark.parametrize("raw", [CIRCLE, _with(SPHERE, "outputs.moments_lmax=4",
                                               "representations.particles={n = 30, seed = 1}")],
                         ids=["circle", "sphere-with-particles"])
def test_moments_are_those_of_the_stored_measures(raw, tmp_path):
    """moment_re + i moment_im = ∫ conj(Y_lm) dρ of the stored field (and of the stored
    positions), to round-off: float32 storage of ρ (½ eps32 relative) summed with weights of
    total mass 1 and |Y_lm| ≤ √((2l+1)/4π) ≤ 1 gives ≤ eps32 · max ρ · area."""
    raw = _with(raw, "outputs.precision='float64'")
    config = RunConfig.from_dict(raw)
    run(config, tmp_path, progress=False)
    ds = open_dataset(tmp_path / "run.nc")
    grid = build(config).grid
    lmax = config.outputs.moments_lmax
    q = ds["moment_re"].values + 1j * ds["moment_im"].values
    assert q.shape == (ds.sizes["time"], ds.sizes["moment"])
    for i in range(ds.sizes["time"]):
        x, w = as_measure(grid, ds["density"].values[i])
        assert np.max(np.abs(q[i] - moments(x, w, lmax))) <= 64 * EPS
    l0 = ds["moment_l"].values == 0
    norm = 1.0 / np.sqrt(4 * np.pi) if config.d == 3 else 1.0  # degree 0: the mass times Y_00
    assert np.all(np.abs(q[:, l0].real - norm) <= 64 * EPS)
    if "position" in ds:
        x = ds["position"].values
        qp = ds["particles_moment_re"].values + 1j * ds["particles_moment_im"].values
        n = x.shape[1]
        for i in range(ds.sizes["time"]):
            assert np.max(np.abs(qp[i] - moments(x[i], np.full(n, 1.0 / n), lmax))) <= 64 * EPS


def test_float32_fields_restart_bit_for_bit(tmp_path):
    from spherepde.runs.restart import restart

    full = _with(CIRCLE, "stepping.t_end=0.4")
    run(RunConfig.from_dict(full), tmp_path / "full", progress=False)
    run(RunConfig.from_dict(_with(full, "stepping.t_end=0.2")), tmp_path / "half", progress=False)
    restart(tmp_path / "half" / "run.nc", ["stepping.t_end=0.4"], tmp_path / "cont", progress=False)
    a, b = open_dataset(tmp_path / "full" / "run.nc"), open_dataset(tmp_path / "cont" / "run.nc")
    assert a["density"].dtype == np.float32 and a["restart_density"].dtype == np.float64
    for name in ("density", "moment_re", "moment_im", "energy", "restart_density"):
        np.testing.assert_array_equal(a[name].values, b[name].values)


def test_interrupted_ensemble_keeps_the_finished_members_and_their_pictures(tmp_path, monkeypatch):
    interrupt_after(monkeypatch, sweep_module, "_run_member", 1)
    with pytest.raises(KeyboardInterrupt):
        run_ensemble(SPHERE, 3, tmp_path / "o", workers=0, progress=False)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["completed"] == 1
    assert [p.rsplit("/", 1)[-1] for p in summary["figures"]] == PICTURES
    import netCDF4  # a partial sweep.nc of the finished member, marked so (issue: no silent loss)

    with netCDF4.Dataset(tmp_path / "o" / "sweep.nc") as ds:
        assert ds.status == "interrupted" and ds.members_missing == "member-0001 member-0002"


@pytest.mark.parametrize("raw, realisations, match", [
    (CIRCLE, 0, r"--realisations: must be an integer >= 1"),
    (_with(CIRCLE, "dynamics.noise.antithetic=true"), 3, r"--realisations: antithetic .* even"),
    ({**CIRCLE, "dynamics": {"attention": {"Q": [[1.0, 0.0], [0.0, 1.0]], "K": [[1.0, 0.0], [0.0, 1.0]],
                                           "V": [[1.0, 0.0], [0.0, 1.0]], "beta": 1.0}}}, 2,
     r"dynamics.noise: an ensemble is over the realisations"),
    ({**CIRCLE, "sweep": {"dynamics.noise.realisation": [0, 1]}}, 2,
     r"sweep.dynamics.noise.realisation: set by --realisations"),
    (_with(CIRCLE, "dynamics.noise.antithetic=1"), 2, r"dynamics.noise.antithetic: must be true or false"),
    (_with(CIRCLE, "outputs.moments_lmax=40"), 2, r"outputs.moments_lmax: at most 16"),
    (_with(CIRCLE, "outputs.diagnostics=['mass']", "outputs.moments_lmax=2"), 2,
     r"outputs.moments_lmax: only used with 'moments'"),
    (_with(CIRCLE, "outputs.precision='float16'"), 2, r"outputs.precision: must be one of"),
    (_with(CIRCLE, "stepping.dt=0.8", "stepping.t_end=1.6", "stepping.output_every=0.8"), 2,
     r"stepping.dt: .*too large for the noise"),
])
def test_bad_input_named_before_any_file(raw, realisations, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        run_ensemble(raw, realisations, tmp_path / "x", workers=0, progress=False)
    assert not (tmp_path / "x").exists()


def test_gridless_refuses_antithetic_and_moments():
    raw = {"grid": {"kind": "none", "dimension": 5}, "initial": {"kind": "uniform"},
           "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5,
                                  "antithetic": True}},
           "representations": {"density": False, "particles": {"n": 8, "seed": 0}},
           "stepping": {"t_end": 0.1, "dt": 0.05}, "outputs": {"diagnostics": ["energy"]}}
    with pytest.raises(ValueError, match=r"dynamics.noise.antithetic: needs a Brownian path"):
        RunConfig.from_dict(raw)
    raw["dynamics"]["noise"]["antithetic"] = False
    raw["outputs"]["diagnostics"] = ["moments"]
    with pytest.raises(ValueError, match=r"'moments' are harmonic moments on S² or S¹"):
        RunConfig.from_dict(raw)


def test_ensemble_config_adds_the_realisations_to_the_sweep():
    raw = ensemble_config({**CIRCLE, "sweep": {"grid.n": [16, 32]}}, 3)
    assert raw["sweep"] == {"grid.n": [16, 32], "dynamics.noise.realisation": [0, 1, 2]}
    assert len(sweep_module.expand(raw).members) == 6


@pytest.mark.parametrize("grid", [{"kind": "circle", "n": 32}, {"kind": "none", "dimension": 4}],
                         ids=["circle", "gridless"])
def test_particles_per_realisation_draw_new_tokens_for_every_path(grid):
    """representations.particles.per_realisation: realisation r draws its tokens from the
    generator of (seed, r): the same r gives the same tokens, another r others; without it every
    realisation starts from the same tokens."""
    base = {**CIRCLE, "grid": grid, "initial": {"kind": "uniform"},
            "representations": {"density": False, "particles": {"n": 20, "seed": 3}},
            "outputs": {"diagnostics": ["energy"]}}
    x0 = {}
    for per in (False, True):
        raw = _with(base, f"representations.particles.per_realisation={str(per).lower()}")
        reps = [build(RunConfig.from_dict(_with(raw, f"dynamics.noise.realisation={r}"))).particle_rep
                for r in (0, 1, 1)]
        x0[per] = [rep.x0 for rep in reps if rep is not None]
    assert np.array_equal(x0[False][0], x0[False][1])
    assert np.array_equal(x0[True][1], x0[True][2]) and not np.allclose(x0[True][0], x0[True][1])
    assert "per_realisation" not in RunConfig.from_dict(base).to_dict()["representations"]["particles"]


def test_particles_per_realisation_bad_input():
    with pytest.raises(ValueError, match=r"representations.particles.per_realisation: needs dynamics.noise"):
        RunConfig.from_dict({**CIRCLE, "dynamics": {"attention": {
            "Q": [[1.0, 0.0], [0.0, 1.0]], "K": [[1.0, 0.0], [0.0, 1.0]], "V": [[1.0, 0.0], [0.0, 1.0]],
            "beta": 1.0}}, "representations": {"density": True, "particles": {"n": 5, "per_realisation": True}},
            "stepping": {"t_end": 0.4, "dt": 0.05, "output_every": 0.1}})
    with pytest.raises(ValueError, match=r"per_realisation: only with initial = 'sample'"):
        RunConfig.from_dict(_with(SPHERE, "representations.particles={initial = 'quadrature', "
                                          "per_realisation = true}"))
    with pytest.raises(ValueError, match=r"per_realisation: must be true or false"):
        RunConfig.from_dict(_with(CIRCLE, "representations.particles={n = 5, per_realisation = 1}"))
