"""Pathwise synchronisation by common noise (Paper 2): a density scheme against the exact
pushforward on the same Brownian path (``spherepde validate sync-path``).

Set-up (the defaults of :class:`SyncPathConfig`): the noise-only SPDE on S²,

    dρ + ∇·(ρ ∘ P_x W(dt, x)) = 0,

ReLU MLP noise with σ_U = σ_W = 0.5 truncated at n_max = 4, ρ₀ a von Mises–Fisher density
(κ = 10, direction (0.48, 0.6, 0.64)), one Brownian path (``seed``, ``realisation``), Δt = 0.01,
t_end = 6.  Under common noise the measure contracts to a point: its rms width shrinks like
e^{λ₁t} (λ₁ = −κ_{n_max}(1) on S²), so the scaled interaction energy
e^{−β}E_β = ½∬(1 − e^{β(⟨x,y⟩−1)}) dρ dρ (β = 1) decays like e^{2λ₁t}.

Reference: every cell centre y_j of a GaussGrid(``nlat``) carries the weight ρ₀(y_j)|cell_j|
and is moved by the particle SDE (:class:`~spherepde.solvers.lagrangian.sde.ParticleSDE`, the same
Heun step and the same increments as the density's noise velocity): the exact pushforward of the
quadrature of ρ₀ — no Monte Carlo error.  ``ratio`` = E(density)/E(reference) at each output
time; ``decades`` = log₁₀ E_ref(0)/E_ref(t_end); ``rate_*`` the least-squares slopes of log E over
the second half of the run, against ``two_lambda_1``.

How it runs: a ``spherepde run`` configuration plus analysis.  :meth:`SyncPathConfig.run_config`
is the run (density with ``representations.density.scheme``; the reference as ``representations.particles.initial
= "quadrature"``, whose weights run.nc keeps in ``weight(particle)``; the energy of both,
``energy`` and ``particles_energy``); :func:`run_sync_path` runs it through
:mod:`spherepde.runs` — each representation driven by the one run loop, the
:class:`~spherepde.solvers.controller.Controller` — and reads ratio, decades, rates, the state
checks (the density's restart state at its last output) and the seconds of the steps
(``step_seconds`` of summary.json) back from the run's files.

Against the hand-written loop it replaced (steps at t_k = k·Δt, density and reference
interleaved) the numbers agree to ~1e-8 relative, not bit for bit, for one reason: the run loop
reaches t_k by its even split of each output interval (t + τ, τ = (target − t)/n), which is
k·Δt up to a few ulps δt (≤ 2.2e-16 at t_end = 1, ≤ 2.7e-15 at t_end = 6 for Δt = 0.01), and
the Brownian path is rough down to its leaves: piecewise linear on a dyadic tree of depth 48
in each unit interval (leaf h_B = 2⁻⁴⁸; t_end/2⁴⁸ when this was measured, the same at
t_end = 1), B moves by ≈ δt/√h_B (3.7e-9 at t_end = 1) when t moves by δt, so an
increment ΔW ~ √Δt changes by a relative ≲ δt/√(h_B Δt) ≈ 4e-8, and n steps move E by at most
~n times that (linear accumulation; a contracting flow does better).  Measured (nlat 24,
t_end 1): E 1.3e-8, ratio 8e-12 (lagrangian-remap: density and reference feel the same path
between remaps) and 1e-8 (ffsl-ppm); t_end 6: E 3.4e-7, ratio 8e-11 (lagrangian-remap, nlat 48)
and 1.6e-7 (ffsl-ppm, nlat 24).
The old loop moved onto the run loop's times agrees with this module to 1.6e-15 (round-off:
ρ₀ normalised twice, and the noise field's evaluation tables, which a density stepping at the
same points keeps — now that the density takes its steps in a row).
"""
from __future__ import annotations

import contextlib
import json
import math
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

# the density schemes (runs.config.SCHEMES) this validation runs: weighted Lagrangian points with
# a conservative remap onto a cluster-adapted grid (solvers.lagrangian.remap; the default here)
# and the finite-volume SPDE solver on the Gauss grid (ffsl-ppm, kept for comparison)
from spherepde.runs.config import SCHEMES

#: the set-up of the module docstring: ρ₀ = vMF(DIRECTION, CONCENTRATION), ReLU noise σ_U = σ_W =
#: SIGMA truncated at degree N_MAX
DIRECTION, CONCENTRATION, SIGMA, N_MAX = (0.48, 0.6, 0.64), 10.0, 0.5, 4
#: the second cluster's centre with ``clusters = 2``: (0.8, −0.64, 0)/‖·‖, orthogonal to DIRECTION
SECOND_DIRECTION = (0.8 / 1.0244998779892558, -0.64 / 1.0244998779892558, 0.0)


@dataclass(frozen=True)
class SyncPathConfig:
    """Parameters of one sync-path run (see the module docstring)."""

    nlat: int = 48
    t_end: float = 6.0
    dt: float = 0.01
    seed: int = 0
    realisation: int = 0
    scheme: str = "lagrangian-remap"
    beta: float = 1.0
    output_every: float = 0.25
    polar: str = "auto"  # the polar rings of ffsl-ppm (ignored by lagrangian-remap)
    clusters: int = 1  # 2: ρ₀ the equal mixture of vMF(DIRECTION) and vMF(SECOND_DIRECTION)
    base_nlat: int | None = None  # amr: the base grid (default nlat/2; ignored by the others)
    max_level: int = 4  # amr: refinement levels below the base
    mass_per_cell: float = 10.0  # amr: a leaf splits above mass_per_cell·h² (h the finest width)
    noise_substeps: str = "frozen"  # amr: what its positivity sub-steps take (AMRDensity)
    follow: bool = False  # amr, experimental: AMRDensity.follow (refinement follows the noise)

    def __post_init__(self) -> None:
        if isinstance(self.nlat, bool) or not isinstance(self.nlat, (int, np.integer)) \
                or self.nlat < 4 or self.nlat % 2:
            raise ValueError(f"nlat must be an even integer ≥ 4, got {self.nlat!r}")
        for name in ("t_end", "dt", "beta", "output_every"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        if self.dt > self.output_every or self.output_every > self.t_end:
            raise ValueError(f"need dt ≤ output_every ≤ t_end, got dt = {self.dt}, output_every = "
                             f"{self.output_every}, t_end = {self.t_end}")
        for name in ("t_end", "output_every"):
            k = getattr(self, name) / self.dt
            if abs(k - round(k)) > 1e-9 * k:
                raise ValueError(f"{name} must be a whole number of steps dt = {self.dt}, got "
                                 f"{name} = {getattr(self, name)}")
        n_out = self.t_end / self.output_every
        if abs(n_out - round(n_out)) > 1e-9 * n_out:
            raise ValueError(f"output_every must divide t_end into equal intervals (outputs at "
                             f"i·output_every, as spherepde run writes them), got output_every = "
                             f"{self.output_every}, t_end = {self.t_end}")
        for name in ("seed", "realisation"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name} must be an integer ≥ 0, got {v!r}")
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if self.clusters not in (1, 2) or isinstance(self.clusters, bool):
            raise ValueError(f"clusters must be 1 or 2, got {self.clusters!r}")
        if self.base_nlat is not None and (isinstance(self.base_nlat, bool) or not isinstance(
                self.base_nlat, (int, np.integer)) or self.base_nlat < 4 or self.base_nlat % 2):
            raise ValueError(f"base_nlat must be None or an even integer ≥ 4, got {self.base_nlat!r}")
        from spherepde.solvers.eulerian.amr import NOISE_SUBSTEPS
        if self.noise_substeps not in NOISE_SUBSTEPS:
            raise ValueError(f"noise_substeps must be one of {NOISE_SUBSTEPS}, got {self.noise_substeps!r}")
        from spherepde.solvers.eulerian.polar_cap import POLAR
        if self.polar not in POLAR:
            raise ValueError(f"polar must be one of {POLAR}, got {self.polar!r}")

    def run_config(self) -> dict:
        """The ``spherepde run`` configuration (a raw dict, :class:`~spherepde.runs.config
        .RunConfig`) of this run: the density with ``representations.density.scheme`` =
        ``scheme`` beside the reference, ``representations.particles.initial = "quadrature"`` (the weighted cell
        centres of ρ₀ on the same Brownian path), and the energy of both at every output."""
        centres = [list(DIRECTION)] + ([list(SECOND_DIRECTION)] if self.clusters == 2 else [])
        density: dict = {"scheme": self.scheme, "polar": self.polar}
        if self.scheme == "amr":
            density.update(base_nlat=self.base_nlat or max(4, 2 * (self.nlat // 4)),
                           max_level=self.max_level, mass_per_cell=self.mass_per_cell)
        return {"grid": {"kind": "sphere", "nlat": self.nlat},
                "initial": {"kind": "vmf", "centres": centres,
                            "kappas": [CONCENTRATION] * len(centres)},
                "dynamics": {"noise": {"activation": "relu", "sigma_u": SIGMA, "sigma_w": SIGMA,
                                       "n_max": N_MAX, "seed": self.seed,
                                       "realisation": self.realisation}},
                "representations": {"density": density,
                                    "particles": {"initial": "quadrature"}},
                "stepping": {"t_end": self.t_end, "dt": self.dt, "output_every": self.output_every},
                "outputs": {"fields": False, "positions": False, "diagnostics": ["mass", "energy"],
                            "energy_beta": self.beta}}


def default_output_every(t_end: float, dt: float, at_most: float = 0.25) -> float:
    """The largest t_end/n ≤ ``at_most`` that is a whole number of steps dt (``at_most`` itself
    when it divides t_end; t_end when t_end ≤ ``at_most``): the CLI's default ``--output-every``."""
    k = round(t_end / dt)
    for n in range(max(1, math.ceil(t_end / at_most * (1 - 1e-9))), k + 1):
        if k % n == 0:
            return t_end / n
    return t_end  # t_end < dt: refused by SyncPathConfig


def _state_checks(model, state) -> dict:
    """Mass error and extreme densities of the final state (points: extreme weights, the
    number of points and of remaps)."""
    stepper = model.density
    scheme = model.config.representations.density.scheme
    if scheme == "amr":
        _, m = stepper.measure(state)
        info = stepper.info(state)
        return {"mass_error": float(m.sum() - 1.0), "min_density": float(m.min()),
                "max_density": float(m.max()), "leaves": info["leaves"],
                "amr_steps": info["amr_steps"], "finest_level": info["finest_level"],
                "amr": {k: v for k, v in stepper.options().items() if k not in ("noise", "path")}}
    if scheme == "ffsl-ppm":
        return {"mass_error": float(model.grid.integrate(state) - 1.0),
                "min_density": float(state.min()), "max_density": float(state.max()),
                "substeps": stepper.substeps, "cap_fallbacks": stepper.transport.cap_fallbacks}
    _, w = stepper.measure(state)
    remap = stepper.remap
    return {"mass_error": float(w.sum() - 1.0), "min_density": float(w.min()),
            "max_density": float(w.max()), "points": int(w.size), "remaps": remap.remaps,
            "remap_every": remap.remap_every, "cells_per_width": remap.cells_per_width}


def _read_run(path: Path) -> dict:
    """time, energy (the density's) and particles_energy (the reference's) of a run.nc, up to
    the last output both reached, and the density's state at its last complete output."""
    import netCDF4

    from spherepde.io.runfile import read_restart

    with netCDF4.Dataset(path, "r") as ds:
        ds.set_auto_mask(False)
        t, ed, er = (np.array(ds[k][:], dtype=float) for k in ("time", "energy", "particles_energy"))
    both = np.isfinite(ed) & np.isfinite(er)  # rows not written hold NaN
    k = int(np.argmin(both)) if not both.all() else both.size
    return {"times": t[:k], "energy_density": ed[:k], "energy_reference": er[:k],
            "state": read_restart(path).state.get("density")}


def run_sync_path(config: SyncPathConfig = SyncPathConfig(), *, progress: bool = False,
                  output: str | Path | None = None) -> dict:
    """Run :meth:`SyncPathConfig.run_config` (``spherepde run``: density and reference through
    the one run loop, into ``output/run.nc``, default a temporary folder that is removed) and
    analyse its run.nc: the result of the module docstring.

    On Ctrl-C the outputs both representations reached are returned with ``"interrupted": True``
    (the density runs first, then the reference, so a stop in the density's pass leaves none;
    the state checks are those of the density's last complete output).
    """
    from spherepde import __version__
    from spherepde.runs.config import RunConfig
    from spherepde.runs.build import build
    from spherepde.runs.execute import run_model
    from spherepde.validation.fits import log_rate

    raw = config.run_config()
    model = build(RunConfig.from_dict(raw))
    if config.scheme == "amr":  # not a run-configuration key: set on the stepper
        model.density.noise_substeps = config.noise_substeps
        model.density.follow = config.follow
    with contextlib.ExitStack() as stack:
        outdir = (Path(output) if output is not None else
                  Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sync-path-"))))
        interrupted = False
        try:
            summary = run_model(model, outdir, progress=progress)
        except KeyboardInterrupt:
            if not (outdir / "summary.json").is_file():
                raise  # stopped before the run started: nothing reached
            interrupted = True
            summary = json.loads((outdir / "summary.json").read_text())
        res = _read_run(outdir / "run.nc")
    times, e_den, e_ref = res["times"], res["energy_density"], res["energy_reference"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(e_ref > 0, e_den / e_ref, math.nan)
    out = {"times": times.tolist(), "energy_density": e_den.tolist(),
           "energy_reference": e_ref.tolist(), "ratio": ratio.tolist()}
    late = times >= 0.5 * times[-1] if times.size else np.zeros(0, dtype=bool)
    reference, density = model.particle_rep, model.density_rep
    assert reference is not None and density is not None  # the run_config has both
    lam1 = -model.noise_field.variance  # λ₁ = −κ_{n_max}(1) on S² (see paper2.synchronization)
    state = density.state0 if res["state"] is None else res["state"]
    # the steps alone (the run's "seconds" also hold the O(N²) energy at every output)
    seconds = {"density": summary.get("density", {}).get("step_seconds", 0.0),
               "reference": summary.get("particles", {}).get("step_seconds", 0.0)}
    out.update(
        decades=float(math.log10(e_ref[0] / e_ref[-1])) if e_ref.size > 1 and e_ref[-1] > 0 else math.nan,
        ratio_range=[float(ratio.min()), float(ratio.max())] if ratio.size else [],
        rate_density=log_rate(times[late], e_den[late])[0],
        rate_reference=log_rate(times[late], e_ref[late])[0],
        two_lambda_1=2.0 * lam1, seconds=seconds, scheme=config.scheme,
        **_state_checks(model, state),
        reference_points=int(reference.x0.shape[0]), interrupted=interrupted,
        config=asdict(config), run_config=raw, spherepde_version=__version__)
    if output is not None:
        out["file"] = str(outdir / "run.nc")
    return out
