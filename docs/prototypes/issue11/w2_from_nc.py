import sys, numpy as np, xarray as xr
from spherepde.grids import GaussGrid
from spherepde.experiments.metastability import MetastabilityConfig, initial_density
from spherepde.validation.metrics import as_measure, top_eigenspace, two_point_weight, w2_two_point
f = sys.argv[1]
ds = xr.open_dataset(f)
var = [v for v in ds.data_vars if ds[v].ndim == 3][0]
rho = ds[var].values; t = ds.time.values
n = rho.shape[1]; g = GaussGrid(n); c = MetastabilityConfig()
Q, K, V = (np.asarray(m, float) for m in (c.Q, c.K, c.V))
e = top_eigenspace(V @ (Q.T @ K).T).basis[:, 0]
x, w0 = as_measure(g, initial_density(g, c.init_a)); a = two_point_weight(x, w0, e)
w2 = np.array([w2_two_point(x, as_measure(g, r)[1], e, a) for r in rho])
i = int(np.argmin(w2)); print(f, "nlat", n, "outputs", len(t), "min W2 %.4f at t=%.2f" % (w2[i], t[i]), "last t %.2f W2 %.4f" % (t[-1], w2[-1]))
