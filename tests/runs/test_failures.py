"""Runtime failures end in one line naming the cause and the path, exit status 2, and leave
nothing misleading (issue 22.3): a dask scheduler that does not answer, a full disk (a real
small tmpfs where one can be mounted, else a simulated ENOSPC at the writer), a folder that
becomes unwritable during the run."""
from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spherepde.cli import main
from spherepde.io.netcdf import file_status
from spherepde.io import runfile

REPO = Path(__file__).resolve().parents[2]

#: a run of a few seconds on S¹ (density and 50 particles), 3 outputs
SMALL = ('[grid]\nkind = "circle"\nn = 32\n\n[dynamics.attention]\nQ = [[1, 0], [0, 1]]\n'
         'K = [[1, 0], [0, 1]]\nV = [[1, 0], [0, 1]]\nbeta = 3\n\n[initial]\nkind = "low-mode"\n\n'
         '[representations]\ndensity = true\nparticles = {n = 50}\n\n'
         '[stepping]\nt_end = 1.0\noutput_every = 0.5\n')


def _config(tmp_path: Path, sweep: str = "") -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL + sweep)
    return cfg


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _closed_port() -> int:
    """A port nothing listens on: bound, read and closed again."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the scheduler --------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["sweep", "ensemble"])
def test_scheduler_on_a_closed_port_one_line_within_seconds(command, tmp_path, capsys):
    from spherepde.runs.sweep import CONNECT_TIMEOUT

    if command == "sweep":
        args = ["sweep", str(_config(tmp_path, '\n[sweep]\n"dynamics.attention.beta" = [1.0, 3.0]\n'))]
    else:
        args = ["ensemble", "--realisations", "2", "--set", "grid.nlat=8", "--set", "stepping.t_end=0.1"]
    address = f"tcp://127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    t0 = time.monotonic()
    rc = main([*args, "--scheduler", address, "--output", str(out), "--quiet", "--json"])
    elapsed = time.monotonic() - t0
    cap = capsys.readouterr()
    line = _one_line(cap.err)
    assert rc == 2 and address in line and "--scheduler" in line
    assert json.loads(cap.out) == {"error": line.removeprefix("spherepde: error: ")}
    assert elapsed < CONNECT_TIMEOUT + 15  # the import and validation on a loaded machine
    assert not out.exists()  # no folder, no summary.json saying "completed": 0


# ---- a full disk -----------------------------------------------------------------------------
def _mount_tmpfs_command() -> list[str] | None:
    """A command prefix that runs ``sh -c SCRIPT`` in a private mount namespace where a
    tmpfs can be mounted (as root, or as a user with user namespaces), or None."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                               capture_output=True)
        if probe.returncode == 0:
            return prefix
    return None


def test_full_disk_on_a_small_tmpfs_one_line(tmp_path):
    """A real full disk: a 64 KiB tmpfs (mounted in a private mount namespace) fills during
    the run; one line naming the cause and run.nc, exit status 2, run.nc marked interrupted
    and readable, no empty or stale summary.json."""
    prefix = _mount_tmpfs_command()
    if prefix is None:
        pytest.skip("no tmpfs can be mounted here (the simulated ENOSPC tests cover the writer)")
    disk = tmp_path / "disk"
    disk.mkdir()
    cfg = _config(tmp_path)
    out = disk / "o"
    check = ("import json, pathlib, netCDF4; p = pathlib.Path(%r); "
             "d = netCDF4.Dataset(p / 'run.nc'); s = p / 'summary.json'; "
             "print(json.dumps({'status': d.status, 'time': d['time'].size, "
             "'summary': json.loads(s.read_text()) if s.exists() else None}))" % str(out))
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} && "
              f"{sys.executable} -m spherepde run {cfg} --output {out} --quiet "
              f"--set stepping.t_end=20 --set stepping.output_every=0.1; echo rc=$? >&2; "
              f"{sys.executable} -c \"{check}\"")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=600)
    err = proc.stderr.replace("rc=2\n", "")
    assert "rc=2" in proc.stderr, proc.stderr[-3000:]
    line = _one_line(err)
    assert "no space left" in line and str(out / "run.nc") in line
    after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert after["status"] == "interrupted"
    # summary.json: absent (the disk was full) or saying what happened, never "complete"
    assert after["summary"] is None or (after["summary"]["interrupted"] and "error" in after["summary"])


def _fail_writes_after(monkeypatch, n: int, error: BaseException, where: str | None = None) -> None:
    """Make ``RunFile.write`` fail with ``error`` (raised inside the writer's error handling,
    as the netCDF library's would be) after ``n`` good calls (per file; only files whose
    path contains ``where``, if given)."""
    real = runfile.RunFile.write
    calls: dict = {}

    def write(self, i, **values):
        if where is None or where in str(self.path):
            calls[self.path] = calls.get(self.path, 0) + 1
            if calls[self.path] > n:
                with self._storage():
                    raise error
        return real(self, i, **values)

    monkeypatch.setattr(runfile.RunFile, "write", write)


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   RuntimeError("NetCDF: HDF error")], ids=["ENOSPC", "HDF"])
def test_simulated_full_disk_at_the_writer(error, tmp_path, capsys, monkeypatch):
    """The writer fails as on a full disk: with OSError(ENOSPC), or with netCDF's "HDF error"
    (no errno) while the disk reports no free space.  One line naming the cause and run.nc;
    the file is readable and marked interrupted; summary.json says interrupted, with the error."""
    import spherepde.checks as checks

    if isinstance(error, RuntimeError):
        real = os.statvfs

        class Full:
            def __init__(self, st):
                self.f_bavail, self.f_frsize, self.f_flag = 0, st.f_frsize, st.f_flag

        monkeypatch.setattr(checks.os, "statvfs", lambda p: Full(real(p)))
    _fail_writes_after(monkeypatch, 1, error)
    out = tmp_path / "o"
    rc = main(["run", str(_config(tmp_path)), "--output", str(out), "--quiet"])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and "no space left" in line and str(out / "run.nc") in line
    assert file_status(out / "run.nc") == "interrupted"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and "no space left" in summary["error"]


def test_sweep_member_on_a_full_disk(tmp_path, capsys, monkeypatch):
    """A sweep whose second member meets a full disk: one line, exit 2; summary.json counts the
    finished member and says interrupted, with the error (not "complete")."""
    _fail_writes_after(monkeypatch, 0, OSError(errno.ENOSPC, "No space left on device"),
                       where="member-0001")
    cfg = _config(tmp_path, '\n[sweep]\n"dynamics.attention.beta" = [1.0, 3.0]\n')
    out = tmp_path / "s"
    rc = main(["sweep", str(cfg), "--workers", "0", "--output", str(out), "--quiet"])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and "no space left" in line and "member-0001" in line
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["interrupted"]) == (1, True) and "error" in summary


# ---- a folder that becomes unwritable --------------------------------------------------------
def _lock(folder: Path) -> bool:
    """Make ``folder`` refuse new files (chmod; as root, where permissions do not hold, the
    immutable attribute); True when it then does."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)],
                                                            capture_output=True).returncode:
            return False
    else:
        folder.chmod(0o500)
    try:
        (folder / ".probe").touch()
    except OSError:
        return True
    (folder / ".probe").unlink()
    return False


def _unlock(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o700)


def test_folder_made_unwritable_during_the_run(tmp_path, capsys, monkeypatch):
    """The output folder refuses new files after the first output: run.nc (open) is finished,
    summary.json cannot be created: one line naming it and the cause, exit 2, no empty file."""
    out = tmp_path / "o"
    real = runfile.RunFile.write
    locked: list = []

    def write(self, i, **values):
        real(self, i, **values)
        if not locked:
            locked.append(_lock(out))

    monkeypatch.setattr(runfile.RunFile, "write", write)
    try:
        rc = main(["run", str(_config(tmp_path)), "--output", str(out), "--quiet"])
        err = capsys.readouterr().err
    finally:
        _unlock(out)
    if not locked[0]:
        pytest.skip("the folder cannot be made unwritable here (root without chattr)")
    line = _one_line(err)
    assert rc == 2 and str(out / "summary.json") in line and "permission denied" in line
    assert file_status(out / "run.nc") == "complete"
    assert not (out / "summary.json").exists()


def test_sweep_nc_on_a_full_disk(tmp_path, capsys, monkeypatch):
    """Every member finished, then sweep.nc meets a full disk: one line naming sweep.nc, exit 2,
    no sweep.nc.part left, summary.json says interrupted with the error."""
    import spherepde.runs.sweep as sweep_module

    def full(outdir, *args):
        (outdir / "sweep.nc.part").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sweep_module, "write_sweep", full)
    cfg = _config(tmp_path, '\n[sweep]\n"dynamics.attention.beta" = [1.0, 3.0]\n')
    out = tmp_path / "s"
    rc = main(["sweep", str(cfg), "--workers", "0", "--output", str(out), "--quiet"])
    line = _one_line(capsys.readouterr().err)
    assert rc == 2 and "no space left" in line and str(out / "sweep.nc") in line
    assert not (out / "sweep.nc.part").exists() and not (out / "sweep.nc").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["completed"], summary["interrupted"]) == (2, True) and "sweep.nc" in summary["error"]
