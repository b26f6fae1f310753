"""The statistics of the depth-width experiment (:mod:`spherepde.experiments.depth_width`): the
pathwise error of the depth study and its fits in L, the width study's observables and their
differences against m = ∞ with standard errors, and the MLP field's excess kurtosis.
"""
from __future__ import annotations

import math

import numpy as np

from spherepde.experiments.depth_width_output import OBSERVABLES, RESOLVED_SE
from spherepde.noise import NoiseKernel
from spherepde.solvers.lagrangian.tokens import cosine_similarity, token_interaction_energy
from spherepde.validation.fits import fit_order

__all__ = ["depth_fits", "mlp_excess_kurtosis", "observables", "sup_error", "width_differences"]


#: two-sided probability that a centred Gaussian exceeds RESOLVED_SE standard deviations
_FALSE_ALARM = math.erfc(RESOLVED_SE / math.sqrt(2.0))


def sup_error(x, ref) -> np.ndarray:
    """max over times of (1/N) Σ_i |x − ref|²: x, ref (..., n_times, N, d) -> (...)."""
    return np.max(np.mean(np.sum((np.asarray(x) - np.asarray(ref)) ** 2, axis=-1), axis=-1), axis=-1)


def _slopes(h, err) -> np.ndarray:
    """Least-squares slopes of log err against log h for rows of err (B, n) -> (B,)."""
    x = np.log(np.asarray(h, float))
    x = x - x.mean()
    y = np.log(err)
    return (y - y.mean(axis=-1, keepdims=True)) @ x / (x @ x)



def depth_fits(depths, errors, *, bootstrap: int = 2000, seed: int = 0) -> dict:
    """Fits of the path-mean error e(L) = mean_r errors[:, r]: e ∝ L^slope and e ∝ (log L/L)^p.

    Two standard errors for each: ``*_stderr`` from the least-squares residuals
    (:func:`fit_order`) and ``*_stderr_bootstrap`` from resampling the paths (``bootstrap``
    resamples, ``default_rng(seed)``), which measures the Monte Carlo uncertainty of the
    slope (the depths share their paths, so their errors are correlated).
    errors: (n_depths, R).
    """
    L = np.asarray(depths, float)
    errors = np.asarray(errors, float)
    mean = errors.mean(axis=1)
    slope, se = fit_order(L, mean)
    p, se_p = fit_order(np.log(L) / L, mean)
    out = {"slope_vs_L": slope, "slope_vs_L_stderr": se, "p_vs_logL_over_L": p,
           "p_vs_logL_over_L_stderr": se_p}
    R = errors.shape[1]
    if R > 1 and bootstrap > 0:
        idx = np.random.default_rng(seed).integers(0, R, size=(bootstrap, R))
        boot = errors[:, idx].mean(axis=2).T  # (B, n_depths)
        out["slope_vs_L_stderr_bootstrap"] = float(np.std(_slopes(L, boot), ddof=1))
        out["p_vs_logL_over_L_stderr_bootstrap"] = float(np.std(_slopes(np.log(L) / L, boot), ddof=1))
    return out


def observables(x, beta: float) -> dict:
    """The width-study observables of tokens x (..., N, d) -> dict of arrays (...)."""
    c = cosine_similarity(x)
    n = c.shape[-1]
    return {"cosine": (np.sum(c, axis=(-2, -1)) - n) / (n * (n - 1)),
            "energy": token_interaction_energy(x, beta, form="scaled"),
            "first_moment": np.linalg.norm(np.mean(x, axis=-2), axis=-1)}



def mlp_excess_kurtosis(kernel: NoiseKernel) -> float:
    r"""m × the excess kurtosis of one component of the MLP field at one point:

    G_α = m^{-1/2} Σ_k W_{αk} h_k + b_W,  h_k = σ(a_k) iid, a ~ N(0, s²), s² = 1/d + σ_U², so
    κ₄(G_α) = 3 Var(h²)/m and the excess kurtosis is κ₄/κ(1)² = 3 Var(h²)/(κ(1)² m); the
    returned number is its m-coefficient (0 for the Gaussian field).
    """
    from scipy.integrate import quad

    f, sd = kernel.activation.f, math.sqrt(kernel.s2)

    def moment(k):
        def g(z):
            return float(f(np.array(sd * z))) ** k * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

        return quad(g, -np.inf, 0.0)[0] + quad(g, 0.0, np.inf)[0]

    return 3.0 * (moment(4) - moment(2) ** 2) / kernel.kappa1 ** 2


def width_differences(widths, samples: dict) -> dict:
    """Per observable: mean_m − mean_∞, its standard error and whether it is resolved
    (|diff| > RESOLVED_SE·se); a fit |diff| ∝ m^{−q} over the resolved widths (≥ 2)."""
    out = {}
    for name in OBSERVABLES:
        ref = np.asarray(samples["inf"][name])
        rows = []
        for m in widths:
            a = np.asarray(samples[m][name])
            diff = float(a.mean() - ref.mean())
            se = math.sqrt(a.var(ddof=1) / a.size + ref.var(ddof=1) / ref.size)
            rows.append({"width": m, "mean": float(a.mean()), "diff": diff, "stderr": se,
                         "resolved": bool(abs(diff) > RESOLVED_SE * se)})
        ok = [r for r in rows if r["resolved"]]
        chance = len(rows) * _FALSE_ALARM
        pooled = np.concatenate([np.asarray(samples[m][name]) for m in widths])
        p_diff = float(pooled.mean() - ref.mean())
        p_se = math.sqrt(pooled.var(ddof=1) / pooled.size + ref.var(ddof=1) / ref.size)
        entry = {"mean_inf": float(ref.mean()), "stderr_inf": float(ref.std(ddof=1) / math.sqrt(ref.size)),
                 "rows": rows, "resolution": RESOLVED_SE * max(r["stderr"] for r in rows),
                 "chance_exceedances": chance,
                 # all widths against m = inf: an m-independent offset (a bias of the truncated
                 # field, or of the shared m = inf sample) shows here, not in the per-m rows
                 "pooled": {"widths": list(widths), "diff": p_diff, "stderr": p_se,
                            "resolved": bool(abs(p_diff) > RESOLVED_SE * p_se)}}
        caveat = (f" ({len(rows)} comparisons sharing one m = inf sample: about {chance:.2f} "
                  f"exceedances of {RESOLVED_SE:g} se are expected by chance")
        smallest = [r["width"] for r in rows[:len(ok)]]
        if ok and [r["width"] for r in ok] != smallest:
            caveat += "; the resolved widths are not the smallest ones, which a width effect " \
                      "decreasing in m would be: likely a fluctuation"
        caveat += ")"
        if len(ok) >= 2:
            q, se_q = fit_order([r["width"] for r in ok], [abs(r["diff"]) for r in ok])
            entry.update(q=-q, q_stderr=se_q, fitted_widths=[r["width"] for r in ok])
            entry["statement"] = (f"|diff| ∝ m^(-q), q = {-q:.2f} ± {se_q:.2f} over the resolved "
                                  f"widths {entry['fitted_widths']}" + caveat)
        elif ok:
            entry["statement"] = (f"only m = {ok[0]['width']} is resolved (diff {ok[0]['diff']:.2e} ± "
                                  f"{ok[0]['stderr']:.1e}); the other widths are below the Monte Carlo "
                                  f"resolution {entry['resolution']:.1e} (3 se); no fit" + caveat)
        else:
            entry["statement"] = (f"the width effect is below the Monte Carlo resolution "
                                  f"{entry['resolution']:.1e} (3 se) at R = {ref.size} for every m")
        pooled = entry["pooled"]
        entry["statement"] += (f"; pooled over all widths: diff {pooled['diff']:.2e} ± {pooled['stderr']:.1e}"
                               + (" (resolved: an offset that does not depend on m)" if pooled["resolved"]
                                  else " (not resolved)"))
        out[name] = entry
    return out
