"""Paper 2 (Agazzi–Bruno–Mosig García–Saviozzi–Romito 2026, common MLP noise), ``spherepde experiment
synchronization``.

Tokens driven by attention (attractive, off, repulsive) plus the common
noise.  Particles in d = 4, 5 (the exact Gaussian sampler of the field, no truncation):
E[E_β(μ_t)] against λ̄' (Thm 1.4, where λ̄ < 0), single-path E_β, the pathwise contraction rate
of two nearby tokens against the top Lyapunov exponent λ₁, and tanh without biases (an odd
field) ending in two antipodal clusters.  On S² as a density: single SPDE paths concentrate at
the pathwise rate 2λ₁ = −2κ(1) of E_β although λ̄ > 0 there.

Every run is a ``spherepde run`` configuration run as a sweep over the noise realisations: the
particles per (d, case, attention scale) (:func:`particle_run_config`, ``DIR/particles/…/``; the
tokens drawn anew for every realisation), the S² density (:func:`_density_run_config`,
``DIR/sync_density/``); the Lyapunov pairs are :class:`BenettinStepper` runs of the controller,
on the same dask cluster.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde.experiments.study import study
from spherepde.runs.sweep import local_client
from spherepde.io.plots import _plt
from spherepde.validation.fits import log_rate
from spherepde.runs.config import SCHEMES


#: the density schemes of the S² part: weighted points remapped onto a grid adapted to the mass
#: (a sweep of ``spherepde run`` configurations over the noise realisation), or the
#: finite-volume SPDE ensemble on the fixed Gauss grid


@dataclass(frozen=True)
class SynchronizationConfig:
    """``spherepde experiment synchronization`` (see the module docstring)."""

    dims: tuple = (4, 5)
    cases: tuple = (("relu", 0.0), ("relu", 0.5), ("tanh", 0.0), ("sigmoid", 0.0))
    attention_scales: tuple = (1.0, 0.0, -1.0)
    beta: float = 1.0
    n_tokens: int = 64
    realisations: int = 8
    t_end: float = 5.0
    dt: float = 0.02
    n_outputs: int = 25
    lyapunov_pairs: int = 32
    lyapunov_t: float = 12.0
    density_nlat: int = 96
    density_concentration: float = 10.0  # vMF ρ_0 of rms width ≈ 0.32 rad
    density_realisations: int = 4
    density_t_end: float = 6.0
    density_dt: float = 0.01
    density_sigma: float = 0.5
    density_scheme: str = "lagrangian-remap"  # or "ffsl-ppm" (finite volumes on the fixed grid)
    workers: int = 2  # dask worker processes; 0 runs everything in this process
    seed: int = 0

    def __post_init__(self) -> None:
        if self.density_scheme not in SCHEMES:
            raise ValueError(f"density_scheme must be one of {list(SCHEMES)}, got "
                             f"{self.density_scheme!r}")

    @classmethod
    def quick(cls) -> "SynchronizationConfig":
        return cls(dims=(4,), cases=(("relu", 0.5), ("tanh", 0.0)), attention_scales=(1.0, 0.0),
                   n_tokens=16, realisations=3, t_end=2.0, dt=0.05, n_outputs=8, lyapunov_pairs=6,
                   lyapunov_t=2.0, density_nlat=40, density_realisations=2, density_t_end=2.0,
                   density_dt=0.05)

    def to_dict(self) -> dict:
        return {"experiment": "synchronization", **asdict(self)}


def particle_run_config(config: SynchronizationConfig, d: int, activation: str, sigma: float,
                        scale: float) -> dict:
    """The ``spherepde run`` configuration of the particle study in dimension d (no grid: tokens
    on S^{d−1}, uniform, drawn anew for every realisation), with a ``[sweep]`` over the noise
    realisations 0..R−1: the exact Gaussian MLP noise (σ_U = σ_W = ``sigma``) and attention
    Q = K = I, V = ``scale``·I with β (none for scale 0), stochastic Heun to t_end, the scaled
    E_β at n_outputs + 1 times and the positions."""
    eye = np.eye(d).tolist()
    dyn = {"noise": {"activation": activation, "sigma_u": float(sigma), "sigma_w": float(sigma),
                     "seed": int(config.seed)}}
    if scale != 0:
        dyn["attention"] = {"Q": eye, "K": eye, "V": (float(scale) * np.eye(d)).tolist(),
                            "beta": float(config.beta)}
    return {"grid": {"kind": "none", "dimension": int(d)}, "initial": {"kind": "uniform"},
            "dynamics": dyn,
            "representations": {"density": False,
                                "particles": {"n": int(config.n_tokens), "seed": int(config.seed),
                                              "per_realisation": True}},
            "stepping": {"t_end": float(config.t_end), "dt": float(config.dt),
                         "output_every": float(config.t_end) / config.n_outputs},
            "outputs": {"diagnostics": ["energy"], "energy_beta": float(config.beta)},
            "sweep": {"dynamics.noise.realisation": list(range(config.realisations))}}


def _particle_sweep(config, key: tuple, outdir: Path, progress: bool, client) -> tuple:
    """Run one particle sweep into ``DIR/particles/d{d}_{activation}_{sigma}_s{scale}/``; returns
    (times, scaled E_β (R, T), final cosine matrices (R, N, N))."""
    from spherepde.runs.sweep import run_sweep
    from spherepde.io.netcdf import open_dataset
    from spherepde.solvers.lagrangian.tokens import cosine_similarity

    d, act, sigma, s = key
    folder = outdir / "particles" / f"d{d}_{act}_{sigma:g}_s{s:g}"
    res = run_sweep(particle_run_config(config, d, act, sigma, s), folder, progress=progress,
                    **({"workers": 0} if client is None else {"client": client}))
    ds = open_dataset(res["file"])
    try:
        times = ds["time"].values
        energy = ds["particles_energy"].transpose("realisation", "time").values
        final = ds["position"].transpose("realisation", "time", "particle", "dim").values[:, -1]
    finally:
        ds.close()
    return times, energy, cosine_similarity(final)


def lyapunov_exponent(kernel, t_end: float, dt: float, seed: int, delta0: float = 1e-4) -> float:
    """Top Lyapunov exponent of the noise-only flow from one pair of nearby tokens (Benettin):
    after every step the separation δ is logged and reset to δ0 along the same direction;
    the exponent is Σ log(δ/δ0) / t_end.  The n = round(t_end/dt) steps of h = t_end/n are
    those of the run loop (:class:`~spherepde.solvers.controller.Controller` driving a
    :class:`~spherepde.solvers.lagrangian.lyapunov.BenettinStepper`, whose state carries Σ log)."""
    from spherepde.solvers.controller import Controller
    from spherepde.solvers.lagrangian.lyapunov import BenettinStepper
    from spherepde.solvers.lagrangian.particles import retract
    from spherepde.solvers.lagrangian.sde import ParticleSDE

    d = int(kernel.d)
    rng = np.random.default_rng([seed, 7])
    x = rng.standard_normal(d)
    x /= np.linalg.norm(x)
    v = rng.standard_normal(d)
    v -= (v @ x) * x
    sde = ParticleSDE(kernel=kernel, seed=int(rng.integers(2**31)), method="heun")
    n = max(1, int(round(t_end / dt)))
    h = t_end / n
    stepper = BenettinStepper(sde, delta0, h)
    state = stepper.pack(x, retract(x + delta0 * v / np.linalg.norm(v)))
    res = Controller(stepper, dt=h).run(state, (0.0, t_end))
    return stepper.log_sum(res.state) / t_end


class _SerialClient:
    """The two ``dask.distributed.Client`` methods used here, run in this process (workers = 0)."""

    def submit(self, fn, *args, pure=False):
        return fn(*args)

    def gather(self, futures):
        return list(futures)

    def close(self):
        pass


def run_synchronization(config: SynchronizationConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.noise import NoiseKernel

    with study("synchronization", config, outdir) as job:
        outdir, rows = job.outdir, job.runs
        serial = config.workers == 0
        client, cluster = (_SerialClient(), _SerialClient()) if serial else local_client(config.workers)
        try:
            jobs: dict[tuple, list | tuple] = {}  # Lyapunov futures; a sweep's (times, E, cos)
            for d in config.dims:  # the Lyapunov pairs first: they run while the sweeps do
                for act, sigma in config.cases:
                    lyap = [client.submit(lyapunov_exponent, NoiseKernel(act, d=d, sigma_u=sigma, sigma_w=sigma),
                                          config.lyapunov_t, config.dt, config.seed + 1000 + p, pure=False)
                            for p in range(config.lyapunov_pairs)]
                    jobs[(d, act, sigma, "lyapunov")] = lyap
            for d in config.dims:
                for act, sigma in config.cases:
                    for s in config.attention_scales:
                        jobs[(d, act, sigma, s)] = _particle_sweep(
                            config, (d, act, sigma, s), outdir, progress, None if serial else client)
            for d in config.dims:
                for act, sigma in config.cases:
                    k = NoiseKernel(act, d=d, sigma_u=sigma, sigma_w=sigma)
                    lam = np.array(client.gather(jobs[(d, act, sigma, "lyapunov")]))
                    base = {"d": d, "activation": act, "sigma": sigma, "odd": k.odd, "kappa1": k.kappa1,
                            "lambda_1": k.lambda_1, "lambda_bar": k.lambda_bar,
                            "lambda_bar_prime": k.lambda_bar_prime(config.beta),
                            "lyapunov_measured": float(lam.mean()),
                            "lyapunov_stderr": (float(lam.std(ddof=1) / math.sqrt(lam.size)) if lam.size > 1
                                                else math.nan)}
                    for s in config.attention_scales:
                        times, e, cos = jobs[(d, act, sigma, s)]  # (T,), (R, T), (R, N, N)
                        iu = np.triu_indices(config.n_tokens, 1)
                        pairs = cos[:, iu[0], iu[1]]
                        mean_rate, mean_se = log_rate(times[1:], e.mean(0)[1:])
                        path_rates = [log_rate(times[1:], ei[1:])[0] for ei in e]
                        rows.append({**base, "attention_scale": s, "times": times.tolist(),
                                     "energy_mean": e.mean(0).tolist(), "energy_paths": e.tolist(),
                                     "rate_mean_energy": mean_rate, "rate_mean_energy_stderr": mean_se,
                                     "rate_paths_median": float(np.nanmedian(path_rates)),
                                     "final_energy_mean": float(e[:, -1].mean()),
                                     "fraction_pairs_cos_above_0.99": float(np.mean(pairs > 0.99)),
                                     "fraction_pairs_cos_below_-0.99": float(np.mean(pairs < -0.99)),
                                     "thm_1_4_applies": bool(k.lambda_bar < 0 and not k.odd and s >= 0)})
        finally:
            client.close()
            cluster.close()
        density = _sync_density(config, outdir, progress)
        summary = {**job.header, "runs": rows, "density": density}
        return job.finish(summary, lambda summ: plot_synchronization(summ, outdir / "synchronization.png"))


#: the density's E_β rate is fitted while its rms width is at most this (concentrated: E ∝ width²)
SYNC_FIT_MAX_WIDTH = 0.3


def _sync_min_nlat() -> int:
    """The smallest even nlat whose 3 cells (3·2π/(2 nlat)) are narrower than SYNC_FIT_MAX_WIDTH."""
    n = math.floor(3 * math.pi / SYNC_FIT_MAX_WIDTH) + 1
    return n + n % 2


def _density_run_config(config: SynchronizationConfig) -> dict:
    """The ``spherepde run`` configuration of one noise-only S² path
    (representations.density.scheme = ``density_scheme``), with a ``[sweep]`` over the
    realisations of the Brownian path."""
    sigma, n_out = config.density_sigma, max(6, int(round(config.density_t_end / 0.1)))
    return {"grid": {"kind": "sphere", "nlat": config.density_nlat},
            "initial": {"kind": "vmf", "centres": [[0.48, 0.6, 0.64]],
                        "kappas": [config.density_concentration]},
            "dynamics": {"noise": {"activation": "relu", "sigma_u": sigma, "sigma_w": sigma,
                                   "variance_fraction": 0.999, "seed": config.seed}},
            "representations": {"density": {"scheme": config.density_scheme}},
            "stepping": {"t_end": config.density_t_end, "dt": config.density_dt,
                         "output_every": config.density_t_end / n_out},
            "outputs": {"diagnostics": ["mass", "energy"], "energy_beta": config.beta},
            "sweep": {"dynamics.noise.realisation": list(range(config.density_realisations))}}


def _sync_density(config: SynchronizationConfig, outdir: Path, progress: bool) -> dict:
    """Noise-only density paths on S² (ReLU, σ_U = σ_W = density_sigma): pathwise rate of E_β.

    A sweep of ``spherepde run`` configurations over the realisations
    (``DIR/sync_density/sweep.nc``).  ``lagrangian-remap``: the points resolve the cluster below
    a cell, so the fit window is only bounded above; ``ffsl-ppm`` (the fixed grid): fitted while
    the width is ≥ 3 cells."""
    from spherepde.runs.config import RunConfig
    from spherepde.runs.build import build
    from spherepde.runs.sweep import run_sweep
    from spherepde.io.netcdf import open_dataset
    from spherepde.grids import GaussGrid

    raw = _density_run_config(config)
    res = run_sweep(raw, outdir / "sync_density", workers=config.workers, progress=progress)
    path = Path(res["file"])
    ds = open_dataset(path)
    try:
        e = ds["energy"].transpose("realisation", "time").values
        t = ds["time"].values
    finally:
        ds.close()
    model = build(RunConfig.from_dict({k: v for k, v in raw.items() if k != "sweep"}))
    grid, noise = model.grid, model.noise_field
    assert isinstance(grid, GaussGrid)  # the density runs on S²
    lo = 0.0 if config.density_scheme == "lagrangian-remap" else 3 * grid.dlon
    lam1 = -noise.variance  # λ₁ = ((d−3)/2)κ'(1) − ((d−1)/2)κ(1) = −κ(1) on S², truncated κ
    # fit each path where it is concentrated (rms width sqrt(2E/β) ≤ 0.3 rad, so E ∝ width²) and,
    # on the fixed grid, still resolved (width ≥ 3 cells); paths never in that window give NaN
    width = np.sqrt(np.clip(2 * e / config.beta, 0.0, None))
    hi = SYNC_FIT_MAX_WIDTH
    window = (width <= hi) & (width >= lo)
    rates, reasons = [], []
    for ei, w in zip(e, window):
        if lo >= hi:
            reason = (f"no fit: 3 grid cells ({lo:.3g} rad at nlat {config.density_nlat}) exceed the "
                      f"{hi} rad concentration bound, use density_nlat >= {_sync_min_nlat()}")
        elif w.sum() < 3:
            reason = (f"no fit: {int(w.sum())} output(s) with rms width in [{lo:.3g}, {hi}] rad, 3 needed "
                      "(the path was not concentrated and resolved for long enough)")
        else:
            reason = None
        rates.append(math.nan if reason else log_rate(t[w], ei[w])[0])
        reasons.append(reason)
    where = ("the rms width sqrt(2E/β) is at most 0.3 rad" if lo == 0.0 else
             "the rms width sqrt(2E/β) is between 3 grid cells and 0.3 rad")
    return {"file": str(path), "scheme": config.density_scheme, "nlat": config.density_nlat,
            "grid_spacing_rad": float(grid.dlon),
            "kappa_truncated": noise.variance, "lambda_1": lam1, "predicted_energy_rate": 2 * lam1,
            "energy_rate_per_path": rates, "energy_rate_reason_per_path": reasons,
            "fit_window_rad": [lo, hi], "fit_points_per_path": window.sum(1).tolist(),
            "times": t.tolist(), "energy_paths": e.tolist(),
            "final_rms_width_rad": [float(math.sqrt(max(2 * ei[-1] / config.beta, 0.0))) for ei in e],
            "note": f"E_β ≈ (β/4)∬|x−y|² once concentrated, so its pathwise rate is 2λ₁; fitted where {where}"}


def plot_synchronization(summary: dict, path: Path) -> Path:
    plt = _plt()
    rows = summary["runs"]
    keys = sorted({(r["d"], r["activation"], r["sigma"]) for r in rows})
    n = len(keys) + 1
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.6 * nrows), layout="constrained",
                             squeeze=False)
    axes = list(grid.ravel()[:n])
    for ax in grid.ravel()[n:]:  # no empty panels
        ax.remove()
    for ax, key in zip(axes, keys):
        for r in rows:
            if (r["d"], r["activation"], r["sigma"]) != key:
                continue
            t = np.asarray(r["times"])
            line, = ax.semilogy(t, r["energy_mean"], lw=2, label=f"attention ×{r['attention_scale']:g}")
            for ep in r["energy_paths"][:3]:
                ax.semilogy(t, ep, lw=0.6, alpha=0.5, color=line.get_color())
        r0 = next(r for r in rows if (r["d"], r["activation"], r["sigma"]) == key)
        tt = np.asarray(r0["times"])
        ax.semilogy(tt, r0["energy_mean"][0] * np.exp(r0["lambda_bar_prime"] * tt), "k:",
                    label=f"exp(λ̄' t), λ̄' = {r0['lambda_bar_prime']:.3g}")
        ax.set_title(f"d = {key[0]}, {key[1]}, σ = {key[2]:g}\nλ₁ = {r0['lambda_1']:.3g}, "
                     f"measured {r0['lyapunov_measured']:.3g}", fontsize=8)
        ax.set_xlabel("t")
        ax.set_ylabel("e^{−β} E_β  (thick: mean, thin: paths)", fontsize=8)
        ax.legend(fontsize=6)
    dens = summary["density"]
    t = np.asarray(dens["times"])
    for ep in dens["energy_paths"]:
        axes[-1].semilogy(t, ep, lw=1)
    e0 = dens["energy_paths"][0]
    axes[-1].semilogy(t, e0[-1] * np.exp(dens["predicted_energy_rate"] * (t - t[-1])), "k:",
                      label=f"slope 2λ₁ = {dens['predicted_energy_rate']:.3g}")
    slopes = ", ".join("no fit" if x is None or not math.isfinite(x) else f"{x:.2f}"
                       for x in dens["energy_rate_per_path"])
    lo = dens["fit_window_rad"][0]
    axes[-1].set_title(f"S² density ({dens.get('scheme', 'ffsl-ppm')}, nlat {dens['nlat']}), noise "
                       f"only, single paths\nmeasured slopes {slopes}\n(fitted where the rms width "
                       f"is {'≤' if lo == 0 else f'in [{lo:.2f},'} {dens['fit_window_rad'][1]:.2f}"
                       f"{'' if lo == 0 else ']'} rad)", fontsize=8)
    axes[-1].set_ylabel("e^{−β} E_β", fontsize=8)
    if lo > 0:  # the fixed grid's resolution bound of the fit
        axes[-1].axhline(summary["config"]["beta"] * lo ** 2 / 2, ls=":", lw=0.7, color="gray",
                         label="width = 3 grid cells")
    axes[-1].axhline(summary["config"]["beta"] * dens["fit_window_rad"][1] ** 2 / 2, ls="--", lw=0.7,
                     color="gray", label=f"width = {dens['fit_window_rad'][1]:g} rad")
    axes[-1].set_xlabel("t")
    axes[-1].legend(fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path



__all__ = ["SYNC_FIT_MAX_WIDTH", "SynchronizationConfig", "lyapunov_exponent", "plot_synchronization",
           "run_synchronization"]
