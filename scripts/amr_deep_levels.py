"""Issue 20 measurements of the adaptive density at depth (``representations.density.scheme =
"amr"`` with ``max_level`` 4–7 and a split threshold of ≈ 1e-3 of the mass) on
``examples/metastability.toml``, into one data file for the docs.

The runs are ordinary ``spherepde run`` folders, made one thread each on the shared 2-core
machine (so only CPU seconds compare) by

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python3 -m spherepde run examples/metastability.toml \\
        --set representations.density.scheme=amr --set grid.nlat=32 \\
        --set dynamics.attention.beta=B --set representations.density.max_level=L \\
        --set representations.density.mass_per_cell=M [--refine F] --output DIR

with (B, L, M) = (1000, 5, 105.6) ± ``--refine 0.75`` / ``1.5``, (1000, 6, 422.4) (one level
deeper, the same split mass), (1000, 5, 46.9) (the split mass of ``--refine 1.5`` on the same
base: against (1000, 5, 105.6) it varies the split threshold alone, against the ``--refine 1.5``
run the base alone), (10⁴, 7, 1700) ± ``--refine 1.5`` (and once with ``stepping.t_end=60``,
``stepping.output_every=1``, after the attention culling of k-d tiles), (100, 4, 26.56) ±
``--refine 1.5``: the levels of
:func:`spherepde.solvers.eulerian.amr.levels_for_beta`.  The demo pair is ``spherepde run`` of
the demo's configuration with ``representations.density = {scheme = "amr", max_level = 5,
mass_per_cell = 106}`` ± ``--refine 1.5``.  CPU seconds (user) come from a watcher that read
each run's /proc/PID/stat once a second until it exited (LOG lines ``FOLDER USER user SYS sys
…``).  Every comparison is ``spherepde validate resolution`` (:func:`compare_runs`); the β = 100
run is also compared with the particle reference ``tests/data/particles_metastability_beta100.json``
(N = 20 000, 8 seeds, mean ± standard error), and the β = 1000 runs with the N = 20 000 particle
run of ``docs/prototypes/issue20/amr_beta1000_vs_particles.json`` (one seed).

    python3 scripts/amr_deep_levels.py RUNS_DIR LOG --out docs/data/amr_deep_levels.json
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from spherepde import __version__
from spherepde.io.rundata import read_run
from spherepde.experiments.metastability import initial_density
from spherepde.grids import GaussGrid
from spherepde.io.summary import jsonable
from spherepde.runs.compare import compare_runs
from spherepde.solvers.eulerian.amr import stored_leaves
from spherepde.validation.fits import fit_order
from spherepde.validation.metrics import w2_two_point, two_point_weight_cells
from spherepde.validation.resolution import trajectory_change

ROOT = Path(__file__).resolve().parents[1]
WATCH = re.compile(r"^(\S+) ([0-9.]+) user ([0-9.]+) sys")
#: key -> (run folder, what it is); keys hold no dots (the docs' number paths split on dots)
RUNS = {"b1000_B075": ("b1000_B075", "β = 1000, --refine 0.75"), "b1000_B": ("b1000_B", "β = 1000"),
        "b1000_Bref": ("b1000_Bref", "β = 1000, --refine 1.5"),
        "b1000_Bl6": ("b1000_Bl6", "β = 1000, one level deeper"),
        "b1000_Bm": ("b1000_Bm", "β = 1000, split mass / 2.25"),
        "b1e4_C": ("b1e4_C", "β = 10⁴"), "b1e4_Cref": ("b1e4_Cref", "β = 10⁴, --refine 1.5"),
        "b1e4_long": ("b1e4_long", "β = 10⁴ to t = 60"),
        "b100_D": ("b100_D", "β = 100"), "b100_Dref": ("b100_Dref", "β = 100, --refine 1.5"),
        "demo": ("demo5b_1", "demo (β = 30)"), "demo_ref": ("demo5b_1.5", "demo, --refine 1.5")}
#: (run, refined or varied run) pairs compared by ``validate resolution``
PAIRS = {"beta1000_refine15": ("b1000_B", "b1000_Bref"), "beta1000_refine075": ("b1000_B075", "b1000_B"),
         "beta1000_deeper": ("b1000_B", "b1000_Bl6"), "beta1000_split_only": ("b1000_B", "b1000_Bm"),
         "beta1000_split_mass": ("b1000_Bm", "b1000_Bref"),
         "beta1e4_refine15": ("b1e4_C", "b1e4_Cref"), "beta100_refine15": ("b100_D", "b100_Dref"),
         "demo_refine15": ("demo", "demo_ref")}
QUANTITIES = ("energy", "w2_projection", "dist_eigenspace", "dist_eigenspace_V")
#: the top eigenvector of VBᵀ of examples/metastability.toml (W₂'s two points ±e)
E_Y = np.array([0.0, 1.0, 0.0])


def _w2_split_by_area(folder: Path, cfg: dict) -> list[float]:
    """W₂ from the leaves to a δ_e + (1 − a) δ_{−e} at every output time, with a split by cell
    area (:func:`two_point_weight_cells`), recomputed from the stored leaves: the runs were made
    before the run pipeline's w2_projection split the cells of ρ₀ by area."""
    import netCDF4

    grid = GaussGrid(cfg["grid"]["nlat"])
    init = cfg["initial"]
    a = two_point_weight_cells(grid, initial_density(grid, init["direction"]), E_Y)
    out = []
    with netCDF4.Dataset(folder / "run.nc") as ds:
        ds.set_auto_mask(False)
        for state in ds["density_leaves"][:]:
            mesh, m = stored_leaves(state)
            out.append(w2_two_point(mesh.xc, m, E_Y, a))
    return out


def _run(folder: Path, cpu: dict) -> dict:
    s = json.loads((folder / "summary.json").read_text())
    cfg, dens = s["config"], s["config"]["representations"]["density"]
    data = read_run(folder / "run.nc")
    base = dens.get("base_nlat") or cfg["grid"]["nlat"]
    h = np.pi / (base * 2 ** dens["max_level"])
    series = {q: data.series[q].tolist() for q in QUANTITIES if q in data.series}
    if cfg["initial"].get("amplitude") == 0.5:
        series["w2_split_by_area"] = _w2_split_by_area(folder, cfg)
    w2 = np.asarray(series.get("w2_split_by_area", series["w2_projection"]))
    i = int(np.argmin(w2))
    last = {"t": float(data.times[-1]), "w2": float(w2[-1])}
    return {"beta": cfg["dynamics"]["attention"]["beta"], "base_nlat": base,
            "max_level": dens["max_level"], "mass_per_cell": dens["mass_per_cell"],
            "h_finest": h, "split_mass": dens["mass_per_cell"] * h * h,
            "cpu_user_s": cpu.get(folder.name), "leaves_end": s["density"].get("leaves"),
            "amr_steps": s["density"].get("amr_steps"), "interrupted": bool(s.get("interrupted")),
            "times": data.times.tolist(), "series": series,
            "w2_min": float(w2[i]), "t_w2_min": float(data.times[i]), "last": last,
            "t_end": float(data.times[-1])}


def _at(run: dict, t: float, q: str) -> float:
    i = int(np.argmin(np.abs(np.asarray(run["times"]) - t)))
    return float(run["series"][q][i])


def _against_particles_beta100(run: dict) -> list[dict]:
    ref = json.loads((ROOT / "tests/data/particles_metastability_beta100.json").read_text())
    rows = []
    for k, t in enumerate(ref["times"]):
        row = {"t": t}
        for q in ("energy", "dist_eigenspace"):
            mean, se = ref["mean"][q][k], ref["stderr"][q][k]
            v = _at(run, t, q)
            row[q] = {"amr": v, "particles": mean, "stderr": se, "off_in_se": (v - mean) / se if se > 0 else None,
                      "relative": (v - mean) / max(abs(mean), 0.05)}
        rows.append(row)
    return rows


def _against_particles_beta1000(runs: dict) -> list[dict]:
    ref = json.loads((ROOT / "docs/prototypes/issue20/amr_beta1000_vs_particles.json").read_text())
    out = []
    for r in ref["rows"]:
        row = {"t": r["t"]}
        for q in ("energy", "w2_projection", "dist_eigenspace"):
            row[q] = {"particles_N20000": r[q]["particles_N20000"][0],
                      **{name: _at(runs[name], r["t"], q) for name in ("b1000_B075", "b1000_B", "b1000_Bref")
                         if name in runs}}
        out.append(row)
    return out


def _summary(rows: list[dict]) -> dict:
    """The largest deviation from the particles (relative, and in standard errors) over the
    windows t ≤ 12, 12 < t ≤ 18 and 18 < t ≤ 24 (before, through and after the switch)."""
    out: dict = {}
    for q in ("energy", "dist_eigenspace"):
        out[q] = {}
        for name, lo, hi in (("to12", -1.0, 12.0), ("to18", 12.0, 18.0), ("to24", 18.0, 24.0)):
            w = [r[q] for r in rows if lo < r["t"] <= hi and r[q]["off_in_se"] is not None]
            out[q][name] = {"max_relative": max(abs(v["relative"]) for v in w),
                            "max_se": max(abs(v["off_in_se"]) for v in w)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs_dir")
    ap.add_argument("log")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    d = Path(args.runs_dir)
    cpu = {m[1]: float(m[2]) for m in map(WATCH.match, Path(args.log).read_text().splitlines()) if m}
    runs = {key: {"what": what, "folder": folder, **_run(d / folder, cpu)}
            for key, (folder, what) in RUNS.items() if (d / folder / "summary.json").is_file()}
    pairs = {}
    for key, (a, b) in PAIRS.items():
        if a in runs and b in runs:
            c = compare_runs(d / runs[a]["folder"] / "run.nc", d / runs[b]["folder"] / "run.nc")
            t = np.asarray(c.pop("times"))
            ra, rb = runs[a], runs[b]
            if "w2_split_by_area" in ra["series"] and "w2_split_by_area" in rb["series"]:
                i = [int(np.argmin(np.abs(np.asarray(ra["times"]) - x))) for x in t]
                c["w2_split_by_area"] = trajectory_change(
                    t, {"w2_split_by_area": np.asarray(rb["series"]["w2_split_by_area"])[i]},
                    {"w2_split_by_area": np.asarray(ra["series"]["w2_split_by_area"])[i]})
            c["run"], c["refined"] = a, b
            pairs[key] = c
    p100 = _against_particles_beta100(runs["b100_D"]) if "b100_D" in runs else None
    scaling = {}
    for name, keys in (("runs", ("b100_D", "b1000_B", "b1e4_C")),
                       ("refined", ("b100_Dref", "b1000_Bref", "b1e4_Cref"))):
        if all(k in runs for k in keys):
            b = np.array([runs[k]["beta"] for k in keys])
            slope, se = fit_order(np.sqrt(np.log(b) / b), [runs[k]["w2_min"] for k in keys])
            scaling[name] = {"betas": b.tolist(), "w2_min": [runs[k]["w2_min"] for k in keys],
                             "exponent": slope, "stderr": se}
    data = {"script": "scripts/amr_deep_levels.py", "version": __version__,
            "how": " ".join(" ".join(__doc__.split("\n\n")[1:4]).split()),
            "runs": runs, "pairs": pairs,
            "w2min_vs_sqrt_logb_over_b": scaling,
            "beta100_vs_particles": p100, "beta100_vs_particles_summary": _summary(p100) if p100 else None,
            "beta1000_vs_particles": _against_particles_beta1000(runs)}
    Path(args.out).write_text(json.dumps(jsonable(data), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
