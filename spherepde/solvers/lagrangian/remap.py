"""Weighted Lagrangian points with a conservative remap onto a grid adapted to the mass
(``lagrangian-remap``): a representation of a measure on S² that stays as sharp as the flow makes
it (issue "follow the concentration"; design and measurements: docs/prototypes/issue11).

State: ρ = Σ_j w_j δ_{x_j}, the points moved by the particle SDE/ODE (the same velocity and
noise code as every other path).  Every ``remap_every`` steps the points are deposited onto an
:class:`AdaptedGrid` — a latitude–longitude grid whose pole sits on the mass's mean direction c,
Schmidt-stretched so that ``cells_per_width`` polar cells span the rms width
σ = √(2(1 − |Σ w_j x_j| / Σ w_j)) — and replaced by one point per non-empty cell, at the mass
centroid of what it received, carrying that cell's mass:

    w'_k = Σ_{x_j ∈ cell k} w_j,   x'_k = Σ_{x_j ∈ cell k} w_j x_j / |Σ_{x_j ∈ cell k} w_j x_j|.

The remap is exact in mass (a sum), positive (weights are sums of positive weights) and keeps
each cell's first moment up to the projection onto S²; it caps the number of points at the
grid's cell count.  Depositing at cell centres instead adds spread at every remap, and a fixed,
unadapted grid loses the cluster (measured in the prototype report).  With attention the points
carry their own drift (the weighted point attention).  Limitation: one adapted pole — several
separated clusters get the resolution of the stretched grid away from its pole.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.solvers.controller import StateSpace
from spherepde.solvers.lagrangian.particles import retract


def rotation_to_pole(c: np.ndarray) -> np.ndarray:
    """An orthogonal R (3, 3) with R c = e_z for a nonzero c (3,)."""
    c = np.asarray(c, float)
    n = float(np.linalg.norm(c))
    if not (n > 0 and math.isfinite(n)):
        raise ValueError(f"the pole direction must be a nonzero finite vector, got {c!r}")
    c = c / n
    a = np.array([1.0, 0.0, 0.0]) if abs(c[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = a - (a @ c) * c
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(c, e1), c])


class AdaptedGrid:
    """nlat × 2·nlat cells in the frame R (pole on ``centre``): colatitude faces
    θ_j = 2 atan(tan(s_j / 2) / stretch), s_j = jπ/nlat (Schmidt's transform: the polar cells are
    ``stretch`` times smaller, the antipodal ones larger), longitude sectors of 2π/(2 nlat).
    Cells are exact spherical band × sector cells: area_jk = Δφ (cos θ_j − cos θ_{j+1})."""

    def __init__(self, centre: np.ndarray, stretch: float, nlat: int) -> None:
        if isinstance(nlat, bool) or not isinstance(nlat, (int, np.integer)) or nlat < 2:
            raise ValueError(f"nlat must be an integer ≥ 2, got {nlat!r}")
        if not (math.isfinite(stretch) and stretch >= 1.0):
            raise ValueError(f"stretch must be a finite number ≥ 1, got {stretch!r}")
        self.R = rotation_to_pole(centre)
        self.nlat, self.nlon, self.stretch = int(nlat), 2 * int(nlat), float(stretch)
        s = np.linspace(0.0, math.pi, self.nlat + 1)
        th = 2.0 * np.arctan(np.tan(0.5 * s[:-1]) / self.stretch)
        self.theta_faces = np.r_[th, math.pi]
        self.dphi = 2.0 * math.pi / self.nlon
        ring = self.dphi * (np.cos(self.theta_faces[:-1]) - np.cos(self.theta_faces[1:]))
        self.area = np.repeat(ring, self.nlon)  # (nlat·nlon,), sums to 4π

    @property
    def size(self) -> int:
        return self.nlat * self.nlon

    def index(self, x: np.ndarray) -> np.ndarray:
        """The cell (flat index, ring-major) of each point x (n, 3)."""
        xp = x @ self.R.T
        th = np.arccos(np.clip(xp[:, 2], -1.0, 1.0))
        j = np.clip(np.searchsorted(self.theta_faces, th, side="right") - 1, 0, self.nlat - 1)
        ph = np.mod(np.arctan2(xp[:, 1], xp[:, 0]), 2.0 * math.pi)
        i = np.minimum((ph / self.dphi).astype(np.int64), self.nlon - 1)
        return j * self.nlon + i

    def deposit(self, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cell masses (size,) and the unit mass centroids (size, 3) of the points x (n, 3) with
        weights w (n,) (centroid rows of empty cells are 0)."""
        idx = self.index(x)
        m = np.bincount(idx, weights=w, minlength=self.size)
        c = np.stack([np.bincount(idx, weights=w * x[:, k], minlength=self.size) for k in range(3)],
                     axis=1)
        nc = np.linalg.norm(c, axis=1, keepdims=True)
        return m, np.divide(c, nc, out=np.zeros_like(c), where=nc > 0)


def spread(x: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    """rms chordal width σ = √(2(1 − |m|)), m = Σ w x / Σ w, and the mean direction m/|m|
    (any unit vector when m = 0)."""
    m = (w[:, None] * x).sum(axis=0) / w.sum()
    r = float(np.linalg.norm(m))
    return math.sqrt(max(2.0 * (1.0 - r), 0.0)), (m / r if r > 0 else np.array([0.0, 0.0, 1.0]))


class LagrangianRemap:
    """Weighted points moved by ``particles`` (a ParticleSDE/ParticleODE-like object with
    ``step(x, t, dt)``), remapped every ``remap_every`` steps (module docstring).

    Parameters: ``grid_nlat`` (≥ 4) rings of the adapted grid, ``cells_per_width`` (> 0) polar
    cells across the rms width, ``remap_every`` (≥ 1) steps between remaps.  With attention
    (``particles.attention`` set) the drift is the weighted attention of the points themselves,
    X[Σ_j w_j δ_{x_j}](x_i): before every step the current weights are handed to the particle
    solver (``particles.weights = w``), so the velocity and noise formulas stay those of the
    particle path.
    """

    def __init__(self, particles, *, grid_nlat: int = 48, cells_per_width: float = 8.0,
                 remap_every: int = 25) -> None:
        if isinstance(grid_nlat, bool) or not isinstance(grid_nlat, (int, np.integer)) or grid_nlat < 4:
            raise ValueError(f"grid_nlat must be an integer ≥ 4, got {grid_nlat!r}")
        if not (isinstance(cells_per_width, (int, float)) and math.isfinite(cells_per_width)
                and cells_per_width > 0):
            raise ValueError(f"cells_per_width must be a positive number, got {cells_per_width!r}")
        if isinstance(remap_every, bool) or not isinstance(remap_every, (int, np.integer)) \
                or remap_every < 1:
            raise ValueError(f"remap_every must be an integer ≥ 1, got {remap_every!r}")
        self.particles = particles
        self.grid_nlat, self.cells_per_width = int(grid_nlat), float(cells_per_width)
        self.remap_every = int(remap_every)
        self.steps = 0
        self.remaps = 0

    def adapted_grid(self, x: np.ndarray, w: np.ndarray) -> AdaptedGrid:
        """The grid of the next remap: pole on the mean direction, stretch
        max(1, cells_per_width·(π/grid_nlat)/σ)."""
        sigma, c = spread(x, w)
        ds = math.pi / self.grid_nlat
        stretch = min(1e12, max(1.0, self.cells_per_width * ds / sigma)) if sigma > 0 else 1e12
        return AdaptedGrid(c, stretch, self.grid_nlat)

    def remap(self, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One point per non-empty cell of the adapted grid (module docstring)."""
        m, c = self.adapted_grid(x, w).deposit(x, w)
        keep = m > 0
        self.remaps += 1
        return c[keep], m[keep]

    def step(self, x: np.ndarray, w: np.ndarray, t: float, dt: float):
        """(x, w) after one step of the particles, remapped when the count is due."""
        if getattr(self.particles, "attention", None) is not None:
            self.particles.weights = w  # the drift X[Σ w_j δ_{x_j}] of the current points
        x = retract(self.particles.step(x, t, dt))
        self.steps += 1
        if self.steps % self.remap_every == 0:
            x, w = self.remap(x, w)
        return x, w


# ---- the representation as a density: initial points, the field on the Gauss grid, the stepper
def points_from_density(grid, rho: np.ndarray, *, drop: float = 1e-13) -> tuple[np.ndarray, np.ndarray]:
    """The quadrature of a density ``rho`` (grid.shape) on a GaussGrid as weighted points: the
    cell centres y_j (n, 3) with w_j = ρ_j |cell_j| (n,), cells with w_j ≤ ``drop``·max w left
    out (they carry < ``drop``·cells of the mass), then w normalised to Σ w = 1."""
    w = (np.asarray(rho, float) * grid.cell_area).reshape(-1)
    if not (np.all(np.isfinite(w)) and w.min() >= 0 and w.max() > 0):
        raise ValueError("rho must be finite, non-negative and not zero everywhere")
    keep = w > drop * w.max()
    return grid.xyz.reshape(-1, 3)[keep].copy(), w[keep] / w[keep].sum()


def deposit_on_grid(grid, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The cell averages of ρ = Σ_i w_i δ_{x_i} on a GaussGrid: ρ_jk = (Σ_{x_i ∈ cell jk} w_i) / |cell jk|,
    shape grid.shape.  Exact in mass (∫ρ = Σ w) and positive; points at the cell centres give
    back the density they were made from (:func:`points_from_density`).  Where the points are
    no denser than the cells (a diffuse measure after remaps onto a grid as fine as this one) the
    field shows grid-scale aliasing; integrals of the measure are computed on the points."""
    mu = np.clip(x[:, 2], -1.0, 1.0)
    j = np.clip(np.searchsorted(-grid.mu_faces, -mu, side="right") - 1, 0, grid.nlat - 1)
    lon = np.mod(np.arctan2(x[:, 1], x[:, 0]) + 0.5 * grid.dlon, 2.0 * math.pi)
    i = np.minimum((lon / grid.dlon).astype(np.int64), grid.nlon - 1)
    m = np.bincount(j * grid.nlon + i, weights=w, minlength=grid.nlat * grid.nlon)
    return m.reshape(grid.shape) / grid.cell_area


class RemapStepper:
    """:class:`LagrangianRemap` as a density stepper of the run loop (``representations.density.scheme =
    "lagrangian-remap"``).

    The state is a fixed-size array (M, 4) of rows (x, y, z, w): the points of ρ = Σ w_i δ_{x_i}
    with w_i > 0 first, unused rows 0 (M = ``capacity``, at least the number of initial points
    and of the adapted grid's cells, so a remap always fits).  ``field`` is ρ on the output
    GaussGrid (:func:`deposit_on_grid`), ``measure`` the points themselves (the diagnostics
    integrate them exactly), ``mass`` Σ w.  ``remap.steps`` (the steps since the start, which
    decides when the next remap is due) is part of the state a restart needs (``restart_info``).
    """

    name = "lagrangian-remap"
    #: run.nc's variable of the native state (beside the field ``density``)
    native_variable = "density_points"

    def __init__(self, remap: LagrangianRemap, grid, capacity: int) -> None:
        self.remap, self.output_grid = remap, grid
        cells = 2 * remap.grid_nlat * remap.grid_nlat
        if capacity < cells:
            raise ValueError(f"capacity must be at least the adapted grid's {cells} cells, got {capacity}")
        self.grid = StateSpace(int(capacity), 4)

    def pack(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Rows (x, w) of the points, then zero rows up to the capacity."""
        m = self.grid.shape[0]
        if w.size > m:
            raise ValueError(f"{w.size} points do not fit the capacity {m}")
        out = np.zeros((m, 4))
        out[: w.size, :3], out[: w.size, 3] = x, w
        return out

    @staticmethod
    def measure(state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The points x (n, 3) and weights w (n,) of the rows with w > 0."""
        live = state[:, 3] > 0
        return state[live, :3], state[live, 3]

    def field(self, state: np.ndarray) -> np.ndarray:
        return deposit_on_grid(self.output_grid, *self.measure(state))

    @staticmethod
    def mass(state: np.ndarray) -> float:
        return float(state[:, 3].sum())

    def stable_dt(self, state, t):
        raise ValueError("lagrangian-remap takes the fixed step of stepping.dt / stepping.courant")

    def step(self, state: np.ndarray, t: float, dt: float) -> np.ndarray:
        return self.pack(*self.remap.step(*self.measure(state), t, dt))

    def restart_info(self) -> dict:
        return {"remap_steps": self.remap.steps, "remaps": self.remap.remaps}

    def info(self, state: np.ndarray) -> dict:
        """What the run's progress records per output: live points and the remap counters."""
        return {"points": int(np.count_nonzero(state[:, 3])), **self.restart_info()}

    def resume(self, info: dict) -> None:
        self.remap.steps, self.remap.remaps = int(info["remap_steps"]), int(info["remaps"])
