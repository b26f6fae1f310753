"""Render the measured numbers of README.md and docs/*.md from the data files that hold them.

A number that comes from a run is written in Markdown inside a *numbers block*::

    <!-- numbers: docs/data/examples.json
    falls from {examples.synchronization_d5.energy_first:.2g} to {examples.synchronization_d5.energy_last:.2g~}
    -->
    falls from 0.046 to 2.4e-8
    <!-- end numbers -->

The HTML comment holds the template and the data file (a path from the repository root); the
lines up to ``<!-- end numbers -->`` are its rendering, which is what a reader sees. A field
``{a.b.0:SPEC}`` is the value at that path of the JSON (dict keys, list indices) formatted
with Python's format ``SPEC``, then tidied: exponents lose their ``+`` and leading zeros
(``2.4e-08`` → ``2.4e-8``), and a trailing ``~`` in SPEC writes a leading minus sign as ``−``.

    python3 scripts/docs_numbers.py          # re-render every block in place
    python3 scripts/docs_numbers.py --check  # exit 1 and list the blocks that differ

tests/test_docs_numbers.py runs the check, so the docs cannot drift from the data; the data files
are written by scripts (e.g. scripts/docs_examples.py) that record how they were measured.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- numbers: (?P<data>\S+)\n(?P<template>.*?)\n-->\n(?P<body>.*?)<!-- end numbers -->",
                   re.S)
FIELD = re.compile(r"\{(?P<path>[A-Za-z0-9_.\-]+)(?::(?P<spec>[^{}]*))?\}")
EXPONENT = re.compile(r"e([+-])0*(\d)")


@dataclass
class Block:
    file: Path
    data: str
    template: str
    body: str
    start: int
    end: int


def docs_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [Block(path, m["data"], m["template"], m["body"], m.start("body"), m.end("body"))
            for m in BLOCK.finditer(text)]


def lookup(data, path: str):
    """The value at a dotted path (dict keys; integer parts index lists)."""
    value = data
    for part in path.split("."):
        if isinstance(value, list):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(f"{path!r}: no {part!r} in the data")
    return value


def fmt(value, spec: str) -> str:
    unicode_minus = spec.endswith("~")
    spec = spec.rstrip("~")
    text = format(value, spec) if spec else str(value)
    text = EXPONENT.sub(lambda m: "e" + ("-" if m[1] == "-" else "") + m[2], text)
    return "−" + text[1:] if unicode_minus and text.startswith("-") else text


def render(template: str, data) -> str:
    """The template with every field replaced by its formatted value (a trailing newline)."""
    return FIELD.sub(lambda m: fmt(lookup(data, m["path"]), m["spec"] or ""), template) + "\n"


def _load(root: Path, name: str, cache: dict):
    if name not in cache:
        cache[name] = json.loads((root / name).read_text())
    return cache[name]


def check(root: Path = ROOT) -> list[str]:
    """Blocks whose rendering differs from the text, as 'file:line: data' strings."""
    cache: dict = {}
    bad = []
    for path in docs_files(root):
        text = path.read_text()
        for b in blocks(path):
            if render(b.template, _load(root, b.data, cache)) != b.body:
                bad.append(f"{path.relative_to(root)}:{text[:b.start].count(chr(10)) + 1}: {b.data}")
    return bad


def update(root: Path = ROOT) -> int:
    """Re-render every block in place; the number of blocks changed."""
    cache: dict = {}
    changed = 0
    for path in docs_files(root):
        text, pieces, pos = path.read_text(), [], 0
        for b in blocks(path):
            new = render(b.template, _load(root, b.data, cache))
            changed += new != b.body
            pieces += [text[pos:b.start], new]
            pos = b.end
        new_text = "".join(pieces) + text[pos:]
        if new_text != text:
            path.write_text(new_text)
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="report blocks that differ; change nothing")
    a = p.parse_args(argv)
    if a.check:
        bad = check()
        for line in bad:
            print(f"out of date: {line}")
        return 1 if bad else 0
    print(f"{update()} block(s) re-rendered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
