"""``summary.json`` of an experiment: written at the end, and also when the run is stopped.

An experiment builds its summary dict as it goes (the finished runs in ``summary["runs"]``) and
runs inside :func:`summary_on_interrupt` (through the study harness,
:func:`spherepde.experiments.study.study`): Ctrl-C, SIGTERM (raised as KeyboardInterrupt by the
command line) or an error then still leave ``summary.json`` with ``"interrupted": true`` and
everything computed so far (an error also adds ``"error"``), before the exception goes on.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path


#: significant digits of the floats in JSON output (:func:`jsonable`)
DIGITS = 15


def jsonable(obj):
    """Plain, standard JSON values (jq, JavaScript; not Python's NaN/Infinity): NaN → null,
    ±inf → "inf"/"-inf", numpy scalars → Python numbers (ints stay ints), numpy arrays → lists,
    floats rounded to :data:`DIGITS` significant digits (so a time 53·0.1 reads 5.3, not
    5.300000000000001: the last binary digits of a sum carry no information, and 15 digits
    are what a float64 holds exactly in decimal), recursively through dicts, lists and tuples.
    Every JSON file and ``--json`` output of the package goes through it (one convention)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
        return float(f"{obj:.{DIGITS}g}")
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def write_summary(outdir: str | os.PathLike, summary: dict) -> Path:
    """Write ``outdir/summary.json`` as strict JSON (:func:`jsonable`: NaN → null, ±inf →
    "inf"/"-inf"); return its path."""
    path = Path(outdir) / "summary.json"
    path.write_text(json.dumps(jsonable(summary), indent=1, allow_nan=False, default=float))
    return path


@contextlib.contextmanager
def summary_on_interrupt(outdir: str | os.PathLike, summary: dict) -> Iterator[dict]:
    """Run the block; if it raises (KeyboardInterrupt included) write ``summary`` with
    ``"interrupted": True`` to ``outdir/summary.json`` and re-raise.  After a normal end
    ``summary["interrupted"]`` is set to False (the experiment writes the file itself)."""
    try:
        yield summary
    except BaseException as err:
        summary["interrupted"] = True
        if not isinstance(err, KeyboardInterrupt):
            summary["error"] = f"{type(err).__name__}: {err}"
        try:
            write_summary(outdir, summary)
        except Exception as e:  # noqa: BLE001 - never hide the original exception
            err.add_note(f"spherepde: summary.json could not be written: {e!r}")
        raise
    summary["interrupted"] = False


__all__ = ["DIGITS", "jsonable", "summary_on_interrupt", "write_summary"]
