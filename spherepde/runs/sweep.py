"""Parameter sweeps: one configuration with a ``[sweep]`` table, run member by member on dask.

A sweep file is a run configuration (:mod:`spherepde.runs.config`) plus a table of key
paths and the values each takes::

    [sweep]
    "dynamics.attention.beta" = [10.0, 30.0, 100.0]
    "representations.particles.n" = [100, 400]

(the nested form ``[sweep.dynamics.attention] beta = [...]`` is the same).  The members are the
Cartesian product of the lists, each list sorted; every member is validated before any work.
Member k runs :func:`spherepde.runs.execute.run` into ``DIR/members/member-KKKK/`` on a
``dask.distributed`` cluster (a LocalCluster of single-threaded worker processes by default, or
the scheduler at an address), and the members' ``run.nc`` files are collected into one dataset
``DIR/sweep.nc``: a variable of the same shape in all members gets in front the swept dimensions
along which it changes (named by the key paths with ``.`` → ``__``, except
``dynamics.noise.realisation`` → ``realisation``; coordinates sorted; a
density that does not depend on the particle seed is stored once per other value); a variable
whose shape differs between members (fields when ``grid.nlat`` is swept, positions when the
particle count is) is left in the member files and listed in the attribute
``variables_not_collected``.  A re-run skips the members whose ``run.nc`` is complete and holds
the same configuration; a folder that holds another result, or a sweep of another
configuration (``sweep.toml``), is refused unless ``overwrite`` (:mod:`spherepde.runs.folders`).
"""
from __future__ import annotations

import errno
import itertools
import json
import math
import os
import shutil
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spherepde import __version__
from spherepde.checks import storage_error
from spherepde.runs.config import RunConfig, apply_seed, assign, dumps_toml, key_paths, toml_value
from spherepde.runs.build import build
from spherepde.runs.execute import _secondary, _write_text, prepare_output, run
from spherepde.runs.folders import guard
from spherepde.io.runfile import member_runs, run_status, select, write_sweep
from spherepde.io.summary import jsonable


def _sort_key(v):
    return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))


@dataclass(frozen=True)
class Member:
    """One point of the sweep: its index, name, swept values {key path: value} and config."""

    index: int
    name: str
    values: dict
    config: RunConfig


@dataclass(frozen=True)
class Sweep:
    """The expanded sweep: dimensions {key path: sorted values} and the members in C order
    (the last key varies fastest)."""

    dims: dict
    members: list
    base: dict

    @property
    def shape(self) -> tuple:
        return tuple(len(v) for v in self.dims.values())


def expand(raw: dict, *, seed: int | None = None) -> Sweep:
    """Validate a raw sweep configuration and expand it into members (nothing is written).

    Errors name the sweep key (``sweep.dynamics.attention.beta``) or, from the member's own
    validation, the configuration key and the member's values.
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("sweep"), dict) or not raw["sweep"]:
        raise ValueError("sweep: the configuration needs a non-empty [sweep] table of "
                         "key paths and value lists, e.g. \"dynamics.attention.beta\" = [10, 30]")
    base = {k: v for k, v in raw.items() if k != "sweep"}
    if seed is not None:
        base = apply_seed(base, seed)
    dims = {}
    for path, values in key_paths(raw["sweep"]).items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"sweep.{path}: must be a non-empty list of values, got {values!r}")
        if any(isinstance(v, (list, dict)) for v in values):
            raise ValueError(f"sweep.{path}: values must be numbers, strings or booleans "
                             f"(one per member), got {values!r}")
        if any(isinstance(v, float) and math.isnan(v) for v in values):
            raise ValueError(f"sweep.{path}: NaN is not a value to sweep over")
        ordered = sorted(values, key=_sort_key)
        if any(_sort_key(a) == _sort_key(b) for a, b in zip(ordered, ordered[1:])):
            raise ValueError(f"sweep.{path}: values must be distinct, got {values!r}")
        dims[path] = ordered
    members = []
    for index, combo in enumerate(itertools.product(*dims.values())):
        values = dict(zip(dims, combo))
        member_raw = base
        for path, value in values.items():
            member_raw = assign(member_raw, path, value, label="sweep")
        try:
            config = RunConfig.from_dict(member_raw)
        except ValueError as err:
            raise ValueError(f"sweep member {values}: {err}") from None
        members.append(Member(index, f"member-{index:04d}", values, config))
    return Sweep(dims, members, base)


def _finished(member: Member, folder: Path) -> bool:
    """True when ``folder/run.nc`` is complete and holds this member's configuration."""
    return finished_run(member.config, folder)


def finished_run(config: RunConfig, folder: str | os.PathLike) -> bool:
    """True when ``folder/run.nc`` is complete and holds ``config`` (a re-run can skip it)."""
    status, stored = run_status(Path(folder) / "run.nc")
    return status == "complete" and stored == json.loads(json.dumps(config.to_dict()))


def _run_member(config_dict: dict, folder: str) -> dict:
    """Worker task: run one member quietly into ``folder``; its summary without the config."""
    # the sweep decided for its folder (runs.folders.guard): a member of another configuration
    # left in it is replaced
    summary = run(RunConfig.from_dict(config_dict), folder, progress=False, overwrite=True)
    return {k: v for k, v in summary.items() if k != "config"}


def collect(sweep: Sweep, outdir: Path, config: dict) -> Path:
    """Stack the members' ``run.nc`` into ``outdir/sweep.nc`` (:func:`~spherepde.io.runfile.write_sweep`);
    a write that fails (a full disk) raises :class:`~spherepde.checks.StorageError` naming it."""
    try:
        return write_sweep(outdir, [(m.name, m.values) for m in sweep.members], sweep.dims,
                           sweep.shape, config)
    except (OSError, RuntimeError) as err:
        if isinstance(err, OSError) and err.errno not in _WRITE_ERRORS:
            raise  # e.g. a member file that cannot be read: its own message
        (outdir / "sweep.nc.part").unlink(missing_ok=True)
        raise storage_error(err, outdir / "sweep.nc") from err


#: errnos of a file that cannot be written (as opposed to one that cannot be read)
_WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS)


def run_sweep(raw: dict, output: str | os.PathLike, *, workers: int = 2, scheduler: str | None = None,
              seed: int | None = None, progress: bool = True, client=None,
              overwrite: bool | None = None) -> dict:
    """Expand, run the members not yet finished on dask, collect ``sweep.nc``; return the summary.

    Every member's configuration is validated, and the first and the last (the largest swept
    values) are built, before the output folder is created.

    workers : processes of the LocalCluster started here (ignored with ``scheduler``);
        ``workers=0`` runs the members in this process, one after the other.
    scheduler : the address of a running dask scheduler (``tcp://host:8786``); connected to
        before the folder is created, ValueError naming it when none answers within
        :data:`CONNECT_TIMEOUT` seconds.
    client : a ``dask.distributed.Client`` to submit to (used, not closed; ``workers`` and
        ``scheduler`` are then ignored), e.g. one cluster shared by an experiment's sweeps.
    overwrite : let a folder that holds another result or a sweep of another configuration be
        replaced (its sweep.nc, summary.json and the member folders not in this sweep are
        removed first); False refuses it (:func:`spherepde.runs.folders.guard`); None: the
        command's ``--overwrite`` (:data:`spherepde.runs.folders.OVERWRITE`).
    The summary (also ``DIR/summary.json``) has ``members``, ``completed`` (run now),
    ``skipped`` (finished before), ``file`` and ``seconds``.  On Ctrl-C the members that
    finished are counted, a partial sweep.nc of them is written (``status = "interrupted"``,
    the others NaN; ``"incomplete": true``), the summary is attached to the KeyboardInterrupt
    (``err.summary``) and the interrupt goes on.  Another error (a member's, a full disk) also
    leaves the summary with ``"interrupted": true`` and ``"error"``, attached to it the same way.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"--workers must be an integer ≥ 0, got {workers!r}")
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"--scheduler must be an address such as tcp://host:8786, got {scheduler!r}")
    sweep = expand(raw, seed=seed)
    for m in {m.name: m for m in (sweep.members[0], sweep.members[-1])}.values():
        build(m.config)  # the checks that need the objects (e.g. the noise's step), before any file
    config = {**sweep.base, "sweep": {p: list(v) for p, v in sweep.dims.items()}}
    replace = guard(output, "sweep", tomllib.loads(_sweep_toml(config)), overwrite=overwrite)
    folders = {m.name: Path(output) / "members" / m.name for m in sweep.members}
    todo = [m for m in sweep.members if not _finished(m, folders[m.name])]
    own = None
    if todo and scheduler is not None and client is None:
        client = own = connect(scheduler)  # before anything is written
    try:
        return _run_sweep(sweep, config, output, folders, todo, replace, workers=workers,
                          scheduler=scheduler, progress=progress, client=client)
    finally:
        if own is not None:
            own.close()


def _run_sweep(sweep: Sweep, config: dict, output, folders: dict, todo: list, replace: bool, *,
               workers: int, scheduler: str | None, progress: bool, client) -> dict:
    """:func:`run_sweep` from the creation of the folder on."""
    outdir = prepare_output(output)
    if replace:
        _clear(outdir, set(folders))
    _write_text(outdir / "sweep.toml", _sweep_toml(config))
    summary: dict[str, Any] = {"members": len(sweep.members), "completed": 0,
                               "skipped": len(sweep.members) - len(todo), "interrupted": False,
                               "dims": config["sweep"],
                               "workers": workers if scheduler is None else None,
                               "scheduler": scheduler, "version": __version__}
    t0 = time.perf_counter()

    def finished(_name: str) -> None:
        summary["completed"] += 1

    failed: BaseException | None = None
    try:
        if todo and workers == 0 and scheduler is None and client is None:
            bar = _MemberProgress(len(todo), progress)
            try:
                for m in todo:
                    _run_member(m.config.to_dict(), str(folders[m.name]))
                    finished(m.name)
                    bar.update(m.name)
            finally:
                bar.close()
        elif todo:
            _run_on_dask(todo, folders, workers, scheduler, progress, client, on_done=finished)
        summary["file"] = str(collect(sweep, outdir, config))
    except KeyboardInterrupt as err:
        summary["interrupted"] = True
        if summary["completed"] + summary["skipped"] > 0:  # a partial sweep.nc of the finished members
            try:
                summary["file"] = str(collect(sweep, outdir, config))
                summary["incomplete"] = True
            except (OSError, ValueError) as e:  # never hide the interrupt
                err.add_note(f"spherepde: no partial sweep.nc: {e}")
        err.summary = summary  # type: ignore[attr-defined]  # what the command line prints
        failed = err
        raise
    except Exception as err:  # a member's error, a full disk: the summary does not say "complete"
        summary["interrupted"] = True
        summary["error"] = (f"{err.strerror}: {err.filename}" if isinstance(err, OSError) and err.filename
                            else f"{type(err).__name__}: {err}")
        err.summary = summary  # type: ignore[attr-defined]
        failed = err
        raise
    finally:
        summary["seconds"] = round(time.perf_counter() - t0, 2)
        with _secondary(failed):
            _write_text(outdir / "summary.json", json.dumps(jsonable(summary), indent=2))
    return summary


#: seconds to wait for the dask scheduler given by ``--scheduler``
CONNECT_TIMEOUT = 5.0


def connect(scheduler: str, timeout: float = CONNECT_TIMEOUT):
    """A dask ``Client`` of the scheduler at ``scheduler``; ValueError naming the address when
    none answers within ``timeout`` seconds (or the address is not one)."""
    from dask.distributed import Client

    try:
        return Client(scheduler, timeout=timeout)
    except ValueError as err:  # not an address
        raise ValueError(f"--scheduler: {scheduler!r} is not a dask scheduler address such as "
                         f"tcp://host:8786 ({err})") from None
    except (OSError, TimeoutError):
        raise ValueError(f"--scheduler: no dask scheduler answered at {scheduler} within "
                         f"{timeout:g} s; start one (`dask scheduler`) or leave --scheduler out "
                         f"for a local cluster") from None


def _clear(outdir: Path, keep: set) -> None:
    """Remove what an earlier sweep of another configuration left in ``outdir`` (with
    ``overwrite``): sweep.nc, its summary and the member folders that this sweep has not."""
    for name in ("sweep.nc", "sweep.nc.part", "summary.json"):
        (outdir / name).unlink(missing_ok=True)
    members = outdir / "members"
    if members.is_dir():
        for folder in members.iterdir():
            if folder.is_dir() and folder.name.startswith("member-") and folder.name not in keep:
                shutil.rmtree(folder)


def _run_on_dask(todo, folders, workers: int, scheduler: str | None, progress: bool,
                 client=None, on_done=None) -> None:
    """Submit the members (to ``client`` if given, else to a cluster started and closed here);
    ``on_done(name)`` as each finishes (a failure re-raises its error)."""

    from dask.distributed import as_completed

    own = client is None
    if not own:
        cluster = None
    elif scheduler is not None:
        client, cluster = connect(scheduler), None
    else:
        client, cluster = local_client(min(workers, len(todo)))
    bar = _MemberProgress(len(todo), progress)
    futures = []
    try:
        futures = [client.submit(single_threaded, _run_member, m.config.to_dict(), str(folders[m.name]),
                                 key=f"spherepde-{m.name}-{os.getpid()}-{time.time_ns()}", pure=False)
                   for m in todo]
        names = {f.key: m.name for f, m in zip(futures, todo)}
        for future in as_completed(futures):
            future.result()  # re-raises a member's error here
            bar.update(names[future.key])
            if on_done is not None:
                on_done(names[future.key])
    except BaseException:
        for f in futures:
            f.cancel()
        raise
    finally:
        bar.close()
        if own:
            client.close()
        if cluster is not None:
            cluster.close()


class _MemberProgress:
    """Progress over a sweep's members: a tqdm bar on a terminal; off one (a batch job's log) a
    line ``spherepde: member NAME done (k/n, elapsed s)`` per finished member; nothing when
    ``progress`` is false."""

    def __init__(self, total: int, progress: bool) -> None:
        import sys

        from tqdm import tqdm

        self.total, self.done, self.t0 = total, 0, time.perf_counter()
        tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.log = progress and not tty
        self.bar = tqdm(total=total, desc="members", unit="run", file=sys.stderr,
                        disable=not (progress and tty))

    def update(self, name: str) -> None:
        import sys

        self.done += 1
        self.bar.update(1)
        if self.log:
            print(f"spherepde: member {name} done ({self.done}/{self.total}, "
                  f"{time.perf_counter() - self.t0:.0f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()


def single_threaded(fn, *args):
    """``fn(*args)`` with numba's parallel regions on one thread (a dask task: each worker
    process runs one task at a time, so more threads would only compete for the cores)."""
    import numba

    numba.set_num_threads(1)
    return fn(*args)


def local_client(workers: int):
    """A dask ``Client`` on a new ``LocalCluster`` of ``workers`` single-threaded processes (BLAS
    limited to one thread each, dashboard on a free port, logs at ERROR); returns
    (client, cluster) — close both.  Submit tasks through :func:`single_threaded` to keep numba
    on one thread too.

    NUMBA_NUM_THREADS is not set in the workers' environment: a worker may import numba before
    the environment is applied (the parent's ``__main__`` is re-imported in spawned processes),
    and numba then refuses to compile once the variable disagrees with its launched threads.
    """
    import logging

    from dask.distributed import Client, LocalCluster

    one = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR, env=one)
    return Client(cluster), cluster


def _sweep_toml(config: dict) -> str:
    """The sweep configuration as TOML (the swept key paths quoted in one [sweep] table)."""
    body = dumps_toml({k: v for k, v in config.items() if k != "sweep"})
    lines = ["", "[sweep]"] + [f"{json.dumps(p)} = {toml_value(v)}" for p, v in config["sweep"].items()]
    return body + "\n".join(lines) + "\n"


__all__ = ["CONNECT_TIMEOUT", "Member", "Sweep", "collect", "connect", "expand", "finished_run",
           "local_client", "member_runs",
           "run_sweep", "select", "single_threaded"]
