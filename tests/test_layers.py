"""The layers import one way (docs/layout.md): grids ← noise, dynamics ← solvers ← validation ←
io ← experiments ← cli.  Checked on the source (every import statement, also those inside
functions), so a lazy import cannot hide a wrong direction."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spherepde"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every ``spherepde…`` module (and imported name, ``spherepde.x.y``) that ``path`` imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing package
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in out if m == "spherepde" or m.startswith("spherepde.")}


def modules_of(layer: str) -> list[Path]:
    base = PACKAGE / layer
    return sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]


def _hits(paths, forbidden) -> dict[str, list[str]]:
    bad = {}
    for p in paths:
        hit = sorted(m for m in imported_modules(p) if any(m == f or m.startswith(f + ".") for f in forbidden))
        if hit:
            bad[str(p.relative_to(PACKAGE.parent))] = hit
    return bad


def test_the_scan_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "spherepde" / "validation"
    pkg.mkdir(parents=True)
    f = pkg / "probe.py"
    f.write_text("def f():\n    from spherepde.io.netcdf import open_dataset\n    from . import metrics\n"
                 "    import spherepde.experiments.run\n")
    global PACKAGE
    old, PACKAGE = PACKAGE, tmp_path / "spherepde"
    try:
        mods = imported_modules(f)
    finally:
        PACKAGE = old
    assert {"spherepde.io.netcdf", "spherepde.validation.metrics", "spherepde.experiments.run"} <= mods


def test_validation_imports_no_io_and_no_experiments():
    paths = modules_of("validation")
    assert len(paths) >= 5
    assert _hits(paths, ("spherepde.io", "spherepde.experiments", "spherepde.cli")) == {}


@pytest.mark.parametrize("layer", ["grids", "noise", "dynamics", "solvers", "validation", "checks"])
def test_layers_below_io_import_nothing_above(layer):
    assert _hits(modules_of(layer), ("spherepde.io", "spherepde.experiments", "spherepde.cli")) == {}


def test_io_imports_no_experiments_and_no_cli():
    assert _hits(modules_of("io"), ("spherepde.experiments", "spherepde.cli")) == {}


def test_experiments_import_no_cli():
    assert _hits(modules_of("experiments"), ("spherepde.cli",)) == {}


#: what assembles a run: the run loop, steppers, particle systems, attention, sampling
RUN_PIECES = ("spherepde.solvers.controller", "spherepde.solvers.make_stepper", "spherepde.solvers.trackers",
              "spherepde.solvers.registry", "spherepde.solvers.lagrangian", "spherepde.solvers.eulerian.spde",
              "spherepde.solvers.eulerian.meanfield", "spherepde.solvers.eulerian.transport",
              "spherepde.dynamics", "spherepde.grids.sampling", "spherepde.noise.brownian",
              "spherepde.noise.field")


def test_experiments_is_the_only_layer_above_io_that_assembles_runs():
    """The command line hands every run to :mod:`spherepde.experiments`; of the layers above io
    only experiments imports the pieces of a run (io itself only their result types)."""
    assert _hits(modules_of("cli"), RUN_PIECES) == {}
    assert _hits(modules_of("__main__"), RUN_PIECES) == {}
    assembling = {p.parent.name for p in PACKAGE.rglob("*.py")
                  if _hits([p], RUN_PIECES) and _hits([p], ("spherepde.io",)) and p.parent.name != "io"}
    assert assembling <= {"experiments"}, assembling
