"""Paper 1 (Alcalde–Bungert–Riedl–Roith 2026), ``spherepde experiment metastability``: the
two-phase picture as densities on S².

W₂(ρ^β_t, Π_#ρ_0) against t for several β, the minimum over t and the exit time from the
metastable state against β, fitted against sqrt(log β / β) and log β.  The set-up is a ``spherepde run``
configuration (:func:`setup_run_config`), shared with
:mod:`~spherepde.experiments.terminal_phase` and
:mod:`~spherepde.experiments.particles_vs_density`; :func:`sphere_runs` runs it as one
``spherepde sweep`` over β and reads back W₂ and the eigenspace distances from ``sweep.nc``.

Set-up (and why).  Q = I, K = B = diag(1/10, 1, 1), V = diag(1, 1/2, 1/10), so
A = VBᵀ = diag(1/10, 1/2, 1/100): symmetric (Assumption 1), top eigenvector e = e_y with
spectral gap γ = 0.4 (early phase at rate c ≈ γ/‖B‖ = 0.4), while V's own top eigenvector is
e_x and e_y is a saddle of the V-flow ẋ = P_x V x with unstable rate 1 − 1/2 = 1/2.  A cluster
that has formed at ±e_y is displaced from e_y by O(1/β) at finite β, and that displacement
grows like e^{t/2}: the exit from the metastable state comes at t ~ 2 log β and the terminal
phase (mass moving to ±e_x, Conjecture 1) is visible within moderate times.
ρ_0 ∝ 1 + ½⟨x, a⟩ with a = (0.6, 0.5, 0.3)/|·| is smooth, strictly positive and not symmetric
under y → −y, so Π_#ρ_0 = a δ_e + (1 − a) δ_{−e} has unequal weights.

The density is ``amr`` by default, its mesh's north pole turned off the saddles ±e_z (the
raster's own poles, whose merged and thin cells set most of the ``--refine 1.5`` change there):
``amr_pole = "auto"`` takes [1, 1, 1]/√3, or the next of :data:`POLE_CANDIDATES` when that lies
within 20° of an eigenvector of V, B or VBᵀ (:func:`default_pole`); ``--amr-pole off`` gives the
runs of before.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import warnings
from dataclasses import asdict, dataclass
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spherepde.experiments.study import study
from spherepde.grids import GaussGrid
from spherepde.validation.fits import exit_time, fit_order, fit_vs_log_beta
from spherepde.validation.metrics import as_measure, top_eigenspace, two_point_weight_function
from spherepde.validation.resolution import switch_change, trajectory_change


#: the density schemes of the S² experiments
DENSITY_SCHEMES = ("amr", "ffsl-ppm")


@dataclass(frozen=True)
class MetastabilityConfig:
    """Parameters of ``spherepde experiment metastability`` (β = math.inf allowed)."""

    #: rows of the grid (and of the amr base); None: :attr:`grid_nlat` (amr: from the largest
    #: finite β, :func:`base_nlat_for_beta`; ffsl-ppm: 32)
    nlat: int | None = None
    betas: tuple = (10.0, 30.0, 100.0, 300.0, math.inf)
    #: the density's scheme: "amr" (adaptive, base nlat rows, its levels set by the largest
    #: finite β: :func:`density_section`) or "ffsl-ppm" (the fixed grid of nlat rows)
    density_scheme: str = "amr"
    #: amr's (max_level, mass_per_cell); None: from the largest finite β (:func:`density_section`)
    amr_levels: tuple | None = None
    #: amr's mesh pole (``representations.density.pole``): "auto" (the first of
    #: :data:`POLE_CANDIDATES` at least :data:`POLE_MIN_ANGLE` degrees from every eigenvector of
    #: V, B = QᵀK and VBᵀ: :func:`default_pole`), "off" (the raster's own pole e_z: the runs of
    #: before the option) or 3 numbers (that direction; amr only)
    amr_pole: tuple | str = "auto"
    t_end: float = 24.0
    n_outputs: int = 96
    courant: float = 0.8
    Q: tuple = ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    K: tuple = ((0.1, 0, 0), (0, 1.0, 0), (0, 0, 1.0))
    V: tuple = ((1.0, 0, 0), (0, 0.5, 0), (0, 0, 0.1))
    init_a: tuple = (0.6, 0.5, 0.3)
    band: float = 2.0  # exit when W₂ exceeds band × its minimum, after the minimum
    #: the largest β is run again at this nlat and ``resolution_check`` compares the whole
    #: trajectory; None: the even nlat nearest 1.5·nlat, the refined run (``spherepde run
    #: --refine 1.5``: 48 on 32); any even nlat in [4, 2·nlat] (below nlat: a coarser run);
    #: 0: no check
    check_nlat: int | None = None
    #: dask worker processes for the runs (one ``spherepde run`` per β); 0: in this process
    workers: int = 2

    def __post_init__(self) -> None:
        b = self.betas
        if not isinstance(b, (tuple, list)) or not b or len(set(b)) != len(b):
            raise ValueError(f"betas must be a non-empty list of distinct values, got {b!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {self.workers!r}")
        if self.density_scheme not in DENSITY_SCHEMES:
            raise ValueError(f"density_scheme must be one of {list(DENSITY_SCHEMES)}, got "
                             f"{self.density_scheme!r}")
        pole = self.amr_pole
        if isinstance(pole, str):
            if pole not in ("auto", "off"):
                raise ValueError(f"amr_pole must be 'auto', 'off' or 3 numbers (a direction), "
                                 f"got {pole!r}")
        elif not _is_direction(pole):
            raise ValueError(f"amr_pole must be 'auto', 'off' or 3 finite numbers, not all 0 "
                             f"(a direction), got {pole!r}")
        elif self.density_scheme != "amr":
            raise ValueError(f"amr_pole = {list(pole)} (--amr-pole) turns the amr mesh; "
                             f"density_scheme is {self.density_scheme!r}")
        c, n = self.check_nlat, self.grid_nlat
        if c is not None and c != 0 and (isinstance(c, bool) or not isinstance(c, int) or c < 4
                                         or c % 2 or c == n or c > 2 * n):
            raise ValueError(f"check_nlat must be 0 (no check), None (1.5·nlat) or an even integer in "
                             f"[4, 2·nlat = {2 * n}] other than nlat = {n}, got {c!r}")

    @classmethod
    def quick(cls) -> "MetastabilityConfig":
        # amr two levels deep at a split threshold of 2.4e-3 (the default would put 4 levels for
        # β = 20 and 1e-3): the same code path, a few hundred leaves
        return cls(nlat=16, betas=(5.0, 10.0, 20.0, math.inf), t_end=20.0, n_outputs=40,
                   amr_levels=(2, 1.0))

    @property
    def resolution_nlat(self) -> int:
        """The nlat of the resolution check (0: none; by default the even nlat nearest 1.5·nlat)."""
        if self.check_nlat is not None:
            return self.check_nlat
        return 2 * round(0.75 * self.grid_nlat)

    @property
    def grid_nlat(self) -> int:
        """The grid's rows: ``nlat``, or by default (None) :func:`base_nlat_for_beta` of the
        largest finite β for amr (32 when every β is ∞) and 32 for ffsl-ppm."""
        if self.nlat is not None:
            return self.nlat
        finite = [float(b) for b in self.betas if math.isfinite(b)]
        return base_nlat_for_beta(max(finite)) if finite and self.density_scheme == "amr" else BASE_NLATS[0]

    def to_dict(self) -> dict:
        return {"experiment": "metastability", **asdict(self), "nlat": self.grid_nlat}


#: the amr base grids of the experiments when ``nlat`` is not given, coarsest first
BASE_NLATS = (32, 48)
#: β·h₀² (h₀ = π/nlat, the base cell) up to which the spread phase is carried on the base cells
#: closely enough: measured at β = 100 (base 32, β·h₀² = 0.96: ``--refine 1.5`` changes every
#: quantity by ≤ 1.1 %) and 1000 (base 32, 9.6: 2.9 % in W₂; base 48, 4.3: 0.8 %;
#: docs/prototypes/issue20/decompose/README.md)
BASE_BETA_H2 = 5.0


def base_nlat_for_beta(beta: float) -> int:
    """The coarsest of :data:`BASE_NLATS` whose base cell h₀ = π/nlat has β·h₀² ≤
    :data:`BASE_BETA_H2`, else the finest (β above ≈ 1170: base cells wider than that, the spread
    phase not resolved there; docs/amr.md)."""
    for n in BASE_NLATS:
        if beta * (math.pi / n) ** 2 <= BASE_BETA_H2:
            return n
    return BASE_NLATS[-1]


def _is_direction(v) -> bool:
    """3 finite real numbers, not all 0."""
    if not isinstance(v, (tuple, list)) or len(v) != 3:
        return False
    if any(isinstance(a, bool) or not isinstance(a, (int, float, np.integer, np.floating)) for a in v):
        return False
    return all(math.isfinite(a) for a in v) and any(v)


#: the directions tried, in order, as the amr mesh's default pole (:func:`default_pole`): three
#: mutually orthogonal directions off every axis and diagonal plane of the coordinates, so
#: that an eigenvector line comes within :data:`POLE_MIN_ANGLE` of at most one of them
POLE_CANDIDATES = ((1.0, 1.0, 1.0), (0.3, -0.8, 0.5), (1.3, -0.2, -1.1))
#: degrees: the least angle between the default pole and an eigenvector (:func:`default_pole`)
POLE_MIN_ANGLE = 20.0


def eigenvector_angle(p, matrix) -> float:
    """The least angle in degrees between the line of ``p`` and a real eigenvector of ``matrix``
    (3 × 3): over every real eigenvalue λ, the angle from p to the null space of M − λI (a
    repeated λ: the whole eigenspace).  A multiple of the identity, all of whose directions
    are eigenvectors, singles out none: 90."""
    M = np.asarray(matrix, float)
    p = np.asarray(p, float) / np.linalg.norm(p)
    scale = max(float(np.linalg.norm(M, 2)), 1e-300)
    tol = 1e-9 * scale
    best = 90.0
    for lam in np.linalg.eigvals(M):
        if abs(lam.imag) > tol:
            continue  # a turn in a plane: no fixed line
        _, sv, vh = np.linalg.svd(M - lam.real * np.eye(3))
        basis = vh[sv <= 1e-7 * scale]
        if not 0 < len(basis) < 3:
            continue
        cos = min(1.0, float(np.linalg.norm(basis @ p)))
        best = min(best, math.degrees(math.acos(cos)))
    return best


def default_pole(Q, K, V) -> list[float]:
    """The amr mesh's default pole for the attention Q, K, V (the rule of ``amr_pole = "auto"``).

    The lon-lat raster's polar cells are merged or thin, so the pole should not sit on a point
    the dynamics single out: the metastable and terminal clusters and the saddles sit on
    eigenvectors of VBᵀ and of V, B = QᵀK (docs/amr.md, "The mesh's poles").  The rule: the
    first of :data:`POLE_CANDIDATES` ([1, 1, 1] first) whose line is at least
    :data:`POLE_MIN_ANGLE` = 20° from every real eigenvector of V, of B and of VBᵀ
    (:func:`eigenvector_angle`); if none is, the candidate farthest from them.  Returned as a
    unit vector."""
    V = np.asarray(V, float)
    B = np.asarray(Q, float).T @ np.asarray(K, float)
    matrices = (V, B, V @ B.T)
    angles = [min(eigenvector_angle(c, m) for m in matrices) for c in POLE_CANDIDATES]
    ok = [i for i, a in enumerate(angles) if a >= POLE_MIN_ANGLE]
    i = ok[0] if ok else int(np.argmax(angles))
    c = np.asarray(POLE_CANDIDATES[i], float)
    return (c / np.linalg.norm(c)).tolist()


def amr_pole(config) -> list[float] | None:
    """The unit mesh pole of the amr runs of ``config`` (``representations.density.pole``):
    :func:`default_pole` of its Q, K, V for ``amr_pole = "auto"``, ``amr_pole`` normalised
    for 3 numbers; None for "off" (the raster's own pole e_z) and for ffsl-ppm."""
    pole = getattr(config, "amr_pole", "off")
    if config.density_scheme != "amr" or pole == "off":
        return None
    if pole == "auto":
        return default_pole(config.Q, config.K, config.V)
    p = np.asarray(pole, float)
    return (p / np.linalg.norm(p)).tolist()


def initial_density(grid: GaussGrid, a) -> np.ndarray:
    """Cell averages of ρ_0 ∝ 1 + ½⟨x, â⟩, normalised to mass 1: the ``cosine`` initial kind of a
    run (:func:`spherepde.runs.initial.initial_density`)."""
    from spherepde.runs.initial import initial_density as run_initial_density

    return run_initial_density(_rho0_config(a), grid)


def _rho0_config(a):
    """ρ_0 ∝ 1 + ½⟨x, â⟩ as a run's ``initial`` section (kind ``cosine``)."""
    from spherepde.runs.config import InitialConfig

    return InitialConfig(kind="cosine", direction=tuple(float(v) for v in a), amplitude=0.5)


def _eigenspace_or_none(A: np.ndarray, name: str, **kw):
    """Top eigenspace of a symmetric A; for a non-symmetric A the projection map of Paper 1 is
    undefined: warn and return None (the run goes on, the diagnostics built on it are off)."""
    try:
        return top_eigenspace(A, **kw)
    except ValueError:
        warnings.warn(f"{name} is not symmetric: Π and the eigenspace diagnostics built on it "
                      "are off (reported as NaN); the dynamics still run", stacklevel=3)
        return None


def beta_key(beta: float) -> str:
    """β as it appears in file names and JSON keys: ``"inf"`` for ∞, else ``f"{β:g}"``."""
    return "inf" if math.isinf(beta) else f"{beta:g}"


#: the swept key path of the runs (one per β)
BETA = "dynamics.attention.beta"


def sphere_runs(config, outdir: Path, prefix: str, progress: bool):
    """Run the mean-field density on S² for every β of ``config``; yield per-β results.

    Shared by the metastability and terminal-phase experiments.  The runs are one
    ``spherepde sweep`` over β of :func:`setup_run_config` into ``outdir/prefix/``
    (``sweep.nc``, and ``members/*/run.nc``, one per β, on ``config.workers`` dask
    processes), with the diagnostics W₂ to
    Π_#ρ_0 and dist_E to the top eigenspaces of VBᵀ and of V at every output time; yields
    (info, row, snapshots (T, nlat, nlon)) per β in the order of ``config.betas``, read from
    those files.  A diagnostic whose matrix is not
    symmetric is not run (a warning; NaN in the row).
    """
    from spherepde.runs.sweep import member_runs, run_sweep, select
    from spherepde.runs.initial import density_function
    from spherepde.io.netcdf import open_dataset

    grid = GaussGrid(config.grid_nlat)
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
    # Π#ρ₀'s weight from ρ₀'s formula, as the runs' w2_projection has it
    a = (two_point_weight_function(density_function(_rho0_config(config.init_a), 3), e)
         if e is not None else math.nan)
    wanted = {"energy": ("energy", True), "w2": ("w2_projection", two_point),
              "dist_E_VBt": ("dist_eigenspace", EA is not None), "dist_E_V": ("dist_eigenspace_V", EV is not None)}
    diagnostics = ["mass", "min_density", *(name for name, on in wanted.values() if on)]
    raw = setup_run_config(config, config.betas[0], diagnostics=diagnostics)
    raw["sweep"] = {BETA: [float(b) for b in config.betas]}
    # one β (the resolution check): no cluster to start, the run goes in this process
    workers = config.workers if len(config.betas) > 1 else 0
    res = run_sweep(raw, outdir / prefix, workers=workers, progress=progress)
    ds = open_dataset(res["file"])
    files = {m[BETA]: path for m, path in member_runs(res["file"])}
    times = ds["time"].values
    info = {"grid": grid, "e": e, "a": a, "EA": EA, "EV": EV, "times": times, "x": x,
            "sweep_file": res["file"]}
    for beta in config.betas:
        at = {BETA: float(beta)}
        nan = [math.nan] * times.size
        summary = json.loads((files[beta].parent / "summary.json").read_text())
        row = {"beta": beta, "steps": summary["density"]["steps"], "file": str(files[beta]),
               **{key: select(ds, name, at).tolist() if on else nan
                  for key, (name, on) in wanted.items()},
               "mass_error": float(select(ds, "mass", at)[-1] - 1.0),
               "min_density": float(select(ds, "min_density", at)[-1])}
        yield info, row, select(ds, "density", at)


def density_section(config) -> dict | bool:
    """``representations.density`` of the experiment's runs: True (``ffsl-ppm`` on the grid)
    or, for ``amr``, the levels and split threshold that
    :func:`~spherepde.solvers.eulerian.amr.levels_for_beta` gives the largest finite β on a
    base of ``config.grid_nlat`` rows (β = ∞ alone: the scheme's defaults), used for every β, and
    the mesh's pole (:func:`amr_pole`; none with ``amr_pole = "off"``)."""
    if config.density_scheme == "ffsl-ppm":
        return True
    levels = amr_levels(config)
    section: dict = {"scheme": "amr"}
    if levels is not None:
        section.update(max_level=levels[0], mass_per_cell=levels[1])
    pole = amr_pole(config)
    if pole is not None:
        section["pole"] = pole
    return section


def amr_levels(config) -> tuple[int, float] | None:
    """(max_level, mass_per_cell) of the amr runs: ``config.amr_levels``, or
    :func:`~spherepde.solvers.eulerian.amr.levels_for_beta` of the largest finite β on a base
    of ``config.grid_nlat`` rows; None for ffsl-ppm, or when every β is ∞ (the scheme's defaults)."""
    if config.density_scheme != "amr":
        return None
    if config.amr_levels is not None:
        return int(config.amr_levels[0]), float(config.amr_levels[1])
    from spherepde.solvers.eulerian.amr import levels_for_beta

    finite = [float(b) for b in config.betas if math.isfinite(b)]
    return levels_for_beta(max(finite), config.grid_nlat) if finite else None


def setup_run_config(config, beta: float, *, diagnostics=("mass", "min_density")) -> dict:
    """The ``spherepde run`` configuration (a raw dict for :class:`RunConfig`) of the
    metastability set-up of ``config`` at ``beta``: the density on ``GaussGrid(config.grid_nlat)``
    from ρ_0 ∝ 1 + ½⟨x, â⟩ (``initial.kind = "cosine"``), attention Q, K, V, stepped at
    ``config.courant`` to ``config.t_end`` with ``config.n_outputs`` output intervals."""
    def rows(m):
        return [[float(a) for a in r] for r in m]

    return {"grid": {"kind": "sphere", "nlat": config.grid_nlat},
            "initial": {"kind": "cosine", "direction": [float(a) for a in config.init_a],
                        "amplitude": 0.5},
            "dynamics": {"attention": {"Q": rows(config.Q), "K": rows(config.K), "V": rows(config.V),
                                       "beta": float(beta)}},
            "representations": {"density": density_section(config)},
            "stepping": {"t_end": float(config.t_end), "courant": float(config.courant),
                         "output_every": config.t_end / config.n_outputs},
            "outputs": {"fields": True, "positions": True, "diagnostics": list(diagnostics)}}


def w2_minimum(row: dict, times: np.ndarray, band: float) -> dict:
    """min_t W₂, the time of the minimum and the exit time of one run (NaN where W₂ is off)."""
    w2 = np.asarray(row["w2"])
    if not np.all(np.isfinite(w2)):
        return {"w2_min": math.nan, "t_min": math.nan, "exit_time": math.nan}
    i = int(np.argmin(w2))
    return {"w2_min": float(w2[i]), "t_min": float(times[i]), "exit_time": exit_time(times, w2, band)}


#: the old criterion, kept in the check as ``relative_change``: the change of min W₂ alone
RESOLVED_CHANGE = 0.05
#: the time series the resolution check compares at every output time (row keys)
CHECKED = ("energy", "w2", "dist_E_VBt", "dist_E_V")
#: their names in words, for the figures
CHECKED_WORDS = {"energy": "E_β", "w2": "W₂ to Π#ρ₀", "dist_E_VBt": "the distance to E(VBᵀ)",
                 "dist_E_V": "the distance to E(V)"}


def _check_config(config: MetastabilityConfig, beta: float) -> MetastabilityConfig:
    """The resolution check's run: ``beta`` on ``config.resolution_nlat`` rows with the run's amr
    levels, mass_per_cell and mesh pole, so that every length (and the split threshold
    mass_per_cell·h²) scales by resolution_nlat/nlat, as ``--refine`` does."""
    pole = amr_pole(config)
    return dataclasses.replace(config, nlat=config.resolution_nlat, betas=(beta,), check_nlat=0,
                               amr_levels=amr_levels(config),
                               amr_pole="off" if pole is None else tuple(pole))


@contextlib.contextmanager
def check_beside(config: MetastabilityConfig, outdir: Path, prefix: str = "metastability_check") -> Iterator:
    """Start the resolution check's run (the largest β, :func:`_check_config`) in a child process
    beside the runs, so that the wall time is the longest run rather than the sum: yields the
    process (None without a check or with ``workers = 0``: :func:`resolution_check` then runs it
    after the runs).  The child writes its run like any other; :func:`resolution_check` then
    finds it complete and reads it.  A child still running on exit (an interrupt) is terminated.
    A process, not a thread: HDF5 (netCDF4) must not be entered from two threads at once."""
    if not config.resolution_nlat or config.workers == 0:
        yield None
        return
    import multiprocessing

    proc = multiprocessing.get_context("spawn").Process(
        target=_run_check, args=(_check_config(config, max(config.betas)), str(outdir), prefix))
    proc.start()
    try:
        yield proc
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join()


def _run_check(check_cfg: MetastabilityConfig, outdir: str, prefix: str) -> None:
    """The child of :func:`check_beside`: the check's run into ``outdir/prefix/``, one thread."""
    from spherepde.runs.sweep import single_threaded

    single_threaded(lambda: next(sphere_runs(check_cfg, Path(outdir), prefix, False)))


def resolution_check(config: MetastabilityConfig, run: dict, outdir: Path, progress: bool,
                     prefix: str = "metastability_check") -> dict | None:
    """Run the largest β again at ``config.resolution_nlat`` and compare the whole trajectory.

    By default the check run is the refined run (base ×1.5 with the same levels: what
    ``spherepde run --refine 1.5`` does); ``check_nlat`` below nlat makes it a coarser one.
    ``max_relative_change`` is the largest change, over the output times, of e^{−β}E_β, W₂ and
    both eigenspace distances between the two runs, each relative to max(|finer value|, 0.05)
    (:func:`~spherepde.validation.resolution.trajectory_change`; ``per_quantity`` and ``worst``
    say where); ``switch_time_change`` compares the times at which the distance to V's
    eigenspace drops below the distance to VBᵀ's (relative; NaN when neither run switches);
    ``resolved`` is max_relative_change < 2 %.  Also kept: the change of min W₂ alone,
    ``relative_change`` = |w_finer − w_coarser| / w_finer, with the times of the minima and
    ``at_end`` (per run: the minimum is the last output, so it was not reached).  Every pair
    (``nlat``, ``w2_min``, ``t_min``, ``at_end``, ``switch_time``) is [coarser, finer].
    Both runs have the same amr mesh pole (``pole``: :func:`amr_pole`, None for the raster's
    own e_z).  The check run (:func:`_check_config`) goes to ``outdir/prefix/`` (``file``); run
    here unless :func:`check_beside` ran it already (then it is read).  None when the check is off.
    """
    check_nlat = config.resolution_nlat
    if not check_nlat:
        return None
    pole = amr_pole(config)
    info, check, _ = next(sphere_runs(_check_config(config, run["beta"]), outdir, prefix, progress))
    times = info["times"]
    check.update(w2_minimum(check, times, config.band))
    coarse, fine = (run, check) if check_nlat > config.grid_nlat else (check, run)
    w_f, w_c = fine["w2_min"], coarse["w2_min"]
    change = abs(w_f - w_c) / w_f if w_f > 0 else math.nan
    trajectory = trajectory_change(times, {q: fine[q] for q in CHECKED}, {q: coarse[q] for q in CHECKED})
    switch = switch_change(times, (fine["dist_E_VBt"], fine["dist_E_V"]),
                           (coarse["dist_E_VBt"], coarse["dist_E_V"]))
    return {"beta": run["beta"], "nlat": sorted([check_nlat, config.grid_nlat]), "pole": pole,
            "w2_min": [w_c, w_f], "t_min": [coarse["t_min"], fine["t_min"]],
            "at_end": [bool(r["t_min"] >= config.t_end) for r in (coarse, fine)],
            "relative_change": change, **trajectory, **switch, "file": check["file"]}


def run_metastability(config: MetastabilityConfig, outdir: str | Path, *, progress: bool = False) -> dict:
    """Run every β, write one NetCDF per β, a PNG and ``summary.json``; return the summary.

    The summary's ``min_w2`` maps each β ("inf" for ∞) to min_t W₂(ρ_t, Π#ρ₀), and
    ``resolution_check`` (:func:`resolution_check`) compares the whole trajectory of the
    largest β with the same run at ``config.resolution_nlat`` (by default the refined run).
    """
    with study("metastability", config, outdir) as job, check_beside(config, job.outdir) as child:
        outdir, rows = job.outdir, job.runs
        for info, row, _ in sphere_runs(config, outdir, "metastability", progress):
            row.update(w2_minimum(row, info["times"], config.band))
            rows.append(row)
        times = info["times"]
        largest = max(rows, key=lambda r: r["beta"])
        if child is not None:
            child.join()
        check = resolution_check(config, largest, outdir, progress)
        finite = [r for r in rows if math.isfinite(r["beta"])]
        summary = {**job.header,
                   "grid_spacing_rad": float(info["grid"].dlon), "a": info["a"],
                   "e": None if info["e"] is None else info["e"].tolist(),
                   "spectral_gap": None if info["EA"] is None else info["EA"].gap,
                   "amr_pole": amr_pole(config),
                   "times": times.tolist(), "runs": rows,
                   "min_w2": {beta_key(r["beta"]): r["w2_min"] for r in rows}, "resolution_check": check}
        if len(finite) >= 3 and all(math.isfinite(r["w2_min"]) for r in finite):
            b = np.array([r["beta"] for r in finite])
            slope, se = fit_order(np.sqrt(np.log(b) / b), [r["w2_min"] for r in finite])
            summary["fit_w2min_vs_sqrt_logb_over_b"] = {"exponent": slope, "stderr": se,
                                                        "note": "w2_min ∝ (sqrt(log β/β))^exponent; theory: exponent 1"}
            fit = fit_vs_log_beta(b, [r["exit_time"] for r in finite])
            if fit is not None:
                summary["fit_exit_time_vs_log_beta"] = fit
        return job.finish(summary, lambda summ: plot_metastability(summ, outdir / "metastability.png"))


def resolution_note(check: dict | None) -> str | None:
    """A line for the figure when the resolution check failed (None when it passed or was off)."""
    if not check or check.get("resolved"):
        return None
    (nc, nf) = check["nlat"]
    if "max_relative_change" not in check:  # a summary written before the trajectory check
        wc, wf = check["w2_min"]
        why = ("the minimum is not reached by t_end" if any(check["at_end"]) else
               f"min W₂ changes by {100 * check['relative_change']:.1f} % (≥ {100 * RESOLVED_CHANGE:g} %)")
        return (f"UNRESOLVED at β = {check['beta']:g}: {why} between nlat {nc} ({wc:.3g}) "
                f"and nlat {nf} ({wf:.3g})")
    worst = check.get("worst")
    if worst is None:
        why = "no quantity could be compared"
    else:
        why = (f"{CHECKED_WORDS.get(worst['quantity'], worst['quantity'])} changes by "
               f"{100 * check['max_relative_change']:.3g} % at t = {worst['t']:g} "
               f"(≥ {100 * check['tolerance']:g} %)")
    return f"UNRESOLVED at β = {check['beta']:g}: {why} between nlat {nc} and nlat {nf}"


def plot_metastability(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(summary["times"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    for r in summary["runs"]:
        lab = "β = ∞" if not math.isfinite(r["beta"]) else f"β = {r['beta']:g}"
        axes[0].semilogy(t, r["w2"], label=lab)
        axes[1].plot(t, r["dist_E_VBt"], label=f"{lab}: E(VBᵀ)")
        axes[1].plot(t, r["dist_E_V"], "--", color=axes[1].lines[-1].get_color())
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("W₂(ρ_t, Π#ρ₀)  (chordal)")
    axes[0].set_title("distance to the projected initial measure", fontsize=9)
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("t")
    axes[1].set_ylabel("dist_E (solid: top eigenspace of VBᵀ, dashed: of V)")
    axes[1].set_title("eigenspace distances", fontsize=9)
    title = "Paper 1, metastability"
    note = resolution_note(summary.get("resolution_check"))
    fig.suptitle(title if note is None else f"{title}\n{note}", fontsize=10,
                 color="k" if note is None else "#c00000")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["CHECKED", "MetastabilityConfig", "POLE_CANDIDATES", "POLE_MIN_ANGLE", "RESOLVED_CHANGE",
           "amr_pole", "beta_key", "default_pole", "eigenvector_angle", "initial_density",
           "plot_metastability", "resolution_check", "resolution_note", "run_metastability",
           "setup_run_config", "sphere_runs", "w2_minimum"]
