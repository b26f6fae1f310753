"""What an output folder already holds, and whether a new run may write into it.

A folder written by spherepde holds one of three kinds of result, recognised by a file:

* a sweep (``spherepde sweep``, ``ensemble``, the sweeps inside experiments): ``sweep.toml``,
  the whole sweep configuration (base and [sweep] table);
* a run (``spherepde run``, ``demo``, a sweep member): ``run.nc``, its configuration in the
  global attribute ``config_json`` (or, if the file cannot be read, ``config.toml``);
* an experiment (``spherepde experiment NAME``): ``summary.json`` with the key ``experiment``
  and the experiment's ``config``.

:func:`guard` refuses (:class:`OutputConflict`, a ``ValueError``: one line, exit status 2 on
the command line) to write a result into a folder that holds another kind of result, or the
same kind with another configuration, naming the configuration keys that differ; nothing is
written before.  The same configuration passes: a run is run again, a sweep skips its finished
members, as before.  ``overwrite=True`` (``--overwrite``) lets everything pass.  The command
line sets the default for a whole command with :func:`overwriting` (a context variable), so
the runs and sweeps an experiment starts inside its folder follow the experiment's choice.
"""
from __future__ import annotations

import contextlib
import json
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path

from spherepde.runs.config import key_paths

#: the default of ``overwrite`` where a function is given None (set by :func:`overwriting`)
OVERWRITE: ContextVar[bool] = ContextVar("spherepde_overwrite", default=False)

#: how many differing keys a refusal names before "and k more"
SHOWN = 6


class OutputConflict(ValueError):
    """The output folder holds another result; refused before anything is written."""


@contextlib.contextmanager
def overwriting(on: bool = True) -> Iterator[None]:
    """Inside the block ``overwrite=None`` means ``on`` (the command line's ``--overwrite``)."""
    token = OVERWRITE.set(bool(on))
    try:
        yield
    finally:
        OVERWRITE.reset(token)


_MISSING = object()


def differing_keys(old: Mapping, new: Mapping) -> list[str]:
    """The key paths (``dynamics.attention.beta``) whose values differ between two nested
    configurations, a key present on one side only included; sorted."""
    a, b = key_paths(old, empty_tables=True), key_paths(new, empty_tables=True)
    return sorted(k for k in set(a) | set(b) if a.get(k, _MISSING) != b.get(k, _MISSING))


def _read_toml(path: Path) -> dict | None:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def held(outdir: str | os.PathLike) -> tuple[str, dict | None, str] | None:
    """(kind, configuration, file it was read from) of the result in ``outdir``, or None when
    it holds none; the configuration is None when that file cannot be read."""
    outdir = Path(outdir)
    if not outdir.is_dir():
        return None
    if (outdir / "sweep.toml").is_file():
        return "sweep", _read_toml(outdir / "sweep.toml"), "sweep.toml"
    if (outdir / "run.nc").is_file():
        from spherepde.io.runfile import run_status

        _, config = run_status(outdir / "run.nc")
        if config is not None:
            return "run", config, "run.nc"
        return "run", _read_toml(outdir / "config.toml"), "config.toml"
    summary = outdir / "summary.json"
    if summary.is_file():
        try:
            data = json.loads(summary.read_text())
        except (OSError, ValueError):
            return None
        if isinstance(data, dict) and "experiment" in data:
            return "experiment", {"experiment": data["experiment"], "config": data.get("config")}, \
                "summary.json"
    return None


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def guard(outdir: str | os.PathLike, kind: str, config: Mapping, *, overwrite: bool | None = None,
          ignore: Iterable[str] = ()) -> bool:
    """Refuse to write a ``kind`` ("run", "sweep", "experiment") of ``config`` into ``outdir``
    when it holds another kind of result or one of another configuration (keys in ``ignore``
    aside); :class:`OutputConflict` naming the folder and the differing keys.  ``config`` must
    be in the form the folder stores it (see the module docstring).  Returns True when the
    folder holds a different result that ``overwrite`` lets be replaced (the caller may clear
    what would otherwise be left over), else False."""
    if overwrite is None:
        overwrite = OVERWRITE.get()
    found = held(outdir)
    if found is None:
        return False
    old_kind, old, source = found
    if old_kind != kind:
        if overwrite:
            return True
        raise OutputConflict(
            f"--output: {str(outdir)!r} holds {_a(old_kind)} ({source}), not {_a(kind)}; give "
            f"another --output, or --overwrite to write the {kind} there anyway")
    if old is None:
        return False  # unreadable: nothing to compare (the run writes it anew)
    skip = set(ignore)
    keys = [k for k in differing_keys(old, dict(config)) if k not in skip]
    if not keys:
        return False
    if overwrite:
        return True
    named = ", ".join(keys[:SHOWN]) + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")
    raise OutputConflict(
        f"--output: {str(outdir)!r} holds {_a(kind)} of another configuration ({source}; "
        f"differing: {named}); give another --output, or --overwrite to replace it")


__all__ = ["OVERWRITE", "OutputConflict", "differing_keys", "guard", "held", "overwriting"]
