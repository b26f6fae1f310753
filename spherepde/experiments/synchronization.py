"""Paper 2 experiments (Agazzi–Bruno–Mosig García–Saviozzi–Romito 2026): common MLP noise.

``heat-kernel``: without drift, E[ρ_t] solves ∂_t E ρ = (κ(1)/2) Δ_S E ρ, so each harmonic
degree l of the mean decays like exp(−κ(1) l(l+1) t/2) on S² (k² on S¹).  Ensembles of
antithetic pairs of SPDE paths on a dask cluster; per degree the measured rate with its
standard error against the prediction (κ of the truncated field).  The explicit Itô step of
the Stratonovich form is shown to fail: its mean does not decay at all (the step is linear in
the increment) and a single path blows up.

``synchronization``: tokens driven by attention (attractive, off, repulsive) plus the common
noise.  Particles in d = 4, 5 (the exact Gaussian sampler of the field, no truncation):
E[E_β(μ_t)] against λ̄' (Thm 1.4, where λ̄ < 0), single-path E_β, the pathwise contraction rate
of two nearby tokens against the top Lyapunov exponent λ₁, and tanh without biases (an odd
field) ending in two antipodal clusters.  On S² as a density: single SPDE paths concentrate at
the pathwise rate 2λ₁ = −2κ(1) of E_β although λ̄ > 0 there.

``chaos``: the SPDE with attention drift against N particles driven by the *same* Brownian
path (Prop 1.2): harmonic-moment and W₂ errors at t_end against N with fitted rates, compared
with r_d(N); a different path as control; the grid error of the density as the floor.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.io.plots import _plt
from spherepde.io.summary import summary_on_interrupt, write_summary
from spherepde.validation.ensemble import SPDEConfig, local_client, run_ensemble
from spherepde.validation.transport_runs import fit_order


def _finish(summary: dict, plot, png: Path, t0: float) -> dict:
    """Plot to ``png``, add the plot path and the run time, write ``summary.json`` beside it."""
    summary["plot"] = str(plot(summary, png))
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    summary["interrupted"] = False
    write_summary(png.parent, summary)
    return summary


def _degree_ratios(ds, grid: str, degrees: int, antithetic: bool) -> tuple[np.ndarray, np.ndarray]:
    """r_l(t) = Σ_m c_m Re(conj(q_lm(0)) q_lm(t)) / Σ_m c_m |q_lm(0)|² per realisation (pairs
    averaged when antithetic), degrees l = 1..degrees; returns (samples (R', T, L), times)."""
    order = np.argsort(ds["realisation"].values)
    q = (ds["moment_re"].values + 1j * ds["moment_im"].values)[order]  # (R, T, M)
    ls, ms = ds["moment_l"].values, ds["moment_m"].values
    out = np.empty(q.shape[:2] + (degrees,))
    for i, l in enumerate(range(1, degrees + 1)):
        sel = ls == l
        c = np.where(ms[sel] > 0, 2.0, 1.0) if grid == "sphere" else np.ones(sel.sum())
        q0 = q[:, :1, sel]
        out[..., i] = (np.sum(c * np.real(np.conj(q0) * q[:, :, sel]), axis=-1)
                       / np.sum(c * np.abs(q0) ** 2, axis=-1))
    if antithetic:
        out = 0.5 * (out[0::2] + out[1::2])
    return out, ds["time"].values


# ==== heat kernel ===========================================================================
@dataclass(frozen=True)
class HeatKernelConfig:
    """``spherepde experiment heat-kernel``: the law of the mean (see the module docstring)."""

    activation: str = "relu"
    sigma_u: float = 0.5
    sigma_w: float = 0.5
    variance_fraction: float = 0.999
    nlat: int = 24
    n_circle: int = 64
    pairs_sphere: int = 100
    pairs_circle: int = 200
    t_end_sphere: float = 2.0
    t_end_circle: float = 2.0
    dt: float = 0.02
    n_outputs: int = 20
    degrees: int = 3
    concentration: float = 6.0  # of the von Mises–Fisher ρ_0: degrees 1–3 all carry mass
    ito_pairs: int = 200
    ito_dt: float = 0.01
    ito_steps: int = 100
    workers: int = 2  # dask worker processes; 0 runs everything in this process
    seed: int = 0

    @classmethod
    def quick(cls) -> "HeatKernelConfig":
        return cls(nlat=16, n_circle=32, pairs_sphere=8, pairs_circle=24, t_end_sphere=1.0,
                   t_end_circle=1.0, dt=0.05, n_outputs=5, ito_pairs=20, ito_steps=30)

    def to_dict(self) -> dict:
        return {"experiment": "heat-kernel", **asdict(self)}


def _heat_grid(config: HeatKernelConfig, grid: str, outdir: Path, progress: bool) -> dict:
    sphere = grid == "sphere"
    spde = SPDEConfig(
        grid=grid, nlat=config.nlat, n=config.n_circle, activation=config.activation,
        sigma_u=config.sigma_u, sigma_w=config.sigma_w, variance_fraction=config.variance_fraction,
        initial={"kind": "vmf", "direction": [0.48, 0.6, 0.64] if sphere else [0.6, 0.8],
                 "concentration": config.concentration},
        t_end=config.t_end_sphere if sphere else config.t_end_circle, dt=config.dt,
        n_outputs=config.n_outputs, antithetic=True, store_fields=False,
        moments_lmax=config.degrees, seed=config.seed)
    pairs = config.pairs_sphere if sphere else config.pairs_circle
    path = outdir / f"heat_{grid}.nc"
    res = run_ensemble(spde, 2 * pairs, path, workers=config.workers, progress=progress)
    from spherepde.io.netcdf import open_dataset

    ds = open_dataset(path)
    r, t = _degree_ratios(ds, grid, config.degrees, antithetic=True)
    mean, se = r.mean(0), r.std(0, ddof=1) / math.sqrt(r.shape[0])
    kappa = spde.make_noise().variance
    rows = []
    for i, l in enumerate(range(1, config.degrees + 1)):
        eig = l * (l + 1) if sphere else l * l
        want = kappa * eig / 2
        # estimate at the output time nearest to where the predicted mean is e^{-1}
        j = int(np.argmin(np.abs(t[1:] - 1.0 / want))) + 1
        m, s = float(mean[j, i]), float(se[j, i])
        rate = -math.log(m) / t[j] if m > 0 else math.nan
        rate_se = s / (m * t[j]) if m > 0 else math.nan
        rows.append({"degree": l, "predicted_rate": want, "measured_rate": rate, "stderr": rate_se,
                     "z": (rate - want) / rate_se if rate_se and math.isfinite(rate) else math.nan,
                     "at_time": float(t[j]), "mean_ratio": mean[:, i].tolist(), "stderr_ratio": se[:, i].tolist()})
    return {"grid": grid, "file": str(path), "kappa_truncated": kappa, "pairs": pairs,
            "n_realisations": len(res.realisations), "seconds": round(res.wall_time, 1),
            "times": t.tolist(), "degrees": rows}


def _ito_check(config: HeatKernelConfig) -> dict:
    """One step on S¹: (E[ρ̂_1(Δt)]/ρ̂_1(0) − 1)/Δt for Itô-Euler (exactly 0 over antithetic
    pairs) and Stratonovich (→ −κ/2); and a single Itô path over ``ito_steps`` steps: max |ρ|
    relative to the start (None once it overflowed) and the minimum (negative: not positive)."""
    from spherepde.noise import BrownianPath
    from spherepde.solvers.eulerian.spde import SPDEFFSL
    from spherepde.validation.ensemble import initial_density

    spde = SPDEConfig(grid="circle", n=config.n_circle, activation=config.activation,
                      sigma_u=config.sigma_u, sigma_w=config.sigma_w,
                      variance_fraction=config.variance_fraction,
                      initial={"kind": "vmf", "direction": [0.6, 0.8], "concentration": 2.0},
                      t_end=config.ito_dt * config.ito_steps, dt=config.ito_dt)
    grid, noise = spde.make_grid(), spde.make_noise()
    rho0 = initial_density(spde, grid)
    c0 = np.sum(rho0 * np.exp(-1j * grid.theta))
    out = {}
    for scheme in ("ito-euler", "stratonovich"):
        vals = []
        for j in range(config.ito_pairs):
            pair = []
            for anti in (False, True):
                path = BrownianPath(noise.shape, seed=config.seed + 1, t1=config.ito_dt,
                                    realisation=j, antithetic=anti)
                rho = SPDEFFSL(grid, noise=noise, path=path, scheme=scheme).step(rho0, 0.0, config.ito_dt)
                pair.append(np.real(np.sum(rho * np.exp(-1j * grid.theta)) / c0))
            vals.append((0.5 * (pair[0] + pair[1]) - 1.0) / config.ito_dt)
        vals = np.array(vals)
        out[scheme] = {"decay_coefficient": float(vals.mean()),
                       "stderr": float(vals.std(ddof=1) / math.sqrt(vals.size)),
                       "max_abs_pair_mean_deviation": float(np.max(np.abs(vals)))}
    out["predicted_stratonovich"] = -noise.variance / 2
    path = BrownianPath(noise.shape, seed=config.seed + 2, t1=spde.t_end)
    st = SPDEFFSL(grid, noise=noise, path=path, scheme="ito-euler")
    rho, growth, low = rho0, [], 0.0
    with np.errstate(all="ignore"):
        for k in range(config.ito_steps):
            rho = st.step(rho, k * config.ito_dt, config.ito_dt)
            if not np.all(np.isfinite(rho)):
                growth.append(None)
                break
            growth.append(float(np.max(np.abs(rho)) / np.max(rho0)))
            low = min(low, float(np.min(rho)) / float(np.max(rho0)))
    out["ito_single_path_max_growth"] = growth
    out["ito_single_path_min_relative"] = low
    return out


def run_heat_kernel(config: HeatKernelConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs = []
    partial = {"experiment": "heat-kernel", "config": config.to_dict(), "version": __version__, "runs": runs}
    with summary_on_interrupt(outdir, partial):
        for g in ("circle", "sphere"):
            runs.append(_heat_grid(config, g, outdir, progress))
        summary = {**partial, "ito_check": _ito_check(config)}
        return _finish(summary, plot_heat_kernel, outdir / "heat_kernel.png", t0)


def plot_heat_kernel(summary: dict, path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
    for ax, run in zip(axes, summary["runs"]):
        t = np.asarray(run["times"])
        for row in run["degrees"]:
            m, s = np.asarray(row["mean_ratio"]), np.asarray(row["stderr_ratio"])
            eb = ax.errorbar(t, m, yerr=2 * s, fmt="o", ms=3, capsize=2,
                             label=f"l = {row['degree']}: {row['measured_rate']:.3f} ± {row['stderr']:.3f}")
            tt = np.linspace(0, t[-1], 100)
            ax.plot(tt, np.exp(-row["predicted_rate"] * tt), "-", color=eb[0].get_color(), alpha=0.6)
        ax.set_yscale("log")
        ax.set_ylim(1e-2, 1.5)
        name = "S²  (l(l+1))" if run["grid"] == "sphere" else "S¹  (k²)"
        ax.set_title(f"E[ρ̂_l(t)]/ρ̂_l(0) on {name}; lines: exp(−κ λ_l t/2)", fontsize=9)
        ax.set_xlabel("t")
        ax.legend(fontsize=7, title="measured rate ± se", title_fontsize=7)
    ito = summary["ito_check"]
    g = np.array([np.nan if v is None else v for v in ito["ito_single_path_max_growth"]], float)
    axes[2].semilogy(np.arange(1, g.size + 1), np.where(np.isfinite(g), g, np.nan), "o-", label="Itô–Euler path")
    axes[2].set_xlabel("steps")
    axes[2].set_ylabel("max|ρ| / max|ρ₀|")
    axes[2].set_title("Itô step of the Stratonovich form: one path\n"
                      f"mean decay coeff. Itô {ito['ito-euler']['decay_coefficient']:.2g}, "
                      f"Strat. {ito['stratonovich']['decay_coefficient']:.3f}"
                      f" ± {ito['stratonovich']['stderr']:.3f} (pred. {ito['predicted_stratonovich']:.3f})",
                      fontsize=8)
    axes[2].legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ==== synchronization =======================================================================
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
    workers: int = 2  # dask worker processes; 0 runs everything in this process
    seed: int = 0

    @classmethod
    def quick(cls) -> "SynchronizationConfig":
        return cls(dims=(4,), cases=(("relu", 0.5), ("tanh", 0.0)), attention_scales=(1.0, 0.0),
                   n_tokens=16, realisations=3, t_end=2.0, dt=0.05, n_outputs=8, lyapunov_pairs=6,
                   lyapunov_t=2.0, density_nlat=40, density_realisations=2, density_t_end=2.0,
                   density_dt=0.05)

    def to_dict(self) -> dict:
        return {"experiment": "synchronization", **asdict(self)}


def _sync_run(d, activation, sigma, scale, beta, n_tokens, t_end, dt, n_outputs, seed, r):
    """One particle realisation: (times, scaled E_β (T,), final cosine matrix (N, N))."""
    from spherepde.dynamics.attention import Attention
    from spherepde.noise import NoiseKernel
    from spherepde.solvers.lagrangian.sde import ParticleSDE
    from spherepde.solvers.lagrangian.transformer import cosine_similarity, token_interaction_energy

    rng = np.random.default_rng([seed, r, d])
    x0 = rng.standard_normal((n_tokens, d))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    kernel = NoiseKernel(activation, d=d, sigma_u=sigma, sigma_w=sigma)
    att = Attention(np.eye(d), np.eye(d), np.eye(d), beta=beta)
    sde = ParticleSDE(att, kernel=kernel, seed=int(rng.integers(2**31)), method="heun", attention_scale=scale)
    times = np.linspace(0, t_end, n_outputs + 1)
    res = sde.run(x0, (0.0, t_end), dt=dt, output_times=times)
    energy = token_interaction_energy(res.positions, beta, form="scaled")
    return times, np.asarray(energy), cosine_similarity(res.positions[-1])


def lyapunov_exponent(kernel, t_end: float, dt: float, seed: int, delta0: float = 1e-4) -> float:
    """Top Lyapunov exponent of the noise-only flow from one pair of nearby tokens (Benettin):
    after every step the separation δ is logged and reset to δ0 along the same direction;
    the exponent is Σ log(δ/δ0) / t_end."""
    from spherepde.solvers.lagrangian.particles import retract
    from spherepde.solvers.lagrangian.sde import ParticleSDE

    d = int(kernel.d)
    rng = np.random.default_rng([seed, 7])
    x = rng.standard_normal(d)
    x /= np.linalg.norm(x)
    v = rng.standard_normal(d)
    v -= (v @ x) * x
    state = np.stack([x, retract(x + delta0 * v / np.linalg.norm(v))])
    sde = ParticleSDE(kernel=kernel, seed=int(rng.integers(2**31)), method="heun")
    n = max(1, int(round(t_end / dt)))
    h = t_end / n
    total = 0.0
    for k in range(n):
        state = sde.step(state, k * h, h)
        sep = state[1] - state[0]
        dist = float(np.linalg.norm(sep))
        total += math.log(dist / delta0)
        state[1] = retract(state[0] + delta0 * sep / dist)
    return total / t_end


def log_rate(t, y) -> tuple[float, float]:
    """Slope of log y against t (least squares) over the points with y > 0, and its stderr."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    ok = y > 0
    if ok.sum() < 3:
        return math.nan, math.nan
    A = np.vstack([t[ok], np.ones(ok.sum())]).T
    coef, *_ = np.linalg.lstsq(A, np.log(y[ok]), rcond=None)
    resid = np.log(y[ok]) - A @ coef
    se = math.sqrt(float(resid @ resid) / max(ok.sum() - 2, 1) / np.sum((t[ok] - t[ok].mean()) ** 2))
    return float(coef[0]), se


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

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = []
    partial = {"experiment": "synchronization", "config": config.to_dict(), "version": __version__, "runs": rows}
    with summary_on_interrupt(outdir, partial):
        client, cluster = (_SerialClient(), _SerialClient()) if config.workers == 0 else local_client(config.workers)
        try:
            jobs = {}
            for d in config.dims:
                for act, sigma in config.cases:
                    for s in config.attention_scales:
                        for r in range(config.realisations):
                            jobs[(d, act, sigma, s, r)] = client.submit(
                                _sync_run, d, act, sigma, s, config.beta, config.n_tokens, config.t_end,
                                config.dt, config.n_outputs, config.seed, r, pure=False)
                    lyap = [client.submit(lyapunov_exponent, NoiseKernel(act, d=d, sigma_u=sigma, sigma_w=sigma),
                                          config.lyapunov_t, config.dt, config.seed + 1000 + p, pure=False)
                            for p in range(config.lyapunov_pairs)]
                    jobs[(d, act, sigma, "lyapunov")] = lyap
            for d in config.dims:
                for act, sigma in config.cases:
                    k = NoiseKernel(act, d=d, sigma_u=sigma, sigma_w=sigma)
                    lam = np.array(client.gather(jobs[(d, act, sigma, "lyapunov")]))
                    base = {"d": d, "activation": act, "sigma": sigma, "odd": k.odd, "kappa1": k.kappa1,
                            "lambda_1": k.lambda_1, "lambda_bar": k.lambda_bar,
                            "lambda_bar_prime": k.lambda_bar_prime(config.beta),
                            "lyapunov_measured": float(lam.mean()),
                            "lyapunov_stderr": float(lam.std(ddof=1) / math.sqrt(lam.size)) if lam.size > 1 else math.nan}
                    for s in config.attention_scales:
                        outs = client.gather([jobs[(d, act, sigma, s, r)] for r in range(config.realisations)])
                        times = outs[0][0]
                        e = np.array([o[1] for o in outs])  # (R, T)
                        cos = np.array([o[2] for o in outs])
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
        summary = {"experiment": "synchronization", "config": config.to_dict(), "version": __version__,
                   "runs": rows, "density": density}
        return _finish(summary, plot_synchronization, outdir / "synchronization.png", t0)


#: the density's E_β rate is fitted while its rms width is at most this (concentrated: E ∝ width²)
SYNC_FIT_MAX_WIDTH = 0.3


def _sync_min_nlat() -> int:
    """The smallest even nlat whose 3 cells (3·2π/(2 nlat)) are narrower than SYNC_FIT_MAX_WIDTH."""
    n = math.floor(3 * math.pi / SYNC_FIT_MAX_WIDTH) + 1
    return n + n % 2


def _sync_density(config: SynchronizationConfig, outdir: Path, progress: bool) -> dict:
    """Noise-only SPDE paths on S² (ReLU, σ_U = σ_W = density_sigma): pathwise rate of E_β."""
    spde = SPDEConfig(grid="sphere", nlat=config.density_nlat, sigma_u=config.density_sigma,
                      sigma_w=config.density_sigma, t_end=config.density_t_end, dt=config.density_dt,
                      n_outputs=max(6, int(round(config.density_t_end / 0.1))), store_fields=True,
                      initial={"kind": "vmf", "direction": [0.48, 0.6, 0.64],
                               "concentration": config.density_concentration},
                      energy_beta=config.beta, seed=config.seed)
    path = outdir / "sync_density.nc"
    run_ensemble(spde, config.density_realisations, path, workers=config.workers, progress=progress)
    from spherepde.io.netcdf import open_dataset

    ds = open_dataset(path)
    t = ds["time"].values
    e = ds["energy"].values[np.argsort(ds["realisation"].values)]
    noise = spde.make_noise()
    lam1 = -noise.variance  # λ₁ = ((d−3)/2)κ'(1) − ((d−1)/2)κ(1) = −κ(1) on S², truncated κ
    grid = spde.make_grid()
    # fit each path where it is concentrated (rms width sqrt(2E/β) ≤ 0.3 rad, so E ∝ width²) and
    # still resolved by the grid (width ≥ 3 cells); paths that never enter that window give NaN
    width = np.sqrt(np.clip(2 * e / config.beta, 0.0, None))
    lo, hi = 3 * grid.dlon, SYNC_FIT_MAX_WIDTH
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
    return {"file": str(path), "nlat": config.density_nlat, "grid_spacing_rad": float(grid.dlon),
            "kappa_truncated": noise.variance, "lambda_1": lam1, "predicted_energy_rate": 2 * lam1,
            "energy_rate_per_path": rates, "energy_rate_reason_per_path": reasons,
            "fit_window_rad": [lo, hi], "fit_points_per_path": window.sum(1).tolist(),
            "times": t.tolist(), "energy_paths": e.tolist(),
            "final_rms_width_rad": [float(math.sqrt(max(2 * ei[-1] / config.beta, 0.0))) for ei in e],
            "note": "E_β ≈ (β/4)∬|x−y|² once concentrated, so its pathwise rate is 2λ₁; fitted where "
                    "the rms width sqrt(2E/β) is between 3 grid cells and 0.3 rad"}


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
    axes[-1].set_title(f"S² density, noise only, single paths\nmeasured slopes {slopes}\n"
                       f"(fitted where the rms width is in [{dens['fit_window_rad'][0]:.2f}, "
                       f"{dens['fit_window_rad'][1]:.2f}] rad)", fontsize=8)
    axes[-1].set_ylabel("e^{−β} E_β", fontsize=8)
    dx = dens["grid_spacing_rad"]
    axes[-1].axhline(summary["config"]["beta"] * (3 * dx) ** 2 / 2, ls=":", lw=0.7, color="gray",
                     label="width = 3 grid cells")
    axes[-1].axhline(summary["config"]["beta"] * dens["fit_window_rad"][1] ** 2 / 2, ls="--", lw=0.7,
                     color="gray", label=f"width = {dens['fit_window_rad'][1]:g} rad")
    axes[-1].set_xlabel("t")
    axes[-1].legend(fontsize=7)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ==== propagation of chaos ==================================================================
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
    from spherepde.validation.ensemble import initial_density, run_realisation
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
        return _finish(summary, plot_chaos, outdir / "chaos.png", t0)


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


#: name → (configuration class, runner), merged into the command line's experiment list
EXPERIMENTS = {
    "heat-kernel": (HeatKernelConfig, run_heat_kernel),
    "synchronization": (SynchronizationConfig, run_synchronization),
    "chaos": (ChaosConfig, run_chaos),
}

__all__ = ["EXPERIMENTS", "ChaosConfig", "HeatKernelConfig", "SynchronizationConfig", "lyapunov_exponent"]
