"""Run the standard transport tests end to end and report the published error norms.

The cases and norms are in :mod:`spherepde.validation.transport_cases`, the order fit of
``validate convergence`` in :func:`spherepde.validation.fits.fit_order`.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.grids import GaussGrid
from spherepde.solvers import make_stepper
from spherepde.solvers.controller import Controller
from spherepde.io.netcdf_writer import NetCDFTracker
from spherepde.solvers.trackers import DiagnosticsTracker, ProgressTracker
from spherepde.solvers.eulerian.ppm import LIMITERS
from spherepde.solvers.eulerian.transport import check_polar
from spherepde.validation.transport_cases import (
    CASES,
    FIELDS,
    error_norms,
    initial_field,
    make_case,
)


@dataclass(frozen=True)
class TransportConfig:
    """A transport run: one standard case and initial field on a Gauss grid.

    ``courant`` is Δt·max|u|/Δλ with max|u| over the whole period (a fixed step, as in the
    published comparisons); ``alpha`` only matters for ``williamson1``; ``n_outputs``
    snapshots (plus the initial state) are written evenly over the period.  ``polar``: the
    treatment of the polar rings (``"auto"``, the default: the positive unsplit polar cap of
    :mod:`spherepde.solvers.eulerian.polar_cap` on its first ``cap_rings`` rings around each
    pole, default min(4, nlat/4), from nlat 8 on; ``"cap"``; ``"split"``: the split step alone).
    """

    case: str = "nl-case4"
    field: str = "gaussian-hills"
    nlat: int = 64
    alpha: float = 0.0
    courant: float = 0.8
    limiter: str = "positive"
    stepper: str = "ffsl-ppm"
    n_outputs: int = 4
    polar: str = "auto"
    cap_rings: int | None = None

    def __post_init__(self) -> None:
        if self.case not in CASES:
            raise ValueError(f"case must be one of {CASES}, got {self.case!r}")
        if self.field not in FIELDS:
            raise ValueError(f"field must be one of {FIELDS}, got {self.field!r}")
        if isinstance(self.nlat, bool) or not isinstance(self.nlat, int) or self.nlat < 4 or self.nlat % 2:
            raise ValueError(f"nlat must be an even integer >= 4, got {self.nlat!r}")
        if not (math.isfinite(self.alpha) and 0.0 <= self.alpha <= math.pi / 2 + 1e-12):
            raise ValueError(f"alpha must be in [0, π/2], got {self.alpha!r}")
        if self.alpha != 0.0 and self.case != "williamson1":
            raise ValueError(f"alpha applies to williamson1 only, got alpha={self.alpha!r} for {self.case!r}")
        if not (math.isfinite(self.courant) and 0.0 < self.courant <= 4.0):
            raise ValueError(f"courant must be in (0, 4], got {self.courant!r}")
        if self.limiter not in LIMITERS:
            raise ValueError(f"limiter must be one of {LIMITERS}, got {self.limiter!r}")
        if not isinstance(self.n_outputs, int) or self.n_outputs < 1:
            raise ValueError(f"n_outputs must be an integer >= 1, got {self.n_outputs!r}")
        check_polar(self.polar, self.cap_rings, self.nlat, limiter=self.limiter)
        if self.polar == "cap" and self.stepper != "ffsl-ppm":
            raise ValueError(f"polar={self.polar!r} applies to the ffsl-ppm stepper only, "
                             f"got stepper {self.stepper!r}")

    def to_dict(self) -> dict:
        return {"kind": "transport", **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "TransportConfig":
        d = dict(d)
        kind = d.pop("kind", "transport")
        if kind != "transport":
            raise ValueError(f"not a transport configuration (kind={kind!r})")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown configuration keys {sorted(unknown)}; allowed: {sorted(known)}")
        return cls(**d)


def fixed_dt(stepper, period: float, courant: float, samples: int = 41) -> tuple[float, int]:
    """Step Δt = T/n with n the fewest steps such that Δt·max_t max|u| / Δλ ≤ courant.

    max_t is taken over ``samples`` times in [0, T] (the test velocities are smooth in t).
    """
    vmax = max(stepper._face_velocities(t)[-1] for t in np.linspace(0.0, period, samples))
    n = max(1, int(np.ceil(period * vmax / (courant * stepper._dx))))
    return period / n, n


def run_transport(config: TransportConfig, *, output: str | Path | None = None,
                  progress: bool | None = None) -> dict:
    """Transport the initial field over one period and compare with the exact solution.

    Returns a JSON-ready dict with the keys of ``spherepde validate transport --json``:
    case, field, nlat, steps, seconds, l1, l2, linf, lmax, lmin, mass_error (relative),
    min_value, plus the configuration and provenance.  ``output`` (a ``.nc`` path) receives
    the initial field, ``n_outputs`` snapshots and the final field, written as the run goes.
    """
    grid = GaussGrid(config.nlat)
    case = make_case(config.case, config.alpha)
    rho0 = grid.cell_average(initial_field(config.field))
    polar = {"polar": config.polar, "cap_rings": config.cap_rings} if config.stepper == "ffsl-ppm" else {}
    stepper = make_stepper(config.stepper, grid, case.velocity, limiter=config.limiter,
                           courant=config.courant, **polar)
    transport = getattr(stepper, "transport", stepper)
    dt, n = fixed_dt(stepper, case.period, config.courant)
    times = list(np.linspace(0.0, case.period, config.n_outputs + 1))
    trackers = [DiagnosticsTracker(), ProgressTracker(disable=None if progress else True)]
    if output is not None:
        trackers.append(NetCDFTracker(Path(output), grid, config=config.to_dict(),
                                      variable="psi", title=f"spherepde transport {config.case}",
                                      attrs={"units": "1", "long_name": f"tracer ({config.field})"}))
    t0 = time.perf_counter()
    res = Controller(stepper, trackers, dt=dt).run(rho0, (0.0, case.period), output_times=times)
    seconds = time.perf_counter() - t0
    rho = res.state
    m0 = grid.integrate(rho0)
    out = {
        "case": config.case, "field": config.field, "nlat": config.nlat,
        "resolution_deg": grid.resolution_deg, "alpha": config.alpha,
        "limiter": config.limiter, "courant": config.courant, "stepper": config.stepper,
        "polar": transport.polar, **({"cap_rings": transport.cap_rings,
                                      "cap_fallbacks": transport.cap_fallbacks}
                                     if transport.polar == "cap" else {}),
        "steps": res.n_steps, "dt": dt, "substeps": stepper.substeps,
        "seconds": round(seconds, 3),
        **error_norms(grid, rho, rho0),
        "mass_error": float((grid.integrate(rho) - m0) / m0),
        "min_value": float(rho.min()),
        "max_value": float(rho.max()),
        "version": __version__,
    }
    if output is not None:
        out["output"] = str(output)
    return out
