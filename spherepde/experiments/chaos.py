"""Paper 2 (Agazzi–Bruno–Mosig García–Saviozzi–Romito 2026, common MLP noise), ``spherepde experiment
chaos``.

The SPDE with attention drift against N particles driven by the *same* Brownian
path (Prop 1.2): harmonic-moment and W₂ errors at t_end against N with fitted rates, compared
with r_d(N); a different path as control; the grid error of the density as the floor.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.experiments.ensemble import SPDEConfig
from spherepde.io.plots import _plt
from spherepde.io.summary import finish_summary, summary_on_interrupt
from spherepde.validation.fits import fit_order


@dataclass(frozen=True)
class ChaosConfig:
    """``spherepde experiment chaos``: particles vs the SPDE path by path (Prop 1.2)."""

    nlat: int = 48
    Q: tuple = ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    K: tuple = ((0.1, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    V: tuple = ((1.0, 0, 0), (0, 0.5, 0), (0, 0, 0.1))
    beta: float = 10.0
    activation: str = "relu"
    sigma: float = 0.5
    variance_fraction: float = 0.999
    t_end: float = 2.0
    dt: float = 0.02
    particle_counts: tuple = (100, 300, 1000, 3000)
    seeds: tuple = (0, 1, 2)
    paths: tuple = (0, 1)
    lmax_moments: int = 4

    @classmethod
    def quick(cls) -> "ChaosConfig":
        return cls(nlat=16, t_end=0.5, dt=0.05, particle_counts=(100, 300, 1000), seeds=(0, 1), paths=(0,))

    def to_dict(self) -> dict:
        return {"experiment": "chaos", **asdict(self)}

    def spde(self, nlat: int | None = None) -> SPDEConfig:
        return SPDEConfig(grid="sphere", nlat=nlat or self.nlat, activation=self.activation,
                          sigma_u=self.sigma, sigma_w=self.sigma, variance_fraction=self.variance_fraction,
                          attention={"Q": self.Q, "K": self.K, "V": self.V, "beta": self.beta},
                          initial={"kind": "cosine", "direction": [0.6, 0.5, 0.3], "amplitude": 0.5},
                          t_end=self.t_end, dt=self.dt, n_outputs=1, moments_lmax=self.lmax_moments)


def run_chaos(config: ChaosConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.grids.sampling import sample_density
    from spherepde.io.particles import write_particles_netcdf
    from spherepde.solvers.lagrangian.sde import ParticleSDE
    from spherepde.experiments.ensemble import initial_density, run_realisation
    from spherepde.validation.metrics import as_measure, harmonic_moments, w2_with_bound

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    spde = config.spde()
    grid, noise, att = spde.make_grid(), spde.make_noise(), spde.make_attention()
    rho0 = initial_density(spde, grid)
    rows = []
    partial = {"experiment": "chaos", "config": config.to_dict(), "version": __version__, "runs": rows}
    with summary_on_interrupt(outdir, partial):
        for p in config.paths:
            ref = run_realisation(spde, p)
            coarse = run_realisation(config.spde(config.nlat // 2), p)
            x, w_end = as_measure(grid, ref["density"][-1])
            q_ref = harmonic_moments(x, w_end, config.lmax_moments)
            cg = config.spde(config.nlat // 2).make_grid()
            xc, wc = as_measure(cg, coarse["density"][-1])
            grid_error = float(np.linalg.norm(harmonic_moments(xc, wc, config.lmax_moments) - q_ref))
            path = spde.make_path(noise, p)
            per_n = []
            for n in config.particle_counts:
                errs, dists, bounds = [], [], []
                for seed in config.seeds:
                    x0 = sample_density(grid, rho0, n, seed=seed)
                    sde = ParticleSDE(att, noise=noise, path=path, method="heun")
                    res = sde.run(x0, (0.0, config.t_end), dt=config.dt, progress=progress)
                    xe = res.positions[-1]
                    wn = np.full(n, 1.0 / n)
                    errs.append(float(np.linalg.norm(harmonic_moments(xe, wn, config.lmax_moments) - q_ref)))
                    est = w2_with_bound(xe, wn, x, w_end)
                    dists.append(est.value)
                    bounds.append(est.error_bound)
                    if seed == config.seeds[0] and p == config.paths[0]:
                        write_particles_netcdf(outdir / f"particles_path{p}_N{n}.nc", res,
                                               config={**config.to_dict(), "N": n, "path": p}, seed=seed,
                                               attention=att)
                per_n.append({"N": n, "moment_error": float(np.mean(errs)), "moment_error_std": float(np.std(errs)),
                              "w2": float(np.mean(dists)), "w2_std": float(np.std(dists)),
                              "w2_error_bound": float(max(bounds))})
            # control: the largest N driven by a different path
            other = spde.make_path(noise, 10_000 + p)
            n = config.particle_counts[-1]
            xe = ParticleSDE(att, noise=noise, path=other, method="heun").run(
                sample_density(grid, rho0, n, seed=config.seeds[0]), (0.0, config.t_end), dt=config.dt).positions[-1]
            control = float(np.linalg.norm(harmonic_moments(xe, np.full(n, 1.0 / n), config.lmax_moments) - q_ref))
            ns = [q["N"] for q in per_n]
            rm, sm = fit_order(ns, [q["moment_error"] for q in per_n])
            rw, sw = fit_order(ns, [q["w2"] for q in per_n])
            rows.append({"path": p, "particles": per_n, "grid_error_moments_nlat_half": grid_error,
                         "control_other_path_moment_error": control,
                         "rate_moment_error": {"exponent": rm, "stderr": sm, "clt": -0.5},
                         "rate_w2": {"exponent": rw, "stderr": sw,
                                     "prop_1_2_bound": "W2² ≤ c N^(-1/2) for d = 3, i.e. W2 ≤ c N^(-1/4)"}})
        summary = {"experiment": "chaos", "config": config.to_dict(), "version": __version__,
                   "kappa_truncated": noise.variance, "nmax": noise.nmax, "runs": rows}
        return finish_summary(summary, plot_chaos, outdir / "chaos.png", t0)


def plot_chaos(summary: dict, path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for r in summary["runs"]:
        n = np.array([q["N"] for q in r["particles"]], float)
        e = [q["moment_error"] for q in r["particles"]]
        w = [q["w2"] for q in r["particles"]]
        axes[0].errorbar(n, e, yerr=[q["moment_error_std"] for q in r["particles"]], marker="o",
                         label=f"path {r['path']}: N^{r['rate_moment_error']['exponent']:.2f}")
        axes[0].axhline(r["control_other_path_moment_error"], ls="--", lw=0.8, color="gray")
        axes[0].axhline(r["grid_error_moments_nlat_half"], ls=":", lw=0.8, color="k")
        axes[1].errorbar(n, w, yerr=[q["w2_std"] for q in r["particles"]], marker="o",
                         label=f"path {r['path']}: N^{r['rate_w2']['exponent']:.2f}")
    n = np.array([q["N"] for q in summary["runs"][0]["particles"]], float)
    r0 = summary["runs"][0]["particles"][0]
    axes[0].loglog(n, r0["moment_error"] * (n / n[0]) ** -0.5, "k-", lw=0.6, label="N^-1/2")
    axes[1].loglog(n, r0["w2"] * (n / n[0]) ** -0.25, "k-", lw=0.6, label="N^-1/4 (Prop 1.2)")
    axes[0].set_title("harmonic moments, same path (dashed: other path; dotted: grid error)", fontsize=8)
    axes[1].set_title("W₂(particles, SPDE density), same path", fontsize=8)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path



__all__ = ["ChaosConfig", "plot_chaos", "run_chaos"]
