"""Configuration files, ``--set`` and ``--seed``: reading TOML/JSON, assigning key paths,
writing TOML, and the embedded default configuration."""
from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spherepde.runs.config.values import check_int
from spherepde.runs.config.tree import RunConfig


# ---- files, --set and --seed ---------------------------------------------------------------
def read_raw(path: str | Path) -> dict:
    """The raw configuration dict of a ``.toml`` or ``.json`` file (not validated)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config: no such file {str(path)!r}")
    try:
        if path.suffix == ".toml":
            return tomllib.loads(path.read_text())
        if path.suffix == ".json":
            return json.loads(path.read_text())
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"config: {str(path)!r} is not valid {path.suffix[1:].upper()}: {err}") from None
    raise ValueError(f"config: file must end in .toml or .json, got {path.name!r}")


def load(path: str | Path) -> RunConfig:
    """Read and validate a configuration file."""
    return RunConfig.from_dict(read_raw(path))


def parse_value(text: str):
    """A ``--set`` value as a TOML literal (``30``, ``inf``, ``[[1, 0], [0, 1]]``, ``"relu"``,
    ``true``); anything that is not a literal is taken as a bare string (``relu``)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def key_paths(table: Mapping, prefix: str = "", *, empty_tables: bool = False) -> dict:
    """A nested table as {key path: value}: {"a": {"b": 1}} → {"a.b": 1} (a key already written
    "a.b" stays).  ``empty_tables`` keeps an empty table as a value of its own path (so that
    ``{"a": {}}`` differs from no ``a``); otherwise it has no paths."""
    out: dict = {}
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and (value or not empty_tables):
            out.update(key_paths(value, path, empty_tables=empty_tables))
        else:
            out[path] = value
    return out


def assign(raw: dict, key: str, value, *, label: str = "--set") -> dict:
    """A deep copy of the raw configuration ``raw`` with the dotted ``key`` set to ``value``;
    missing tables (and sections switched off with true/false) are created.  Errors start with
    ``label`` (the option or table the key came from)."""
    parts = key.strip().split(".")
    if not all(p.strip() for p in parts):
        raise ValueError(f"{label}: bad key path {key!r}")
    out = json.loads(json.dumps(raw))  # a deep copy of plain data
    node = out
    for i, p in enumerate(parts[:-1]):
        nxt = node.get(p)
        if nxt is None or nxt is False or nxt is True:
            nxt = node[p] = {}
        if not isinstance(nxt, dict):
            raise ValueError(f"{label} {key}: {'.'.join(parts[:i + 1])} is a value, not a table")
        node = nxt
    node[parts[-1]] = value
    return out


def apply_set(raw: dict, assignment: str) -> dict:
    """Apply one ``key.path=value`` to a raw configuration dict (returns a new dict)."""
    if "=" not in assignment:
        raise ValueError(f"--set: expected KEY.PATH=VALUE, got {assignment!r}")
    key, text = assignment.split("=", 1)
    return assign(raw, key, parse_value(text.strip()))


def apply_seed(raw: dict, seed: int) -> dict:
    """Set every seed of a raw configuration (noise path, particle draw, low-mode and random-phase
    initial density)
    to ``seed``; sections that are absent stay absent."""
    check_int("--seed", seed, 0)
    out = json.loads(json.dumps(raw))
    dyn = out.get("dynamics")
    if isinstance(dyn, dict) and isinstance(dyn.get("noise"), dict):
        dyn["noise"]["seed"] = seed
    reps = out.get("representations")
    for key in ("particles", "transformer"):
        if isinstance(reps, dict) and isinstance(reps.get(key), dict):
            reps[key]["seed"] = seed
    init = out.get("initial")
    if isinstance(init, dict) and init.get("kind") in ("low-mode", "random-phase"):
        init["seed"] = seed
    return out


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(a) for a in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps_toml(data: Mapping[str, Any]) -> str:
    """A nested dict of TOML-representable values (no None) as TOML text: scalars first, then
    one ``[a.b]`` table per nested dict."""
    lines: list[str] = []

    def emit(table: Mapping[str, Any], prefix: tuple[str, ...]) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping)]
        subs = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
        if prefix and (scalars or not subs):
            lines.append(f"\n[{'.'.join(prefix)}]")
        for k, v in scalars:
            lines.append(f"{k} = {toml_value(v)}")
        for k, v in subs:
            emit(v, (*prefix, k))

    emit(data, ())
    return "\n".join(lines).lstrip("\n") + "\n"


#: the embedded default: Paper 1's metastability set-up (Q = I, K = diag(0.1, 1, 1),
#: V = diag(1, 0.5, 0.1), β = 30) on S², density beside 500 particles, about a minute here
DEFAULT = {
    "grid": {"kind": "sphere", "nlat": 24},
    "initial": {"kind": "cosine", "direction": [0.6, 0.5, 0.3], "amplitude": 0.5},
    "dynamics": {"attention": {"Q": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                               "K": [[0.1, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                               "V": [[1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.1]],
                               "beta": 30.0}},
    "representations": {"density": True, "particles": {"n": 500, "seed": 0}},
    "stepping": {"t_end": 16.0, "courant": 0.8, "output_every": 0.5},
    "outputs": {"diagnostics": ["mass", "min_density", "energy", "dist_eigenspace",
                                "w2_projection", "w2_particles_density"]},
}


def default_config() -> RunConfig:
    """The embedded default configuration (:data:`DEFAULT`)."""
    return RunConfig.from_dict(DEFAULT)


__all__ = ["DEFAULT", "apply_seed", "apply_set", "assign", "default_config", "dumps_toml", "key_paths", "load",
           "parse_value", "read_raw", "toml_value"]
