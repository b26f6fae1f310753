"""Spot checks that the formulas of docs/equations.md are what the code computes.

Each check evaluates one formula of the page independently (plain numpy written here from the
page) and the package's implementation, on fixed seeds, and records the largest difference.
Writes docs/data/equations_check.json.  About 10 s:

    python3 scripts/check_equations.py
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.noise import NoiseKernel
from spherepde.noise.kernel import gegenbauer
from spherepde.validation.exact import ZeroTemperatureFlow
from spherepde.validation.metrics import interaction_energy, two_point_weight, w2, w2_two_point

OUT = Path(__file__).resolve().parents[1] / "docs" / "data" / "equations_check.json"


def unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def check_attention(rng) -> dict:
    """m_β for softmax and usa, and β = ∞, against the page's sums (weights summing to 1)."""
    d, n, m, beta = 3, 50, 400, 7.0
    Q, K, V = (rng.standard_normal((d, d)) for _ in range(3))
    x, y = unit(rng, n, d), unit(rng, m, d)
    w = rng.random(m)
    w /= w.sum()
    B = Q.T @ K
    logits = beta * np.einsum("ik,jk->ij", x @ B, y)       # β⟨Bᵀx, y⟩ = β⟨Qx, Ky⟩
    assert np.allclose(logits, beta * (x @ Q.T) @ (y @ K.T).T)
    e = w * np.exp(logits - logits.max(axis=1, keepdims=True))
    soft = (e @ y) / e.sum(axis=1, keepdims=True)
    usa = (w * np.exp(logits - beta)) @ y
    out = {}
    for kind, ref in (("softmax", soft), ("usa", usa)):
        att = Attention(Q, K, V, beta, kind=kind)
        mean = att.mean(x, y, w, method="reference")
        vel = att.velocity(x, y, w, method="reference")
        ref_vel = ref @ V.T - np.sum(x * (ref @ V.T), axis=1, keepdims=True) * x   # P_x V m
        # relative to the largest value: usa means reach e^{β(‖B‖−1)}, here ~1e30
        out[kind] = {"max_abs_mean": float(np.abs(ref).max()),
                     "rel_err_mean": float(np.abs(mean - ref).max() / np.abs(ref).max()),
                     "rel_err_velocity": float(np.abs(vel - ref_vel).max() / np.abs(ref_vel).max())}
    inf = Attention(Q, K, V, math.inf).mean(x)
    z = x @ B
    out["beta_inf"] = {"max_abs_mean": float(np.abs(inf - z / np.linalg.norm(z, axis=1, keepdims=True)).max())}
    # zero-temperature divergence formula against a finite-difference surface divergence
    flow = ZeroTemperatureFlow(B, V)
    p = unit(rng, 1, d)[0]
    h = 1e-5
    basis = np.linalg.svd(np.eye(d) - np.outer(p, p))[0][:, :d - 1]   # tangent frame at p
    fd = 0.0
    for t in basis.T:
        def u_ext(q):  # the velocity extended 0-homogeneously off the sphere
            q = q / np.linalg.norm(q)
            return flow.velocity(q[None])[0]
        fd += t @ (u_ext(p + h * t) - u_ext(p - h * t)) / (2 * h)
    out["beta_inf_divergence"] = {"finite_difference": float(fd),
                                  "formula": float(flow.divergence(p[None])[0]),
                                  "abs_diff": float(abs(fd - flow.divergence(p[None])[0]))}
    return out


def check_energy_and_w2(rng) -> dict:
    n, beta = 300, 12.0
    x = unit(rng, n, 3)
    w = rng.random(n)
    w /= w.sum()
    g = x @ x.T
    ref = 0.5 * np.sum(w[:, None] * w[None, :] * (1.0 - np.exp(beta * (g - 1.0))))
    e = np.array([0.0, 1.0, 0.0])
    a = two_point_weight(x, w, e)
    a_ref = float(w[x @ e > 0].sum())
    two = w2_two_point(x, w, e, a)
    gen = w2(x, w, np.array([e, -e]), np.array([a, 1 - a]))       # POT network simplex, chordal cost
    return {"scaled_energy": {"code": interaction_energy(x, w, beta), "page": float(ref),
                              "abs_diff": float(abs(interaction_energy(x, w, beta) - ref))},
            "two_point_weight": {"code": a, "page": a_ref},
            "w2_two_point": {"threshold_plan": two, "network_simplex": gen, "abs_diff": abs(two - gen)}}


def check_kernel() -> dict:
    out = {}
    # Prop 1.5 (ReLU) closed forms
    for d, s in ((3, 0.0), (5, 0.1), (64, 0.1)):
        k = NoiseKernel("relu", d, s, s)
        c = s ** 2 + 2 * s ** 2
        out[f"relu_d{d}_sigma{s:g}"] = {
            "kappa1": [k.kappa1, 0.5 * (1 / d + s ** 2) + s ** 2],
            "kappa_prime1": [k.kappa_prime1, 1 / (2 * d)],
            "lambda_1": [k.lambda_1, -1 / (2 * d) - c * (d - 1) / 4],
            "lambda_bar": [k.lambda_bar, 1 / d - c * (d - 3) / 2],
            "lambda_bar_prime_beta1": k.lambda_bar_prime(1.0)}
    # KL: κ(t) = Σ_n C_n N_n P_n(t)/ω, and the captured variance fraction
    for act, d in (("relu", 3), ("tanh", 3), ("relu", 2)):
        k = NoiseKernel(act, d, 0.5, 0.5)
        nmax = 40
        C = k.kl_coefficients(nmax)
        N = np.array([k.multiplicity(n) for n in range(nmax + 1)])
        t = np.linspace(-1, 1, 9)
        series = (C * N) @ gegenbauer(nmax, d, t) / k.surface_area
        out[f"kl_{act}_d{d}"] = {
            "nmax": nmax, "max_abs_kappa_minus_series": float(np.abs(series - k.kappa(t)).max()),
            "captured_variance_code": k.captured_variance(nmax),
            "captured_variance_page": float(np.sum(C * N) / (k.surface_area * k.kappa1))}
    # F(u) of Thm 1.4 written as on the page, against the code's cancellation-free form
    k = NoiseKernel("silu", 5, 0.1, 0.1)
    beta = 2.0
    u = np.linspace(-0.99, 0.9, 20)
    G = k.kappa(u) * (5 - 2 + u ** 2 - beta * u * (1 - u ** 2)) + k.kappa1 * (beta * (1 - u ** 2) - 4 * u)
    F = beta * np.exp(beta * u) * G / (np.exp(beta) - np.exp(beta * u))
    out["F_silu_d5"] = {"max_rel_diff": float(np.max(np.abs(F - k.F(u, beta)) / np.abs(F))),
                        "F_at_1_code": float(k.F(1.0, beta)), "minus_lambda_bar": -k.lambda_bar}
    return out


def main() -> None:
    rng = np.random.default_rng(20261204)
    result = {"script": "scripts/check_equations.py", "attention": check_attention(rng),
              "diagnostics": check_energy_and_w2(rng), "kernel": check_kernel()}
    # the KL series' truncation error for ReLU (what docs/equations.md quotes)
    result["kl_relu_max_abs_kappa_minus_series"] = max(
        v["max_abs_kappa_minus_series"] for k, v in result["kernel"].items() if k.startswith("kl_relu"))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
