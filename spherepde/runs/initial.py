"""The initial density of an :class:`~spherepde.runs.config.InitialConfig` on a grid.

Every density is returned normalised to mass 1 (Σ ρ_j |cell_j| = 1): cell averages on a
GaussGrid (shape (nlat, nlon), :meth:`GaussGrid.cell_average`), cell-centre values on a
CircleGrid (shape (n,)).  ``random-phase`` (S¹) is not rescaled: its modes sum to 0 on the
grid, so its mass is 1 up to round-off as built (:func:`random_phase_density`).
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid


def _on_grid(grid, f) -> np.ndarray:
    """f(x) with x Cartesian (..., d): cell averages on S², centre values on S¹."""
    if isinstance(grid, GaussGrid):
        return grid.cell_average(f)
    return f(np.asarray(grid.xy))


def _normalised(grid, rho: np.ndarray, name: str) -> np.ndarray:
    mass = float(grid.integrate(rho))
    if not (math.isfinite(mass) and mass > 0):
        raise ValueError(f"{name}: the initial density has no positive finite mass")
    return rho / mass


def _unit(v) -> np.ndarray:
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def low_mode_perturbation(cfg, d: int):
    """p(x) = Σ_i c_i Y_i(x) / Σ_i |c_i| sup|Y_i| for the real harmonics Y_i of degree
    1..max_degree (S²: Y_l0, √2 Re Y_lm, √2 Im Y_lm; S¹: cos kθ, sin kθ), c ~ N(0, 1) from
    ``seed`` in the order (degree, order, cos/sin); |p| ≤ 1 everywhere, independent of the grid."""
    rng = np.random.default_rng(cfg.seed)
    L = cfg.max_degree
    if d == 2:
        a, b = rng.standard_normal(L), rng.standard_normal(L)
        scale = float(np.sum(np.abs(a) + np.abs(b)))
        k = np.arange(1, L + 1)

        def p_circle(x):
            th = np.arctan2(x[..., 1], x[..., 0])[..., None]
            return np.sum(a * np.cos(k * th) + b * np.sin(k * th), axis=-1) / scale

        return p_circle
    from scipy.special import sph_harm_y

    terms = [(l, m, part) for l in range(1, L + 1) for m in range(l + 1)
             for part in (("re",) if m == 0 else ("re", "im"))]
    c = rng.standard_normal(len(terms))
    sup = np.array([math.sqrt((2 * l + 1) / (4 * math.pi)) for l, _, _ in terms])
    scale = float(np.sum(np.abs(c) * sup))

    def p(x):
        theta = np.arccos(np.clip(x[..., 2], -1.0, 1.0))
        phi = np.arctan2(x[..., 1], x[..., 0])
        out = np.zeros(x.shape[:-1])
        for ci, (l, m, part) in zip(c, terms):
            y = sph_harm_y(l, m, theta, phi)
            y = y.real if m == 0 else math.sqrt(2.0) * (y.real if part == "re" else y.imag)
            out += ci * y
        return out / scale

    return p


def random_phase_density(cfg, grid: CircleGrid) -> np.ndarray:
    """ρ_0 = (1 + amplitude·p(θ_j))/2π at the cell centres θ_j of ``grid``, p = Σ_{k=1}^{K}
    a_k cos(kθ + φ_k), K = ``max_degree``: a_k ~ N(0, 1)/√K, then φ_k ~ U[0, 2π), from
    ``default_rng(seed)`` in this order — the initial density of ``spherepde experiment
    circle-clusters``, bit for bit.  With 2K ≤ n each mode sums to 0 on the grid, so ρ_0 is
    returned as built (mass 1 up to round-off, not rescaled); ValueError naming
    ``initial.amplitude`` when ρ_0 is not positive."""
    rng = np.random.default_rng(cfg.seed)
    K = cfg.max_degree
    amp = rng.normal(size=K) / math.sqrt(K)
    phase = rng.uniform(0.0, 2 * np.pi, K)
    k = np.arange(1, K + 1)[:, None]
    pert = np.sum(amp[:, None] * np.cos(k * grid.theta[None, :] + phase[:, None]), axis=0)
    rho = (1.0 + cfg.amplitude * pert) / (2 * np.pi)
    if not float(rho.min()) > 0:
        raise ValueError(f"initial.amplitude: ρ_0 = (1 + amplitude·p)/2π is not positive on the grid "
                         f"(min {float(rho.min()) * 2 * np.pi:.3g} × 1/2π); give a smaller amplitude "
                         f"than {cfg.amplitude:g}")
    return rho


def _from_netcdf(cfg, grid) -> np.ndarray:
    from spherepde.io.netcdf import open_dataset

    p = "initial"
    try:
        ds = open_dataset(cfg.path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{p}.path: cannot read {cfg.path!r}: {err}") from None
    if cfg.variable not in ds:
        raise ValueError(f"{p}.variable: {cfg.variable!r} is not in {cfg.path!r} "
                         f"(variables: {sorted(map(str, ds.data_vars))})")
    da = ds[cfg.variable]
    if "time" in da.dims:
        n = da.sizes["time"]
        if not -n <= cfg.time_index < n:
            raise ValueError(f"{p}.time_index: must be in {-n}..{n - 1} for {cfg.path!r}, "
                             f"got {cfg.time_index}")
        da = da.isel(time=cfg.time_index)
    rho = np.asarray(da.values, dtype=float)
    if rho.shape != tuple(grid.shape):
        raise ValueError(f"{p}.variable: {cfg.variable!r} has shape {rho.shape}, the grid needs "
                         f"{tuple(grid.shape)} (set grid to the file's grid)")
    if not np.all(np.isfinite(rho)) or np.any(rho < 0):
        raise ValueError(f"{p}.variable: {cfg.variable!r} must be finite and >= 0")
    return rho


def density_function(cfg, d: int):
    """ρ_0 of ``cfg`` (an InitialConfig) as a function of Cartesian points x (..., d), not
    normalised, for the kinds given by a formula (uniform, cosine, vmf: each component
    normalised on its own, as :func:`initial_density` does on the grid, by its exact mass
    4π(1 − e^{−2κ})/(2κ) on S²; low-mode); None for the others."""
    kind = cfg.kind
    if kind == "uniform":
        return lambda x: np.ones(np.shape(x)[:-1])
    if kind == "cosine":
        a = _unit(cfg.direction)
        return lambda x: 1.0 + cfg.amplitude * (x @ a)
    if kind == "vmf" and d == 3:
        w = np.asarray(cfg.weights, float)
        w = w / w.sum()
        comps = [(wk, _unit(c), k, 4 * math.pi * -math.expm1(-2 * k) / (2 * k))
                 for wk, c, k in zip(w, cfg.centres, cfg.kappas)]
        return lambda x: sum(wk * np.exp(k * (x @ c - 1.0)) / z for wk, c, k, z in comps)
    if kind == "low-mode":
        p = low_mode_perturbation(cfg, d)
        return lambda x: 1.0 + cfg.amplitude * p(x)
    return None


def initial_density(cfg, grid: GaussGrid | CircleGrid) -> np.ndarray:
    """ρ_0 of ``cfg`` (an InitialConfig) on ``grid``, mass 1; shape ``grid.shape``."""
    d = 3 if isinstance(grid, GaussGrid) else 2
    kind = cfg.kind
    if kind == "random-phase":
        if not isinstance(grid, CircleGrid):
            raise ValueError("initial.kind: 'random-phase' is a density on the circle (grid.kind = 'circle')")
        return random_phase_density(cfg, grid)
    if kind == "uniform":
        rho = np.ones(grid.shape)
    elif kind == "cosine":
        a = _unit(cfg.direction)
        rho = _on_grid(grid, lambda x: 1.0 + cfg.amplitude * (x @ a))
    elif kind == "vmf":
        w = np.asarray(cfg.weights, float)
        w = w / w.sum()
        rho = np.zeros(grid.shape)
        for wk, c, kappa in zip(w, cfg.centres, cfg.kappas):
            c = _unit(c)
            comp = _on_grid(grid, lambda x, c=c, kappa=kappa: np.exp(kappa * (x @ c - 1.0)))
            rho += wk * _normalised(grid, comp, "initial.kappas")
    elif kind == "low-mode":
        p = low_mode_perturbation(cfg, d)
        rho = _on_grid(grid, lambda x: 1.0 + cfg.amplitude * p(x))
    else:
        rho = _from_netcdf(cfg, grid)
    return _normalised(grid, np.asarray(rho, float), "initial")


def sample_initial(cfg, d: int, n: int, seed: int) -> np.ndarray:
    """n points (n, d) drawn exactly from ρ_0 of ``cfg`` (an InitialConfig) on S^{d−1}, no
    grid (``grid.kind = "none"``), with the generator ``default_rng(seed)``:

    * ``uniform``: x = g/|g|, g ~ N(0, I_d);
    * ``cosine``: ρ_0 ∝ 1 + a⟨x, â⟩ by rejection from the uniform law, accepted with
      probability (1 + a⟨x, â⟩)/(1 + a) ∈ [0, 1] (a ≤ 1);
    * ``vmf``: component k with probability w_k/Σw, then the von Mises–Fisher law
      ∝ exp(κ_k⟨x, ĉ_k⟩) (:data:`scipy.stats.vonmises_fisher`; κ_k = 0 is the uniform law).
    """
    rng = np.random.default_rng(seed)

    def uniform(m: int) -> np.ndarray:
        g = rng.standard_normal((m, d))
        return g / np.linalg.norm(g, axis=1, keepdims=True)

    kind = cfg.kind
    if kind == "uniform":
        return uniform(n)
    if kind == "cosine":
        a, amp = _unit(cfg.direction), cfg.amplitude
        out = np.empty((0, d))
        while out.shape[0] < n:  # acceptance rate ≥ 1/(1 + a) ≥ 1/2
            x = uniform(2 * (n - out.shape[0]) + 8)
            keep = rng.random(x.shape[0]) * (1.0 + amp) < 1.0 + amp * (x @ a)
            out = np.concatenate([out, x[keep]])
        return out[:n]
    if kind == "vmf":
        from scipy.stats import vonmises_fisher

        w = np.asarray(cfg.weights, float)
        k = rng.choice(w.size, size=n, p=w / w.sum())
        out = np.empty((n, d))
        for j, (c, kappa) in enumerate(zip(cfg.centres, cfg.kappas)):
            idx = np.flatnonzero(k == j)
            if idx.size == 0:
                continue
            if kappa == 0.0:
                out[idx] = uniform(idx.size)
            else:
                out[idx] = vonmises_fisher(_unit(c), kappa).rvs(idx.size, random_state=rng).reshape(-1, d)
        return out
    raise ValueError(f"initial.kind: {kind!r} cannot be sampled without a grid")


__all__ = ["initial_density", "low_mode_perturbation", "random_phase_density", "sample_initial"]
