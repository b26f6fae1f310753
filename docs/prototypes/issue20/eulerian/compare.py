"""Tables of the AMR prototype (and ffsl-ppm) against an independent particle reference.

python compare.py BETA REF_JSON [N_REF]
REF_JSON: the assembled particle reference (another helper's GPU ensembles: per ensemble `times`,
`mean`/`stderr` of energy, w2_projection_exact, dist_eigenspace, dist_eigenspace_V, and
`scalars_mean`/`scalars_stderr`), N_REF the ensemble used (default: the largest N).
Writes data/summary_beta{B}.json: per run and time the value, reference mean ± stderr, relative
error (value − ref)/max(|ref|, 0.05) and z = (value − ref)/stderr; the run's scalars (min W2 and
its time, exit time = fits.exit_time(band 2), switch time = fits.switch_time from the minimum of
dist_eigenspace on) beside the reference's; cost, mass, positivity.  Prints markdown tables."""
from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

import numpy as np

from spherepde.validation.fits import exit_time, switch_time

HERE = Path(__file__).parent
DATA = HERE / "data"
KEYS = ("energy", "w2_projection", "dist_eigenspace", "dist_eigenspace_V")
REF_KEY = {"energy": "energy", "w2_projection": "w2_projection_exact",
           "dist_eigenspace": "dist_eigenspace", "dist_eigenspace_V": "dist_eigenspace_V"}
TIMES = (2, 4, 6, 8, 10, 12, 14, 16, 20, 24)


def scalars(t, s):
    t = np.asarray(t, float)
    w2 = np.asarray(s["w2_projection"], float)
    dA, dV = np.asarray(s["dist_eigenspace"], float), np.asarray(s["dist_eigenspace_V"], float)
    i = int(np.argmin(w2))
    j = int(np.argmin(dA))
    return {"w2_min": float(w2[i]), "t_w2_min": float(t[i]), "exit_time": exit_time(t, w2, 2.0),
            "switch_time": switch_time(t[j:], dA[j:], dV[j:]) if j < len(t) - 1 else float("nan"),
            "energy_end": float(s["energy"][-1])}


def main():
    beta = int(sys.argv[1])
    refdoc = json.loads(Path(sys.argv[2]).read_text())
    ens = refdoc["ensembles"]
    n_ref = int(sys.argv[3]) if len(sys.argv) > 3 else max(e["N"] for e in ens)
    ref = [e for e in ens if e["N"] == n_ref][0]
    rt = np.array(ref["times"])
    runs = []
    for f in sorted(glob.glob(str(DATA / f"amr_beta{beta}_*.json"))) + sorted(glob.glob(str(DATA / f"ffsl_beta{beta}_*.json"))):
        r = json.loads(Path(f).read_text())
        r["file"] = Path(f).name
        runs.append(r)
    out = {"beta": beta, "reference": {"file": sys.argv[2].split("/")[-1], "N": n_ref, "n_seeds": ref["n_seeds"],
                                       "scalars_mean": ref["scalars_mean"], "scalars_stderr": ref["scalars_stderr"],
                                       "all_N_switch_time": {e["N"]: [e["scalars_mean"]["switch_time"], e["scalars_stderr"]["switch_time"]] for e in ens},
                                       "all_N_exit_time": {e["N"]: [e["scalars_mean"]["exit_time_own"], e["scalars_stderr"]["exit_time_own"]] for e in ens}},
           "runs": []}
    for r in runs:
        ser = r["series"]
        st = np.array([s["t"] for s in ser])
        rows = []
        for t in TIMES:
            i = np.flatnonzero(np.abs(st - t) < 1e-6)
            k = np.flatnonzero(np.abs(rt - t) < 1e-6)
            if not i.size or not k.size:
                continue
            row = {"t": t}
            for key in KEYS:
                v = ser[i[0]][key]
                m, e = ref["mean"][REF_KEY[key]][k[0]], ref["stderr"][REF_KEY[key]][k[0]]
                row[key] = {"value": v, "ref": m, "stderr": e, "rel_error": (v - m) / max(abs(m), 0.05),
                            "z": (v - m) / e if e else None}
            rows.append(row)
        sc = scalars(st, {k: [s[k] for s in ser] for k in KEYS})
        out["runs"].append({"file": r["file"], "scheme": r.get("scheme", "amr"), "h_finest": r.get("h_finest"),
                            "nlat0": r.get("nlat0"), "lmax": r.get("lmax"), "nlat": r.get("nlat"),
                            "limiter": r.get("limiter"), "finished": r.get("finished", True),
                            "t_reached": ser[-1]["t"], "wall_s": r["wall_s"], "cpu_s": r.get("cpu_s"),
                            "solver_wall_s": r.get("solver_wall_s"), "steps": r.get("steps"),
                            "max_cells": r.get("max_cells"), "final_cells": ser[-1].get("cells"),
                            "max_rss_MB": r.get("max_rss_MB"),
                            "max_abs_mass_error": max(abs(s.get("mass_error", 0.0)) for s in ser),
                            "min_mass": min(s.get("min_mass", np.inf) for s in ser),
                            "scalars": sc, "rows": rows})
    (DATA / f"summary_beta{beta}.json").write_text(json.dumps(out, indent=1))
    rs, re_ = ref["scalars_mean"], ref["scalars_stderr"]
    f = lambda v: float("nan") if v is None else v  # noqa: E731
    print(f"reference: {out['reference']['file']} N = {n_ref}, {ref['n_seeds']} seeds; "
          f"w2_min {f(rs['w2_min_exact']):.4f}±{f(re_['w2_min_exact']):.4f} at {f(rs['t_w2_min_exact']):.2f}, "
          f"exit {f(rs['exit_time_own']):.2f}±{f(re_['exit_time_own']):.2f}, "
          f"switch {f(rs['switch_time']):.2f}±{f(re_['switch_time']):.2f}")
    for run in out["runs"]:
        sc = run["scalars"]
        print(f"\n### {run['file']}  h={run['h_finest']:.4f} t={run['t_reached']} wall={run['wall_s']:.0f}s "
              f"cpu={run['cpu_s'] or float('nan'):.0f}s cells≤{run['max_cells']} (end {run['final_cells']}) "
              f"rss={run['max_rss_MB'] or float('nan'):.0f}MB |mass err|≤{run['max_abs_mass_error']:.1e} "
              f"min mass {run['min_mass']:.1e}; w2_min {sc['w2_min']:.4f} at {sc['t_w2_min']}, "
              f"exit {sc['exit_time']:.2f}, switch {sc['switch_time']:.2f}")
        print("| t | " + " | ".join(f"{k}: value (ref±se) rel" for k in KEYS) + " |")
        for row in run["rows"]:
            cells = [f"{row[k]['value']:.4f} ({row[k]['ref']:.4f}±{row[k]['stderr'] or float('nan'):.4f}) "
                     f"{100 * row[k]['rel_error']:+.1f}%" for k in KEYS]
            print(f"| {row['t']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
