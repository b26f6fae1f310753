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


ABOVE_IO = ("spherepde.io", "spherepde.runs", "spherepde.experiments", "spherepde.cli")


def test_validation_imports_no_io_and_no_experiments():
    paths = modules_of("validation")
    assert len(paths) >= 5
    assert _hits(paths, ABOVE_IO) == {}


@pytest.mark.parametrize("layer", ["grids", "noise", "dynamics", "solvers", "validation", "checks"])
def test_layers_below_io_import_nothing_above(layer):
    assert _hits(modules_of(layer), ABOVE_IO) == {}


def test_io_imports_no_runs_no_experiments_and_no_cli():
    assert _hits(modules_of("io"), ABOVE_IO[1:]) == {}


def test_runs_import_no_experiments_and_no_cli():
    assert len(modules_of("runs")) >= 8
    assert _hits(modules_of("runs"), ABOVE_IO[2:]) == {}


def test_experiments_import_no_cli():
    assert _hits(modules_of("experiments"), ("spherepde.cli",)) == {}


def test_no_import_circle_between_modules():
    """No two modules import each other, directly or around a longer circle (lazy imports
    inside functions count too; a package's ``__init__`` re-exporting its modules does not)."""
    packages = {_module_name(p) for p in PACKAGE.rglob("__init__.py")}
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")} - packages

    def target(m):  # spherepde.a.b.name -> the module spherepde.a.b (None: a package)
        while m not in modules and "." in m:
            m = m.rsplit(".", 1)[0]
        return m if m in modules else None

    edges = {_module_name(p): {t for m in imported_modules(p) if (t := target(m))} - {_module_name(p)}
             for p in PACKAGE.rglob("*.py") if _module_name(p) in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = [stack.pop()]
            while comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert circles == []


#: what assembles a run: the run loop, steppers, particle systems, attention, sampling
RUN_PIECES = ("spherepde.solvers.controller", "spherepde.solvers.make_stepper", "spherepde.solvers.trackers",
              "spherepde.solvers.registry", "spherepde.solvers.lagrangian", "spherepde.solvers.eulerian.spde",
              "spherepde.solvers.eulerian.meanfield", "spherepde.solvers.eulerian.transport",
              "spherepde.dynamics", "spherepde.grids.sampling", "spherepde.noise.brownian",
              "spherepde.noise.field")


def test_runs_and_experiments_are_the_only_layers_above_io_that_assemble_runs():
    """The command line hands every run to :mod:`spherepde.runs` or :mod:`spherepde.experiments`;
    of the layers above io only these import the pieces of a run (io itself only their result
    types)."""
    assert _hits(modules_of("cli"), RUN_PIECES) == {}
    assert _hits(modules_of("__main__"), RUN_PIECES) == {}
    assembling = {p.parent.name for p in PACKAGE.rglob("*.py")
                  if _hits([p], RUN_PIECES) and _hits([p], ("spherepde.io",)) and p.parent.name != "io"}
    assert assembling <= {"experiments", "runs"}, assembling
