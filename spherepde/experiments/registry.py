"""The paper experiments by name: what each one is, how it runs, and its command-line options.

``spherepde experiment NAME`` is generated from :data:`EXPERIMENTS`: one sub-command per entry,
with ``--quick``, the entry's options, ``--output`` (default ``out/NAME``) and ``--json``.  An
entry names its configuration class and its runner by module and attribute, and they are
imported only when the experiment runs (``spherepde --help`` stays fast).  Each option says how
argparse reads it, checks the value it read (errors name the flag) and which fields of the
configuration it sets; :meth:`Experiment.configure` applies them in one fixed order
(:data:`OPTION_ORDER`), so an error names the same flag whatever order they were given in.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self



class _StudyConfig(Protocol):
    """What :meth:`Experiment.configure` needs of a study's configuration class: a dataclass
    with a ``quick()`` constructor."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @classmethod
    def quick(cls) -> Self: ...

@dataclass(frozen=True)
class Option:
    """One option of an experiment (always default None: "keep the configuration's value").

    flag : the command-line flag (``--t-end``); its argparse ``dest`` is :attr:`dest`.
    help : the help text.
    type, nargs : as in ``argparse.ArgumentParser.add_argument``.
    fields : the configuration fields set to the checked value (several: one value for each).
    check : the value read → the value set; raises ValueError naming the flag.
    """

    flag: str
    help: str
    type: Callable[[str], Any] | None = None
    nargs: str | None = None
    fields: tuple[str, ...] = ()
    check: Callable[[Any], Any] = lambda v: v

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def with_(self, **changes) -> "Option":
        """The same option with other ``help``, ``fields`` or ``check``."""
        return dataclasses.replace(self, **changes)


# ---- the checks of the values read ---------------------------------------------------------
def _even_nlat(v: int) -> int:
    if v < 4 or v % 2:
        raise ValueError(f"--nlat must be an even integer >= 4, got {v}")
    return v


def _nlat_chaos(v: int) -> int:
    v = _even_nlat(v)
    if v < 8 or v % 4:
        raise ValueError(f"--nlat must be a multiple of 4, at least 8 (chaos also runs the density "
                         f"on nlat/2, an even grid), got {v}")
    return v


def _positive_time(v: float) -> float:
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"--t-end must be a positive number, got {v}")
    return v


def _workers(v: int) -> int:
    if v < 1:
        raise ValueError(f"--workers must be an integer >= 1, got {v}")
    return v


def _run_workers(v: int) -> int:
    if v < 0:
        raise ValueError(f"--workers must be an integer >= 0, got {v}")
    return v


def _betas(v: list) -> tuple:
    if any(not b > 0 for b in v):
        raise ValueError(f"--betas must all be > 0 (inf allowed), got {v}")
    if len(set(v)) != len(v):
        raise ValueError(f"--betas must be distinct (one run each), got {v}")
    return tuple(v)


def _betas_circle(v: list) -> tuple:
    betas = _betas(v)
    if any(math.isinf(b) for b in betas):
        raise ValueError("--betas: β = inf is not used on the circle (the flow is then trivial)")
    return betas


def _particle_counts(v: list) -> tuple:
    counts = sorted(set(v))
    if len(counts) < 2 or any(n < 2 for n in counts):
        raise ValueError(f"--particle-counts needs at least 2 different values, each >= 2 "
                         f"(a rate is fitted), got {v}")
    return tuple(counts)


def _density_scheme(v: str) -> str:
    from spherepde.runs.config import SCHEMES

    if v not in SCHEMES:
        raise ValueError(f"--density-scheme must be one of {list(SCHEMES)}, got {v!r}")
    return v


def _s2_scheme(v: str) -> str:
    from spherepde.experiments.metastability import DENSITY_SCHEMES

    if v not in DENSITY_SCHEMES:
        raise ValueError(f"--density-scheme must be one of {list(DENSITY_SCHEMES)}, got {v!r}")
    return v


def _amr_pole(v: list) -> str | tuple:
    why = (f"--amr-pole must be 'auto', 'off' or 3 numbers (the direction of the amr mesh's pole, "
           f"not all 0), got {' '.join(v)!r}")
    if len(v) == 1 and v[0] in ("auto", "off"):
        return v[0]
    try:
        pole = tuple(float(a) for a in v)
    except ValueError:
        raise ValueError(why) from None
    if len(pole) != 3 or not all(math.isfinite(a) for a in pole) or not any(pole):
        raise ValueError(why)
    return pole


# ---- the options ---------------------------------------------------------------------------
NLAT = Option("--nlat", "override the grid size", type=int, fields=("nlat",), check=_even_nlat)
T_END = Option("--t-end", "override the final time", type=float, fields=("t_end",), check=_positive_time)
BETAS = Option("--betas", "override β values ('inf' allowed on S²)", type=float, nargs="+",
               fields=("betas",), check=_betas)
CHECK_NLAT = Option("--check-nlat", "nlat of the resolution check: the largest β is run again there and "
                                    "resolution_check compares E_β, W2 and the eigenspace distances at "
                                    "every output time (default: the even nlat nearest 1.5 × --nlat, the "
                                    "refined run of run --refine 1.5; any even nlat up to twice --nlat, "
                                    "below it a coarser run; 0: no check)", type=int, fields=("check_nlat",))
PARTICLE_COUNTS = Option("--particle-counts", "override the particle numbers N (≥ 2 values, each ≥ 2; e.g. "
                                              "up to 10⁵ on a GPU)", type=int, nargs="+",
                         fields=("particle_counts",), check=_particle_counts)
WORKERS = Option("--workers", "dask worker processes for the ensembles (default: 2)", type=int,
                 fields=("workers",), check=_workers)
DENSITY_SCHEME = Option("--density-scheme", "scheme of the S² density paths: lagrangian-remap "
                                            "(default: weighted points that follow the cluster) or "
                                            "ffsl-ppm (finite volumes on the fixed grid)", type=str,
                        fields=("density_scheme",), check=_density_scheme)
#: Paper 1's metastability runs: adaptive (levels from the largest finite β) or the fixed grid
PAPER1_SCHEME = DENSITY_SCHEME.with_(help="scheme of the density: amr (default: adaptive finite volumes "
                                          "on a base of --nlat rows, levels set by the largest finite "
                                          "β) or ffsl-ppm (the fixed grid of --nlat rows)",
                                     check=_s2_scheme)
#: Paper 1's amr mesh pole (metastability.default_pole by default)
AMR_POLE = Option("--amr-pole", "the amr mesh's north pole: auto (default: [1, 1, 1]/√3, or the next "
                                "fixed direction when that is within 20° of an eigenvector of V, QᵀK "
                                "or VBᵀ), off (the raster's own pole e_z) or 3 numbers X Y Z",
                  type=str, nargs="+", fields=("amr_pole",), check=_amr_pole)
#: the order in which the options' values are checked and set (by flag)
OPTION_ORDER = ("--nlat", "--t-end", "--workers", "--betas", "--check-nlat", "--particle-counts",
                "--density-scheme", "--amr-pole")

#: Paper 1's S² experiments: their runs are one ``spherepde sweep`` of run configurations
RUN_WORKERS = WORKERS.with_(help="dask worker processes for the runs of the sweep (default: 2; 0: "
                                 "one after the other in this process)", check=_run_workers)
NLAT_S2 = NLAT.with_(help="override the S² grid size")
PAPER1_QUICK = "small sizes (about a minute)"
PAPER2_QUICK = "small sizes (under a minute)"


@dataclass(frozen=True)
class Experiment:
    """One ``spherepde experiment`` entry.

    name : the sub-command (and the default output folder ``out/NAME``).
    help : one line for ``spherepde experiment --help``.
    module, config, runner : the module and the names in it of the configuration class (with
        ``quick()``, a frozen dataclass) and of ``runner(config, outdir, *, progress) -> summary``.
    options : the options besides ``--quick``, ``--output`` and ``--json``, in help order.
    quick_help : the help of ``--quick``.
    """

    name: str
    help: str
    module: str
    config: str
    runner: str
    options: tuple[Option, ...]
    quick_help: str

    def load(self) -> tuple[type[_StudyConfig], Callable]:
        """Import the module: (configuration class, runner)."""
        mod = importlib.import_module(self.module)
        return getattr(mod, self.config), getattr(mod, self.runner)

    def configure(self, values: dict[str, Any], *, quick: bool = False):
        """The configuration: ``quick()`` or the default, with every option whose value in
        ``values`` (by ``dest``) is not None checked and set, in :data:`OPTION_ORDER`."""
        config_cls, _ = self.load()
        config = config_cls.quick() if quick else config_cls()
        over = {}
        for opt in sorted(self.options, key=lambda o: OPTION_ORDER.index(o.flag)):
            value = values.get(opt.dest)
            if value is not None:
                value = opt.check(value)
                over.update({f: value for f in opt.fields})
        return dataclasses.replace(config, **over)

    def run(self, config, outdir, *, progress: bool = False, overwrite: bool | None = None) -> dict:
        """Run ``config`` into ``outdir``; the summary (also in ``outdir/summary.json``).

        A folder that holds another result, or this experiment with another configuration
        (its ``summary.json``; ``workers`` aside), is refused before anything is written unless
        ``overwrite`` (None: the command's ``--overwrite``), which then also holds for the
        runs and sweeps inside the folder (:mod:`spherepde.runs.folders`)."""
        import json

        from spherepde.io.summary import jsonable
        from spherepde.runs.folders import OVERWRITE, guard, overwriting

        _, runner = self.load()
        stored = json.loads(json.dumps(jsonable({"experiment": self.name, "config": config.to_dict()}),
                                       default=float))
        overwrite = OVERWRITE.get() if overwrite is None else overwrite
        guard(outdir, "experiment", stored, overwrite=overwrite, ignore=("config.workers",))
        with overwriting(overwrite):
            return runner(config, outdir, progress=progress)


def _entry(name, help_, module, config, runner, options, quick_help) -> tuple[str, Experiment]:
    return name, Experiment(name, help_, f"spherepde.experiments.{module}", config, runner, tuple(options),
                            quick_help)


#: name → :class:`Experiment`, in the order of ``spherepde experiment --help``
EXPERIMENTS: dict[str, Experiment] = dict([
    _entry("metastability", "Paper 1: W2 to the projected initial measure vs t for several β (S²)",
           "metastability", "MetastabilityConfig", "run_metastability",
           (NLAT, T_END, BETAS, CHECK_NLAT, PAPER1_SCHEME, AMR_POLE, RUN_WORKERS), PAPER1_QUICK),
    _entry("terminal-phase", "Paper 1: mass leaving the VBᵀ eigenspace for V's (S²), switch time vs β",
           "terminal_phase", "TerminalPhaseConfig", "run_terminal_phase",
           (NLAT, T_END, BETAS, CHECK_NLAT, PAPER1_SCHEME, AMR_POLE, RUN_WORKERS), PAPER1_QUICK),
    _entry("particles-vs-density", "Paper 1: N-particle runs against the density run, errors vs N",
           "particles_vs_density", "ParticlesVsDensityConfig", "run_particles_vs_density",
           (NLAT, T_END, BETAS, PARTICLE_COUNTS, RUN_WORKERS), PAPER1_QUICK),
    _entry("circle-clusters", "Paper 1: number and positions of clusters vs β and t (S¹, Q=K=V=I)",
           "circle_clusters", "CircleClustersConfig", "run_circle_clusters",
           (T_END, BETAS.with_(check=_betas_circle)), PAPER1_QUICK),
    _entry("heat-kernel", "Paper 2: E[ρ] decays like the heat kernel, rates per degree (S¹, S²); the Itô step fails",
           "heat_kernel", "HeatKernelConfig", "run_heat_kernel",
           (NLAT_S2, T_END.with_(fields=("t_end_sphere", "t_end_circle")), WORKERS), PAPER2_QUICK),
    _entry("synchronization", "Paper 2: E_β under common noise, rates vs λ̄' and λ₁ (particles d = 4, 5; density S²)",
           "synchronization", "SynchronizationConfig", "run_synchronization",
           (T_END, WORKERS, DENSITY_SCHEME), PAPER2_QUICK),
    _entry("chaos", "Paper 2: particles vs the SPDE on the same Brownian path, errors vs N",
           "chaos", "ChaosConfig", "run_chaos",
           (PARTICLE_COUNTS, NLAT_S2.with_(check=_nlat_chaos), T_END, RUN_WORKERS), PAPER2_QUICK),
    _entry("depth-width", "Paper 2: the discrete transformer vs the limit SDE, errors vs depth L and width m",
           "depth_width", "DepthWidthConfig", "run_depth_width",
           (T_END, RUN_WORKERS), PAPER2_QUICK),
])

__all__ = ["EXPERIMENTS", "Experiment", "OPTION_ORDER", "Option"]
