"""Check FastNoise and heun against ParticleSDE (same path) for 100 steps."""
import time, numpy as np
from common import *
from spherepde.solvers.lagrangian.sde import ParticleSDE
S = Setup(48, 6.0, 0.01)
print("fit error of the monomial basis", S.fn.fit_error)
x, w = S.quadrature_particles()
ps = ParticleSDE(noise=S.noise, path=S.path)
xa = x.copy(); xb = x.copy()
t0 = time.perf_counter()
for k in range(100): xa = ps.step(xa, k * S.dt, S.dt)
t1 = time.perf_counter()
for k in range(100): xb = heun(xb, S.C(k), S.fn)
t2 = time.perf_counter()
print("max diff after 100 steps", np.abs(xa - xb).max(), "ParticleSDE %.2fs fast %.2fs" % (t1 - t0, t2 - t1), len(x))
y = xb[:50]; xi, it = inverse_heun(y, S.C(3), S.fn); print("inverse heun residual", np.abs(heun(xi, S.C(3), S.fn) - y).max(), it)
