#!/usr/bin/env python3
"""Probe (CPU): is the particle switch time set by the sampling noise of the initial draw?

The random-draw ensembles of particles_reference.py give a switch time that grows like ln N
(data/sampling_error.json, fits_vs_log_N).  Here the same ODE is started from a deterministic
weighted point set instead of a random draw: a Fibonacci lattice of N points on S² with weights
w_i ∝ ρ₀(x_i) = 1 + ½⟨x_i, â⟩ (normalised), so the initial measure carries no N^{-1/2} sampling
noise (its quadrature error is deterministic and smaller).  Same integrator (RK4, retracted), same
diagnostics as particles_reference.py, with the weights in the softmax (log w_j added to the
logits) and in every diagnostic; blocked float64 torch sums on the CPU.

``--check`` first: with uniform weights on a random draw this path must reproduce
particles_reference.Reference (N = 300, t = 2) to round-off, and with the Fibonacci weights it must
reproduce spherepde's ParticleODE(weights=w) (N = 300, t = 2).

Usage: python quadrature_probe.py --check;  python quadrature_probe.py --n 1000 2000 --beta 100 --t-end 30
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np
import torch

import particles_reference as pr

HERE = os.path.dirname(os.path.abspath(__file__))


def fibonacci(n: int) -> np.ndarray:
    """n points of the Fibonacci lattice on S² (z = 1 − (2k + 1)/n, longitude k·golden angle)."""
    k = np.arange(n)
    z = 1.0 - (2.0 * k + 1.0) / n
    r = np.sqrt(1.0 - z * z)
    phi = k * math.pi * (3.0 - math.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def rho0_weights(x: np.ndarray) -> np.ndarray:
    w = 1.0 + pr.AMPLITUDE * (x @ pr.A_HAT)
    return w / w.sum()


class Weighted(pr.Reference):
    """pr.Reference with weights w (S, N) in the softmax and in the diagnostics (blocked sums)."""

    def __init__(self, beta, w: np.ndarray):
        super().__init__(beta, "cpu", fused=False)
        self.w = torch.as_tensor(np.atleast_2d(w), dtype=torch.float64)
        self.logw = torch.log(self.w)

    def velocity(self, X):
        R = X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)
        Bt = torch.as_tensor(pr.B, dtype=X.dtype)
        m = torch.empty_like(R)
        S, N, _ = R.shape
        rows = max(1, min(N, pr.BLOCK_BYTES // (8 * N)))
        for s in range(S):
            Y = R[s]
            Z = self.beta * (Y @ Bt)
            YT = Y.T.contiguous()
            for r in range(0, N, rows):
                L = Z[r:r + rows] @ YT + self.logw[s]
                L.sub_(L.amax(dim=1, keepdim=True)).exp_()
                m[s, r:r + rows] = (L @ Y) / L.sum(dim=1, keepdim=True)
        self.evals += 1
        vm = m @ self.Vt
        dot = R[..., 0] * vm[..., 0] + R[..., 1] * vm[..., 1] + R[..., 2] * vm[..., 2]
        return vm - dot[..., None] * R

    def diagnostics(self, X, a_own):
        S, N, _ = X.shape
        w = self.w
        e = torch.empty(S, dtype=X.dtype)
        rows = max(1, min(N, pr.BLOCK_BYTES // (8 * N)))
        for s in range(S):
            Y, tot = X[s], 0.0
            for r in range(0, N, rows):
                D2 = torch.cdist(Y[r:r + rows], Y, compute_mode="donot_use_mm_for_euclid_dist") ** 2
                tot = tot + (w[s, r:r + rows, None] * w[s, None, :] * torch.exp(-0.5 * self.beta * D2)).sum()
            e[s] = 0.5 - 0.5 * tot
        dA = torch.sqrt(torch.sum(w * (X[..., 0] ** 2 + X[..., 2] ** 2), dim=1))
        dV = torch.sqrt(torch.sum(w * (X[..., 1] ** 2 + X[..., 2] ** 2), dim=1))
        out = {"energy": e, "dist_eigenspace": dA, "dist_eigenspace_V": dV,
               "mass_plus_y": torch.sum(w * (X[..., 1] > 0).to(X.dtype), dim=1)}
        s_, order = torch.sort(X[..., 1], dim=1, descending=True)
        ws = torch.gather(w, 1, order)
        cum = torch.cumsum(ws, dim=1)
        for name, a in (("w2_projection_own", a_own), ("w2_projection_exact", torch.full((S,), pr.A_EXACT, dtype=X.dtype))):
            to_e = torch.minimum(torch.clamp(a[:, None] - (cum - ws), min=0.0), ws)
            cost = torch.sum(to_e * (2 - 2 * s_) + (ws - to_e) * (2 + 2 * s_), dim=1)
            out[name] = torch.sqrt(torch.clamp(cost, min=0.0))
        return {k: v.double().numpy() for k, v in out.items()}


# pr.Reference.run computes a_own unweighted and passes it on; override through a small shim
def run_weighted(ref: Weighted, X0, t_end, dt, output_every, log=None):
    X = torch.as_tensor(X0, dtype=torch.float64)
    a_w = torch.sum(ref.w * (X[..., 1] > 0).to(X.dtype), dim=1)
    diag = ref.diagnostics
    ref.diagnostics = lambda Xt, _a: diag(Xt, a_w)
    try:
        res = pr.Reference.run(ref, X0, t_end, dt, output_every, log=log)
    finally:
        ref.diagnostics = diag
    res["a_own"] = a_w.numpy()
    return res


def check():
    from spherepde.dynamics.attention import Attention
    from spherepde.solvers.lagrangian import ParticleODE
    from spherepde.validation.metrics import interaction_energy, two_point_weight, w2_two_point

    out = {}
    x = pr.sample_cosine(300, 0)[None]
    a = pr.Reference(100.0, "cpu", fused=False).run(x, 2.0, 0.05, 0.5)
    b = run_weighted(Weighted(100.0, np.full((1, 300), 1 / 300)), x, 2.0, 0.05, 0.5)
    out["uniform_vs_reference_pos"] = float((a["final"] - b["final"]).abs().max())
    out["uniform_vs_reference_diag"] = max(float(np.max(np.abs(a["diag"][k] - b["diag"][k]))) for k in a["diag"])
    xf = fibonacci(300)
    w = rho0_weights(xf)
    c = run_weighted(Weighted(100.0, w[None]), xf[None], 2.0, 0.05, 0.5)
    pkg = ParticleODE(Attention(pr.Q, pr.K, pr.V, 100.0), weights=w, attention_method="reference").run(
        xf, (0.0, 2.0), dt=0.05, output_times=np.arange(0, 2.01, 0.5))
    xe = pkg.positions[-1]
    out["weighted_vs_spherepde_pos"] = float(np.max(np.abs(c["final"][0].numpy() - xe)))
    aw = two_point_weight(xf, w, pr.E_A)
    out["weighted_energy_vs_spherepde"] = abs(float(c["diag"]["energy"][0, -1]) - interaction_energy(xe, w, 100.0))
    out["weighted_w2own_vs_spherepde"] = abs(float(c["diag"]["w2_projection_own"][0, -1]) - w2_two_point(xe, w, pr.E_A, aw))
    print(json.dumps(out, indent=1))
    ok = all(v < 1e-12 for v in out.values())
    print("CHECK", "PASSED" if ok else "FAILED")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--n", type=int, nargs="*", default=[])
    ap.add_argument("--beta", type=float, default=100.0)
    ap.add_argument("--t-end", type=float, default=30.0)
    ap.add_argument("--dt", type=float, default=0.05)
    ap.add_argument("--out", default=os.path.join(HERE, "data", "quadrature_probe.json"))
    a = ap.parse_args()
    if a.check:
        check()
    if not a.n:
        return
    res_all = json.load(open(a.out)) if os.path.exists(a.out) else {"runs": []}
    for n in a.n:
        x = fibonacci(n)
        w = rho0_weights(x)
        t0 = time.perf_counter()
        res = run_weighted(Weighted(a.beta, w[None]), x[None], a.t_end, a.dt, 0.5, log=print)
        sc = pr.scalars(res["times"], res["diag"])
        run = {"kind": "fibonacci lattice, weights ∝ rho_0", "beta": a.beta, "N": n, "dt": a.dt, "t_end": a.t_end,
               "wall_s": time.perf_counter() - t0, "times": res["times"].tolist(),
               "series": {k: v[0].tolist() for k, v in res["diag"].items()},
               "scalars": {k: v[0] for k, v in sc.items()}, "a_own": float(res["a_own"][0])}
        print(n, json.dumps(run["scalars"]))
        res_all["runs"] = [r for r in res_all["runs"] if not (r["N"] == n and r["beta"] == a.beta)] + [run]
        with open(a.out, "w") as f:
            json.dump(res_all, f, allow_nan=True)


if __name__ == "__main__":
    main()
