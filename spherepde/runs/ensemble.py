"""Ensembles of a run configuration over the realisations of its Brownian path (``spherepde ensemble``).

An ensemble of R realisations is a sweep (:mod:`spherepde.runs.sweep`) over
``dynamics.noise.realisation`` = 0, 1, …, R − 1: member r runs the configuration
(:mod:`spherepde.runs.config`) on ``BrownianPath(seed, realisation = r)``, or with
``dynamics.noise.antithetic = true`` on the pairs (path j, −path j) for r = 2j, 2j + 1 (equal
in law; odd powers of the noise cancel in pair means; R must then be even).  Every
representation of the configuration (density, particles, transformer) runs on each path.  The
members run on a dask cluster (a LocalCluster of single-threaded processes by default, or
``scheduler``), each into ``DIR/members/member-KKKK/run.nc``, and are collected into
``DIR/sweep.nc`` with the dimension ``realisation`` in order; a re-run skips finished members.
:func:`plot_ensemble` draws one path, the mean density and every path's diagnostics with their
mean (also after an interrupt, from the members finished by then).

:data:`DEFAULT` is the embedded configuration: the noise-only Stratonovich SPDE on S² (ReLU MLP
noise with biases, σ_U = σ_W = 0.5, 99.9 % of κ(1)), ρ_0 a von Mises–Fisher density (κ = 3),
to t = 2 with Δt = 0.02, its mass, E_β and harmonic moments of degree ≤ 3, fields in float32.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from spherepde.runs.config import apply_seed
from spherepde.runs.config import key_paths
from spherepde.runs.sweep import expand, finished_run, run_sweep

#: the embedded configuration of ``spherepde ensemble`` (module docstring)
DEFAULT = {
    "grid": {"kind": "sphere", "nlat": 32},
    "initial": {"kind": "vmf", "centres": [[1.0, 0.0, 0.0]], "kappas": [3.0]},
    "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5,
                           "variance_fraction": 0.999, "seed": 0}},
    "representations": {"density": True},
    "stepping": {"t_end": 2.0, "dt": 0.02, "output_every": 0.1},
    "outputs": {"diagnostics": ["mass", "energy", "moments"], "energy_beta": 1.0,
                "moments_lmax": 3, "precision": "float32"},
}

REALISATION = "dynamics.noise.realisation"


def ensemble_config(raw: dict, realisations: int) -> dict:
    """``raw`` with ``dynamics.noise.realisation`` swept over 0..R−1 (added to its own [sweep],
    if any); ValueError naming ``--realisations`` or the key before any work."""
    if isinstance(realisations, bool) or not isinstance(realisations, int) or realisations < 1:
        raise ValueError(f"--realisations: must be an integer >= 1, got {realisations!r}")
    if not isinstance(raw, dict):
        raise ValueError(f"configuration: must be a table of keys, got {raw!r}")
    noise = raw.get("dynamics", {}).get("noise") if isinstance(raw.get("dynamics"), dict) else None
    if not isinstance(noise, dict):
        raise ValueError("dynamics.noise: an ensemble is over the realisations of the Brownian "
                         "path, and this configuration has no noise")
    if noise.get("antithetic") is True and realisations % 2:
        raise ValueError(f"--realisations: antithetic ensembles (dynamics.noise.antithetic = true) "
                         f"come in pairs (path j, −path j), so it must be even, got {realisations}")
    sweep = dict(raw.get("sweep") or {})
    if REALISATION in key_paths(sweep):
        raise ValueError(f"sweep.{REALISATION}: set by --realisations in an ensemble; remove it "
                         f"from the [sweep] table (or run `spherepde sweep`)")
    return {**raw, "sweep": {**sweep, REALISATION: list(range(realisations))}}


def run_ensemble(raw: dict, realisations: int, output: str | os.PathLike, *, workers: int = 2,
                 scheduler: str | None = None, seed: int | None = None, progress: bool = True,
                 overwrite: bool | None = None) -> dict:
    """Run the ensemble of ``raw`` (module docstring); return the sweep's summary with the
    pictures (``figures``) and ``realisations``.  Every check is done before any file exists
    (a folder of another result or configuration is refused unless ``overwrite``:
    :func:`~spherepde.runs.sweep.run_sweep`)."""
    raw = ensemble_config(raw if seed is None else apply_seed(raw, seed), realisations)
    members = expand(raw).members  # every member validated before the folder is created
    try:
        summary = run_sweep(raw, output, workers=workers, scheduler=scheduler, progress=progress,
                            overwrite=overwrite)
    except BaseException as err:
        if getattr(err, "summary", None) is not None:  # the sweep had started (else it was
            try:                                        # refused: the folder is left alone)
                _finish(members, Path(output), realisations)
            except Exception as e:  # noqa: BLE001 - the first error goes on
                err.add_note(f"spherepde: no ensemble pictures: {e}")
        raise
    figures = _finish(members, Path(output), realisations)
    return {**summary, "realisations": realisations, "figures": figures}


def _finish(members: list, outdir: Path, realisations: int) -> list:
    """The pictures of the members finished so far (also after Ctrl-C), added with
    ``realisations`` to ``summary.json``; the pictures' paths."""
    figures = _pictures(members, outdir) if outdir.is_dir() else []
    path = outdir / "summary.json"
    if path.is_file():
        written = json.loads(path.read_text())
        written.update(realisations=realisations, figures=figures)
        path.write_text(json.dumps(written, indent=2))
    return figures


def _pictures(members: list, outdir: Path) -> list:
    """:func:`plot_ensemble` of the members finished so far (only the realisation swept)."""
    done = [outdir / "members" / m.name / "run.nc" for m in members
            if list(m.values) == [REALISATION] and finished_run(m.config, outdir / "members" / m.name)]
    return plot_ensemble(done, outdir) if done else []


def plot_ensemble(runs: list, output: str | os.PathLike, *, dpi: int = 120) -> list:
    """Pictures of an ensemble from its members' ``run.nc`` files (in realisation order) into
    ``output``: ``realisation0.png`` (the first path) and ``mean.png`` (the mean density over
    the paths) as Mollweide maps on S² or the S¹ figure, where the runs hold fields, and
    ``ensemble_diagnostics.png`` (every path's diagnostics, their mean ± 2 standard errors).
    Returns the paths written."""
    from dataclasses import replace

    from spherepde.io.maps import plot_circle, plot_mollweide
    from spherepde.io.rundata import pick_times, read_run
    from spherepde.io.series import plot_ensemble_diagnostics

    output = Path(output)
    data = [read_run(p) for p in runs]
    first, figures = data[0], []
    if first.grid is not None and first.density is not None:
        draw = plot_mollweide if first.sphere else plot_circle
        times = pick_times(first)
        r0 = first.config.get("dynamics", {}).get("noise", {}).get("realisation", 0)
        figures.append(draw(replace(first, label=f"realisation {r0}: {first.label}"),
                            output / "realisation0.png", times, dpi=dpi))
        densities = []
        for d in data:
            assert d.density is not None, "every member of the ensemble has the density"
            densities.append(d.density)
        mean = np.mean(densities, axis=0)
        figures.append(draw(replace(first, density=mean, positions=None, tokens=None,
                                    label=f"mean density over {len(data)} realisations: {first.label}"),
                            output / "mean.png", times, dpi=dpi))
    diag = plot_ensemble_diagnostics(data, output / "ensemble_diagnostics.png", dpi=dpi)
    return [str(f) for f in figures + ([diag] if diag is not None else [])]


def is_ensemble_file(path: str | os.PathLike) -> bool:
    """True when the sweep.nc at ``path`` sweeps the realisation and nothing else."""
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        members = json.loads(getattr(ds, "members_json", "[]"))
    return bool(members) and all(set(m) == {"name", REALISATION} for m in members)


def plot_ensemble_file(path: str | os.PathLike, output: str | os.PathLike | None = None, *,
                       dpi: int = 120) -> dict:
    """``spherepde plot DIR/sweep.nc`` of an ensemble: :func:`plot_ensemble` of its members into
    ``output`` (default the file's folder); {"file", "figures"}."""
    from spherepde.runs.execute import prepare_output
    from spherepde.runs.sweep import member_runs

    out = prepare_output(Path(path).parent if output is None else output)
    runs = [p for _, p in member_runs(path)]
    missing = [str(p) for p in runs if not p.is_file()]
    if missing:
        raise ValueError(f"{str(path)!r}: the member files {missing} are missing (they sit in "
                         f"members/ beside sweep.nc)")
    return {"file": str(path), "figures": plot_ensemble(runs, out, dpi=dpi)}


__all__ = ["DEFAULT", "ensemble_config", "is_ensemble_file", "plot_ensemble", "plot_ensemble_file",
           "run_ensemble"]
