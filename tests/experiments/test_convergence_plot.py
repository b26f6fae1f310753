"""``spherepde plot DIR/sweep.nc``: log–log convergence plots of a real (small, serial) sweep, with
the fitted slopes recomputed here from sweep.nc, and bad sweeps refused naming the path."""
from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from spherepde.cli import main
from spherepde.runs.sweep import run_sweep

I2 = [[1.0, 0.0], [0.0, 1.0]]


def _raw(sweep: dict, **grid) -> dict:
    return {"grid": {"kind": "circle", "n": 64, **grid},
            "initial": {"kind": "low-mode", "amplitude": 0.3, "max_degree": 3, "seed": 0},
            "dynamics": {"attention": {"Q": I2, "K": I2, "V": I2, "beta": 5.0}},
            "representations": {"density": True, "particles": {"n": 16, "seed": 0}},
            "stepping": {"t_end": 0.5, "dt": 0.05, "output_every": 0.25},
            "outputs": {"diagnostics": ["mass", "energy", "w2_particles_density"]},
            "sweep": sweep}


def _slope(x, e) -> float:
    return float(np.polyfit(np.log(x), np.log(e), 1)[0])


@pytest.fixture(scope="module")
def n_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("nsweep")
    run_sweep(_raw({"representations.particles.n": [256, 16, 64],
                    "representations.particles.seed": [0, 1]}), out, workers=0, progress=False)
    return out


def test_particle_count_sweep_plot(n_sweep, capsys):
    rc = main(["plot", str(n_sweep / "sweep.nc"), "--output", str(n_sweep / "fig"), "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    png = n_sweep / "fig" / "convergence_representations__particles__n.png"
    assert res["figures"] == [str(png)] and png.stat().st_size > 20_000
    (info,) = res["plots"]
    assert info["xscale"] == info["yscale"] == "log"
    assert info["xlabel"].startswith("N (representations.particles.n)")
    assert info["ylabel"] == "error at the final time t = 0.5"
    assert info["reference"]["order"] == -0.5
    # the slopes in the legend are the least-squares slopes of the data in sweep.nc
    ds = xr.open_dataset(n_sweep / "sweep.nc")
    n = ds["representations__particles__n"].values.astype(float)
    w2 = np.sqrt((ds["w2_particles_density"].isel(time=-1) ** 2).mean("representations__particles__seed").values)
    de = np.sqrt(((ds["particles_energy"].isel(time=-1) - ds["energy"].isel(time=-1)) ** 2)
                 .mean("representations__particles__seed").values)
    ds.close()
    by = {line["label"].split(":")[0]: line for line in info["lines"]}
    assert set(by) == {"W₂(particles, density)", "|energy"}
    for key, e in (("W₂(particles, density)", w2), ("|energy", de)):
        assert np.all(np.isfinite(e)) and np.all(e > 0)
        # to round-off of two least-squares solves on 3 points (logs of size ~10)
        assert abs(by[key]["slope"] - _slope(n, e)) <= 1e3 * np.finfo(float).eps * 10
        assert f"slope {by[key]['slope']:.2f}" in by[key]["label"]
    # W₂ between N samples and their law falls with N (the Monte Carlo rate predicts a factor
    # 16^(1/2) = 4 over the sweep; the fitted slope must at least be negative)
    assert by["W₂(particles, density)"]["slope"] < 0


def test_grid_sweep_plot_is_self_convergence(tmp_path):
    raw = _raw({"grid.n": [32, 128, 64]})
    raw["representations"] = {"density": True}
    raw["outputs"] = {"diagnostics": ["mass", "max_density", "energy"]}
    run_sweep(raw, tmp_path, workers=0, progress=False)
    from spherepde.experiments.convergence import plot_sweep

    res = plot_sweep(tmp_path / "sweep.nc")
    (info,) = res["plots"]
    assert info["xlabel"].startswith("n (grid.n)") and info["reference"]["order"] == -2.0
    labels = [line["label"] for line in info["lines"]]
    assert any(label.startswith("|energy − energy(n = 128)|") for label in labels), labels
    assert not any(label.startswith("|mass") for label in labels)
    assert (tmp_path / "convergence_grid__n.png").stat().st_size > 20_000


def test_plot_of_a_sweep_without_a_resolution_exits_2_naming_it(tmp_path, capsys):
    raw = _raw({"dynamics.attention.beta": [2.0, 4.0]})
    raw["representations"] = {"density": True}
    raw["outputs"] = {"diagnostics": ["mass"]}
    run_sweep(raw, tmp_path, workers=0, progress=False)
    rc = main(["plot", str(tmp_path / "sweep.nc"), "--json"])
    assert rc == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert "sweep.nc" in err and "dynamics.attention.beta" in err and "representations.particles.n" in err
