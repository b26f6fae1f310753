"""Checks of user input that every layer shares: integers, real numbers, seeds, output paths.

Each check names the argument and returns the value in its plain Python type.  A value of the
wrong type raises :class:`ArgumentTypeError`, which is a ``TypeError`` and also a
``ValueError`` (the layers that share these checks reported it as one or the other, and callers
catch either); a value of the right type out of range raises ``ValueError``.

Output paths: errors are :class:`OutputPathError` (a ``ValueError``), one line naming the
option and the path, raised before any work starts; the command line turns them into exit
status 2.  A file that cannot be written during a run (a full disk, a folder made unwritable)
is a :class:`StorageError` (an ``OSError``) naming the cause and the path
(:func:`storage_error`), also exit status 2 on one line.

Imports nothing from the package: every layer may use it.
"""
from __future__ import annotations

import errno
import math
import numbers
import os
from pathlib import Path
from typing import Literal, overload


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type (a bool or a float where an int is needed, a string where
    a number is needed); both a ``TypeError`` and a ``ValueError``."""


def check_int(name: str, value, minimum: int) -> int:
    """An integer (Python or numpy, not a bool) ≥ ``minimum``, as an ``int``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_real(name: str, value, *, positive: bool = False, nonnegative: bool = False) -> float:
    """A finite real number (not a bool), > 0 with ``positive``, ≥ 0 with ``nonnegative``, as
    a ``float``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if positive and not v > 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def check_positive(value, name: str, *, upper: float | None = None, inclusive_upper=True) -> float:
    """A finite number in (0, upper] (or (0, upper)), else ValueError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    ok = math.isfinite(v) and v > 0
    if ok and upper is not None:
        ok = v <= upper if inclusive_upper else v < upper
    if not ok:
        rng = f"(0, {upper}]" if upper is not None and inclusive_upper else (
            f"(0, {upper})" if upper is not None else "(0, inf)")
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


@overload
def check_seed(seed, name: str = ..., *, none_ok: Literal[False] = ...) -> int: ...
@overload
def check_seed(seed, name: str = ..., *, none_ok: bool) -> int | None: ...


def check_seed(seed, name: str = "seed", *, none_ok: bool = False) -> int | None:
    """A seed: an integer ≥ 0 (Python or numpy, not a bool), as an ``int``; None too with
    ``none_ok`` (returned as None)."""
    allowed = "a non-negative int or None" if none_ok else "a non-negative int"
    if seed is None and none_ok:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be {allowed}, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be {allowed}, got {seed!r}")
    return int(seed)


class OutputPathError(ValueError):
    """An output path that cannot be written (a file where a folder is needed, no permission)."""


def _first_existing(path: Path) -> Path:
    """``path`` itself or its nearest ancestor that exists."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _writable_dir(folder: Path, option: str, target: Path) -> None:
    if not folder.is_dir():
        raise OutputPathError(f"{option}: {str(folder)!r} is a file, not a folder "
                              f"(needed for {str(target)!r})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option}: folder {str(folder)!r} is not writable (permission denied)")


def check_output_dir(path: str | os.PathLike, option: str = "--output") -> Path:
    """Check that ``path`` is, or can be created as, a writable folder; return it as a Path.

    Refused: ``path`` (or a parent that exists) is a file; the folder, or the nearest existing
    parent in which it would be created, is not writable.  Nothing is created.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option}: {str(path)!r} is a file, not a folder")
    _writable_dir(_first_existing(path), option, path)
    return path


def check_output_file(path: str | os.PathLike, option: str = "--output") -> Path:
    """Check that the file ``path`` can be written: not a folder, its folder exists and is
    writable (an existing file is overwritten).  Return it as a Path."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{option}: {str(path)!r} is a folder, not a file")
    if not path.parent.exists():
        raise OutputPathError(f"{option}: folder {str(path.parent)!r} does not exist")
    _writable_dir(path.parent, option, path)
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"{option}: file {str(path)!r} is not writable (permission denied)")
    return path


#: free bytes below which a failed write is put down to a full disk
LOW_SPACE = 1 << 20

#: what the command line says for each cause of a failed write
_CAUSES = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
           errno.EACCES: "permission denied (the folder or file is not writable)",
           errno.EPERM: "permission denied (the folder or file is not writable)",
           errno.EROFS: "the file system is read-only"}


def _diagnose(path: Path) -> int | None:
    """The likely errno of a write to ``path`` that failed without one (netCDF's "HDF error"):
    a full disk, a folder or file that is not writable, a read-only file system."""
    folder = path if path.is_dir() else path.parent
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        st = None
    if st is not None:
        if st.f_bavail * st.f_frsize < LOW_SPACE:
            return errno.ENOSPC
        if st.f_flag & getattr(os, "ST_RDONLY", 1):
            return errno.EROFS
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return errno.EACCES
    return None


class StorageError(OSError):
    """A file that could not be written during a run: ``errno``, a short cause
    (``strerror``) and the path (``filename``); the command line prints it on one line."""


def storage_error(err: BaseException, path: str | os.PathLike) -> StorageError:
    """An error met writing ``path`` (an OSError, or netCDF4's RuntimeError "NetCDF: HDF
    error", which carries no errno) as a :class:`StorageError` naming the cause: the OSError's
    errno, else the one :func:`_diagnose` finds (a full disk, no permission, read-only), else
    the original message."""
    if isinstance(err, StorageError):
        return err
    path = Path(path)
    code = err.errno if isinstance(err, OSError) and err.errno else _diagnose(path)
    if code is None:
        return StorageError(errno.EIO, f"write failed: {err}", str(path))
    cause = _CAUSES.get(code) or os.strerror(code)
    return StorageError(code, cause, str(path))


__all__ = ["ArgumentTypeError", "OutputPathError", "StorageError", "check_int", "check_output_dir",
           "check_output_file", "check_positive", "check_real", "check_seed", "storage_error"]
