"""The study harness (spherepde.experiments.study): folder, partial summary, Ctrl-C, plot."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import pytest

from spherepde import __version__
from spherepde.experiments.study import study


@dataclass(frozen=True)
class _Config:
    n: int = 3

    def to_dict(self) -> dict:
        return asdict(self)


def _read(folder):
    return json.loads((folder / "summary.json").read_text())


def test_finish_writes_the_plot_seconds_and_summary(tmp_path):
    out = tmp_path / "a" / "b"
    with study("probe", _Config(), out) as job:
        assert out.is_dir() and job.outdir == out
        job.runs.append({"k": 1})
        summary = {**job.header, "runs": job.runs, "x": 2.5}
        got = job.finish(summary, lambda summ: out / f"probe_{summ['x']}.png")
    saved = _read(out)
    assert got is summary and saved == json.loads(json.dumps(got))
    assert list(saved)[:3] == ["experiment", "config", "version"]
    assert saved["experiment"] == "probe" and saved["config"] == {"n": 3} and saved["version"] == __version__
    assert saved["runs"] == [{"k": 1}] and saved["plot"] == str(out / "probe_2.5.png")
    assert saved["interrupted"] is False and saved["seconds"] >= 0
    assert list(saved)[-3:] == ["plot", "seconds", "interrupted"]


def test_several_figures_are_listed(tmp_path):
    with study("probe", _Config(), tmp_path) as job:
        job.finish({**job.header}, lambda summ: [tmp_path / "a.png", tmp_path / "b.png"])
    assert _read(tmp_path)["plot"] == [str(tmp_path / "a.png"), str(tmp_path / "b.png")]


@pytest.mark.parametrize("exc, error", [(KeyboardInterrupt, None), (RuntimeError, "RuntimeError: boom")])
def test_an_interrupt_or_error_leaves_the_partial_summary(tmp_path, exc, error):
    with pytest.raises(exc):
        with study("probe", _Config(), tmp_path) as job:
            job.runs.append({"k": 1})
            job.partial["extra"] = "kept"
            raise exc("boom")
    saved = _read(tmp_path)
    assert saved["interrupted"] is True and saved["runs"] == [{"k": 1}] and saved["extra"] == "kept"
    assert saved.get("error") == error and "plot" not in saved


def test_a_file_as_output_is_refused_before_the_block(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    ran = []
    with pytest.raises(ValueError, match="file"):
        with study("probe", _Config(), f):
            ran.append(1)
    assert ran == []
