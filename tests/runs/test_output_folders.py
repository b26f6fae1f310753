"""An output folder that holds a result of another configuration is refused, naming the keys
that differ, unless --overwrite (issue 22.4); the same configuration is run again (run) or
continued (sweep, ensemble, experiment) as before."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spherepde.cli import main
from spherepde.io.netcdf import open_dataset, read_config
from spherepde.runs.folders import OVERWRITE, differing_keys, held

SMALL = ('[grid]\nkind = "circle"\nn = 16\n\n[dynamics.attention]\nQ = [[1, 0], [0, 1]]\n'
         'K = [[1, 0], [0, 1]]\nV = [[1, 0], [0, 1]]\nbeta = 3\n\n[initial]\nkind = "low-mode"\n\n'
         '[stepping]\nt_end = 0.5\noutput_every = 0.25\n')
SWEEP = '\n[sweep]\n"dynamics.attention.beta" = [1.0, 3.0]\n'


def _cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _cfg(tmp_path: Path, text: str = SMALL, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_differing_keys_name_leaves_and_one_sided_keys():
    old = {"a": {"b": 1, "c": [1, 2]}, "d": 1, "sweep": {"x.y": [1, 2]}}
    new = {"a": {"b": 2, "c": [1, 2]}, "e": 1, "sweep": {"x.y": [1, 2, 3]}}
    assert differing_keys(old, new) == ["a.b", "d", "e", "sweep.x.y"]
    assert differing_keys(old, old) == []


def test_run_same_configuration_again_other_refused_overwrite_replaces(tmp_path, capsys):
    cfg, out = _cfg(tmp_path), tmp_path / "o"
    base = ["run", str(cfg), "--output", str(out), "--quiet"]
    assert _cli(base, capsys)[0] == 0
    assert _cli(base, capsys)[0] == 0  # the same configuration: run again, as before
    before = (out / "run.nc").read_bytes()
    rc, stdout, err = _cli([*base, "--set", "dynamics.attention.beta=4", "--set",
                            "stepping.t_end=0.25"], capsys)
    assert rc == 2 and stdout == "" and len(err.strip().splitlines()) == 1
    assert "differing: dynamics.attention.beta, stepping.t_end" in err and "--overwrite" in err
    assert (out / "run.nc").read_bytes() == before  # untouched
    rc, _, _ = _cli([*base, "--set", "dynamics.attention.beta=4", "--overwrite"], capsys)
    assert rc == 0 and read_config(out / "run.nc")["dynamics"]["attention"]["beta"] == 4


def test_restart_into_a_folder_of_another_run_refused(tmp_path, capsys):
    cfg = _cfg(tmp_path)
    assert main(["run", str(cfg), "--output", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--output", str(tmp_path / "b"), "--quiet", "--set",
                 "dynamics.attention.beta=2"]) == 0
    capsys.readouterr()
    args = ["run", "--restart", str(tmp_path / "a" / "run.nc"), "--set", "stepping.t_end=0.75",
            "--output", str(tmp_path / "b"), "--quiet"]
    rc, _, err = _cli(args, capsys)
    assert rc == 2 and "differing: dynamics.attention.beta, stepping.t_end" in err
    assert _cli([*args, "--overwrite"], capsys)[0] == 0
    assert open_dataset(tmp_path / "b" / "run.nc")["time"].values[-1] == 0.75


def test_sweep_continues_same_refuses_other_overwrite_clears(tmp_path, capsys):
    out = tmp_path / "s"
    base = ["sweep", str(_cfg(tmp_path, SMALL + SWEEP)), "--workers", "0", "--output", str(out),
            "--quiet", "--json"]
    rc, stdout, _ = _cli(base, capsys)
    assert rc == 0 and json.loads(stdout)["completed"] == 2
    rc, stdout, _ = _cli(base, capsys)
    assert rc == 0 and (json.loads(stdout)["completed"], json.loads(stdout)["skipped"]) == (0, 2)
    before = (out / "sweep.nc").read_bytes()
    rc, stdout, err = _cli([*base, "--set", "stepping.t_end=0.75"], capsys)
    assert rc == 2 and "differing: stepping.t_end" in err
    assert json.loads(stdout) == {"error": err.strip().removeprefix("spherepde: error: ")}
    assert (out / "sweep.nc").read_bytes() == before
    # another [sweep] table is another configuration too; with --overwrite it replaces the
    # sweep, and the member folders the new sweep has not are removed
    other = _cfg(tmp_path, SMALL + '\n[sweep]\n"dynamics.attention.beta" = [2.0]\n', "d.toml")
    base[1] = str(other)
    rc, _, err = _cli(base, capsys)
    assert rc == 2 and "differing: sweep.dynamics.attention.beta" in err
    rc, stdout, _ = _cli([*base, "--overwrite"], capsys)
    assert rc == 0 and json.loads(stdout)["completed"] == 1
    assert sorted(p.name for p in (out / "members").iterdir()) == ["member-0000"]
    assert open_dataset(out / "sweep.nc")["dynamics__attention__beta"].values.tolist() == [2.0]


def test_run_and_sweep_refuse_each_others_folder(tmp_path, capsys):
    cfg = _cfg(tmp_path)
    assert main(["run", str(cfg), "--output", str(tmp_path / "r"), "--quiet"]) == 0
    capsys.readouterr()
    rc, _, err = _cli(["sweep", str(_cfg(tmp_path, SMALL + SWEEP, "s.toml")), "--workers", "0",
                       "--output", str(tmp_path / "r"), "--quiet"], capsys)
    assert rc == 2 and "holds a run (run.nc), not a sweep" in err
    assert not (tmp_path / "r" / "sweep.toml").exists()


def _ensemble(tmp_path: Path, out: Path, realisations: int, *extra) -> list[str]:
    return ["ensemble", "--realisations", str(realisations), "--set", "grid.nlat=8", "--set",
            "stepping.t_end=0.1", "--set", "stepping.dt=0.05", "--workers", "0",
            "--output", str(out), "--quiet", "--json", *extra]


def test_ensemble_other_realisations_refused_folder_untouched(tmp_path, capsys):
    out = tmp_path / "e"
    rc, stdout, _ = _cli(_ensemble(tmp_path, out, 2), capsys)
    assert rc == 0 and json.loads(stdout)["completed"] == 2
    summary = (out / "summary.json").read_text()
    rc, _, err = _cli(_ensemble(tmp_path, out, 3), capsys)
    assert rc == 2 and "differing: sweep.dynamics.noise.realisation" in err
    assert (out / "summary.json").read_text() == summary  # no pictures, no summary rewritten
    rc, stdout, _ = _cli(_ensemble(tmp_path, out, 3, "--overwrite"), capsys)
    res = json.loads(stdout)
    assert rc == 0 and (res["completed"], res["skipped"], res["realisations"]) == (1, 2, 3)


def _stub_experiment(monkeypatch, calls: list):
    """``experiment circle-clusters`` with its runner replaced by one that records the call
    (and the --overwrite it sees) and writes the summary a real run writes."""
    from spherepde.experiments.registry import EXPERIMENTS
    from spherepde.io.summary import write_summary

    entry = EXPERIMENTS["circle-clusters"]
    config_cls, _ = entry.load()

    def runner(config, outdir, *, progress=False):
        calls.append(OVERWRITE.get())
        Path(outdir).mkdir(parents=True, exist_ok=True)
        summary = {"experiment": entry.name, "config": config.to_dict(), "runs": [],
                   "seconds": 0.0, "interrupted": False}
        write_summary(outdir, summary)
        return summary

    monkeypatch.setattr(type(entry), "load", lambda self: (config_cls, runner))


def test_experiment_other_configuration_refused(tmp_path, capsys, monkeypatch):
    calls: list = []
    _stub_experiment(monkeypatch, calls)
    out = tmp_path / "x"
    base = ["experiment", "circle-clusters", "--quick", "--output", str(out), "--json"]
    assert _cli(base, capsys)[0] == 0
    assert _cli(base, capsys)[0] == 0  # the same configuration: continued
    rc, _, err = _cli([*base, "--t-end", "3"], capsys)
    assert rc == 2 and "holds an experiment of another configuration" in err
    assert "differing: config.t_end" in err
    assert calls == [False, False]  # refused before the runner
    assert _cli([*base, "--t-end", "3", "--overwrite"], capsys)[0] == 0
    assert calls == [False, False, True]  # the runs inside follow --overwrite
    assert held(out)[0] == "experiment"


def test_experiment_refuses_a_run_folder(tmp_path, capsys, monkeypatch):
    _stub_experiment(monkeypatch, [])
    assert main(["run", str(_cfg(tmp_path)), "--output", str(tmp_path / "r"), "--quiet"]) == 0
    capsys.readouterr()
    rc, _, err = _cli(["experiment", "circle-clusters", "--quick", "--output",
                       str(tmp_path / "r")], capsys)
    assert rc == 2 and "holds a run (run.nc), not an experiment" in err


@pytest.mark.parametrize("kind", ["run", "sweep", "experiment"])
def test_guard_message_articles(kind, tmp_path):
    from spherepde.runs.folders import OutputConflict, guard

    (tmp_path / "sweep.toml").write_text('[sweep]\n"a.b" = [1]\n')
    if kind == "sweep":
        with pytest.raises(OutputConflict, match="a sweep of another configuration"):
            guard(tmp_path, "sweep", {"sweep": {"a.b": [2]}})
    else:
        with pytest.raises(OutputConflict, match=f"not an? {kind}"):
            guard(tmp_path, kind, {})
