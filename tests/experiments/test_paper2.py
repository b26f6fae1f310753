"""Paper 2 experiments: tiny versions run end to end (NetCDF, PNG, JSON); the physics checks
that are cheap enough for the default suite; the full studies are marked slow."""
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from spherepde.io.netcdf import open_dataset
from spherepde.noise import NoiseKernel
from spherepde.experiments.chaos import ChaosConfig, run_chaos
from spherepde.runs.sweep import member_runs
from spherepde.experiments.depth_width import DepthWidthConfig, run_depth_width
from spherepde.experiments.heat_kernel import HeatKernelConfig, run_heat_kernel
from spherepde.experiments.synchronization import SynchronizationConfig, lyapunov_exponent, run_synchronization


def test_heat_kernel_tiny(tmp_path):
    cfg = replace(HeatKernelConfig.quick(), pairs_circle=6, pairs_sphere=3, ito_pairs=4, ito_steps=5,
                  n_outputs=3, workers=0)  # the dask path is tested in test_ensemble.py
    s = run_heat_kernel(cfg, tmp_path)
    assert {r["grid"] for r in s["runs"]} == {"circle", "sphere"}
    for r in s["runs"]:
        ds = open_dataset(r["file"])
        assert ds.sizes["realisation"] == 2 * r["pairs"]
        assert [d["degree"] for d in r["degrees"]] == [1, 2, 3]
    ito = s["ito_check"]
    # the Itô step is linear in the increment: every antithetic pair mean is ρ0 to round-off
    assert ito["ito-euler"]["max_abs_pair_mean_deviation"] < 1e-10
    assert ito["stratonovich"]["max_abs_pair_mean_deviation"] > 1e-3
    assert (tmp_path / "heat_kernel.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "summary.json").read_text())["experiment"] == "heat-kernel"


def test_synchronization_tiny(tmp_path):
    cfg = replace(SynchronizationConfig.quick(), cases=(("tanh", 0.0),), attention_scales=(0.0,),
                  realisations=2, lyapunov_pairs=2, density_realisations=2, density_t_end=0.4, n_outputs=4,
                  density_nlat=16, density_scheme="ffsl-ppm", workers=0)
    s = run_synchronization(cfg, tmp_path)
    (row,) = s["runs"]
    assert row["odd"] and not row["thm_1_4_applies"]
    assert len(row["energy_mean"]) == cfg.n_outputs + 1 and all(e >= 0 for e in row["energy_mean"])
    assert math.isfinite(row["lyapunov_measured"])
    assert open_dataset(s["density"]["file"]).sizes["realisation"] == 2
    assert (tmp_path / "synchronization.png").exists()
    # at nlat 16 three grid cells (0.59 rad) are wider than the 0.3 rad bound of the fit window:
    # no rate, and the reason says which grid would do
    dens = s["density"]
    assert all(not math.isfinite(r) for r in dens["energy_rate_per_path"])
    assert all("density_nlat >= 32" in r for r in dens["energy_rate_reason_per_path"])
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["density"]["energy_rate_per_path"] == [None, None] or all(
        not math.isfinite(r) for r in saved["density"]["energy_rate_per_path"])
    assert saved["interrupted"] is False

    # nine panels (eight noise cases and the density) are laid out 3 × 3, not in one strip
    from copy import deepcopy

    from PIL import Image

    from spherepde.experiments.synchronization import plot_synchronization

    rows = []
    for k in range(8):
        r = deepcopy(row)
        r.update(d=4 + k // 4, activation=f"act{k % 4}")
        rows.append(r)
    png = plot_synchronization({**s, "runs": rows}, tmp_path / "nine.png")
    width, height = Image.open(png).size
    assert 0.6 < height / width < 1.2


def test_synchronization_density_as_points_is_a_sweep_of_run_configurations(tmp_path):
    """The default S² density (lagrangian-remap): one ``spherepde run`` configuration per
    realisation, collected by a sweep; the same paths as the ensemble's realisations; fitted with
    no grid bound (the points resolve the cluster below a cell)."""
    from spherepde.experiments.synchronization import _density_run_config

    cfg = replace(SynchronizationConfig.quick(), cases=(("tanh", 0.0),), attention_scales=(0.0,),
                  realisations=2, lyapunov_pairs=2, density_realisations=2, density_t_end=0.5,
                  n_outputs=4, density_nlat=16, workers=0)
    assert cfg.density_scheme == "lagrangian-remap"
    s = run_synchronization(cfg, tmp_path)
    dens = s["density"]
    assert dens["scheme"] == "lagrangian-remap" and dens["fit_window_rad"][0] == 0.0
    ds = open_dataset(dens["file"])
    assert list(ds["realisation"].values) == [0, 1] and ds.attrs["status"] == "complete"
    mass = ds["mass"].values
    assert np.all(np.abs(mass - 1.0) <= 1e-12)
    e = np.asarray(dens["energy_paths"])
    assert e.shape == (2, len(dens["times"])) and np.all(np.isfinite(e)) and np.all(e > 0)
    assert e[0, -1] != e[1, -1]  # two different Brownian paths
    raw = _density_run_config(cfg)
    assert raw["representations"]["density"]["scheme"] == "lagrangian-remap"
    assert raw["sweep"] == {"dynamics.noise.realisation": [0, 1]}
    with pytest.raises(ValueError, match="density_scheme"):
        replace(cfg, density_scheme="upwind")


def test_chaos_tiny(tmp_path):
    cfg = replace(ChaosConfig.quick(), particle_counts=(50, 200, 800), seeds=(0,), t_end=0.3, workers=0)
    s = run_chaos(cfg, tmp_path)
    (row,) = s["runs"]
    err = [p["moment_error"] for p in row["particles"]]
    assert err[-1] < err[0]
    # the same path matters: at the largest N the error is far below that of a different path
    assert err[-1] < 0.5 * row["control_other_path_moment_error"]
    assert (tmp_path / "particles_path0_N800.nc").exists() and (tmp_path / "chaos.png").exists()
    # the runs are sweeps of spherepde run configurations: the density once per path and grid
    # (not per N and seed), the particles without a density, the control on path 10000
    members = {name: [m for m, _ in member_runs(s["sweep_files"][name])]
               for name in ("density", "particles", "control")}
    assert members["density"] == [{"dynamics.noise.realisation": 0, "grid.nlat": n} for n in (8, 16)]
    assert len(members["particles"]) == 3
    assert members["control"] == [{"dynamics.noise.realisation": 10_000}]
    for m, path in member_runs(s["sweep_files"]["particles"]):
        ds = open_dataset(path)
        assert "density" not in ds and ds["position"].shape[1] == m["representations.particles.n"]


def test_chaos_errors_before_work(tmp_path):
    with pytest.raises(ValueError, match="nlat must be a multiple of 4"):
        replace(ChaosConfig.quick(), nlat=18)
    with pytest.raises(ValueError, match="paths must be"):
        replace(ChaosConfig.quick(), paths=(0, 0))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"stepping.dt: must be a number in \(0, 0.01\], got 0.05"):
        run_chaos(replace(ChaosConfig.quick(), t_end=0.01, workers=0), out)
    with pytest.raises(ValueError, match="stepping.dt: dt=0.5 is too large for the noise"):
        run_chaos(replace(ChaosConfig.quick(), t_end=0.5, dt=0.5, workers=0), out)  # run.build's check
    assert not out.exists()


def test_pathwise_contraction_rate_is_lambda_1():
    # top Lyapunov exponent of the noise-only flow on S² (ReLU, σ_U = σ_W = 0.5): λ₁ = −κ(1)
    # = −0.5417.  12 pairs × t = 4 (Benettin renormalisation), Heun Δt = 0.02: measured
    # −0.558 ± 0.074; within 4 standard errors, and negative (contraction) at > 4 standard errors
    k = NoiseKernel("relu", d=3, sigma_u=0.5, sigma_w=0.5)
    v = np.array([lyapunov_exponent(k, 4.0, 0.02, seed) for seed in range(12)])
    se = v.std(ddof=1) / math.sqrt(v.size)
    assert abs(v.mean() - k.lambda_1) < 4 * se
    assert v.mean() < -4 * se


@pytest.mark.slow
@pytest.mark.parametrize("name, runner, cls", [("heat-kernel", run_heat_kernel, HeatKernelConfig),
                                               ("synchronization", run_synchronization, SynchronizationConfig),
                                               ("chaos", run_chaos, ChaosConfig),
                                               ("depth-width", run_depth_width, DepthWidthConfig)])
def test_full_studies(name, runner, cls, tmp_path):
    s = runner(cls(), tmp_path)
    assert s["experiment"] == name
    if name == "heat-kernel":
        for r in s["runs"]:
            for d in r["degrees"]:  # each measured rate within 4 standard errors of κ λ_l / 2
                assert abs(d["z"]) < 4, d
