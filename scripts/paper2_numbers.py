"""The values docs/paper2.md quotes that are not a plain field of an experiment's data file:
the noise-kernel rows (computed here by ``NoiseKernel``), and numbers derived by arithmetic from
the experiments' data files (differences in standard errors, ratios, extremes, the rows of the
synchronization table with keys a numbers block can name), into ``docs/data/paper2.json``.

    python scripts/paper2_numbers.py

Reads docs/data/{heat_kernel,synchronization,synchronization_figure1,chaos,depth_width,sync_path,
synchronization_density,synchronization_sphere_particles}.json
(their sha256 are stored under ``sources``), so run it again after regenerating any of them,
then ``python scripts/docs_numbers.py``.  Run from the repository root; a few seconds.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
SOURCES = ("heat_kernel", "synchronization", "synchronization_figure1", "chaos", "depth_width",
           "sync_path", "synchronization_density", "synchronization_sphere_particles")

#: (activation, d, σ_U = σ_W) rows of the page's kernel table
KERNEL_ROWS = (("relu", 3, 0.0), ("relu", 3, 0.5), ("relu", 4, 0.5), ("relu", 5, 0.5),
               ("sigmoid", 4, 0.0), ("sigmoid", 5, 0.0), ("tanh", 4, 0.0))
#: the synchronization table's rows, in the page's order: (d, activation, σ)
SYNC_ROWS = tuple((d, a, s) for d in (4, 5)
                  for a, s in (("relu", 0.0), ("relu", 0.5), ("sigmoid", 0.0), ("tanh", 0.0)))


def kernels() -> list[dict]:
    from spherepde.noise.kernel import NoiseKernel

    rows = []
    for act, d, s in KERNEL_ROWS:
        k = NoiseKernel(act, d=d, sigma_u=s, sigma_w=s)
        rows.append({"activation": act, "d": d, "sigma": s, "kappa1": float(k.kappa1),
                     "kappa_prime1": float(k.kappa_prime1), "lambda_1": float(k.lambda_1),
                     "lambda_bar": float(k.lambda_bar), "lambda_bar_prime_beta1": float(k.lambda_bar_prime(1.0)),
                     "odd": "yes" if k.odd else "no"})
    return rows


def heat(h: dict) -> dict:
    ito = h["ito_check"]
    rows = [(r["grid"], d["degree"], d["z"]) for r in h["runs"] for d in r["degrees"]]
    inside = [z for _, _, z in rows if abs(z) <= 2]
    grid = {"circle": "S¹", "sphere": "S²"}
    beyond = "; ".join(f"{grid[g]} degree {k} is {z:+.1f} se".replace("-", "−")
                       for g, k, z in rows if abs(z) > 2) or "none is beyond 2 se"
    p2 = math.erf(2 / math.sqrt(2))  # P(|z| ≤ 2) for a standard normal
    return {"rates": len(rows), "within_2se": len(inside), "max_abs_z_within_2se": max(map(abs, inside)),
            "beyond_2se": beyond, "chance_any_beyond_2se": 1 - p2 ** len(rows),
            "ito_log10_max_growth": math.log10(max(ito["ito_single_path_max_growth"])),
            "ito_min_relative": ito["ito_single_path_min_relative"],
            "ito_steps": len(ito["ito_single_path_max_growth"])}


def bootstrap_rate_se(times, paths, n: int = 2000, seed: int = 0) -> float:
    """Standard deviation of the fitted rate of the mean E_β over resamplings of the paths
    (with replacement; the experiment's fit: ``log_rate`` over the outputs after t = 0)."""
    import numpy as np
    from spherepde.validation.fits import log_rate

    t, e = np.asarray(times), np.asarray(paths)
    rng = np.random.default_rng(seed)
    rates = [log_rate(t[1:], e[rng.integers(0, len(e), len(e))].mean(0)[1:])[0] for _ in range(n)]
    return float(np.std(rates, ddof=1))


def sphere_rows(s: dict, particles: dict) -> list[dict]:
    """The S² density table: synchronization_density.json (scripts/paper2_sync_density.py)
    beside the particles of scripts/paper2_sync_particles.py on the same paths."""
    dens = s["density"]
    rows = []
    for r, e, w, x in zip(particles["paths"], dens["energy_paths"], dens["final_rms_width_rad"],
                          dens["energy_rate_per_path"]):
        if r["points_E_end"] != e[-1]:
            raise SystemExit("synchronization_sphere_particles.json holds other density paths than "
                             "synchronization_density.json: run scripts/paper2_sync_particles.py again")
        rate = (f"{x:.2f}".replace("-", "−") if x is not None and not math.isnan(x)
                else f"no fit (never ≤ {dens['fit_window_rad'][1]:g} rad long enough)")
        rows.append({**r, "rms_width_end": w, "rate": rate})
    return rows


def sphere(s: dict, rows: list[dict]) -> dict:
    ratios = [r["ratio_end_points_over_particles"] for r in rows]
    return {"ratio_min": min(ratios), "ratio_max": max(ratios),
            "two_lambda_1": s["density"]["predicted_energy_rate"],
            "particle_rates": ", ".join(f"{r['particle_rate_second_half']:.2f}".replace("-", "−") for r in rows)}


def synchronization(s: dict, fig1: dict) -> dict:
    by = {(r["d"], r["activation"], r["sigma"], r["attention_scale"]): r for r in s["runs"]}
    rows = []
    for d, a, sig in SYNC_ROWS:
        r0 = by[(d, a, sig, 0.0)]
        dev = r0["lyapunov_measured"] - r0["lambda_1"]
        rows.append({"d": d, "activation": a, "sigma": sig, "lambda_1": r0["lambda_1"],
                     "lyapunov": r0["lyapunov_measured"], "lyapunov_se": r0["lyapunov_stderr"],
                     "lyapunov_minus_lambda_1": dev, "lyapunov_z": dev / r0["lyapunov_stderr"],
                     "lambda_bar": r0["lambda_bar"], "lambda_bar_prime": r0["lambda_bar_prime"],
                     "rate_attractive": by[(d, a, sig, 1.0)]["rate_mean_energy"],
                     "rate_off": r0["rate_mean_energy"],
                     "rate_off_bootstrap_se": bootstrap_rate_se(r0["times"], r0["energy_paths"]),
                     "realisations": len(r0["energy_paths"]),
                     "rate_repulsive": by[(d, a, sig, -1.0)]["rate_mean_energy"],
                     "aligned": r0["fraction_pairs_cos_above_0.99"],
                     "antialigned": r0["fraction_pairs_cos_below_-0.99"],
                     "thm_1_4_applies": r0["thm_1_4_applies"]})
    z = sorted(rows, key=lambda r: -abs(r["lyapunov_z"]))
    f1 = {r["activation"]: r for r in fig1["runs"]}
    boot = [r["rate_off_bootstrap_se"] for r in rows]
    return {"rows": rows, "rate_off_bootstrap_se_min": min(boot), "rate_off_bootstrap_se_max": max(boot),
            "lyapunov_within_2se": sum(abs(r["lyapunov_z"]) <= 2 for r in rows),
            "lyapunov_largest": z[:2],
            "figure1": {a: {"aligned": r["fraction_pairs_cos_above_0.99"],
                            "antialigned": r["fraction_pairs_cos_below_-0.99"],
                            "final_energy_mean": r["final_energy_mean"]} for a, r in f1.items()},
            "two_antipodal_clusters_energy": 0.25 * (1 - math.exp(-2 * fig1["config"]["beta"]))}


def chaos(c: dict) -> dict:
    runs = []
    for r in c["runs"]:
        last = r["particles"][-1]
        w2 = r["rate_w2"]
        moments = [row["moment_error"] for row in r["particles"]]
        runs.append({"path": r["path"],
                     "other_path_over_same_path": r["control_other_path_moment_error"] / last["moment_error"],
                     # the W₂ rate against Prop 1.2's N^(−1/4), in standard errors of the fit
                     # (negative: faster than N^(−1/4))
                     "w2_rate_vs_quarter_se": (w2["exponent"] + 0.25) / w2["stderr"],
                     "moment_error_falls_every_step": all(b < a for a, b in zip(moments, moments[1:]))})
    grid = [r["grid_error_moments_nlat_half"] for r in c["runs"]]
    ratio = [r["other_path_over_same_path"] for r in runs]
    z = [r["w2_rate_vs_quarter_se"] for r in runs]
    return {"runs": runs, "grid_error_min": min(grid), "grid_error_max": max(grid),
            "other_path_ratio_min": min(ratio), "other_path_ratio_max": max(ratio),
            "w2_faster_than_quarter_se_min": -max(z), "w2_faster_than_quarter_se_max": -min(z),
            "w2_faster_than_quarter": ("faster" if max(z) < -2 else "slower" if min(z) > 2
                                       else "not resolvably faster or slower")}


def depth_width(w: dict) -> dict:
    diffs = w["width"]["differences"]
    z = {k: max(abs(row["diff"]) / row["stderr"] for row in v["rows"]) for k, v in diffs.items()}
    return {"width_max_abs_z": z, "width_max_abs_z_all": max(z.values()),
            "width_any_resolved": any(row["resolved"] for v in diffs.values() for row in v["rows"]),
            "reference_check_percent": 100 * w["depth"]["reference"]["relative_to_error_at_largest_L"]}


def sync_path(sp: dict) -> dict:
    out = {}
    for key in ("lagrangian_remap", "ffsl_ppm"):
        r = sp[key]
        steeper = [x < r["two_lambda_1"] for x in (r["rate_density"], r["rate_reference"])]
        out[key] = {"rate_relative_difference": abs(r["rate_density"] / r["rate_reference"] - 1),
                    "rates_vs_2lambda1": ("steeper than" if all(steeper) else
                                          "shallower than" if not any(steeper) else "on either side of"),
                    "rates_sign": ("positive (E_β grows)" if min(r["rate_density"], r["rate_reference"]) > 0
                                   else "negative" if max(r["rate_density"], r["rate_reference"]) < 0
                                   else "of either sign"),
                    "ratio_target": ("meets" if 0.67 <= r["ratio_range"][0] and r["ratio_range"][1] <= 1.5
                                     else "misses"),
                    "decades_vs_target": "at least" if r["decades"] >= 2.5 else "less than"}
    return out


#: large per-output arrays left out of the copies under ``experiments``
ARRAYS = {"times", "energy_mean", "energy_paths", "mean_ratio", "stderr_ratio", "ito_single_path_max_growth"}


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in ARRAYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def experiments(src: dict) -> dict:
    """The experiments' summaries (without their per-output arrays), each with ``written_by``:
    its ``script`` where a script wrote the file, else the ``spherepde experiment`` command whose
    summary it is (the configuration is in the file).  Blocks read these copies, so a summary
    written by the experiment itself needs no edit to name what made it."""
    out = {}
    for name in ("chaos", "depth_width", "synchronization"):
        d = {k: v for k, v in src[name].items()
             if not (name == "synchronization" and k == "density")}  # see synchronization_density
        out[name] = {**strip(d), "written_by": d.get("script") or
                     f"python3 -m spherepde experiment {d['experiment']} (configuration in its data file)"}
        # NaN (no fit) as null: strict JSON
        out[name] = json.loads(json.dumps(out[name]).replace("NaN", "null"))
    return out


def main() -> int:
    missing = [n for n in SOURCES if not (DATA / f"{n}.json").exists()]
    if missing:
        raise SystemExit(f"missing data files: {missing} (see each section's script)")
    src = {n: json.loads((DATA / f"{n}.json").read_text()) for n in SOURCES}
    data = {"script": "scripts/paper2_numbers.py",
            "sources": {f"docs/data/{n}.json": hashlib.sha256((DATA / f"{n}.json").read_bytes()).hexdigest()
                        for n in SOURCES},
            "kernels": kernels(), "heat_kernel": heat(src["heat_kernel"]),
            "synchronization": synchronization(src["synchronization"], src["synchronization_figure1"]),
            "chaos": chaos(src["chaos"]), "depth_width": depth_width(src["depth_width"]),
            "sync_path": sync_path(src["sync_path"]), "experiments": experiments(src),
            "sphere_rows": sphere_rows(src["synchronization_density"], src["synchronization_sphere_particles"])}
    data["sphere"] = sphere(src["synchronization_density"], data["sphere_rows"])
    (DATA / "paper2.json").write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
