"""Adaptive finite volumes for the mean-field continuity equation on S² and S¹ (``amr-fv``).

Equation.  ∂_t ρ + div_S(ρ X) = 0 on the unit sphere S² or circle S¹, with X = X_β[ρ](x) =
P_x V m_β[ρ](x) the attention drift (:class:`~spherepde.dynamics.attention.Attention`), or a
prescribed velocity X(t, x).

Discretisation.  Leaf masses m_i = ∫_{leaf i} ρ on the adaptive lon-lat mesh of
:mod:`.amr_mesh` (S²: 2:1-balanced leaves down to ``lmax`` levels below an ``nlat0`` base grid)
or the arcs of :mod:`.amr_circle` (S¹: 2·nlat0 base arcs of π/nlat0, halved per level), refined
where the mass is (:mod:`.amr_adapt`: a leaf splits above m_split = mass_per_cell·h^{d−1},
h = π/(nlat0·2^lmax) the finest cell width, d − 1 = 2 on S², 1 on S¹).  Semi-discrete update

    dm_i/dt = Σ_faces ± |f| u_f ρ_f^upwind,    u_f = ½(X(x_a) + X(x_b))·n_f,

with ρ_f^upwind the MUSCL value (limited linear reconstruction, ``limiter`` "mc" or "minmod",
clipped at 0) of the upwind leaf; a coarse–fine face is the sum of its fine faces
(Berger–Colella refluxing).  The velocity at the leaf centres x_i is, for attention, the one
implementation the particles use: ``attention.mean_and_stats(x, x, m)`` with the leaves as the
weighted points Σ m_i δ_{x_i}, then ``attention.velocity_from_mean`` (the same call as
:class:`~spherepde.solvers.lagrangian.particles.ParticleODE`).  Time: SSP-RK2 (Heun); the
stable step is the positivity bound dt ≤ courant·m_i/outflow_i at the first stage and
dt ≤ 0.9·m_i/outflow_i at the second (a step beyond either is split in halves internally),
so masses never go negative and the total is kept to round-off (fluxes are antisymmetric).
Every ``regrid_every`` steps one adapt pass.

Common transport noise (Stratonovich; ``noise`` a :class:`~spherepde.noise.field.NoiseField`,
``path`` its :class:`~spherepde.noise.brownian.BrownianPath`).  As in
:class:`~spherepde.solvers.eulerian.spde.SPDEFFSL`, a step over [t, t + Δt] adds the frozen
noise velocity u_W(x) = P_x Σ_k σ_k(x) ΔW_k/Δt, ΔW = path.increment(t, t + Δt), to the drift in
both Heun stages (Wong–Zakai: a velocity frozen over the step converges to the Stratonovich
solution as Δt → 0).  ``noise_substeps`` says how a step beyond the positivity bound is
split: ``"frozen"`` (default) into the fewest equal sub-steps within the bound, all with the
step's u_W (ΔW/Δt, re-evaluated at the leaf centres after an adapt pass: the sub-steps
integrate the same frozen velocity field, as SPDEFFSL's sub-stepped sweeps and the particles'
Heun step on the same path do), or ``"path"``: the bound depends on |u_W| ~ Δt^{−1/2}, so the
step is tried whole and halved dyadically until both stages keep every mass positive, each
half with the path's own increment over it (a Wong–Zakai resolution set by the mesh's positivity bound: a finer
path whose total variation ~ Σ|ΔW| grows like τ^{−1/2}, and with it the scheme's numerical
diffusion; docs/amr.md measures both).  The noise at the leaf centres is Σ_k T_kp ΔW_k/Δt with
a table T (K, n) of the basis computed once per mesh, so its bits depend on the leaves alone
(restart bit for bit).  Noise needs a fixed step (``stable_dt`` refuses); the velocity may
then be None (noise only).

State passing (the controller's :class:`~spherepde.solvers.controller.Stepper` protocol).  The
leaf set changes size, so the state is a plain float64 array of fixed shape (max_cells + 1, 6)
(``grid`` is a :class:`~spherepde.solvers.controller.StateSpace` of that shape, as for
``lagrangian-remap``): row 0 the header (n leaves, steps taken, nlat0, lmax, format, 0), rows
1..n the leaves (x0, x1, y0, y1, level, mass) — integers stored exactly — the rest zeros.  The
array is the whole state: saving it and stepping from the loaded copy is bit for bit the run
that never stopped.  ``output_grid`` (a GaussGrid, or a CircleGrid on S¹) receives the
density by the conservative remap of :mod:`.amr_remap` / :mod:`.amr_circle`
(:meth:`AMRDensity.field`); :meth:`AMRDensity.measure` gives the leaves as weighted points
(centres, masses).

Memory.  :func:`memory_estimate` bounds the bytes before anything is allocated; parameters it
cannot honour are refused with a ``ValueError`` naming them.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.dynamics.attention import Attention, compiled
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.solvers.controller import StateSpace
from spherepde.solvers.eulerian.amr_adapt import adapt
from spherepde.solvers.eulerian.amr_circle import (CircleLeafMesh, arc_integrals, arcs_to_circle,
                                                   circle_base_leaves, circle_to_arcs)
from spherepde.solvers.eulerian.amr_mesh import LIMITERS, FaceMesh, LeafMesh, base_leaves
from spherepde.solvers.eulerian.amr_remap import (gauss_to_leaves, leaf_integrals, leaves_to_gauss,
                                                  remap_bytes)

#: how sub-steps of a step with noise take the noise (module docstring)
NOISE_SUBSTEPS = ("frozen", "path")
#: state format number (header row, column 4)
FORMAT = 1
#: largest lmax accepted
MAX_LMAX = 16
#: largest nlat0·2^lmax (finest cell π/2^24 ≈ 1.9e-7 rad; keeps the int64 leaf keys exact)
MAX_ROWS = 2**24
#: bytes per leaf of the working arrays (geometry ≈ 30, faces ≈ 2.5 per leaf × 16, RK stages)
_BYTES_PER_LEAF = 8 * 120
#: the second stage needs dt·outflow ≤ this × mass (SSP: positive for any factor ≤ 1)
_STAGE2 = 0.9
#: targets per block of the attention sums (their scratch is block × n floats, a few times)
_ATT_BLOCK = 2048


def stored_leaves(state: np.ndarray) -> tuple[LeafMesh, np.ndarray]:
    """(mesh, leaf masses (n,)) of a stored S² state array (max_cells + 1, 6) — one time of
    run.nc's ``density_leaves``: header row (n, steps, nlat0, lmax, …), then the n leaves — for
    reading a run without its stepper (:meth:`AMRDensity.unpack` also checks the layout)."""
    n, _, nlat0, lmax = (int(v) for v in state[0, :4])
    return LeafMesh(nlat0, lmax, state[1:n + 1, :5].astype(np.int64)), state[1:n + 1, 5].copy()


def memory_estimate(max_cells: int, nlat_out: int, circle: bool = False) -> int:
    """Bytes the stepper may hold at once: the state, per-leaf work arrays at ``max_cells``
    leaves (geometry, faces, RK stages), the transfer onto the output grid (S²: the leaf–cell
    overlaps of :func:`~.amr_remap.remap_bytes`; S¹, where ``nlat_out`` is the circle's n: the
    arc–cell overlaps), the attention's scratch (blocks of targets × sources without numba)."""
    state = 8 * 6 * (max_cells + 1) * 3
    leaves = _BYTES_PER_LEAF * max_cells
    # the compiled sums keep O(n) per thread; the numpy fallback blocks of targets × sources
    attention = 8 * 64 * max_cells if compiled.available() else 8 * 3 * _ATT_BLOCK * max_cells
    # on S¹ an arc meets at most 2 cells unless it is longer than one: P ≤ 2·(max_cells + n)
    remap = 8 * 6 * 2 * (max_cells + nlat_out) if circle else remap_bytes(max_cells, nlat_out)
    return state + leaves + remap + attention


#: what :func:`levels_for_beta` aims at: the finest cell h has β·h² ≤ BETA_H2 (the kernel width
#: β^(−1/2) spans ≥ 10 finest cells), and a leaf splits above SPLIT_MASS of the mass
BETA_H2, SPLIT_MASS = 0.01, 1e-3


def levels_for_beta(beta: float, nlat0: int) -> tuple[int, float]:
    """(lmax, mass_per_cell) for attention at inverse temperature β on a base of nlat0 rows: the
    fewest levels whose finest cell h = π/(nlat0·2^lmax) has β·h² ≤ :data:`BETA_H2`, and the
    mass_per_cell that puts the split threshold mass_per_cell·h² at :data:`SPLIT_MASS`, so that
    the leaves number about 1/SPLIT_MASS per unit of spread-out mass at any depth, and a
    collapsed cluster a few rings per level.  ValueError for β that is not finite and > 0."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta < math.inf:
        raise ValueError(f"beta must be a finite number > 0 for the adaptive levels, got {beta!r}")
    nlat0 = _int("nlat0", nlat0, 2)
    lmax = 0
    while beta * (math.pi / (nlat0 * 2**lmax)) ** 2 > BETA_H2 and lmax < MAX_LMAX:
        lmax += 1
    h = math.pi / (nlat0 * 2**lmax)
    return lmax, SPLIT_MASS / h**2


def _int(name: str, value, lo: int, hi: int | None = None, what: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer{what}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f"≥ {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be {rng}{what}, got {value}")
    return int(value)


def _real(name: str, value, lo: float, hi: float | None = None, closed_hi: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v <= lo or (hi is not None and (v > hi if closed_hi else v >= hi)):
        rng = f"> {lo}" if hi is None else f"in ({lo}, {hi}{']' if closed_hi else ')'}"
        raise ValueError(f"{name} must be a finite number {rng}, got {value!r}")
    return v


class AMRDensity:
    """Adaptive finite-volume density stepper on S² or S¹; see the module docstring.

    Parameters
    ----------
    velocity : Attention or callable
        The attention head (drift X_β[ρ], density-dependent), or a prescribed velocity
        ``velocity(t, x) -> (n, d)`` at points x (n, d).
    output_grid : GaussGrid (S², d = 3) or CircleGrid (S¹, d = 2)
        Where :meth:`field` puts the density (run files, viewers).
    nlat0 : int, even, ≥ 4 (S¹: ≥ 2)
        Base rows (nlon0 = 2·nlat0; on S¹ 2·nlat0 arcs); the base cell is π/nlat0 wide.
    lmax : int in [0, 16], with nlat0·2^lmax ≤ 2^24
        Refinement levels below the base; the finest cell is h = π/(nlat0·2^lmax).
    mass_per_cell : float > 0
        A leaf splits when it holds more than mass_per_cell·h^{d−1} (equidistribution of mass).
    courant : float in (0, 1)
        Positivity factor of the step: dt·outflow_i ≤ courant·m_i at the first RK stage.
    regrid_every : int ≥ 1
        Steps between adapt passes.
    limiter : "mc" or "minmod"
    max_cells : int, optional
        Capacity of the state (leaves); default: every cell at lmax, at most 65 536 (at
        least the 2·nlat0² base cells).
        A run that needs more stops with a RuntimeError saying so.
    max_memory_gb : float
        Refuse (ValueError) a layout whose :func:`memory_estimate` exceeds it.
    polar_merge : int (a power of 2, ≥ 1), optional (S² only)
        The largest factor by which the base cells of the polar rows are merged in longitude
        (:func:`~.amr_mesh.merge_factors`); merged cells never refine.  None (default): the
        reduced grid's rule (up to nlon0/4, no base cell much thinner than tall); 1: no merging,
        every base cell refinable, the polar base cells as thin as cos φ·π/nlat0.  Merging
        costs accuracy where slow, low-mass flow crosses the grid's poles (the far tail of
        ``examples/metastability.toml``, docs/amr.md); no merging costs time steps only where the
        polar base cells are thinner than the finest cell h.
    pole : 3 numbers, optional (S², without noise)
        The direction of the mesh's north pole (normalised; default e_z).  The lon-lat raster is
        laid out in the frame of the rotation R that takes e_z to ``pole`` (:func:`pole_rotation`):
        a leaf centre x in the mesh's frame is the point R·x, velocities are computed there (the
        one attention formula) and turned back by Rᵀ.  Put the poles away from the points the
        dynamics single out: at β = 1000 on ``examples/metastability.toml`` the far tail drains
        from the saddles ±e_z, the default poles, and the mesh's polar cells there set most of
        the ``--refine 1.5`` change of W₂ (docs/prototypes/issue20/w2_change/README.md).  ``field``
        then averages the leaf densities at 4 × 4 points of each output cell, scaled to the exact
        mass (positive; :func:`_turned_field`); the initial density must be a function.
    attention_method, tol
        Passed to :meth:`Attention.mean_and_stats` (default "auto", 1e-8).
    noise, path : NoiseField and BrownianPath, optional (together)
        Common transport noise in the Stratonovich sense (module docstring); ``velocity`` may
        then be None (noise only).
    noise_substeps : "frozen" (default) or "path"
        What the positivity sub-steps of a step [t, t + Δt] take as noise: the step's u_W
        (ΔW over [t, t + Δt], divided by Δt) frozen, or the path's own increment over each
        sub-interval (module docstring).
    """

    name = "amr-fv"
    #: run.nc's variable of the native state (beside the field ``density`` on ``output_grid``)
    native_variable = "density_leaves"

    def __init__(self, velocity, output_grid: GaussGrid | CircleGrid, *, nlat0: int = 32, lmax: int = 3,
                 mass_per_cell: float = 3.3, courant: float = 0.5, regrid_every: int = 4,
                 limiter: str = "mc", max_cells: int | None = None, max_memory_gb: float = 4.0,
                 attention_method: str = "auto", tol: float = 1e-8, noise=None, path=None,
                 noise_substeps: str = "frozen", polar_merge: int | None = None,
                 pole=None) -> None:
        if not isinstance(output_grid, (GaussGrid, CircleGrid)):
            raise ValueError(f"output_grid must be a GaussGrid (S²) or a CircleGrid (S¹), got "
                             f"{type(output_grid).__name__}")
        self.circle = isinstance(output_grid, CircleGrid)
        self.d = 2 if self.circle else 3
        if isinstance(velocity, Attention):
            if velocity.d != self.d:
                raise ValueError(f"the attention must act in R^{self.d} ({type(output_grid).__name__}), "
                                 f"got d = {velocity.d}")
        elif velocity is None:
            if noise is None:
                raise TypeError("velocity must be an Attention or a callable velocity(t, x) "
                                "(None only with noise)")
        elif not callable(velocity):
            raise TypeError("velocity must be an Attention or a callable velocity(t, x)")
        if (noise is None) != (path is None):
            raise ValueError("noise and path go together: give both or neither")
        if noise is not None:
            if getattr(noise, "d", None) != self.d:
                raise ValueError(f"noise must act in R^{self.d} ({type(output_grid).__name__}), "
                                 f"got d = {getattr(noise, 'd', None)}")
            if tuple(getattr(path, "shape", ())) != tuple(noise.shape):
                raise ValueError(f"path.shape must be the noise field's coefficient shape "
                                 f"{noise.shape}, got {getattr(path, 'shape', None)}")
        if noise_substeps not in NOISE_SUBSTEPS:
            raise ValueError(f"noise_substeps must be one of {NOISE_SUBSTEPS}, got {noise_substeps!r}")
        self.noise, self.path, self.noise_substeps = noise, path, noise_substeps
        #: experimental ("frozen" noise): sub-steps ≤ courant·h/max|u| and an adapt pass after
        #: every sub-step, so the refinement can follow a cluster the noise carries
        self.follow = False
        self._table: tuple[FaceMesh, np.ndarray] | None = None  # (mesh, noise basis (K, n))
        self.velocity = velocity
        self.output_grid: GaussGrid | CircleGrid = output_grid
        if self.circle:
            self.nlat0 = _int("nlat0", nlat0, 2)
        else:
            self.nlat0 = _int("nlat0", nlat0, 4, what=" (even)")
            if self.nlat0 % 2:
                raise ValueError(f"nlat0 must be an even integer ≥ 4, got {nlat0}")
        self.lmax = _int("lmax", lmax, 0, MAX_LMAX)
        if self.nlat0 * 2**self.lmax > MAX_ROWS:
            raise ValueError(f"nlat0·2^lmax must be ≤ 2^24 (finest cell ≥ 1.9e-7 rad), got nlat0 = "
                             f"{self.nlat0}, lmax = {self.lmax}")
        self.mass_per_cell = _real("mass_per_cell", mass_per_cell, 0.0)
        self.courant = _real("courant", courant, 0.0, 1.0)
        self.regrid_every = _int("regrid_every", regrid_every, 1)
        if limiter not in LIMITERS:
            raise ValueError(f"limiter must be one of {sorted(LIMITERS)}, got {limiter!r}")
        self.limiter, self._limit = limiter, LIMITERS[limiter]
        base = 2 * self.nlat0 if self.circle else 2 * self.nlat0**2
        full = base * (2 if self.circle else 4)**self.lmax
        cap = max(base, min(full, 65_536)) if max_cells is None else max_cells
        self.max_cells = _int("max_cells", cap, base)
        gb = _real("max_memory_gb", max_memory_gb, 0.0)
        n_out = output_grid.n if isinstance(output_grid, CircleGrid) else output_grid.nlat
        self.memory_bytes = memory_estimate(self.max_cells, n_out, self.circle)
        if self.memory_bytes > gb * 2**30:
            raise ValueError(
                f"nlat0 = {self.nlat0}, lmax = {self.lmax}, max_cells = {self.max_cells} need about "
                f"{self.memory_bytes / 2**30:.2f} GiB, more than max_memory_gb = {gb:g}: lower max_cells "
                f"or raise max_memory_gb")
        self.method, self.tol = attention_method, tol
        self.h = math.pi / (self.nlat0 * 2**self.lmax)
        if polar_merge is not None:
            if self.circle:
                raise ValueError("polar_merge applies to the sphere only (the circle has no poles), "
                                 f"got {polar_merge!r}")
            pm = _int("polar_merge", polar_merge, 1, 2 * self.nlat0, what=" (a power of 2)")
            if pm & (pm - 1):
                raise ValueError(f"polar_merge must be a power of 2 (1 = no merging), got {pm}")
            polar_merge = pm
        self.polar_merge: int | None = polar_merge
        self._R: np.ndarray | None = None  # mesh frame → space (pole_rotation), None: the identity
        if pole is not None:
            if self.circle or noise is not None:
                raise ValueError(f"pole applies to the sphere without noise, got {pole!r}"
                                 + (" with noise" if noise is not None else " on the circle"))
            self._R = pole_rotation(pole)
        self.m_split = self.mass_per_cell * self.h ** (self.d - 1)
        self.grid = StateSpace(self.max_cells + 1, 6)
        self._mesh_cls = CircleLeafMesh if self.circle else LeafMesh
        self._mesh: FaceMesh | None = None
        self._stage0: tuple | None = None  # (t, state copy, rhs, outflow) of the last stable_dt
        self.last_stats: dict = {}

    def options(self) -> dict:
        out = {"stepper": self.name, "nlat0": self.nlat0, "lmax": self.lmax,
               "mass_per_cell": self.mass_per_cell, "courant": self.courant,
               "regrid_every": self.regrid_every, "limiter": self.limiter,
               "max_cells": self.max_cells}
        if self.polar_merge is not None:
            out["polar_merge"] = self.polar_merge
        if self._R is not None:
            out["pole"] = self._R[:, 2].tolist()  # the unit pole R·e_z
        if self.noise is not None:
            out.update(noise=self.noise.to_dict(), path=self.path.to_dict(), scheme="stratonovich",
                       noise_substeps=self.noise_substeps)
        return out

    # ---- state -------------------------------------------------------------------------
    def pack(self, leaves: np.ndarray, m: np.ndarray, steps: int = 0) -> np.ndarray:
        """The state array (max_cells + 1, 6) of leaves (n, 5) and masses (n,)."""
        n = leaves.shape[0]
        if n > self.max_cells:
            raise RuntimeError(f"{n} leaves exceed max_cells = {self.max_cells}")
        out = np.zeros(self.grid.shape)
        out[0, :5] = n, steps, self.nlat0, self.lmax, FORMAT
        out[1:n + 1, :5], out[1:n + 1, 5] = leaves, m
        return out

    def unpack(self, state: np.ndarray) -> tuple[FaceMesh, np.ndarray, int]:
        """(mesh, masses (n,), steps) of a state array; ValueError if it is not one of this
        stepper's layout."""
        state = np.asarray(state)
        if state.shape != self.grid.shape:
            raise ValueError(f"state has shape {state.shape}, this stepper needs {self.grid.shape}")
        n, steps, nlat0, lmax, fmt = (int(v) for v in state[0, :5])
        if (nlat0, lmax, fmt) != (self.nlat0, self.lmax, FORMAT) or not 0 < n <= self.max_cells:
            raise ValueError(f"state header (n={n}, nlat0={nlat0}, lmax={lmax}, format={fmt}) "
                             f"does not match this stepper (nlat0={self.nlat0}, lmax={self.lmax}, "
                             f"format={FORMAT})")
        leaves = state[1:n + 1, :5].astype(np.int64)
        if self._mesh is None or not np.array_equal(self._mesh.leaves, leaves):
            self._mesh = self._mesh_cls(self.nlat0, self.lmax, leaves)
        return self._mesh, state[1:n + 1, 5].copy(), steps

    def initial_state(self, density, *, normalise: bool = True) -> np.ndarray:
        """State of ρ₀ given as a function ``density(x) -> (k,)`` of Cartesian points (k, d)
        (leaf integrals by a 4×4 Gauss rule, 4 points on S¹) or as an array on ``output_grid``
        (cell averages, remapped conservatively); the mesh is adapted to ρ₀ until it stops
        changing (at most lmax + 2 passes).  ``normalise``: scale to mass 1."""
        if callable(density):
            integrals = arc_integrals if self.circle else leaf_integrals
            f = density if self._R is None else (lambda y: density(self.space(y)))
            masses = lambda mesh: integrals(mesh, f)  # noqa: E731
        elif self._R is not None:
            raise ValueError("with pole, the initial density must be a function of the points "
                             "(a density on output_grid is not remapped into the turned mesh)")
        else:
            rho = np.asarray(density, float)
            if rho.shape != self.output_grid.shape or not np.all(np.isfinite(rho)):
                raise ValueError(f"the initial density must be finite with shape "
                                 f"{self.output_grid.shape} (output_grid), got {rho.shape}")
            grid = self.output_grid
            if isinstance(grid, CircleGrid):
                masses = lambda mesh: circle_to_arcs(grid, rho, mesh)  # noqa: E731
            else:
                masses = lambda mesh: gauss_to_leaves(grid, rho, mesh)  # noqa: E731
        leaves = (circle_base_leaves(self.nlat0, self.lmax) if self.circle
                  else base_leaves(self.nlat0, self.lmax, self.polar_merge))
        for _ in range(self.lmax + 2):
            mesh = self._mesh_cls(self.nlat0, self.lmax, leaves)
            m = masses(mesh)
            if np.any(m < 0) or not m.sum() > 0:
                raise ValueError("the initial density must be non-negative with positive mass")
            new = adapt(mesh, m, self.m_split * float(m.sum()), self._limit, self.max_cells)
            if new is None:
                break
            leaves = new[0]
        mesh = self._mesh_cls(self.nlat0, self.lmax, leaves)
        m = masses(mesh)
        self._mesh = mesh
        return self.pack(leaves, m / m.sum() if normalise else m)

    def field(self, state: np.ndarray) -> np.ndarray:
        """ρ on ``output_grid`` (conservative remap of the leaves), shape ``output_grid.shape``."""
        mesh, m, _ = self.unpack(state)
        grid = self.output_grid
        if isinstance(grid, CircleGrid):
            assert isinstance(mesh, CircleLeafMesh)
            return arcs_to_circle(mesh, m, grid) / grid.cell_length
        assert isinstance(mesh, LeafMesh)
        if self._R is not None:
            return _turned_field(mesh, m, self._R, grid)
        return leaves_to_gauss(mesh, m, grid) / grid.cell_area

    def measure(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The leaves as weighted points: centres (n, d) (turned by ``pole``), masses (n,)."""
        mesh, m, _ = self.unpack(state)
        return self.space(mesh.xc).copy(), m

    def space(self, x: np.ndarray) -> np.ndarray:
        """Points (n, d) of the mesh's frame as points of space: R·x (``pole``), else x."""
        return x if self._R is None else x @ self._R.T

    def mass(self, state: np.ndarray) -> float:
        n = int(state[0, 0])
        return float(state[1:n + 1, 5].sum())

    def info(self, state: np.ndarray) -> dict:
        """What the run's progress records per output: leaves, steps, finest level in use."""
        n = int(state[0, 0])
        return {"leaves": n, "amr_steps": int(state[0, 1]),
                "finest_level": int(state[1:n + 1, 4].max())}

    def restart_info(self) -> dict:
        """Nothing beyond the state array (the run pipeline's hook)."""
        return {}

    def resume(self, info) -> None:
        """The state array holds everything a restart needs (the run pipeline's hook)."""

    # ---- dynamics ----------------------------------------------------------------------
    def leaf_velocity(self, mesh: FaceMesh, m: np.ndarray, t: float,
                      u: np.ndarray | None = None) -> np.ndarray:
        """X (n, d) at the leaf centres (plus the frozen noise velocity ``u`` when given), in the
        mesh's frame (computed at the points of space, turned back by Rᵀ: ``pole``)."""
        if self.velocity is None:
            return np.zeros_like(mesh.xc) if u is None else u
        if u is not None:
            return self.leaf_velocity(mesh, m, t) + u
        x = self.space(mesh.xc)
        if isinstance(self.velocity, Attention):
            mean, self.last_stats = self.velocity.mean_and_stats(x, x, m, method=self.method,
                                                                 tol=self.tol)
            X = self.velocity.velocity_from_mean(x, mean)
        else:
            X = np.asarray(self.velocity(t, x), float).reshape(x.shape)
        return X if self._R is None else X @ self._R

    def rhs(self, mesh: FaceMesh, m: np.ndarray, t: float,
            u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(dm/dt (n,), outflow (n,) ≥ 0) at masses m (``u``: a frozen noise velocity added)."""
        rho = m / mesh.area
        X = self.leaf_velocity(mesh, m, t, u)
        fa, fb = mesh.fa, mesh.fb
        un = 0.5 * np.sum((X[fa] + X[fb]) * mesh.fnormal, axis=1)
        sl = mesh.slopes(rho, self._limit)
        ra = np.maximum(rho[fa] + np.sum(sl[fa] * mesh.off_a, 1), 0.0)
        rb = np.maximum(rho[fb] + np.sum(sl[fb] * mesh.off_b, 1), 0.0)
        F = mesh.flen * np.where(un > 0, un * ra, un * rb)  # flux a → b
        n = mesh.n
        dm = np.bincount(fb, weights=F, minlength=n) - np.bincount(fa, weights=F, minlength=n)
        out = (np.bincount(fa, weights=np.maximum(F, 0.0), minlength=n)
               + np.bincount(fb, weights=np.maximum(-F, 0.0), minlength=n))
        return dm, out

    @staticmethod
    def _dt_euler(m: np.ndarray, out: np.ndarray) -> float:
        """The forward-Euler positivity bound min_i m_i/outflow_i."""
        pos = out > 0
        return float(np.min(m[pos] / out[pos])) if np.any(pos) else math.inf

    def _dt_pos(self, m: np.ndarray, out: np.ndarray) -> float:
        return self.courant * self._dt_euler(m, out)

    def stable_dt(self, state: np.ndarray, t: float) -> float:
        if self.noise is not None:
            raise ValueError("an adaptive time step cannot be combined with noise (the step would "
                             "depend on the path); give a fixed dt")
        mesh, m, _ = self.unpack(state)
        L0, o0 = self.rhs(mesh, m, t)
        self._stage0 = (t, np.array(state, copy=True), L0, o0)
        return self._dt_pos(m, o0)

    def _heun(self, mesh, m, t, dt, L0, o0, depth=0, u=None):
        """SSP-RK2 over dt, split in halves while a stage would break positivity (``u``: a
        frozen noise velocity added in every stage)."""
        if depth > 40:
            raise RuntimeError(f"amr-fv: no positive step found at t = {t}")
        if dt <= self._dt_pos(m, o0) * (1 + 1e-9):
            m1 = m + dt * L0
            L1, o1 = self.rhs(mesh, m1, t + dt, u)
            if dt <= _STAGE2 * self._dt_euler(m1, o1):
                return 0.5 * m + 0.5 * (m1 + dt * L1)
        h = 0.5 * dt
        mh = self._heun(mesh, m, t, h, L0, o0, depth + 1, u)
        return self._heun(mesh, mh, t + h, h, *self.rhs(mesh, mh, t + h, u), depth + 1, u)

    def _finish_substep(self, mesh, m, steps, t, regrid=False):
        """After a (sub-)step from t that gave the masses m: refuse a negative mass, count the step,
        and adapt every ``regrid_every`` steps (or when ``regrid``).  (mesh, masses, steps,
        whether the mesh changed)."""
        if np.any(m < 0):
            raise RuntimeError(f"amr-fv: negative mass {m.min():.3g} after the step at t = {t}")
        steps += 1
        if regrid or steps % self.regrid_every == 0:
            new = adapt(mesh, m, self.m_split * float(m.sum()), self._limit, self.max_cells)
            if new is not None:
                self._mesh = mesh = self._mesh_cls(self.nlat0, self.lmax, new[0])
                return mesh, new[1], steps, True
        return mesh, m, steps, False

    def step(self, state: np.ndarray, t: float, dt: float) -> np.ndarray:
        """Advance ``state`` by ``dt``: one SSP-RK2 step, or — when dt exceeds the positivity
        bound (a fixed step of the run pipeline) — the fewest equal sub-steps within it, each
        bound recomputed, with an adapt pass every ``regrid_every`` (sub-)steps."""
        if self.noise is not None:
            return self._step_noise(state, t, dt)
        mesh, m, steps = self.unpack(state)
        s0 = self._stage0
        if s0 is not None and s0[0] == t and np.array_equal(s0[1], state):
            L0, o0 = s0[2], s0[3]
        else:
            L0, o0 = self.rhs(mesh, m, t)
        self._stage0 = None
        left = dt
        while True:
            bound = self._dt_pos(m, o0)
            n = 1 if left <= bound * (1 + 1e-9) else math.ceil(left / bound)
            h = left / n
            m = self._heun(mesh, m, t, h, L0, o0)
            mesh, m, steps, _ = self._finish_substep(mesh, m, steps, t)
            if n == 1:
                return self.pack(mesh.leaves, m, steps)
            t, left = t + h, left - h
            L0, o0 = self.rhs(mesh, m, t)

    # ---- common noise ------------------------------------------------------------------
    def noise_table(self, mesh: FaceMesh) -> np.ndarray:
        """T (K, n): T[k, p] = σ_k(x_p), the noise field's basis k at the leaf centres, so that
        the field of increments ΔW (K, d) is T.T @ ΔW.  Computed once per mesh, always by the
        field's direct evaluation (its point cache is reset first), so the bits depend on the
        leaves alone."""
        c = self._table
        if c is not None and c[0] is mesh:
            return c[1]
        noise = self.noise
        K = noise.n_coefficients
        noise.prime(np.full((1, self.d), np.nan))  # forget the last points: direct evaluation
        # d basis functions per evaluation: batch j puts coefficient j·d + c in component c
        d, B = self.d, -(-K // self.d)
        one_hot = np.zeros((B, K, d))
        k = np.arange(K)
        one_hot[k // d, k, k % d] = 1.0
        vals = noise.values(one_hot, mesh.xc)  # (B, n, d): vals[j, p, c] = σ_{j·d+c}(x_p)
        table = np.ascontiguousarray(np.moveaxis(vals, 2, 1).reshape(B * d, -1)[:K])  # (K, n)
        noise.prime(np.full((1, self.d), np.nan))
        self._table = (mesh, table)
        return table

    def noise_velocity(self, mesh: FaceMesh, t: float, dt: float,
                       coef: np.ndarray | None = None) -> np.ndarray:
        """u_W = P_x Σ_k σ_k(x) ΔW_k/dt (n, d) at the leaf centres, ΔW = path.increment(t, t + dt)
        (or ``coef`` = ΔW/dt given: the frozen velocity of a step evaluated on a new mesh)."""
        if coef is None:
            if not (math.isfinite(dt) and dt > 0):
                raise ValueError(f"dt must be a positive finite number, got {dt!r}")
            coef = np.asarray(self.path.increment(t, t + dt), float) / dt
        x = mesh.xc
        v = self.noise_table(mesh).T @ coef
        return v - np.sum(v * x, axis=1, keepdims=True) * x

    def _advance_noise(self, mesh, m, steps, t, dt, coef=None, depth=0):
        """Heun over [t, t + dt] with the noise velocity frozen: ``coef`` = ΔW/Δt of the run's
        step (``noise_substeps = "frozen"``) or, when None, the path's own increment over
        [t, t + dt] (``"path"``); halved while a stage would break positivity.  (mesh, m, steps)."""
        if depth > 40:
            raise RuntimeError(f"amr-fv: no positive step found at t = {t}")
        u = self.noise_velocity(mesh, t, dt, coef)
        L0, o0 = self.rhs(mesh, m, t, u)
        if dt <= self._dt_pos(m, o0) * (1 + 1e-9):
            m1 = m + dt * L0
            L1, o1 = self.rhs(mesh, m1, t + dt, u)
            if dt <= _STAGE2 * self._dt_euler(m1, o1):
                m = 0.5 * m + 0.5 * (m1 + dt * L1)
                mesh, m, steps, _ = self._finish_substep(mesh, m, steps, t)
                return mesh, m, steps
        h = 0.5 * dt
        mesh, m, steps = self._advance_noise(mesh, m, steps, t, h, coef, depth + 1)
        return self._advance_noise(mesh, m, steps, t + h, h, coef, depth + 1)

    def _step_noise(self, state: np.ndarray, t: float, dt: float) -> np.ndarray:
        """:meth:`step` with noise: Heun over [t, t + dt], split dyadically for positivity
        (module docstring)."""
        mesh, m, steps = self.unpack(state)
        self._stage0 = None
        coef = None
        if self.noise_substeps == "frozen":
            if not (math.isfinite(dt) and dt > 0):
                raise ValueError(f"dt must be a positive finite number, got {dt!r}")
            coef = np.asarray(self.path.increment(t, t + dt), float) / dt
            mesh, m, steps = self._advance_frozen(mesh, m, steps, t, dt, coef)
        else:
            mesh, m, steps = self._advance_noise(mesh, m, steps, t, dt, coef)
        return self.pack(mesh.leaves, m, steps)

    def _advance_frozen(self, mesh, m, steps, t, dt, coef):
        """The frozen velocity field ΔW/Δt (plus the drift) over [t, t + dt] in the fewest equal
        sub-steps within the positivity bound, each bound recomputed (as :meth:`step` without
        noise; a sub-step whose second stage breaks positivity is halved)."""
        u = self.noise_velocity(mesh, t, dt, coef)
        L0, o0 = self.rhs(mesh, m, t, u)
        left = dt
        while True:
            bound = self._dt_pos(m, o0)
            if self.follow:  # the noise moves the mass ≤ courant finest cells per sub-step
                bound = min(bound, self.courant * self.h / max(float(np.abs(u).max()), 1e-300))
            n = 1 if left <= bound * (1 + 1e-9) else math.ceil(left / bound)
            h = left / n
            m = self._heun(mesh, m, t, h, L0, o0, u=u)
            mesh, m, steps, adapted = self._finish_substep(mesh, m, steps, t, regrid=self.follow)
            if adapted:
                u = self.noise_velocity(mesh, t, dt, coef)
            if n == 1:
                return mesh, m, steps
            t, left = t + h, left - h
            L0, o0 = self.rhs(mesh, m, t, u)


def pole_rotation(pole) -> np.ndarray:
    """R (3, 3), a rotation that takes e_z to the unit vector p of ``pole``: the shortest turn
    (about e_z × p) when p_z ≥ 0; else the half turn H about e_x after the shortest turn to H·p
    (so that Rodrigues' 1/(1 + cos) stays ≤ 1 and R is orthogonal to round-off everywhere).
    ValueError unless ``pole`` is 3 finite numbers, not all 0."""
    try:
        p = np.asarray(pole, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"pole must be 3 numbers (a direction), got {pole!r}") from None
    if p.shape != (3,) or not np.all(np.isfinite(p)) or not np.linalg.norm(p) > 0:
        raise ValueError(f"pole must be 3 finite numbers, not all 0 (a direction), got {pole!r}")
    p = p / np.linalg.norm(p)
    if p[2] < 0:
        H = np.diag([1.0, -1.0, -1.0])
        return H @ pole_rotation(H @ p)
    k = np.array([-p[1], p[0], 0.0])  # e_z × p, |k| = sin of the angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + kx + kx @ kx / (1.0 + p[2])


def locate(mesh: LeafMesh, x: np.ndarray) -> np.ndarray:
    """Index (k,) of the leaf of ``mesh`` that holds each point x (k, 3) of the mesh's frame: the
    raster cell (ix, iy) of the point, then, level by level (and at level 0 for every longitude
    merge factor), the leaf whose corner (x0, y0) that cell rounds down to, found among the
    leaves' sorted keys."""
    lon = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * math.pi)
    lat = np.arcsin(np.clip(x[:, 2], -1.0, 1.0))
    ix = np.minimum((lon / mesh.dlon_f).astype(np.int64), mesh.NX - 1)
    iy = np.clip(((lat + 0.5 * math.pi) / mesh.dlat_f).astype(np.int64), 0, mesh.NY - 1)

    def key(x0, y0, level):
        return (level * (mesh.NY + 1) + y0) * (mesh.NX + 1) + x0

    keys = key(mesh.x0, mesh.y0, mesh.level)
    order = np.argsort(keys)
    ks = keys[order]
    out = np.full(ix.size, -1, dtype=np.int64)
    tries = [(lev, mesh.S >> lev) for lev in range(mesh.lmax, 0, -1)]
    tries += [(0, mesh.S << j) for j in range(int(math.log2(mesh.NX // mesh.S)) + 1)]
    for lev, w in tries:
        todo = out < 0
        if not todo.any():
            break
        h = mesh.S >> lev
        k = key(ix[todo] - ix[todo] % w, iy[todo] - iy[todo] % h, lev)
        pos = np.minimum(np.searchsorted(ks, k), ks.size - 1)
        hit = ks[pos] == k
        out[np.flatnonzero(todo)[hit]] = order[pos[hit]]
    if np.any(out < 0):
        raise RuntimeError("amr-fv: a point lies in no leaf (the leaves do not tile the sphere)")
    return out


def _turned_field(mesh: LeafMesh, m: np.ndarray, R: np.ndarray, grid: GaussGrid,
                  k: int = 4) -> np.ndarray:
    """ρ (grid.shape) on the output grid from leaves laid out in the frame of R: each cell's
    average of the leaf densities m/area at k × k points of its equal-area sub-cells (taken back
    into the mesh's frame by Rᵀ), scaled so that Σ ρ·cell_area = Σ m (exact in mass; positive)."""
    f = (np.arange(k) + 0.5) / k
    lon = (np.arange(grid.nlon)[:, None] - 0.5 + f[None, :]) * grid.dlon  # (nlon, k)
    mu0, mu1 = grid.mu_faces[:-1], grid.mu_faces[1:]
    mu = mu0[:, None] + (mu1 - mu0)[:, None] * f[None, :]  # (nlat, k)
    lam = np.broadcast_to(lon[None, None, :, :], (grid.nlat, k, grid.nlon, k))
    mus = np.broadcast_to(mu[:, :, None, None], lam.shape)
    x = lonlat_to_xyz(lam.reshape(-1), np.arcsin(np.clip(mus.reshape(-1), -1.0, 1.0)))
    rho = (m / mesh.area)[locate(mesh, x @ R)].reshape(grid.nlat, k, grid.nlon, k).mean((1, 3))
    total = float(np.sum(rho * grid.cell_area))
    return rho * (float(m.sum()) / total) if total > 0 else rho
