"""CF conformance of every kind of file spherepde writes.

Two checks on the same files (a density run on S² with Q, K, V, one on S¹, an ensemble, a
particle run, the depth–width file):

(and ``spherepde run``'s run.nc with density, particles and noise).

* ``test_cf_rules`` always runs: the subset of CF-1.8 rules that these files touch —
  1. a ``Conventions`` attribute naming CF, and a ``status`` attribute;
  2. no string (NC_STRING / variable-length) variables (text as char arrays);
  3. every ``units`` attribute parses as a udunits unit (with cf_units when it is installed,
     else against the short list of units spherepde writes);
  4. the canonical units of each standard name used (latitude degree_north, longitude
     degree_east, cell_area m2, time: a time unit "since" a reference date);
  5. a variable with ``axis = "T"`` or ``standard_name = "time"`` has reference-time units
     (CF 4.4) — spherepde's dimensionless model time therefore claims neither;
  6. ``cell_measures = "area: X"``: X exists and is in m² (CF 7.2);
  7. ``bounds`` and ``coordinates`` attributes name variables of the file;
  8. every coordinate variable has ``units`` (CF 3.1) and no boundary variable has a
     ``_FillValue`` (CF 7.1).
* ``test_cfchecker`` runs cfchecker itself when it is installed and working (it needs the
  udunits2 C library), reading the standard-name table subset in ``cf_tables/`` (cfchecker
  would download the whole table; the files use four standard names) — no errors allowed.
"""
from __future__ import annotations

import re
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from spherepde.grids import CircleGrid, GaussGrid
from spherepde.io.netcdf import STATUSES, NetCDFWriter

TABLES = Path(__file__).parent / "cf_tables"
CANONICAL = {"latitude": "degree_north", "longitude": "degree_east", "cell_area": "m2"}
KNOWN_UNITS = {"1", "m", "m2", "m-1", "m-2", "radian", "degrees_north", "degrees_east", "degree_north",
               "degree_east"}


def _units_ok(units: str) -> bool:
    try:
        import cf_units
    except ImportError:
        return units in KNOWN_UNITS
    try:
        cf_units.Unit(units)
    except ValueError:
        return False
    return True


def _convertible(units: str, canonical: str) -> bool:
    try:
        import cf_units
    except ImportError:
        aliases = {"degree_north": {"degree_north", "degrees_north"},
                   "degree_east": {"degree_east", "degrees_east"}, "m2": {"m2", "m^2"}}
        return units in aliases.get(canonical, {canonical})
    return cf_units.Unit(units).is_convertible(cf_units.Unit(canonical))


def _is_reference_time(units: str) -> bool:
    return re.fullmatch(r"\s*(s|sec|seconds?|min|minutes?|h|hours?|days?)\s+since\s+\S.*", units) is not None


def cf_problems(path) -> list[str]:
    """The rules of the module docstring broken by the file at ``path`` (empty: none)."""
    out = []
    with netCDF4.Dataset(path) as ds:
        glob = ds.__dict__
        if not str(glob.get("Conventions", "")).startswith("CF-"):
            out.append("global: no Conventions = 'CF-…'")
        if glob.get("status") not in STATUSES:
            out.append(f"global: status {glob.get('status')!r} not in {STATUSES}")
        for name, var in ds.variables.items():
            a = var.__dict__
            if var.dtype is str:
                out.append(f"{name}: string variable (use a char array)")
            units = a.get("units")
            if units is not None and not _units_ok(str(units)):
                out.append(f"{name}: units {units!r} do not parse")
            std = a.get("standard_name")
            if std in CANONICAL and not (units is not None and _convertible(str(units), CANONICAL[std])):
                out.append(f"{name}: standard_name {std} needs units like {CANONICAL[std]}, got {units!r}")
            if (std == "time" or a.get("axis") == "T") and not (units and _is_reference_time(str(units))):
                out.append(f"{name}: a time axis needs units 'unit since date', got {units!r}")
            if "cell_measures" in a:
                m = re.fullmatch(r"\s*area:\s*(\w+)\s*", a["cell_measures"])
                if m is None or m.group(1) not in ds.variables:
                    out.append(f"{name}: cell_measures {a['cell_measures']!r} names no variable")
                elif not _convertible(str(ds[m.group(1)].getncattr("units")), "m2"):
                    out.append(f"{name}: the area measure {m.group(1)} is not in m2")
            for key in ("bounds", "coordinates"):
                for ref in str(a.get(key, "")).split():
                    if ref not in ds.variables:
                        out.append(f"{name}: {key} names {ref!r}, which is not a variable")
            if var.dimensions == (name,) and "units" not in a:
                out.append(f"{name}: a coordinate variable without units")
            if "bounds" in a and a["bounds"] in ds.variables and "_FillValue" in ds[a["bounds"]].ncattrs():
                out.append(f"{a['bounds']}: a boundary variable with a _FillValue")
    return out


# ---- the files -------------------------------------------------------------------------------
def _density_run(path, grid):
    from spherepde.io.netcdf import NetCDFTracker
    from spherepde.solvers.controller import Controller
    from spherepde.solvers.eulerian.meanfield import MeanFieldFFSL

    rho0 = np.ones(grid.shape)
    d = 3 if isinstance(grid, GaussGrid) else 2
    static = {n: (np.eye(3), ("dim", "dim2"), {"units": "1", "long_name": n}) for n in "QKV"} if d == 3 else None

    def still(t, x, rho):
        return np.zeros_like(x)

    tracker = NetCDFTracker(path, grid, config={"case": "still"}, static=static)
    Controller(MeanFieldFFSL(grid, still), tracker, dt=0.5).run(rho0, (0.0, 1.0))
    return path


def _ensemble(path):
    """``spherepde ensemble``: sweep.nc over two realisations (float32 fields, moments)."""
    from spherepde.runs.ensemble import DEFAULT, run_ensemble

    raw = {**DEFAULT, "grid": {"kind": "sphere", "nlat": 8},
           "stepping": {"t_end": 0.1, "dt": 0.05, "output_every": 0.05}}
    return Path(run_ensemble(raw, 2, path.with_suffix(""), workers=0, progress=False)["file"])


def _sweep_text_and_numbers(path):
    """``spherepde sweep`` over a text key (the limiter) and a number (β): sweep.nc."""
    from spherepde.runs.sweep import run_sweep

    raw = {"grid": {"kind": "circle", "n": 16},
           "dynamics": {"attention": {"Q": np.eye(2).tolist(), "K": np.eye(2).tolist(),
                                      "V": np.eye(2).tolist(), "beta": 2.0}},
           "stepping": {"t_end": 0.2, "output_every": 0.1},
           "sweep": {"representations.density.limiter": ["positive", "monotone"],
                     "dynamics.attention.beta": [1.0, 2.0]}}
    return Path(run_sweep(raw, path.with_suffix(""), workers=0, progress=False)["file"])


def _particles(path):
    from spherepde.dynamics.attention import Attention
    from spherepde.io.particles import write_particles_netcdf
    from spherepde.solvers.lagrangian.particles import ParticleResult

    x = np.random.default_rng(0).standard_normal((2, 5, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    res = ParticleResult(times=np.array([0.0, 1.0]), positions=x, n_steps=1, wall_time=0.0)
    eye = np.eye(3)
    return write_particles_netcdf(path, res, config={"N": 5}, seed=0, attention=Attention(eye, eye, eye, 1.0))


def _depth_width(path):
    from spherepde.experiments.depth_width import OBSERVABLES, DepthWidthConfig
    from spherepde.experiments.depth_width_output import write_depth_width_netcdf

    c = DepthWidthConfig.quick()
    L, n_depths = c.depths[-1], len(c.depths)
    rng = np.random.default_rng(0)
    dep = {"x_transformer": rng.random((L + 1, c.n_tokens, 3)), "x_reference": rng.random((L + 1, c.n_tokens, 3)),
           "errors": rng.random((n_depths, c.paths)), "errors_sup_t": rng.random((n_depths, c.paths)),
           "ref_check": rng.random(c.paths)}
    diffs = {name: {"rows": [{"diff": 0.1, "stderr": 0.01} for _ in c.widths]} for name in OBSERVABLES}
    return write_depth_width_netcdf(path, c, dep, {}, diffs)


def _circle_writer(path):
    with NetCDFWriter(path, CircleGrid(8), variables={"density": {"units": "1"}}, config={}) as w:
        w.append(0.0, density=np.ones(8))
    return path


def _run_command(path):
    """``spherepde run`` (experiments.run): density + particles + noise on one path, small."""
    from spherepde.runs.config import RunConfig
    from spherepde.runs.execute import run

    config = RunConfig.from_dict({
        "grid": {"kind": "sphere", "nlat": 8},
        "dynamics": {"attention": {"Q": np.eye(3).tolist(), "K": np.eye(3).tolist(),
                                   "V": np.eye(3).tolist(), "beta": 2.0},
                     "noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 2, "seed": 1}},
        "representations": {"density": True, "particles": {"n": 10, "seed": 2}},
        "stepping": {"t_end": 0.2, "dt": 0.05, "output_every": 0.1}})
    out = run(config, path.with_suffix(""), progress=False)
    return Path(out["file"])


def _run_gridless(path):
    """``spherepde run`` without a grid (grid.kind = "none", d = 5): particles and noise only."""
    from spherepde.runs.config import RunConfig
    from spherepde.runs.execute import run

    config = RunConfig.from_dict({
        "grid": {"kind": "none", "dimension": 5},
        "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "seed": 1}},
        "representations": {"density": False, "particles": {"n": 10, "seed": 2}},
        "stepping": {"t_end": 0.2, "dt": 0.05, "output_every": 0.1},
        "outputs": {"diagnostics": ["energy"]}})
    out = run(config, path.with_suffix(""), progress=False)
    return Path(out["file"])


MAKERS = {
    "run_command": _run_command,
    "run_gridless": _run_gridless,
    "run_sphere": lambda p: _density_run(p, GaussGrid(8)),
    "run_circle": lambda p: _density_run(p, CircleGrid(16)),
    "circle_writer": _circle_writer,
    "ensemble": _ensemble,
    "sweep": _sweep_text_and_numbers,
    "particles": _particles,
    "depth_width": _depth_width,
}


@pytest.fixture(scope="module")
def cf_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cf")
    return {name: make(folder / f"{name}.nc") for name, make in MAKERS.items()}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_cf_rules(kind, cf_files):
    assert cf_problems(cf_files[kind]) == []


def test_cf_rules_catch_the_old_mistakes(tmp_path):
    """The checks are not vacuous: time units "1" on axis T, cell_area in "1", a string variable,
    a coordinate without units, a boundary variable with a _FillValue."""
    path = tmp_path / "bad.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.setncatts({"Conventions": "CF-1.8", "status": "complete"})
        ds.createDimension("time", 2)
        t = ds.createVariable("time", "f8", ("time",))
        t.setncatts({"units": "1", "axis": "T"})
        a = ds.createVariable("cell_area", "f8", ("time",))
        a.setncatts({"units": "1", "standard_name": "cell_area"})
        v = ds.createVariable("rho", "f8", ("time",))
        v.setncatts({"units": "1", "cell_measures": "area: cell_area"})
        ds.createVariable("label", str, ("time",))
        ds.createDimension("x", 2)
        ds.createDimension("bnds", 2)
        x = ds.createVariable("x", "f8", ("x",))
        x.setncatts({"bounds": "x_bnds"})
        ds.createVariable("x_bnds", "f8", ("x", "bnds"), fill_value=np.nan)
    problems = " | ".join(cf_problems(path))
    for word in ("time axis", "standard_name cell_area", "not in m2", "string variable",
                 "coordinate variable without units", "boundary variable with a _FillValue"):
        assert word in problems


def _cfchecker():
    try:
        from cfchecker.cfchecks import CFChecker
    except (ImportError, OSError, FileNotFoundError):  # cfunits raises without the udunits2 library
        return None
    return CFChecker


@pytest.mark.skipif(_cfchecker() is None, reason="cfchecker (and the udunits2 library) not installed")
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_cfchecker(kind, cf_files, capsys):
    checker = _cfchecker()(
        cfStandardNamesXML=str(TABLES / "standard-name-table-subset.xml"),
        cfAreaTypesXML=str(TABLES / "area-type-table-subset.xml"),
        cfRegionNamesXML=str(TABLES / "region-names-subset.xml"), silent=True, version="CF-1.8")
    checker.checker(str(cf_files[kind]))
    counts = checker.get_counts()
    messages = [m for m in checker.all_messages if m.startswith(("ERROR", "FATAL"))]
    assert counts["FATAL"] == 0 and counts["ERROR"] == 0, messages
