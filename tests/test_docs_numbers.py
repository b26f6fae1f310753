"""The docs cannot drift from the data: every `<!-- numbers: … -->` block of README.md and
docs/*.md renders, from its data file, to exactly the text a reader sees (scripts/docs_numbers.py),
and every page quotes no measured-looking number outside such blocks, except the inputs its
ALLOWED set lists."""
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


def _same(stored, computed, path: str = "") -> list[str]:
    """Where ``computed`` differs from ``stored`` (nested dicts/lists): floats to 1e-9 relative,
    since a fit (lstsq, polyfit) moves in its last bits with the BLAS and the CPU; the rest
    exactly.  Both NaN counts as the same."""
    if isinstance(stored, dict) and isinstance(computed, dict):
        if set(stored) != set(computed):
            return [f"{path}: keys {sorted(set(stored) ^ set(computed))}"]
        return [d for k in stored for d in _same(stored[k], computed[k], f"{path}.{k}")]
    if isinstance(stored, list) and isinstance(computed, list):
        if len(stored) != len(computed):
            return [f"{path}: length {len(stored)} against {len(computed)}"]
        return [d for i, (a, b) in enumerate(zip(stored, computed)) for d in _same(a, b, f"{path}[{i}]")]
    if isinstance(stored, float) or isinstance(computed, float):
        if isinstance(stored, (int, float)) and isinstance(computed, (int, float)) \
                and not isinstance(stored, bool) and not isinstance(computed, bool) \
                and (stored == computed or (stored != stored and computed != computed)
                     or abs(stored - computed) <= 1e-9 * max(abs(stored), abs(computed))):
            return []
        return [f"{path}: {stored!r} against {computed!r}"]
    return [] if stored == computed else [f"{path}: {stored!r} against {computed!r}"]


def test_same_compares_floats_to_their_last_bits_only():
    assert _same({"a": [1.0, 2, "x"]}, {"a": [1.0 + 1e-15, 2, "x"]}) == []
    assert _same({"a": float("nan")}, {"a": float("nan")}) == []
    assert _same({"a": [1.0]}, {"a": [1.001]}) == [".a[0]: 1.0 against 1.001"]
    assert _same({"a": 1}, {"b": 1}) and _same([1, 2], [1]) and _same({"a": "x"}, {"a": "y"})
    assert _same({"a": 0.0}, {"a": 1e-300}) and _same({"a": True}, {"a": 1.0})


def test_every_numbers_block_matches_its_data_file():
    assert docs_numbers.check() == []


def test_the_bound_pages_have_blocks_and_their_data_files_say_how_they_were_made():
    files = {b.data for path in docs_numbers.docs_files() for b in docs_numbers.blocks(path)}
    assert "docs/data/examples.json" in files
    assert len(docs_numbers.blocks(ROOT / "docs" / "usage.md")) >= 3
    assert len(docs_numbers.blocks(ROOT / "README.md")) >= 1
    for page in ("paper1", "transport", "transport-validation", "transport-references", "weaknesses",
                 "sweeps", "noise-kernel-table", "equations", "attention", "benchmarks"):
        assert docs_numbers.blocks(ROOT / "docs" / f"{page}.md"), f"docs/{page}.md has no numbers block"
    assert len(docs_numbers.blocks(ROOT / "docs" / "paper2.md")) >= 20
    for name in files:
        data = json.loads((ROOT / name).read_text())
        # "experiment": a summary.json of `spherepde experiment NAME`, which names its command
        assert {"script", "benchmark", "experiment"} & set(data), f"{name} does not name what wrote it"


def test_the_derived_data_files_are_what_their_script_computes_from_their_inputs_now():
    derived = _load("docs_derived")
    for name in derived.DERIVED:
        assert _same(json.loads((ROOT / name).read_text()), derived.compute(name)) == [], \
            f"{name} is stale: run python3 scripts/docs_derived.py"


#: a measured-looking number: a decimal, a power of ten (1e-3, 2.1·10⁵), a percentage, a ratio, a
#: duration, or an integer with thin-space thousands groups (1 267)
MEASURED = re.compile(r"(?<![\w.`/-])(\d+(\.\d+)?e[-−]?\d+|\d+(\.\d+)?·10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+|\d+(\.\d+)? ?%"
                      r"|\d+(\.\d+)?×|\d+(\.\d+)? ?(?:s|ms|min|h)\b|\d{1,3}(?:[  ]\d{3})+\b|\d+\.\d+)")
#: labels that look like numbers: section and theorem numbers, arXiv identifiers and DOIs
LABELS = re.compile(r"(?:§|Thm |Prop |Cor |Lemma |eq\. |arXiv:|doi:|^#+ )\d+(?:\.\d+)*(?:[–-]\d+(?:\.\d+)*)?", re.M)

#: numbers that are inputs, not results, per page: versions, tolerances, parameters of the text,
#: definitions of test cases, defaults
ALLOWED = {
    "README.md": {"3.11", "15 s", "0.5", "20×"},
    "docs/usage.md": {"1e-13", "1.5", "10 s", "0.05", "0.5", "10 %", "0.1", "5 s", "2 %", "0.25"},
    "docs/equations.md": {
        "1e-9",   # the eigenspace tolerance of metrics.top_eigenspace
        "0.4",    # the spectral gap of the set-up's A (an input)
        "0.99",   # the default variance_fraction
        "0.5",    # the noise displacement bound (rad)
        "2.4", "0.95", "0.1", "0.9",  # definitions of the transport test cases
    },
    "docs/layout.md": {"1e-13", "0.05"},  # the grid area tolerance; the resolution floor
    "docs/netcdf.md": {"4.1"},    # cfchecker's version
    "docs/noise-kernel-table.md": {"1e-13"},  # the quadrature tolerance
    "docs/sweeps.md": {"5 s", "0.5"},  # the scheduler timeout; t_end of the grid sweep
    "docs/transport-references.md": {"0.8", "0.75", "0.1875"},  # Courant number; grid spacings (°)
    "docs/transport-validation.md": {"0.8", "0.05", "1.5"},  # Courant number; axis tilt; 1.5° grid
    "docs/transport.md": {
        "0.5",            # the deformation-number bound of a sweep
        "1.25",           # Colella–Sekora's curvature constant
        "1e-12", "1e-14",  # the cap's round-off thresholds
        "2.5", "1e-5", "1.5",  # the Courant number and the bounds the tests assert
        "0.01",           # the sync-path time step
    },
    "docs/weaknesses.md": {"0.1", "2.5", "1e-5", "20×"},  # background; test's Courant and bound; the aim
    # inputs (σ, Δt, fractions, targets, test tolerances) and theorem/section/issue numbers
    "docs/paper2.md": {"0.5", "0.999", "0.1", "0.01", "0.02", "0.99", "0.67", "1.5", "2.5", "0.3",
                       "0.32", "1e-12", "4.5", "5 %", "1.1", "1.2", "1.4", "3.3", "22.10",
                       "20 000"},  # the Monte Carlo draws of the kernel test
    # 2×2 splitting; the defaults mass_per_cell and max_cells' cap; the reference's N
    "docs/amr.md": {"2×", "3.3", "65 536", "20 000",
                    "0.01",                  # amr.BETA_H2
                    "0.98", "1.02", "2.5"},  # issue 20's target of validate sync-path
    "docs/attention.md": {
        "1e-8",           # the default tol
        "1e-12",          # the tolerance below which the compiled sums give way to culled; the test floor
        "1.5e-14",        # the legacy polynomial's design error per term
        "90 %",           # compiled.CULL_MAX_FRACTION
        "5e-16",          # the round-off model's constant
        "1e-6",           # the float32 error model's constant
        "0.1",            # diag(0.1, 1, 1), a test case
    },
    "docs/benchmarks.md": set(),
    "docs/paper1.md": {
        "0.01",           # amr.BETA_H2 (β·h² at the finest cell)
        "0.2",            # min_mass_ratio of find_clusters
        "0.4",            # the spectral gap of A (an input of the set-up)
        "0.6", "0.5", "0.3",  # the direction â of ρ₀
        "0.05", "0.8",    # dt = min(0.05, 0.8·Δx/‖V‖₂)
    },
}


def test_every_page_is_checked_for_numbers_outside_blocks():
    pages = {str(p.relative_to(ROOT)) for p in docs_numbers.docs_files()}
    assert pages == set(ALLOWED), sorted(pages ^ set(ALLOWED))


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_no_measured_number_outside_a_block(name):
    text = (ROOT / name).read_text()
    text = re.sub(r"<!-- numbers:.*?<!-- end numbers -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)  # link targets (file names)
    text = LABELS.sub("", text)
    found = {m[0].replace("−", "-") for m in MEASURED.finditer(text)} - ALLOWED[name]
    assert not found, f"{name}: numbers outside a numbers block: {sorted(found)}"


def test_the_measured_number_pattern_catches_the_common_forms():
    text = "took 1 267 s, 2.5×, 3 %, 1e-3, 6·10⁵, 16 ms, 11 min; not Thm 1.4, §3.4–3.5 or v3"
    text = LABELS.sub("", text)
    found = [m[0] for m in MEASURED.finditer(text)]
    assert found == ["1 267", "2.5×", "3 %", "1e-3", "6·10⁵", "16 ms", "11 min"], found


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


def test_the_amr_table_is_what_its_script_makes_of_the_benchmark_files_now():
    """docs/amr.md renders its accuracy/cost table from docs/data/amr_metastability_table.json,
    written by benchmarks/amr_metastability_table.py from the benchmark files it names."""
    table = _load_from(ROOT / "benchmarks", "amr_metastability_table")
    data = json.loads((ROOT / "docs" / "data" / "amr_metastability_table.json").read_text())
    inputs = [str(ROOT / p) for p in data["inputs"]]
    assert data["markdown_table"] == table.table(inputs)
    assert _same(data["same_accuracy"], table.same_accuracy(inputs)) == []
    same = data["same_accuracy"]  # the fixed grid converges, slowly, and costs more per grid
    assert 0 < same["ffsl_error_order"] < 3 and same["ffsl_cpu_exponent"] > 2
    assert len(data["markdown_table"].splitlines()) >= 6
