"""Paper 1 experiments (Alcalde–Bungert–Riedl–Roith 2026): the two-phase picture as densities.

``metastability``: W₂(ρ^β_t, Π_#ρ_0) against t for several β on S², the minimum over t and
the exit time from the metastable state against β, fitted against sqrt(log β / β) and log β.
``circle-clusters``: S¹ with Q = K = V = I from a perturbed uniform density — the number and
positions of the metastable clusters against β and t.

Set-up (and why).  Q = I, K = B = diag(1/10, 1, 1), V = diag(1, 1/2, 1/10), so
A = VBᵀ = diag(1/10, 1/2, 1/100): symmetric (Assumption 1), top eigenvector e = e_y with
spectral gap γ = 0.4 (early phase at rate c ≈ γ/‖B‖ = 0.4), while V's own top eigenvector is
e_x and e_y is a saddle of the V-flow ẋ = P_x V x with unstable rate 1 − 1/2 = 1/2.  A cluster
that has formed at ±e_y is displaced from e_y by O(1/β) at finite β, and that displacement
grows like e^{t/2}: the exit from the metastable state comes at t ~ 2 log β and the terminal
phase (mass moving to ±e_x, Conjecture 1) is visible within moderate times.
ρ_0 ∝ 1 + ½⟨x, a⟩ with a = (0.6, 0.5, 0.3)/|·| is smooth, strictly positive and not symmetric
under y → −y, so Π_#ρ_0 = a δ_e + (1 − a) δ_{−e} has unequal weights.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.io.netcdf import NetCDFTracker
from spherepde.io.summary import summary_on_interrupt, write_summary
from spherepde.solvers.trackers import MemoryTracker, ProgressTracker
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

    nlat: int = 48
    betas: tuple = (10.0, 30.0, 100.0, 300.0, math.inf)
    t_end: float = 24.0
    n_outputs: int = 96
    courant: float = 0.8
    Q: tuple = ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    K: tuple = ((0.1, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    V: tuple = ((1.0, 0, 0), (0, 0.5, 0), (0, 0, 0.1))
    init_a: tuple = (0.6, 0.5, 0.3)
    band: float = 2.0  # exit when W₂ exceeds band × its minimum, after the minimum
    #: the coarser of the two finest settings: the largest β is run again at this nlat and
    #: ``resolution_check`` reports the change of min W₂; None: the even nlat nearest ¾·nlat;
    #: 0: no check
    check_nlat: int | None = None

    def __post_init__(self) -> None:
        c = self.check_nlat
        if c is not None and c != 0 and (isinstance(c, bool) or not isinstance(c, int) or c < 4
                                         or c % 2 or c >= self.nlat):
            raise ValueError(f"check_nlat must be 0 (no check), None (¾·nlat) or an even integer in "
                             f"[4, nlat = {self.nlat}), got {c!r}")

    @classmethod
    def quick(cls) -> "MetastabilityConfig":
        return cls(nlat=16, betas=(5.0, 10.0, 20.0, math.inf), t_end=20.0, n_outputs=40)

    @property
    def resolution_nlat(self) -> int:
        """The nlat of the resolution check (0: none)."""
        if self.check_nlat is not None:
            return self.check_nlat
        c = 2 * round(0.375 * self.nlat)
        return c if 4 <= c < self.nlat else 0

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


def _eigenspace_or_none(A: np.ndarray, name: str, **kw):
    """Top eigenspace of a symmetric A; for a non-symmetric A the projection map of Paper 1 is
    undefined: warn and return None (the run goes on, the diagnostics built on it are off)."""
    try:
        return top_eigenspace(A, **kw)
    except ValueError:
        warnings.warn(f"{name} is not symmetric: Π and the eigenspace diagnostics built on it "
                      "are off (reported as NaN); the dynamics still run", stacklevel=3)
        return None


def _beta_key(beta: float) -> str:
    """β as it appears in file names and JSON keys: ``"inf"`` for ∞, else ``f"{β:g}"``."""
    return "inf" if math.isinf(beta) else f"{beta:g}"


def _sphere_runs(config, outdir: Path, prefix: str, progress: bool):
    """Run the mean-field density on S² for every β of ``config``; yield per-β results.

    Shared by the metastability and terminal-phase experiments: one NetCDF per β
    (``{prefix}_beta{β}.nc``) plus W₂ to Π_#ρ_0 and dist_E to the top eigenspaces of VBᵀ and
    of V at every output time.
    """
    grid = GaussGrid(config.nlat)
    Q, K, V = (np.asarray(m, float) for m in (config.Q, config.K, config.V))
    rho0 = initial_density(grid, config.init_a)
    x, w0 = as_measure(grid, rho0)
    EA = _eigenspace_or_none(V @ (Q.T @ K).T, "VBᵀ")
    EV = _eigenspace_or_none(V, "V", by_magnitude=True)
    if EA is not None and EA.dim != 1:
        warnings.warn("the top eigenspace of VBᵀ is not one-dimensional: W₂ to the two-point "
                      "measure Π#ρ₀ is not computed", stacklevel=2)
    two_point = EA is not None and EA.dim == 1
    e = EA.basis[:, 0] if two_point else None
    a = two_point_weight(x, w0, e) if two_point else math.nan
    times = np.linspace(0.0, config.t_end, config.n_outputs + 1)
    static = {n: (m, ("dim", "dim2"), {"long_name": f"attention matrix {n}", "units": "1"})
              for n, m in (("Q", Q), ("K", K), ("V", V))}
    dt = config.courant * grid.dlon / float(np.linalg.norm(V, 2))
    info = {"grid": grid, "e": e, "a": a, "EA": EA, "EV": EV, "times": times, "x": x}
    for beta in config.betas:
        stepper = make_stepper("meanfield-ffsl", grid, DensityAttention(Attention(Q, K, V, beta), grid),
                               courant=config.courant)
        tag = _beta_key(beta)
        nc = outdir / f"{prefix}_beta{tag}.nc"
        mem = MemoryTracker()
        trackers = [mem, NetCDFTracker(nc, grid, config={**config.to_dict(), "beta": beta}, static=static),
                    ProgressTracker(disable=not progress, desc=f"beta={tag}")]
        res = Controller(stepper, trackers, dt=dt).run(rho0, (0.0, config.t_end), output_times=times)
        snaps = mem.result["state"]
        ws = [as_measure(grid, s)[1] for s in snaps]
        row = {"beta": beta, "steps": res.n_steps, "file": str(nc),
               "w2": [w2_two_point(x, w, e, a) if two_point else math.nan for w in ws],
               "dist_E_VBt": [dist_to_subspace(x, w, EA.basis) if EA else math.nan for w in ws],
               "dist_E_V": [dist_to_subspace(x, w, EV.basis) if EV else math.nan for w in ws],
               "mass_error": float(grid.integrate(res.state) - 1.0),
               "min_density": float(res.state.min())}
        yield info, row, snaps


def fit_vs_log_beta(beta, t) -> dict | None:
    """Least squares t = slope · log β + intercept over the finite entries (≥ 3), with the
    standard error of the slope; None when fewer than three times are finite."""
    b, t = np.asarray(beta, float), np.asarray(t, float)
    ok = np.isfinite(b) & np.isfinite(t)
    if ok.sum() < 3:
        return None
    lb = np.log(b[ok])
    X = np.vstack([lb, np.ones(ok.sum())]).T
    coef, *_ = np.linalg.lstsq(X, t[ok], rcond=None)
    resid = t[ok] - X @ coef
    s2 = float(resid @ resid / max(ok.sum() - 2, 1))
    se = math.sqrt(s2 / np.sum((lb - lb.mean()) ** 2))
    return {"slope": float(coef[0]), "intercept": float(coef[1]), "stderr_slope": se}


def _w2_minimum(row: dict, times: np.ndarray, band: float) -> dict:
    """min_t W₂, the time of the minimum and the exit time of one run (NaN where W₂ is off)."""
    w2 = np.asarray(row["w2"])
    if not np.all(np.isfinite(w2)):
        return {"w2_min": math.nan, "t_min": math.nan, "exit_time": math.nan}
    i = int(np.argmin(w2))
    return {"w2_min": float(w2[i]), "t_min": float(times[i]), "exit_time": exit_time(times, w2, band)}


#: min W₂ counts as resolved when it changes by less than this between the two finest settings
RESOLVED_CHANGE = 0.05


def resolution_check(config: MetastabilityConfig, fine: dict, outdir: Path, progress: bool) -> dict | None:
    """Run the largest β again at ``config.resolution_nlat``: the change of min W₂ between the
    two finest settings, |w_fine − w_coarse| / w_fine (None when the check is off).

    ``at_end`` says, per setting, whether the minimum is the last output (W₂ still falling at
    t_end: the minimum was not reached); ``resolved`` is relative_change < RESOLVED_CHANGE with
    both minima reached.
    """
    coarse_nlat = config.resolution_nlat
    if not coarse_nlat:
        return None
    coarse_cfg = dataclasses.replace(config, nlat=coarse_nlat, betas=(fine["beta"],), check_nlat=0)
    info, row, _ = next(_sphere_runs(coarse_cfg, outdir, "metastability_check", progress))
    coarse = _w2_minimum(row, info["times"], config.band)
    w_f, w_c = fine["w2_min"], coarse["w2_min"]
    change = abs(w_f - w_c) / w_f if w_f > 0 else math.nan
    at_end = [bool(r["t_min"] >= config.t_end) for r in (coarse, fine)]
    return {"beta": fine["beta"], "nlat": [coarse_nlat, config.nlat], "w2_min": [w_c, w_f],
            "t_min": [coarse["t_min"], fine["t_min"]], "at_end": at_end,
            "relative_change": change, "resolved": bool(change < RESOLVED_CHANGE and not any(at_end)),
            "file": row["file"]}


def run_metastability(config: MetastabilityConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    """Run every β, write one NetCDF per β, a PNG and ``summary.json``; return the summary.

    The summary's ``min_w2`` maps each β ("inf" for ∞) to min_t W₂(ρ_t, Π#ρ₀), and
    ``resolution_check`` holds the same minimum for the largest β at the coarser
    ``config.resolution_nlat`` with its ``relative_change``.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rows = []
    t_start = time.perf_counter()
    partial = {"experiment": "metastability", "config": config.to_dict(), "version": __version__, "runs": rows}
    with summary_on_interrupt(outdir, partial):
        for info, row, _ in _sphere_runs(config, outdir, "metastability", progress):
            row.update(_w2_minimum(row, info["times"], config.band))
            rows.append(row)
        times = info["times"]
        largest = max(rows, key=lambda r: r["beta"])
        check = resolution_check(config, largest, outdir, progress)
        finite = [r for r in rows if math.isfinite(r["beta"])]
        summary = {"experiment": "metastability", "config": config.to_dict(), "version": __version__,
                   "grid_spacing_rad": float(info["grid"].dlon), "a": info["a"],
                   "e": None if info["e"] is None else info["e"].tolist(),
                   "spectral_gap": None if info["EA"] is None else info["EA"].gap, "times": times.tolist(), "runs": rows,
                   "min_w2": {_beta_key(r["beta"]): r["w2_min"] for r in rows}, "resolution_check": check,
                   "seconds": round(time.perf_counter() - t_start, 1)}
        if len(finite) >= 3 and all(math.isfinite(r["w2_min"]) for r in finite):
            b = np.array([r["beta"] for r in finite])
            slope, se = fit_order(np.sqrt(np.log(b) / b), [r["w2_min"] for r in finite])
            summary["fit_w2min_vs_sqrt_logb_over_b"] = {"exponent": slope, "stderr": se,
                                                        "note": "w2_min ∝ (sqrt(log β/β))^exponent; theory: exponent 1"}
            fit = fit_vs_log_beta(b, [r["exit_time"] for r in finite])
            if fit is not None:
                summary["fit_exit_time_vs_log_beta"] = fit
        summary["plot"] = str(plot_metastability(summary, outdir / "metastability.png"))
        summary["interrupted"] = False
        write_summary(outdir, summary)
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


# ---- terminal phase ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TerminalPhaseConfig(MetastabilityConfig):
    """``spherepde experiment terminal-phase``: the metastability set-up run longer.  VBᵀ's top
    eigenvector is e_y but V's is e_x, so after the metastable phase the mass moves from ±e_y
    towards ±e_x (Conjecture 1).  The switch time is the first output time at which
    dist_E(V) < dist_E(VBᵀ); maps of the density are drawn at ``map_times``."""

    betas: tuple = (10.0, 30.0, 100.0)
    t_end: float = 40.0
    n_outputs: int = 80
    map_times: tuple = (0.0, 4.0, 12.0, 24.0, 40.0)

    @classmethod
    def quick(cls) -> "TerminalPhaseConfig":
        return cls(nlat=16, betas=(5.0, 10.0, 20.0), t_end=24.0, n_outputs=24,
                   map_times=(0.0, 4.0, 12.0, 24.0))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "experiment": "terminal-phase"}


def switch_time(t, d_old, d_new) -> float:
    """First time at which d_new < d_old (linear interpolation; nan if never)."""
    diff = np.asarray(d_new) - np.asarray(d_old)
    idx = np.nonzero(diff < 0)[0]
    if idx.size == 0 or idx[0] == 0:
        return float("nan") if idx.size == 0 else float(t[0])
    j = idx[0]
    return float(t[j - 1] + diff[j - 1] * (t[j] - t[j - 1]) / (diff[j - 1] - diff[j]))


def run_terminal_phase(config: TerminalPhaseConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.io.plots import plot_snapshots

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rows = []
    t_start = time.perf_counter()
    partial = {"experiment": "terminal-phase", "config": config.to_dict(), "version": __version__, "runs": rows}
    with summary_on_interrupt(outdir, partial):
        for info, row, snaps in _sphere_runs(config, outdir, "terminal", progress):
            times = info["times"]
            row["switch_time"] = switch_time(times, row["dist_E_VBt"], row["dist_E_V"])
            pick = [int(np.argmin(np.abs(times - tm))) for tm in config.map_times if tm <= config.t_end]
            tag = _beta_key(row["beta"])
            row["maps"] = str(plot_snapshots(info["grid"], times[pick], snaps[pick],
                                             outdir / f"terminal_maps_beta{tag}.png",
                                             title=f"terminal phase, β = {tag}", log=True))
            rows.append(row)
        summary = {"experiment": "terminal-phase", "config": config.to_dict(), "version": __version__,
                   "e_VBt": None if info["EA"] is None else info["EA"].basis[:, 0].tolist(),
                   "e_V": None if info["EV"] is None else info["EV"].basis[:, 0].tolist(),
                   "times": times.tolist(), "runs": rows, "seconds": round(time.perf_counter() - t_start, 1)}
        fit = fit_vs_log_beta([r["beta"] for r in rows], [r["switch_time"] for r in rows])
        if fit is not None:
            summary["fit_switch_time_vs_log_beta"] = fit
        summary["plot"] = str(plot_metastability(summary, outdir / "terminal_phase.png"))
        summary["interrupted"] = False
        write_summary(outdir, summary)
    return summary


# ---- circle clusters --------------------------------------------------------------------------
@dataclass(frozen=True)
class CircleClustersConfig:
    """``spherepde experiment circle-clusters``: S¹ (d = 2), Q = K = V = I, from the uniform
    density plus a seeded perturbation of relative size ``eps`` in the first ``modes`` Fourier
    modes.  The grid has ``cells_per_width`` cells per kernel width β^{−1/2} (at least
    ``min_cells``), so every β is resolved."""

    betas: tuple = (3.0, 10.0, 30.0, 100.0)
    t_end: float = 30.0
    n_outputs: int = 30
    eps: float = 1e-2
    modes: int = 64
    seed: int = 0
    cells_per_width: float = 6.0
    min_cells: int = 128
    courant: float = 0.8
    peak_factor: float = 3.0  # a cluster peaks above peak_factor × the mean density
    min_mass_ratio: float = 0.2  # … and ≥ this fraction of a neighbour's mass (else merged)

    @classmethod
    def quick(cls) -> "CircleClustersConfig":
        return cls(betas=(3.0, 10.0, 30.0), t_end=20.0, n_outputs=20, cells_per_width=4.0)

    def to_dict(self) -> dict:
        return {"experiment": "circle-clusters", **asdict(self)}

    def cells(self, beta: float) -> int:
        n = int(np.ceil(self.cells_per_width * 2 * np.pi * math.sqrt(beta)))
        return max(self.min_cells, n + n % 2)


def find_clusters(theta: np.ndarray, rho: np.ndarray, factor: float,
                  min_mass_ratio: float = 0.2) -> list[dict]:
    """Clusters of a density on S¹ (cell values ``rho`` at angles ``theta``), merged by mass.

    1. Basins: the circle is cut at the local minima of ``rho`` (ρ_i ≤ ρ_{i−1}, ρ_i < ρ_{i+1});
       each basin runs from one minimum to the next, the cell of a minimum split half and half
       between its two basins, so the basin masses add up to the total mass Σρ·Δθ.
    2. Merging by mass: each basin faces the neighbour across the *higher* of its two bounding
       minima (the weaker separation, towards its cluster for a lobe).  While some basin holds
       less than ``min_mass_ratio`` × the mass of that neighbour, the one with the smallest
       such ratio is merged into it (the minimum between them is dropped).  A grid-scale side
       lobe (an odd–even wiggle in a cluster's flank) is a satellite of its cluster: measured
       on the oscillating runs of the old ``positive`` limiter (S¹, n = 1024, β = 3…100),
       lobes held 0.6–7 % of the mass of the cluster next to them, neighbouring clusters
       58–170 % of each other.  A cluster's width cannot make the distinction (a collapsed
       cluster is one cell wide, like a lobe), nor its share of the total mass (that falls like
       1/number of clusters).  So a cluster lighter than ``min_mass_ratio`` of the neighbour
       it is least separated from is counted with it.
    3. A merged basin is a cluster when its highest value exceeds ``factor`` × the mean of
       ``rho``.  Reported per cluster: ``mass`` (the basin's), ``position`` (the centre of the
       basin's mass above its lowest value, which would bias it) and ``peak`` (highest value).

    ``min_mass_ratio`` ∈ [0, 1): 0 counts every local maximum above the threshold, lobes
    included (the behaviour before the merging).
    """
    rho = np.asarray(rho, float)
    theta = np.asarray(theta, float)
    if rho.ndim != 1 or theta.shape != rho.shape:
        raise ValueError(f"theta and rho must be 1-D arrays of one shape, got {theta.shape} and "
                         f"{rho.shape}")
    if not np.all(np.isfinite(rho)):
        raise ValueError("rho must be finite")
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a positive number, got {factor!r}")
    if not (0.0 <= min_mass_ratio < 1.0):
        raise ValueError(f"min_mass_ratio must be in [0, 1), got {min_mass_ratio!r}")
    n = rho.size
    left, right = np.roll(rho, 1), np.roll(rho, -1)
    threshold = factor * rho.mean()
    if not np.any((rho > left) & (rho >= right) & (rho > threshold)):
        return []
    cell_mass = rho * (2 * np.pi / n)
    # basin k runs from the minimum bounds[k] to bounds[k + 1] (cyclically)
    bounds = np.nonzero((rho <= left) & (rho < right))[0]
    if bounds.size == 0:  # a flat floor has no strict minimum: one basin, the whole circle
        bounds = np.array([int(np.argmin(rho))])
    # masses from the cumulative sum over two turns: strictly between minima a < b (unrolled)
    # C[b] − C[a + 1], plus half of each minimum's own cell
    csum = np.concatenate([[0.0], np.cumsum(np.concatenate([cell_mass, cell_mass]))])
    ends = np.append(bounds[1:], bounds[0] + n)
    masses = csum[ends] - csum[bounds + 1] + 0.5 * (cell_mass[bounds] + cell_mass[ends % n])
    bounds, masses = list(bounds), list(masses)
    while len(bounds) > 1:
        m = np.asarray(masses)
        lo = rho[bounds]  # left minimum of each basin; the right one is that of the next basin
        hi = np.roll(lo, -1)
        right = hi >= lo  # the higher minimum is on the right: merge with basin k + 1
        ratio = m / np.where(right, np.roll(m, -1), np.roll(m, 1))
        k = int(np.argmin(ratio))
        if not ratio[k] < min_mass_ratio:
            break
        # dropping the minimum bounds[j] merges basins j − 1 and j: with basin k + 1 that is
        # j = k + 1, with basin k − 1 it is j = k
        K = len(bounds)
        j = (k + 1) % K if right[k] else k
        masses[(j - 1) % K] += masses[j]
        del bounds[j], masses[j]
    out = []
    K = len(bounds)
    for k in range(K):
        a = bounds[k]
        b = bounds[(k + 1) % K] if K > 1 else a + n
        b = b if b > a else b + n
        idx = np.arange(a, b + 1) % n
        vals = rho[idx]
        if not vals.max() > threshold:
            continue
        lift = vals - vals.min()
        ang = np.angle(np.sum(lift * np.exp(1j * theta[idx])))
        out.append({"position": float(np.mod(ang, 2 * np.pi)), "mass": float(masses[k]),
                    "peak": float(vals.max())})
    return out


def run_circle_clusters(config: CircleClustersConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    from spherepde.grids import CircleGrid

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    amp = rng.normal(size=config.modes) / math.sqrt(config.modes)
    phase = rng.uniform(0.0, 2 * np.pi, config.modes)
    times = np.linspace(0.0, config.t_end, config.n_outputs + 1)
    I2 = np.eye(2)
    runs = []
    t_start = time.perf_counter()
    partial = {"experiment": "circle-clusters", "config": config.to_dict(), "version": __version__, "runs": runs}
    with summary_on_interrupt(outdir, partial):
        for beta in config.betas:
            grid = CircleGrid(config.cells(beta))
            k = np.arange(1, config.modes + 1)[:, None]
            pert = np.sum(amp[:, None] * np.cos(k * grid.theta[None, :] + phase[:, None]), axis=0)
            rho0 = (1.0 + config.eps * pert) / (2 * np.pi)
            att = Attention(I2, I2, I2, beta)
            stepper = make_stepper("meanfield-ffsl", grid, DensityAttention(att, grid), courant=config.courant)
            nc = outdir / f"circle_beta{beta:g}.nc"
            mem = MemoryTracker()
            trackers = [mem, NetCDFTracker(nc, grid, config={**config.to_dict(), "beta": beta}, seed=config.seed),
                        ProgressTracker(disable=not progress, desc=f"beta={beta:g}")]
            res = Controller(stepper, trackers, dt=config.courant * grid.dtheta).run(
                rho0, (0.0, config.t_end), output_times=times)
            clusters = [find_clusters(grid.theta, s, config.peak_factor, config.min_mass_ratio)
                        for s in mem.result["state"]]
            runs.append({"beta": beta, "cells": grid.n, "steps": res.n_steps,
                         "n_clusters": [len(c) for c in clusters],
                         "final_clusters": clusters[-1],
                         "mass_error": float(grid.integrate(res.state) - 1.0),
                         "min_density": float(res.state.min()), "file": str(nc)})
        final = np.array([r["n_clusters"][-1] for r in runs], float)
        b = np.array([r["beta"] for r in runs])
        summary = {"experiment": "circle-clusters", "config": config.to_dict(), "version": __version__,
                   "times": times.tolist(), "runs": runs, "seconds": round(time.perf_counter() - t_start, 1)}
        ok = final > 0
        if ok.sum() >= 3:
            slope, se = fit_order(b[ok], final[ok])
            summary["fit_clusters_vs_beta"] = {"exponent": slope, "stderr": se,
                                               "note": "final number of clusters ∝ β^exponent"}
        summary["plot"] = str(plot_circle_clusters(summary, outdir))
        summary["interrupted"] = False
        write_summary(outdir, summary)
    return summary


def plot_circle_clusters(summary: dict, outdir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spherepde.io.netcdf import open_dataset

    runs = summary["runs"]
    fig, axes = plt.subplots(1, len(runs) + 1, figsize=(3.4 * (len(runs) + 1), 3.6), layout="constrained")
    for ax, r in zip(axes, runs):
        ds = open_dataset(r["file"])
        field = np.asarray(ds["density"].values)
        ax.pcolormesh(np.degrees(np.asarray(ds["theta"].values)), ds["time"].values, np.log10(np.maximum(field * 2 * np.pi, 1e-3)),
                      shading="nearest", cmap="magma", vmin=-1, vmax=2)
        ax.set_title(f"β = {r['beta']:g}: {r['n_clusters'][-1]} clusters", fontsize=9)
        ax.set_xlabel("θ (°)")
        ax.set_ylabel("t")
    t = np.asarray(summary["times"])
    for r in runs:
        axes[-1].plot(t, r["n_clusters"], label=f"β = {r['beta']:g}")
    axes[-1].set_xlabel("t")
    axes[-1].set_ylabel("number of clusters")
    axes[-1].legend(fontsize=8)
    path = outdir / "circle_clusters.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- particles vs density ----------------------------------------------------------------------
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
        for info, row, snaps in _sphere_runs(config, outdir, "density", progress):
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
                        tag = _beta_key(beta)
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


#: name → (configuration class, runner); the command line loops over this
EXPERIMENTS = {
    "metastability": (MetastabilityConfig, run_metastability),
    "terminal-phase": (TerminalPhaseConfig, run_terminal_phase),
    "particles-vs-density": (ParticlesVsDensityConfig, run_particles_vs_density),
    "circle-clusters": (CircleClustersConfig, run_circle_clusters),
}
