"""What a user sees when a command fails at run time (issue 22.3/22.4/22.13), measured on the
command line as a user runs it: exit status, wall time, the number of lines on stderr and the
first of them, and whether a traceback appeared.

Cases (each a fresh ``python -m spherepde`` process; a small S¹ run of a few seconds):

* ``scheduler``: ``sweep --scheduler tcp://127.0.0.1:PORT`` on a port that was bound and
  closed (nothing listens); the wall time includes the start-up and validation;
* ``full_disk``: ``run`` into a 64 KiB tmpfs mounted in a private mount namespace
  (``unshare --mount``; skipped where it cannot be mounted), with run.nc's status after;
* ``other_config``: ``run`` into a folder holding a run of another β and t_end;
* ``closed_stdout``: ``noise-kernel --json`` with its stdout closed before it writes.

    python benchmarks/bench_failures.py [--out benchmarks/results/failures.json]
    # the same cases on another checkout of the package (e.g. before the fix):
    python benchmarks/bench_failures.py --package DIR --label COMMIT --out benchmarks/results/failures_before.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
CONFIG = ('[grid]\nkind = "circle"\nn = 32\n\n[dynamics.attention]\nQ = [[1, 0], [0, 1]]\n'
          'K = [[1, 0], [0, 1]]\nV = [[1, 0], [0, 1]]\nbeta = 3\n\n[initial]\nkind = "low-mode"\n\n'
          '[representations]\ndensity = true\nparticles = {n = 50}\n\n'
          '[stepping]\nt_end = 1.0\noutput_every = 0.5\n')
SWEEP = '\n[sweep]\n"dynamics.attention.beta" = [1.0, 3.0]\n'
SPHEREPDE = [sys.executable, "-m", "spherepde"]


def _record(proc_args: list, **kw) -> dict:
    t0 = time.perf_counter()
    # run outside the checkout: ``python -m`` puts the working folder first on sys.path
    proc = subprocess.run(proc_args, capture_output=True, text=True, env=ENV,
                          cwd=tempfile.gettempdir(), **kw)
    seconds = time.perf_counter() - t0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return {"rc": proc.returncode, "seconds": round(seconds, 2), "stderr_lines": len(lines),
            "first_line": lines[0] if lines else "", "traceback": "Traceback" in proc.stderr,
            "stdout_tail": proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []}


def scheduler(tmp: Path) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp / "s.toml").write_text(CONFIG + SWEEP)
    out = tmp / "sched"
    res = _record([*SPHEREPDE, "sweep", str(tmp / "s.toml"), "--scheduler",
                   f"tcp://127.0.0.1:{port}", "--output", str(out), "--quiet"])
    return {**res, "folder_created": out.exists()}


def full_disk(tmp: Path) -> dict:
    if shutil.which("unshare") is None:
        return {"skipped": "no unshare"}
    disk = tmp / "disk"
    disk.mkdir()
    (tmp / "c.toml").write_text(CONFIG)
    out = disk / "o"
    check = ("import json, netCDF4; d = netCDF4.Dataset('%s/run.nc'); "
             "print(json.dumps({'status': d.status, 'summary_json': %s}))"
             % (out, f"__import__('os').path.exists('{out}/summary.json')"))
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} || exit 99; "
              f"{sys.executable} -m spherepde run {tmp / 'c.toml'} --output {out} --quiet "
              f"--set stepping.t_end=20 --set stepping.output_every=0.1; rc=$?; "
              f"{sys.executable} -c \"{check}\"; exit $rc")
    res = _record(["unshare", "--mount", "sh", "-c", script])
    if res["rc"] == 99:
        return {"skipped": "tmpfs cannot be mounted here"}
    res["after"] = json.loads(res.pop("stdout_tail")[0])
    return res


def other_config(tmp: Path) -> dict:
    (tmp / "c.toml").write_text(CONFIG)
    out = tmp / "r"
    first = _record([*SPHEREPDE, "run", str(tmp / "c.toml"), "--output", str(out), "--quiet"])
    again = _record([*SPHEREPDE, "run", str(tmp / "c.toml"), "--output", str(out), "--quiet",
                     "--set", "dynamics.attention.beta=4", "--set", "stepping.t_end=0.5"])
    return {"first_rc": first["rc"], **again}


def closed_stdout(tmp: Path) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([*SPHEREPDE, "noise-kernel", "--activation", "relu", "--d", "3",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            cwd=tempfile.gettempdir())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    rc = proc.wait()
    return {"rc": rc, "seconds": round(time.perf_counter() - t0, 2),
            "stderr_lines": len([x for x in err.splitlines() if x.strip()]),
            "traceback": "Traceback" in err}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "failures.json"))
    parser.add_argument("--package", default=str(ROOT),
                        help="folder holding the spherepde package to run (default this checkout)")
    parser.add_argument("--label", default="this checkout",
                        help="what --package is, for the results (e.g. a commit)")
    args = parser.parse_args()
    ENV["PYTHONPATH"] = os.pathsep.join([args.package, os.environ.get("PYTHONPATH", "")])
    results = {}
    for case in (scheduler, full_disk, other_config, closed_stdout):
        with tempfile.TemporaryDirectory() as tmp:
            results[case.__name__] = case(Path(tmp))
            print(case.__name__, json.dumps(results[case.__name__]), flush=True)
    out = {"cases": results, "package": args.label, "python": platform.python_version(),
           "machine": platform.machine(), "load_average": os.getloadavg(),
           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
