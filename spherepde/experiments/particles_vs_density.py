"""Paper 1, ``spherepde experiment particles-vs-density``: N-particle runs against the density
run of the metastability set-up, harmonic-moment and W₂ errors against N with fitted rates.

The runs are ``spherepde run`` configurations from one base (:func:`base_config`, the density
and N particles on the same matrices at the same step), split into two sweeps
(:func:`sweep_configs`, :func:`~spherepde.runs.sweep.run_sweep`, members on dask): the
density alone over β into ``DIR/runs/density/sweep.nc``, and the particles alone over β ×
``representations.particles.n`` × ``representations.particles.seed`` into
``DIR/runs/particles/members/*/run.nc`` (the positions; ``DIR/runs/particles/sweep.nc`` lists
them).  In a run the particles do not depend on the density (independent representations of
the same model from the same ρ_0), so each density is stepped once per β instead of once per
(N, seed); the errors are computed from those files.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spherepde.experiments.metastability import MetastabilityConfig, setup_run_config
from spherepde.experiments.study import study
from spherepde.validation.fits import fit_order
from spherepde.validation.metrics import as_measure

#: the swept key paths of the runs, and their dimension names in sweep.nc
BETA, N, SEED = "dynamics.attention.beta", "representations.particles.n", "representations.particles.seed"


@dataclass(frozen=True)
class ParticlesVsDensityConfig(MetastabilityConfig):
    """``spherepde experiment particles-vs-density``: the metastability set-up run once as a
    density (the reference, on ``nlat``) and as N particles sampled from the same initial
    density (``seeds`` independent draws per N), all to ``t_end``.

    The runs are ``spherepde run`` configurations (:func:`sweep_configs`): the density once
    per β, and the particles alone once per (β, N, seed); both take the same steps, dt =
    min(``particle_dt``, ``courant``·Δx/‖V‖₂), split evenly over the ``n_outputs`` output
    intervals.  The members of the two sweeps run on ``workers`` dask processes (0: in this
    process).

    Errors at t_end, averaged over seeds: the harmonic-moment error
    (Σ_{l ≤ lmax_moments} Σ_m |μ̂^N_lm − ρ̂_lm|²)^{1/2}, with ρ̂ the moments of the density, and
    the W₂ distance (chordal cost) between the particles and the density's cell masses: exact
    EMD up to 10⁸ cost entries, above that :func:`~spherepde.validation.metrics.w2_with_bound`
    (the bound is reported as ``w2_error_bound``).  Rates are fitted in log N.  The particles
    use :class:`~spherepde.solvers.lagrangian.ParticleODE`'s "auto" attention, which runs on a GPU
    when one is present (``--particle-counts`` can then go to the configuration tree's limit,
    10⁵).  Particles resolve the attention kernel only while the
    mean spacing sqrt(4π/N) is below its width β^{−1/2}; the ratio is reported for every (N, β).
    """

    nlat: int = 48
    density_scheme: str = "ffsl-ppm"
    betas: tuple = (10.0, 100.0)
    t_end: float = 4.0
    n_outputs: int = 4
    particle_counts: tuple = (100, 300, 1000, 3000)
    seeds: tuple = (0, 1, 2)
    lmax_moments: int = 4
    particle_dt: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("particle_counts", "seeds"):
            v = getattr(self, name)
            if not isinstance(v, (tuple, list)) or not v or len(set(v)) != len(v):
                raise ValueError(f"{name} must be a non-empty list of distinct values, got {v!r}")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds must be integers >= 0, got {self.seeds!r}")
        if not (isinstance(self.particle_dt, (int, float)) and 0 < self.particle_dt <= self.t_end):
            raise ValueError(f"particle_dt must be a number in (0, t_end = {self.t_end:g}], "
                             f"got {self.particle_dt!r}")

    @classmethod
    def quick(cls) -> "ParticlesVsDensityConfig":
        return cls(nlat=16, betas=(10.0,), t_end=2.0, particle_counts=(100, 300, 1000), seeds=(0, 1))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "experiment": "particles-vs-density"}

    @property
    def dt(self) -> float:
        """The step of the runs: min(particle_dt, courant·Δx/‖V‖₂), Δx = π/nlat."""
        vnorm = float(np.linalg.norm(np.asarray(self.V, float), 2))
        courant_dt = self.courant * math.pi / self.nlat / vnorm if vnorm > 0 else math.inf
        return float(min(self.particle_dt, courant_dt))


def base_config(config: ParticlesVsDensityConfig) -> dict:
    """The ``spherepde run`` configuration both sweeps derive from: the metastability set-up
    (:func:`~spherepde.experiments.metastability.setup_run_config`) at the first β, with the
    first N particles (first seed) beside the density, at the step
    :attr:`ParticlesVsDensityConfig.dt`."""
    raw = setup_run_config(config, config.betas[0], diagnostics=("mass", "min_density"))
    raw["representations"]["particles"] = {"n": int(config.particle_counts[0]),
                                           "seed": int(config.seeds[0])}
    raw["stepping"] = {"t_end": float(config.t_end), "dt": config.dt,
                       "output_every": config.t_end / config.n_outputs}
    return raw


def sweep_configs(config: ParticlesVsDensityConfig) -> dict:
    """The two ``spherepde sweep`` configurations of the experiment, {"density": …,
    "particles": …}, both :func:`base_config` at its fixed step dt: the density alone
    (no particles) swept over β, and the particles alone (``representations.density = false``,
    no fields nor density diagnostics) swept over β, N and the seed."""
    base = base_config(config)
    density = copy.deepcopy(base)
    del density["representations"]["particles"]
    density["sweep"] = {BETA: [float(b) for b in config.betas]}
    particles = copy.deepcopy(base)
    particles["representations"]["density"] = False
    particles["outputs"] = {**particles["outputs"], "fields": False, "diagnostics": []}
    particles["sweep"] = {BETA: [float(b) for b in config.betas],
                          N: [int(n) for n in config.particle_counts],
                          SEED: [int(s) for s in config.seeds]}
    return {"density": density, "particles": particles}


def run_particles_vs_density(config: ParticlesVsDensityConfig, outdir: str | Path, *,
                             progress: bool = False) -> dict:
    from spherepde.runs.sweep import expand, member_runs, run_sweep, select
    from spherepde.grids import GaussGrid
    from spherepde.io.netcdf import open_dataset
    from spherepde.validation import metrics

    raws = sweep_configs(config)
    for raw in raws.values():
        expand(raw)  # every member of both sweeps validated before anything is created
    with study("particles-vs-density", config, outdir) as job:
        outdir, rows = job.outdir, job.runs
        res = {part: run_sweep(raw, outdir / "runs" / part, workers=config.workers, progress=progress)
               for part, raw in raws.items()}
        ds = open_dataset(res["density"]["file"])
        densities = {m[BETA]: path for m, path in member_runs(res["density"]["file"])}
        members = {(m[BETA], m[N], m[SEED]): path for m, path in member_runs(res["particles"]["file"])}
        grid = GaussGrid(config.nlat)
        for beta in config.betas:
            x, w_end = as_measure(grid, select(ds, "density", {BETA: beta})[-1])
            ref = metrics.harmonic_moments(x, w_end, config.lmax_moments)
            per_n = []
            for n in config.particle_counts:
                errs, dists, bounds, files = [], [], [], []
                for seed in config.seeds:
                    path = members[(beta, n, seed)]
                    xe = open_dataset(path)["position"].values[-1]
                    wn = np.full(n, 1.0 / n)
                    errs.append(float(np.linalg.norm(metrics.harmonic_moments(xe, wn, config.lmax_moments) - ref)))
                    est = metrics.w2_with_bound(xe, wn, x, w_end)
                    dists.append(est.value)
                    bounds.append(est.error_bound)
                    files.append(str(path))
                spacing = math.sqrt(4 * math.pi / n)
                per_n.append({"N": n, "moment_error": float(np.mean(errs)), "moment_error_std": float(np.std(errs)),
                              "w2": float(np.mean(dists)), "w2_std": float(np.std(dists)),
                              "w2_error_bound": float(max(bounds)),
                              "spacing_over_kernel_width": (spacing * math.sqrt(beta) if math.isfinite(beta)
                                                            else math.inf),
                              "files": files})
            ns = [p["N"] for p in per_n]
            rate_m, se_m = fit_order(ns, [p["moment_error"] for p in per_n])
            rate_w, se_w = fit_order(ns, [p["w2"] for p in per_n])
            mass = select(ds, "mass", {BETA: beta})
            rows.append({"beta": beta, "density_file": str(densities[beta]),
                         "density_mass_error": float(mass[-1] - 1.0),
                         "particles": per_n,
                         "rate_moment_error": {"exponent": rate_m, "stderr": se_m, "theory": -0.5},
                         "rate_w2": {"exponent": rate_w, "stderr": se_w,
                                     "note": "W2 of N samples of a smooth density on S² decays like "
                                             "N^(-1/2)·log-factors"}})
        summary = {**job.header,
                   "grid_spacing_rad": float(grid.dlon),
                   "density_sweep_file": res["density"]["file"],
                   "particle_sweep_file": res["particles"]["file"], "dt": config.dt,
                   "runs": rows}
        return job.finish(summary, lambda summ: plot_particles_vs_density(summ, outdir / "particles_vs_density.png"))


def plot_particles_vs_density(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for r in summary["runs"]:
        n = [p["N"] for p in r["particles"]]
        lab = f"β = {r['beta']:g}"
        axes[0].errorbar(n, [p["moment_error"] for p in r["particles"]],
                         yerr=[p["moment_error_std"] for p in r["particles"]], marker="o", label=lab)
        axes[1].errorbar(n, [p["w2"] for p in r["particles"]], yerr=[p["w2_std"] for p in r["particles"]],
                         marker="o", label=lab)
    for ax, name in zip(axes, ("harmonic-moment error (l ≤ lmax)", "W₂(particles, density)")):
        nn = np.array([p["N"] for p in summary["runs"][0]["particles"]], float)
        ax.loglog(nn, ax.get_lines()[0].get_ydata()[0] * (nn / nn[0]) ** -0.5, "k:", label="N^-1/2")
        ax.set_xlabel("N particles")
        ax.set_ylabel(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path



__all__ = ["ParticlesVsDensityConfig", "base_config", "plot_particles_vs_density", "run_particles_vs_density",
           "sweep_configs"]
