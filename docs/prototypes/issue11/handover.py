"""Grid → weighted points hand-over for Paper 1 metastability: take the density of a
metastability NetCDF at output time t_h, make one weighted point per cell (mass > floor), move the
points by their own weighted attention (ParticleODE, RK4) to t_end; W2 to Pi#rho0 at each output.
usage: handover.py FILE.nc T_H T_END [DT]"""
import json, sys, time, numpy as np, xarray as xr
from spherepde.grids import GaussGrid
from spherepde.dynamics.attention import Attention
from spherepde.solvers.lagrangian import ParticleODE
from spherepde.experiments.metastability import MetastabilityConfig, initial_density
from spherepde.validation.metrics import as_measure, top_eigenspace, two_point_weight, w2_two_point
f, th, tend = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]); dt = float(sys.argv[4]) if len(sys.argv) > 4 else 0.05
ds = xr.open_dataset(f); var = [v for v in ds.data_vars if ds[v].ndim == 3][0]
beta = float(json.loads(ds.attrs["config_json"])["beta"])
k = int(np.argmin(abs(ds.time.values - th))); th = float(ds.time.values[k])
rho = ds[var].values[k]; n = rho.shape[0]; g = GaussGrid(n); c = MetastabilityConfig()
Q, K, V = (np.asarray(m, float) for m in (c.Q, c.K, c.V))
e = top_eigenspace(V @ (Q.T @ K).T).basis[:, 0]
x0, w0 = as_measure(g, initial_density(g, c.init_a)); a = two_point_weight(x0, w0, e)
x, w = as_measure(g, rho); w = np.clip(w, 0, None)
floor = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-12
keep = w > floor * w.max(); w_all_kept = w[keep].sum() / w.sum(); x, w = x[keep], w[keep] / w[keep].sum()
times = np.arange(th, tend + 1e-9, 1 / 6)
t0 = time.perf_counter()
res = ParticleODE(Attention(Q, K, V, beta), weights=w).run(x, (th, times[-1]), dt=dt, output_times=times)
w2 = [w2_two_point(p, w, e, a) for p in res.positions]
i = int(np.argmin(w2))
out = dict(floor=floor, mass_dropped=float(1 - w_all_kept), file=f, beta=beta, nlat=n, t_handover=th, points=int(w.size), dt=dt, w2_at_handover=float(w2[0]),
           min_w2=float(w2[i]), t_min=float(times[i]), w2=[float(v) for v in w2], seconds=time.perf_counter() - t0)
print(json.dumps({k: v for k, v in out.items() if k != "w2"}))
json.dump(out, open(f"/tmp/lr/handover_b{beta:g}_n{n}_t{th:g}.json", "w"))
