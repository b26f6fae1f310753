"""Issue 20, item 4: is the demo's density resolved at t ≤ 18, and is the late change a time shift?

Reads the runs of ``run_all.sh`` (RUNS folder: NAME/run.nc, NAME/time.txt) and writes demo.json:

* ``runs``: CPU s (user + sys of /usr/bin/time -v), wall s, steps, leaves at the end (amr), E_β
  (the run's ``energy`` diagnostic) at t = 6, 12, 15, 18 and the distance to V's eigenspace at 18;
* ``pairs``: for each pair (a run and its ``--refine 1.5``, or another coarse/fine pair)
  ``spherepde validate resolution`` (``compare_runs``: largest change of any diagnostic, worst
  quantity and t), the largest relative change of E_β (relative to max(|E_fine|, 0.05), as
  ``validate resolution``) and its t, ``resolved_to``: the last output time up to which every E_β
  change stays < 5 %, and the time-shift fit: on the terminal window t ∈ [11, 18] the constant τ
  minimising the RMS of E_coarse(t) − E_fine(t + τ) (E_fine interpolated by PCHIP, only t with
  t + τ ≤ 18), the shift-corrected largest change on the window, and the same for the distance
  to V's eigenspace (τ_dist); ``event_times``: the t at which dist to V's eigenspace falls below
  0.5 and 0.3 in each run (linear interpolation) and their differences.

    RUNS=/tmp/s9m-runs python3 analyse.py          # → demo.json
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.optimize import minimize_scalar

from spherepde.io.rundata import read_run
from spherepde.runs.compare import compare_runs

HERE = Path(__file__).resolve().parent
RUNS = Path(os.environ.get("RUNS", HERE / "runs"))
TIMES = (6.0, 12.0, 15.0, 18.0)
WINDOW = (11.0, 18.0)
FLOOR = 0.05          # validate resolution's floor of the reference value
TOL = 0.05            # item 4's 5 %
LEVELS = (0.5, 0.3)   # dist to V's eigenspace: event times
TAU_MAX = 2.0         # |τ| searched
TAU_AT = (12.0, 14.0, 16.0, 17.0, 18.0)

#: (coarse, fine, kind): "refine" pairs are run / its --refine 1.5
PAIRS = [("ffsl24", "ffsl36", "refine"), ("ffsl36", "ffsl54", "refine"), ("ffsl48", "ffsl72", "refine"),
         ("ffsl72", "ffsl108", "refine"), ("ffsl96", "ffsl144", "refine"),
         ("ffsl24", "ffsl48", "x2"), ("ffsl36", "ffsl72", "x2"), ("ffsl48", "ffsl96", "x2"),
         ("ffsl72", "ffsl144", "x2"),
         ("amr24l2", "amr36l2", "refine"), ("amr36l2", "amr54l2", "refine"), ("amr48l1", "amr72l1", "refine"),
         ("amr24l3", "amr36l3", "refine"), ("amr36l3", "amr54l3", "refine"), ("amr48l2", "amr72l2", "refine"),
         ("ffsl54", "ffsl108", "x2"),
         ("amr24l2", "amr48l1", "same finest h"), ("amr24l2", "amr24l3", "one level more"),
         ("amr54l2", "ffsl108", "vs finest ffsl"), ("amr72l1", "ffsl108", "vs finest ffsl"),
         ("amr54l3", "ffsl108", "vs finest ffsl"),
         ("amr72l2", "ffsl108", "vs finest ffsl")]


def cpu(folder: Path) -> dict:
    text = (folder / "time.txt").read_text()
    user = float(re.search(r"User time \(seconds\): ([0-9.]+)", text)[1])
    sys_ = float(re.search(r"System time \(seconds\): ([0-9.]+)", text)[1])
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)", text)[1]
    secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.split(":"))))
    return {"cpu_s": round(user + sys_, 2), "user_s": user, "sys_s": sys_, "wall_s": round(secs, 2)}


def series(name: str) -> tuple[np.ndarray, dict]:
    d = read_run(RUNS / name / "run.nc")
    v = d.valid()
    return d.times[v], {k: np.asarray(s)[v] for k, s in d.series.items()}


def at(t: np.ndarray, y: np.ndarray, s: float) -> float:
    i = int(np.argmin(np.abs(t - s)))
    return float(y[i]) if abs(t[i] - s) < 1e-9 else float("nan")


def crossing(t: np.ndarray, y: np.ndarray, level: float) -> float | None:
    """First t from which on y stays below ``level`` (linear interpolation), None if never."""
    below = y < level
    if not below[-1]:
        return None
    k = len(y) - 1
    while k > 0 and below[k - 1]:
        k -= 1
    if k == 0:
        return float(t[0])
    return float(t[k - 1] + (y[k - 1] - level) / (y[k - 1] - y[k]) * (t[k] - t[k - 1]))


def shift_fit(t: np.ndarray, yc: np.ndarray, yf: np.ndarray) -> dict:
    """τ minimising the RMS of yc(t) − yf(t + τ) on WINDOW (t + τ ≤ t_end), and the changes."""
    fine = PchipInterpolator(t, yf)
    win = (t >= WINDOW[0] - 1e-9) & (t <= WINDOW[1] + 1e-9)

    def rel(tau: float) -> np.ndarray:
        ts = t[win] + tau
        ok = (ts >= t[0]) & (ts <= t[-1])
        ref = fine(ts[ok])
        return (yc[win][ok] - ref) / np.maximum(np.abs(ref), FLOOR)

    def cost(tau: float) -> float:
        r = rel(tau)
        return float(np.sqrt(np.mean(r ** 2))) if r.size >= 5 else np.inf

    taus = np.linspace(-TAU_MAX, TAU_MAX, 161)
    tau0 = taus[int(np.argmin([cost(x) for x in taus]))]
    res = minimize_scalar(cost, bounds=(tau0 - 0.05, tau0 + 0.05), method="bounded")
    tau = float(res.x)
    r, r0 = rel(tau), rel(0.0)
    return {"tau": round(tau, 4), "rms_unshifted": float(np.sqrt(np.mean(r0 ** 2))),
            "rms_shifted": float(np.sqrt(np.mean(r ** 2))),
            "max_change_unshifted": float(np.max(np.abs(r0))), "max_change_shifted": float(np.max(np.abs(r))),
            "points_compared": int(r.size)}


def tau_pointwise(t: np.ndarray, dc: np.ndarray, df: np.ndarray, ec: np.ndarray, ef: np.ndarray) -> dict:
    """τ(t) from the distance to V's eigenspace (falling in the terminal phase): the τ with
    dist_fine(t + τ) = dist_coarse(t), the fine series linearly interpolated and searched on
    t + τ ∈ [10, 18]; then the energy change with that shift, |E_c(t) − E_f(t + τ(t))|."""
    fine_e = PchipInterpolator(t, ef)
    sel = t >= 10 - 1e-9
    tf, yf = t[sel], df[sel]
    taus, changes = {}, {}
    for s in t[(t >= WINDOW[0] - 1e-9)]:
        y = dc[np.argmin(np.abs(t - s))]
        hit = None
        for k in range(len(tf) - 1):
            lo, hi = sorted((yf[k], yf[k + 1]))
            if lo <= y <= hi and yf[k] != yf[k + 1]:
                hit = tf[k] + (yf[k] - y) / (yf[k] - yf[k + 1]) * (tf[k + 1] - tf[k])
                break
        key = f"{s:g}"
        if hit is None:
            taus[key] = changes[key] = None
            continue
        taus[key] = round(float(hit - s), 4)
        ref = float(fine_e(hit))
        changes[key] = abs(float(ec[np.argmin(np.abs(t - s))]) - ref) / max(abs(ref), FLOOR)
    ok = {k: v for k, v in changes.items() if v is not None}
    worst = max(ok, key=ok.get) if ok else None
    return {"tau": taus, "energy_change_shifted": changes,
            "energy_max_change_shifted": ok[worst] if ok else None,
            "energy_max_change_shifted_t": None if worst is None else float(worst)}


def pair(a: str, b: str, kind: str) -> dict:
    ta, sa = series(a)
    tb, sb = series(b)
    chk = compare_runs(RUNS / a / "run.nc", RUNS / b / "run.nc")
    ea, eb = sa["energy"], sb["energy"]
    rel = np.abs(ea - eb) / np.maximum(np.abs(eb), FLOOR)
    k = int(np.argmax(rel))
    bad = np.flatnonzero(rel >= TOL)
    resolved_to = float(ta[-1]) if bad.size == 0 else (float(ta[bad[0] - 1]) if bad[0] > 0 else None)
    ev = {}
    for lev in LEVELS:
        ca, cb = crossing(ta, sa["dist_eigenspace_V"], lev), crossing(tb, sb["dist_eigenspace_V"], lev)
        ev[f"dist_V<{lev:g}"] = {"coarse": ca, "fine": cb,
                                 "shift": None if ca is None or cb is None else round(ca - cb, 4)}
    return {"coarse": a, "fine": b, "kind": kind,
            "validate_resolution": {"max_relative_change": chk["max_relative_change"],
                                    "worst": chk["worst"], "resolved": chk["resolved"],
                                    "energy_change": chk["per_quantity"]["energy"],
                                    "switch_time": chk.get("switch_time")},
            "energy_max_change": float(rel[k]), "energy_max_change_t": float(ta[k]),
            "energy_change_at": {f"{s:g}": at(ta, rel, s) for s in TIMES},
            "energy_resolved_to": resolved_to,
            "shift_energy": shift_fit(ta, ea, eb),
            "shift_dist_V": shift_fit(ta, sa["dist_eigenspace_V"], sb["dist_eigenspace_V"]),
            "event_times": ev,
            "max_change_to_t16": {q: float(np.max(np.abs(sa[q] - sb[q])[ta <= 16 + 1e-9]
                                                  / np.maximum(np.abs(sb[q]), FLOOR)[ta <= 16 + 1e-9]))
                                  for q in ("energy", "dist_eigenspace", "dist_eigenspace_V", "w2_projection")},
            "tau_from_dist_V": tau_pointwise(ta, sa["dist_eigenspace_V"], sb["dist_eigenspace_V"], ea, eb)}


def extrapolate(runs: dict) -> dict:
    """ffsl-ppm: E(t) = E_inf + C·nlat^-p fitted (least squares in E_inf, C, p) to every ffsl run
    at t = 12 and 18; CPU s = a·nlat^q; the --refine 1.5 change of E(18) this fit predicts,
    (E(N) − E(1.5N))/E(1.5N), and the smallest nlat (even) where it is < 5 %, with its CPU s
    and the pair's.  A model of five to six points, for orders of magnitude only."""
    from scipy.optimize import curve_fit

    ff = sorted((r["nlat"], r) for name, r in runs.items() if name.startswith("ffsl"))
    n = np.array([x[0] for x in ff], float)
    out: dict = {"nlat": n.tolist()}
    if n.size < 4:
        return out
    cpu_fit = np.polyfit(np.log(n), np.log([x[1]["cpu_s"] for x in ff]), 1)
    out["cpu_exponent_q"] = float(cpu_fit[0])

    def cpu_at(m: float) -> float:
        return float(np.exp(np.polyval(cpu_fit, np.log(m))))

    for s in ("12", "18"):
        e = np.array([x[1]["energy"][s] for x in ff])
        (einf, c, p), _ = curve_fit(lambda m, a, b, q: a + b * m ** -q, n, e, p0=(e[-1] * 0.8, 1.0, 1.0),
                                    maxfev=20000)
        fit = {"E_inf": float(einf), "C": float(c), "p": float(p),
               "residual_max": float(np.max(np.abs(einf + c * n ** -p - e)))}

        def change(m: float, a=einf, b=c, q=p) -> float:
            fine = a + b * (1.5 * m) ** -q
            return abs(a + b * m ** -q - fine) / max(abs(fine), FLOOR)

        grid = np.arange(24, 2001, 2)
        ok = [m for m in grid if change(m) < TOL]
        if ok:
            m = float(ok[0])
            fit.update(nlat_pair_below_5pc=m, refined_nlat=float(2 * round(0.75 * m)),
                       cpu_s_run=cpu_at(m), cpu_s_refined=cpu_at(1.5 * m))
        fit["predicted_change"] = {f"{m:g}": change(m) for m in (24, 36, 48, 72, 108)}
        out[f"E{s}"] = fit
    return out


def main() -> None:
    runs = {}
    for folder in sorted(p for p in RUNS.iterdir() if (p / "run.nc").exists() and (p / "time.txt").exists()):
        t, s = series(folder.name)
        summ = json.loads((folder / "summary.json").read_text())
        dens = summ["density"]
        cfg = summ["config"]["representations"]["density"]
        cfg = cfg if isinstance(cfg, dict) else {"scheme": "ffsl-ppm"}
        runs[folder.name] = {**cpu(folder), "scheme": cfg.get("scheme"), "nlat": summ["config"]["grid"]["nlat"],
                             "max_level": cfg.get("max_level"), "mass_per_cell": cfg.get("mass_per_cell"),
                             "pole": cfg.get("pole"), "steps": dens.get("steps"), "leaves_end": dens.get("leaves"),
                             "energy": {f"{x:g}": at(t, s["energy"], x) for x in TIMES},
                             "dist_V_18": at(t, s["dist_eigenspace_V"], 18.0),
                             "energy_series": [float(x) for x in s["energy"]]}
    pairs = {f"{a}/{b}": pair(a, b, k) for a, b, k in PAIRS if a in runs and b in runs}
    out = {"script": "docs/prototypes/issue20/demo/analyse.py (RUNS=… python3 analyse.py)",
           "runs_script": "docs/prototypes/issue20/demo/run_all.sh",
           "how": "density only (demo_density.toml = spherepde.experiments.demo.DEMO without particles), "
                  "one thread, nice 10, on a shared 2-core machine; CPU s = user + sys of /usr/bin/time -v",
           "times": list(TIMES), "window": list(WINDOW), "tolerance": TOL,
           "runs": runs, "pairs": pairs, "extrapolation_ffsl": extrapolate(runs)}
    (HERE / "demo.json").write_text(json.dumps(out, indent=1, allow_nan=True) + "\n")
    print(json.dumps(out["extrapolation_ffsl"], indent=1))
    print(f"{'run':10} {'CPU s':>7} " + " ".join(f"E({x:g})".rjust(7) for x in TIMES) + "  dV(18)")
    for name, r in runs.items():
        print(f"{name:10} {r['cpu_s']:7.1f} " + " ".join(f"{r['energy'][f'{x:g}']:7.4f}" for x in TIMES)
              + f"  {r['dist_V_18']:.3f}")
    print(f"\n{'pair':18} {'maxdE':>6} {'at t':>5} {'res.to':>6} {'tau':>6} {'dE(shift)':>9} "
          f"{'tau_dV':>6} {'ev0.5':>6} {'ev0.3':>6} {'validate':>8}  τ(t) from dist_V at "
          + " ".join(f"{x:g}" for x in TAU_AT) + "  dE shifted by τ(t)")
    for name, p in pairs.items():
        se, sd = p["shift_energy"], p["shift_dist_V"]
        ev = [p["event_times"][f"dist_V<{lev:g}"]["shift"] for lev in LEVELS]
        print(f"{name:18} {p['energy_max_change']:6.1%} {p['energy_max_change_t']:5.1f} "
              f"{p['energy_resolved_to']!s:>6} {se['tau']:6.2f} {se['max_change_shifted']:9.1%} "
              f"{sd['tau']:6.2f} " + " ".join(f"{x:6.2f}" if x is not None else "  None" for x in ev)
              + f" {p['validate_resolution']['max_relative_change']:8.1%}  "
              + " ".join(f"{p['tau_from_dist_V']['tau'].get(f'{x:g}')}" for x in TAU_AT)
              + f"  {p['tau_from_dist_V']['energy_max_change_shifted']:.1%}"
              + f" at {p['tau_from_dist_V']['energy_max_change_shifted_t']}")


def markdown() -> None:
    """The README's tables from demo.json (``python3 analyse.py --markdown``)."""
    d = json.loads((HERE / "demo.json").read_text())
    print("| run | scheme | base nlat : levels | CPU s | wall s | " + " | ".join(f"E_β(t = {x:g})" for x in TIMES)
          + " | dist to E(V) at 18 |")
    print("|---|---|---|---|---|" + "---|" * len(TIMES) + "---|")
    order = sorted(d["runs"].items(), key=lambda kv: (kv[1]["scheme"] != "ffsl-ppm", kv[1]["nlat"],
                                                      kv[1]["max_level"] or 0))
    for name, r in order:
        lv = f"{r['nlat']}:{r['max_level']}" if r["scheme"] == "amr" else f"{r['nlat']}"
        print(f"| {name} | {r['scheme']} | {lv} | {r['cpu_s']:.1f} | {r['wall_s']:.0f} | "
              + " | ".join(f"{r['energy'][f'{x:g}']:.4f}" for x in TIMES) + f" | {r['dist_V_18']:.3f} |")
    print("\n| pair (coarse / fine) | kind | largest E_β change (t) | E_β < 5 % up to t "
          "| validate: largest (quantity, t) | τ(t) at t = 14 / 16 / 18 "
          "| E_β change shifted by τ(t), largest (t) | constant τ fit: τ, shifted max |")
    print("|---|---|---|---|---|---|---|---|")
    for name, p in d["pairs"].items():
        q, se, v = p["tau_from_dist_V"], p["shift_energy"], p["validate_resolution"]
        taus = " / ".join("–" if q["tau"][x] is None else f"{q['tau'][x]:+.2f}" for x in ("14", "16", "18"))
        print(f"| {name} | {p['kind']} | {p['energy_max_change']:.1%} ({p['energy_max_change_t']:g}) | "
              f"{p['energy_resolved_to']} | {v['max_relative_change']:.1%} "
              f"({v['worst']['quantity']}, {v['worst']['t']:g}) | "
              f"{taus} | {q['energy_max_change_shifted']:.1%} ({q['energy_max_change_shifted_t']:g}) | "
              f"{se['tau']:+.2f}, {se['max_change_shifted']:.1%} |")


if __name__ == "__main__":
    import sys

    markdown() if "--markdown" in sys.argv else main()
