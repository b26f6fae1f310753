#!/usr/bin/env python3
"""Independent particle reference for Paper 1's metastability set-up (issue 20).

Set-up (``examples/metastability.toml``): Q = I, K = B = diag(0.1, 1, 1), V = diag(1, 0.5, 0.1),
ρ₀ ∝ 1 + ½⟨x, â⟩ with â = (0.6, 0.5, 0.3)/|·| on S².  N tokens drawn from ρ₀ move by

    x_i' = P_{x_i} V m_i,   m_i = Σ_j softmax_j(β⟨Bᵀx_i, x_j⟩) x_j,   P_x v = v − ⟨x, v⟩x,

(uniform weights 1/N), integrated by classical RK4 whose stages are evaluated at retracted points
and whose step is retracted (x ↦ x/|x|), with the package's step rule: each interval between
output times is split into the fewest equal steps ≤ dt (spherepde.solvers.controller.next_step).
This is spherepde's own ParticleODE scheme, re-implemented here in PyTorch (float64), batched over
seeds, with the attention sums by a fused Triton kernel on CUDA (exact row maximum, then
Σ 2^{ℓ−M}(1, y); the n×m logits are never stored) or by blocked log-sum-exp torch sums on any
device.  Self-contained: numpy + torch (+ triton on CUDA); spherepde is needed only for
``--check``.

Initial points: :func:`sample_cosine` is spherepde.runs.initial.sample_initial for the
"cosine" kind re-written (same generator calls, so the same points bit for bit for a seed;
``--check`` verifies it): x = g/|g|, g ~ N(0, I₃), accepted with probability
(1 + a⟨x, â⟩)/(1 + a).

Diagnostics at each output time (per seed), w = 1/N:

* ``energy``: e^{−β}E_β = ½ Σ_ij w_i w_j (1 − e^{β(⟨x_i,x_j⟩−1)}) with ⟨x,y⟩ − 1 = −½|x − y|²
  (spherepde.validation.metrics.interaction_energy, energy β = attention β);
* ``dist_eigenspace`` / ``dist_eigenspace_V``: (Σ w_i |P_{E⊥} x_i|²)^{1/2}, E = span(e_y) (top
  eigenvector of A = VBᵀ = diag(0.1, 0.5, 0.1)) / span(e_x) (V's, largest |eigenvalue|);
* ``w2_projection_own``: exact chordal W₂ to a δ_e + (1 − a) δ_{−e}, e = e_y, a = the fraction of
  THIS draw's initial points with ⟨x, e⟩ > 0 (issue 20 item 6: like with like);
* ``w2_projection_exact``: the same with a = ρ₀({⟨x, e⟩ > 0}) = ½ + (amp/4)⟨â, e⟩ exactly (the
  limit of the grid's Π#ρ₀ as nlat → ∞; the nlat-24 grid's value is stored beside it);
* ``mass_plus_y``: Σ w_i [⟨x_i, e_y⟩ > 0] (the split between the two metastable clusters).

Per-run scalars: ``w2_min_own`` / ``t_w2_min_own`` (minimum over output times), ``switch_time``
(spherepde.validation.fits.switch_time: first time dist_eigenspace_V < dist_eigenspace, linear
interpolation between output times, searched from the time of the minimum of dist_eigenspace
on, i.e. after the metastable state has formed; ``switch_time_pkg`` is fits.switch_time on the
whole series, which is degenerate here: at t = 0 both distances are (2/3)^{1/2} for ρ₀, so a draw
with dist_eigenspace_V < dist_eigenspace at t = 0 gets 0), ``switch_time_V05`` / ``switch_time_V02`` (first time
dist_eigenspace_V < 0.5 / 0.2, interpolated), ``exit_time_own`` (fits.exit_time with band 2: first
time after the minimum at which w2_projection_own exceeds twice its minimum).

Usage::

    python particles_reference.py --check               # against spherepde's ParticleODE (CPU)
    python particles_reference.py --run --beta 100 --n 1000 --seeds 0 1 --device cpu --out X.json
    python particles_reference.py --plan plan.json --out-dir DIR   # the device run (jobs in order)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np
import torch

# ---- the set-up ----------------------------------------------------------------------------
Q = np.eye(3)
K = np.diag([0.1, 1.0, 1.0])
V = np.diag([1.0, 0.5, 0.1])
B = Q.T @ K
A = V @ B.T
DIRECTION = np.array([0.6, 0.5, 0.3])
AMPLITUDE = 0.5
E_A = np.array([0.0, 1.0, 0.0])  # top eigenvector of A = diag(0.1, 0.5, 0.1)
E_V = np.array([1.0, 0.0, 0.0])  # V's eigenvector of largest |eigenvalue|
A_HAT = DIRECTION / np.linalg.norm(DIRECTION)
#: ρ₀({⟨x, e_y⟩ > 0}) for ρ₀ = (1 + amp⟨x, â⟩)/4π: ½ + amp⟨â, e⟩·E[⟨x, e⟩; ⟨x, e⟩ > 0] = ½ + amp⟨â, e⟩/4
A_EXACT = 0.5 + AMPLITUDE * float(A_HAT @ E_A) / 4.0
LOG2E = 1.0 / math.log(2.0)
SPLIT_RTOL = 1e-9  # spherepde.solvers.controller.SPLIT_RTOL


def sample_cosine(n: int, seed: int, direction=DIRECTION, amp: float = AMPLITUDE, d: int = 3) -> np.ndarray:
    """spherepde.runs.initial.sample_initial for kind "cosine", the same generator calls."""
    rng = np.random.default_rng(seed)
    a = np.asarray(direction, float)
    a = a / np.linalg.norm(a)
    out = np.empty((0, d))
    while out.shape[0] < n:
        g = rng.standard_normal((2 * (n - out.shape[0]) + 8, d))
        x = g / np.linalg.norm(g, axis=1, keepdims=True)
        keep = rng.random(x.shape[0]) * (1.0 + amp) < 1.0 + amp * (x @ a)
        out = np.concatenate([out, x[keep]])
    return out[:n]


# ---- attention sums --------------------------------------------------------------------------
_KERNELS = None


def _build_kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def att_sums(zT_ptr, yT_ptr, num_ptr, den_ptr, n, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
        # batch b = program_id(1); zT, yT (S, 3, n): β·log2e·Bᵀx and the sources, transposed;
        # out num (S, n, 3), den (S, n): Σ_j 2^{ℓ_ij − M_i}(y_j, 1), M_i = max_j ℓ_ij.
        b = tl.program_id(1)
        zb = zT_ptr + b * 3 * n
        yb = yT_ptr + b * 3 * n
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask = rows < n
        z0 = tl.load(zb + rows, mask=rmask, other=0.0)
        z1 = tl.load(zb + n + rows, mask=rmask, other=0.0)
        z2 = tl.load(zb + 2 * n + rows, mask=rmask, other=0.0)
        zero = z0[:, None] * tl.zeros((BLOCK_M,), dtype=z0.dtype)[None, :]
        mx = zero - float("inf")
        for start in range(0, n, BLOCK_M):
            cols = start + tl.arange(0, BLOCK_M)
            cmask = cols < n
            y0 = tl.load(yb + cols, mask=cmask, other=0.0)[None, :]
            y1 = tl.load(yb + n + cols, mask=cmask, other=0.0)[None, :]
            y2 = tl.load(yb + 2 * n + cols, mask=cmask, other=0.0)[None, :]
            logit = z0[:, None] * y0 + z1[:, None] * y1 + z2[:, None] * y2
            logit = tl.where(cmask[None, :], logit, -float("inf"))
            mx = tl.maximum(mx, logit)
        row_max = tl.max(mx, axis=1)
        den = zero
        a0 = zero
        a1 = zero
        a2 = zero
        for start in range(0, n, BLOCK_M):
            cols = start + tl.arange(0, BLOCK_M)
            cmask = cols < n
            y0 = tl.load(yb + cols, mask=cmask, other=0.0)[None, :]
            y1 = tl.load(yb + n + cols, mask=cmask, other=0.0)[None, :]
            y2 = tl.load(yb + 2 * n + cols, mask=cmask, other=0.0)[None, :]
            logit = z0[:, None] * y0 + z1[:, None] * y1 + z2[:, None] * y2
            p = tl.exp2(logit - row_max[:, None])
            p = tl.where(cmask[None, :], p, 0.0)
            den += p
            a0 += p * y0
            a1 += p * y1
            a2 += p * y2
        ob = num_ptr + b * n * 3
        tl.store(ob + rows * 3 + 0, tl.sum(a0, axis=1), mask=rmask)
        tl.store(ob + rows * 3 + 1, tl.sum(a1, axis=1), mask=rmask)
        tl.store(ob + rows * 3 + 2, tl.sum(a2, axis=1), mask=rmask)
        tl.store(den_ptr + b * n + rows, tl.sum(den, axis=1), mask=rmask)

    @triton.jit
    def kernel_rows(xT_ptr, out_ptr, n, c, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
        # out (S, n): Σ_j 2^{−c|x_i − x_j|²}, c = β·log2e/2, i.e. Σ_j e^{β(⟨x_i, x_j⟩ − 1)}.
        b = tl.program_id(1)
        xb = xT_ptr + b * 3 * n
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask = rows < n
        x0 = tl.load(xb + rows, mask=rmask, other=0.0)
        x1 = tl.load(xb + n + rows, mask=rmask, other=0.0)
        x2 = tl.load(xb + 2 * n + rows, mask=rmask, other=0.0)
        acc = x0[:, None] * tl.zeros((BLOCK_M,), dtype=x0.dtype)[None, :]
        for start in range(0, n, BLOCK_M):
            cols = start + tl.arange(0, BLOCK_M)
            cmask = cols < n
            d0 = x0[:, None] - tl.load(xb + cols, mask=cmask, other=0.0)[None, :]
            d1 = x1[:, None] - tl.load(xb + n + cols, mask=cmask, other=0.0)[None, :]
            d2 = x2[:, None] - tl.load(xb + 2 * n + cols, mask=cmask, other=0.0)[None, :]
            p = tl.exp2(-c * (d0 * d0 + d1 * d1 + d2 * d2))
            acc += tl.where(cmask[None, :], p, 0.0)
        tl.store(out_ptr + b * n + rows, tl.sum(acc, axis=1), mask=rmask)

    return att_sums, kernel_rows


def fused_available(dev) -> bool:
    global _KERNELS
    if dev.type != "cuda":
        return False
    if _KERNELS is None:
        try:
            _KERNELS = _build_kernels()
        except Exception as exc:  # noqa: BLE001
            print(f"triton unavailable ({exc!r}); blocked torch sums", file=sys.stderr)
            _KERNELS = False
    return bool(_KERNELS)


#: (targets per program, sources per tile, warps): spherepde's float64 choice on an H200
FUSED_BLOCKS = (32, 16, 2)
#: bytes of one logit block of the blocked path
BLOCK_BYTES = 2**24


def mean_fused(X: torch.Tensor, beta: float) -> torch.Tensor:
    """Softmax attention means m (S, N, 3) of X (S, N, 3) (unit rows), by the fused kernel."""
    S, N, _ = X.shape
    zT = (X @ torch.as_tensor(B, dtype=X.dtype, device=X.device)).mul_(beta * LOG2E).transpose(1, 2).contiguous()
    yT = X.transpose(1, 2).contiguous()
    num = torch.empty_like(X)
    den = torch.empty((S, N), dtype=X.dtype, device=X.device)
    bn, bm, warps = FUSED_BLOCKS
    _KERNELS[0][(math.ceil(N / bn), S)](zT, yT, num, den, N, BLOCK_N=bn, BLOCK_M=bm, num_warps=warps)
    return num / den[..., None]


def mean_blocked(X: torch.Tensor, beta: float) -> torch.Tensor:
    """The same means by blocked log-sum-exp torch sums (any device)."""
    S, N, _ = X.shape
    Bt = torch.as_tensor(B, dtype=X.dtype, device=X.device)
    out = torch.empty_like(X)
    rows = max(1, min(N, BLOCK_BYTES // (8 * N)))
    for s in range(S):
        Y = X[s]
        Z = beta * (Y @ Bt)
        YT = Y.T.contiguous()
        for r in range(0, N, rows):
            L = Z[r:r + rows] @ YT
            L.sub_(L.amax(dim=1, keepdim=True)).exp_()
            out[s, r:r + rows] = (L @ Y) / L.sum(dim=1, keepdim=True)
    return out


def energy_sums(X: torch.Tensor, beta: float, fused: bool) -> torch.Tensor:
    """Σ_i Σ_j e^{β(⟨x_i,x_j⟩−1)} per seed, with ⟨x,y⟩ − 1 = −½|x − y|²; shape (S,)."""
    S, N, _ = X.shape
    if fused:
        xT = X.transpose(1, 2).contiguous()
        out = torch.empty((S, N), dtype=X.dtype, device=X.device)
        bn, bm, warps = FUSED_BLOCKS
        _KERNELS[1][(math.ceil(N / bn), S)](xT, out, N, 0.5 * beta * LOG2E, BLOCK_N=bn, BLOCK_M=bm,
                                            num_warps=warps)
        return out.sum(dim=1)
    tot = torch.zeros(S, dtype=X.dtype, device=X.device)
    rows = max(1, min(N, BLOCK_BYTES // (8 * N)))
    for s in range(S):
        Y = X[s]
        for r in range(0, N, rows):
            D2 = torch.cdist(Y[r:r + rows], Y, compute_mode="donot_use_mm_for_euclid_dist") ** 2
            tot[s] += torch.exp(-0.5 * beta * D2).sum()
    return tot


# ---- the ODE ---------------------------------------------------------------------------------
class Reference:
    def __init__(self, beta: float, device, fused: bool | None = None):
        self.beta = float(beta)
        self.dev = torch.device(device)
        self.fused = fused_available(self.dev) if fused is None else bool(fused)
        if self.fused and not fused_available(self.dev):
            raise ValueError("fused sums need CUDA and triton")
        self.Vt = torch.as_tensor(V.T, dtype=torch.float64, device=self.dev)
        self.evals = 0

    def velocity(self, X: torch.Tensor) -> torch.Tensor:
        """P_x V m(x) at the retracted X (S, N, 3)."""
        R = X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)
        m = mean_fused(R, self.beta) if self.fused else mean_blocked(R, self.beta)
        self.evals += 1
        vm = m @ self.Vt
        dot = R[..., 0] * vm[..., 0] + R[..., 1] * vm[..., 1] + R[..., 2] * vm[..., 2]
        return vm - dot[..., None] * R

    def step(self, X: torch.Tensor, h: float) -> torch.Tensor:
        k1 = self.velocity(X)
        k2 = self.velocity(X + (0.5 * h) * k1)
        k3 = self.velocity(X + (0.5 * h) * k2)
        k4 = self.velocity(X + h * k3)
        Y = X + (h / 6.0) * (k1 + 2.0 * (k2 + k3) + k4)
        return Y / torch.linalg.vector_norm(Y, dim=-1, keepdim=True)

    def diagnostics(self, X: torch.Tensor, a_own: torch.Tensor) -> dict:
        """Per-seed diagnostics of X (S, N, 3) (see the module docstring); numpy arrays (S,)."""
        S, N, _ = X.shape
        w = 1.0 / N
        ksum = energy_sums(X, self.beta, self.fused)
        energy = 0.5 - 0.5 * ksum * (w * w)
        dA = torch.sqrt(w * torch.sum(X[..., 0] ** 2 + X[..., 2] ** 2, dim=1))  # ⊥ e_y
        dV = torch.sqrt(w * torch.sum(X[..., 1] ** 2 + X[..., 2] ** 2, dim=1))  # ⊥ e_x
        s = torch.sort(X[..., 1], dim=1, descending=True).values  # ⟨x, e_y⟩, largest first
        out = {"energy": energy, "dist_eigenspace": dA, "dist_eigenspace_V": dV,
               "mass_plus_y": w * (X[..., 1] > 0).sum(dim=1).to(X.dtype)}
        cum = w * torch.arange(1, N + 1, dtype=X.dtype, device=X.device)
        for name, a in (("w2_projection_own", a_own),
                        ("w2_projection_exact", torch.full((S,), A_EXACT, dtype=X.dtype, device=X.device))):
            to_e = torch.clamp(a[:, None] - (cum - w), min=0.0, max=w)
            cost = torch.sum(to_e * (2 - 2 * s) + (w - to_e) * (2 + 2 * s), dim=1)
            out[name] = torch.sqrt(torch.clamp(cost, min=0.0))
        return {k: v.double().cpu().numpy() for k, v in out.items()}

    def run(self, X0: np.ndarray, t_end: float, dt: float, output_every: float, *, log=None,
            snapshot_times=(), snapshot_seeds: int = 1) -> dict:
        """Integrate X0 (S, N, 3) to t_end; diagnostics at every output time."""
        X = torch.as_tensor(X0, dtype=torch.float64, device=self.dev)
        X = X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)
        a_own = (X[..., 1] > 0).to(X.dtype).mean(dim=1)
        n_out = int(round(t_end / output_every))
        times = output_every * np.arange(n_out + 1)
        rows, snaps = [], {}
        t, steps = 0.0, 0
        t0 = time.perf_counter()
        for k, target in enumerate(times):
            while t < target:  # spherepde.solvers.controller.next_step
                remaining = target - t
                nsteps = max(1, math.ceil(remaining / dt * (1.0 - SPLIT_RTOL)))
                h = remaining / nsteps
                t_new = target if nsteps == 1 else t + h
                X = self.step(X, h)
                t, steps = t_new, steps + 1
            rows.append(self.diagnostics(X, a_own))
            if any(abs(target - ts) < 1e-9 for ts in snapshot_times):
                snaps[float(target)] = X[:snapshot_seeds].float().cpu().numpy()
            if log is not None and (k % 8 == 0 or k == n_out):
                if self.dev.type == "cuda":
                    torch.cuda.synchronize()
                log(f"  t={target:5.2f} steps={steps} wall={time.perf_counter() - t0:7.1f}s "
                    f"E={rows[-1]['energy'].mean():.5f} W2own={rows[-1]['w2_projection_own'].mean():.4f} "
                    f"dA={rows[-1]['dist_eigenspace'].mean():.4f} dV={rows[-1]['dist_eigenspace_V'].mean():.4f}")
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        diag = {name: np.stack([r[name] for r in rows], axis=1) for name in rows[0]}  # (S, T)
        return {"times": times, "diag": diag, "a_own": a_own.cpu().numpy(), "steps": steps,
                "wall": wall, "snapshots": snaps, "final": X}


# ---- per-run scalars and statistics ------------------------------------------------------------
def switch_time(t, d_old, d_new) -> float:
    """spherepde.validation.fits.switch_time: first time d_new < d_old (interpolated)."""
    diff = np.asarray(d_new) - np.asarray(d_old)
    idx = np.nonzero(diff < 0)[0]
    if idx.size == 0 or idx[0] == 0:
        return float("nan") if idx.size == 0 else float(t[0])
    j = idx[0]
    return float(t[j - 1] + diff[j - 1] * (t[j] - t[j - 1]) / (diff[j - 1] - diff[j]))


def first_below(t, y, level) -> float:
    """First time y < level (linear interpolation between output times; nan if never)."""
    idx = np.nonzero(np.asarray(y) < level)[0]
    if idx.size == 0:
        return float("nan")
    j = idx[0]
    if j == 0:
        return float(t[0])
    return float(t[j - 1] + (y[j - 1] - level) * (t[j] - t[j - 1]) / (y[j - 1] - y[j]))


def exit_time(t, w, band=2.0) -> float:
    """spherepde.validation.fits.exit_time."""
    i = int(np.argmin(w))
    above = np.nonzero(w[i:] > band * w[i])[0]
    if above.size == 0:
        return float("nan")
    j = i + above[0]
    t0, t1, w0, w1 = t[j - 1], t[j], w[j - 1], w[j]
    return float(t0 + (band * w[i] - w0) * (t1 - t0) / (w1 - w0))


def scalars(times, diag) -> dict:
    S = diag["energy"].shape[0]
    out = {k: [] for k in ("w2_min_own", "t_w2_min_own", "w2_min_exact", "t_w2_min_exact",
                           "switch_time", "switch_time_pkg", "switch_time_V05", "switch_time_V02", "exit_time_own",
                           "energy_end", "dist_eigenspace_V_end")}
    for s in range(S):
        for tag in ("own", "exact"):
            w = diag[f"w2_projection_{tag}"][s]
            i = int(np.argmin(w))
            out[f"w2_min_{tag}"].append(float(w[i]))
            out[f"t_w2_min_{tag}"].append(float(times[i]))
        dA, dV = diag["dist_eigenspace"][s], diag["dist_eigenspace_V"][s]
        out["switch_time_pkg"].append(switch_time(times, dA, dV))
        i0 = int(np.argmin(dA))  # the metastable state: dist to A's eigenspace at its minimum
        st = switch_time(times[i0:], dA[i0:], dV[i0:])
        out["switch_time"].append(st)
        out["switch_time_V05"].append(first_below(times, dV, 0.5))
        out["switch_time_V02"].append(first_below(times, dV, 0.2))
        out["exit_time_own"].append(exit_time(times, diag["w2_projection_own"][s]))
        out["energy_end"].append(float(diag["energy"][s][-1]))
        out["dist_eigenspace_V_end"].append(float(dV[-1]))
    return out


def mean_se(a, axis=0):
    """Mean and standard error (std with ddof 1 / sqrt(count)) over finite entries; nan SE for 1."""
    a = np.asarray(a, float)
    ok = np.isfinite(a)
    n = ok.sum(axis=axis)
    m = np.where(n > 0, np.nansum(np.where(ok, a, 0.0), axis=axis) / np.maximum(n, 1), np.nan)
    dev = np.where(ok, a - np.expand_dims(m, axis), 0.0)
    var = np.sum(dev ** 2, axis=axis) / np.maximum(n - 1, 1)
    se = np.where(n > 1, np.sqrt(var / np.maximum(n, 1)), np.nan)
    return m, se, n


def summarise(job: dict, res: dict, device: str) -> dict:
    times, diag = res["times"], res["diag"]
    sc = scalars(times, diag)
    out = {"beta": job["beta"], "N": job["n"], "seeds": job["seeds"], "dt": job["dt"],
           "t_end": job["t_end"], "output_every": job["output_every"], "integrator": "rk4, retracted stages and steps",
           "steps": res["steps"], "wall_s": round(res["wall"], 2), "device": device,
           "pairs_per_s": round(4 * res["steps"] * len(job["seeds"]) * job["n"] ** 2 / res["wall"], 1),
           "a_exact": A_EXACT, "a_own": res["a_own"].tolist(), "times": times.tolist(),
           "per_seed": {k: v.tolist() for k, v in diag.items()},
           "mean": {}, "stderr": {}, "scalars_per_seed": sc, "scalars_mean": {}, "scalars_stderr": {},
           "scalars_count": {}}
    for k, v in diag.items():
        m, se, _ = mean_se(v, axis=0)
        out["mean"][k], out["stderr"][k] = m.tolist(), se.tolist()
    for k, v in sc.items():
        m, se, n = mean_se(v)
        out["scalars_mean"][k], out["scalars_stderr"][k], out["scalars_count"][k] = float(m), float(se), int(n)
    return out


def versions() -> dict:
    v = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    try:
        import triton
        v["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    if torch.cuda.is_available():
        v["gpu"] = torch.cuda.get_device_name(0)
    return v


# ---- check against spherepde -----------------------------------------------------------------------
def check(n: int = 200, t_end: float = 2.0, beta: float = 100.0, seed: int = 0, dt: float = 0.05,
          out: str | None = None) -> dict:
    """This integrator against spherepde's ParticleODE (method "reference"), same initial points."""
    from spherepde.dynamics.attention import Attention
    from spherepde.runs.config import load
    from spherepde.runs.initial import sample_initial
    from spherepde.solvers.lagrangian import ParticleODE
    from spherepde.validation.metrics import dist_to_subspace, interaction_energy, two_point_weight, w2_two_point

    here = os.path.dirname(os.path.abspath(__file__))
    cfg = load(os.path.join(here, "..", "..", "..", "..", "examples", "metastability.toml"))
    att_cfg = cfg.dynamics.attention
    same = (np.allclose(att_cfg.Q, Q) and np.allclose(att_cfg.K, K) and np.allclose(att_cfg.V, V)
            and cfg.initial.kind == "cosine" and np.allclose(cfg.initial.direction, DIRECTION)
            and cfg.initial.amplitude == AMPLITUDE)
    x0 = sample_initial(cfg.initial, 3, n, seed)
    sampler_identical = bool(np.array_equal(x0, sample_cosine(n, seed)))
    att = Attention(Q, K, V, beta)
    times = np.arange(0.0, t_end + 1e-12, 0.5)
    pkg = ParticleODE(att, attention_method="reference").run(x0, (0.0, t_end), dt=dt, output_times=times)
    ref = Reference(beta, "cpu", fused=False)
    res = ref.run(x0[None], t_end, dt, 0.5)
    mine = res["final"][0].numpy()
    pos_err = float(np.max(np.abs(mine - pkg.positions[-1])))
    # the diagnostics against the package's own functions at t_end (w = 1/N)
    w = np.full(n, 1.0 / n)
    a_own = two_point_weight(x0, w, E_A)
    xe = pkg.positions[-1]
    pk = {"energy": interaction_energy(xe, w, beta), "dist_eigenspace": dist_to_subspace(xe, w, E_A[:, None]),
          "dist_eigenspace_V": dist_to_subspace(xe, w, E_V[:, None]),
          "w2_projection_own": w2_two_point(xe, w, E_A, a_own),
          "w2_projection_exact": w2_two_point(xe, w, E_A, A_EXACT)}
    diag_err = {k: float(abs(res["diag"][k][0, -1] - v)) for k, v in pk.items()}
    # the grid's Π#ρ₀ weight (nlat 24, the example's grid; 48, 64) against A_EXACT
    from spherepde.runs.initial import initial_density
    from spherepde.grids import GaussGrid
    from spherepde.validation.metrics import as_measure
    a_grid = {nl: two_point_weight(*as_measure(GaussGrid(nl), initial_density(cfg.initial, GaussGrid(nl))), E_A)
              for nl in (24, 48, 64)}
    out_d = {"n": n, "beta": beta, "t_end": t_end, "dt": dt, "seed": seed, "setup_matches_example": bool(same),
             "sampler_identical": sampler_identical, "max_abs_position_difference": pos_err,
             "diagnostic_abs_difference": diag_err, "a_exact": A_EXACT,
             "a_grid": {str(k): float(v) for k, v in a_grid.items()},
             "spherepde_wall_s": float(pkg.wall_time), "this_wall_s": float(res["wall"])}
    print(json.dumps(out_d, indent=1))
    ok = same and sampler_identical and pos_err < 1e-10 and max(diag_err.values()) < 1e-12
    print("CHECK", "PASSED" if ok else "FAILED")
    if out:
        np.savez(out, x0=x0, x_pkg=pkg.positions[-1], t_end=t_end, beta=beta, dt=dt)
    return out_d


def check_device(npz: str, log) -> dict:
    """On the device: the fused kernel against the blocked sums, and the trajectory of the
    N = 200 check case against spherepde's positions carried in ``npz``."""
    d = np.load(npz)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    beta, t_end, dt = float(d["beta"]), float(d["t_end"]), float(d["dt"])
    out = {}
    rng = np.random.default_rng(5)
    for b in (100.0, 1000.0, 1e4):
        X = torch.as_tensor(np.stack([sample_cosine(3001, s) for s in (1, 2)]), device=dev)
        X = X + 1e-3 * torch.as_tensor(rng.standard_normal(X.shape), device=dev)  # not exactly unit
        X = X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)
        mb = mean_blocked(X, b)
        e_b = energy_sums(X, b, False)
        if fused_available(dev):
            mf = mean_fused(X, b)
            e_f = energy_sums(X, b, True)
            out[f"fused_vs_blocked_mean_beta{b:g}"] = float((mf - mb).abs().max())
            out[f"fused_vs_blocked_energy_rel_beta{b:g}"] = float(((e_f - e_b) / e_b).abs().max())
    ref = Reference(beta, dev)
    res = ref.run(d["x0"][None], t_end, dt, 0.5)
    out["fused" if ref.fused else "blocked"] = True
    out["trajectory_vs_spherepde_max_abs"] = float(np.max(np.abs(res["final"][0].cpu().numpy() - d["x_pkg"])))
    log(f"device check: {out}")
    return out


# ---- the device plan -----------------------------------------------------------------------------
def rate_probe(dev, beta=100.0, n=32768, S=2) -> float:
    """Pairs per second of one fused velocity evaluation (after a warm-up)."""
    ref = Reference(beta, dev)
    X = torch.as_tensor(np.stack([sample_cosine(n, 100 + s) for s in range(S)]), device=dev)
    ref.velocity(X)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        ref.velocity(X)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return 3 * S * n * n / (time.perf_counter() - t0)


def job_pairs(job) -> float:
    steps = math.ceil(job["t_end"] / job["dt"] - 1e-9)
    return 4.0 * steps * len(job["seeds"]) * job["n"] ** 2


def run_job(job, dev, log, out_dir=None):
    X0 = np.stack([sample_cosine(job["n"], s) for s in job["seeds"]])
    ref = Reference(job["beta"], dev)
    res = ref.run(X0, job["t_end"], job["dt"], job["output_every"], log=log,
                  snapshot_times=job.get("snapshots", ()), snapshot_seeds=job.get("snapshot_seeds", 1))
    summ = summarise(job, res, str(torch.cuda.get_device_name(0)) if dev.type == "cuda" else "cpu")
    summ["fused_kernel"] = ref.fused
    summ["versions"] = versions()
    if out_dir and res["snapshots"]:
        ts = sorted(res["snapshots"])
        fn = os.path.join(out_dir, f"snap_{job['name']}.npz")
        np.savez_compressed(fn, times=np.array(ts), seeds=np.array(job["seeds"][:job.get("snapshot_seeds", 1)]),
                            positions=np.stack([res["snapshots"][t] for t in ts]))
        summ["snapshot_file"] = os.path.basename(fn)
    return summ


def run_plan(plan_file: str, out_dir: str, budget_s: float, check_npz: str | None):
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.perf_counter()
    logf = open(os.path.join(out_dir, "log.txt"), "a")

    def log(msg):
        line = f"[{time.perf_counter() - t_start:7.1f}s] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    results = {"versions": versions(), "device_check": None, "rate_pairs_per_s": None, "jobs": [], "skipped": []}

    def dump():
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(results, f)

    if check_npz:
        chk = results["device_check"] = check_device(check_npz, log)
        bad = [k for k, v in chk.items() if k.startswith("fused_vs_blocked_mean") and not v < 1e-10]
        if bad or not chk["trajectory_vs_spherepde_max_abs"] < 1e-9:
            global _KERNELS
            _KERNELS = False  # the blocked torch sums from here on
            chk["fused_disabled"] = True
            log(f"device check failed ({bad}): fused kernels disabled")
        dump()
    rate = rate_probe(dev) if dev.type == "cuda" else rate_probe(dev, n=1024)
    results["rate_pairs_per_s"] = rate
    log(f"rate {rate:.3e} pairs/s")
    dump()
    with open(plan_file) as f:
        jobs = json.load(f)
    for job in jobs:
        left = budget_s - (time.perf_counter() - t_start)
        pred = job_pairs(job) / rate * 1.10 + 2.0
        if pred > left:
            log(f"skip {job['name']}: predicted {pred:.0f}s > {left:.0f}s left")
            results["skipped"].append({"name": job["name"], "predicted_s": pred})
            dump()
            continue
        log(f"start {job['name']}: beta={job['beta']} N={job['n']} seeds={job['seeds']} "
            f"dt={job['dt']} t_end={job['t_end']} predicted {pred:.0f}s")
        summ = run_job(job, dev, log, out_dir)
        summ["name"], summ["predicted_s"] = job["name"], pred
        results["jobs"].append(summ)
        log(f"done {job['name']} in {summ['wall_s']}s ({summ['pairs_per_s']:.3e} pairs/s) "
            f"w2min_own={summ['scalars_mean']['w2_min_own']:.4f}±{summ['scalars_stderr']['w2_min_own']:.4f} "
            f"switch={summ['scalars_mean']['switch_time']:.2f}")
        dump()
    log("plan finished")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="compare with spherepde's ParticleODE (CPU)")
    p.add_argument("--check-n", type=int, default=200)
    p.add_argument("--check-out", default=None, help="save the check case (x0, spherepde's x(t)) as .npz")
    p.add_argument("--run", action="store_true", help="one run (see --beta --n --seeds ...)")
    p.add_argument("--plan", default=None, help="JSON list of jobs to run in order within --budget")
    p.add_argument("--device-check", default=None, help="the .npz of --check-out, checked on the device first")
    p.add_argument("--budget", type=float, default=420.0, help="seconds for the plan (jobs that would not fit are skipped)")
    p.add_argument("--out-dir", default=".")
    p.add_argument("--beta", type=float, default=100.0)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--dt", type=float, default=0.05)
    p.add_argument("--t-end", type=float, default=24.0)
    p.add_argument("--output-every", type=float, default=0.5)
    p.add_argument("--device", default=None)
    p.add_argument("--out", default=None, help="JSON file of --run")
    a = p.parse_args(argv)
    if a.check:
        check(n=a.check_n, out=a.check_out)
    if a.run:
        dev = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        job = {"name": f"beta{a.beta:g}_N{a.n}", "beta": a.beta, "n": a.n, "seeds": a.seeds, "dt": a.dt,
               "t_end": a.t_end, "output_every": a.output_every}
        summ = run_job(job, dev, print)
        summ["versions"] = versions()
        print(json.dumps(summ["scalars_mean"]), json.dumps(summ["scalars_stderr"]))
        if a.out:
            with open(a.out, "w") as f:
                json.dump(summ, f)
    if a.plan:
        run_plan(a.plan, a.out_dir, a.budget, a.device_check)


if __name__ == "__main__":
    main()
