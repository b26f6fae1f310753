"""Run every example (and the scheme sweep) at full size and write the numbers docs quote.

    python3 scripts/docs_examples.py                 # writes docs/data/examples.json (≈ 15 min)
    python3 scripts/docs_examples.py --only synchronization_d5 --out F.json
    python3 scripts/docs_numbers.py                  # then re-render the docs from the data

Each example runs through the command line (`spherepde run EX --json`) in a temporary folder, so
its wall time is a user's; the numbers are read back from its run.nc. The file records the
machine (CPU model, cores), the package and git versions and the date of the last run, and per
entry its command, wall time and the load average when it started. docs/usage.md and the
README quote these numbers through `<!-- numbers: … -->` blocks (scripts/docs_numbers.py), and
tests/test_docs_numbers.py holds the docs to this file.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.io.series import RATE_FIT_FROM  # noqa: E402
from spherepde.io.runfile import swept_values  # noqa: E402
from spherepde.io.summary import jsonable  # noqa: E402
from spherepde.noise.kernel import synchronisation_rate  # noqa: E402
from spherepde.runs.config import read_raw  # noqa: E402
from spherepde.validation.fits import log_rate  # noqa: E402

EXAMPLES = ["metastability", "circle_clusters", "particles_vs_density", "terminal_phase",
            "spde_attention_noise", "synchronization_points", "synchronization_d5",
            "transformer_vs_sde"]
EXTRA = ["demo", "d5_realisations", "schemes"]


def _cli(args: list[str]) -> tuple[dict, dict]:
    """Run ``python -m spherepde ARGS --json``: (its record — the command with the output folder
    written DIR, wall seconds, the load average at the start —, the JSON it printed)."""
    shown = ["DIR" if i and args[i - 1] == "--output" else a for i, a in enumerate(args) if a != "--quiet"]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "spherepde", *args, "--json"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    record = {"command": "python3 -m spherepde " + " ".join(shown),
              "seconds": round(time.perf_counter() - t0, 1), "load_average": round(load, 2)}
    return record, json.loads(out)


def _at(ds, name: str, t: float) -> float:
    return float(ds[name].sel(time=t, method="nearest"))


def _example_numbers(name: str, ds: xr.Dataset) -> dict:
    """The quoted numbers of one example, from its run.nc."""
    if name == "metastability":
        w2 = ds["w2_projection"]
        k = int(np.nanargmin(w2.values))
        return {"w2_projection_min": float(w2.values[k]), "t_min": float(ds["time"].values[k])}
    if name == "terminal_phase":
        d = ds["dist_eigenspace_V"].values
        return {"dist_eigenspace_V_first": float(d[0]), "dist_eigenspace_V_last": float(d[-1])}
    if name == "synchronization_points":
        e = ds["energy"].values
        return {"energy_ratio_first_over_last": float(e[0] / e[-1]), "t_end": float(ds["time"].values[-1]),
                "w2_particles_density_last": float(ds["w2_particles_density"].values[-1])}
    if name == "synchronization_d5":
        t, e = ds["time"].values, ds["particles_energy"].values
        fit = t >= RATE_FIT_FROM * t[-1]
        rate, se = log_rate(t[fit], e[fit])
        raw = read_raw(ROOT / "examples" / "synchronization_d5.toml")
        return {"energy_first": float(e[0]), "energy_last": float(e[-1]), "t_end": float(t[-1]),
                "rate": rate, "rate_se": se, "fit_from": float(t[fit][0]),
                "two_lambda_1": float(synchronisation_rate(raw))}
    return {}


def run_examples(names: list[str], work: Path) -> dict:
    out = {}
    for name in names:
        folder = work / name
        args = ["run", f"examples/{name}.toml", "--output", str(folder), "--quiet"]
        record, _ = _cli(args)
        with xr.open_dataset(folder / "run.nc") as ds:
            numbers = _example_numbers(name, ds)
        out[name] = {**record, **numbers}
        print(f"{name}: {record['seconds']} s {numbers}", flush=True)
    return out


def demo(work: Path) -> dict:
    """`spherepde demo`: its wall time and the numbers its reading quotes (experiments.demo.numbers);
    its PNGs are copied to docs/figures/demo_*.png, the README's pictures."""
    from spherepde.experiments.demo import numbers

    args = ["demo", "--output", str(work / "demo"), "--quiet"]
    record, res = _cli(args)
    pngs = [Path(p) for p in res["figures"] if p.endswith(".png")]  # not the animation
    for png in pngs:  # the README's pictures come from this very run
        shutil.copyfile(png, ROOT / "docs" / "figures" / f"demo_{png.name}")
    return {**record, "figures": [f"docs/figures/demo_{p.name}" for p in pngs], **numbers(res["file"])}


def d5_realisations(work: Path, n_real: int = 16, tokens: int = 16) -> dict:
    """The d = 5 example shrunk to ``tokens`` tokens over ``n_real`` realisations (as the slow
    test tests/runs/test_gridless.py does): mean of the per-path rates ± its standard error."""
    from spherepde.runs.config import apply_set
    from spherepde.runs.sweep import run_sweep

    raw = read_raw(ROOT / "examples" / "synchronization_d5.toml")
    raw = apply_set(apply_set(raw, f"representations.particles.n={tokens}"), "stepping.output_every=0.2")
    raw["sweep"] = {"dynamics.noise.realisation": list(range(n_real))}
    s = run_sweep(raw, work / "d5_realisations", workers=0, progress=False)
    with xr.open_dataset(s["file"]) as ds:
        t, e = ds["time"].values, ds["particles_energy"].values
    fit = t >= RATE_FIT_FROM * t[-1]
    rates = np.array([log_rate(t[fit], ei[fit])[0] for ei in e])
    return {"realisations": n_real, "tokens": tokens, "rate_mean": float(rates.mean()),
            "rate_se": float(rates.std(ddof=1) / math.sqrt(rates.size))}


def scheme_sweep(work: Path, workers: int = 2) -> dict:
    """`examples/sweeps/synchronization_schemes.toml`: E_β and W₂(particles, density) at t = 1, 2,
    4, 6 for both density schemes, and the particles' E_β on the same path."""
    folder = work / "schemes"
    args = ["sweep", "examples/sweeps/synchronization_schemes.toml", "--workers", str(workers),
            "--output", str(folder), "--quiet"]
    record, res = _cli(args)
    times = [1.0, 2.0, 4.0, 6.0]
    table: dict = {"times": times}
    with xr.open_dataset(res["file"]) as ds:
        dim = "representations__density__scheme"
        for i, scheme in enumerate(swept_values(ds, dim)):
            m = ds.isel({dim: i})
            table[scheme] = {"energy": [_at(m, "energy", t) for t in times],
                             "w2_particles_density": [_at(m, "w2_particles_density", t) for t in times]}
        # the particles do not depend on the density scheme: sweep.nc stores them once
        table["particles_energy"] = [_at(ds, "particles_energy", t) for t in times]
    return {**record, **table}


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    import spherepde
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "spherepde": spherepde.__version__, "git_commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "data" / "examples.json"))
    p.add_argument("--only", nargs="*", choices=EXAMPLES + EXTRA,
                   help="measure only these (the others are kept from --out when it exists)")
    a = p.parse_args(argv)
    out_path = Path(a.out)
    data = json.loads(out_path.read_text()) if out_path.exists() else {}
    todo = a.only or EXAMPLES + EXTRA
    data["machine"] = machine()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data.setdefault("examples", {}).update(run_examples([n for n in todo if n in EXAMPLES], work))
        if "demo" in todo:
            data["demo"] = demo(work)
        if "d5_realisations" in todo:
            data["d5_realisations"] = d5_realisations(work)
        if "schemes" in todo:
            data["schemes"] = scheme_sweep(work)
    data["script"] = "scripts/docs_examples.py"
    out_path.write_text(json.dumps(jsonable(data), indent=1) + "\n")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
