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
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

#: schemes this validation runs: weighted Lagrangian points with a conservative remap onto a
#: cluster-adapted grid (solvers.lagrangian.remap; the default, as grid.scheme of spherepde run),
#: and the finite-volume SPDE solver on the Gauss grid (ffsl-ppm, kept for comparison)
SCHEMES = ("lagrangian-remap", "ffsl-ppm")


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
        for name in ("seed", "realisation"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name} must be an integer ≥ 0, got {v!r}")
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        from spherepde.solvers.eulerian.polar_cap import POLAR
        if self.polar not in POLAR:
            raise ValueError(f"polar must be one of {POLAR}, got {self.polar!r}")

    def spde(self):
        """The noise-only :class:`~spherepde.experiments.ensemble.SPDEConfig` of this run."""
        from spherepde.experiments.ensemble import SPDEConfig

        return SPDEConfig(grid="sphere", nlat=self.nlat, activation="relu", sigma_u=0.5,
                          sigma_w=0.5, nmax=4, t_end=self.t_end, dt=self.dt,
                          initial={"kind": "vmf", "direction": [0.48, 0.6, 0.64],
                                   "concentration": 10.0},
                          energy_beta=self.beta, seed=self.seed)


def _state_checks(scheme, state, grid, stepper) -> dict:
    """Mass error and extreme densities of the final state (points: extreme weights, the
    number of points and of remaps)."""
    if scheme == "ffsl-ppm":
        return {"mass_error": float(grid.integrate(state) - 1.0), "min_density": float(state.min()),
                "max_density": float(state.max()), "substeps": stepper.substeps,
                "cap_fallbacks": stepper.transport.cap_fallbacks}
    x, w = state
    return {"mass_error": float(w.sum() - 1.0), "min_density": float(w.min()),
            "max_density": float(w.max()), "points": int(w.size), "remaps": stepper.remaps,
            "remap_every": stepper.remap_every, "cells_per_width": stepper.cells_per_width}


def run_sync_path(config: SyncPathConfig = SyncPathConfig(), *, progress: bool = False) -> dict:
    """Run the density scheme and the reference side by side; the result of the module docstring.

    On Ctrl-C the outputs reached so far are returned with ``"interrupted": True``.
    """
    from spherepde import __version__
    from spherepde.solvers.eulerian.spde import SPDEFFSL
    from spherepde.solvers.lagrangian.remap import LagrangianRemap, points_from_density
    from spherepde.solvers.lagrangian.sde import ParticleSDE
    from spherepde.experiments.ensemble import initial_density
    from spherepde.validation.metrics import interaction_energy
    from spherepde.validation.fits import log_rate

    spde = config.spde()
    g = spde.make_grid()
    noise = spde.make_noise()
    path = spde.make_path(noise, config.realisation)
    rho = initial_density(spde, g)
    y = g.xyz.reshape(-1, 3)
    area = g.cell_area.reshape(-1)
    xq, wq = points_from_density(g, rho)  # weights < 1e-13·max carry < 1e-9 of the mass
    particles = ParticleSDE(noise=noise, path=path)
    # each scheme: its state, one step, and E_β of its state
    if config.scheme == "ffsl-ppm":
        stepper = SPDEFFSL(g, None, noise=noise, path=path, polar=config.polar, dt=config.dt)
        state = rho

        def advance(state, t):
            return stepper.step(state, t, config.dt)

        def energy(state):
            w = np.clip(state.reshape(-1) * area, 0.0, None)
            return interaction_energy(y, w / w.sum(), config.beta)
    else:  # the same quadrature points as the reference, then remapped (module docstring)
        stepper = LagrangianRemap(ParticleSDE(noise=noise, path=path), grid_nlat=config.nlat)
        state = (xq.copy(), wq.copy())

        def advance(state, t):
            return stepper.step(*state, t, config.dt)

        def energy(state):
            return interaction_energy(state[0], state[1], config.beta)
    nsteps = int(round(config.t_end / config.dt))
    every = max(1, int(round(config.output_every / config.dt)))
    out = {"times": [], "energy_density": [], "energy_reference": [], "ratio": []}
    seconds = {"density": 0.0, "reference": 0.0}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=nsteps, desc="sync-path", unit="step", leave=False)
    interrupted = False
    try:
        for k in range(nsteps + 1):
            t = k * config.dt
            if k % every == 0 or k == nsteps:
                ed, er = energy(state), interaction_energy(xq, wq, config.beta)
                for key, v in (("times", t), ("energy_density", ed), ("energy_reference", er),
                               ("ratio", ed / er if er > 0 else math.nan)):
                    out[key].append(float(v))
            if k == nsteps:
                break
            t0 = time.perf_counter()
            state = advance(state, t)
            t1 = time.perf_counter()
            xq = particles.step(xq, t, config.dt)
            seconds["density"] += t1 - t0
            seconds["reference"] += time.perf_counter() - t1
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
    e_ref, times = out["energy_reference"], np.asarray(out["times"])
    late = times >= 0.5 * times[-1] if times.size else times
    lam1 = -noise.variance  # λ₁ = −κ_{n_max}(1) on S² (see paper2.synchronization)
    out.update(
        decades=float(math.log10(e_ref[0] / e_ref[-1])) if len(e_ref) > 1 and e_ref[-1] > 0 else math.nan,
        ratio_range=[float(min(out["ratio"])), float(max(out["ratio"]))] if out["ratio"] else [],
        rate_density=log_rate(times[late], np.asarray(out["energy_density"])[late])[0],
        rate_reference=log_rate(times[late], np.asarray(e_ref)[late])[0],
        two_lambda_1=2.0 * lam1, seconds=seconds, scheme=config.scheme,
        **_state_checks(config.scheme, state, g, stepper),
        reference_points=int(xq.shape[0]), interrupted=interrupted,
        config=asdict(config), spherepde_version=__version__)
    return out
