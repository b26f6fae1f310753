"""The commands of the command line: each ``_cmd_NAME(args)`` runs one parsed command and
returns its exit status."""
from __future__ import annotations

import math
import re
from pathlib import Path

from spherepde.cli.text import _emit, _experiment_text, _resolution_text, _run_text


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
                                    output_every=every, polar=args.polar, clusters=args.clusters,
                                    base_nlat=args.base_nlat, max_level=args.max_level,
                                    mass_per_cell=args.mass_per_cell,
                                    noise_substeps=args.noise_substeps, follow=args.follow)
        except ValueError as exc:  # name the options, not the fields
            msg = str(exc)
            for field_name in ("output_every", "t_end", "nlat", "base_nlat", "dt", "seed", "realisation",
                               "max_level", "mass_per_cell"):
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

