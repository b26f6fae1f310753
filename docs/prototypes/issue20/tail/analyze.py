"""Issue 20, the "tail" hypothesis: where do the ``--refine 1.5`` changes of W₂(ρ_t, Π#ρ₀) and of
the distance to E(VBᵀ) of the ``amr`` density come from, and which refinement change shrinks
them?

For each ``spherepde run`` folder (an ``amr`` run of ``examples/metastability.toml``) the leaves
stored in run.nc (``density_leaves``) are read back at every output time and split by
s = ⟨x, e_y⟩ (e_y spans E(VBᵀ); the clusters sit near s = ±1):

* W₂² to a δ_e + (1 − a) δ_{−e} (:func:`w2_two_point`'s optimal plan) = the own-side cost of
  each |s| band + the cross cost (mass sent to the far pole, |mass(s > 0) − a| of it);
* dist² = Σ w (1 − s²) by the same bands;
* the mass of each band and the share of it on leaves of level 0 (base cells).

Three targets a: ``grid`` (what run.nc's w2_projection uses: ρ₀'s cells of the ``grid.nlat``
Gauss grid split by area), ``exact`` (ρ₀(y > 0) = ½ + ⟨â, e_y⟩/8) and ``own`` (the run's
own leaves at t = 0, exact to round-off since the leaves integrate ρ₀ exactly).

A pair (run, refined run) is compared at every common output time: the change of W₂ and of the
distance relative to max(|value of the refined run|, 0.05) (the issue's measure), and the
change of W₂² split into the bands.  At β = 100 the mass transferred across the plane y = 0,
mass(s > 0)(t) − mass(s > 0)(0), is compared with the particle reference
(docs/prototypes/issue20/reference/data/metastability_beta100.json: per-seed ``mass_plus_y``;
the per-seed difference to t = 0 removes the sampling error of the initial split).  CPU seconds
come from ``/usr/bin/time -v`` files beside the run folders when present.

    python3 docs/prototypes/issue20/tail/analyze.py --out docs/prototypes/issue20/tail/tail.json
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from spherepde.experiments.metastability import initial_density
from spherepde.grids import GaussGrid
from spherepde.io.rundata import read_run
from spherepde.io.summary import jsonable
from spherepde.solvers.eulerian.amr import stored_leaves
from spherepde.validation.metrics import two_point_weight_cells

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
E_Y = np.array([0.0, 1.0, 0.0])
BANDS = (0.0, 0.1, 0.5, 0.9, 0.99, 1.0 + 1e-12)
BAND_NAMES = ("[0,.1)", "[.1,.5)", "[.5,.9)", "[.9,.99)", "[.99,1]")
#: CPU seconds of the runs made before this study (docs/data/amr_deep_levels.json, user time)
DEEP = ROOT / "docs/data/amr_deep_levels.json"


def leaves(folder: Path):
    """[(centres (n, 3), masses (n,), levels (n,))] at every output time."""
    import netCDF4

    out = []
    with netCDF4.Dataset(folder / "run.nc") as ds:
        ds.set_auto_mask(False)
        for st in ds["density_leaves"][:]:
            mesh, m = stored_leaves(st)
            out.append((mesh.xc, m, mesh.level))
    return out


def decompose(x, w, lev, a: float) -> dict:
    """W₂², dist² and mass by |s| band (module docstring) for one output."""
    w = w / w.sum()
    s = x @ E_Y
    order = np.argsort(-s)
    so, wo = s[order], w[order]
    cum = np.cumsum(wo)
    to_e = np.clip(a - (cum - wo), 0.0, wo)
    to_m = wo - to_e
    own = np.where(so > 0, to_e * (2 - 2 * so) + 0 * to_m, to_m * (2 + 2 * so))
    cross = np.where(so > 0, to_m * (2 + 2 * so), to_e * (2 - 2 * so))
    cross_mass = np.where(so > 0, to_m, to_e)
    band = np.digitize(np.abs(so), BANDS) - 1
    levo = lev[order]
    out = {"w2": float(np.sqrt(max(own.sum() + cross.sum(), 0.0))), "w2sq": float(own.sum() + cross.sum()),
           "cross_cost": float(cross.sum()), "cross_mass": float(cross_mass.sum()),
           "mass_plus": float(wo[so > 0].sum()), "dist": float(np.sqrt(np.sum(wo * (1 - so * so)))),
           "bands": {}}
    for k, name in enumerate(BAND_NAMES):
        b = band == k
        out["bands"][name] = {"own_cost": float(own[b].sum()), "dist_sq": float(np.sum(wo[b] * (1 - so[b] ** 2))),
                              "mass": float(wo[b].sum()), "mass_level0": float(wo[b & (levo == 0)].sum()),
                              "leaves": int(b.sum())}
    return out


def cpu_seconds(folder: Path):
    """user + system seconds from ``/usr/bin/time -v`` beside the folder, else the user seconds
    that docs/data/amr_deep_levels.json holds for a run of that name (to its t_end)."""
    f = folder.parent / (folder.name + ".time")
    if not f.is_file():
        runs = json.loads(DEEP.read_text())["runs"] if DEEP.is_file() else {}
        return next((r.get("cpu_user_s") for r in runs.values() if r.get("folder") == folder.name), None)
    txt = f.read_text()
    u = re.search(r"User time \(seconds\): ([0-9.]+)", txt)
    sy = re.search(r"System time \(seconds\): ([0-9.]+)", txt)
    return float(u[1]) + float(sy[1]) if u and sy else None


def run_record(folder: Path, every: int = 1) -> dict:
    s = json.loads((folder / "summary.json").read_text())
    cfg = s["config"]
    data = read_run(folder / "run.nc")
    grid = GaussGrid(cfg["grid"]["nlat"])
    dirn = np.asarray(cfg["initial"]["direction"], float)
    a_grid = two_point_weight_cells(grid, initial_density(grid, cfg["initial"]["direction"]), E_Y)
    a_exact = 0.5 + float(dirn[1] / np.linalg.norm(dirn)) / 8
    L = leaves(folder)
    x0, w0, _ = L[0]
    a_own = float(w0[x0 @ E_Y > 0].sum() / w0.sum())
    dens = cfg["representations"]["density"]
    pf = folder.parent / (folder.name + ".proto")
    rec = {"folder": folder.name, "beta": cfg["dynamics"]["attention"]["beta"], "grid_nlat": cfg["grid"]["nlat"],
           "base_nlat": dens.get("base_nlat") or cfg["grid"]["nlat"], "max_level": dens["max_level"],
           "mass_per_cell": dens["mass_per_cell"], "cpu_s": cpu_seconds(folder),
           "proto": pf.read_text().strip() if pf.is_file() else "",
           "polar_merge": dens.get("polar_merge"), "leaves_end": s["density"].get("leaves"), "leaves_max": None,
           "a": {"grid": a_grid, "exact": a_exact, "own": a_own},
           "times": [float(t) for t in data.times], "energy": [float(v) for v in data.series["energy"]],
           "w2_projection_runnc": [float(v) for v in data.series["w2_projection"]],
           "leaves_n": [int(l[1].size) for l in L], "by_target": {}}
    rec["leaves_max"] = max(rec["leaves_n"])
    for name, a in rec["a"].items():
        rec["by_target"][name] = [decompose(x, w, lev, a) for x, w, lev in L]
    return rec


def _round(o):
    """Floats to 6 significant digits (the file stays small; every reported number has ≤ 3)."""
    if isinstance(o, float):
        return float(f"{o:.6g}")
    if isinstance(o, dict):
        return {k: _round(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_round(v) for v in o]
    return o


def rel(a, b):
    return abs(a - b) / max(abs(b), 0.05)


def compare(run: dict, ref: dict, target: str = "own") -> dict:
    """Changes run → refined at the common output times (t ≤ both ends)."""
    t1, t2 = np.asarray(run["times"]), np.asarray(ref["times"])
    rows = []
    for i, t in enumerate(t1):
        j = np.flatnonzero(np.isclose(t2, t))
        if not j.size:
            continue
        j = int(j[0])
        A, B = run["by_target"][target][i], ref["by_target"][target][j]
        row = {"t": float(t), "energy": rel(run["energy"][i], ref["energy"][j]),
               "w2": rel(A["w2"], B["w2"]), "dist": rel(A["dist"], B["dist"]),
               "w2_run": A["w2"], "w2_ref": B["w2"], "dist_run": A["dist"], "dist_ref": B["dist"],
               "d_w2sq": A["w2sq"] - B["w2sq"], "d_cross_cost": A["cross_cost"] - B["cross_cost"],
               "d_mass_plus": A["mass_plus"] - B["mass_plus"],
               "d_own_cost": {k: A["bands"][k]["own_cost"] - B["bands"][k]["own_cost"] for k in BAND_NAMES},
               "d_dist_sq": {k: A["bands"][k]["dist_sq"] - B["bands"][k]["dist_sq"] for k in BAND_NAMES},
               "d_mass": {k: A["bands"][k]["mass"] - B["bands"][k]["mass"] for k in BAND_NAMES}}
        if target == "own":
            row["w2_runnc"] = rel(run["w2_projection_runnc"][i], ref["w2_projection_runnc"][j])
        rows.append(row)
    worst = {q: max(rows, key=lambda r: r[q]) for q in ("energy", "w2", "dist")}
    out = {"run": run["folder"], "refined": ref["folder"], "target": target, "rows": rows,
           "max": {q: {"change": worst[q][q], "t": worst[q]["t"]} for q in worst}}
    if target == "own":
        out["max"]["w2_runnc"] = max(r["w2_runnc"] for r in rows)
    return out


def particles_transfer(ensemble_N: int = 20000) -> dict:
    """mass(y > 0)(t) − mass(y > 0)(0) of the particle reference at β = 100, mean ± SE over seeds."""
    d = json.loads((ROOT / "docs/prototypes/issue20/reference/data/metastability_beta100.json").read_text())
    out = {}
    for e in d["ensembles"]:
        mp = np.asarray(e["per_seed"]["mass_plus_y"], float)  # (seeds, times)
        dm = mp - mp[:, :1]
        out[str(e["N"])] = {"times": e["times"], "mean": dm.mean(0).tolist(),
                            "stderr": (dm.std(0, ddof=1) / np.sqrt(dm.shape[0])).tolist(),
                            "n_seeds": int(dm.shape[0])}
    return out


def against_particles(run: dict) -> dict:
    """E_β and dist to E(VBᵀ) of a β = 100 run against tests/data/particles_metastability_beta100.json
    (N = 20 000, 8 seeds, mean ± SE): per output time, and the largest deviation (relative to
    max(|mean|, 0.05), and in SE) over t ≤ 12, 12 < t ≤ 18, 18 < t ≤ 24."""
    ref = json.loads((ROOT / "tests/data/particles_metastability_beta100.json").read_text())
    rows = []
    for k, t in enumerate(ref["times"]):
        i = np.flatnonzero(np.isclose(run["times"], t))
        if not i.size:
            continue
        i = int(i[0])
        row = {"t": t}
        for q, v in (("energy", run["energy"][i]), ("dist_eigenspace", run["by_target"]["own"][i]["dist"])):
            mean, se = ref["mean"][q][k], ref["stderr"][q][k]
            row[q] = {"amr": v, "mean": mean, "se": se, "relative": (v - mean) / max(abs(mean), 0.05),
                      "in_se": (v - mean) / se if se > 0 else None}
        rows.append(row)
    summ = {}
    for q in ("energy", "dist_eigenspace"):
        summ[q] = {}
        for name, lo, hi in (("to12", -1.0, 12.0), ("to18", 12.0, 18.0), ("to24", 18.0, 24.0)):
            w = [r[q] for r in rows if lo < r["t"] <= hi and r[q]["in_se"] is not None]
            if w:
                summ[q][name] = {"max_relative": max(abs(v["relative"]) for v in w),
                                 "max_in_se": max(abs(v["in_se"]) for v in w)}
    return {"rows": rows, "summary": summ}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", nargs="*", default=[], help="RUN:REFINED folder pairs")
    ap.add_argument("--beta100", nargs="*", default=[], help="β = 100 folders compared with the particles")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    recs: dict = {}
    for p in args.pairs + args.beta100:
        for f in p.split(":"):
            if f not in recs:
                recs[f] = run_record(Path(f))
                print("read", f, file=sys.stderr)
    pairs = {}
    for p in args.pairs:
        a, b = p.split(":")
        key = f"{Path(a).name}:{Path(b).name}"
        pairs[key] = {tg: compare(recs[a], recs[b], tg) for tg in ("own", "grid")}
    part = particles_transfer()
    b100 = {}
    b100_diag = {Path(f).name: against_particles(recs[f]) for f in args.beta100}
    for f in args.beta100:
        r = recs[f]
        rows = []
        for N, pe in part.items():
            for k, t in enumerate(pe["times"]):
                i = np.flatnonzero(np.isclose(r["times"], t))
                if i.size:
                    dm = r["by_target"]["own"][int(i[0])]["mass_plus"] - r["by_target"]["own"][0]["mass_plus"]
                    rows.append({"N": int(N), "t": t, "amr": dm, "particles": pe["mean"][k], "stderr": pe["stderr"][k]})
        b100[Path(f).name] = rows
    # keep the file small: the band decomposition for the "own" target only
    for r in recs.values():
        for tg in ("grid", "exact"):
            r["by_target"][tg] = [{k: v for k, v in row.items() if k != "bands"} for row in r["by_target"][tg]]
    for c in pairs.values():
        c["grid"]["rows"] = [{k: r[k] for k in ("t", "energy", "w2", "dist")} for r in c["grid"]["rows"]]
    data = {"script": "docs/prototypes/issue20/tail/analyze.py", "how": " ".join(__doc__.split()),
            "bands": BAND_NAMES,
            "runs": {Path(k).name: v for k, v in recs.items()}, "pairs": pairs,
            "beta100_transfer_vs_particles": b100, "beta100_vs_particles": b100_diag}
    text = json.dumps(_round(jsonable(data)), indent=None, ensure_ascii=False, allow_nan=False)
    Path(args.out).write_text(text + "\n")
    for name, r in data["runs"].items():
        print(f"{name}: cpu {r['cpu_s']} leaves max {r['leaves_max']} end {r['leaves_end']} t_end {r['times'][-1]}")
    for name, r in b100_diag.items():
        print(name, json.dumps(r["summary"]))
    for key, c in pairs.items():
        m = c["own"]["max"]
        print(f"{key}: W2 {m['w2']['change']:.1%} (t={m['w2']['t']}) dist {m['dist']['change']:.1%} "
              f"(t={m['dist']['t']}) E {m['energy']['change']:.1%}  [run.nc w2 {m['w2_runnc']:.1%}; grid-a W2 "
              f"{c['grid']['max']['w2']['change']:.1%}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
