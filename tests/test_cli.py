"""The command line: JSON keys, files written, and bad input refused before any work."""
from __future__ import annotations

import math
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import interrupt_after

from spherepde.cli import main
from spherepde.io.netcdf import file_status, open_dataset, read_config

REPO = Path(__file__).resolve().parents[1]

KEYS = {"case", "field", "nlat", "steps", "seconds", "l1", "l2", "linf", "lmax", "lmin",
        "mass_error", "min_value"}


def run_cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_validate_transport_json_and_output(tmp_path, capsys):
    nc = tmp_path / "w.nc"
    rc, out, _ = run_cli(["validate", "transport", "--case", "williamson1", "--nlat", "16",
                          "--output", str(nc), "--json"], capsys)
    assert rc == 0
    res = json.loads(out)
    assert KEYS <= set(res)
    assert res["field"] == "cosine-bell" and res["nlat"] == 16
    assert abs(res["mass_error"]) < 1e-13 and res["min_value"] >= -1e-14
    ds = open_dataset(nc)
    assert ds.time.values[0] == 0.0 and ds.time.values[-1] == pytest.approx(12.0)
    assert ds.attrs["Conventions"] == "CF-1.8"
    assert read_config(nc)["case"] == "williamson1"
    # the file's first and last fields are the ones the norms were computed from
    first, last = ds["psi"].isel(time=0).values, ds["psi"].isel(time=-1).values
    lmax = (last.max() - first.max()) / (first.max() - first.min())
    assert lmax == pytest.approx(res["lmax"], abs=1e-12)


def test_validate_transport_alpha_expression(capsys):
    rc, out, _ = run_cli(["validate", "transport", "--case", "williamson1", "--nlat", "8",
                          "--alpha", "pi/2", "--json"], capsys)
    assert rc == 0 and json.loads(out)["alpha"] == pytest.approx(np.pi / 2)


def test_validate_convergence_fits_orders(tmp_path, capsys):
    png = tmp_path / "c.png"
    rc, out, _ = run_cli(["validate", "convergence", "--case", "nl-case4", "--nlat", "8", "12", "16",
                          "--plot", str(png), "--json"], capsys)
    assert rc == 0
    res = json.loads(out)
    assert len(res["rows"]) == 3 and "order_l2" in res and "order_l2_stderr" in res
    errs = [r["l2"] for r in res["rows"]]
    assert errs[0] > errs[-1]  # the error falls with resolution
    assert png.stat().st_size > 10_000


def test_validate_transport_and_convergence_polar_cap(capsys):
    rc, out, _ = run_cli(["validate", "transport", "--case", "williamson1", "--nlat", "16",
                          "--alpha", "pi/2", "--polar", "cap", "--json"], capsys)
    res = json.loads(out)
    assert rc == 0 and res["polar"] == "cap" and res["cap_rings"] == 4
    assert abs(res["mass_error"]) < 1e-13 and res["min_value"] >= -1e-14 * res["max_value"]
    rc, out, _ = run_cli(["validate", "transport", "--case", "williamson1", "--nlat", "16",
                          "--polar", "split", "--json"], capsys)
    assert rc == 0 and json.loads(out)["polar"] == "split" and "cap_rings" not in json.loads(out)
    rc, out, _ = run_cli(["validate", "convergence", "--case", "williamson1", "--nlat", "8", "12", "16",
                          "--polar", "cap", "--cap-rings", "2", "--json"], capsys)
    res = json.loads(out)
    assert rc == 0 and res["polar"] == "cap" and len(res["rows"]) == 3
    assert all(r["polar"] == "cap" and r["cap_rings"] == 2 for r in res["rows"])
    # the default (auto): the cap with min(4, nlat/4) rings from nlat 8 on, the split below
    rc, out, _ = run_cli(["validate", "convergence", "--case", "williamson1", "--nlat", "6", "8", "16",
                          "--json"], capsys)
    res = json.loads(out)
    assert rc == 0 and res["polar"] == "auto"
    assert [(r["polar"], r.get("cap_rings")) for r in res["rows"]] == [("split", None), ("cap", 2),
                                                                      ("cap", 4)]


@pytest.mark.parametrize("args, word", [
    (["validate", "transport", "--case", "williamson1", "--nlat", "8", "--polar", "cap", "--cap-rings",
      "4"], "--cap-rings"),
    (["validate", "transport", "--case", "williamson1", "--nlat", "16", "--polar", "cap", "--limiter",
      "none"], "positive limiter"),
    (["validate", "convergence", "--case", "williamson1", "--nlat", "8", "12", "16", "--polar", "cap",
      "--cap-rings", "3"], "--cap-rings"),
    (["validate", "transport", "--case", "nl-case4", "--nlat", "15"], "nlat"),
    (["validate", "transport", "--case", "nl-case4", "--nlat", "2"], "nlat"),
    (["validate", "transport", "--case", "nl-case4", "--nlat", "16", "--courant", "0"], "courant"),
    (["validate", "transport", "--case", "nl-case4", "--nlat", "16", "--courant", "5"], "courant"),
    (["validate", "transport", "--case", "nl-case4", "--nlat", "16", "--alpha", "0.3"], "alpha"),
    (["validate", "transport", "--case", "williamson1", "--nlat", "16", "--alpha", "2"], "alpha"),
    (["validate", "transport", "--case", "nl-case4", "--nlat", "16", "--output", "/nonexistent/x.nc"], "output"),
    (["validate", "convergence", "--case", "nl-case4", "--nlat", "8", "16"], "nlat"),
])
def test_bad_values_exit_2_naming_the_argument(args, word, capsys):
    rc, out, err = run_cli(args, capsys)
    assert rc == 2 and out == ""
    assert word in err


@pytest.mark.parametrize("args", [
    ["validate", "transport", "--case", "bogus", "--nlat", "16"],
    ["validate", "transport", "--case", "nl-case4", "--field", "bogus", "--nlat", "16"],
    ["validate", "transport", "--case", "nl-case4", "--nlat", "16", "--limiter", "bogus"],
    ["validate", "transport", "--case", "nl-case4", "--nlat", "16", "--polar", "bogus"],
    ["validate", "transport", "--case", "nl-case4", "--nlat", "sixteen"],
])
def test_unknown_names_refused_by_argparse(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    assert "invalid" in capsys.readouterr().err


def test_run_with_config_file(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[grid]\nkind = "circle"\nn = 32\n\n[dynamics.attention]\n'
                   'Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 0], [0, 1]]\nbeta = 3\n\n'
                   '[initial]\nkind = "low-mode"\n\n[stepping]\nt_end = 1.0\noutput_every = 0.5\n')
    rc, out, _ = run_cli(["run", "--config", str(cfg), "--output", str(tmp_path / "o"), "--quiet",
                          "--json"], capsys)
    assert rc == 0
    res = json.loads(out)
    for name in ("run.nc", "summary.json", "config.toml"):
        assert (tmp_path / "o" / name).is_file()
    assert open_dataset(tmp_path / "o" / "run.nc").sizes["time"] == 3
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["density"]["steps"] == res["density"]["steps"]
    stored = read_config(tmp_path / "o" / "run.nc")
    assert stored["grid"] == {"kind": "circle", "n": 32}
    assert stored["representations"]["density"] == {"scheme": "ffsl-ppm", "limiter": "positive",
                                                    "polar": "auto"}


def test_run_refuses_unknown_config_key(tmp_path, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"grid": {"nlat": 12, "resolution": 3}}')
    rc, _, err = run_cli(["run", "--config", str(cfg), "--output", str(tmp_path / "o")], capsys)
    assert rc == 2 and "grid.resolution" in err and not (tmp_path / "o").exists()


def test_module_entry_point_version():
    out = subprocess.run([sys.executable, "-m", "spherepde", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.startswith("spherepde ")


NOISE_KEYS = {"activation", "d", "sigma_u", "sigma_w", "beta", "kappa", "kappa_prime", "lambda_1",
              "lambda_bar", "lambda_bar_prime", "odd"}


def test_noise_kernel_json_relu_closed_form(capsys):
    rc, out, _ = run_cli(["noise-kernel", "--activation", "relu", "--d", "5", "--sigma-u", "0.1",
                          "--sigma-w", "0.2", "--variance-fraction", "0.99", "--json"], capsys)
    assert rc == 0
    res = json.loads(out)
    assert NOISE_KEYS | {"variance_fraction", "truncation_degree", "captured_variance"} <= set(res)
    d, b = 5, 0.1 ** 2 + 2 * 0.2 ** 2          # SPEC Paper 2: ReLU closed form and Prop 1.5
    assert res["kappa"] == pytest.approx((1 / d + 0.01) / 2 + 0.04, rel=1e-14)
    assert res["kappa_prime"] == pytest.approx(1 / (2 * d), rel=1e-14)
    assert res["lambda_1"] == pytest.approx(-1 / (2 * d) - b * (d - 1) / 4, rel=1e-13)
    assert res["lambda_bar"] == pytest.approx(1 / d - b * (d - 3) / 2, rel=1e-13)
    assert res["lambda_bar_prime"] >= res["lambda_bar"] and res["odd"] is False
    assert res["captured_variance"] >= 0.99 and res["truncation_degree"] >= 1


def test_noise_kernel_table_output_and_nmax(capsys):
    rc, out, _ = run_cli(["noise-kernel", "--activation", "tanh", "--d", "4", "--nmax", "8"], capsys)
    assert rc == 0
    assert "lambda_bar_prime" in out and "captured_variance" in out and "True" in out   # odd: no biases


@pytest.mark.parametrize("args, word", [
    (["--d", "1"], "--d"),
    (["--d", "3", "--sigma-u", "-0.1"], "--sigma-u"),
    (["--d", "3", "--beta", "0"], "--beta"),
    (["--d", "3", "--variance-fraction", "1"], "--variance-fraction"),
    (["--d", "3", "--nmax", "-2"], "--nmax"),
])
def test_noise_kernel_bad_values(args, word, capsys):
    rc, out, err = run_cli(["noise-kernel", "--activation", "relu"] + args, capsys)
    assert rc == 2 and out == "" and word in err


def test_noise_kernel_nmax_and_fraction_exclusive(capsys):
    with pytest.raises(SystemExit) as e:
        main(["noise-kernel", "--activation", "relu", "--d", "3", "--nmax", "5", "--variance-fraction", "0.9"])
    assert e.value.code == 2 and "not allowed" in capsys.readouterr().err


def _small_ensemble(tmp_path, **changes):
    from spherepde.runs.ensemble import DEFAULT

    raw = {**DEFAULT, "grid": {"kind": "sphere", "nlat": 8},
           "stepping": {"t_end": 0.2, "dt": 0.05, "output_every": 0.1}, **changes}
    cfg = tmp_path / "spde.json"
    cfg.write_text(json.dumps(raw))
    return cfg


def test_ensemble_command(tmp_path, capsys):
    cfg = _small_ensemble(tmp_path)
    assert main(["ensemble", str(cfg), "--realisations", "2", "--workers", "0", "--quiet",
                 "--output", str(tmp_path / "out"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (res["members"], res["completed"], res["realisations"]) == (2, 2, 2)
    assert (tmp_path / "out" / "sweep.nc").exists() and (tmp_path / "out" / "mean.png").exists()
    assert open_dataset(tmp_path / "out" / "sweep.nc")["realisation"].values.tolist() == [0, 1]
    cfg = _small_ensemble(tmp_path, grid={"kind": "sphere", "resolution": 3})
    rc, _, err = run_cli(["ensemble", "--config", str(cfg), "--output", str(tmp_path / "o2")], capsys)
    assert rc == 2 and "grid.resolution: unknown key" in err and not (tmp_path / "o2").exists()


def test_json_output_is_strict_json(tmp_path, capsys):
    """--json prints standard JSON: a rate fitted on two points has stderr NaN → null, and
    β = inf → "inf" (Python's NaN/Infinity tokens are not JSON)."""
    from spherepde.io.summary import jsonable

    assert jsonable({"a": [float("nan"), float("inf"), -math.inf, 1.5], "b": (2,)}) == {
        "a": [None, "inf", "-inf", 1.5], "b": [2]}
    # in this process (--workers 0): the local cluster's start is tested in test_cli_defaults
    rc = main(["experiment", "particles-vs-density", "--quick", "--particle-counts", "50", "100",
               "--nlat", "8", "--t-end", "0.5", "--workers", "0", "--output", str(tmp_path), "--json"])
    assert rc == 0

    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    out = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert out["runs"][0]["rate_moment_error"]["stderr"] is None


# ---- file-system errors: exit 2, one line naming the path, before any work ----------------------
@pytest.mark.parametrize("args", [
    ["run", "--output", "{file}"],
    ["experiment", "circle-clusters", "--quick", "--output", "{file}"],
    ["experiment", "synchronization", "--quick", "--output", "{file}/sub"],
    ["ensemble", "--output", "{file}"],
    ["validate", "transport", "--case", "williamson1", "--nlat", "8", "--output", "{dir}"],
    ["validate", "convergence", "--case", "williamson1", "--nlat", "8", "12", "16", "--plot", "{dir}"],
])
def test_output_path_that_is_a_file_or_folder_exits_2(args, tmp_path, capsys):
    file = tmp_path / "a_file"
    file.write_text("x")
    args = [a.format(file=file, dir=tmp_path) for a in args]
    rc, out, err = run_cli(args, capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "error" in err
    assert (str(file) if str(file) in " ".join(args) else str(tmp_path)) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing created


def test_output_error_with_json_prints_an_error_object(tmp_path, capsys):
    file = tmp_path / "a_file"
    file.write_text("x")
    rc, out, err = run_cli(["ensemble", "--output", str(file / "sub"), "--json"], capsys)
    assert rc == 2
    res = json.loads(out)
    assert set(res) == {"error"} and str(file) in res["error"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root can write into any folder")
def test_unwritable_output_folder_exits_2(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        rc, out, err = run_cli(["experiment", "circle-clusters", "--quick", "--output",
                                str(locked / "out")], capsys)
    finally:
        locked.chmod(0o700)
    assert rc == 2 and str(locked) in err and "not writable" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_stops_a_command_with_an_interrupted_file(tmp_path):
    """SIGTERM runs the Ctrl-C path: exit status 143 and the file says status = interrupted."""
    nc = tmp_path / "t.nc"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "spherepde", "validate", "transport", "--case",
                             "williamson1", "--nlat", "96", "--output", str(nc)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60  # a start-up on a loaded machine (imports, numba cache)
        while not nc.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert nc.exists(), "the run did not start in 60 s"
        size = nc.stat().st_size  # then wait for a first output past the header, however loaded
        while nc.stat().st_size == size and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(1.0)  # a few steps
        proc.send_signal(signal.SIGTERM)
        # behaviour, not speed: on a machine loaded 3–4× the process seen taking > 30 s to
        # reach its next bytecode after the signal (inside a compiled kernel call)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "SIGTERM" in err
    assert file_status(nc) == "interrupted"
    ds = open_dataset(nc, incomplete="ignore")
    assert ds.sizes["time"] >= 1 and "psi" in ds


@pytest.mark.parametrize("attention, word", [
    ({"Q": [[1.0, 0.0], [0.0, 1.0]], "K": np.eye(3).tolist(), "V": np.eye(3).tolist(), "beta": 1.0},
     "dynamics.attention.Q"),
    ({"Q": np.eye(3).tolist(), "V": np.eye(3).tolist(), "beta": 1.0}, "dynamics.attention.K"),
    ({"Q": np.eye(3).tolist(), "K": np.eye(3).tolist(), "V": [[float("nan")] * 3] * 3, "beta": 1.0},
     "dynamics.attention.V"),
])
def test_ensemble_bad_attention_reported_before_any_file(attention, word, tmp_path, capsys):
    from spherepde.runs.ensemble import DEFAULT

    cfg = _small_ensemble(tmp_path, dynamics={**DEFAULT["dynamics"], "attention": attention})
    out = tmp_path / "out"
    rc, _, err = run_cli(["ensemble", "--config", str(cfg), "--workers", "0", "--output", str(out)],
                         capsys)
    assert rc == 2 and word in err and "Traceback" not in err
    assert "members" not in err  # no progress bar was started
    assert not out.exists()


def test_noise_kernel_refuses_a_degree_beyond_memory(capsys):
    from spherepde.noise.kernel import max_kl_degree

    rc, _, err = run_cli(["noise-kernel", "--activation", "relu", "--d", "3", "--nmax", "100000"], capsys)
    assert rc == 2 and "nmax" in err and f"0..{max_kl_degree()}" in err and "GiB" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_handler_raises_terminated_and_is_restored():
    from spherepde.cli import Terminated, sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
    assert signal.getsignal(signal.SIGTERM) is before
    assert issubclass(Terminated, KeyboardInterrupt)


def test_interrupted_ensemble_command_writes_summary(tmp_path, monkeypatch, capsys):
    import spherepde.runs.sweep as sweep

    interrupt_after(monkeypatch, sweep, "_run_member", 1)
    cfg = _small_ensemble(tmp_path)
    rc, _, err = run_cli(["ensemble", str(cfg), "--realisations", "3", "--workers", "0",
                          "--output", str(tmp_path / "out")], capsys)
    assert rc == 130 and "interrupted" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["completed"] == 1
    assert file_status(tmp_path / "out" / "members" / "member-0000" / "run.nc") == "complete"
    assert (tmp_path / "out" / "mean.png").exists()


def test_demo_quick_end_to_end(tmp_path, capsys, monkeypatch):
    """``spherepde demo`` (reduced size): the embedded configuration through ``run``, run.nc and
    summary.json beside the pictures, and a reading naming them (the text form prints the same
    summary, not a second run)."""
    from spherepde.experiments.demo import DEMO, demo_config

    out = tmp_path / "demo"
    rc = main(["demo", "--quick", "--output", str(out), "--quiet", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    for name in ("run.nc", "summary.json", "config.toml", "density_orthographic.png",
                 "density_mollweide.png", "diagnostics.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 500
    assert any(p.name.startswith("animation") for p in out.iterdir())
    assert "density_orthographic.png" in res["reading"] and len(res["figures"]) >= 3
    ds = open_dataset(out / "run.nc")
    assert {"density", "position", "w2_projection", "dist_eigenspace_V"} <= set(ds.data_vars)
    assert read_config(out / "run.nc") == demo_config(quick=True).to_dict()
    full = demo_config()  # the full demo: Paper 1's matrices, density beside particles
    assert full.dynamics.attention.K == ((0.1, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    assert full.representations.particles is not None and DEMO["grid"]["nlat"] == 24
    import spherepde.experiments.demo as demo

    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: res)
    rc = main(["demo", "--quick", "--output", str(out), "--quiet"])  # the text form
    text = capsys.readouterr().out
    assert rc == 0 and "Look at" in text and "diagnostics.png" in text


def test_demo_output_is_a_file_exit_2(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    rc = main(["demo", "--quick", "--output", str(tmp_path / "f"), "--quiet"])
    assert rc == 2 and str(tmp_path / "f") in capsys.readouterr().err
