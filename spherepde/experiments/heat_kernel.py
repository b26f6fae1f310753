"""Paper 2 (Agazzi–Bruno–Mosig García–Saviozzi–Romito 2026, common MLP noise), ``spherepde experiment
heat-kernel``.

Without drift, E[ρ_t] solves ∂_t E ρ = (κ(1)/2) Δ_S E ρ, so each harmonic
degree l of the mean decays like exp(−κ(1) l(l+1) t/2) on S² (k² on S¹).  Ensembles of
antithetic pairs of SPDE paths on a dask cluster; per degree the measured rate with its
standard error against the prediction (κ of the truncated field).  The explicit Itô step of
the Stratonovich form is shown to fail: its mean does not decay at all (the step is linear in
the increment) and a single path blows up.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde.experiments.study import study
from spherepde.io.plots import _plt


def _degree_ratios(ds, grid: str, degrees: int, antithetic: bool) -> tuple[np.ndarray, np.ndarray]:
    """r_l(t) = Σ_m c_m Re(conj(q_lm(0)) q_lm(t)) / Σ_m c_m |q_lm(0)|² per realisation (pairs
    averaged when antithetic), degrees l = 1..degrees, from a sweep.nc over the realisations
    (``moment_re/moment_im(realisation, time, moment)``); returns (samples (R', T, L), times)."""
    q = (ds["moment_re"].transpose("realisation", "time", "moment").values
         + 1j * ds["moment_im"].transpose("realisation", "time", "moment").values)
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


def run_config(config: HeatKernelConfig, grid: str) -> dict:
    """The ``spherepde run`` configuration of one path of the noise-only SPDE on ``grid``
    ("sphere" or "circle"): antithetic pairs, mass and harmonic moments of degree ≤ degrees."""
    sphere = grid == "sphere"
    t_end = config.t_end_sphere if sphere else config.t_end_circle
    return {"grid": {"kind": "sphere", "nlat": config.nlat} if sphere else
            {"kind": "circle", "n": config.n_circle},
            "initial": {"kind": "vmf", "centres": [[0.48, 0.6, 0.64] if sphere else [0.6, 0.8]],
                        "kappas": [config.concentration]},
            "dynamics": {"noise": {"activation": config.activation, "sigma_u": config.sigma_u,
                                   "sigma_w": config.sigma_w,
                                   "variance_fraction": config.variance_fraction,
                                   "seed": config.seed, "antithetic": True}},
            "representations": {"density": True},
            "stepping": {"t_end": t_end, "dt": config.dt, "output_every": t_end / config.n_outputs},
            "outputs": {"fields": False, "diagnostics": ["mass", "moments"],
                        "moments_lmax": config.degrees}}


def _heat_grid(config: HeatKernelConfig, grid: str, outdir: Path, progress: bool) -> dict:
    """The ensemble of 2·pairs paths on ``grid`` (``DIR/heat_GRID/sweep.nc``) and the decay
    rate of each degree of its mean against κ λ_l / 2."""
    from spherepde.runs.ensemble import run_ensemble
    from spherepde.runs.build import build
    from spherepde.runs.config import RunConfig
    from spherepde.io.netcdf import open_dataset

    sphere = grid == "sphere"
    raw = run_config(config, grid)
    pairs = config.pairs_sphere if sphere else config.pairs_circle
    res = run_ensemble(raw, 2 * pairs, outdir / f"heat_{grid}", workers=config.workers,
                       progress=progress)
    path = Path(res["file"])
    kappa = build(RunConfig.from_dict(raw)).noise_field.variance
    ds = open_dataset(path)
    try:
        r, t = _degree_ratios(ds, grid, config.degrees, antithetic=True)
        n_realisations = int(ds.sizes["realisation"])
    finally:
        ds.close()
    mean, se = r.mean(0), r.std(0, ddof=1) / math.sqrt(r.shape[0])
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
            "n_realisations": n_realisations, "seconds": round(res["seconds"], 1),
            "times": t.tolist(), "degrees": rows}


def _ito_check(config: HeatKernelConfig) -> dict:
    """One step on S¹: (E[ρ̂_1(Δt)]/ρ̂_1(0) − 1)/Δt for Itô-Euler (exactly 0 over antithetic
    pairs) and Stratonovich (→ −κ/2); and a single Itô path over ``ito_steps`` steps: max |ρ|
    relative to the start (None once it overflowed) and the minimum (negative: not positive).

    A demonstration of a wrong scheme, so it steps ``SPDEFFSL`` by hand on purpose: the run loop
    (Controller) stops at the first non-finite state, and the overflow is what this records."""
    from spherepde.runs.config import RunConfig
    from spherepde.runs.build import build
    from spherepde.grids import CircleGrid
    from spherepde.noise import BrownianPath
    from spherepde.solvers.eulerian.spde import SPDEFFSL

    raw = run_config(config, "circle")
    raw["initial"] = {"kind": "vmf", "centres": [[0.6, 0.8]], "kappas": [2.0]}
    t_end = config.ito_dt * config.ito_steps
    raw["stepping"] = {"t_end": t_end, "dt": config.ito_dt, "output_every": t_end}
    model = build(RunConfig.from_dict(raw))  # the grid, ρ_0 and noise field of that run
    grid, noise, rho0 = model.grid, model.noise_field, model.rho0
    assert isinstance(grid, CircleGrid) and rho0 is not None  # a density on S¹
    c0 = np.sum(rho0 * np.exp(-1j * grid.theta))
    out: dict[str, object] = {}
    for scheme in ("ito-euler", "stratonovich"):
        vals: list[float] = []
        for j in range(config.ito_pairs):
            pair = []
            for anti in (False, True):
                path = BrownianPath(noise.shape, seed=config.seed + 1, realisation=j, antithetic=anti)
                rho = SPDEFFSL(grid, noise=noise, path=path, scheme=scheme).step(rho0, 0.0, config.ito_dt)
                pair.append(np.real(np.sum(rho * np.exp(-1j * grid.theta)) / c0))
            vals.append((0.5 * (pair[0] + pair[1]) - 1.0) / config.ito_dt)
        v = np.array(vals)
        out[scheme] = {"decay_coefficient": float(v.mean()),
                       "stderr": float(v.std(ddof=1) / math.sqrt(v.size)),
                       "max_abs_pair_mean_deviation": float(np.max(np.abs(v)))}
    out["predicted_stratonovich"] = -noise.variance / 2
    path = BrownianPath(noise.shape, seed=config.seed + 2)
    st = SPDEFFSL(grid, noise=noise, path=path, scheme="ito-euler")
    growth: list[float | None] = []
    rho, low = rho0, 0.0
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
    with study("heat-kernel", config, outdir) as job:
        for g in ("circle", "sphere"):
            job.runs.append(_heat_grid(config, g, job.outdir, progress))
        summary = {**job.header, "runs": job.runs, "ito_check": _ito_check(config)}
        return job.finish(summary, lambda summ: plot_heat_kernel(summ, job.outdir / "heat_kernel.png"))


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



__all__ = ["HeatKernelConfig", "plot_heat_kernel", "run_heat_kernel"]
