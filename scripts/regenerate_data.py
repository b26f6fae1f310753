"""Regenerate a ``docs/data/NAME.json`` written by ``spherepde experiment``, from the
configuration stored in it (its ``config``), with this checkout's code.

    python scripts/regenerate_data.py NAME [--workers W] [--figure FILE.png] [--check]

runs the experiment named in the file's ``config.experiment`` with that configuration (``--workers``
replaces its ``workers``: 0 runs every member in this process) into ``out/regenerate/NAME/``,
then copies that folder's ``summary.json`` to ``docs/data/NAME.json`` and, with ``--figure``,
its figure (the summary's ``plot``) to ``docs/figures/FILE.png`` (a summary with several plots:
each under its own name).  The data file gets ``script`` (this command) and ``regenerated``
(date, seconds, load average after the run).  ``--check`` only prints the
configuration it would run.  Used when a change of the code changes stochastic runs (e.g. the
Brownian path of issue 22.10).  Run it from the repository root.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _as_field(value):
    """JSON lists back to the tuples the frozen configuration classes hold."""
    if isinstance(value, list):
        return tuple(_as_field(v) for v in value)
    return value


def configuration(name: str, workers: int | None):
    from spherepde.experiments.registry import EXPERIMENTS

    stored = json.loads((ROOT / "docs" / "data" / f"{name}.json").read_text())
    cfg = dict(stored["config"])
    exp = EXPERIMENTS[cfg.pop("experiment")]
    cls, _ = exp.load()
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(cfg) - names)
    if unknown:
        raise SystemExit(f"{name}: stored configuration keys not in {cls.__name__}: {unknown}")
    kw = {k: _as_field(v) for k, v in cfg.items()}
    for k, v in kw.items():  # non-finite numbers are stored as strings ("inf") in strict JSON
        if isinstance(v, tuple):
            kw[k] = tuple(float(x) if x in ("inf", "-inf", "nan") else x for x in v)
        elif v in ("inf", "-inf", "nan"):
            kw[k] = float(v)
    if workers is not None and "workers" in names:
        kw["workers"] = workers
    return exp, cls(**kw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--figure")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    exp, config = configuration(args.name, args.workers)
    print(config)
    if args.check:
        return 0
    outdir = Path("out") / "regenerate" / args.name
    if outdir.exists():
        shutil.rmtree(outdir)
    outdir.mkdir(parents=True)
    start = time.perf_counter()
    summary = exp.run(config, outdir, progress=False)
    print(f"{args.name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    seconds = time.perf_counter() - start
    data = json.loads((outdir / "summary.json").read_text())
    data["script"] = "scripts/regenerate_data.py " + " ".join(sys.argv[1:] if argv is None else argv)
    data["regenerated"] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "seconds": round(seconds, 1), "load_after": list(os.getloadavg())}
    (ROOT / "docs" / "data" / f"{args.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    if args.figure:
        plots = summary["plot"] if isinstance(summary["plot"], list) else [summary["plot"]]
        if len(plots) == 1:
            shutil.copyfile(plots[0], ROOT / "docs" / "figures" / args.figure)
        else:  # several figures (depth-width): each under its own name, FIGURE is ignored
            for plot in plots:
                shutil.copyfile(plot, ROOT / "docs" / "figures" / Path(plot).name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
