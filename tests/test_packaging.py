"""The packaging claims: the Python versions pyproject.toml admits are the ones the code runs on.

``requires-python`` says ≥ 3.11 (the package uses tomllib and BaseException.add_note, both new in
3.11).  CI runs the suite on CPython 3.11, the lower bound itself; this file checks that no module
uses syntax newer than 3.11 (which a developer on 3.12+ would not notice) and that the claim and
the interpreter agree.
"""
from __future__ import annotations

import ast
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MIN = (3, 11)


def test_requires_python_is_the_tested_minimum():
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip())
    assert m, spec
    assert (int(m[1]), int(m[2])) == MIN
    assert sys.version_info[:2] >= MIN


def test_sources_parse_as_python_3_11():
    files = sorted((ROOT / "spherepde").rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(files) > 30
    for f in files:
        ast.parse(f.read_text(), filename=str(f), feature_version=MIN)


def test_nothing_points_outside_the_repository():
    """Users get a clone: README, docs, examples and sources may not send them to the developers'
    folder beside it (``../shared``: SPEC.md, the anchors); the equations are in docs/."""
    import subprocess

    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    files = ([ROOT / f for f in listed.stdout.splitlines()] if listed.returncode == 0
             else [p for p in ROOT.rglob("*") if ".git" not in p.parts])
    # docs/prototypes: earlier issues' research scripts, kept as they ran
    texts = [p for p in files if p.suffix in (".md", ".py", ".toml", ".sh") and p.is_file()
             and "prototypes" not in p.parts]
    here = pathlib.Path(__file__).resolve()
    bad = {str(p.relative_to(ROOT)): m.group(0) for p in texts if p != here
           for m in [re.search(r"\.\./shared|shared/anchors|SPEC\.md|DESIGN\.md", p.read_text(errors="ignore"))] if m}
    assert bad == {}
