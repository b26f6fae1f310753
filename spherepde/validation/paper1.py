"""Paper 1 experiments (Alcalde–Bungert–Riedl–Roith 2026): the two-phase picture as densities.

``metastability``: W₂(ρ^β_t, Π_#ρ_0) against t for several β on S², the minimum over t and
the exit time from the metastable state against β, fitted against sqrt(log β / β) and log β.

Set-up (and why).  Q = I, K = B = diag(1/4, 1, 1), V = diag(1, 0.9, 0.1), so
A = VBᵀ = diag(1/4, 0.9, 0.1): symmetric (Assumption 1), top eigenvector e = e_y with a large
spectral gap γ = 0.65 (fast early phase, rate c ≈ γ/‖B‖ = 0.65), while V's own top eigenvector
is e_x — so the terminal phase (mass leaving Π_#ρ_0 towards ±e_x, Conjecture 1) is visible too.
ρ_0 ∝ 1 + ½⟨x, a⟩ with a = (0.6, 0.5, 0.3)/|·| is smooth, strictly positive and not symmetric
under y → −y, so Π_#ρ_0 = a δ_e + (1 − a) δ_{−e} has unequal weights.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.solvers.trackers import MemoryTracker, NetCDFTracker, ProgressTracker
from spherepde.validation.metrics import (
    as_measure,
    dist_to_subspace,
    top_eigenspace,
    two_point_weight,
    w2_two_point,
)
from spherepde.validation.transport_runs import fit_order


@dataclass(frozen=True)
class MetastabilityConfig:
    """Parameters of ``spherepde experiment metastability`` (β = math.inf allowed)."""

    nlat: int = 64
    betas: tuple = (10.0, 30.0, 100.0, 300.0, math.inf)
    t_end: float = 16.0
    n_outputs: int = 64
    courant: float = 0.8
    Q: tuple = ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    K: tuple = ((0.25, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    V: tuple = ((1.0, 0, 0), (0, 0.9, 0), (0, 0, 0.1))
    init_a: tuple = (0.6, 0.5, 0.3)
    band: float = 2.0  # exit when W₂ exceeds band × its minimum, after the minimum

    @classmethod
    def quick(cls) -> "MetastabilityConfig":
        return cls(nlat=24, betas=(10.0, 30.0, 100.0, math.inf), t_end=10.0, n_outputs=40)

    def to_dict(self) -> dict:
        return {"experiment": "metastability", **asdict(self)}


def initial_density(grid: GaussGrid, a) -> np.ndarray:
    """Cell averages of ρ_0 ∝ 1 + ½⟨x, â⟩, normalised to mass 1."""
    a = np.asarray(a, float)
    a = a / np.linalg.norm(a)
    rho = grid.cell_average(lambda x: 1.0 + 0.5 * (x @ a))
    return rho / grid.integrate(rho)


def exit_time(t: np.ndarray, w: np.ndarray, band: float) -> float:
    """First time after the minimum of w(t) at which w exceeds band × min (nan if never)."""
    i = int(np.argmin(w))
    above = np.nonzero(w[i:] > band * w[i])[0]
    if above.size == 0:
        return float("nan")
    j = i + above[0]  # linear interpolation of the crossing
    t0, t1, w0, w1 = t[j - 1], t[j], w[j - 1], w[j]
    return float(t0 + (band * w[i] - w0) * (t1 - t0) / (w1 - w0))


def run_metastability(config: MetastabilityConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    """Run every β, write one NetCDF per β, a PNG and ``summary.json``; return the summary."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    grid = GaussGrid(config.nlat)
    Q, K, V = (np.asarray(m, float) for m in (config.Q, config.K, config.V))
    rho0 = initial_density(grid, config.init_a)
    x, w0 = as_measure(grid, rho0)
    A = V @ (Q.T @ K).T
    EA = top_eigenspace(A)
    EV = top_eigenspace(V, by_magnitude=True)
    if EA.dim != 1:
        raise ValueError("this experiment needs a one-dimensional top eigenspace of VBᵀ")
    e = EA.basis[:, 0]
    a = two_point_weight(x, w0, e)
    times = np.linspace(0.0, config.t_end, config.n_outputs + 1)
    rows = []
    t_start = time.perf_counter()
    for beta in config.betas:
        att = Attention(Q, K, V, beta)
        stepper = make_stepper("meanfield-ffsl", grid, DensityAttention(att, grid), courant=config.courant)
        tag = "inf" if math.isinf(beta) else f"{beta:g}"
        nc = outdir / f"metastability_beta{tag}.nc"
        mem = MemoryTracker()
        trackers = [mem, NetCDFTracker(nc, grid, config={**config.to_dict(), "beta": beta},
                                       static={"Q": (Q, ("dim", "dim2"), {}), "K": (K, ("dim", "dim2"), {}),
                                               "V": (V, ("dim", "dim2"), {})}),
                    ProgressTracker(disable=not progress, desc=f"beta={tag}")]
        vmax = float(np.linalg.norm(V, 2))
        dt = config.courant * grid.dlon / vmax
        res = Controller(stepper, trackers, dt=dt).run(rho0, (0.0, config.t_end), output_times=times)
        snaps = mem.result["state"]
        w2 = np.array([w2_two_point(x, as_measure(grid, s)[1], e, a) for s in snaps])
        dA = np.array([dist_to_subspace(x, as_measure(grid, s)[1], EA.basis) for s in snaps])
        dV = np.array([dist_to_subspace(x, as_measure(grid, s)[1], EV.basis) for s in snaps])
        i = int(np.argmin(w2))
        rows.append({"beta": beta, "w2": w2.tolist(), "dist_E_VBt": dA.tolist(), "dist_E_V": dV.tolist(),
                     "w2_min": float(w2[i]), "t_min": float(times[i]),
                     "exit_time": exit_time(times, w2, config.band), "steps": res.n_steps,
                     "mass_error": float(grid.integrate(res.state) - 1.0),
                     "min_density": float(res.state.min()), "file": str(nc)})
    finite = [r for r in rows if math.isfinite(r["beta"])]
    summary = {"experiment": "metastability", "config": config.to_dict(), "version": __version__,
               "grid_spacing_rad": float(grid.dlon), "a": a, "e": e.tolist(),
               "spectral_gap": EA.gap, "times": times.tolist(), "runs": rows,
               "seconds": round(time.perf_counter() - t_start, 1)}
    if len(finite) >= 3:
        b = np.array([r["beta"] for r in finite])
        slope, se = fit_order(np.sqrt(np.log(b) / b), [r["w2_min"] for r in finite])
        summary["fit_w2min_vs_sqrt_logb_over_b"] = {"exponent": slope, "stderr": se,
                                                    "note": "w2_min ∝ (sqrt(log β/β))^exponent; theory: exponent 1"}
        ex = np.array([r["exit_time"] for r in finite])
        ok = np.isfinite(ex)
        if ok.sum() >= 3:
            X = np.vstack([np.log(b[ok]), np.ones(ok.sum())]).T
            coef, *_ = np.linalg.lstsq(X, ex[ok], rcond=None)
            resid = ex[ok] - X @ coef
            s2 = float(resid @ resid / max(ok.sum() - 2, 1))
            se_slope = math.sqrt(s2 / np.sum((np.log(b[ok]) - np.log(b[ok]).mean()) ** 2))
            summary["fit_exit_time_vs_log_beta"] = {"slope": float(coef[0]), "intercept": float(coef[1]),
                                                    "stderr_slope": se_slope}
    summary["plot"] = str(plot_metastability(summary, outdir / "metastability.png"))
    (outdir / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    return summary


def plot_metastability(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(summary["times"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for r in summary["runs"]:
        lab = "β = ∞" if not math.isfinite(r["beta"]) else f"β = {r['beta']:g}"
        axes[0].semilogy(t, r["w2"], label=lab)
        axes[1].plot(t, r["dist_E_VBt"], label=f"{lab}: E(VBᵀ)")
        axes[1].plot(t, r["dist_E_V"], "--", color=axes[1].lines[-1].get_color())
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("W₂(ρ_t, Π#ρ₀)  (chordal)")
    axes[0].set_title("metastability: distance to the projected initial measure")
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("t")
    axes[1].set_ylabel("dist_E (solid: top eigenspace of VBᵀ, dashed: of V)")
    axes[1].set_title("eigenspace distances")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
