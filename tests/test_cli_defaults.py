"""Every ``spherepde`` command and every ``experiment … --quick`` through the command line with
its default options (workers included: a real local dask cluster where the default asks for
one).  The lists are read from the parser and the experiment registry, so a new command or
study without a case here fails :func:`test_every_command_has_a_case`.

Required arguments get small values (``validate transport --nlat 16``).  Where a default run is
longer than a unit test (``run`` on the embedded configuration to t = 16, ``demo`` at full size,
``validate sync-path`` at nlat 48 to t = 6), the default suite shortens it with the fewest options
and the full default is marked ``slow``.  The same holds for the ``--quick`` studies that take
more than a few seconds: the default suite gives their ``quick()`` configuration smaller sizes
(:data:`SMALLER`, set on the configuration class, so the command line and its default options
are the user's), and :func:`test_full_quick_experiment` (slow) runs every ``--quick`` as shipped.
The physics of each study is tested on its own (tests/experiments/).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math

import pytest

from spherepde.cli import build_parser, main
from spherepde.experiments.registry import EXPERIMENTS

SWEEP = """
[grid]
kind = "circle"
n = 32
[initial]
kind = "cosine"
direction = [1.0, 0.0]
amplitude = 0.5
[dynamics.attention]
Q = [[1.0, 0.0], [0.0, 1.0]]
K = [[1.0, 0.0], [0.0, 1.0]]
V = [[1.0, 0.0], [0.0, 1.0]]
beta = 2.0
[representations]
density = true
particles = {n = 20, seed = 1}
[stepping]
t_end = 0.5
output_every = 0.25
[sweep]
"representations.particles.n" = [10, 20]
"""

#: command -> the arguments of its default-options case ({out}: an existing output folder,
#: {run}: a run.nc written first by ``run``, {sweep}: the sweep configuration above)
CASES = {
    "demo": ["demo", "--quick", "--output", "{out}"],
    "run": ["run", "--set", "stepping.t_end=1.0", "--output", "{out}"],
    "plot": ["plot", "{run}", "--output", "{out}"],
    "sweep": ["sweep", "{sweep}", "--output", "{out}"],
    "ensemble": ["ensemble", "--realisations", "2", "--set", "stepping.t_end=0.2", "--output", "{out}"],
    "validate transport": ["validate", "transport", "--case", "williamson1", "--nlat", "16",
                           "--output", "{out}/t.nc"],
    "validate convergence": ["validate", "convergence", "--case", "williamson1", "--nlat", "8", "12", "16",
                             "--plot", "{out}/c.png"],
    "validate sync-path": ["validate", "sync-path", "--nlat", "16", "--t-end", "1.0", "--output",
                           "{out}/s"],
    "validate resolution": ["validate", "resolution", "{run}", "{run}"],
    "noise-kernel": ["noise-kernel", "--activation", "relu", "--d", "3"],
}
SLOW = {"run": ["run", "--output", "{out}"], "demo": ["demo", "--output", "{out}"],
        "validate sync-path": ["validate", "sync-path", "--output", "{out}/s"]}


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    out = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name == "experiment":
                    continue
                inner = _subcommands(sub, f"{prefix}{name} ")
                out |= inner or {f"{prefix}{name}"}
    return out


def test_every_command_has_a_case():
    assert _subcommands(build_parser()) == set(CASES)


def _args(args, tmp_path):
    fmt = {"out": str(tmp_path / "out"), "run": str(tmp_path / "r" / "run.nc"),
           "sweep": str(tmp_path / "sweep.toml")}
    return [a.format(**fmt) for a in args]


def _run(args, tmp_path, capsys) -> dict:
    if "{run}" in " ".join(args):
        assert main(["run", "--set", "stepping.t_end=1.0", "--output", str(tmp_path / "r"),
                     "--quiet"]) == 0
        capsys.readouterr()
    (tmp_path / "sweep.toml").write_text(SWEEP)
    (tmp_path / "out").mkdir()
    rc = main(_args(args, tmp_path) + ["--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    return json.loads(out.out, parse_constant=_no_constant)


@pytest.mark.parametrize("command", sorted(CASES))
def test_command_with_default_options(command, tmp_path, capsys):
    result = _run(CASES[command], tmp_path, capsys)
    assert isinstance(result, dict) and result


#: study -> the fields of its ``quick()`` configuration that the default suite makes smaller
SMALLER = {
    "metastability": {"nlat": 8, "betas": (5.0, math.inf), "t_end": 4.0, "n_outputs": 4},
    "terminal-phase": {"nlat": 8, "betas": (5.0,), "t_end": 4.0, "n_outputs": 4, "map_times": (0.0, 4.0)},
    "depth-width": {"depths": (4, 8, 16), "paths": 3, "ref_steps_per_layer": 4, "widths": (4, 16),
                    "width_realisations": 20, "batch": 20},
    "synchronization": {"realisations": 2, "t_end": 1.0, "n_outputs": 4, "lyapunov_pairs": 2,
                        "lyapunov_t": 1.0, "density_nlat": 16, "density_t_end": 0.5},
    "chaos": {"nlat": 8, "t_end": 0.2, "particle_counts": (50, 100)},
    "heat-kernel": {"nlat": 8, "n_circle": 16, "pairs_sphere": 4, "pairs_circle": 8, "t_end_sphere": 0.5,
                    "t_end_circle": 0.5, "ito_pairs": 8, "ito_steps": 10},
    "particles-vs-density": {"nlat": 8, "t_end": 0.5, "particle_counts": (50, 100)},
}


def _check_files(tmp_path) -> None:
    files = [p for p in (tmp_path / "out").rglob("*.json")]
    assert files
    for p in files:  # strict JSON, as the --json output: no bare NaN or Infinity
        json.loads(p.read_text(), parse_constant=_no_constant)


def test_smaller_names_fields_of_the_quick_configurations():
    for name, fields in SMALLER.items():
        config_cls, _ = EXPERIMENTS[name].load()
        dataclasses.replace(config_cls.quick(), **fields)  # TypeError for a field it does not have


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiment_quick_with_default_options(name, tmp_path, capsys, monkeypatch):
    if name in SMALLER:
        config_cls, _ = EXPERIMENTS[name].load()
        quick = config_cls.quick()
        monkeypatch.setattr(config_cls, "quick", classmethod(
            lambda cls: dataclasses.replace(quick, **SMALLER[name])))
    result = _run(["experiment", name, "--quick", "--output", "{out}"], tmp_path, capsys)
    assert isinstance(result, dict) and result
    _check_files(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALLER))
def test_full_quick_experiment(name, tmp_path, capsys):
    result = _run(["experiment", name, "--quick", "--output", "{out}"], tmp_path, capsys)
    assert isinstance(result, dict) and result
    _check_files(tmp_path)


def _no_constant(name):
    raise ValueError(f"not JSON: {name}")


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SLOW))
def test_full_default_command(command, tmp_path, capsys):
    result = _run(SLOW[command], tmp_path, capsys)
    if command == "run":
        assert math.isfinite(result["density"]["final"]["energy"])
