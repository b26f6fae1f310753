"""The experiments' registry (spherepde.experiments.registry) and the command line generated
from it: one ``experiment`` sub-command per entry with exactly its options, no experiment name
spelled in spherepde/cli/, every entry importable and its options naming real configuration fields."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

import spherepde.cli as cli
from spherepde.experiments.registry import EXPERIMENTS, OPTION_ORDER


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _experiment_parsers() -> dict[str, argparse.ArgumentParser]:
    return _subparsers(_subparsers(cli.build_parser())["experiment"])


def test_every_registered_experiment_has_a_subcommand_with_its_options():
    parsers = _experiment_parsers()
    assert list(parsers) == list(EXPERIMENTS)
    for name, entry in EXPERIMENTS.items():
        flags = [a.option_strings[0] for a in parsers[name]._actions if a.option_strings]
        assert flags == ["-h", "--quick", *[o.flag for o in entry.options], "--output", "--overwrite", "--json"], name
        out = next(a for a in parsers[name]._actions if a.dest == "output")
        assert out.default == f"out/{name}"


def test_no_experiment_name_is_spelled_in_cli():
    source = "".join(p.read_text() for p in Path(cli.__file__).parent.glob("*.py"))
    for name in EXPERIMENTS:
        assert name not in source, name
    for entry in EXPERIMENTS.values():
        assert entry.config not in source and entry.runner not in source


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_entries_load_and_their_options_set_real_fields(name):
    entry = EXPERIMENTS[name]
    config_cls, runner = entry.load()
    assert callable(runner) and dataclasses.is_dataclass(config_cls)
    names = {f.name for f in dataclasses.fields(config_cls)}
    for opt in entry.options:
        assert opt.flag in OPTION_ORDER
        assert opt.fields and set(opt.fields) <= names, (name, opt.flag)
    assert isinstance(entry.configure({}, quick=True), config_cls)
    assert entry.configure({}) == config_cls()


def test_configure_applies_checked_values():
    heat = EXPERIMENTS["heat-kernel"].configure({"t_end": 0.5, "workers": 1, "nlat": 8}, quick=True)
    assert (heat.t_end_sphere, heat.t_end_circle, heat.workers, heat.nlat) == (0.5, 0.5, 1, 8)
    pvd = EXPERIMENTS["particles-vs-density"].configure({"particle_counts": [300, 100, 300]})
    assert pvd.particle_counts == (100, 300)
    with pytest.raises(ValueError, match="--nlat must be an even integer >= 4, got 5"):
        EXPERIMENTS["metastability"].configure({"nlat": 5})
    with pytest.raises(ValueError, match="not used on the circle"):
        EXPERIMENTS["circle-clusters"].configure({"betas": [3.0, float("inf")]})
    # the checks run in OPTION_ORDER: --nlat before --particle-counts, whatever the help order
    with pytest.raises(ValueError, match="--nlat"):
        EXPERIMENTS["chaos"].configure({"particle_counts": [1], "nlat": 3})
    with pytest.raises(ValueError, match="--nlat must be a multiple of 4"):  # chaos runs nlat/2 too
        EXPERIMENTS["chaos"].configure({"nlat": 18})
    assert EXPERIMENTS["chaos"].configure({"workers": 0}, quick=True).workers == 0
    # Paper 1's density: amr by default, the fixed grid on request, nothing else
    meta = EXPERIMENTS["metastability"]
    assert meta.configure({}).density_scheme == "amr"
    assert meta.configure({"density_scheme": "ffsl-ppm"}).density_scheme == "ffsl-ppm"
    with pytest.raises(ValueError, match=r"--density-scheme must be one of \['amr', 'ffsl-ppm'\]"):
        EXPERIMENTS["terminal-phase"].configure({"density_scheme": "lagrangian-remap"})
