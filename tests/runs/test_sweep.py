"""Sweeps: expansion and validation, a LocalCluster run collected into sweep.nc, skipping."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import xarray as xr

from spherepde.cli import main
from spherepde.runs.config import RunConfig
from spherepde.runs.execute import run
from spherepde.runs.folders import OutputConflict
from spherepde.runs.sweep import expand, run_sweep
from conftest import interrupt_after

I2 = [[1.0, 0.0], [0.0, 1.0]]


def _raw(**sweep) -> dict:
    """A small S¹ run (density + particles, about a second) with the given [sweep] table."""
    return {
        "grid": {"kind": "circle", "n": 32},
        "initial": {"kind": "low-mode", "amplitude": 0.3, "max_degree": 3, "seed": 0},
        "dynamics": {"attention": {"Q": I2, "K": I2, "V": I2, "beta": 5.0}},
        "representations": {"density": True, "particles": {"n": 16, "seed": 0}},
        "stepping": {"t_end": 0.5, "courant": 0.8, "output_every": 0.25},
        "outputs": {"diagnostics": ["mass", "energy"]},
        "sweep": sweep,
    }


def test_expand_sorts_each_list_and_takes_the_product():
    s = expand(_raw(**{"dynamics.attention.beta": [10.0, 2.0, 5.0],
                       "representations": {"particles": {"n": [32, 16]}}}))
    assert s.dims == {"dynamics.attention.beta": [2.0, 5.0, 10.0], "representations.particles.n": [16, 32]}
    assert s.shape == (3, 2) and len(s.members) == 6
    assert [m.values for m in s.members[:3]] == [
        {"dynamics.attention.beta": 2.0, "representations.particles.n": 16},
        {"dynamics.attention.beta": 2.0, "representations.particles.n": 32},
        {"dynamics.attention.beta": 5.0, "representations.particles.n": 16}]
    m = s.members[5]
    assert m.name == "member-0005" and m.config.dynamics.attention.beta == 10.0
    assert m.config.representations.particles.n == 32
    # --seed reaches every member
    s = expand(_raw(**{"dynamics.attention.beta": [2.0]}), seed=7)
    assert s.members[0].config.representations.particles.seed == 7


@pytest.mark.parametrize("sweep, message", [
    ({}, "non-empty \\[sweep\\] table"),
    ({"dynamics.attention.beta": 3.0}, "sweep.dynamics.attention.beta: must be a non-empty list"),
    ({"dynamics.attention.beta": []}, "non-empty list"),
    ({"dynamics.attention.beta": [1.0, float("nan")]}, "NaN"),
    ({"dynamics.attention.beta": [1.0, 1]}, "distinct"),
    ({"dynamics.attention.Q": [I2, I2]}, "numbers, strings or booleans"),
    ({"dynamics.attention.beta": [1.0, -1.0]}, "sweep member .*beta.*-1.0.*dynamics.attention.beta"),
    ({"dynamics.attention.betta": [1.0]}, "did you mean"),
])
def test_bad_sweeps_are_refused_before_any_file(tmp_path, sweep, message):
    with pytest.raises(ValueError, match=message):
        run_sweep(_raw(**sweep), tmp_path / "out", workers=0, progress=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="--workers"):
        run_sweep(_raw(**{"dynamics.attention.beta": [1.0]}), tmp_path / "out", workers=-1)


def test_sweep_on_a_local_cluster_collects_members_and_skips_them_on_a_rerun(tmp_path):
    raw = _raw(**{"representations.particles.seed": [1, 0], "dynamics.attention.beta": [5.0, 2.0]})
    out = tmp_path / "sweep"
    s = run_sweep(raw, out, workers=2, progress=False)
    assert (s["members"], s["completed"], s["skipped"]) == (4, 4, 0)
    ds = xr.open_dataset(out / "sweep.nc")
    assert ds.attrs["status"] == "complete"
    seeds, betas = "representations__particles__seed", "dynamics__attention__beta"
    assert list(ds[seeds].values) == [0, 1] and list(ds[betas].values) == [2.0, 5.0]
    # the density does not depend on the particle seed: stored per β only
    assert ds["density"].dims == (betas, "time", "theta")
    assert ds["particles_energy"].dims == (seeds, betas, "time")
    assert ds["position"].dims[:2] == (seeds, betas)  # N is not swept: same shape everywhere
    assert ds.attrs["variables_not_collected"] == ""
    # member (seed 1, β = 2) equals the same configuration run alone, bit for bit
    member = json.loads(json.dumps(raw))
    del member["sweep"]
    member["representations"]["particles"]["seed"] = 1
    member["dynamics"]["attention"]["beta"] = 2.0
    run(RunConfig.from_dict(member), tmp_path / "alone", progress=False)
    alone = xr.open_dataset(tmp_path / "alone" / "run.nc")
    for name in ("density", "particles_energy", "energy"):
        got = ds[name].sel({betas: 2.0}) if betas in ds[name].dims else ds[name]
        if seeds in got.dims:
            got = got.sel({seeds: 1})
        assert np.array_equal(got.values, alone[name].values), name
    ds.close()
    alone.close()
    # a re-run finds every member finished; a changed configuration is refused (issue 22.4),
    # and with overwrite runs them again
    s = run_sweep(raw, out, workers=2, progress=False)
    assert (s["completed"], s["skipped"]) == (0, 4)
    raw["stepping"]["t_end"] = 0.25
    with pytest.raises(OutputConflict, match="differing: stepping.t_end"):
        run_sweep(raw, out, workers=0, progress=False)
    s = run_sweep(raw, out, workers=0, progress=False, overwrite=True)
    assert (s["completed"], s["skipped"]) == (4, 0)
    assert math.isclose(float(xr.open_dataset(out / "sweep.nc")["time"].values[-1]), 0.25)


def test_cli_sweep_json_and_bad_input(tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text('''
[grid]
kind = "circle"
n = 32
[dynamics.attention]
Q = [[1.0, 0.0], [0.0, 1.0]]
K = [[1.0, 0.0], [0.0, 1.0]]
V = [[1.0, 0.0], [0.0, 1.0]]
beta = 5.0
[representations]
density = true
[stepping]
t_end = 0.25
output_every = 0.25
[sweep]
"dynamics.attention.beta" = [2.0, 4.0]
''')
    rc = main(["sweep", str(cfg), "--workers", "0", "--output", str(tmp_path / "o"), "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    # stderr is not a terminal here: one log line per finished member (a batch job's progress)
    assert "spherepde: member member-0000 done (1/2" in captured.err
    assert "spherepde: member member-0001 done (2/2" in captured.err
    assert (out["members"], out["completed"], out["skipped"]) == (2, 2, 0)
    assert out["file"].endswith("sweep.nc")
    (tmp_path / "file").write_text("x")
    assert main(["sweep", str(cfg), "--output", str(tmp_path / "file"), "--json"]) == 2
    assert "file" in json.loads(capsys.readouterr().out)["error"]
    assert main(["sweep", str(tmp_path / "missing.toml"), "--json"]) == 2


def test_a_script_that_imports_spherepde_first_can_sweep_with_workers(tmp_path):
    """Regression: a script's ``__main__`` is re-imported in the spawned workers, so numba is
    imported there before dask applies the workers' environment; with NUMBA_NUM_THREADS in that
    environment numba refused to compile ("Cannot set NUMBA_NUM_THREADS …")."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    raw = _raw(**{"dynamics.attention.beta": [2.0, 4.0]})
    script.write_text(
        "import numba  # imported before the workers' environment exists\n"
        "from spherepde.runs.sweep import run_sweep\n"
        "if __name__ == '__main__':\n"
        f"    s = run_sweep({raw!r}, {str(tmp_path / 'o')!r}, workers=1, progress=False)\n"
        "    print(s['completed'])\n")
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "2"


def test_interrupted_sweep_counts_its_members_and_writes_a_partial_sweep_nc(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the 3rd of 3 members runs (workers = 0): 2 counted as completed, a sweep.nc of
    those two marked interrupted (the 3rd member's entries NaN and named), the result object on
    stdout with --json and exit status 130; a re-run skips the two and completes the file."""
    import spherepde.runs.sweep as sweep_module

    interrupt_after(monkeypatch, sweep_module, "_run_member", 2)
    cfg = tmp_path / "s.json"
    cfg.write_text(json.dumps(_raw(**{"dynamics.attention.beta": [1.0, 2.0, 4.0]})))
    out = tmp_path / "o"
    rc = main(["sweep", str(cfg), "--workers", "0", "--output", str(out), "--json", "--quiet"])
    assert rc == 130
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "summary.json").read_text())
    for s in (printed, saved):
        assert s["interrupted"] is True and s["incomplete"] is True
        assert (s["members"], s["completed"], s["skipped"]) == (3, 2, 0)
    with xr.open_dataset(out / "sweep.nc") as ds:
        assert ds.attrs["status"] == "interrupted" and ds.attrs["members_missing"] == "member-0002"
        energy = ds["energy"].values  # (beta, time)
        assert np.all(np.isfinite(energy[:2])) and np.all(np.isnan(energy[2]))
    monkeypatch.undo()
    rc = main(["sweep", str(cfg), "--workers", "0", "--output", str(out), "--json", "--quiet"])
    done = json.loads(capsys.readouterr().out)
    assert rc == 0 and (done["completed"], done["skipped"]) == (1, 2)
    with xr.open_dataset(out / "sweep.nc") as ds:
        assert ds.attrs["status"] == "complete" and np.all(np.isfinite(ds["energy"].values))
