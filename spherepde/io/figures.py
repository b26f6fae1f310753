"""Figures of a run file (``spherepde plot DIR/run.nc``): density maps on the sphere, diagnostic
time series and an animation, made with plain matplotlib (Agg).

The pieces: :mod:`spherepde.io.rundata` (reading a run file, choosing times and colour scales),
:mod:`spherepde.io.projections` (orthographic and Mollweide maths, where to look),
:mod:`spherepde.io.maps` (the density maps on S² and S¹, the animation) and
:mod:`spherepde.io.series` (the diagnostics panels of a run and of an ensemble).

Files written by :func:`plot_run` (``OUT`` = ``--output``, default the folder of run.nc)::

    S²   OUT/density_orthographic.png, OUT/density_mollweide.png   (≤ 4 times, particles overlaid)
    S¹   OUT/density_circle.png
    both OUT/diagnostics.png (one panel per diagnostic group), OUT/animation.gif (or .mp4)
    no grid (grid.kind = "none", d ≥ 4)   OUT/diagnostics.png only
"""
from __future__ import annotations

import os
from pathlib import Path

from spherepde.io.maps import animate, plot_circle, plot_mollweide, plot_orthographic
from spherepde.io.rundata import pick_times, read_run
from spherepde.io.series import plot_diagnostics


# ---- everything -------------------------------------------------------------------------------
def plot_run(path: str | os.PathLike, output: str | os.PathLike | None = None, *,
             log: bool | None = None, animation: bool = True, dpi: int = 120) -> dict:
    """All figures of one run.nc into ``output`` (default: the file's folder), PNGs at ``dpi``; returns
    {"file": …, "figures": [paths], "times": [shown times]}.  ValueError naming the path on a
    missing, unreadable or foreign file, or an output folder that cannot be written."""
    data = read_run(path)
    out = Path(output) if output is not None else Path(path).parent
    if out.exists() and not out.is_dir():
        raise ValueError(f"--output: {str(out)!r} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--output: cannot create the folder {str(out)!r}: {err.strerror or err}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"--output: the folder {str(out)!r} is not writable")
    times = pick_times(data)
    if times.size == 0:
        raise ValueError(f"{str(path)!r}: no output time was written (the run stopped before its first output)")
    figures = []
    maps = data.grid is not None and any(a is not None for a in (data.density, data.positions,
                                                                   data.tokens))
    if not maps:
        pass  # tokens on S^{d−1}, d ≥ 4, or a run that stored no fields or positions: diagnostics only
    elif data.sphere:
        figures.append(plot_orthographic(data, out / "density_orthographic.png", times, log=log,
                                         dpi=dpi))
        figures.append(plot_mollweide(data, out / "density_mollweide.png", times, log=log, dpi=dpi))
    else:
        figures.append(plot_circle(data, out / "density_circle.png", times, log=log, dpi=dpi))
    diag = plot_diagnostics(data, out / "diagnostics.png", dpi=dpi)
    if diag is not None:
        figures.append(diag)
    if animation and maps:
        anim = animate(data, out / "animation", log=log)
        if anim is not None:
            figures.append(anim)
    return {"file": str(path), "figures": [str(f) for f in figures],
            "times": [float(data.times[t]) for t in times]}


__all__ = ["plot_run"]
