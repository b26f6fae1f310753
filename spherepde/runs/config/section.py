"""The generic configuration section: a frozen dataclass read from a table, whose unknown keys
are refused with the closest valid key, and which writes itself back."""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import Field, fields, replace
from typing import Any, ClassVar

from spherepde.runs.config.values import _join, check_choice


# ---- the generic section -------------------------------------------------------------------
class _Section:
    """Mixin of every configuration section: ``from_dict`` (unknown keys refused with the closest
    valid one), ``to_dict`` (only the keys that apply, no None) and ``replace``.

    Class attributes: ``PATH`` (the section's key path), ``SUBSECTIONS`` (field → section
    class), ``OPTIONAL`` (subsections that may be absent or ``false``), ``REQUIRED`` (keys that
    must be given), ``KIND_KEYS`` (kind → the keys that kind uses, besides ``kind``).
    """

    PATH: ClassVar[str] = ""
    SUBSECTIONS: ClassVar[dict] = {}
    OPTIONAL: ClassVar[tuple] = ()
    REQUIRED: ClassVar[tuple] = ()
    KIND_KEYS: ClassVar[dict | None] = None
    KIND_REQUIRED: ClassVar[dict] = {}
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every section is a dataclass
    #: keys of earlier releases that are gone: key → why (refused with that reason)
    REMOVED: ClassVar[dict] = {}

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        path = cls.PATH
        if not isinstance(data, Mapping):
            raise ValueError(f"{path or 'configuration'}: must be a table (a dict of keys), "
                             f"got {data!r}")
        names = cls.keys()
        for key in data:
            if key in cls.REMOVED:
                raise ValueError(f"{_join(path, str(key))}: {cls.REMOVED[key]}")
            if key not in names:
                hint = difflib.get_close_matches(str(key), names, n=1, cutoff=0.5)
                extra = f"; did you mean {_join(path, hint[0])!r}?" if hint else ""
                raise ValueError(f"{_join(path, str(key))}: unknown key{extra} "
                                 f"(valid keys of {path or 'the configuration'}: {names})")
        required = list(cls.REQUIRED)
        if cls.KIND_KEYS is not None:
            kind = data.get("kind", cls.__dataclass_fields__["kind"].default)
            kind = check_choice(_join(path, "kind"), kind, tuple(cls.KIND_KEYS))
            allowed = {"kind", *cls.KIND_KEYS[kind]}
            for key in data:
                if key not in allowed:
                    raise ValueError(f"{_join(path, key)}: not used with {_join(path, 'kind')} = "
                                     f"{kind!r} (its keys: {sorted(allowed)})")
            required += list(cls.KIND_REQUIRED.get(kind, ()))
        kw: dict[str, Any] = {}
        for key, value in data.items():
            if key in cls.SUBSECTIONS:
                sub = cls.SUBSECTIONS[key]
                if value is False and key in cls.OPTIONAL:
                    kw[key] = None
                    continue
                if value is True and key in cls.OPTIONAL:
                    value = {}
                kw[key] = sub.from_dict(value)
            elif value is False and cls.__dataclass_fields__[key].default is None:
                continue  # an optional value switched off: as if absent
            else:
                kw[key] = value
        for key in required:  # after the given keys: a misspelt key is reported as such first
            if key not in data:
                raise ValueError(f"{_join(path, key)}: required, missing")
        return cls(**kw)

    def _kept(self) -> list[str]:
        if self.KIND_KEYS is None:
            return self.keys()
        return ["kind", *self.KIND_KEYS[getattr(self, "kind")]]  # a section with KIND_KEYS has a kind

    def to_dict(self) -> dict:
        """Plain nested dict (lists for vectors and matrices), only the keys that apply."""
        out = {}
        for key in self._kept():
            v = getattr(self, key)
            if v is None:
                continue
            if isinstance(v, _Section):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = [list(r) if isinstance(r, tuple) else r for r in v]
            out[key] = v
        return out

    def replace(self, **changes):
        return replace(self, **changes)


__all__ = []
