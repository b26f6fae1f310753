"""Derive the numbers docs quote that need arithmetic on the raw result files (ratios, relative
changes, ranges, extrapolations), and write them with the raw values they use to
docs/data/derived_*.json, each recording its script and input files.

    python3 scripts/docs_derived.py        # rewrite every derived file (a second)
    python3 scripts/docs_numbers.py        # then re-render the pages

tests/test_docs_numbers.py checks that every derived file equals what this script computes
from its inputs now, so a re-measured input cannot leave a stale derived file behind.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.validation.fits import fit_order  # noqa: E402


def _read(name: str):
    return json.loads((ROOT / name).read_text())


def _num(x):
    """JSON's value for a float (None for NaN or ±inf)."""
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _last(series):
    return series[-1]


def paper1() -> tuple[list[str], dict]:
    files = ["docs/data/metastability_nlat32.json", "docs/data/metastability_nlat64.json",
             "docs/data/metastability_nlat96_beta100_1000.json", "docs/data/metastability_nlat112_beta1000.json",
             "docs/data/terminal_phase_nlat32.json", "docs/data/terminal_phase_nlat64.json",
             "docs/data/particles_vs_density_nlat32.json", "docs/data/circle_clusters.json",
             "docs/data/gpu_particles_convergence.json", "benchmarks/results/density_vs_particles.json",
             "benchmarks/results/gpu_run1.json", "benchmarks/results/gpu_run2.json",
             "benchmarks/results/gpu_run3.json"]
    m32, m64, m96, m112, t32, t64, pvd, cc, gpu, dvp, g1, g2, g3 = (_read(f) for f in files)
    out: dict = {}

    # metastability, nlat 32 and 64: minima, their change with resolution, the kernel width at β = 300
    def by_beta(summary):
        return {str(r["beta"]).replace(".0", ""): r for r in summary["runs"]}
    r32, r64 = by_beta(m32), by_beta(m64)
    out["metastability_nlat32"] = {
        "minutes": m32["seconds"] / 60, "grid_spacing_rad": m32["grid_spacing_rad"],
        "kernel_width_beta300_rad": 300 ** -0.5,
        "dist_E_V_last": {b: _last(r32[b]["dist_E_V"]) for b in ("10", "30")}}
    out["metastability_nlat64"] = {
        "minutes": m64["seconds"] / 60,
        "w2_min_change_from_nlat32_percent": {b: 100 * (r32[b]["w2_min"] - r64[b]["w2_min"]) / r32[b]["w2_min"]
                                              for b in ("10", "100", "inf")}}
    out["metastability_nlat64"]["table"] = {
        b: {"w2_min": r64[b]["w2_min"], "t_min": r64[b]["t_min"], "exit_time": _num(r64[b]["exit_time"]),
            "w2_min_nlat32": r32[b]["w2_min"], "exit_time_nlat32": _num(r32[b]["exit_time"])} for b in r64}
    # β = 100 and 1000 on nlat 96 and 112
    r96 = {int(r["beta"]): r for r in m96["runs"]}
    r112 = {int(r["beta"]): r for r in m112["runs"]}
    k64_ = m96["resolution_check"]["nlat"].index(64)
    out["large_beta_table"] = {
        "100": {"nlat32": r32["100"]["w2_min"], "nlat64": r64["100"]["w2_min"], "nlat96": r96[100]["w2_min"],
                "t_min_nlat96": r96[100]["t_min"], "exit_time_nlat96": _num(r96[100]["exit_time"])},
        "1000": {"nlat64": m96["resolution_check"]["w2_min"][k64_],
                 "t_min_nlat64": m96["resolution_check"]["t_min"][k64_],
                 "nlat96": r96[1000]["w2_min"], "nlat112": r112[1000]["w2_min"],
                 "t_min_nlat96": r96[1000]["t_min"], "t_min_nlat112": r112[1000]["t_min"]}}
    rc96, rc112 = m96["resolution_check"], m112["resolution_check"]
    k64 = rc96["nlat"].index(64)
    large = [*m96["runs"], *m112["runs"]]
    out["metastability_large_beta"] = {
        "minutes_nlat96": m96["seconds"] / 60, "minutes_nlat112": m112["seconds"] / 60,
        "beta100_nlat64_to_nlat96_change_percent":
            100 * (r64["100"]["w2_min"] - r96[100]["w2_min"]) / r64["100"]["w2_min"],
        "beta1000_nlat64_w2_min": rc96["w2_min"][k64], "beta1000_nlat64_t_min": rc96["t_min"][k64],
        "kernel_width_beta1000_rad": 1000 ** -0.5,
        "kernel_width_in_cells_nlat96": 1000 ** -0.5 / m96["grid_spacing_rad"],
        "kernel_width_in_cells_nlat112": 1000 ** -0.5 / m112["grid_spacing_rad"],
        "max_abs_mass_error": max(abs(r["mass_error"]) for r in large),
        "min_density": min(r["min_density"] for r in large),
        "relative_change_percent_nlat96_112": 100 * rc112["relative_change"]}
    # terminal phase
    tr32 = {int(r["beta"]): r for r in t32["runs"]}
    out["terminal_phase"] = {
        "minutes_nlat32": t32["seconds"] / 60, "minutes_nlat64": t64["seconds"] / 60,
        "dist_E_V_last_nlat32": {str(b): _last(tr32[b]["dist_E_V"]) for b in (10, 30, 100)},
        "max_abs_mass_error_nlat64": max(abs(r["mass_error"]) for r in t64["runs"])}
    out["particles_vs_density_nlat32"] = {"minutes": pvd["seconds"] / 60}
    # circle clusters: neighbouring clusters' mass ratios at the end
    ratios = []
    for r in cc["runs"]:
        masses = [c["mass"] for c in sorted(r["final_clusters"], key=lambda c: c["position"])]
        if len(masses) > 1:
            ratios += [a / b for a, b in zip(masses, masses[1:] + masses[:1])]
    out["circle_clusters"] = {"neighbour_mass_ratio_min_percent": 100 * min(ratios),
                              "neighbour_mass_ratio_max_percent": 100 * max(ratios)}
    # density against particles on the CPU
    out["density_vs_particles"] = {
        "density_nlat32_seconds": dvp["density"][-1]["seconds"],
        "particle_error_smallest": min(p["error"] for p in dvp["particles"])}
    # particles on a GPU: the fit, the N for 1e-3, the time at the measured rates
    runs = gpu["runs"]
    n = np.array([r["N"] for r in runs], float)
    err = np.array([r["rms_error"] for r in runs], float)
    slope, se = fit_order(n, err)
    intercept = float(np.mean(np.log(err) - slope * np.log(n)))
    target = dvp["target_error"]
    n_target = math.exp((math.log(target) - intercept) / slope)
    steps = round(dvp["T"] / 0.05)
    rk4_f32 = [p for p in g3["particles"] if p["method"] == "torch-float32" and p["N"] == 100000][0]
    kernel_f32 = max(c["pairs_per_s"] for c in g3["tune"]["configs"] if c["precision"] == "float32")
    kernel_f64 = max(c["pairs_per_s"] for c in g3["tune"]["configs"] if c["precision"] == "float64")
    pairs = 4 * steps * n_target ** 2  # four velocity evaluations of N² pairs per RK4 step
    t_rk4, t_kernel = pairs / rk4_f32["pairs_per_s"], pairs / kernel_f32
    old_n1e6 = [p["rk4_step_s"] for g in (g1, g2) for p in g["particles"]
                if p["N"] == 1000000 and p["method"] == "torch-float32"]
    seconds_1e5 = runs[[r["N"] for r in runs].index(100000)]["seconds_per_run"]
    out["gpu"] = {
        "rms_error": {str(r["N"]): r["rms_error"] for r in runs}, "seeds": {str(r["N"]): r["seeds"] for r in runs},
        "seconds_per_run_mean": {str(r["N"]): float(np.mean(r["seconds_per_run"])) for r in runs},
        "seconds_per_run_min_1e5": min(seconds_1e5), "seconds_per_run_max_1e5": max(seconds_1e5),
        "rate_exponent": slope, "rate_stderr": se,
        "float32_change_same_seed_1e5": g1["convergence"]["float64_vs_float32_same_seed"]["N=100000"],
        "target_error": target, "n_for_target": n_target, "rk4_steps": steps,
        "rk4_float32_pairs_per_s_1e5": rk4_f32["pairs_per_s"], "kernel_float32_pairs_per_s": kernel_f32,
        "kernel_float64_pairs_per_s": kernel_f64,
        "seconds_for_target_rk4_rate": t_rk4, "seconds_for_target_kernel_rate": t_kernel,
        "slower_than_density_min": t_kernel / dvp["density"][-1]["seconds"],
        "slower_than_density_max": t_rk4 / dvp["density"][-1]["seconds"],
        "n1e6_run_predicted_seconds_min": steps * min(old_n1e6),
        "n1e6_run_predicted_seconds_max": steps * max(old_n1e6)}
    return files, out


def paper1_quick() -> tuple[list[str], dict]:
    files = ["docs/data/paper1_quick.json"]
    q = _read(files[0])
    runs = q["runs"]
    loads = [r["load_average"] for r in runs.values()]
    term = [r for r in runs["terminal_phase"]["summary"]["runs"] if float(r["beta"]) == 10.0][0]
    cc = runs["circle_clusters"]["summary"]
    c3 = cc["runs"][0]["n_clusters"]
    last_change = max(k for k in range(1, len(c3)) if c3[k] != c3[k - 1])
    meta = runs["metastability"]["summary"]
    pvd = [r for r in runs["particles_vs_density"]["summary"]["runs"] if float(r["beta"]) == 10.0][0]
    return files, {
        "load_min": min(loads), "load_max": max(loads),
        "metastability": {"w2_min": [r["w2_min"] for r in meta["runs"]],
                          "fit": meta["fit_w2min_vs_sqrt_logb_over_b"], "exit": meta["fit_exit_time_vs_log_beta"]},
        "particles_vs_density": {"particles": pvd["particles"], "rate": pvd["rate_moment_error"]},
        "circle_clusters_fit": cc["fit_clusters_vs_beta"],
        "terminal": {"dist_E_VBt_first": term["dist_E_VBt"][0], "dist_E_VBt_min": min(term["dist_E_VBt"]),
                     "switch_time": _num(term["switch_time"]), "dist_E_V_last": term["dist_E_V"][-1]},
        "circle_clusters": {
            "final": {str(r["beta"]).replace(".0", ""): r["n_clusters"][-1] for r in cc["runs"]},
            "beta3_first_count": c3[last_change - 1], "beta3_last_change_time": cc["times"][last_change],
            "beta3_masses": sorted(c["mass"] for c in cc["runs"][0]["final_clusters"])}}


def transport_validation() -> tuple[list[str], dict]:
    files = ["docs/data/transport_suite.json", "docs/data/transport_docs.json"]
    suite, td = (_read(f) for f in files)
    runs = suite["runs"]
    out: dict = {"max_abs_mass_error": max(abs(r["mass_error"]) for r in runs),
                 "suite_minutes": sum(r["seconds"] for r in runs) / 60}
    w = td["williamson"]
    for nlat in ("60", "120"):
        l2 = {a: w[a]["split"]["l2"][nlat] for a in ("pi_2", "pi_2_minus_0_05", "0")}
        cap = {round(r["alpha"], 6): r["l2"] for r in runs if r["case"] == "williamson1" and r["nlat"] == int(nlat)}
        a0 = cap[0.0]
        out[f"nlat{nlat}"] = {
            "split_l2": l2, "split_ratio_to_alpha_0": {a: l2[a] / l2["0"] for a in l2},
            "cap_l2": {"pi_2": cap[round(math.pi / 2, 6)], "pi_2_minus_0_05": cap[round(math.pi / 2 - 0.05, 6)],
                       "0": a0},
            "cap_ratio_to_alpha_0": {"pi_2": cap[round(math.pi / 2, 6)] / a0,
                                     "pi_2_minus_0_05": cap[round(math.pi / 2 - 0.05, 6)] / a0}}
    return files, out


def transport() -> tuple[list[str], dict]:
    files = ["benchmarks/results/polar_cap.json"]
    pc = _read(files[0])
    out: dict = {"polar_cap": {}}
    for row in pc["rows"]:
        c, f = row["cached"], row["full"]
        out["polar_cap"][str(row["nlat"])] = {
            "cached_ratio": c["ratio"], "cached_ratio_of_medians": c["ratio_of_medians"],
            "full_ratio": f["ratio"], "full_ratio_of_medians": f["ratio_of_medians"],
            # the caps' remap, and the velocity evaluation, in units of a split step (cached)
            "remap_in_split_steps": c["cap_ms"] / c["split_ms"] - 1.0,
            "velocity_in_split_steps": (f["split_ms"] - c["split_ms"]) / c["split_ms"]}
    return files, out


def weaknesses() -> tuple[list[str], dict]:
    files = ["benchmarks/results/noise_field.json", "benchmarks/results/gpu_run1.json",
             "benchmarks/results/gpu_run2.json", "docs/data/examples.json", "benchmarks/results/brownian.json"]
    nf, g1, g2, ex, br = (_read(f) for f in files)
    rows = nf["rows"]
    small = [r["ratio_old_to_rings"] for r in rows if r["nmax"] == 4 and r["nlat"] in (32, 64)]
    big = [r["ratio_old_to_rings"] for r in rows if r["nmax"] == 32]
    torch_1e4 = [1e3 * p["rk4_step_s"] for g in (g1, g2) for p in g["particles"]
                 if p["N"] == 10000 and p["method"].startswith("torch")]
    loads = [e["load_average"] for e in ex["examples"].values() if e.get("load_average") is not None]
    loads += [ex[k]["load_average"] for k in ("demo", "d5_realisations", "schemes")
              if ex.get(k, {}).get("load_average") is not None]
    return files, {
        "noise_rings_over_dense_nmax4_min": min(small), "noise_rings_over_dense_nmax4_max": max(small),
        "noise_speedup_nmax32_min": min(big), "noise_speedup_nmax32_max": max(big),
        "noise_max_rel_difference": max(max(r["max_rel_difference"].values()) for r in rows),
        "gpu_rk4_ms_1e4_min": min(torch_1e4), "gpu_rk4_ms_1e4_max": max(torch_1e4),
        "examples_load_min": min(loads), "examples_load_max": max(loads),
        "brownian_new_over_old": br["ratio_new_over_old"]}


def _range(values) -> dict:
    values = [v for v in values if v is not None]
    return {"min": min(values), "max": max(values)}


#: the aims of bench_attention's table and the B that the ≥ 100× aim covers on diffuse densities
ATTENTION_AIM_100 = ("identity", "diag-0.1", "diag-0.5")
NON_IDENTITY = ("diag-0.1", "diag-0.5", "spd-random", "general-random")
RANDOM_B = ("spd-random", "general-random")


def _attention_path(r: dict) -> str:
    """The path column of docs/attention.md's table for one bench_attention row."""
    s = r["stats"]
    if r["method"] == "direct":
        return f"{s['chosen']} ({100 * r['pairs_fraction']:.1f} % pairs)"
    text = f"{r['method']} L={s['degree']}"
    if s.get("split"):
        text += " + split"
    if s.get("exact"):
        text += f" + exact ({s['exact'] / s['targets']:.0%} of targets)"
    return text


def _issue23_aim(aims: dict):
    """The issue's aim for one bench_attention row: ``aims["diffuse_identity_diag"]`` (100×) for
    diffuse identity/diagonal B at β ≤ 100, else ``aims["every_row"]`` (20×)."""
    def aim(r):
        diffuse_100 = r["density"] == "diffuse" and r["B"] in ATTENTION_AIM_100 and r["beta"] <= 100.0
        return aims["diffuse_identity_diag"] if diffuse_100 else aims["every_row"]
    return aim


def _attention_table(rows: list[dict], aim, last: tuple[str, object]) -> str:
    """A speed-up table of bench_attention rows: one line per (B, β), diffuse and concentrated
    side by side, a speed-up below ``aim(row)`` in bold; ``last`` = (heading, cell(row)) of the
    last column, its two cells joined by " / "."""
    by = {(r["B"], r["beta"], r["density"]): r for r in rows}
    head, cell = last
    lines = [f"| B | β | diffuse | concentrated | {head} (diffuse / concentrated) |", "|---|---|---|---|---|"]
    for b in dict.fromkeys(r["B"] for r in rows):
        for beta in sorted({r["beta"] for r in rows if r["B"] == b}):
            d, c = by[(b, beta, "diffuse")], by[(b, beta, "concentrated")]
            speeds = [f"**{r['speedup']:.0f}×**" if r["speedup"] < aim(r) else f"{r['speedup']:.0f}×"
                      for r in (d, c)]
            lines.append(f"| {b} | {beta:g} | {speeds[0]} | {speeds[1]} | {cell(d)} / {cell(c)} |")
    return "\n".join(lines)


def _speedups(rows, *, beta=None, density=None, bs=None) -> dict:
    return _range(r["speedup"] for r in rows if (beta is None or r["beta"] in beta)
                  and (density is None or r["density"] == density) and (bs is None or r["B"] in bs))


def _culling(kd: dict) -> dict:
    """bench_attention_culling.json by case (dots dropped from the names) and thread count
    (t1, t2): baseline/new medians and spreads, pair fractions; ranges over the case groups."""
    by: dict = {}
    for r in kd["rows"]:
        one = {"ratio": r["baseline_over_new"]["median"], "ratio_min": r["baseline_over_new"]["min"],
               "ratio_max": r["baseline_over_new"]["max"], "t_new": r["t_median"]["new"],
               "t_baseline": r["t_median"]["baseline"]}
        if "pairs_fraction" in r:
            one.update(pairs_baseline_percent=100 * r["pairs_fraction"]["baseline"],
                       pairs_new_percent=100 * r["pairs_fraction"]["new"],
                       all_pairs_over_new=r["all_pairs_over_new"]["median"],
                       max_deviation=r["max_deviation_from_all_pairs"]["new"])
        by.setdefault(r["case"].replace(".", ""), {})[f"t{r['threads']}"] = one

    def group(prefix, threads):  # (None where the file has no such case)
        vals = [v[threads]["ratio"] for k, v in by.items() if k.startswith(prefix) and threads in v]
        return _range(vals) if vals else None

    y = kd["meta"]["yardstick"]
    return {"by_case": by, "baseline": kd["baseline_commit"], "reps": kd["meta"]["reps"],
            "vmf_beta100_t1": group("vmf-beta100", "t1"), "vmf_beta100_t2": group("vmf-beta100", "t2"),
            "particles_t1": group("particles", "t1"), "particles_t2": group("particles", "t2"),
            "density128_t1": group("density128", "t1"), "density128_t2": group("density128", "t2"),
            "cpu": y["cpu"]["model"], "load_start": y["cpu"]["loadavg"][0],
            "np_exp_per_s_per_core": y["np_exp_per_s_per_core"]}


def attention() -> tuple[list[str], dict]:
    files = ["benchmarks/results/attention_quick.json", "benchmarks/results/attention.json",
             "benchmarks/results/attention_cache.json", "benchmarks/results/gpu_run1.json",
             "benchmarks/results/gpu_run2.json", "benchmarks/results/gpu_run3.json",
             "docs/prototypes/issue23/exp_error.json", "docs/prototypes/issue23/cull_mass.json",
             "docs/prototypes/issue23/exp_coefficients.json", "benchmarks/results/attention_kernel_quick.json",
             "benchmarks/results/particles_kernels.json", "benchmarks/results/attention_culling.json"]
    quick, full, cache, g1, g2, g3, exp, cull, coef, kq, pk, kd = (_read(f) for f in files)
    q, f = quick["rows"], full["rows"]
    aims = quick["meta"]["aims"]

    def ranges(rows):
        return {
            "beta1": _speedups(rows, beta=(1.0,)), "beta10": _speedups(rows, beta=(10.0,)),
            "beta100_diffuse": _speedups(rows, beta=(100.0,), density="diffuse"),
            "beta100_concentrated": _speedups(rows, beta=(100.0,), density="concentrated"),
            "beta100_concentrated_non_identity": _speedups(rows, beta=(100.0,), density="concentrated",
                                                           bs=NON_IDENTITY),
            "beta1000": _speedups(rows, beta=(1000.0,)),
            "rows": len(rows), "rows_meeting_every_row_aim": sum(r["speedup"] >= aims["every_row"] for r in rows),
            # keyed B_β_density, B without dots (docs_numbers paths split at dots): diag-01_100_diffuse
            "speedup": {f"{r['B'].replace('.', '')}_{r['beta']:g}_{r['density']}": r["speedup"] for r in rows}}
    quick_out = {
        **ranges(q), "seconds": quick["meta"]["elapsed_s"],
        "worst_weighted_error": max(r["weighted_error"] for r in q),
        "worst_max_error": max(r["max_error"] for r in q),
        "table": _attention_table(q, lambda r: max(aims["every_row"], aims["diffuse_identity_diag"]
                                                     if r["density"] == "diffuse" and r["B"] in ATTENTION_AIM_100
                                                     else 0), ("path", _attention_path)),
        "beta_le10_except_concentrated_beta10": _range(
            r["speedup"] for r in q if r["beta"] == 1.0 or (r["beta"] == 10.0 and r["density"] == "diffuse")),
        "beta10_concentrated": _speedups(q, beta=(10.0,), density="concentrated"),
        "beta100_concentrated_identity_diag": _speedups(q, beta=(100.0,), density="concentrated",
                                                        bs=ATTENTION_AIM_100),
        "beta100_concentrated_random": _speedups(q, beta=(100.0,), density="concentrated", bs=RANDOM_B),
        "identity_diffuse_beta_le100": _speedups(q, beta=(1.0, 10.0, 100.0), density="diffuse", bs=("identity",)),
        "beta1000_diffuse_identity_diag": _speedups(q, beta=(1000.0,), density="diffuse", bs=ATTENTION_AIM_100),
        "beta100_random_concentrated_exact_targets_percent": _range(
            100 * r["stats"]["exact"] / r["stats"]["targets"] for r in q
            if r["beta"] == 100.0 and r["density"] == "concentrated" and r["B"] in RANDOM_B),
        "beta100_random_concentrated_pairs_percent": _range(
            100 * r["pairs_fraction"] for r in q
            if r["beta"] == 100.0 and r["density"] == "concentrated" and r["B"] in RANDOM_B),
        "beta1000_pairs_percent": _range(100 * r["pairs_fraction"] for r in q if r["beta"] == 1000.0),
        "beta100_degree": _range(r["stats"]["degree"] for r in q if r["beta"] == 100.0),
        "kernel": quick["kernel"], "steps": quick["steps"]}
    full_out = {**ranges(f), "seconds": full["meta"]["elapsed_s"], "kernel": full["kernel"],
                "steps": {"exponent": full["steps"]["exponent"], "exponent_se": full["steps"]["exponent_se"]}}
    spectral = [r for r in cache["rows"] if r["stats"]["method"] == "spectral"]
    cache_out = {d: _range(r["step"]["ratio"] for r in spectral if r["density"] == d)
                 for d in ("diffuse", "concentrated")}
    vel = g1["velocity"]
    low, high = [v for v in vel if v["beta"] <= 100], [v for v in vel if v["beta"] == 1000]
    gpu_out = {
        "auto_ms": _range(1e3 * v["auto@1e-08"]["seconds"] for v in vel),
        "reference_s_beta_le100": _range(v["ref_s_scaled"] for v in low),
        "reference_s_beta1000": _range(v["ref_s_scaled"] for v in high),
        "speedup_beta_le100": _range(v["auto@1e-08"]["speedup"] for v in low),
        "speedup_beta1000": _range(v["auto@1e-08"]["speedup"] for v in high),
        "velocity_rel_error_max": max(v["auto@1e-08"]["rel_err_velocity"] for v in vel),
        "float32_ms": _range(1e3 * v["auto@0.0001"]["seconds"] for v in vel),
        "float32_rel_error_max": max(v["auto@0.0001"]["rel_err_velocity"] for v in vel),
        "float64_weighted_error_worst": {
            f"run{i}": max(a["weighted_rel"] for a in g["accuracy"] if a["precision"] == "float64" and a["fused"])
            for i, g in ((1, g1), (2, g2), (3, g3))}}
    one = {p: max(c["pairs_per_s"] for c in g1["tune"][p]["configs"]) for p in ("float32", "float64")}
    two = {p: max(c["pairs_per_s"] for c in g3["tune"]["configs"] if c["precision"] == p)
           for p in ("float32", "float64")}
    gpu_out["tune_n"] = g3["tune"]["n"]
    gpu_out["one_pass_pairs_per_s"], gpu_out["two_pass_pairs_per_s"] = one, two
    gpu_out["two_pass_over_one_pass"] = _range(two[p] / one[p] for p in one)
    ulp = 2.0 ** -53  # the unit round-off of float64
    rows = cull["rows"]
    return files, {
        "quick": quick_out, "full": full_out, "cache_step_ratio": cache_out, "gpu": gpu_out,
        "exp": {"polynomial_degree11_max_rel": coef["degrees"]["11"]["max_rel_error"],
                "cody_waite_max_rel": exp["exp"]["cody-waite"]["max_rel"],
                "cody_waite_max_rel_in_unit_roundoff": exp["exp"]["cody-waite"]["max_rel"] / ulp,
                "np_exp_max_rel": exp["exp"]["cody-waite"]["np_exp_max_rel"],
                "legacy_max_rel": exp["exp"]["legacy"]["max_rel"]},
        "cull_by_mass_fewer_pairs_percent": _range(100 * (1 - r["pairs_ratio"]) for r in rows),
        "cull_by_mass_time_ratio": _range(r["time_ratio"] for r in rows),
        "culling": _culling(kd),
        # the one-minute load average at the start and end of the two issue-23 side-by-side runs
        "issue23_load": _range(m[k][0] for m in (kq["meta"], pk["meta"]) for k in ("loadavg_start", "loadavg_end"))}


#: the aim of the SHT wrapper against raw shtns (docs/benchmarks.md)
SHT_AIM = 1.2


def benchmarks() -> tuple[list[str], dict]:
    files = ["benchmarks/results/sht.json", "benchmarks/results/transport.json",
             "benchmarks/results/density_vs_particles.json", "benchmarks/results/gpu_run1.json",
             "benchmarks/results/gpu_run2.json", "benchmarks/results/gpu_run3.json",
             "benchmarks/results/spde.json", "benchmarks/results/particles.json",
             "benchmarks/results/attention_kernel_quick.json", "benchmarks/results/particles_kernels.json"]
    sht, tr, dvp, g1, g2, g3, spde, part, kq, pk = (_read(f) for f in files)
    sht_out = {}
    for r in sht["results"]:
        ops = r["ops"]
        sht_out[str(r["lmax"])] = {
            op: ops[op]["ratio_wrapper_raw"] for op in ("analyse", "synthesise")}
        raw, wrapper = ops["synthesise"]["raw"]["median_ms"], ops["synthesise"]["wrapper"]["median_ms"]
        sht_out[str(r["lmax"])]["synthesise_excess_us"] = 1e3 * (wrapper - raw)
        sht_out[str(r["lmax"])]["synthesise_over_aim_us"] = 1e3 * (wrapper - SHT_AIM * raw)
    transport_out = {str(r["nlat"]): {"numba": r["ratio_ffsl_numba_to_upwind"],
                                      "numpy": r["ratio_ffsl_numpy_to_upwind"],
                                      "numba_first_call_s": r["numba_first_call_s"]} for r in tr["results"]}
    step_rows = [(st["nlat"], drift, r) for st in spde["steps"] for drift, d in st["drifts"].items() for r in d["rows"]]
    runs32 = next(e for e in spde["ensembles"] if e["nlat"] == 32)["runs"]
    first = {}
    for run in runs32:  # the first run of each worker count (later passes repeat some)
        first.setdefault(run["workers"], run["realisations_per_hour"])
    torch_1e4 = [p["speedup_vs_numpy"] for g in (g1, g2) for p in g["particles"]
                 if p["N"] == 10000 and p["method"].startswith("torch")]
    n1e5 = {p["method"]: p for p in g3["particles"] if p["N"] == 100000}
    n1e6 = {p["method"]: p["rk4_step_s"] for p in g2["particles"] if p["N"] == 1000000}
    vel = [v for v in part["velocity"] if v["N"] == 10000]

    def pv(b, betas, method=None):
        return _range(v["ratio"] for v in vel if v["B"] == b and v["beta"] in betas
                      and (method is None or v["stats"].get("method") == method))
    rk4 = {(r["B"], r["beta"], r["cloud"]): r["ratio"] for r in part["rk4_step"] if r["N"] == 10000}
    compiled = [r["ratio"] for r in pk["rows"] if r["beta"] == 100.0]  # where auto takes the compiled sums
    # the rows that summarise docs/paper1.md's and docs/attention.md's numbers: the same derivations
    p1_files, p1 = paper1()
    att_files, att = attention()
    e8_files, e8 = attention_eighth()
    files = list(dict.fromkeys(files + p1_files + att_files + e8_files))
    q = att["quick"]
    return files, {
        "issue23_eighth": {k: e8[k] for k in ("concentrated_ratio_t1", "concentrated_ratio_t2", "diffuse_ratio_t1",
                                              "diffuse_ratio_t2", "run", "cpu")}
        | {k: e8["quick"][k] for k in ("rows", "rows_meeting_aims", "min_speedup", "per_core_over_np_exp")},
        "gpu_particles": {k: p1["gpu"][k] for k in ("slower_than_density_min", "slower_than_density_max")}
        | {"rms_error_3e5": p1["gpu"]["rms_error"]["300000"]},
        "attention_quick": {k: q[k] for k in (
            "beta_le10_except_concentrated_beta10", "beta10_concentrated", "beta100_diffuse",
            "beta100_concentrated_identity_diag", "beta100_concentrated_random", "beta1000",
            "rows", "rows_meeting_every_row_aim", "beta1000_diffuse_identity_diag")}
        | {"kernel": q["kernel"], "step_exponent": q["steps"]["exponent"],
           "step_exponent_se": q["steps"]["exponent_se"]},
        "gpu_velocity": {k: att["gpu"][k] for k in ("speedup_beta_le100", "speedup_beta1000")},
        "issue23_load": att["issue23_load"],
        "sht": sht_out, "transport": transport_out, "transport_aim": tr["aim_ratio"],
        "density_vs_particles": {"speedup_at_target": dvp["speedup_at_target"], "target_error": dvp["target_error"]},
        "spde": {
            "default_noise_ratio": _range(r["ratio_spde_to_mf"] for _, _, r in step_rows if r["noise"] == "auto"),
            "nmax32_spectral_drift_ratio": _range(r["ratio_spde_to_mf"] for _, d, r in step_rows
                                                  if r["nmax"] == 32 and d == "B=I"),
            "aim": spde["aim_ratio"],
            "ensemble_nlat32_realisations_per_hour": {str(k): v for k, v in first.items()}},
        "gpu": {"rk4_1e4_speedup": _range(torch_1e4),
                "rk4_1e5_speedup": n1e5["torch"]["speedup_vs_numpy"], "rk4_1e5_seconds": n1e5["torch"]["rk4_step_s"],
                "rk4_1e5_reference_seconds": n1e5["reference"]["rk4_step_s"],
                "rk4_1e6_seconds_float32": n1e6["torch-float32"], "rk4_1e6_seconds_float64": n1e6["torch"]},
        "particles": {"identity_beta1": pv("I", (1.0,)), "identity_beta10": pv("I", (10.0,)),
                      "identity_beta100_spectral": pv("I", (100.0,), "spectral"),
                      "identity_beta1000_culled": pv("I", (1000.0,), "culled"),
                      "non_orthogonal": pv("diag", (1.0, 10.0, 100.0, 1000.0)),
                      "rk4_beta10": rk4[("I", 10.0, "diffuse")], "rk4_beta100": rk4[("I", 100.0, "diffuse")]},
        "kernels": {"cody_waite_over_legacy": _range([kq["kernel"]["cody_waite_over_legacy"],
                                                      kq["kernel"]["cody_waite_over_legacy_best_one_thread"]]),
                    "rk4_1e4_compiled": _range(compiled)}}


def attention_eighth() -> tuple[list[str], dict]:
    """Issue 23's eighth session: one RK4 particle step at N = 10⁴ against the kernel before issue
    23 (bench_attention_culling.py, the four fixed clouds and the snapshots of a metastability
    run at β = 100, one and two threads), the run's trapezoid-weighted ratio; and the quick run of
    bench_attention at this code (--before-set eighth): rows meeting the aims, the kernel line."""
    fc, fq, fx, fd = ("benchmarks/results/attention_culling_particles_eighth.json",
                      "benchmarks/results/attention_quick_eighth.json", "docs/prototypes/issue23/cut_fraction.json",
                      "benchmarks/results/attention_culling_eighth_density.json")
    kd, q, cutf, dens = _read(fc), _read(fq), _read(fx), _read(fd)
    cul = _culling(kd)
    by = cul["by_case"]
    fixed = [k for k in by if k.startswith("particles-") and not k.startswith("particles-run")]
    snaps = sorted((k for k in by if k.startswith("particles-run")), key=lambda k: float(k.split("-t")[-1]))
    run = {f"t{r['threads']}": {"ratio": r["baseline_over_new"]["median"],
                                "ratio_min": r["baseline_over_new"]["min"],
                                "ratio_max": r["baseline_over_new"]["max"],
                                "step_s_new": r["step_s"]["new"], "step_s_baseline": r["step_s"]["baseline"]}
           for r in kd["particles_run"]}
    rows, aims, meta = q["rows"], q["meta"]["aims"], q["meta"]

    aim = _issue23_aim(aims)

    y = meta["yardstick"]
    diffuse = [r for r in cutf["rows"] if r["cloud"] == "diffuse"]
    return [fc, fq, fx, fd], {
        "density_cases": {"baseline": dens["baseline_commit"], "reps": dens["meta"]["reps"],
                          "ratio": _range(r["baseline_over_new"]["median"] for r in dens["rows"]),
                          "pairs_new_percent": _range(100 * r["pairs_fraction"]["new"] for r in dens["rows"]),
                          "within_2tol": "yes" if all(r["within_2tol"] for r in dens["rows"]) else "no"},
        "particles": {k.replace("particles-", ""): by[k] for k in fixed},
        "diffuse_kept_percent": _range(100 * r["kept_fraction"] for r in diffuse),
        "diffuse_exact_cut_percent": _range(100 * r["exact_cut_fraction"] for r in diffuse),
        "concentrated_kept_percent": _range(100 * r["kept_fraction"] for r in cutf["rows"]
                                            if r["cloud"] == "concentrated"),
        "concentrated_kept_percent_without_expansions": _range(
            100 * r["kept_fraction_without_expansions"] for r in cutf["rows"] if r["cloud"] == "concentrated"),
        "points_per_kernel_disc": cutf["points_per_kernel_disc"],
        "fixed_ratio_t1": _range(by[k]["t1"]["ratio"] for k in fixed),
        "fixed_ratio_t2": _range(by[k]["t2"]["ratio"] for k in fixed),
        "concentrated_ratio_t1": _range(by[k]["t1"]["ratio"] for k in fixed if "concentrated" in k),
        "diffuse_ratio_t1": _range(by[k]["t1"]["ratio"] for k in fixed if "diffuse" in k),
        "concentrated_ratio_t2": _range(by[k]["t2"]["ratio"] for k in fixed if "concentrated" in k),
        "diffuse_ratio_t2": _range(by[k]["t2"]["ratio"] for k in fixed if "diffuse" in k),
        "snapshots": {k.replace("particles-run-", ""): by[k] for k in snaps},
        "snapshot_ratio_t1": _range(by[k]["t1"]["ratio"] for k in snaps),
        "snapshot_ratio_t2": _range(by[k]["t2"]["ratio"] for k in snaps),
        "run": run, "baseline": cul["baseline"], "reps": cul["reps"], "cpu": cul["cpu"],
        "load_start": cul["load_start"], "loadavg_end": kd["meta"]["loadavg_end"][0],
        "quick": {
            "rows": len(rows), "rows_meeting_aims": sum(r["speedup"] >= aim(r) for r in rows),
            "min_speedup": min(r["speedup"] for r in rows),
            "concentrated_beta100": _speedups(rows, beta=(100.0,), density="concentrated"),
            "before_after_concentrated_beta100": _range(
                r["before_over_after"] for r in rows if r["beta"] == 100.0 and r["density"] == "concentrated"),
            "before_after": _range(r["before_over_after"] for r in rows),
            "max_error": max(r["max_error"] for r in rows),
            "per_core_over_np_exp": q["kernel"]["compiled_per_core_over_np_exp"],
            "svml": y["cpu"]["numba_svml"], "threads": q["kernel"]["threads"],
            "loadavg_start": meta["loadavg_start"][0], "loadavg_end": meta["loadavg_end"][0],
            "seconds": meta["elapsed_s"],
            "table": _attention_table(rows, aim, ("before/after", lambda r: f"{r['before_over_after']:.2f}"))}}


def attention_seventh() -> tuple[list[str], dict]:
    """Issue 23's quick run at the seventh session's code (bench_attention.py --quick --reps 2
    --skip-steps --compare-before --before-set seventh): rows meeting the issue's aims (20× every
    row; 100× for diffuse identity/diagonal B at β ≤ 100, the issue's wording), ranges, the
    before/after of the seventh session's switches, the kernel's per-core rate against np.exp,
    the machine, and a table."""
    f = "benchmarks/results/attention_quick_seventh.json"
    q = _read(f)
    rows, aims, meta = q["rows"], q["meta"]["aims"], q["meta"]

    aim = _issue23_aim(aims)

    y = meta["yardstick"]
    return [f], {
        "rows": len(rows), "rows_meeting_aims": sum(r["speedup"] >= aim(r) for r in rows),
        "misses": [f"{r['B']} β={r['beta']:g} {r['density']}" for r in rows if r["speedup"] < aim(r)],
        "min_speedup": min(r["speedup"] for r in rows),
        "diag_diffuse_beta100": {r["B"].replace(".", ""): r["speedup"] for r in rows if r["beta"] == 100.0
                                 and r["density"] == "diffuse" and r["B"].startswith("diag")},
        "concentrated_beta100": _speedups(rows, beta=(100.0,), density="concentrated"),
        "before_after_diffuse_beta100_any_b": _range(
            r["before_over_after"] for r in rows if r["beta"] == 100.0 and r["density"] == "diffuse"
            and r["B"] != "identity"),
        "max_error": max(r["max_error"] for r in rows),
        "per_core_over_np_exp": q["kernel"]["compiled_per_core_over_np_exp"],
        "cpu": y["cpu"]["model"], "svml": y["cpu"]["numba_svml"], "threads": q["kernel"]["threads"],
        "loadavg_start": meta["loadavg_start"][0], "loadavg_end": meta["loadavg_end"][0],
        "seconds": meta["elapsed_s"],
        "table": _attention_table(rows, aim, ("before/after", lambda r: f"{r['before_over_after']:.2f}"))}


def demo_terminal() -> tuple[list[str], dict]:
    """The demo's terminal phase under amr (docs/prototypes/issue20/hybrid): E_β and the distance
    to V's eigenspace at t = 18 per representation and base:levels, the attention share of the
    coarse leaves, and the sensitivity of the t = 18 values to a relative perturbation ε of ρ₀."""
    d = "docs/prototypes/issue20/hybrid/"
    files = [d + "hybrid.json", d + "attention_refine.json", d + "attention_share.json"]
    hyb, att, share = (_read(f) for f in files)

    def at(run, t):
        return next(r for r in run["rows"] if abs(r["t"] - t) < 1e-9)

    def cell(run):
        return {"energy_18": at(run, 18.0)["energy"], "dist_V_18": at(run, 18.0)["dist_V"],
                "energy_16": at(run, 16.0)["energy"], "cpu_s": run["cpu_s"]}

    out: dict = {"amr": {}, "points": {}, "attention": {}, "points_attention": {}, "sensitivity": []}
    base = None
    for r in hyb["runs"]:
        key = f"b{r['nlat0']}l{r['lmax']}"
        if r.get("eps") or r.get("amplitude", 0.5) != 0.5:
            continue
        out["amr" if r["conv"] is None else "points"][key] = cell(r)
        if r["conv"] is None and key == "b24l2":
            base = r
    assert base is not None
    for r in hyb["runs"]:
        eps = r.get("eps") or r.get("amplitude", 0.5) / 0.5 - 1
        if r["conv"] is None and eps:
            out["sensitivity"].append(
                {"eps": eps, "generic": bool(r.get("eps")),
                 "energy_18": (at(r, 18.0)["energy"] / at(base, 18.0)["energy"] - 1) / eps,
                 "dist_V_18": (at(r, 18.0)["dist_V"] / at(base, 18.0)["dist_V"] - 1) / eps})
    for r in att["runs"]:
        key = f"b{r['nlat0']}l{r['lmax']}" + ("" if r.get("r_factor", 1.0) == 1.0 else f"r{r['r_factor']:g}")
        out["attention" if r["mode"] == "attention" else "points_attention"][key] = cell(r)
    sens = [abs(v) for s in out["sensitivity"] for v in (s["energy_18"], s["dist_V_18"])]
    out["sensitivity_range"] = [min(sens), max(sens)]
    out["share_t12"] = next(r for r in share["rows"] if r["t"] == 12.0)
    return files, out


def base_beta1000() -> tuple[list[str], dict]:
    """Issue 20 at β = 1000: the decomposition of the ``--refine 1.5`` change (each factor alone
    against the run, docs/prototypes/issue20/decompose/decompose.json, whose pair keys "A:B" the
    docs' number paths cannot name) and the base-48 pair; the base cell in kernel widths."""
    f = "docs/prototypes/issue20/decompose/decompose.json"
    d = _read(f)
    w2 = {k: d["vs_R0"][k]["w2_projection"]["change"] for k in ("T", "tol", "L", "B", "R1")}
    pair = d["pairs"]["B:Bref"]["change"]
    run = d["runs"]["B"]
    kernel = 1.0 / math.sqrt(1000.0)
    return [f], {"w2_change_alone": w2,
                 "base48_refine15": {q: pair[q]["change"] for q in ("w2_projection", "dist_eigenspace", "energy")},
                 "cpu_s": {"base48": run["cpu_s"], "base72": d["runs"]["Bref"]["cpu_s"]},
                 "base_cell_over_kernel": {"32": math.pi / 32 / kernel, "48": math.pi / run["base_nlat"] / kernel}}


def demo_item4() -> tuple[list[str], dict]:
    """Issue 20, item 4: the demo's density under ``--refine 1.5`` (docs/prototypes/issue20/demo/
    demo.json, whose pair keys "A/B" the docs' number paths cannot name): per pair the largest
    E_β change, the time up to which it stays below 5 %, the lag τ of the coarse run and the
    change once shifted by it; the ffsl extrapolation of the first pair below 5 % at t = 18."""
    f = "docs/prototypes/issue20/demo/demo.json"
    d = _read(f)
    pairs = {k.replace("/", "_"): {"change": v["energy_max_change"], "t": v["energy_max_change_t"],
                                   "resolved_to": v["energy_resolved_to"],
                                   "tau": v["shift_energy"]["tau"], "shifted": v["shift_energy"]["max_change_shifted"]}
             for k, v in d["pairs"].items()}
    e18 = d["extrapolation_ffsl"]["E18"]
    runs = d["runs"]
    return [f], {"pairs": pairs, "cpu_s": {k: v["cpu_s"] for k, v in runs.items()},
                 "extrapolation_t18": {"nlat": e18["nlat_pair_below_5pc"], "refined_nlat": e18["refined_nlat"],
                                       "cpu_s_run": e18["cpu_s_run"], "order": e18["p"],
                                       "over_demo_density": e18["cpu_s_run"] / runs["ffsl24"]["cpu_s"]}}


DERIVED = {"docs/data/derived_paper1.json": paper1,
           "docs/data/derived_demo_item4.json": demo_item4,
           "docs/data/derived_base_beta1000.json": base_beta1000,
           "docs/data/derived_demo_terminal.json": demo_terminal,
           "docs/data/derived_attention_seventh.json": attention_seventh,
           "docs/data/derived_attention_eighth.json": attention_eighth,
           "docs/data/derived_paper1_quick.json": paper1_quick,
           "docs/data/derived_transport_validation.json": transport_validation,
           "docs/data/derived_transport.json": transport,
           "docs/data/derived_weaknesses.json": weaknesses,
           "docs/data/derived_attention.json": attention,
           "docs/data/derived_benchmarks.json": benchmarks}


def compute(name: str) -> dict:
    files, values = DERIVED[name]()
    return json.loads(json.dumps({"script": "scripts/docs_derived.py", "inputs": files, **values},
                                 default=_num, allow_nan=True).replace("NaN", "null"))


def main() -> int:
    for name in DERIVED:
        (ROOT / name).write_text(json.dumps(compute(name), indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
