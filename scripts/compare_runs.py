"""Compare run.nc files of two source trees bit for bit (e.g. before and after a refactoring).

    python scripts/compare_runs.py OLD_DIR NEW_DIR NAME [NAME ...] [--json OUT.json]

For every NAME, OLD_DIR/NAME/run.nc and NEW_DIR/NAME/run.nc are read (netCDF4, no masking) and
every variable is compared with ``np.array_equal(..., equal_nan=True)`` on its raw bytes' values
(no tolerance).  The result — per run, the variables compared and those that differ — is printed
and written as JSON; the exit status is 1 if any variable differs or is missing on one side.
Attributes (provenance: version, dates, commit) are not compared.  With ``--every-nc`` every
``*.nc`` under OLD_DIR/NAME (sweep.nc, members' run.nc, an experiment's files) is compared with
the same path under NEW_DIR/NAME, each reported as ``NAME/relative/path``; a file missing on the
new side is reported with ``differ = ["<missing>"]``.  With ``--summaries`` every
``summary.json`` under OLD_DIR/NAME is compared too, key by key (every leaf, by its key path;
the values exactly, after the folder names OLD_DIR and NEW_DIR in strings are made equal): the
leaves compared, those that differ or exist on one side only, and the run times left out
(:data:`TIMING` keys: seconds of a run, which no two runs share).  Key order is not compared.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import netCDF4
import numpy as np

#: summary.json keys holding measured run times (left out of the comparison, listed)
TIMING = ("seconds", "step_seconds")


def _variables(path: Path) -> dict[str, np.ndarray]:
    with netCDF4.Dataset(path) as ds:
        out = {}
        for name, var in ds.variables.items():
            var.set_auto_mask(False)
            out[name] = np.array(var[...])
        return out


def compare(old: Path, new: Path) -> dict:
    a, b = _variables(old), _variables(new)
    differ = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            differ.append(name)
            continue
        x, y = a[name], b[name]
        same_kind = x.dtype == y.dtype and x.shape == y.shape
        nan_ok = x.dtype.kind in "fc"
        if not (same_kind and np.array_equal(x, y, equal_nan=nan_ok)):
            differ.append(name)
    return {"variables": len(set(a) | set(b)), "differ": differ}


def _leaves(obj, path: str = "") -> dict:
    """{key path: value} of every leaf of a JSON value (lists by index)."""
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in _leaves(val, f"{path}.{key}" if path else key).items()}
    if isinstance(obj, list):
        return {k: v for i, val in enumerate(obj) for k, v in _leaves(val, f"{path}[{i}]").items()}
    return {path: obj}


def compare_summary(old: Path, new: Path, old_root: Path, new_root: Path) -> dict:
    def load(path: Path, root: Path) -> dict:
        text = path.read_text().replace(str(root.resolve()), "<DIR>").replace(str(root), "<DIR>")
        return _leaves(json.loads(text))

    a, b = load(old, old_root), load(new, new_root)
    timing = sorted(k for k in set(a) | set(b) if k.rsplit(".", 1)[-1] in TIMING)
    differ = sorted(k for k in set(a) | set(b) if k not in timing and (k not in a or k not in b or a[k] != b[k]))
    return {"leaves": len(set(a) | set(b)), "differ": differ, "timing_left_out": timing}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--every-nc", action="store_true", help="compare every *.nc under each NAME")
    ap.add_argument("--summaries", action="store_true", help="compare every summary.json under each NAME too")
    args = ap.parse_args(argv)
    if args.every_nc:
        result = {}
        for name in args.names:
            for f in sorted((args.old / name).rglob("*.nc")):
                rel = f.relative_to(args.old)
                g = args.new / rel
                result[str(rel)] = (compare(f, g) if g.exists()
                                    else {"variables": 0, "differ": ["<missing>"]})
    else:
        result = {name: compare(args.old / name / "run.nc", args.new / name / "run.nc")
                  for name in args.names}
    if args.summaries:
        for name in args.names:
            for f in sorted((args.old / name).rglob("summary.json")):
                rel = f.relative_to(args.old)
                g = args.new / rel
                result[str(rel)] = (compare_summary(f, g, args.old, args.new) if g.exists()
                                    else {"leaves": 0, "differ": ["<missing>"]})
    text = json.dumps(result, indent=1)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 1 if any(r["differ"] for r in result.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
