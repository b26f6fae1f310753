"""The start and end every paper study shares: the output folder, the summary, Ctrl-C, the plot.

A study runs inside :func:`study`::

    with study("metastability", config, outdir) as job:
        for ...:
            job.runs.append(row)                # what an interrupted summary.json keeps
        summary = {**job.header, "times": ..., "runs": job.runs}
        return job.finish(summary, lambda summ: plot_metastability(summ, job.outdir / "metastability.png"))

:func:`study` creates the folder (:func:`~spherepde.runs.execute.prepare_output`: a ValueError
naming the path when it is a file or not writable), starts the clock, and holds the partial
summary ``{"experiment", "config", "version", "runs"}``; Ctrl-C, SIGTERM or an error inside the
block write it as ``summary.json`` with ``"interrupted": true``
(:func:`~spherepde.io.summary.summary_on_interrupt`) before the exception goes on.
:meth:`Study.finish` draws the plot, adds ``plot``, ``seconds`` and ``"interrupted": false`` and
writes ``summary.json``.  Anything a study wants an interrupted summary to keep beyond ``runs``
goes into ``job.partial``.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from spherepde import __version__
from spherepde.io.summary import summary_on_interrupt, write_summary

#: what a study's plot function returns: the path of its figure, or of each of its figures
Drawn = Path | Sequence[Path]


class Study:
    """The output folder, clock and partial summary of one running study (:func:`study`)."""

    def __init__(self, name: str, config, outdir: Path) -> None:
        self.name, self.outdir = name, outdir
        self.t0 = time.perf_counter()
        #: the summary written if the study is stopped: the header and the finished runs
        self.partial: dict[str, Any] = {"experiment": name, "config": config.to_dict(),
                                        "version": __version__, "runs": []}

    @property
    def header(self) -> dict[str, Any]:
        """``{"experiment", "config", "version"}``: the first keys of every study's summary."""
        return {k: self.partial[k] for k in ("experiment", "config", "version")}

    @property
    def runs(self) -> list:
        """The finished runs, ``partial["runs"]`` (append to it as they finish)."""
        return self.partial["runs"]

    def seconds(self) -> float:
        """Seconds since the study started, to 0.1 s."""
        return round(time.perf_counter() - self.t0, 1)

    def finish(self, summary: dict, plot: Callable[[dict], Drawn]) -> dict:
        """Draw ``plot(summary)``, add its path(s) as ``plot``, the run time as ``seconds`` and
        ``"interrupted": false``, write ``outdir/summary.json``; return the summary."""
        drawn = plot(summary)
        summary["plot"] = str(drawn) if isinstance(drawn, (str, os.PathLike)) else [str(p) for p in drawn]
        summary["seconds"] = self.seconds()
        summary["interrupted"] = False
        write_summary(self.outdir, summary)
        return summary


@contextlib.contextmanager
def study(name: str, config, outdir: str | os.PathLike) -> Iterator[Study]:
    """Create ``outdir`` and run the block as the study ``name`` of ``config`` (module
    docstring): an exception leaves ``summary.json`` with the partial summary, marked
    interrupted."""
    from spherepde.runs.execute import prepare_output

    s = Study(name, config, prepare_output(outdir))
    with summary_on_interrupt(s.outdir, s.partial):
        yield s


__all__ = ["Study", "study"]
