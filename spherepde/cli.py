"""Command line: ``spherepde demo``, ``run [CONFIG]``, ``plot RUN.nc``,
``validate transport|convergence|sync-path|resolution``, ``experiment NAME``, ``ensemble``, ``noise-kernel``.

Errors in the arguments and output paths that are files or not writable are reported before
any work, naming the argument or the path (exit status 2; with ``--json`` also a JSON object
``{"error": ...}`` on stdout); so is an output folder that holds a result of another
configuration (unless ``--overwrite``: :mod:`spherepde.runs.folders`), and a dask scheduler
that does not answer within seconds.  A file that cannot be written during a run (a full
disk, a folder made unwritable) ends the command with one line naming the cause and the path,
exit status 2.  Ctrl-C (exit status 130) or SIGTERM (exit status 143) stops a run but leaves
its NetCDF files valid, with the global attribute ``status = "interrupted"``.  A closed stdout
(``spherepde … --json | head -1``) ends it quietly with exit status 141.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import sys
from pathlib import Path

from spherepde import __version__
from spherepde.io.summary import jsonable

DESCRIPTION = """\
spherepde simulates the mean-field dynamics of transformers on the sphere: token densities
on S² and S¹ (finite volumes or weighted points), N-particle systems and discrete
transformers driven by the same velocity, with attention and common multiplicative noise
(Paper 1: clusters that form, wait and merge; Paper 2: synchronisation by noise).  Runs write
NetCDF (run.nc), a JSON summary and the configuration they ran.

start here:   spherepde demo
your model:   spherepde run CONFIG.toml [--set KEY.PATH=VALUE ...]   (examples/ has some)
pictures:     spherepde plot DIR/run.nc
many runs:    spherepde sweep | ensemble;  the papers' figures: spherepde experiment NAME
"""

EPILOG = """\
exit status: 0 done; 2 bad input, an output folder holding another configuration (see
--overwrite), an unreachable --scheduler or a file that could not be written (one line on
stderr; with --json also {"error": ...} on stdout); 130 Ctrl-C, 143 SIGTERM (the files keep
what was computed, marked status = interrupted); 141 stdout closed early.
Documentation: README.md and docs/usage.md.
"""


def _emit(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(jsonable(result), indent=2, allow_nan=False, default=float))
    else:  # the same numbers as the JSON (jsonable: 15 significant digits)
        for k, v in jsonable(result).items():
            print(f"{k:>16}: {json.dumps(v) if isinstance(v, (dict, list)) else v}")


def _alpha(text: str) -> float:
    """Accept a number or an expression in pi, e.g. 'pi/2-0.05'."""
    try:
        value = float(eval(text, {"__builtins__": {}}, {"pi": math.pi}))  # noqa: S307 — numbers and pi only
    except Exception:
        raise argparse.ArgumentTypeError(f"--alpha must be a number or an expression in pi, got {text!r}")
    return value


def _transport_parser(sub, name: str, help_: str, many: bool):
    from spherepde.solvers.eulerian.ppm import LIMITERS
    from spherepde.solvers.eulerian.polar_cap import POLAR
    from spherepde.validation.transport_cases import CASES, FIELDS

    p = sub.add_parser(name, help=help_)
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--field", default=None, choices=FIELDS,
                   help="initial field (default: cosine-bell for williamson1, else gaussian-hills)")
    if many:
        p.add_argument("--nlat", type=int, nargs="+", required=True, help="≥ 3 even grid sizes")
    else:
        p.add_argument("--nlat", type=int, required=True, help="number of Gauss latitudes (even, ≥ 4)")
    p.add_argument("--alpha", type=_alpha, default=0.0, help="williamson1 axis tilt in radians (e.g. pi/2-0.05)")
    p.add_argument("--courant", type=float, default=0.8, help="Δt·max|u|/Δλ, in (0, 4]")
    p.add_argument("--limiter", default="positive", choices=LIMITERS)
    p.add_argument("--polar", default="auto", choices=POLAR,
                   help="polar rings: cap (the positive unsplit remap of the first --cap-rings "
                        "rings around each pole), split (the split step everywhere) or auto "
                        "(default: cap from nlat 8 on, split below)")
    p.add_argument("--cap-rings", type=int, default=None,
                   help="rings per pole for the cap, in [2, nlat/4] (default min(4, nlat/4))")
    if not many:
        p.add_argument("--output", default=None, help="NetCDF file for the initial, intermediate and final fields")
    else:
        p.add_argument("--plot", default=None, help="PNG file for the convergence plot")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def _config_arguments(p) -> None:
    """CONFIG, positional or as --config (``run``, ``ensemble``); read by :func:`_raw_config`."""
    p.add_argument("config", nargs="?", default=None, metavar="CONFIG",
                   help="a .toml or .json configuration (default: the embedded one)")
    p.add_argument("--config", dest="config_option", default=None, metavar="CONFIG",
                   help="the same as the positional CONFIG (older spelling)")


def _raw_config(args, default: dict) -> dict:
    """The raw configuration of CONFIG (``default`` without one) with the --set assignments."""
    from spherepde.runs.config import apply_set, read_raw

    if args.config is not None and args.config_option is not None:
        raise ValueError("give the configuration once: CONFIG or --config, not both")
    source = args.config if args.config is not None else args.config_option
    raw = default if source is None else read_raw(source)
    for assignment in args.overrides:
        raw = apply_set(raw, assignment)
    return raw


def _sweep_options(p, output: str) -> None:
    """The options of the commands that run a sweep on dask (``sweep``, ``ensemble``)."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one key before expansion (a TOML literal); repeatable")
    p.add_argument("--seed", type=int, default=None, help="set every seed of every member")
    p.add_argument("--workers", type=int, default=2,
                   help="worker processes of the LocalCluster (default 2; 0: in this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a running dask scheduler (e.g. tcp://host:8786) instead of a LocalCluster")
    p.add_argument("--output", default=output, help=f"output folder (created), default ./{output}")
    _overwrite_argument(p, "sweep")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _overwrite_argument(p, kind: str) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help=f"write into --output even when it holds another kind of result or a "
                        f"{kind} of another configuration, replacing it (without this flag such "
                        f"a folder is refused, naming the keys that differ)")


def _experiment_parsers(sub) -> None:
    """``spherepde experiment NAME``: one sub-command per entry of the experiments' registry."""
    from spherepde.experiments.registry import EXPERIMENTS

    exp = sub.add_parser("experiment", help="paper experiments (NetCDF + PNG + JSON summary)")
    esub = exp.add_subparsers(dest="name", required=True)
    for entry in EXPERIMENTS.values():
        e = esub.add_parser(entry.name, help=entry.help)
        e.add_argument("--quick", action="store_true", help=entry.quick_help)
        for opt in entry.options:
            e.add_argument(opt.flag, type=opt.type, nargs=opt.nargs, default=None, help=opt.help)
        e.add_argument("--output", default=f"out/{entry.name}", help="output folder")
        _overwrite_argument(e, "experiment")
        e.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spherepde", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"spherepde {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="start here: Paper 1's two phases, density beside particles, "
                                       "with pictures (about a minute)",
                          description="Run the embedded demo (Paper 1 on S²: Q = I, K = diag(0.1, 1, 1), "
                                      "V = diag(1, 0.5, 0.1), β = 30, nlat 24, density beside 400 "
                                      "particles to t = 18), write DIR/run.nc, DIR/summary.json and "
                                      "the pictures, and say what to look at.")
    demo.add_argument("--output", default="out/demo", help="output folder (created), default out/demo")
    _overwrite_argument(demo, "run")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: seconds

    plot = sub.add_parser("plot", help="pictures of a run.nc (maps, diagnostics, animation) or "
                                       "a sweep.nc (convergence plots)",
                          description="Write density maps (orthographic and Mollweide on S², lines "
                                      "and a space-time map on S¹, particles overlaid), the "
                                      "diagnostic time series and an animation (GIF, or MP4 with "
                                      "ffmpeg) of a run.nc written by `spherepde run` or `demo`; "
                                      "for a sweep.nc of `spherepde sweep` over a resolution "
                                      "(particles N, grid nlat/n, stepping dt, transformer L or "
                                      "m), log-log plots of the final-time errors with fitted "
                                      "slopes and a reference rate.")
    plot.add_argument("file", metavar="RUN.nc", help="the run file (DIR/run.nc) or a sweep file "
                                                     "(DIR/sweep.nc)")
    plot.add_argument("--output", default=None, help="output folder (default: the folder of RUN.nc)")
    plot.add_argument("--log", choices=("auto", "on", "off"), default="auto",
                      help="logarithmic colour scale: auto (when the density spans more than two "
                           "decades), on, off")
    plot.add_argument("--dpi", type=int, default=120, help="resolution of the PNGs (default 120)")
    plot.add_argument("--no-animation", action="store_true", help="skip the animation")
    plot.add_argument("--json", action="store_true", help="print the list of files as JSON")

    run = sub.add_parser("run", help="run a model configuration (default: the embedded one)",
                         description="Run the model described by CONFIG (a .toml or .json "
                                     "configuration tree; default: the embedded Paper 1 set-up, "
                                     "density beside particles). Writes DIR/run.nc, "
                                     "DIR/summary.json and DIR/config.toml.")
    _config_arguments(run)
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                     help="override one key before validation; VALUE is a TOML literal "
                          "(e.g. --set dynamics.attention.beta=30 --set grid.nlat=24); repeatable")
    run.add_argument("--seed", type=int, default=None,
                     help="set every seed (noise path, particle draw, low-mode or random-phase initial density)")
    run.add_argument("--output", default=None,
                     help="output folder (created), default ./out (with --restart: the restarted "
                          "file's folder with -restart appended)")
    run.add_argument("--refine", type=float, default=None, metavar="F",
                     help="scale every resolution parameter of every representation by F (grid "
                          "nlat and refinement base ×F, particle and token counts ×F², time step "
                          "/F; F in [0.25, 4]): the same model, for a convergence check")
    _overwrite_argument(run, "run")
    run.add_argument("--restart", default=None, metavar="DIR/run.nc",
                     help="continue the run in this file (stopped or finished) to the numbers an "
                          "uninterrupted run gives, bit for bit; only --set stepping.t_end=… may "
                          "change; the whole run goes to a new file, the original is only read")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")

    sw = sub.add_parser("sweep", help="run a configuration with a [sweep] table: every member on dask, "
                                      "collected into DIR/sweep.nc",
                        description="Expand the [sweep] table of CONFIG (key paths and value lists; "
                                    "the Cartesian product) into members, run them on a dask "
                                    "LocalCluster (or --scheduler), skip members already finished, and "
                                    "collect DIR/sweep.nc with the swept dimensions.")
    sw.add_argument("config", metavar="CONFIG", help="a .toml or .json configuration with a [sweep] table")
    _sweep_options(sw, "out/sweep")

    _experiment_parsers(sub)

    ens = sub.add_parser("ensemble", help="a run configuration over R realisations of its Brownian path: "
                                          "a sweep on dask, collected into DIR/sweep.nc",
                         description="Run CONFIG (a run configuration with dynamics.noise; default: the "
                                     "embedded noise-only SPDE on S²) on the Brownian paths r = 0..R−1 "
                                     "(antithetic pairs with dynamics.noise.antithetic = true), as a sweep "
                                     "over dynamics.noise.realisation; DIR/sweep.nc has the dimension "
                                     "realisation; DIR/realisation0.png and DIR/mean.png map one path and the mean "
                                     "density, DIR/ensemble_diagnostics.png every path's diagnostics and their mean.")
    _config_arguments(ens)
    ens.add_argument("--realisations", type=int, default=8, help="number of Brownian paths R (default 8)")
    _sweep_options(ens, "out/ensemble")

    val = sub.add_parser("validate", help="standard test suites")
    vsub = val.add_subparsers(dest="suite", required=True)
    from spherepde.runs.config import SCHEMES  # the one list of density schemes
    _transport_parser(vsub, "transport", "one standard transport test, error norms after one period", many=False)
    _transport_parser(vsub, "convergence", "a transport test at several resolutions, with fitted orders", many=True)
    sp = vsub.add_parser("sync-path", help="Paper 2: noise-only SPDE vs the exact pushforward on one "
                                           "Brownian path, E_β ratio over time")
    sp.add_argument("--nlat", type=int, default=48, help="Gauss latitudes of the density (default 48)")
    sp.add_argument("--t-end", type=float, default=6.0, help="final time (default 6)")
    sp.add_argument("--dt", type=float, default=0.01, help="time step (default 0.01)")
    sp.add_argument("--seed", type=int, default=0, help="Brownian path seed (default 0)")
    sp.add_argument("--realisation", type=int, default=0, help="realisation of that seed (default 0)")
    sp.add_argument("--scheme", default="lagrangian-remap", choices=SCHEMES,
                    help="density scheme (default lagrangian-remap: weighted points remapped onto "
                         "a grid adapted to the mass; ffsl-ppm: finite volumes on the fixed grid)")
    sp.add_argument("--polar", default="auto", choices=("auto", "split", "cap"),
                    help="polar rings of ffsl-ppm (default auto: the polar cap; ignored by "
                         "lagrangian-remap)")
    sp.add_argument("--output-every", type=float, default=None,
                    help="time between outputs, dividing t_end (default 0.25 when it divides "
                         "t_end, else the largest t_end/n below it that is a whole number of steps)")
    sp.add_argument("--output", default=None,
                    help="folder for the run (run.nc, summary.json, config.toml of its spherepde run "
                         "configuration); default a temporary folder, removed")
    _overwrite_argument(sp, "run")
    sp.add_argument("--json", action="store_true", help="print the result as JSON")

    rs = vsub.add_parser("resolution", help="is a run resolved? its diagnostics against the same "
                                            "model at a finer resolution (run --refine F), at every "
                                            "output time",
                         description="Compare every diagnostic that RUN.nc and REFINED.nc both hold "
                                     "(energy, eigenspace distances, W2, …; not the mass and the "
                                     "cell extremes) at every output time, relative to "
                                     "max(|refined value|, 0.05); resolved when the largest change "
                                     "is below 2 %%. Make REFINED.nc with `spherepde run CONFIG "
                                     "--refine 1.5`.")
    rs.add_argument("run", metavar="RUN.nc", help="the run file")
    rs.add_argument("refined", metavar="REFINED.nc", help="the same model at a finer resolution")
    rs.add_argument("--json", action="store_true", help="print the result as JSON")

    _noise_kernel_parser(sub)
    return parser


def _transport_config(args, nlat: int):
    from spherepde.validation.transport_cases import make_case
    from spherepde.experiments.transport import TransportConfig

    field = args.field or make_case(args.case).default_field
    try:
        return TransportConfig(case=args.case, field=field, nlat=nlat, alpha=args.alpha,
                               courant=args.courant, limiter=args.limiter, polar=args.polar,
                               cap_rings=args.cap_rings)
    except ValueError as exc:  # name the option, not the field
        raise ValueError(str(exc).replace("cap_rings", "--cap-rings")) from None


def _cmd_validate(args) -> int:
    from spherepde.experiments.transport import run_transport
    from spherepde.validation.fits import fit_order

    if args.suite == "resolution":
        from spherepde.runs.compare import compare_runs

        out = compare_runs(args.run, args.refined)
        if args.json:
            _emit(out, True)
        else:
            print("\n".join(_resolution_text(out)))
        return 0
    if args.suite == "sync-path":
        from spherepde.experiments.sync_path import (SyncPathConfig, default_output_every,
                                                     run_sync_path)

        every = (default_output_every(args.t_end, args.dt) if args.output_every is None
                 else args.output_every)
        try:
            config = SyncPathConfig(nlat=args.nlat, t_end=args.t_end, dt=args.dt, seed=args.seed,
                                    realisation=args.realisation, scheme=args.scheme,
                                    output_every=every, polar=args.polar)
        except ValueError as exc:  # name the options, not the fields
            msg = str(exc)
            for field_name in ("output_every", "t_end", "nlat", "dt", "seed", "realisation"):
                msg = re.sub(rf"\b{field_name}\b", "--" + field_name.replace("_", "-"), msg)
            raise ValueError(msg) from None
        out = run_sync_path(config, progress=not args.json, output=args.output)
        _emit(out, args.json)
        return 130 if out["interrupted"] else 0
    if args.suite == "transport":
        config = _transport_config(args, args.nlat)
        if args.output is not None and not Path(args.output).parent.is_dir():
            raise ValueError(f"--output: folder {str(Path(args.output).parent)!r} does not exist")
        _emit(run_transport(config, output=args.output), args.json)
        return 0
    # convergence
    if len(args.nlat) < 3:
        raise ValueError(f"--nlat needs at least 3 resolutions for a fitted order, got {args.nlat}")
    configs = [_transport_config(args, n) for n in sorted(set(args.nlat))]  # validates all first
    rows = [run_transport(c) for c in configs]
    h = [r["resolution_deg"] for r in rows]
    out = {"case": configs[0].case, "field": configs[0].field, "limiter": args.limiter,
           "polar": args.polar,
           "rows": [{k: r[k] for k in ("nlat", "resolution_deg", "polar", "cap_rings", "steps",
                                       "seconds", "l1", "l2", "linf", "lmax", "lmin",
                                       "mass_error", "min_value") if k in r} for r in rows]}
    for norm in ("l1", "l2", "linf"):
        order, se = fit_order(h, [r[norm] for r in rows])
        out[f"order_{norm}"] = order
        out[f"order_{norm}_stderr"] = se
    if args.plot:
        from spherepde.io.plots import plot_convergence

        plot_convergence(h, {n: [r[n] for r in rows] for n in ("l1", "l2", "linf")}, args.plot,
                         title=f"{out['case']} / {out['field']} ({args.limiter})")
        out["plot"] = args.plot
    _emit(out, args.json)
    return 0


def _resolution_text(out: dict) -> list[str]:
    """The plain-text result of ``validate resolution``: a verdict, then one line per quantity."""
    worst = out["worst"]
    verdict = "resolved" if out["resolved"] else "NOT resolved"
    lines = [f"spherepde validate resolution: {verdict} (largest change "
             f"{100 * out['max_relative_change']:.3g} % "
             + (f"in {worst['quantity']} at t = {_num(worst['t'])}" if worst else "")
             + f"; tolerance {100 * out['tolerance']:g} %, relative to max(|value|, {out['floor']:g}))"]
    for name, c in out["per_quantity"].items():
        lines.append(f"  {name}: {100 * c['change']:.3g} % at t = {_num(c['t'])}")
    if "switch_time" in out:
        tr, tf = out["switch_time"]
        lines.append(f"  switch time: {_num(tr)} against {_num(tf)} (change "
                     f"{100 * out['switch_time_change']:.3g} %)")
    return lines


def _cmd_run(args) -> int:
    if args.restart is not None:
        from spherepde.runs.restart import restart

        if args.config is not None or args.config_option is not None or args.seed is not None \
                or args.refine is not None:
            raise ValueError("--restart: the configuration is the one stored in the file; give "
                             "no CONFIG, --config, --seed or --refine (only --set stepping.t_end=…)")
        summary = restart(args.restart, args.overrides, args.output, progress=not args.quiet)
    else:
        summary = _run_config(args)
    if args.json:
        _emit({k: v for k, v in summary.items() if k != "config"}, True)
    else:
        print("\n".join(_run_text(summary)))
    return 0


def _num(v) -> str:
    """A number for reading: 4 significant digits (the JSON output keeps 15)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return str(v) if isinstance(v, int) else f"{v:.4g}"


def _pairs(d: dict, limit: int = 6) -> str:
    """``key value, …`` of the numbers and short strings in ``d`` (at most ``limit``)."""
    items = [f"{k} {_num(v)}" for k, v in d.items()
             if v is not None and isinstance(v, (int, float, str)) and len(str(v)) <= 40]
    return ", ".join(items[:limit]) + (", …" if len(items) > limit else "")


def _run_text(s: dict) -> list[str]:
    """The plain-text result of ``run``: what ran, the key numbers, where the files are."""
    t_end = s.get("config", {}).get("stepping", {}).get("t_end")
    head = (f"spherepde run: {'interrupted' if s.get('interrupted') else 'complete'} in "
            f"{_num(s.get('seconds'))} s: to t = {_num(t_end)}, {s['outputs']} outputs, "
            f"dt {_num(s['dt'])}")
    if "restart" in s:
        head += f" (continued from {s['restart']['from']})"
    lines = [head]
    for rep in ("density", "particles", "transformer"):
        if rep in s:
            r = s[rep]
            info = {k: v for k, v in r.items() if k not in ("final", "seconds", "step_seconds")}
            text = _pairs(info)
            if r.get("final"):
                text += f"; at the end: {_pairs(r['final'])}"
            lines.append(f"  {rep:<12}{text}")
    if "noise" in s:
        lines.append(f"  {'noise':<12}{_pairs(s['noise'], 4)}")
    lines.append(f"  {'output':<12}{s['file']} (summary.json and config.toml beside it)")
    return lines


def _run_config(args) -> dict:
    from spherepde.runs.config import DEFAULT, RunConfig, apply_seed
    from spherepde.runs.execute import run

    raw = _raw_config(args, DEFAULT)
    if args.seed is not None:
        raw = apply_seed(raw, args.seed)
    config = RunConfig.from_dict(raw)  # validated completely before any file is created
    if args.refine is not None:
        from spherepde.runs.refine import refine

        config = refine(config, args.refine)
    return run(config, "out" if args.output is None else args.output, progress=not args.quiet)


def _cmd_sweep(args) -> int:
    from spherepde.runs.config import apply_set, read_raw
    from spherepde.runs.sweep import run_sweep

    raw = read_raw(args.config)
    for assignment in args.overrides:
        raw = apply_set(raw, assignment)
    try:
        summary = run_sweep(raw, args.output, workers=args.workers, scheduler=args.scheduler,
                            seed=args.seed, progress=not args.quiet)
    except KeyboardInterrupt as err:  # the partial result still goes to stdout, then rc 130
        partial = getattr(err, "summary", None)
        if partial is not None and args.json:
            _emit(partial, True)
        raise
    _emit(summary, args.json)
    return 0


def _cmd_demo(args) -> int:
    from spherepde.experiments.demo import run_demo

    summary = run_demo(args.output, progress=not args.quiet, quick=args.quick)
    if args.json:
        _emit({k: v for k, v in summary.items() if k != "config"}, True)
        return 0
    print(f"\nspherepde demo: done in {summary['seconds_total']:.0f} s (the run {summary['seconds']:.0f} s, "
          f"then the pictures). Look at, in {args.output}/:")
    for path in (summary["file"], *summary["figures"], summary["summary"]):
        print(f"  {path}")
    print()
    import textwrap

    print(textwrap.fill(summary["reading"], width=96))
    print(f"\nRedraw with `python3 -m spherepde plot {summary['file']}`; run your own model with "
          f"`python3 -m spherepde run CONFIG.toml` (examples/).")
    return 0


def _cmd_plot(args) -> int:
    from spherepde.experiments.convergence import is_sweep_file, plot_sweep
    from spherepde.io.figures import plot_run

    if not 20 <= args.dpi <= 600:
        raise ValueError(f"--dpi must be an integer in [20, 600], got {args.dpi}")
    log = {"auto": None, "on": True, "off": False}[args.log]
    if Path(args.file).is_file() and is_sweep_file(args.file):
        from spherepde.runs.ensemble import is_ensemble_file, plot_ensemble_file

        if is_ensemble_file(args.file):  # a sweep over the realisations only: ensemble pictures
            out = plot_ensemble_file(args.file, args.output, dpi=args.dpi)
        else:  # convergence plots
            out = plot_sweep(args.file, args.output, dpi=args.dpi)
    else:
        out = plot_run(args.file, args.output, log=log, animation=not args.no_animation, dpi=args.dpi)
    if args.json:
        _emit(out, True)
    else:
        for path in out["figures"]:
            print(path)
    return 0


def _cmd_ensemble(args) -> int:
    from spherepde.runs.ensemble import DEFAULT, run_ensemble

    summary = run_ensemble(_raw_config(args, DEFAULT), args.realisations, args.output,
                           workers=args.workers, scheduler=args.scheduler, seed=args.seed,
                           progress=not args.quiet)
    _emit(summary, args.json)
    return 0


def _cmd_experiment(args) -> int:
    from spherepde.experiments.registry import EXPERIMENTS

    entry = EXPERIMENTS[args.name]
    config = entry.configure({opt.dest: getattr(args, opt.dest) for opt in entry.options}, quick=args.quick)
    summary = entry.run(config, args.output, progress=not args.json)
    short = {k: v for k, v in summary.items() if k not in ("runs", "times")}
    short["runs"] = [{k: v for k, v in r.items()
                      if k not in ("w2", "dist_E_VBt", "dist_E_V", "final_clusters", "particles")
                      and not (isinstance(v, list) and len(v) > 8)}
                     for r in summary["runs"]]
    short["summary"] = str(Path(args.output) / "summary.json")
    if args.json:
        _emit(short, True)
    else:
        print("\n".join(_experiment_text(args.name, short)))
    return 0


def _experiment_text(name: str, s: dict, runs: int = 8) -> list[str]:
    """The plain-text result of ``experiment NAME``: a line per run (up to ``runs``) with its
    numbers, the other results, and the files (the whole summary is in summary.json)."""
    lines = [f"spherepde experiment {name}: done in {_num(s.get('seconds'))} s"]
    for r in s["runs"][:runs]:
        lines.append(f"  run         {_pairs(r, 8)}")
    if len(s["runs"]) > runs:
        lines.append(f"  …           {len(s['runs']) - runs} more runs")
    skip = {"experiment", "config", "version", "runs", "seconds", "interrupted", "summary", "plot"}
    for key, value in s.items():
        if key in skip:
            continue
        if isinstance(value, dict) and _pairs(value):
            lines.append(f"  {key}: {_pairs(value)}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            lines.append(f"  {key}: {_num(value)}")
    files = [s[k] for k in ("plot",) if isinstance(s.get(k), str)]
    lines.append(f"  {'output':<12}{s['summary']}" + (f", {', '.join(files)}" if files else ""))
    return lines


def _noise_kernel_parser(sub) -> None:
    """``spherepde noise-kernel``: κ, the rates of Paper 2 and the KL truncation for one MLP noise."""
    from spherepde.noise.activations import ACTIVATIONS

    nk = sub.add_parser("noise-kernel", help="Paper 2: κ(1), κ'(1), λ₁, λ̄, λ̄' and KL truncation of the MLP noise")
    nk.add_argument("--activation", required=True, choices=sorted(ACTIVATIONS))
    nk.add_argument("--d", type=int, required=True, help="ambient dimension (tokens on S^{d-1}), ≥ 2")
    nk.add_argument("--sigma-u", type=float, default=0.0, help="std of the hidden bias b_U (default 0)")
    nk.add_argument("--sigma-w", type=float, default=0.0, help="std of the output bias b_W (default 0)")
    nk.add_argument("--beta", type=float, default=1.0, help="β of the energy E_β for λ̄' (default 1)")
    trunc = nk.add_mutually_exclusive_group()
    trunc.add_argument("--nmax", type=int, default=None, help="report the variance captured up to this degree")
    trunc.add_argument("--variance-fraction", type=float, default=None,
                       help="report the smallest degree capturing this fraction of κ(1), in (0, 1)")
    nk.add_argument("--json", action="store_true", help="print the result as JSON")


def _cmd_noise_kernel(args) -> int:
    """Paper 2: the noise kernel's summary(β), plus the KL variance kept at --nmax or the degree for a fraction."""
    from spherepde.noise.kernel import NoiseKernel

    if args.d < 2:
        raise ValueError(f"--d must be an integer >= 2, got {args.d}")
    for flag, value in (("--sigma-u", args.sigma_u), ("--sigma-w", args.sigma_w)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{flag} must be a finite number >= 0, got {value}")
    if not (math.isfinite(args.beta) and args.beta > 0):
        raise ValueError(f"--beta must be a finite number > 0, got {args.beta}")
    if args.nmax is not None and args.nmax < 0:
        raise ValueError(f"--nmax must be an integer >= 0, got {args.nmax}")
    fraction = args.variance_fraction
    if fraction is not None and not 0 < fraction < 1:
        raise ValueError(f"--variance-fraction must be in (0, 1), got {fraction}")
    kernel = NoiseKernel(args.activation, args.d, args.sigma_u, args.sigma_w)
    out = kernel.summary(beta=args.beta)
    if args.nmax is not None:
        out["nmax"] = args.nmax
        out["captured_variance"] = kernel.captured_variance(args.nmax)
    if fraction is not None:
        out["variance_fraction"] = fraction
        out["truncation_degree"] = kernel.truncation_degree(fraction)
        out["captured_variance"] = kernel.captured_variance(out["truncation_degree"])
    _emit(out, args.json)
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM during a command, raised as a KeyboardInterrupt so that the Ctrl-C path runs
    (trackers finalized, files marked ``status = "interrupted"``, summaries written)."""


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Inside the block SIGTERM raises :class:`Terminated`; the previous handler is restored
    after.  Outside the main thread (where handlers cannot be set) the block runs unchanged."""
    def handler(signum, frame):
        raise Terminated(f"signal {signum} (SIGTERM)")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _check_output_paths(args) -> None:
    """Output folders (``--output`` of run, experiment, ensemble) and files (``validate
    transport --output``, ``validate convergence --plot``) must be writable; checked first."""
    from spherepde.checks import check_output_dir, check_output_file

    if getattr(args, "output", None) is not None:
        if args.command == "validate" and args.suite != "sync-path":  # sync-path: a run's folder
            check_output_file(args.output, "--output")
        else:
            check_output_dir(args.output, "--output")
    if getattr(args, "plot", None) is not None:
        check_output_file(args.plot, "--plot")


def _fail(message: str, as_json: bool) -> int:
    """Report an error on one line (stderr; with --json also ``{"error": ...}`` on stdout)."""
    message = " ".join(str(message).split())
    print(f"spherepde: error: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": message}))
    return 2


def _dispatch(args) -> int:
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "sweep":
        return _cmd_sweep(args)
    if args.command == "demo":
        return _cmd_demo(args)
    if args.command == "plot":
        return _cmd_plot(args)
    if args.command == "experiment":
        return _cmd_experiment(args)
    if args.command == "noise-kernel":
        return _cmd_noise_kernel(args)
    if args.command == "ensemble":
        return _cmd_ensemble(args)
    return _cmd_validate(args)


def _stdout_closed() -> int:
    """stdout was closed by the reader (``… --json | head -1``): end quietly, exit status
    141 (128 + SIGPIPE, what a shell reports for a command killed by it)."""
    try:  # what is still buffered goes nowhere, so the exit's flush cannot fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def main(argv: list[str] | None = None) -> int:
    from spherepde.checks import StorageError, storage_error
    from spherepde.runs.folders import overwriting

    parser = build_parser()
    args = parser.parse_args(argv)
    as_json = bool(getattr(args, "json", False))
    try:
        with sigterm_as_interrupt(), overwriting(bool(getattr(args, "overwrite", False))):
            _check_output_paths(args)
            rc = _dispatch(args)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
            return rc
    except BrokenPipeError:
        return _stdout_closed()
    except (ValueError, TypeError) as exc:
        return _fail(str(exc), as_json)
    except StorageError as exc:  # a file that could not be written during the run
        return _fail(f"cannot write {exc.filename}: {exc.strerror}", as_json)
    except OSError as exc:  # a file-system error met during the run: name the path
        if exc.filename is None:
            raise
        return _fail(f"{exc.filename}: {exc.strerror or exc}", as_json)
    except RuntimeError as exc:  # the netCDF library's own errors (e.g. "NetCDF: HDF error")
        if not str(exc).startswith("NetCDF:") or getattr(args, "output", None) is None:
            raise
        err = storage_error(exc, Path(args.output))
        return _fail(f"cannot write in {err.filename}: {err.strerror}", as_json)
    except Terminated:
        print("spherepde: terminated (SIGTERM); output files hold everything computed so far",
              file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("spherepde: interrupted; output files hold everything computed so far", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
