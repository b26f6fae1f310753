"""``validate sync-path``: the noise-only SPDE against the exact pushforward on one Brownian path
(spherepde.experiments.sync_path)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from spherepde.cli import main
from spherepde.experiments.sync_path import SyncPathConfig, default_output_every, run_sync_path
from conftest import interrupt_after

KEYS = ("times", "energy_density", "energy_reference", "ratio", "decades", "seconds", "scheme")


def test_short_run_keys_conservation_and_start():
    out = run_sync_path(SyncPathConfig(nlat=16, t_end=0.5, scheme="ffsl-ppm"))
    for k in KEYS:
        assert k in out
    assert out["times"] == [0.0, 0.25, 0.5] and not out["interrupted"]
    assert out["scheme"] == "ffsl-ppm" and out["config"]["nlat"] == 16
    # t = 0: the same quadrature of ρ₀; the reference drops weights < 1e-13·max (≤ 512 of them)
    assert abs(out["ratio"][0] - 1.0) <= 512 * 1e-13 * 10
    # mass to round-off; never negative (round-off negatives of the flux sums are set to 0)
    assert abs(out["mass_error"]) <= 1e-13 and out["min_density"] >= 0.0
    # the polar cap (default) with its buffer sized to the noise: no remap fell back
    assert out["config"]["polar"] == "auto" and out["cap_fallbacks"] == 0
    assert all(e > 0 for e in out["energy_reference"])


def test_density_approaches_the_reference_as_the_grid_is_refined():
    """At t = 0.5 the density's departure from the exact pushforward (numerical diffusion of a
    cluster still many cells wide) shrinks under refinement: |ratio − 1| at nlat 32 is below
    half of that at nlat 16 (a first-order or better scheme gives ≤ 1/2)."""
    dev = []
    for nlat in (16, 32):
        out = run_sync_path(SyncPathConfig(nlat=nlat, t_end=0.5, scheme="ffsl-ppm"))
        dev.append(abs(out["ratio"][-1] - 1.0))
    assert dev[1] <= 0.5 * dev[0], dev


def test_same_seed_same_bits_and_seed_matters():
    a, b, c = (run_sync_path(SyncPathConfig(nlat=16, t_end=0.25, output_every=0.25, seed=s,
                                            scheme=scheme))
               for s, scheme in ((0, "ffsl-ppm"), (0, "ffsl-ppm"), (1, "ffsl-ppm")))
    assert a["energy_density"] == b["energy_density"] and a["energy_reference"] == b["energy_reference"]
    assert a["energy_reference"][-1] != c["energy_reference"][-1]


def test_default_scheme_follows_the_reference():
    """Between remaps the scheme is the reference itself; each remap (every 25 steps) merges
    points within adapted cells of ≈ σ/8 and changes E by ≈ 1e-3 (tests/solvers/test_remap.py):
    at t = 1 (4 remaps) within 5 % of the reference, where ffsl-ppm at nlat 16 is off by 4.6×;
    mass to round-off, weights positive."""
    out = run_sync_path(SyncPathConfig(nlat=16, t_end=1.0))
    assert out["scheme"] == "lagrangian-remap"
    r = np.asarray(out["ratio"])
    assert np.all(np.abs(r - 1.0) <= 0.05), out["ratio"]
    assert out["remaps"] == 4 and abs(out["mass_error"]) <= 1e-14 and out["min_density"] > 0


@pytest.mark.parametrize("kw, name", [
    ({"nlat": 15}, "nlat"), ({"nlat": 2}, "nlat"), ({"t_end": -1.0}, "t_end"),
    ({"dt": math.nan}, "dt"), ({"dt": 0.5, "output_every": 0.25}, "dt ≤ output_every"),
    ({"t_end": 0.305}, "whole number"), ({"output_every": 0.125, "dt": 0.05}, "whole number"),
    ({"seed": -1}, "seed"), ({"realisation": 1.5}, "realisation"), ({"scheme": "upwind"}, "scheme"),
    ({"polar": "caps"}, "polar"),
    ({"t_end": 1.0, "output_every": 0.3}, "output_every must divide t_end"),
])
def test_bad_input_is_refused_before_work(kw, name):
    with pytest.raises(ValueError, match=name):
        SyncPathConfig(**kw)


def test_cli_output_keeps_the_run_and_is_checked_first(tmp_path, capsys):
    out = tmp_path / "sp"
    assert main(["validate", "sync-path", "--nlat", "16", "--t-end", "0.25", "--json",
                 "--output", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["file"] == str(out / "run.nc")
    assert sorted(p.name for p in out.iterdir()) == ["config.toml", "run.nc", "summary.json"]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["validate", "sync-path", "--json", "--output", str(blocker)]) == 2
    assert "--output" in capsys.readouterr().err


def test_cli_json(capsys):
    assert main(["validate", "sync-path", "--nlat", "16", "--t-end", "0.25", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(KEYS) <= set(out) and len(out["times"]) == 2
    assert main(["validate", "sync-path", "--nlat", "17", "--json"]) == 2
    assert "--nlat" in capsys.readouterr().err
    assert main(["validate", "sync-path", "--t-end", "0.305", "--json"]) == 2
    assert "--t-end must be a whole number of steps --dt" in capsys.readouterr().err
    # a run shorter than the default output interval: outputs at 0 and t_end
    assert main(["validate", "sync-path", "--nlat", "16", "--t-end", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["times"] == [0.0, 0.1]


#: the Brownian path of the slow target tests: the first (seed 0, realisation r = 0, 1, …) whose
#: reference contracts ≥ 2.5 decades by t = 6 (scripts/sync_path_seed_search.py,
#: docs/data/sync_path_seed_search.json); the default path (realisation 0) contracts less
TARGET_PATH = {"seed": 0, "realisation": 1}


@pytest.mark.slow
def test_default_run_meets_the_issue_target():
    """The issue's target with the default scheme (lagrangian-remap) and set-up: ≥ 2.5 decades,
    every ratio in [0.67, 1.5], the fitted rate within 5 % of the reference's.  The 2.5 decades
    are a property of the draw, not of the scheme: on the default path (seed 0, realisation 0,
    the horizon-free Brownian path of issue 22.10) the reference contracts only ~1.9 decades by
    t = 6, so this runs on TARGET_PATH, the first realisation of seed 0 that contracts ≥ 2.5
    decades (chosen from the reference alone by scripts/sync_path_seed_search.py, whose
    search docs/data/sync_path_seed_search.json records).  The decades are still asserted here,
    not assumed."""
    search = json.loads((Path(__file__).resolve().parents[2] / "docs" / "data"
                         / "sync_path_seed_search.json").read_text())
    assert {k: search["found"][k] for k in TARGET_PATH} == TARGET_PATH
    out = run_sync_path(SyncPathConfig(**TARGET_PATH))
    assert out["scheme"] == "lagrangian-remap" and out["decades"] >= 2.5
    r = np.asarray(out["ratio"])
    assert np.all((r >= 0.67) & (r <= 1.5)), out["ratio_range"]
    assert abs(out["rate_density"] / out["rate_reference"] - 1.0) <= 0.05


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue 11: ffsl-ppm on the fixed grid diffuses the "
                                       "contracting cluster (the ratio grows far above 1.5 by "
                                       "t = 6; docs/data/sync_path.json has the measured one)")
def test_ffsl_ppm_misses_the_issue_target():
    """On TARGET_PATH (where the reference does contract ≥ 2.5 decades, so it is the ratio that
    fails, not the draw)."""
    out = run_sync_path(SyncPathConfig(scheme="ffsl-ppm", **TARGET_PATH))
    assert out["decades"] >= 2.5
    r = np.asarray(out["ratio"])
    assert np.all((r >= 0.67) & (r <= 1.5)), out["ratio_range"]


# ---- sync-path as a spherepde run configuration plus analysis --------------------------------
def _model(config):
    from spherepde.runs.config import RunConfig
    from spherepde.runs.build import build

    return build(RunConfig.from_dict(config.run_config()))


def _quadrature_reference(config):
    """The reference computed on its own: the quadrature of ρ₀ (points_from_density), moved by a
    ParticleSDE through the run loop with the run's step and output times."""
    from spherepde.solvers.controller import Controller
    from spherepde.solvers.lagrangian.particles import ParticleStepper
    from spherepde.solvers.lagrangian.remap import points_from_density
    from spherepde.solvers.lagrangian.sde import ParticleSDE
    from spherepde.solvers.trackers import MemoryTracker
    from spherepde.validation.metrics import interaction_energy

    m = _model(config)  # a fresh noise field and path: the path is a function of (seed, t)
    xq, wq = points_from_density(m.grid, m.rho0)
    sde = ParticleSDE(noise=m.noise, path=m.path, weights=wq)
    mem = MemoryTracker()
    Controller(ParticleStepper(sde, xq.shape[0]), mem, dt=config.dt).run(
        xq, (0.0, config.t_end), output_times=m.times)
    e = [interaction_energy(x, wq, config.beta) for x in mem.result["state"]]
    return m, xq, wq, np.array(e)


@pytest.mark.parametrize("scheme", ["lagrangian-remap", "ffsl-ppm"])
def test_the_reference_is_the_quadrature_pushforward_bit_for_bit(tmp_path, scheme):
    """run.nc holds the quadrature weights (weight(particle)) and the reference's energies are
    those of the weighted cell centres moved by the particle SDE on the same path and steps —
    the same bits (nothing else enters)."""
    import netCDF4

    cfg = SyncPathConfig(nlat=16, t_end=0.5, scheme=scheme)
    out = run_sync_path(cfg, output=tmp_path / "run")
    m, xq, wq, e_ref = _quadrature_reference(cfg)
    assert out["file"] == str(tmp_path / "run" / "run.nc") and out["reference_points"] == wq.size
    with netCDF4.Dataset(out["file"]) as ds:
        assert np.array_equal(ds["weight"][:], wq)
        assert ds["weight"].dimensions == ("particle",)
    assert np.all(e_ref > 0)
    assert np.array_equal(np.array(out["energy_reference"]), e_ref)
    assert out["run_config"]["representations"]["particles"] == {"initial": "quadrature"}
    # the time lattice of the run loop: output i at i·output_every
    assert out["times"] == (0.25 * np.arange(3)).tolist()
    # the seconds are those of the steps (summary.json step_seconds), not of the diagnostics
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert out["seconds"] == {"density": summary["density"]["step_seconds"],
                              "reference": summary["particles"]["step_seconds"]}
    assert summary["particles"]["step_seconds"] <= summary["particles"]["seconds"]


def test_against_the_plain_loop_on_k_dt_within_the_time_lattice_error_model():
    """The loop sync-path had (reference stepped at t_k = k·Δt) against the run loop's times
    (even split: t_k up to a few ulps δt).  Error model (sync_path module docstring): B is linear
    on leaves of h_B = t_end/2⁴⁸, so ΔW moves by a relative ≤ δt/√(h_B Δt) per step; over n
    steps E (∝ width²) by at most 2n times that.  Measured ~1e-8; the bound is ~1e-6."""
    from spherepde.solvers.controller import next_step
    from spherepde.solvers.lagrangian.sde import ParticleSDE
    from spherepde.validation.metrics import interaction_energy

    cfg = SyncPathConfig(nlat=16, t_end=0.5)
    m, xq, wq, e_run = _quadrature_reference(cfg)
    n, every = 50, 25
    sde = ParticleSDE(noise=m.noise, path=m.path, weights=wq)
    x, e_plain = xq.copy(), []
    for k in range(n + 1):
        if k % every == 0:
            e_plain.append(interaction_energy(x, wq, cfg.beta))
        if k < n:
            x = sde.step(x, k * cfg.dt, cfg.dt)
    t, ts = 0.0, [0.0]
    for target in m.times[1:]:
        while t < target:
            t = next_step(t, float(target), cfg.dt)[1]
            ts.append(t)
    dt_max = max(max(abs(a - k * cfg.dt) for k, a in enumerate(ts)), np.spacing(cfg.t_end))
    h_b = cfg.t_end / 2.0 ** 48
    bound = 2 * n * dt_max / math.sqrt(h_b * cfg.dt)
    rel = np.abs(np.array(e_plain) / e_run - 1.0)
    assert np.all(np.isfinite(rel)) and rel.max() <= bound, (rel.max(), bound)
    assert bound <= 1e-5  # the model says these are the same numbers to well below the ratio's 1e-3


def test_ctrl_c_returns_the_outputs_both_reached(monkeypatch):
    """Ctrl-C in the reference's last interval (the two advance in step, 25 steps per output
    interval, the density first: 25 + 25 + 25 + 5 steps): the outputs both reached (t = 0, 0.25),
    the same numbers as the full run, interrupted true."""
    from spherepde.solvers import controller as controller_module

    cfg = SyncPathConfig(nlat=16, t_end=0.5)
    full = run_sync_path(cfg)
    interrupt_after(monkeypatch, controller_module, "next_step", 25 + 25 + 25 + 5)
    cut = run_sync_path(cfg)
    assert cut["interrupted"] is True and full["interrupted"] is False
    assert cut["times"] == [0.0, 0.25]
    for key in ("energy_density", "energy_reference", "ratio"):
        assert cut[key] == full[key][:2], key
    # the state checks are the density's at its last output (t_end: it had finished)
    assert cut["points"] == full["points"] and cut["remaps"] == full["remaps"]


def test_ctrl_c_in_the_first_interval_returns_the_initial_output_only(monkeypatch):
    """Stopped in the density's first interval (step 20 of 25; the reference has not stepped):
    the one output both reached is t = 0 — no fit (NaN) — and the state checks are the density's
    at that output."""
    from spherepde.solvers import controller as controller_module

    interrupt_after(monkeypatch, controller_module, "next_step", 20)
    out = run_sync_path(SyncPathConfig(nlat=16, t_end=0.5))
    assert out["interrupted"] is True and out["times"] == [0.0]
    assert math.isnan(out["decades"]) and math.isnan(out["rate_reference"])
    assert abs(out["mass_error"]) <= 1e-14 and out["min_density"] > 0


@pytest.mark.parametrize("t_end, dt, want", [(6.0, 0.01, 0.25), (0.5, 0.01, 0.25), (0.1, 0.01, 0.1),
                                             (0.3, 0.01, 0.15), (0.31, 0.01, 0.01)])
def test_default_output_every_divides_t_end_in_whole_steps(t_end, dt, want):
    """Outputs are at i·output_every (spherepde run): the default is 0.25 where it divides t_end,
    else the largest t_end/n below 0.25 that is a whole number of steps (31 steps: every step)."""
    every = default_output_every(t_end, dt)
    assert every == pytest.approx(want, rel=1e-12)
    SyncPathConfig(t_end=t_end, dt=dt, output_every=every)  # accepted

