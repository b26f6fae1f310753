"""What the command line prints (issue 22.13): the top-level help, a closed stdout, numbers in
JSON output, the plain-text results of run and experiment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spherepde.cli import _experiment_text, main
from spherepde.io.summary import DIGITS, jsonable

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

SMALL = ('[grid]\nkind = "circle"\nn = 16\n\n[dynamics.attention]\nQ = [[1, 0], [0, 1]]\n'
         'K = [[1, 0], [0, 1]]\nV = [[1, 0], [0, 1]]\nbeta = 3\n\n[initial]\nkind = "low-mode"\n\n'
         '[representations]\ndensity = true\nparticles = {n = 20}\n\n'
         '[stepping]\nt_end = 0.5\noutput_every = 0.25\n')


def test_top_level_help_is_a_description_not_a_docstring(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert "spherepde simulates" in out and "spherepde demo" in out and "exit status" in out
    assert "``" not in out and ":mod:" not in out and ":func:" not in out


def _floats(obj):
    if isinstance(obj, float):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _floats(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _floats(v)


def test_json_floats_have_fifteen_significant_digits():
    assert jsonable({"t": 53 * 0.1, "s": [0.1 + 0.2], "x": 1 / 3}) == {
        "t": 5.3, "s": [0.3], "x": float(f"{1 / 3:.{DIGITS}g}")}
    assert jsonable(2.5e-300) == 2.5e-300 and jsonable(7) == 7 and jsonable(True) is True


def test_run_plain_text_is_short_and_json_rounded(tmp_path, capsys):
    """``run`` without --json: a few lines (what ran, the numbers, where the file is), no JSON;
    with --json and ``plot --json`` every float is at most 15 significant digits."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL)
    out = tmp_path / "o"
    assert main(["run", str(cfg), "--output", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    assert 3 <= len(lines) <= 8 and all(len(line) <= 160 for line in lines), text
    assert lines[0].startswith("spherepde run: complete") and "t = 0.5" in lines[0]
    assert str(out / "run.nc") in text and "{" not in text
    assert any(line.split()[0] == "density" for line in lines[1:])
    assert any(line.split()[0] == "particles" for line in lines[1:])
    assert main(["run", str(cfg), "--output", str(out), "--quiet", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert all(float(f"{x:.{DIGITS}g}") == x for x in _floats(res))
    assert main(["plot", str(out / "run.nc"), "--no-animation", "--dpi", "40", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["times"] and all(float(f"{x:.{DIGITS}g}") == x for x in _floats(res))


def test_experiment_plain_text_is_a_few_lines():
    summary = {"experiment": "heat-kernel", "config": {"t_end": 1.0}, "seconds": 12.345,
               "runs": [{"grid": "sphere", "degree": k, "rate": -k * (k + 1) * 0.5,
                         "series": list(range(20))} for k in range(1, 11)],
               "fit": {"slope": 1.0000000001, "stderr": 0.01, "points": [1, 2]},
               "summary": "out/heat-kernel/summary.json", "plot": "out/heat-kernel/heat_kernel.png"}
    lines = _experiment_text("heat-kernel", summary)
    assert lines[0] == "spherepde experiment heat-kernel: done in 12.35 s"
    assert len(lines) <= 12 and "2 more runs" in "\n".join(lines)
    assert "  fit: slope 1, stderr 0.01" in lines
    assert lines[-1].endswith("summary.json, out/heat-kernel/heat_kernel.png")
    assert all("[" not in line for line in lines)


def test_closed_stdout_ends_quietly():
    """stdout closed before the result is printed (``… --json | head -1`` after head has
    gone): no traceback, exit status 141."""
    proc = subprocess.Popen([sys.executable, "-m", "spherepde", "noise-kernel", "--activation",
                             "relu", "--d", "3", "--nmax", "40", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()  # before the interpreter has even started: every write meets EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert err == ""


def test_run_json_piped_into_head(tmp_path):
    """The pipeline of the issue: ``spherepde run … --json | head -1`` prints ``{`` and no
    traceback, whether or not the pipe closes before the rest is written."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL)
    cmd = (f"{sys.executable} -m spherepde run {cfg} --output {tmp_path / 'o'} --quiet --json "
           f"| head -1")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=ENV, timeout=600)
    assert proc.stdout == "{\n" and "Traceback" not in proc.stderr and "Error" not in proc.stderr
