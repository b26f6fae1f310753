"""Ensembles of SPDE realisations on a dask cluster, written to one NetCDF file as they finish.

A realisation r of :class:`SPDEConfig` is the Stratonovich SPDE (``spde-ffsl``) with attention
drift (optional) and the MLP noise (optional) driven by :class:`~spherepde.noise.BrownianPath`
``(seed, realisation=r)``, or with ``antithetic=True`` by the pairs (path j, −path j) for
r = 2j, 2j + 1 (equal in law; odd powers of the noise cancel in pair means).  Realisations are
independent tasks: :func:`run_ensemble` submits them to a ``dask.distributed`` cluster (a
``LocalCluster`` of ``workers`` single-threaded processes by default, or the client you pass)
and writes them, in realisation order r = 0, 1, … as they finish, to an :class:`~spherepde.io.ensemble.EnsembleWriter` file —
fields (optional, float32), mass, harmonic moments of degree ≤ ``moments_lmax`` and the
interaction energy E_β at every output time.  The file's ``config_json`` holds the whole
configuration; realisation r can be recomputed alone with :func:`run_realisation`.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from spherepde.dynamics.attention import Attention, DensityAttention
from spherepde.grids import CircleGrid, GaussGrid
from spherepde.noise import BrownianPath, NoiseField, NoiseKernel
from spherepde.solvers.controller import Controller
from spherepde.solvers.eulerian.spde import SPDEFFSL
from spherepde.solvers.trackers import MemoryTracker
from spherepde.validation.metrics import interaction_energy

GRIDS = ("sphere", "circle")
INITIAL = ("vmf", "cosine")


ATTENTION_KEYS = ("Q", "K", "V", "beta")


def _check_attention(attention, d: int, grid: str) -> None:
    """``attention`` = {"Q", "K", "V", "beta"}: each matrix finite and d×d, β > 0 (inf allowed);
    errors name the key (``attention.Q``)."""
    if not isinstance(attention, dict):
        raise TypeError(f"attention must be a table with keys {list(ATTENTION_KEYS)} or absent, "
                        f"got {type(attention).__name__}")
    missing = [k for k in ATTENTION_KEYS if k not in attention]
    unknown = sorted(set(attention) - set(ATTENTION_KEYS))
    if missing or unknown:
        raise ValueError(f"attention: missing keys {['attention.' + k for k in missing]}, unknown keys "
                         f"{['attention.' + k for k in unknown]}; allowed: {list(ATTENTION_KEYS)}")
    for name in ("Q", "K", "V"):
        try:
            m = np.asarray(attention[name], dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"attention.{name} must be a {d}×{d} matrix of numbers, "
                             f"got {attention[name]!r}") from None
        if m.shape != (d, d):
            raise ValueError(f"attention.{name} must be a {d}×{d} matrix (grid {grid!r} has d = {d}), "
                             f"got shape {m.shape}")
        if not np.all(np.isfinite(m)):
            raise ValueError(f"attention.{name} contains NaN or inf")
    beta = attention["beta"]
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or math.isnan(beta) or not beta > 0:
        raise ValueError(f"attention.beta must be a number > 0 (inf allowed), got {beta!r}")


@dataclass(frozen=True)
class SPDEConfig:
    """Everything that defines an ensemble (written to every output file).

    grid : "sphere" (GaussGrid(nlat)) or "circle" (CircleGrid(n)).
    activation, sigma_u, sigma_w : the MLP noise (``noise=False`` switches it off).
    nmax / variance_fraction : KL truncation (nmax wins when given).
    attention : None or {"Q", "K", "V", "beta"}; ``attention_scale`` multiplies it.
    initial : {"kind": "vmf", "direction", "concentration"} — ρ_0 ∝ exp(c⟨x, a⟩) — or
        {"kind": "cosine", "direction", "amplitude"} — ρ_0 ∝ 1 + amp⟨x, a⟩ + …(see initial_density).
    t_end, dt, n_outputs : fixed step (noise forbids adaptive steps); outputs equally spaced.
    """

    grid: str = "sphere"
    nlat: int = 32
    n: int = 128
    noise: bool = True
    activation: str = "relu"
    sigma_u: float = 0.5
    sigma_w: float = 0.5
    nmax: int | None = None
    variance_fraction: float = 0.999
    attention: dict | None = None
    attention_scale: float = 1.0
    initial: dict = field(default_factory=lambda: {"kind": "vmf", "direction": [1.0, 0.0, 0.0],
                                                   "concentration": 3.0})
    t_end: float = 2.0
    dt: float = 0.02
    n_outputs: int = 20
    scheme: str = "stratonovich"
    seed: int = 0
    antithetic: bool = False
    store_fields: bool = True
    moments_lmax: int = 3
    energy_beta: float = 1.0

    def __post_init__(self) -> None:
        if self.grid not in GRIDS:
            raise ValueError(f"grid must be one of {GRIDS}, got {self.grid!r}")
        for name in ("t_end", "dt", "energy_beta"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if self.dt > self.t_end:
            raise ValueError(f"dt must be ≤ t_end, got dt={self.dt}, t_end={self.t_end}")
        for name in ("n_outputs", "moments_lmax"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
        if self.initial.get("kind") not in INITIAL:
            raise ValueError(f"initial['kind'] must be one of {INITIAL}, got {self.initial.get('kind')!r}")
        if not self.noise and self.attention is None:
            raise ValueError("nothing moves: give noise=True or an attention")
        if self.attention is not None:
            _check_attention(self.attention, self.d, self.grid)
        direction = self.initial.get("direction")
        if direction is not None:
            a = np.asarray(direction, dtype=float)
            if a.shape != (self.d,) or not np.all(np.isfinite(a)) or not np.any(a):
                raise ValueError(f"initial.direction must be {self.d} finite numbers, not all zero "
                                 f"(grid {self.grid!r} has d = {self.d}), got {direction!r}")

    @property
    def d(self) -> int:
        return 3 if self.grid == "sphere" else 2

    def to_dict(self) -> dict:
        return asdict(self)

    # ---- the objects of a run ------------------------------------------------------------
    def make_grid(self):
        return GaussGrid(self.nlat) if self.grid == "sphere" else CircleGrid(self.n)

    def make_kernel(self) -> NoiseKernel:
        return NoiseKernel(self.activation, d=self.d, sigma_u=self.sigma_u, sigma_w=self.sigma_w)

    def make_noise(self) -> NoiseField | None:
        if not self.noise:
            return None
        if self.nmax is not None:
            return NoiseField(self.make_kernel(), nmax=self.nmax)
        return NoiseField(self.make_kernel(), variance_fraction=self.variance_fraction)

    def make_attention(self) -> Attention | None:
        if self.attention is None:
            return None
        a = self.attention
        return Attention(a["Q"], a["K"], a["V"], beta=float(a["beta"]))

    def make_path(self, noise: NoiseField, realisation: int) -> BrownianPath:
        if self.antithetic:
            return BrownianPath(noise.shape, seed=self.seed, t1=self.t_end,
                                realisation=realisation // 2, antithetic=bool(realisation % 2))
        return BrownianPath(noise.shape, seed=self.seed, t1=self.t_end, realisation=realisation)

    def output_times(self) -> np.ndarray:
        return np.linspace(0.0, self.t_end, self.n_outputs + 1)


def initial_density(config: SPDEConfig, grid) -> np.ndarray:
    """ρ_0 of the configuration, normalised to mass 1 (cell averages on S², point values on S¹)."""
    a = np.asarray(config.initial.get("direction", [1.0, 0.0, 0.0][: config.d]), float)[: config.d]
    a = a / np.linalg.norm(a)
    kind = config.initial["kind"]
    if kind == "vmf":
        c = float(config.initial.get("concentration", 3.0))
        f = lambda x: np.exp(c * (x @ a - 1.0))  # noqa: E731
    else:
        amp = float(config.initial.get("amplitude", 0.5))
        f = lambda x: 1.0 + amp * (x @ a)  # noqa: E731
    if isinstance(grid, GaussGrid):
        rho = grid.cell_average(f)
        return rho / grid.integrate(rho)
    x = np.stack([np.cos(grid.theta), np.sin(grid.theta)], axis=-1)
    rho = f(x)
    return rho / (rho.sum() * grid.dtheta)


class _Diagnostics:
    """Mass, harmonic moments (degree ≤ lmax) and E_β of a density at one output time."""

    def __init__(self, config: SPDEConfig, grid):
        self.grid = grid
        self.lmax = config.moments_lmax
        self.beta = config.energy_beta
        if isinstance(grid, GaussGrid):
            from spherepde.grids.sht import SphericalHarmonics

            self.sht = SphericalHarmonics(grid, lmax=min(self.lmax, grid.lmax))
            self.keep = np.nonzero(self.sht.l <= self.lmax)[0]
            self.l, self.m = self.sht.l[self.keep], self.sht.m[self.keep]
            self.x = grid.xyz.reshape(-1, 3)
            self.w = grid.cell_area.reshape(-1)
        else:
            self.l = self.m = np.arange(self.lmax + 1)
            self.x = np.stack([np.cos(grid.theta), np.sin(grid.theta)], axis=-1)
            self.w = grid.cell_length

    @property
    def n_moments(self) -> int:
        return int(self.l.size)

    def __call__(self, rho: np.ndarray) -> dict:
        w = (rho * self.w.reshape(rho.shape)).reshape(-1)
        if isinstance(self.grid, GaussGrid):
            q = self.sht.analyse(rho)[self.keep]  # ∫ ρ conj(Y_lm)
        else:
            q = np.array([np.sum(w * np.exp(-1j * k * self.grid.theta)) for k in range(self.lmax + 1)])
        return {"mass": float(w.sum()), "moment_re": q.real, "moment_im": q.imag,
                "energy": interaction_energy(self.x, np.clip(w, 0.0, None), self.beta)}


def run_realisation(config: SPDEConfig, realisation: int) -> dict:
    """Run realisation r; return its outputs as arrays with a leading time axis."""
    grid = config.make_grid()
    noise = config.make_noise()
    att = config.make_attention()
    drift = None
    if att is not None:
        drift = DensityAttention(att, grid)
        if config.attention_scale != 1.0:
            inner, s = drift, float(config.attention_scale)
            drift = lambda t, x, rho: s * inner(t, x, rho)  # noqa: E731
    path = None if noise is None else config.make_path(noise, realisation)
    stepper = SPDEFFSL(grid, drift, noise=noise, path=path, scheme=config.scheme,
                       dt=config.dt)
    diag = _Diagnostics(config, grid)
    times = config.output_times()
    rho = initial_density(config, grid)
    controller = Controller(stepper, MemoryTracker(name="fields"), dt=config.dt)
    t0 = time.perf_counter()
    fields = controller.run(rho, (times[0], times[-1]), output_times=times).trackers["fields"]["state"]
    rows = [diag(f) for f in fields]
    out = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    if config.store_fields:
        out["density"] = fields
    out["_seconds"] = time.perf_counter() - t0
    out["_substeps"] = stepper.substeps
    return out


@dataclass(frozen=True)
class EnsembleResult:
    """Outcome of :func:`run_ensemble`: the file, which realisations it holds, the wall time, and
    the worker processes started (−1: the caller's client was used)."""

    path: Path
    realisations: list
    wall_time: float
    workers: int


def _writer(config: SPDEConfig, path: Path, grid, n_moments: int, lm):
    from spherepde.io.ensemble import EnsembleWriter

    fields = {"density": {"units": "1", "long_name": "token density (per unit area)"}} if config.store_fields else {}
    series = {
        "mass": {"units": "1", "long_name": "total mass ∫ρ"},
        "moment_re": {"units": "1", "dims": ("moment",), "long_name": "Re ∫ρ conj(Y_lm) (S²) or ∫ρ e^{-ikθ} (S¹)"},
        "moment_im": {"units": "1", "dims": ("moment",), "long_name": "Im of the same"},
        "energy": {"units": "1", "long_name": f"scaled interaction energy exp(-beta) E_beta, beta = {config.energy_beta}"},
    }
    w = EnsembleWriter(path, grid, times=config.output_times(), fields=fields, series=series,
                       extra_dims={"moment": n_moments}, config={"experiment": "spde-ensemble",
                                                                   **config.to_dict()},
                       seed=config.seed, static={"moment_l": ("moment", lm[0]), "moment_m": ("moment", lm[1])})
    return w


def run_ensemble(config: SPDEConfig, realisations: int, path, *, workers: int = 2, client=None,
                 progress: bool = False) -> EnsembleResult:
    """Run realisations 0..R−1 on a dask cluster and write them to ``path`` as they finish.

    workers : processes of the LocalCluster started here (ignored when ``client`` is given);
        ``workers=0`` runs in this process without dask (for debugging).
    Realisations are stored in the order r = 0, 1, …, R−1 whatever order they finish in (one
    that finishes early waits in memory for those before it), so the same call gives the same
    file.  On KeyboardInterrupt the pending tasks are cancelled, the file is closed with every
    finished realisation (sorted; the ``realisation`` coordinate then has gaps) and ``status =
    "interrupted"``, and the interrupt is re-raised.
    """
    if isinstance(realisations, bool) or not isinstance(realisations, int) or realisations < 1:
        raise ValueError(f"realisations must be an int ≥ 1, got {realisations!r}")
    if config.antithetic and realisations % 2:
        raise ValueError(f"antithetic ensembles come in pairs: realisations must be even, got {realisations}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an int ≥ 0, got {workers!r}")
    path = Path(path)
    grid = config.make_grid()
    noise = config.make_noise()  # validate before any work, including the step size
    if noise is not None:
        SPDEFFSL(grid, noise=noise, path=config.make_path(noise, 0), scheme=config.scheme).check_dt(config.dt)
    config.make_attention()
    diag = _Diagnostics(config, grid)
    done: list[int] = []
    pending: dict[int, dict] = {}  # finished out of order, waiting for the realisations before
    t0 = time.perf_counter()
    writer = _writer(config, path, grid, diag.n_moments, (diag.l, diag.m))
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=realisations, desc="realisations", unit="path")
    own_cluster = None
    workers_used = -1 if client is not None else workers
    complete = False

    def write(r: int) -> None:
        writer.append(r, **pending.pop(r))
        done.append(r)

    try:
        if workers == 0 and client is None:
            results = ((r, run_realisation(config, r)) for r in range(realisations))
        else:
            if client is None:
                client, own_cluster = local_client(workers)
            from dask.distributed import as_completed

            futures = {client.submit(single_threaded, run_realisation, config, r, pure=False): r
                       for r in range(realisations)}
            results = ((futures[f], f.result()) for f in as_completed(futures))
        for r, out in results:
            pending[r] = {k: v for k, v in out.items() if not k.startswith("_")}
            while len(done) in pending:  # write in realisation order: r = 0, 1, 2, …
                write(len(done))
            if bar is not None:
                bar.update(1)
        complete = True
    finally:  # also on KeyboardInterrupt: the file keeps every finished realisation, sorted
        try:
            for r in sorted(pending):
                write(r)
        finally:
            writer.close("complete" if complete else "interrupted")
        if bar is not None:
            bar.close()
        if own_cluster is not None:
            client.close()
            own_cluster.close()
    return EnsembleResult(path=path, realisations=done, wall_time=time.perf_counter() - t0,
                          workers=workers_used)


def single_threaded(fn, *args):
    """``fn(*args)`` with numba's parallel regions on one thread (a dask task: each worker
    process runs one task at a time, so more threads would only compete for the cores)."""
    import numba

    numba.set_num_threads(1)
    return fn(*args)


def local_client(workers: int):
    """A dask ``Client`` on a new ``LocalCluster`` of ``workers`` single-threaded processes (BLAS
    limited to one thread each, dashboard on a free port, logs at ERROR); returns
    (client, cluster) — close both.  Submit tasks through :func:`single_threaded` to keep numba
    on one thread too.

    NUMBA_NUM_THREADS is not set in the workers' environment: a worker may import numba before
    the environment is applied (the parent's ``__main__`` is re-imported in spawned processes),
    and numba then refuses to compile once the variable disagrees with its launched threads.
    """
    import logging

    from dask.distributed import Client, LocalCluster

    one = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=logging.ERROR, env=one)
    return Client(cluster), cluster
