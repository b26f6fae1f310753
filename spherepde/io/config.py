"""Configuration files: read a run configuration dictionary from TOML or JSON.

Configurations themselves are frozen dataclasses next to the code that runs them (for
example :class:`spherepde.experiments.transport.TransportConfig`), each with
``to_dict``/``from_dict``; every output file stores ``config_json`` so a run can be redone.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path


def load_config(path: str | Path) -> dict:
    """Read a configuration dictionary from a ``.toml`` or ``.json`` file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config: no such file {str(path)!r}")
    if path.suffix == ".toml":
        with open(path, "rb") as f:
            return tomllib.load(f)
    if path.suffix == ".json":
        return json.loads(path.read_text())
    raise ValueError(f"config: file must end in .toml or .json, got {path.name!r}")
