"""The docs cannot drift from the data: every `<!-- numbers: … -->` block of README.md and
docs/*.md renders, from its data file, to exactly the text a reader sees (scripts/docs_numbers.py),
and README.md and docs/usage.md quote no measured-looking number outside such blocks."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    return _load_from(ROOT / "scripts", name)


def _load_from(folder: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


docs_numbers = _load("docs_numbers")


def test_every_numbers_block_matches_its_data_file():
    assert docs_numbers.check() == []


def test_the_bound_pages_have_blocks_and_their_data_files_say_how_they_were_made():
    files = {b.data for path in docs_numbers.docs_files() for b in docs_numbers.blocks(path)}
    assert "docs/data/examples.json" in files
    assert len(docs_numbers.blocks(ROOT / "docs" / "usage.md")) >= 3
    assert len(docs_numbers.blocks(ROOT / "README.md")) >= 1
    assert len(docs_numbers.blocks(ROOT / "docs" / "paper2.md")) >= 20
    for name in files:
        data = json.loads((ROOT / name).read_text())
        assert "script" in data or "benchmark" in data, f"{name} does not name the script that wrote it"


#: a measured-looking number: a decimal, a power of ten, a percentage, a ratio or a duration
MEASURED = re.compile(r"(?<![\w.`/-])(\d+\.\d+|\d+(\.\d+)?e[-−]?\d+|\d+(\.\d+)? ?%|\d+(\.\d+)?×"
                      r"|\d+ s\b|\d+ min\b)")
#: numbers that are inputs, not results: versions, tolerances and parameters of the text
ALLOWED = {"README.md": {"3.11", "15 s", "0.5", "20×"},
           "docs/usage.md": {"1e-13", "1.5", "10 s", "0.05", "0.5", "10 %", "0.1", "5 s"},
           # inputs (σ, Δt, fractions, targets, test tolerances) and theorem/section/issue numbers
           "docs/paper2.md": {"0.5", "0.999", "0.1", "0.01", "0.02", "0.99", "0.67", "1.5", "2.5", "0.3",
                              "0.32", "1e-12", "4.5", "5 %", "1.1", "1.2", "1.4", "3.3", "22.10"}}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_no_measured_number_outside_a_block(name):
    text = (ROOT / name).read_text()
    text = re.sub(r"<!-- numbers:.*?<!-- end numbers -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    found = {m[0].replace("−", "-") for m in MEASURED.finditer(text)} - ALLOWED[name]
    assert not found, f"{name}: numbers outside a numbers block: {sorted(found)}"


def test_render_formats_fields_and_refuses_a_missing_path():
    data = {"a": {"b": [0.5, -2.4122e-08]}, "n": 3}
    out = docs_numbers.render("x {a.b.0:.2f}, {a.b.1:.2g~}, n = {n}; e^{−β}", data)
    assert out == "x 0.50, −2.4e-8, n = 3; e^{−β}\n"
    with pytest.raises(KeyError, match="'a.c'"):
        docs_numbers.render("{a.c}", data)


def test_update_rewrites_a_stale_block_and_check_then_passes(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "d.json").write_text(json.dumps({"v": 0.123456, "script": "x"}))
    page = tmp_path / "docs" / "p.md"
    page.write_text("head\n<!-- numbers: d.json\nvalue {v:.3f}\n-->\nvalue 0.999\n<!-- end numbers -->\ntail\n")
    (tmp_path / "README.md").write_text("")
    assert docs_numbers.check(tmp_path) == ["docs/p.md:5: d.json"]
    assert docs_numbers.update(tmp_path) == 1
    assert page.read_text().endswith("-->\nvalue 0.123\n<!-- end numbers -->\ntail\n")
    assert docs_numbers.check(tmp_path) == []


def test_the_amr_table_is_what_its_script_prints_from_the_benchmark_files(capsys):
    """docs/amr.md's accuracy/cost table is printed by benchmarks/amr_metastability_table.py
    from benchmarks/results/amr_metastability_*.json; the page must hold those lines."""
    table = _load_from(ROOT / "benchmarks", "amr_metastability_table")
    table.main(sorted(str(p) for p in (ROOT / "benchmarks" / "results").glob("amr_metastability_*.json")))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|")]
    page = (ROOT / "docs" / "amr.md").read_text().splitlines()
    assert len(lines) >= 4 and all(ln in page for ln in lines), lines
