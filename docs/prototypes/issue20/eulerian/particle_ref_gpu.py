"""Particle reference for the issue-20 set-up with the package's ParticleODE (RK4), the attention
on a GPU (attention_method "torch", float64) when one is present, else "auto".

python particle_ref_gpu.py BETA N DT T_END EVERY SEED [SEED ...]
Writes data/particles_beta{B}_N{N}_seed{S}.json: per output time the diagnostics of
common.diagnostics (exact Π#ρ_0 target), w2_projection_own (the draw's own two-point weight),
the energy computed on the GPU in float64 (checked against the package's interaction_energy on
a 2000-point subsample at t = 0 and at the end: relative difference recorded)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from common import A_EXACT, E_TOP, attention, diagnostics
from spherepde.runs.initial import sample_initial
from spherepde.solvers.lagrangian.particles import ParticleODE
from spherepde.validation.metrics import interaction_energy, two_point_weight, w2_two_point

HERE = Path(__file__).parent
DATA = Path(os.environ.get("OUT_DIR", HERE / "data"))


class _Cos:
    kind = "cosine"
    direction = [0.6, 0.5, 0.3]
    amplitude = 0.5


def energy_torch(x: np.ndarray, beta: float, block: int = 8192) -> float:
    """½ ΣΣ w_i w_j (1 − e^{β(⟨x_i,x_j⟩−1)}), w = 1/N, float64 on the GPU."""
    import torch

    X = torch.as_tensor(x, dtype=torch.float64, device="cuda")
    n = X.shape[0]
    tot = torch.zeros((), dtype=torch.float64, device="cuda")
    for s in range(0, n, block):
        g = X[s:s + block] @ X.T - 1.0
        tot += torch.sum(1.0 - torch.exp(beta * torch.clamp(g, max=0.0)))
    return 0.5 * float(tot) / n / n


def main() -> None:
    beta, n, dt, t_end, every = (float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]),
                                 float(sys.argv[4]), float(sys.argv[5]))
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    for seed in map(int, sys.argv[6:]):
        x0 = sample_initial(_Cos, 3, n, seed)
        w = np.full(n, 1.0 / n)
        a_draw = two_point_weight(x0, w, E_TOP[:, 0])
        times = np.arange(0.0, t_end + 1e-9, every)
        ode = ParticleODE(attention(beta), method="rk4", attention_method="torch" if gpu else "auto")
        t0, c0 = time.perf_counter(), time.process_time()
        res = ode.run(x0, (0.0, t_end), dt=dt, output_times=times)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows, checks = [], []
        for k, (t, x) in enumerate(zip(times, res.positions)):
            if gpu:
                d = {"energy": energy_torch(x, beta)}
                d.update(diagnostics_cheap(x, w))
                if k in (0, len(times) - 1):
                    sub = x[:2000]
                    e_gpu, e_np = energy_torch(sub, beta), interaction_energy(sub, np.full(2000, 1 / 2000), beta)
                    checks.append(abs(e_gpu - e_np) / abs(e_np))
            else:
                d = diagnostics(x, w, beta)
            d["w2_projection_own"] = w2_two_point(x, w, E_TOP[:, 0], a_draw)
            rows.append({"t": float(t), **d})
        out = {"beta": beta, "N": n, "seed": seed, "dt": dt, "method": "rk4", "gpu": gpu,
               "a_exact": A_EXACT, "a_draw": a_draw, "wall_s": wall, "cpu_s": cpu,
               "energy_check_rel": checks, "series": rows}
        DATA.mkdir(parents=True, exist_ok=True)
        (DATA / f"particles_beta{int(beta)}_N{n}_seed{seed}.json").write_text(json.dumps(out, indent=1))
        print(f"beta {beta} N {n} seed {seed}: {wall:.1f} s, final {rows[-1]}", flush=True)


def diagnostics_cheap(x, w):
    from common import E_V
    from spherepde.validation.metrics import dist_to_subspace

    return {"w2_projection": w2_two_point(x, w, E_TOP[:, 0], A_EXACT),
            "dist_eigenspace": dist_to_subspace(x, w, E_TOP),
            "dist_eigenspace_V": dist_to_subspace(x, w, E_V)}


if __name__ == "__main__":
    main()
