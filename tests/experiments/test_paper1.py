"""Paper 1 experiments end to end on tiny configurations: files written, physics visible.

The runs go one after the other in the test's process (``workers=0``): the local dask cluster of
the default is tested in tests/test_cli_defaults.py and tests/runs/test_sweep.py."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from spherepde.cli import main
from spherepde.runs.config import RunConfig
from spherepde.io.netcdf import open_dataset, read_config
from spherepde.experiments import circle_clusters, metastability, particles_vs_density, terminal_phase
from spherepde.validation import clusters


def test_metastability_concentrates_then_leaves(tmp_path):
    cfg = dataclasses.replace(metastability.MetastabilityConfig.quick(), workers=0, nlat=12, betas=(5.0, math.inf),
                              t_end=16.0, n_outputs=16)
    s = metastability.run_metastability(cfg, tmp_path)
    runs = {r["beta"]: r for r in s["runs"]}
    for r in runs.values():
        assert r["w2"][0] > 0.9  # ρ0 is far from the two-point measure
        assert r["w2_min"] < 0.7 * r["w2"][0]  # the early phase concentrates
        assert abs(r["mass_error"]) < 1e-13 and r["min_density"] > -1e-14
    # finite β leaves the metastable state (V's saddle at e_y); β = ∞ stays (linear flow, no exit)
    assert math.isfinite(runs[5.0]["exit_time"])
    assert math.isnan(runs[math.inf]["exit_time"])
    assert s["min_w2"] == {"5": runs[5.0]["w2_min"], "inf": runs[math.inf]["w2_min"]}
    check = s["resolution_check"]  # the largest β again at the even nlat nearest 1.5·12: refined
    assert check["beta"] == math.inf and check["nlat"] == [12, 18]  # [coarser, finer]
    assert check["w2_min"][0] == runs[math.inf]["w2_min"] and 0.0 < check["w2_min"][1] < 1.0
    assert check["relative_change"] == pytest.approx(abs(check["w2_min"][1] - check["w2_min"][0])
                                                     / check["w2_min"][1], rel=1e-12)
    assert check["at_end"] == [check["t_min"][0] >= 16.0, check["t_min"][1] >= 16.0]
    # the whole trajectory: the largest change of E_β, W₂ and both eigenspace distances
    assert set(check["per_quantity"]) == set(metastability.CHECKED)
    worst = check["worst"]
    assert check["max_relative_change"] == check["per_quantity"][worst["quantity"]]["change"] > 0
    assert worst["t"] in s["times"]
    assert check["resolved"] == (check["max_relative_change"] < 0.02)
    # nlat 12 against 18 is far from resolved at β = ∞, where the clusters collapse
    assert check["resolved"] is False
    ds = open_dataset(runs[5.0]["file"])
    assert ds.sizes["time"] == 17 and {"Q", "K", "V"} <= set(ds.data_vars)
    # each β is a `spherepde run` of the set-up's configuration, one member of a sweep over β
    stored = read_config(runs[5.0]["file"])
    assert stored["dynamics"]["attention"]["beta"] == 5.0
    assert RunConfig.from_dict(stored) == RunConfig.from_dict(
        {**metastability.setup_run_config(cfg, 5.0), "outputs": stored["outputs"]})
    assert (tmp_path / "metastability" / "sweep.nc").is_file()
    assert json.loads((tmp_path / "summary.json").read_text())["experiment"] == "metastability"
    assert (tmp_path / "metastability.png").stat().st_size > 10_000


def test_terminal_phase_switches_to_v_eigenspace(tmp_path):
    cfg = dataclasses.replace(terminal_phase.TerminalPhaseConfig.quick(), workers=0, nlat=12, betas=(5.0,), t_end=20.0,
                              n_outputs=10, map_times=(0.0, 20.0), check_nlat=8)
    s = terminal_phase.run_terminal_phase(cfg, tmp_path)
    r = s["runs"][0]
    assert 0 < r["switch_time"] < 20
    assert r["dist_E_V"][-1] < 0.5 * r["dist_E_VBt"][-1]
    check = s["resolution_check"]  # β = 5 again at the coarser nlat 8: the switch time moves with the grid
    assert check["nlat"] == [8, 12] and check["switch_time"][1] == r["switch_time"]
    assert 0 < check["switch_time"][0] < 20
    assert check["switch_time_change"] == pytest.approx(
        abs(check["switch_time"][0] - r["switch_time"]) / r["switch_time"], rel=1e-12)
    assert (tmp_path / "terminal_maps_beta5.png").is_file()


def test_circle_clusters_count_grows_with_beta(tmp_path):
    cfg = dataclasses.replace(circle_clusters.CircleClustersConfig.quick(), betas=(3.0, 30.0), t_end=20.0, n_outputs=4)
    s = circle_clusters.run_circle_clusters(cfg, tmp_path)
    n = [r["n_clusters"][-1] for r in s["runs"]]
    assert 0 < n[0] < n[1]
    for r in s["runs"]:
        assert abs(r["mass_error"]) < 1e-13
        assert sum(c["mass"] for c in r["final_clusters"]) > 0.9  # the mass sits in the clusters


def _leaves(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_circle_clusters_run_config_is_the_example():
    """The experiment's `spherepde run` configuration for one β is examples/circle_clusters.toml
    apart from the keys the experiment sets (grid size, β, times) and the particles it omits."""
    import tomllib
    from pathlib import Path

    example = tomllib.loads((Path(__file__).parents[2] / "examples" / "circle_clusters.toml").read_text())
    example = _leaves(RunConfig.from_dict(example).to_dict())
    cfg = circle_clusters.CircleClustersConfig()
    mine = _leaves(RunConfig.from_dict(circle_clusters.setup_run_config(cfg, 30.0)).to_dict())
    differ = {k for k in example.keys() | mine.keys() if example.get(k, "absent") != mine.get(k, "absent")}
    particles = {k for k in example if k.startswith("representations.particles")}
    assert particles and not any(k.startswith("representations.particles") for k in mine)
    assert differ == {"grid.n", "stepping.t_end", "stepping.output_every", *particles}  # β = 30 there too
    assert mine["grid.n"] == cfg.cells(30.0) and mine["initial.kind"] == "random-phase"
    assert mine["dynamics.attention.beta"] == 30.0


def test_random_phase_initial_is_the_experiments_perturbation():
    """initial.kind = "random-phase" is the perturbation the experiment drew before it became run
    configurations, bit for bit: amplitudes N(0, 1)/√modes, then uniform phases, default_rng(seed)."""
    import numpy as np

    from spherepde.runs.initial import initial_density
    from spherepde.grids import CircleGrid

    cfg = circle_clusters.CircleClustersConfig()
    for beta in (3.0, 30.0):
        rc = RunConfig.from_dict(circle_clusters.setup_run_config(cfg, beta))
        grid = CircleGrid(cfg.cells(beta))
        rng = np.random.default_rng(cfg.seed)
        amp = rng.normal(size=cfg.modes) / math.sqrt(cfg.modes)
        phase = rng.uniform(0.0, 2 * np.pi, cfg.modes)
        k = np.arange(1, cfg.modes + 1)[:, None]
        pert = np.sum(amp[:, None] * np.cos(k * grid.theta[None, :] + phase[:, None]), axis=0)
        assert np.array_equal(initial_density(rc.initial, grid), (1.0 + cfg.eps * pert) / (2 * np.pi))


@pytest.mark.parametrize("change, message", [
    ({"modes": 80}, "initial.max_degree"),   # 2·80 > 128 cells
    ({"eps": 5.0}, "initial.amplitude"),     # ρ_0 < 0 somewhere
])
def test_circle_clusters_errors_before_any_file(tmp_path, change, message):
    cfg = dataclasses.replace(circle_clusters.CircleClustersConfig.quick(), betas=(3.0,), **change)
    with pytest.raises(ValueError, match=message):
        circle_clusters.run_circle_clusters(cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_random_phase_is_checked_against_the_grid():
    eye2, eye3 = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    with pytest.raises(ValueError, match="initial.kind: 'random-phase' is a density on the circle"):
        RunConfig.from_dict({"grid": {"kind": "sphere", "nlat": 8}, "initial": {"kind": "random-phase"},
                             "dynamics": {"attention": {"Q": eye3, "K": eye3, "V": eye3, "beta": 1.0}}})
    with pytest.raises(ValueError, match="initial.max_degree: at most grid.n/2 = 16"):
        RunConfig.from_dict({"grid": {"kind": "circle", "n": 32},
                             "initial": {"kind": "random-phase", "max_degree": 17},
                             "dynamics": {"attention": {"Q": eye2, "K": eye2, "V": eye2, "beta": 1.0}}})
    from spherepde.runs.config import apply_seed

    assert apply_seed({"initial": {"kind": "random-phase", "seed": 0}}, 7)["initial"]["seed"] == 7


def test_circle_clusters_rerun_skips_complete_runs(tmp_path):
    cfg = circle_clusters.CircleClustersConfig(betas=(3.0,), t_end=1.0, n_outputs=2, min_cells=32,
                                               cells_per_width=2.0, modes=8)
    first = circle_clusters.run_circle_clusters(cfg, tmp_path)
    nc = tmp_path / "runs" / "beta3" / "run.nc"
    assert first["runs"][0]["file"] == str(nc)
    stamp = nc.stat().st_mtime_ns
    again = circle_clusters.run_circle_clusters(cfg, tmp_path)
    assert nc.stat().st_mtime_ns == stamp  # not run again
    assert again["runs"] == first["runs"]


def test_particles_vs_density_error_falls_with_n(tmp_path):
    cfg = dataclasses.replace(particles_vs_density.ParticlesVsDensityConfig.quick(), workers=0, nlat=12, t_end=1.0,
                              particle_counts=(64, 256, 1024), seeds=(0, 1))
    s = particles_vs_density.run_particles_vs_density(cfg, tmp_path)
    r = s["runs"][0]
    errs = [p["moment_error"] for p in r["particles"]]
    assert errs[0] > errs[1] > errs[2]
    # Monte Carlo: the moment error falls like N^(-1/2); two seeds, three N: a loose but
    # failing-capable bracket around −1/2
    assert -0.8 < r["rate_moment_error"]["exponent"] < -0.25


@pytest.mark.parametrize("name", ["metastability", "terminal-phase", "particles-vs-density"])
def test_cli_refuses_bad_overrides(name, capsys, tmp_path):
    assert main(["experiment", name, "--nlat", "7", "--output", str(tmp_path)]) == 2
    assert "nlat" in capsys.readouterr().err
    assert main(["experiment", name, "--betas", "0", "--output", str(tmp_path)]) == 2
    assert "betas" in capsys.readouterr().err
    assert main(["experiment", name, "--betas", "5", "5", "--output", str(tmp_path / "o")]) == 2
    assert "--betas must be distinct" in capsys.readouterr().err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("counts", [["100"], ["1", "100"], ["500", "500"]])
def test_cli_refuses_bad_particle_counts(counts, capsys, tmp_path):
    assert main(["experiment", "particles-vs-density", "--particle-counts", *counts,
                 "--output", str(tmp_path)]) == 2
    assert "--particle-counts" in capsys.readouterr().err


def test_particles_vs_density_w2_beyond_the_exact_limit(tmp_path, monkeypatch):
    """Above the exact-EMD size the experiment reports W₂ with its bound instead of refusing."""
    from spherepde.validation import metrics

    real = metrics.w2_with_bound
    monkeypatch.setattr(metrics, "w2_with_bound",
                        lambda *a, **k: real(*a, **{**k, "max_entries": 20_000}))
    cfg = dataclasses.replace(particles_vs_density.ParticlesVsDensityConfig.quick(), workers=0, nlat=12, t_end=0.5,
                              particle_counts=(64, 400), seeds=(0,))
    s = particles_vs_density.run_particles_vs_density(cfg, tmp_path)
    small, large = s["runs"][0]["particles"]
    assert small["w2_error_bound"] == 0.0  # 64 × 288 entries: exact
    assert 0.0 < large["w2_error_bound"] < 1.0 and large["w2"] > 0  # 400 × 288: coarsened


def test_cli_circle_clusters_json(tmp_path, capsys):
    rc = main(["experiment", "circle-clusters", "--quick", "--betas", "3", "--t-end", "4",
               "--output", str(tmp_path), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["experiment"] == "circle-clusters" and (tmp_path / "circle_clusters.png").is_file()


def test_resolution_check_flags_a_minimum_not_reached(tmp_path):
    """Stopped in the early phase (t = 2), W₂ is still falling: the minimum is the last output
    on both grids, and ``at_end`` says so (the min-W₂ change is then not a resolution measure;
    the trajectory comparison still is)."""
    cfg = dataclasses.replace(metastability.MetastabilityConfig.quick(), workers=0, nlat=8, betas=(5.0,), t_end=2.0,
                              n_outputs=4)
    check = metastability.run_metastability(cfg, tmp_path)["resolution_check"]
    assert check["nlat"] == [8, 12] and check["t_min"] == [2.0, 2.0]
    assert check["at_end"] == [True, True]


def test_the_amr_mesh_pole_is_turned_off_the_eigenvectors(tmp_path):
    """The amr runs of metastability and terminal-phase carry a mesh pole (issue 20: the
    saddles ±e_z of the set-up are the raster's own poles): [1, 1, 1]/√3 for the set-up, the
    resolution check's run the same; ``amr_pole = "off"`` gives the runs of before."""
    diag = 1 / math.sqrt(3)
    for cls in (metastability.MetastabilityConfig, terminal_phase.TerminalPhaseConfig):
        for cfg in (cls(), cls.quick()):
            section = metastability.setup_run_config(cfg, 10.0)["representations"]["density"]
            assert section["pole"] == pytest.approx([diag] * 3, abs=1e-15)
            levels = metastability.amr_levels(cfg)
            old = {"scheme": "amr", "max_level": levels[0], "mass_per_cell": levels[1]}
            assert {k: v for k, v in section.items() if k != "pole"} == old
            off = dataclasses.replace(cfg, amr_pole="off")
            assert metastability.setup_run_config(off, 10.0)["representations"]["density"] == old
            given = dataclasses.replace(cfg, amr_pole=(0.0, 0.0, 2.0))
            assert metastability.density_section(given)["pole"] == [0.0, 0.0, 1.0]
            fixed = dataclasses.replace(cfg, density_scheme="ffsl-ppm")  # "auto" has no effect there
            assert metastability.density_section(fixed) is True and metastability.amr_pole(fixed) is None
    # the run and its resolution check, as written: the same pole in both run.nc
    cfg = dataclasses.replace(metastability.MetastabilityConfig.quick(), workers=0, nlat=8, betas=(5.0,),
                              t_end=0.5, n_outputs=2)
    s = metastability.run_metastability(cfg, tmp_path)
    check = s["resolution_check"]
    assert s["amr_pole"] == check["pole"] == pytest.approx([diag] * 3, abs=1e-15)
    for file in (s["runs"][0]["file"], check["file"]):
        assert read_config(file)["representations"]["density"]["pole"] == pytest.approx([diag] * 3, abs=1e-15)
    assert read_config(check["file"])["grid"]["nlat"] == 12  # the refined run's base
    s = metastability.run_metastability(dataclasses.replace(cfg, amr_pole="off"), tmp_path / "off")
    assert s["amr_pole"] is None and s["resolution_check"]["pole"] is None
    for file in (s["runs"][0]["file"], s["resolution_check"]["file"]):
        assert "pole" not in read_config(file)["representations"]["density"]


def test_default_pole_rule():
    """[1, 1, 1]/√3 unless within 20° of a real eigenvector of V, B = QᵀK or VBᵀ (a repeated
    eigenvalue: its whole eigenspace); then the next candidate."""
    I3 = np.eye(3)
    first, second, _ = (np.asarray(c) / np.linalg.norm(c) for c in metastability.POLE_CANDIDATES)
    assert metastability.default_pole(I3, I3, I3) == pytest.approx(first.tolist())  # nothing singled out
    # the set-up: V's eigenvectors are the axes (54.7° away), B's the x axis and the y-z plane (35.3°)
    cfg = metastability.MetastabilityConfig()
    to_axis = math.degrees(math.acos(1 / math.sqrt(3)))
    assert metastability.eigenvector_angle(first, cfg.V) == pytest.approx(to_axis)
    assert metastability.eigenvector_angle(first, cfg.K) == pytest.approx(90 - to_axis)
    # an eigenvector of V 10° from [1, 1, 1] (or of B, or of VBᵀ): the second candidate
    axis = np.cross(first, second)

    def with_eigenvector(degrees):
        """diag(3, 2, 1) in the frame (n, u, w): n `degrees` from [1, 1, 1], the second candidate
        45° from u and w."""
        n = math.cos(math.radians(degrees)) * first + math.sin(math.radians(degrees)) * axis
        z = np.cross(n, second)
        u, w = (second + z) / math.sqrt(2), (second - z) / math.sqrt(2)
        return 3 * np.outer(n, n) + 2 * np.outer(u, u) + np.outer(w, w)

    Vnear = with_eigenvector(10)
    assert metastability.eigenvector_angle(first, Vnear) == pytest.approx(10.0)
    assert metastability.eigenvector_angle(second, Vnear) == pytest.approx(45.0)
    assert metastability.default_pole(I3, I3, Vnear) == pytest.approx(second.tolist())
    assert metastability.default_pole(I3, Vnear, I3) == pytest.approx(second.tolist())
    # at 30° it is kept
    assert metastability.default_pole(I3, I3, with_eigenvector(30)) == pytest.approx(first.tolist())
    # a turn has no real eigenvector but its axis
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert metastability.eigenvector_angle([0.0, 0.0, 1.0], turn) == pytest.approx(0.0)
    assert metastability.eigenvector_angle([1.0, 0.0, 0.0], turn) == pytest.approx(90.0)


@pytest.mark.parametrize("bad", ["north", "", (1.0, 2.0), (0.0, 0.0, 0.0), (1.0, math.nan, 0.0),
                                 (True, 0.0, 1.0), ("1", "0", "0"), None])
def test_amr_pole_is_validated(bad):
    with pytest.raises(ValueError, match="amr_pole must be 'auto', 'off' or 3"):
        dataclasses.replace(metastability.MetastabilityConfig(), amr_pole=bad)


def test_amr_pole_needs_amr():
    with pytest.raises(ValueError, match=r"amr_pole = \[0.0, 0.0, 1.0\] \(--amr-pole\) turns the amr mesh; "
                                         "density_scheme is 'ffsl-ppm'"):
        dataclasses.replace(terminal_phase.TerminalPhaseConfig(), density_scheme="ffsl-ppm",
                            amr_pole=(0.0, 0.0, 1.0))
    for word in ("auto", "off"):  # the words are fine on the fixed grid (nothing to turn)
        dataclasses.replace(terminal_phase.TerminalPhaseConfig(), density_scheme="ffsl-ppm", amr_pole=word)


@pytest.mark.parametrize("name", ["metastability", "terminal-phase"])
def test_cli_amr_pole(name, capsys, tmp_path):
    from spherepde.cli.parser import build_parser
    from spherepde.experiments.registry import EXPERIMENTS

    entry = EXPERIMENTS[name]
    assert entry.configure({}).amr_pole == "auto"
    assert entry.configure({"amr_pole": ["off"]}).amr_pole == "off"
    args = build_parser().parse_args(["experiment", name, "--amr-pole", "0.3", "-0.8", "0.5"])
    assert entry.configure({"amr_pole": args.amr_pole}).amr_pole == (0.3, -0.8, 0.5)
    for bad in (["north"], ["1", "2"], ["0", "0", "0"], ["1", "nan", "0"], ["1", "x", "0"], ["auto", "off"]):
        assert main(["experiment", name, "--amr-pole", *bad, "--output", str(tmp_path / "o")]) == 2
        assert "--amr-pole must be 'auto', 'off' or 3 numbers" in capsys.readouterr().err
    assert main(["experiment", name, "--density-scheme", "ffsl-ppm", "--amr-pole", "1", "0", "0",
                 "--output", str(tmp_path / "o")]) == 2
    assert "(--amr-pole) turns the amr mesh" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_amr_base_follows_the_largest_beta_unless_nlat_is_given():
    """Without --nlat the amr runs' base is the coarsest of 32, 48 whose cell h₀ = π/nlat has
    β·h₀² ≤ 5 for the largest finite β (β = 1000: 48, where base 32 left W₂ 2.9 % off under
    --refine 1.5), the finest above; ffsl-ppm and β = ∞ alone keep 32; --nlat wins."""
    M = metastability.MetastabilityConfig
    assert metastability.base_nlat_for_beta(100.0) == 32 and metastability.base_nlat_for_beta(518.0) == 32
    assert metastability.base_nlat_for_beta(519.0) == 48 and metastability.base_nlat_for_beta(1e4) == 48
    assert M().grid_nlat == 32 and M(betas=(math.inf,)).grid_nlat == 32
    cfg = M(betas=(1000.0,))
    assert cfg.grid_nlat == 48 and cfg.resolution_nlat == 72
    assert cfg.to_dict()["nlat"] == 48 and metastability.setup_run_config(cfg, 1000.0)["grid"]["nlat"] == 48
    from spherepde.solvers.eulerian.amr import levels_for_beta

    assert metastability.amr_levels(cfg) == levels_for_beta(1000.0, 48)
    assert M(betas=(1000.0,), density_scheme="ffsl-ppm").grid_nlat == 32
    assert M(betas=(1000.0,), nlat=24).grid_nlat == 24
    assert terminal_phase.TerminalPhaseConfig().grid_nlat == 32
    # the command line: --betas 1000 without --nlat gets the base 48
    from spherepde.experiments.registry import EXPERIMENTS

    entry = EXPERIMENTS["metastability"]
    assert entry.configure({"betas": [1000.0]}).grid_nlat == 48
    assert entry.configure({"betas": [1000.0], "nlat": 32}).grid_nlat == 32


@pytest.mark.parametrize("bad", [3, 2, 12, 13, 26, True, 6.0])
def test_metastability_check_nlat_is_validated(bad):
    with pytest.raises(ValueError, match="check_nlat"):
        dataclasses.replace(metastability.MetastabilityConfig(), nlat=12, check_nlat=bad)


def test_metastability_check_is_the_refined_run_by_default():
    """By default the run is checked against its refined run (the even nlat nearest 1.5·nlat, as
    ``run --refine 1.5``); check_nlat may also be coarser, or finer up to 2·nlat."""
    cfg = dataclasses.replace(metastability.MetastabilityConfig(), nlat=12)
    assert cfg.resolution_nlat == 18
    assert dataclasses.replace(cfg, nlat=32).resolution_nlat == 48
    assert dataclasses.replace(cfg, nlat=16).resolution_nlat == 24
    assert dataclasses.replace(cfg, check_nlat=24).resolution_nlat == 24
    assert dataclasses.replace(cfg, check_nlat=8).resolution_nlat == 8
    assert dataclasses.replace(cfg, check_nlat=0).resolution_nlat == 0


def test_non_symmetric_vbt_warns_and_still_runs(tmp_path):
    """SPEC: VBᵀ not symmetric → Π is undefined: warn, run, Π-based diagnostics off (NaN)."""
    K = ((0.1, 0.3, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))  # A = V Kᵀ is not symmetric
    cfg = dataclasses.replace(metastability.MetastabilityConfig.quick(), workers=0, nlat=8, betas=(5.0,), t_end=1.0,
                              n_outputs=2, K=K)
    with pytest.warns(UserWarning, match="not symmetric"):
        s = metastability.run_metastability(cfg, tmp_path)
    r = s["runs"][0]
    assert all(math.isnan(v) for v in r["w2"]) and all(math.isnan(v) for v in r["dist_E_VBt"])
    assert all(math.isfinite(v) for v in r["dist_E_V"])  # V itself is symmetric
    assert abs(r["mass_error"]) < 1e-13


def test_the_check_runs_beside_the_runs_with_the_same_results(tmp_path, monkeypatch):
    """With workers the resolution check's run goes to a child process beside the runs
    (check_beside); the numbers are those of the runs one after the other in this process (the
    same runs: only the order of threaded sums may differ, the child runs numba on one thread, so
    to round-off).  Ctrl-C in the main loop leaves the summary marked interrupted and ends the
    child."""
    cfg = dataclasses.replace(metastability.MetastabilityConfig.quick(), workers=0, nlat=8, betas=(5.0, 10.0),
                              t_end=1.0, n_outputs=2)
    alone = metastability.run_metastability(cfg, tmp_path / "w0")
    beside = metastability.run_metastability(dataclasses.replace(cfg, workers=2), tmp_path / "w2")
    for key in ("w2", "energy", "dist_E_VBt", "dist_E_V"):
        for r1, r0 in zip(beside["runs"], alone["runs"]):
            assert np.allclose(r1[key], r0[key], rtol=1e-9, atol=1e-12), key
    checks = [s["resolution_check"] for s in (alone, beside)]
    assert checks[0]["nlat"] == checks[1]["nlat"] == [8, 12]
    for q in metastability.CHECKED:
        assert checks[1]["per_quantity"][q]["change"] == pytest.approx(checks[0]["per_quantity"][q]["change"],
                                                                      rel=1e-6, abs=1e-10)
    assert checks[1]["file"].startswith(str(tmp_path / "w2"))

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(metastability, "w2_minimum", interrupt)
    with pytest.raises(KeyboardInterrupt):
        metastability.run_metastability(dataclasses.replace(cfg, workers=2), tmp_path / "stop")
    assert json.loads((tmp_path / "stop" / "summary.json").read_text())["interrupted"] is True


def test_interrupted_experiment_still_writes_its_summary(tmp_path, monkeypatch):
    """Ctrl-C during the second β: summary.json holds the first run and "interrupted": true, the
    first β's file is complete and the second one's says interrupted."""
    cfg = circle_clusters.CircleClustersConfig(betas=(3.0, 10.0), t_end=1.0, n_outputs=2, min_cells=32,
                                      cells_per_width=2.0, modes=16)
    calls = {"n": 0}
    real = clusters.find_clusters

    def stop_in_the_second_run(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > cfg.n_outputs + 1:  # the first run's snapshots are done
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(circle_clusters, "find_clusters", stop_in_the_second_run)
    with pytest.raises(KeyboardInterrupt):
        circle_clusters.run_circle_clusters(cfg, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["experiment"] == "circle-clusters"
    assert [r["beta"] for r in summary["runs"]] == [3.0]
    assert open_dataset(summary["runs"][0]["file"]).attrs["status"] == "complete"


def test_particles_vs_density_is_a_sweep_of_run_configurations(tmp_path):
    """The runs are `spherepde run` configurations in two sweeps from one base: the density alone
    once per β, the particles alone once per (β, N, seed), at the same step; the particles are
    those of the direct ParticleODE run from the same draw with the same steps, and the W₂ of
    the summary is the one between the stored end states."""
    import numpy as np

    from spherepde.dynamics.attention import Attention
    from spherepde.runs.sweep import expand
    from spherepde.grids import GaussGrid
    from spherepde.grids.sampling import sample_density
    from spherepde.solvers.lagrangian import ParticleODE
    from spherepde.validation.metrics import as_measure, w2

    cfg = dataclasses.replace(particles_vs_density.ParticlesVsDensityConfig.quick(), nlat=8, t_end=0.5,
                              n_outputs=1, betas=(10.0, math.inf), particle_counts=(16, 32), seeds=(0, 1),
                              workers=0)
    assert cfg.dt == 0.05  # particle_dt, below the density's Courant step 0.8·π/8
    raws = particles_vs_density.sweep_configs(cfg)
    dens, parts = (expand(raws[k]).members for k in ("density", "particles"))
    assert len(dens) == 2 and len(parts) == 2 * 2 * 2
    assert all(m.config.representations.density and m.config.representations.particles is None
               for m in dens)
    assert all(not m.config.representations.density and m.config.representations.particles is not None
               for m in parts)
    assert {m.config.stepping.dt for m in dens + parts} == {0.05}  # the same steps
    s = particles_vs_density.run_particles_vs_density(cfg, tmp_path)
    for part, key in (("density", "density_sweep_file"), ("particles", "particle_sweep_file")):
        assert (tmp_path / "runs" / part / "sweep.nc").is_file()
        assert s[key] == str(tmp_path / "runs" / part / "sweep.nc")
    assert len(list((tmp_path / "runs" / "density" / "members").iterdir())) == 2  # one per β
    grid = GaussGrid(8)
    r = s["runs"][0]
    p = r["particles"][0]
    assert r["beta"] == 10.0 and p["N"] == 16 and len(p["files"]) == 2
    run = open_dataset(p["files"][0])
    assert "density" not in run
    assert read_config(p["files"][0])["representations"]["particles"] == {"n": 16, "seed": 0}
    att = Attention(*(np.asarray(m, float) for m in (cfg.Q, cfg.K, cfg.V)), 10.0)
    x0 = sample_density(grid, metastability.initial_density(grid, cfg.init_a), 16, seed=0)
    direct = ParticleODE(att).run(x0, (0.0, 0.5), dt=0.05).positions[-1]
    assert np.allclose(run["position"].values[-1], direct, rtol=0, atol=1e-12)
    assert read_config(r["density_file"])["dynamics"]["attention"]["beta"] == 10.0
    x, w_end = as_measure(grid, open_dataset(r["density_file"])["density"].values[-1])
    dists = [w2(open_dataset(f)["position"].values[-1], np.full(16, 1 / 16), x, w_end) for f in p["files"]]
    assert p["w2"] == pytest.approx(np.mean(dists), rel=1e-12)
    assert math.isinf(s["runs"][1]["beta"]) and abs(s["runs"][1]["density_mass_error"]) < 1e-13
    # a re-run into the same folder skips every finished member of both sweeps
    mtimes = {f: f.stat().st_mtime_ns for f in (tmp_path / "runs").glob("*/members/*/run.nc")}
    again = particles_vs_density.run_particles_vs_density(cfg, tmp_path)
    assert {f: f.stat().st_mtime_ns for f in mtimes} == mtimes and len(mtimes) == 2 + 8
    assert again["runs"][0]["particles"][0]["w2"] == p["w2"]


def test_experiments_refuse_bad_lists_before_work(tmp_path):
    from spherepde.experiments.registry import EXPERIMENTS

    for name in ("metastability", "terminal-phase", "particles-vs-density"):
        assert EXPERIMENTS[name].configure({"workers": 0}).workers == 0  # in this process
        with pytest.raises(ValueError, match="--workers"):
            EXPERIMENTS[name].configure({"workers": -1})
    with pytest.raises(ValueError, match="seeds"):
        dataclasses.replace(particles_vs_density.ParticlesVsDensityConfig.quick(), seeds=(0, 0))
    with pytest.raises(ValueError, match="betas"):
        dataclasses.replace(metastability.MetastabilityConfig.quick(), betas=(5.0, 5.0))
    with pytest.raises(ValueError, match="workers"):
        dataclasses.replace(terminal_phase.TerminalPhaseConfig.quick(), workers=-1)
    # above the configuration tree's particle limit: refused, naming the key, before any file
    cfg = dataclasses.replace(particles_vs_density.ParticlesVsDensityConfig.quick(),
                              particle_counts=(100, 200_000))
    with pytest.raises(ValueError, match="representations.particles.n"):
        particles_vs_density.run_particles_vs_density(cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_examples_are_the_experiments_configurations():
    """examples/metastability.toml and examples/particles_vs_density.toml are the runs of the
    experiments at their sizes (only the diagnostics differ; the metastability example is the
    fixed-grid run, ``--density-scheme ffsl-ppm``)."""
    from pathlib import Path

    from spherepde.runs.config import load
    from spherepde.runs.sweep import expand

    examples = Path(__file__).resolve().parents[2] / "examples"

    def same(a: RunConfig, b: RunConfig) -> bool:
        return a.replace(outputs=b.outputs) == b

    cfg = dataclasses.replace(metastability.MetastabilityConfig(), nlat=24, t_end=24.0, n_outputs=48,
                              density_scheme="ffsl-ppm")
    assert same(RunConfig.from_dict(metastability.setup_run_config(cfg, 30.0)),
                load(examples / "metastability.toml"))
    pvd = dataclasses.replace(particles_vs_density.ParticlesVsDensityConfig(), nlat=24, betas=(10.0,),
                              n_outputs=8, particle_counts=(2000, 4000), seeds=(0,))
    assert same(RunConfig.from_dict(particles_vs_density.base_config(pvd)),
                load(examples / "particles_vs_density.toml"))
    # the two sweeps' first members are that run split into its density and its particles
    raws = particles_vs_density.sweep_configs(pvd)
    dens, part = (expand(raws[k]).members[0] for k in ("density", "particles"))
    assert dens.values == {particles_vs_density.BETA: 10.0}
    assert part.values == {particles_vs_density.N: 2000, particles_vs_density.BETA: 10.0,
                           particles_vs_density.SEED: 0}
    example = load(examples / "particles_vs_density.toml")
    reps = example.representations
    for member, reps_changed in ((dens, reps.replace(particles=None)), (part, reps.replace(density=None))):
        assert member.config == example.replace(outputs=member.config.outputs, representations=reps_changed)
