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
