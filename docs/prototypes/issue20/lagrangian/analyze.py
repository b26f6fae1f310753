"""Tables of the LQ prototype against the particle reference(s) -> tables.json (and stdout).
Reference at β = 100: the independent large-N GPU particle reference written by the issue-20
reference helper (../reference/data/metastability_beta100.json: N = 20000, 8 seeds, RK4 dt 0.05;
its definitions are in the file).  At β = 1000 that file has N = 20000 with one seed only (below
the documented need), so the reference there is this prototype's own GPU particle runs
(gpu_runs.py: N = 65536, 2 seeds).  Both: mean ± standard error over seeds.  Particles' W₂ is
w2_own (against the projection of their own draw); the LQ's is w2_projection (exact split of ρ_0,
equal to its quadrature's split to 1e-15).  rel = (LQ − ref)/max(|ref|, 0.05); z = (LQ − ref)/stderr."""
import glob
import json

import numpy as np
from scipy.optimize import brentq

R = json.load(open("gpu/gpu_results.json"))
runs = R["runs"]
for f in sorted(glob.glob("lq_beta*_n*_dt*.json")):
    r = json.load(open(f))
    r["source"] = "cpu"
    r["rotated"] = f.endswith("_rotated.json")
    runs.append(r)
KEYS = {"energy": ("energy", "energy"), "w2": ("w2_own", "w2_projection"),
        "dist_eigenspace": ("dist_eigenspace", "dist_eigenspace"),
        "dist_eigenspace_V": ("dist_eigenspace_V", "dist_eigenspace_V")}
TIMES = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]


def val(r, key, t):
    return r["series"][key][r["times"].index(float(t))] if float(t) in r["times"] else None


def order(h, e):
    """p with e(h) = e0 + C h^p through three (h, e) points (None if no root)."""
    (h1, h2, h3), (e1, e2, e3) = h, e
    q = (e2 - e3) / (e1 - e2) if e1 != e2 else np.nan
    f = lambda p: (h2 ** p - h3 ** p) / (h1 ** p - h2 ** p) - q
    try:
        return brentq(f, 0.05, 8.0)
    except (ValueError, ZeroDivisionError):
        return None


tables = {"reference": {}, "rows": [], "convergence": [], "runs": []}
for beta in (100.0, 1000.0):
    P = [r for r in runs if r.get("kind") == "particles" and r["beta"] == beta]
    if beta == 100.0:      # the independent reference: per-seed series of the N = 20000 ensemble
        ens = [e for e in json.load(open("../reference/data/metastability_beta100.json"))["ensembles"] if e["N"] == 20000][0]
        P = []
        for k, seed in enumerate(ens["seeds"]):
            ser = {key: ens["per_seed"][key][k] for key in ens["per_seed"]}   # [seed][time]
            ser["w2_own"] = ser["w2_projection_own"]
            P.append({"kind": "particles", "beta": beta, "n": ens["N"], "seed": seed,
                      "times": [float(t) for t in ens["times"]], "series": ser})
    L = sorted([r for r in runs if r.get("kind") != "particles" and r["beta"] == beta and r["dt"] == 0.05
                and r.get("method", "auto") in ("torch", "auto")], key=lambda r: r["nlat"])
    # one run per nlat (CPU and GPU agree; prefer the GPU one where both exist)
    seen, Ls = set(), []
    for r in sorted(L, key=lambda r: (r["nlat"], r.get("source") == "cpu")):
        if r["nlat"] not in seen:
            seen.add(r["nlat"]); Ls.append(r)
    tables["reference"][str(beta)] = {"n": [r["n"] for r in P], "seeds": [r["seed"] for r in P]}
    for name, (pk, lk) in KEYS.items():
        for t in TIMES:
            pv = np.array([val(r, pk, t) for r in P])
            m, se = float(pv.mean()), float(pv.std(ddof=1) / np.sqrt(len(pv)))
            row = {"beta": beta, "quantity": name, "t": t, "ref": m, "ref_stderr": se, "lq": {}}
            for r in Ls:
                v = val(r, lk, t)
                if v is None:
                    continue
                row["lq"][r["nlat"]] = {"value": v, "rel": (v - m) / max(abs(m), 0.05),
                                        "z": (v - m) / se if se > 0 else None}
            # observed order and Richardson limit from the three finest levels
            ns = sorted(row["lq"])[-3:]
            if len(ns) == 3:
                h = [np.pi / n for n in ns]
                e = [row["lq"][n]["value"] for n in ns]
                p = order(h, e)
                row["order"] = p
                if p is not None:
                    C = (e[1] - e[2]) / (h[1] ** p - h[2] ** p)
                    row["richardson"] = e[2] - C * h[2] ** p
            tables["rows"].append(row)
for r in runs:
    if r.get("kind") != "particles":
        tables["runs"].append({k: r.get(k) for k in ("beta", "nlat", "points", "dt", "method", "wall_s",
                                                     "step_s", "maxrss_MB", "gpu_mem_peak_MB",
                                                     "mass_error", "min_weight", "source")})
# switch time (first time dist_eigenspace_V < dist_eigenspace after the minimum of dist_eigenspace,
# as the reference file defines it) and exit time (fits.exit_time, band 2, on W₂)
from spherepde.validation.fits import exit_time, switch_time


def times_of(r, w2key):
    t = np.array(r["times"]); d = np.array(r["series"]["dist_eigenspace"])
    dv = np.array(r["series"]["dist_eigenspace_V"]); i = int(np.argmin(d))
    st = switch_time(t[i:], d[i:], dv[i:])
    return {"switch_time": st, "exit_time": exit_time(t, np.array(r["series"][w2key]), 2.0),
            "w2_min": float(np.min(r["series"][w2key])), "t_w2_min": float(t[np.argmin(r["series"][w2key])])}


tables["switch"] = []
for r in runs:
    if r.get("kind") == "particles":
        tables["switch"].append({"kind": "particles (this prototype, GPU)", "beta": r["beta"], "N": r["n"],
                                 "seed": r["seed"], **times_of(r, "w2_own")})
    elif r["dt"] in (0.05, 0.1):
        tables["switch"].append({"kind": "LQ" + ("-rotated" if r.get("rotated") else ""), "beta": r["beta"],
                                 "nlat": r["nlat"], "points": r["points"], "dt": r["dt"],
                                 **times_of(r, "w2_projection")})
for b in (100, 1000):
    for e in json.load(open(f"../reference/data/metastability_beta{b}.json"))["ensembles"]:
        tables["switch"].append({"kind": "particles (reference file)", "beta": float(b), "N": e["N"],
                                 "seeds": e["n_seeds"], "switch_time": e["scalars_mean"]["switch_time"],
                                 "switch_time_stderr": e["scalars_stderr"]["switch_time"],
                                 "switched": e["scalars_count"]["switch_time"],
                                 "w2_min": e["scalars_mean"]["w2_min_own"],
                                 "w2_min_stderr": e["scalars_stderr"]["w2_min_own"]})
json.dump(tables, open("tables.json", "w"), indent=1)

for beta in (100.0, 1000.0):
    for name in KEYS:
        rows = [r for r in tables["rows"] if r["beta"] == beta and r["quantity"] == name]
        ns = sorted({n for r in rows for n in r["lq"]})
        print(f"\nβ={beta:g} {name}: ref ± se | " + " | ".join(f"n{n} (rel%)" for n in ns) + " | p, Richardson")
        for r in rows:
            cells = [f"{r['lq'][n]['value']:.4f} ({100 * r['lq'][n]['rel']:+.1f})" if n in r["lq"] else "-" for n in ns]
            pr = f"{r.get('order') or float('nan'):.2f}, {r.get('richardson', float('nan')):.4f}"
            print(f"t={r['t']:>2} {r['ref']:.4f}±{r['ref_stderr']:.4f} | " + " | ".join(cells) + " | " + pr)
print()
for r in tables["switch"]:
    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
print()
for r in tables["runs"]:
    print(r)
