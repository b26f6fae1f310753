"""The argument parser of the command line: every command, its options and their help."""
from __future__ import annotations

import argparse
import math

from spherepde import __version__


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
    sp.add_argument("--clusters", type=int, default=1, choices=(1, 2),
                    help="ρ₀ one vMF cluster (default) or two equal ones 90° apart")
    sp.add_argument("--base-nlat", type=int, default=None,
                    help="amr: base grid latitudes (default nlat/2, even; ignored by the others)")
    sp.add_argument("--max-level", type=int, default=4,
                    help="amr: refinement levels below the base (default 4)")
    sp.add_argument("--mass-per-cell", type=float, default=10.0,
                    help="amr: a leaf splits above mass_per_cell·h², h the finest width (default 10)")
    sp.add_argument("--noise-substeps", default="frozen", choices=("frozen", "path"),
                    help="amr: its positivity sub-steps take the step's frozen noise velocity "
                         "(default) or the path's own increments over each sub-step")
    sp.add_argument("--follow", action="store_true",
                    help="amr, experimental: sub-steps of at most courant finest cells of noise "
                         "displacement, an adapt pass after each")
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
                                     "is below 2 %. Make REFINED.nc with `spherepde run CONFIG "
                                     "--refine 1.5`.")
    rs.add_argument("run", metavar="RUN.nc", help="the run file")
    rs.add_argument("refined", metavar="REFINED.nc", help="the same model at a finer resolution")
    rs.add_argument("--json", action="store_true", help="print the result as JSON")

    _noise_kernel_parser(sub)
    return parser



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

