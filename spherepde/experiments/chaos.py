"""Paper 2 (Agazzi–Bruno–Mosig García–Saviozzi–Romito 2026, common MLP noise), ``spherepde experiment
chaos``.

The SPDE with attention drift against N particles driven by the *same* Brownian
path (Prop 1.2): harmonic-moment and W₂ errors at t_end against N with fitted rates, compared
with r_d(N); a different path as control; the grid error of the density as the floor.

The runs are ``spherepde run`` configurations (:func:`run_config`, :func:`sweep_configs`), three
sweeps into ``DIR/runs/NAME/`` (``sweep.nc``, ``members/*/run.nc``): the density alone over the
Brownian paths (``dynamics.noise.realisation``) at nlat and nlat/2, the particles alone over
paths × N × seed (the density is run once per path, not per N and seed), and the control (the
largest N, first seed, on path 10000 + p); the errors are computed from those files.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde.experiments.study import study
from spherepde.grids import GaussGrid
from spherepde.io.plots import _plt
from spherepde.validation.fits import fit_order


#: the swept key paths of the runs
PATH, N, SEED, NLAT = ("dynamics.noise.realisation", "representations.particles.n",
                       "representations.particles.seed", "grid.nlat")
#: the control of path p is driven by path CONTROL_OFFSET + p (another path of the same seed)
CONTROL_OFFSET = 10_000


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
    workers: int = 2  # dask worker processes for the sweeps; 0 runs them in this process

    def __post_init__(self) -> None:
        if (isinstance(self.nlat, bool) or not isinstance(self.nlat, int) or self.nlat < 8
                or self.nlat % 4):
            raise ValueError(f"nlat must be a multiple of 4, at least 8 (the grid-error floor runs on "
                             f"the even grid nlat/2), got {self.nlat!r}")
        for name, lo, hi in (("particle_counts", 1, None), ("seeds", 0, None),
                             ("paths", 0, CONTROL_OFFSET - 1)):
            v = getattr(self, name)
            if (not isinstance(v, (tuple, list)) or not v or len(set(v)) != len(v)
                    or any(isinstance(a, bool) or not isinstance(a, int) or a < lo
                           or (hi is not None and a > hi) for a in v)):
                bound = f"integers >= {lo}" + ("" if hi is None else f" and <= {hi}")
                raise ValueError(f"{name} must be a non-empty list of distinct {bound}, got {v!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {self.workers!r}")

    @classmethod
    def quick(cls) -> "ChaosConfig":
        return cls(nlat=16, t_end=0.5, dt=0.05, particle_counts=(100, 300, 1000), seeds=(0, 1), paths=(0,))

    def to_dict(self) -> dict:
        return {"experiment": "chaos", **asdict(self)}

def run_config(config: ChaosConfig) -> dict:
    """The ``spherepde run`` configuration (a raw dict for :class:`RunConfig`) of the SPDE:
    attention Q, K, V, β; the MLP noise (activation, σ_U = σ_W = sigma,
    variance_fraction, seed 0, path realisation 0 on [0, t_end]); ρ_0 ∝ 1 + ½⟨x, â⟩ on
    ``GaussGrid(nlat)``; fixed step dt to t_end, one output interval; fields and positions
    kept, no time series.  Neither density nor particles are switched on (:func:`sweep_configs`)."""
    def rows(m):
        return [[float(a) for a in r] for r in m]

    return {"grid": {"kind": "sphere", "nlat": int(config.nlat)},
            "initial": {"kind": "cosine", "direction": [0.6, 0.5, 0.3], "amplitude": 0.5},
            "dynamics": {"attention": {"Q": rows(config.Q), "K": rows(config.K), "V": rows(config.V),
                                       "beta": float(config.beta)},
                         "noise": {"activation": config.activation, "sigma_u": float(config.sigma),
                                   "sigma_w": float(config.sigma),
                                   "variance_fraction": float(config.variance_fraction),
                                   "seed": 0}},
            "representations": {"density": False},
            "stepping": {"t_end": float(config.t_end), "dt": float(config.dt),
                         "output_every": float(config.t_end)},
            "outputs": {"fields": True, "positions": True, "diagnostics": []}}


def sweep_configs(config: ChaosConfig) -> dict:
    """The three ``spherepde sweep`` configurations of the experiment, by folder name:

    * ``density``: the density alone over the paths × {nlat/2, nlat} (nlat/2: the grid-error floor);
    * ``particles``: the particles alone (they do not depend on the density) over the paths ×
      N × seed;
    * ``control``: the largest N with the first seed on the paths CONTROL_OFFSET + p."""
    paths = [int(p) for p in config.paths]
    density = run_config(config)
    density["representations"] = {"density": True}
    density["sweep"] = {PATH: paths, NLAT: [int(config.nlat) // 2, int(config.nlat)]}
    particles = run_config(config)
    particles["representations"] = {"density": False,
                                    "particles": {"n": int(config.particle_counts[0]),
                                                  "seed": int(config.seeds[0])}}
    particles["sweep"] = {PATH: paths, N: [int(n) for n in config.particle_counts],
                          SEED: [int(s) for s in config.seeds]}
    control = run_config(config)
    control["representations"] = {"density": False,
                                  "particles": {"n": int(config.particle_counts[-1]),
                                                "seed": int(config.seeds[0])}}
    control["sweep"] = {PATH: [CONTROL_OFFSET + p for p in paths]}
    return {"density": density, "particles": particles, "control": control}


def _write_particle_file(path: Path, run_nc: Path, config: ChaosConfig, n: int, p: int, seed: int,
                         att) -> None:
    """``particles_path{p}_N{n}.nc`` (the layout of :func:`write_particles_netcdf`) from the
    positions of a member's ``run.nc``."""
    import json

    from spherepde.io.netcdf import open_dataset
    from spherepde.io.particles import write_particles_netcdf
    from spherepde.solvers.lagrangian.particles import ParticleResult

    ds = open_dataset(run_nc)
    pos = ds["position"].values
    steps = json.loads((run_nc.parent / "summary.json").read_text())["particles"]
    res = ParticleResult(times=ds["time"].values, positions=pos, n_steps=steps["steps"],
                         wall_time=steps["seconds"], interrupted=False, t=float(ds["time"].values[-1]),
                         state=pos[-1], weights=np.full(n, 1.0 / n), method="heun")
    write_particles_netcdf(path, res, config={**config.to_dict(), "N": n, "path": p}, seed=seed,
                           attention=att)


def run_chaos(config: ChaosConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    """Run the sweeps of :func:`sweep_configs` into ``DIR/runs/{density,particles,control}/``
    (``sweep.nc`` and ``members/*/run.nc``) and compute the errors at t_end from those files."""
    from spherepde.runs.build import build
    from spherepde.runs.sweep import expand, member_runs, run_sweep
    from spherepde.io.netcdf import open_dataset
    from spherepde.validation.metrics import as_measure, harmonic_moments, w2_with_bound

    raws = sweep_configs(config)
    # every member of every sweep validated before anything is created, and one member built
    # (the noise's check of dt; the control's: particles only, so cheap)
    sweeps = {name: expand(raw) for name, raw in raws.items()}
    model = build(sweeps["control"].members[0].config)  # (its noise field and attention below)
    noise, att = model.noise_field, model.attention
    with study("chaos", config, outdir) as job:
        outdir, rows = job.outdir, job.runs
        files = {}
        for name, raw in raws.items():
            res = run_sweep(raw, outdir / "runs" / name, workers=config.workers, progress=progress)
            files[name] = {tuple(m.values()): path for m, path in member_runs(res["file"])}

        def final(name: str, key: tuple, variable: str) -> np.ndarray:
            return open_dataset(files[name][key])[variable].values[-1]

        grid, coarse = GaussGrid(config.nlat), GaussGrid(config.nlat // 2)
        for p in config.paths:
            x, w_end = as_measure(grid, final("density", (p, config.nlat), "density"))
            q_ref = harmonic_moments(x, w_end, config.lmax_moments)
            xc, wc = as_measure(coarse, final("density", (p, config.nlat // 2), "density"))
            grid_error = float(np.linalg.norm(harmonic_moments(xc, wc, config.lmax_moments) - q_ref))
            per_n = []
            for n in config.particle_counts:
                errs, dists, bounds = [], [], []
                for seed in config.seeds:
                    xe = final("particles", (p, n, seed), "position")
                    wn = np.full(n, 1.0 / n)
                    errs.append(float(np.linalg.norm(harmonic_moments(xe, wn, config.lmax_moments) - q_ref)))
                    est = w2_with_bound(xe, wn, x, w_end)
                    dists.append(est.value)
                    bounds.append(est.error_bound)
                    if seed == config.seeds[0] and p == config.paths[0]:
                        _write_particle_file(outdir / f"particles_path{p}_N{n}.nc",
                                             files["particles"][(p, n, seed)], config, n, p, seed, att)
                per_n.append({"N": n, "moment_error": float(np.mean(errs)), "moment_error_std": float(np.std(errs)),
                              "w2": float(np.mean(dists)), "w2_std": float(np.std(dists)),
                              "w2_error_bound": float(max(bounds))})
            # control: the largest N driven by a different path
            n = config.particle_counts[-1]
            xe = final("control", (CONTROL_OFFSET + p,), "position")
            control = float(np.linalg.norm(harmonic_moments(xe, np.full(n, 1.0 / n), config.lmax_moments) - q_ref))
            ns = [q["N"] for q in per_n]
            rm, sm = fit_order(ns, [q["moment_error"] for q in per_n])
            rw, sw = fit_order(ns, [q["w2"] for q in per_n])
            rows.append({"path": p, "particles": per_n, "grid_error_moments_nlat_half": grid_error,
                         "control_other_path_moment_error": control,
                         "rate_moment_error": {"exponent": rm, "stderr": sm, "clt": -0.5},
                         "rate_w2": {"exponent": rw, "stderr": sw,
                                     "prop_1_2_bound": "W2² ≤ c N^(-1/2) for d = 3, i.e. W2 ≤ c N^(-1/4)"}})
        summary = {**job.header,
                   "kappa_truncated": noise.variance, "nmax": noise.nmax,
                   "sweep_files": {name: str(outdir / "runs" / name / "sweep.nc") for name in raws},
                   "runs": rows}
        return job.finish(summary, lambda summ: plot_chaos(summ, outdir / "chaos.png"))


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



__all__ = ["CONTROL_OFFSET", "ChaosConfig", "plot_chaos", "run_chaos", "run_config", "sweep_configs"]
