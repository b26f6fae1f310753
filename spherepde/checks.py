"""Checks of user input that every layer shares: output paths on the file system.

Errors are :class:`OutputPathError` (a ``ValueError``), one line naming the option and the
path, raised before any work starts; the command line turns them into exit status 2.
"""
from __future__ import annotations

import os
from pathlib import Path


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


__all__ = ["OutputPathError", "check_output_dir", "check_output_file"]
