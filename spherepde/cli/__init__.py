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

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from spherepde.cli.commands import (_cmd_demo, _cmd_ensemble, _cmd_experiment, _cmd_noise_kernel,
                                    _cmd_plot, _cmd_run, _cmd_sweep, _cmd_validate)
from spherepde.cli.parser import build_parser
from spherepde.cli.text import _experiment_text  # noqa: F401  (re-exported for the tests)


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
    except (KeyboardInterrupt, SystemError) as exc:
        # an interrupt raised while a compiled kernel returned arrives as the SystemError's cause
        # (the run loop unwraps it: solvers.controller.interrupt_inside; this catches the rest)
        stop = (exc.__cause__ or exc.__context__) if isinstance(exc, SystemError) else exc
        if isinstance(stop, Terminated):
            print("spherepde: terminated (SIGTERM); output files hold everything computed so far",
                  file=sys.stderr)
            return 143
        if isinstance(stop, KeyboardInterrupt):
            print("spherepde: interrupted; output files hold everything computed so far", file=sys.stderr)
            return 130
        raise



__all__ = ["Terminated", "build_parser", "main", "sigterm_as_interrupt"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
