r"""Paper 2, Thm 1.1: the discrete transformer against its limit SDE, in depth L and width m.

``spherepde experiment depth-width``.  Tokens on S² (d = 3), Q = K = I, V = s·I with β
(s ∈ {+1, 0, −1} the attention scale), a ReLU MLP with biases σ_U = σ_W = 0.5 (docs/equations.md,
"Paper 2").  Thm 1.1:  E sup_t (1/N) Σ_i |X^i_{⌊Lt/T⌋} − X̄^i_t|² ≤ c (log L / L + 1/m).

The runs are ``spherepde run`` configurations of one base (:func:`run_config`: N tokens drawn
from the uniform ρ_0 with ``seed``, the transformer and/or the limit SDE's particles, the MLP
noise on the Brownian paths of ``seed``), run as sweeps (:func:`depth_sweeps`,
:func:`width_sweeps`, :func:`~spherepde.runs.sweep.run_sweep`, members on ``workers``
dask processes) into ``DIR/runs/NAME/`` (``sweep.nc``, ``members/*/run.nc``); every number
below is computed from those files.

1. Depth L, pathwise (m = ∞).  The m = ∞ transformer (``representations.transformer.width =
   inf``) has Gaussian layers whose noise is the increment of the truncated KL field W of the
   run's :class:`~spherepde.noise.brownian.BrownianPath` B over the layer,
   √Δt G_ℓ(y) = W(t_{ℓ+1}, y) − W(t_ℓ, y).  The limit SDE (Stratonovich, the run's particles:
   :class:`~spherepde.solvers.lagrangian.sde.ParticleSDE`, Heun) on the *same* path and the
   same tokens is the reference X̄, with ``ref_steps_per_layer`` Heun steps per layer of the
   deepest transformer (fine grid t_k = k·dt_ref, every step an output).  Three sweeps over the
   paths r = ``dynamics.noise.realisation`` = 0..R−1: ``depth`` (the transformer alone, ×
   ``representations.transformer.depth``; outputs on the layer times of the deepest one, so
   output j of depth L holds X_{⌊jL/L_max⌋}), ``reference`` (the particles alone) and
   ``check`` (the particles alone at 2·dt_ref).  The particles do not depend on the
   transformer, so the reference is run once per path, not once per depth.  Two errors per path:

   * at the layer times, e = max_ℓ (1/N) Σ_i |X^i_ℓ − X̄^i(t_ℓ)|²;
   * Thm 1.1's, e_sup = sup_t (1/N) Σ_i |X^i_{⌊Lt/T⌋} − X̄^i(t)|², t on the fine grid: it adds
     the oscillation of X̄ inside a layer, E max_ℓ sup_{t ∈ layer ℓ} |X̄(t) − X̄(t_ℓ)|² ~ Δt log L
     (Lévy's modulus of continuity) — the source of the log L of the theorem.

   Over R paths: mean and standard error.  Fits of the path mean: e ∝ L^{slope} and
   e ∝ (log L / L)^p, with the least-squares standard error
   (:func:`~spherepde.validation.fits.fit_order`) and a bootstrap over paths (the
   Monte Carlo uncertainty; all depths share the paths).  The layer update is an
   Euler–Maruyama-type step of the Itô form (LN supplies the radial drift −κ(1)(d−1)/2·X dt);
   with non-commuting noise fields its strong order is 1/2, i.e. e ∝ 1/L, which reads as p
   slightly above 1 against log L / L over a finite range.  Thm 1.1 is the upper bound p ≥ 1
   for e_sup.  The reference is checked by the ``check`` run (half as many steps): the
   reported difference (max over the coarse grid) bounds the coarser run's error, and the
   finer run (the one used) is better.  Without noise (``noise=False`` of :func:`depth_study`,
   the deterministic control, expected error ∝ L^{-2}) the same sweeps run without
   ``dynamics.noise`` (one member each; the reference is then the run's ParticleODE, RK4).

2. Width m, in law.  There is no natural pathwise coupling between an MLP of width m and the
   Gaussian field (or between two widths): the weights of different m are different random
   variables, and any coupling (e.g. the Gaussian field of a CLT construction) is a choice of
   the proof, not of the model.  So the width is compared in law only: R independent MLP
   transformers of width m against R independent m = ∞ transformers (Gaussian layers on
   independent Brownian paths: iid N(0, 1) coefficients ξ per layer), all on the same tokens,
   at a fixed moderate depth L, through three observables of the tokens at T: the mean
   pairwise cosine similarity (1/(N(N−1))) Σ_{i≠j} ⟨X^i, X^j⟩, the scaled interaction energy
   e^{−β} E_β (:func:`token_interaction_energy`) and the first moment |(1/N) Σ_i X^i|.  One
   sweep per width (``width-M``, ``width-inf``), its members batches of ``batch`` realisations
   (``representations.transformer.realisations``) over ``dynamics.noise.realisation`` = the
   batch's first noise realisation; width j (the m = ∞ sweep last) takes the noise realisations
   j·B·n_b … (j + 1)·B·n_b − 1, so that no two widths share a layer generator.  Reported: the
   difference of means with its standard error sqrt(s²_m/R + s²_∞/R), and a fit
   |diff| ∝ m^{−q} over the widths where the difference is resolved (|diff| > 3 se);
   otherwise the summary says that the width effect is below the Monte Carlo resolution 3·se
   at that R.

   Why the width effect in law is small: for *every* m the MLP field G has exactly the
   covariance κ(⟨x, y⟩) I_d of the Gaussian field, and its odd moments vanish (W ↦ −W), so
   one layer's increment √Δt G matches the Gaussian increment in its first three moments.
   The m-dependence enters only through the fourth and higher cumulants, of size O(1/m)
   (the fourth cumulant of one component is 3 Var(σ(a)²)/m): a local weak error O(Δt²/m)
   per layer, O(T Δt/m) at T.  The observables therefore differ by O(1/(L m)) — a weak
   effect that vanishes as L → ∞ even at fixed m (the invariance principle over layers).
   The 1/m of Thm 1.1 is a *pathwise* (coupling) bound; it is not what a comparison in law
   sees.  That is why the width study uses a small depth.

   The m = ∞ layers use the KL field truncated at ``nmax`` (variance κ_{n_max}(1), fraction
   ``captured_variance`` of κ(1)); the MLP has the exact κ.  The relative variance deficit
   1 − captured_variance is reported: it is a bias of that size on the m = ∞ side.

Outputs: ``depth_width.nc`` (trajectories of path 0 for the largest L and the reference at the
same layer times, the per-path errors, the width differences), ``depth_width_depth.png``,
``depth_width_width.png``, ``summary.json`` and the sweeps under ``runs/``.

Seeds (the run configuration's; ``spherepde.runs.build``).  Tokens: N points drawn from
the uniform ρ_0 on a Gauss grid of :data:`GRID_NLAT` rings with ``seed`` (uniform in each cell
chosen by its area: iid uniform on S²), the same in every run.  Noise seed ``seed``: the depth
study's path r is Brownian path r; in the width study, realisation k of the batch starting at
noise realisation j is path j + k (m = ∞) or the layer generator
``SeedSequence(seed).spawn(j + k + 1)[j + k]`` (width m).
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spherepde.checks import check_int, check_real
from spherepde.experiments.study import Study, study
from spherepde.noise import NoiseField, NoiseKernel, get_activation
from spherepde.experiments.depth_width_output import (OBSERVABLES, plot_depth, plot_width,
                                                   write_depth_width_netcdf)
from spherepde.experiments.depth_width_stats import (depth_fits, mlp_excess_kurtosis, observables, sup_error,
                                                  width_differences)

#: observables of the width study (name -> description)
#: the swept key paths of the runs
PATH, DEPTH = "dynamics.noise.realisation", "representations.transformer.depth"
#: rings of the Gauss grid the tokens are drawn on (uniform ρ_0: exact in law on any grid)
GRID_NLAT = 4


@dataclass(frozen=True)
class DepthWidthConfig:
    """Parameters of ``spherepde experiment depth-width`` (module docstring for the design).

    n_tokens: N; t_end: T; beta: β of Q = K = V = I; attention_scale: s (+1, 0, −1);
    activation, sigma_u, sigma_w: the MLP; nmax: KL truncation of the m = ∞ field;
    depths: L of the depth study (increasing, each dividing the largest); paths: R of the
    depth study; ref_steps_per_layer: Heun steps of the reference per layer of the largest L
    (even: the check run uses half); widths: m of the width study; width_depth: its L;
    width_realisations: its R per width (and for m = ∞), run in members of ``batch``
    realisations (the last batch filled up; the first R are used); seed; workers: dask worker
    processes for the sweeps (0: one after the other in this process).
    """

    n_tokens: int = 32
    t_end: float = 1.0
    beta: float = 1.0
    attention_scale: float = 1.0
    activation: str = "relu"
    sigma_u: float = 0.5
    sigma_w: float = 0.5
    nmax: int = 8
    depths: tuple = (8, 16, 32, 64, 128, 256, 512)
    paths: int = 24
    ref_steps_per_layer: int = 16
    widths: tuple = (4, 16, 64, 256, 1024)
    width_depth: int = 8
    width_realisations: int = 8000
    batch: int = 1000
    seed: int = 0
    workers: int = 2

    def __post_init__(self):
        check_int("n_tokens", self.n_tokens, 2)
        check_real("t_end", self.t_end, positive=True)
        check_real("beta", self.beta, positive=True)
        check_real("attention_scale", self.attention_scale)
        check_real("sigma_u", self.sigma_u, nonnegative=True)
        check_real("sigma_w", self.sigma_w, nonnegative=True)
        check_int("nmax", self.nmax, 1)
        for name in ("paths", "width_depth", "width_realisations", "batch"):
            check_int(name, getattr(self, name), 2 if name in ("paths", "width_realisations") else 1)
        check_int("ref_steps_per_layer", self.ref_steps_per_layer, 2)
        if self.ref_steps_per_layer % 2:
            raise ValueError(f"ref_steps_per_layer must be even (the check run uses half), "
                             f"got {self.ref_steps_per_layer}")
        check_int("seed", self.seed, 0)
        check_int("workers", self.workers, 0)
        for name, minimum in (("depths", 1), ("widths", 1)):
            seq = getattr(self, name)
            if not isinstance(seq, (tuple, list)) or len(seq) < 2:
                raise ValueError(f"{name} must be a tuple of at least 2 ints, got {seq!r}")
            for v in seq:
                check_int(f"{name} entry", v, minimum)
            if any(b <= a for a, b in zip(seq, seq[1:])):
                raise ValueError(f"{name} must be strictly increasing, got {seq!r}")
        if any(self.depths[-1] % L for L in self.depths):
            raise ValueError(f"every depth must divide the largest ({self.depths[-1]}), got {self.depths!r}")
        NoiseKernel(self.activation, 3, self.sigma_u, self.sigma_w)  # validates the activation
        for name, raw in {**depth_sweeps(self), **width_sweeps(self)}.items():
            try:  # every key of every run (limits of the run configuration), before any work
                _expand(raw)
            except ValueError as err:
                raise ValueError(f"the {name} runs: {err}") from None

    @classmethod
    def quick(cls) -> "DepthWidthConfig":
        return cls(n_tokens=16, depths=(8, 16, 32, 64), paths=8, ref_steps_per_layer=8,
                   widths=(4, 16, 64, 256), width_realisations=1000, batch=500)

    def to_dict(self) -> dict:
        return {"experiment": "depth-width", **asdict(self)}

    @property
    def dt_ref(self) -> float:
        """The reference step T/(L_max · ref_steps_per_layer)."""
        return self.t_end / (self.depths[-1] * self.ref_steps_per_layer)

    def field(self) -> NoiseField:
        """The m = ∞ field (the runs' noise): ``NoiseField(kernel, nmax)``."""
        return NoiseField(NoiseKernel(get_activation(self.activation), 3, self.sigma_u, self.sigma_w),
                          nmax=self.nmax)


def _expand(raw: dict):
    from spherepde.runs.sweep import expand

    return expand(raw)


def _log(progress: bool, text: str) -> None:
    if progress:
        print(f"[depth-width] {text}", file=sys.stderr, flush=True)


def _mean_se(a) -> tuple[float, float]:
    a = np.asarray(a, float)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan


# ---- the run configurations ------------------------------------------------------------------
def run_config(config: DepthWidthConfig, *, noise: bool = True) -> dict:
    """The base ``spherepde run`` configuration (a raw dict for :class:`RunConfig`): tokens on
    S² drawn from the uniform ρ_0 (grid of :data:`GRID_NLAT` rings, density off), Q = K = I,
    V = s·I, β; with ``noise`` the MLP noise (activation, σ_U, σ_W, n_max = nmax, seed) on path
    0 of [0, T]; fixed step dt_ref; positions kept, no fields, no time series.  No
    representation is switched on (:func:`depth_sweeps`, :func:`width_sweeps`)."""
    eye = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    s = float(config.attention_scale)
    dyn = {"attention": {"Q": eye, "K": eye, "V": [[s * a for a in row] for row in eye],
                         "beta": float(config.beta)}}
    if noise:
        dyn["noise"] = {"activation": config.activation, "sigma_u": float(config.sigma_u),
                        "sigma_w": float(config.sigma_w), "n_max": int(config.nmax),
                        "seed": int(config.seed)}
    return {"grid": {"kind": "sphere", "nlat": GRID_NLAT}, "initial": {"kind": "uniform"},
            "dynamics": dyn, "representations": {"density": False},
            "stepping": {"t_end": float(config.t_end), "dt": config.dt_ref},
            "outputs": {"fields": False, "positions": True, "diagnostics": []}}


def _with(raw: dict, reps: dict, output_every: float, sweep: dict, dt: float | None = None) -> dict:
    raw = {**raw, "representations": {"density": False, **reps}, "sweep": sweep,
           "stepping": {**raw["stepping"], "output_every": output_every}}
    if dt is not None:
        raw["stepping"]["dt"] = dt
    return raw


def depth_sweeps(config: DepthWidthConfig, *, noise: bool = True) -> dict:
    """The three sweeps of the depth study, by folder name (module docstring): ``depth`` (the
    transformer alone, m = ∞, over depth × path, outputs every T/L_max), ``reference`` (the
    particles alone over the paths, every step dt_ref an output) and ``check`` (the same at
    2·dt_ref).  ``noise=False``: without dynamics.noise, the transformer attention-only and one
    member per depth, the reference and check one member each."""
    base = run_config(config, noise=noise)
    n, seed, T, Lmax = int(config.n_tokens), int(config.seed), float(config.t_end), config.depths[-1]
    paths = {PATH: list(range(config.paths))} if noise else {"representations.particles.n": [n]}
    tr = {"depth": Lmax, "n": n, "seed": seed, **({"width": "inf"} if noise else {})}
    parts = {"particles": {"n": n, "seed": seed}}
    dt = config.dt_ref
    return {"depth": _with(base, {"transformer": tr}, T / Lmax,
                           {DEPTH: [int(L) for L in config.depths],
                            **({PATH: paths[PATH]} if noise else {})}),
            "reference": _with(base, parts, dt, paths),
            "check": _with(base, parts, 2 * dt, paths, dt=2 * dt)}


def width_batches(config: DepthWidthConfig) -> tuple[int, int]:
    """(B, n_b): realisations per member and members per width, B·n_b ≥ R."""
    B = min(config.batch, config.width_realisations)
    return B, -(-config.width_realisations // B)


def width_sweeps(config: DepthWidthConfig) -> dict:
    """One sweep per width (``width-M``, then ``width-inf``): the transformer alone at depth
    ``width_depth``, B realisations per member on the same tokens, members over the first noise
    realisation of their batch, width j taking j·B·n_b + b·B (b = 0..n_b − 1); outputs at 0, T."""
    base = run_config(config)
    B, nb = width_batches(config)
    out = {}
    for j, m in enumerate([*config.widths, math.inf]):
        tr = {"depth": int(config.width_depth), "width": "inf" if math.isinf(m) else int(m),
              "n": int(config.n_tokens), "seed": int(config.seed), "realisations": B}
        out[f"width-{m}"] = _with(base, {"transformer": tr}, float(config.t_end),
                                  {PATH: [j * B * nb + b * B for b in range(nb)]})
    return out


def _run_sweeps(raws: dict, outdir: Path, config: DepthWidthConfig, scheduler, progress: bool) -> dict:
    """Run the sweeps into ``outdir/runs/NAME``; {NAME: sweep.nc path}."""
    from spherepde.runs.sweep import run_sweep

    files = {}
    for name, raw in raws.items():
        _log(progress, f"sweep {name}")
        res = run_sweep(raw, outdir / "runs" / name, workers=config.workers if scheduler is None else 0,
                        scheduler=scheduler, progress=progress)
        files[name] = res["file"]
    return files


def _client(config: DepthWidthConfig):
    """One LocalCluster for all the sweeps (None with workers = 0): (scheduler address, closer)."""
    if config.workers == 0:
        return None, lambda: None
    from spherepde.runs.sweep import local_client

    client, cluster = local_client(config.workers)

    def close():
        client.close()
        cluster.close()

    return cluster.scheduler_address, close


# ---- 1. depth, pathwise --------------------------------------------------------------------
def depth_errors(config: DepthWidthConfig, files: dict, *, noise: bool = True) -> dict:
    """The errors of the depth study from the sweep files ``files`` {depth, reference, check}.

    Per path r and depth L, with X̄ the reference on its fine grid t_k = k·dt_ref and X the
    transformer's tokens at its layer times (every (L_max/L)-th output of its member):

    * ``errors[L, r]`` = max_ℓ (1/N) Σ_i |X^i_ℓ − X̄^i(t_ℓ)|²  (the layer times);
    * ``errors_sup_t[L, r]`` = max_k (1/N) Σ_i |X^i_{⌊L t_k/T⌋} − X̄^i(t_k)|²  (Thm 1.1's sup over
      t, on the fine grid: it adds the oscillation of X̄ inside a layer);
    * ``ref_check[r]`` = max_k (1/N) Σ_i |X̄_dt(t_k) − X̄_2dt(t_k)|² over the coarse grid.

    Also ``x_transformer`` (L_max + 1, N, 3) and ``x_reference`` (same, at the layer times) of
    path 0.  Shapes: errors (n_depths, R), ref_check (R,); R = 1 without noise.
    """
    from spherepde.runs.sweep import select
    from spherepde.io.netcdf import open_dataset

    R = config.paths if noise else 1
    Lmax, s = config.depths[-1], config.ref_steps_per_layer
    errors, errors_t = np.empty((len(config.depths), R)), np.empty((len(config.depths), R))
    checks = np.empty(R)
    dep, ref, chk = (open_dataset(files[k]) for k in ("depth", "reference", "check"))
    try:
        for r in range(R):
            at = {PATH: r} if noise else {}
            fine = select(ref, "position", at)
            checks[r] = sup_error(fine[::2], select(chk, "position", at))
            for k, L in enumerate(config.depths):
                x = select(dep, "transformer_position", {DEPTH: L, **at})[::Lmax // L]
                per = (Lmax // L) * s  # fine steps per layer of depth L
                errors[k, r] = sup_error(x, fine[::per])
                errors_t[k, r] = max(sup_error(np.repeat(x[:-1], per, axis=0), fine[:-1]),
                                     sup_error(x[-1:], fine[-1:]))
                if r == 0 and L == Lmax:
                    x_last, ref_last = x, fine[::s]
    finally:
        for ds in (dep, ref, chk):
            ds.close()
    return {"errors": errors, "errors_sup_t": errors_t, "ref_check": checks,
            "x_transformer": x_last, "x_reference": ref_last}


def depth_study(config: DepthWidthConfig, outdir: str | Path, *, noise: bool = True,
                progress: bool = False, scheduler: str | None = None) -> dict:
    """Run the sweeps of :func:`depth_sweeps` into ``outdir/runs/`` (``noise=False``: into
    ``outdir/runs/control-*``) and return :func:`depth_errors` with ``files`` and ``seconds``."""
    t0 = time.perf_counter()
    raws = depth_sweeps(config, noise=noise)
    if not noise:
        raws = {f"control-{k}": v for k, v in raws.items()}
    files = _run_sweeps(raws, Path(outdir), config, scheduler, progress)
    if not noise:
        files = {k[len("control-"):]: v for k, v in files.items()}
    out = depth_errors(config, files, noise=noise)
    for r in range(out["errors"].shape[1]):
        _log(progress, f"path {r + 1}: reference check {out['ref_check'][r]:.3g}, errors "
                       + ", ".join(f"{e:.3g}" for e in out["errors"][:, r]))
    return {**out, "files": files, "seconds": time.perf_counter() - t0}


# ---- 2. width, in law ------------------------------------------------------------------------
def width_samples(config: DepthWidthConfig, files: dict) -> dict:
    """Observables at T of the first R realisations of each width sweep (members in batch
    order): {m or "inf": {observable: (R,) array}}."""
    from spherepde.runs.sweep import member_runs
    from spherepde.io.netcdf import open_dataset

    samples = {}
    for m in [*config.widths, math.inf]:
        parts = []
        for _, nc in member_runs(files[f"width-{m}"]):
            with open_dataset(nc) as ds:
                parts.append(ds["transformer_position"].values[-1])  # (B, N, 3) at T
        x = np.concatenate(parts)[:config.width_realisations]
        samples["inf" if math.isinf(m) else m] = observables(x, config.beta)
    return samples


def width_study(config: DepthWidthConfig, outdir: str | Path, *, progress: bool = False,
                scheduler: str | None = None) -> dict:
    """Run the sweeps of :func:`width_sweeps` into ``outdir/runs/`` and return
    {"samples": :func:`width_samples`, "files", "seconds"}."""
    t0 = time.perf_counter()
    files = _run_sweeps(width_sweeps(config), Path(outdir), config, scheduler, progress)
    return {"samples": width_samples(config, files), "files": files,
            "seconds": time.perf_counter() - t0}


# ---- the experiment --------------------------------------------------------------------------
def run_depth_width(config: DepthWidthConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    """Run the sweeps of both studies into ``outdir/runs/`` (on one dask cluster of ``workers``
    processes), write ``depth_width.nc``, two PNGs and ``summary.json``; return the summary."""
    if not isinstance(config, DepthWidthConfig):
        raise TypeError(f"config must be a DepthWidthConfig, got {type(config).__name__}")
    scheduler, close = _client(config)
    try:
        with study("depth-width", config, outdir) as job:
            return _run(config, job, scheduler, progress)
    finally:
        close()


def _run(config: DepthWidthConfig, job: Study, scheduler, progress: bool) -> dict:
    outdir = job.outdir

    field = config.field()
    kernel = field.kernel

    dep = depth_study(config, outdir, progress=progress, scheduler=scheduler)
    depth: dict[str, Any] = {"paths": config.paths, "depths": list(config.depths)}  # JSON
    for key, errs, text in (
            ("layer_times", dep["errors"], "E max_l (1/N) sum_i |X_l - Xbar(t_l)|^2"),
            ("sup_t", dep["errors_sup_t"], "E sup_t (1/N) sum_i |X_floor(Lt/T) - Xbar(t)|^2 (Thm 1.1; "
                                           "t on the reference grid)")):
        mean = errs.mean(axis=1)
        depth[key] = {"definition": text + ", m = inf, same Brownian path",
                      "error": mean.tolist(),
                      "stderr": (errs.std(axis=1, ddof=1) / math.sqrt(config.paths)).tolist(),
                      "error_times_L_over_logL": (mean * np.asarray(config.depths) /
                                                  np.log(config.depths)).tolist(),
                      **depth_fits(config.depths, errs, seed=config.seed)}
    ref_mean, ref_se = _mean_se(dep["ref_check"])
    depth["reference"] = {
        "method": "heun (Stratonovich), same Brownian path", "steps_per_layer": config.ref_steps_per_layer,
        "dt": config.t_end / (config.depths[-1] * config.ref_steps_per_layer),
        "check": "E max_k (1/N) sum_i |Xbar_dt(t_k) - Xbar_2dt(t_k)|^2 on the 2dt grid (bounds the "
                 "error of the 2dt run; the dt run used is better)",
        "difference": ref_mean, "difference_stderr": ref_se,
        "relative_to_error_at_largest_L": ref_mean / depth["layer_times"]["error"][-1]}
    depth["theory"] = ("Thm 1.1: sup_t error <= c log L / L (p >= 1).  At the layer times the "
                       "scheme has strong order 1/2 (slope -1 vs L); the sup over t adds the "
                       "oscillation of Xbar inside a layer, ~ dt log L (Levy modulus)")
    depth["seconds"] = round(dep["seconds"], 1)
    job.partial["depth"] = depth
    runs = [{"study": "depth", "depth": L, "dt": config.t_end / L,
             "error": depth["layer_times"]["error"][k], "stderr": depth["layer_times"]["stderr"][k],
             "error_sup_t": depth["sup_t"]["error"][k], "stderr_sup_t": depth["sup_t"]["stderr"][k]}
            for k, L in enumerate(config.depths)]

    wid = width_study(config, outdir, progress=progress, scheduler=scheduler)
    diffs = width_differences(config.widths, wid["samples"])
    for name, entry in diffs.items():
        runs += [{"study": "width", "observable": name, **r} for r in entry["rows"]]

    summary: dict[str, Any] = {  # JSON
        **job.header,
        "kernel": {"kappa1": kernel.kappa1, "kappa_prime1": kernel.kappa_prime1,
                   "nmax": field.nmax, "captured_variance": field.captured_variance,
                   "kappa1_truncated": field.variance},
        "depth": depth,
        "width": {"depth": config.width_depth, "realisations": config.width_realisations,
                  "observables": OBSERVABLES, "differences": diffs,
                  "excess_kurtosis_times_m": mlp_excess_kurtosis(kernel),
                  "expected_size": "O(T dt / m): first three moments of a layer's noise match the "
                                   "Gaussian one for every m; the 4th cumulant is O(1/m)",
                  "pathwise": "not reported: there is no natural pathwise coupling across widths "
                              "(module docstring); the comparison is in law",
                  "truncation_bias": "m = inf uses the KL field with relative variance deficit "
                                     f"{1 - field.captured_variance:.1e}",
                  "seconds": round(wid["seconds"], 1)},
        "runs": runs,
        "sweep_files": {k: str(v) for k, v in {**dep["files"], **wid["files"]}.items()},
    }
    nc = outdir / "depth_width.nc"
    write_depth_width_netcdf(nc, config, dep, wid, diffs)
    summary["file"] = str(nc)
    return job.finish(summary, lambda summ: [plot_depth(summ, outdir / "depth_width_depth.png"),
                                           plot_width(summ, outdir / "depth_width_width.png")])


__all__ = ["DEPTH", "DepthWidthConfig", "GRID_NLAT", "OBSERVABLES", "PATH", "depth_errors", "depth_fits",
           "depth_study", "depth_sweeps", "observables", "run_config", "run_depth_width", "sup_error",
           "width_batches", "width_differences", "width_samples", "width_study", "width_sweeps"]
