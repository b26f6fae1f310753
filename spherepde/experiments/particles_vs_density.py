"""Paper 1, ``spherepde experiment particles-vs-density``: N-particle runs against the density
run of the metastability set-up, harmonic-moment and W₂ errors against N with fitted rates.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.dynamics.attention import Attention
from spherepde.experiments.metastability import MetastabilityConfig, beta_key, sphere_runs
from spherepde.io.summary import summary_on_interrupt, write_summary
from spherepde.validation.fits import fit_order
from spherepde.validation.metrics import as_measure


@dataclass(frozen=True)
class ParticlesVsDensityConfig(MetastabilityConfig):
    """``spherepde experiment particles-vs-density``: the metastability set-up run once as a
    density (the reference, on ``nlat``) and as N particles sampled from the same initial
    density (``seeds`` independent draws per N), all to ``t_end``.

    Errors at t_end, averaged over seeds: the harmonic-moment error
    (Σ_{l ≤ lmax_moments} Σ_m |μ̂^N_lm − ρ̂_lm|²)^{1/2}, with ρ̂ the moments of the density, and
    the W₂ distance (chordal cost) between the particles and the density's cell masses: exact
    EMD up to 10⁸ cost entries, above that :func:`~spherepde.validation.metrics.w2_with_bound`
    (the bound is reported as ``w2_error_bound``).  Rates are fitted in log N.  The particles
    use :class:`~spherepde.solvers.lagrangian.ParticleODE`'s "auto" attention, which runs on a GPU
    when one is present (``--particle-counts`` can then go to 10⁵ and beyond).  Particles resolve the attention kernel only while the
    mean spacing sqrt(4π/N) is below its width β^{−1/2}; the ratio is reported for every (N, β).
    """

    betas: tuple = (10.0, 100.0)
    t_end: float = 4.0
    n_outputs: int = 4
    particle_counts: tuple = (100, 300, 1000, 3000)
    seeds: tuple = (0, 1, 2)
    lmax_moments: int = 4
    particle_dt: float = 0.05

    @classmethod
    def quick(cls) -> "ParticlesVsDensityConfig":
        return cls(nlat=16, betas=(10.0,), t_end=2.0, particle_counts=(100, 300, 1000), seeds=(0, 1))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "experiment": "particles-vs-density"}


def run_particles_vs_density(config: ParticlesVsDensityConfig, outdir: str | Path, *,
                             progress: bool = False) -> dict:
    from spherepde.grids.sampling import sample_density
    from spherepde.io.particles import write_particles_netcdf
    from spherepde.solvers.lagrangian import ParticleODE
    from spherepde.validation.metrics import harmonic_moments, w2_with_bound

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    Q, K, V = (np.asarray(m, float) for m in (config.Q, config.K, config.V))
    rows = []
    partial = {"experiment": "particles-vs-density", "config": config.to_dict(), "version": __version__, "runs": rows}
    with summary_on_interrupt(outdir, partial):
        for info, row, snaps in sphere_runs(config, outdir, "density", progress):
            grid, x = info["grid"], info["x"]
            beta = row["beta"]
            w_end = as_measure(grid, snaps[-1])[1]
            ref = harmonic_moments(x, w_end, config.lmax_moments)
            att = Attention(Q, K, V, beta)
            rho0 = snaps[0]
            per_n = []
            for n in config.particle_counts:
                errs, dists, bounds = [], [], []
                for seed in config.seeds:
                    x0 = sample_density(grid, rho0, n, seed=seed)
                    res = ParticleODE(att).run(x0, (0.0, config.t_end), dt=config.particle_dt)
                    xe = res.positions[-1]
                    errs.append(float(np.linalg.norm(harmonic_moments(xe, np.full(n, 1.0 / n), config.lmax_moments) - ref)))
                    est = w2_with_bound(xe, np.full(n, 1.0 / n), x, w_end)
                    dists.append(est.value)
                    bounds.append(est.error_bound)
                    if seed == config.seeds[0]:
                        tag = beta_key(beta)
                        write_particles_netcdf(outdir / f"particles_beta{tag}_N{n}.nc", res,
                                               config={**config.to_dict(), "beta": beta, "N": n}, seed=seed)
                spacing = math.sqrt(4 * math.pi / n)
                per_n.append({"N": n, "moment_error": float(np.mean(errs)), "moment_error_std": float(np.std(errs)),
                              "w2": float(np.mean(dists)), "w2_std": float(np.std(dists)),
                              "w2_error_bound": float(max(bounds)),
                              "spacing_over_kernel_width": spacing * math.sqrt(beta) if math.isfinite(beta) else math.inf})
            ns = [p["N"] for p in per_n]
            rate_m, se_m = fit_order(ns, [p["moment_error"] for p in per_n])
            rate_w, se_w = fit_order(ns, [p["w2"] for p in per_n])
            rows.append({"beta": beta, "density_file": row["file"], "density_mass_error": row["mass_error"],
                         "particles": per_n,
                         "rate_moment_error": {"exponent": rate_m, "stderr": se_m, "theory": -0.5},
                         "rate_w2": {"exponent": rate_w, "stderr": se_w,
                                     "note": "W2 of N samples of a smooth density on S² decays like N^(-1/2)·log-factors"}})
        summary = {"experiment": "particles-vs-density", "config": config.to_dict(), "version": __version__,
                   "grid_spacing_rad": float(info["grid"].dlon), "runs": rows,
                   "seconds": round(time.perf_counter() - t_start, 1)}
        summary["plot"] = str(plot_particles_vs_density(summary, outdir / "particles_vs_density.png"))
        summary["interrupted"] = False
        write_summary(outdir, summary)
    return summary


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
        n = np.array([p["N"] for p in summary["runs"][0]["particles"]], float)
        ax.loglog(n, ax.get_lines()[0].get_ydata()[0] * (n / n[0]) ** -0.5, "k:", label="N^-1/2")
        ax.set_xlabel("N particles")
        ax.set_ylabel(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path



__all__ = ["ParticlesVsDensityConfig", "plot_particles_vs_density", "run_particles_vs_density"]
