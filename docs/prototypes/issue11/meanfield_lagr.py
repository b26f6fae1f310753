"""Mean-field metastability (Paper 1 set-up of `spherepde experiment metastability`) with the
Lagrangian representation: Gauss-cell centres of nlat N with weights rho0*area, moved by their own
weighted attention (ParticleODE, RK4), W2 to Pi#rho0 (two-point measure) at 96 outputs on [0, 24].
usage: python meanfield_lagr.py BETA NLAT [DT]"""
import json, math, sys, time
from common import *  # noqa (sets sys.path)
import numpy as np
from spherepde.grids.gauss import GaussGrid
from spherepde.experiments.metastability import MetastabilityConfig, initial_density as mf_rho0
from spherepde.validation.metrics import as_measure, top_eigenspace, two_point_weight, w2_two_point
from spherepde.dynamics.attention import Attention
from spherepde.solvers.lagrangian import ParticleODE

beta, nlat = float(sys.argv[1]), int(sys.argv[2])
dt = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
cfg = MetastabilityConfig()
Q, K, V = (np.asarray(m, float) for m in (cfg.Q, cfg.K, cfg.V))
g = GaussGrid(nlat)
x0, w0 = as_measure(g, mf_rho0(g, cfg.init_a))
EA = top_eigenspace(V @ (Q.T @ K).T); e = EA.basis[:, 0]; a = two_point_weight(x0, w0, e)
times = np.linspace(0, cfg.t_end, cfg.n_outputs + 1)
t0 = time.perf_counter()
res = ParticleODE(Attention(Q, K, V, beta), weights=w0, attention_method="numpy" if False else "auto").run(
    x0, (0.0, cfg.t_end), dt=dt, output_times=times)
sec = time.perf_counter() - t0
w2 = [w2_two_point(p, w0, e, a) for p in res.positions]
i = int(np.argmin(w2))
out = dict(beta=beta, nlat=nlat, n=int(len(w0)), dt=dt, min_w2=float(w2[i]), t_min=float(times[i]), w2=list(map(float, w2)),
           seconds=sec, mass=float(w0.sum()))
json.dump(out, open(f"out/MF_beta{beta:g}_n{nlat}_dt{dt:g}.json", "w"), indent=1)
print("beta %g nlat %d N %d dt %g: min W2 %.4f at t=%.2f  (%.1fs)" % (beta, nlat, len(w0), dt, w2[i], times[i], sec))
