"""CPU time of one cap's pieces (one pole, Williamson α = π/2 velocity, Courant 0.8, ρ ≡ 1):
reconstruction, tracing, clipping kernel, and the kernel with zero displacement (D_c = c).
python kernel_cost.py NLAT K B [MERGE0]"""
import sys, time
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cap as capmod, capnb
from spherepde.grids import GaussGrid
from spherepde.validation.transport_cases import make_case
n, K, B = (int(a) for a in sys.argv[1:4]); merge0 = len(sys.argv) > 4 and sys.argv[4] == "1"
g = GaussGrid(n); case = make_case("williamson1", np.pi / 2)
c = capmod._CapC(g, K, B, +1)
cellA = (np.asarray(g.weights) * g.dlon)[:, None]
vmax = np.max(np.linalg.norm(case.velocity(0, g.xyz.reshape(-1, 3)), axis=-1))
dt = 0.8 * g.dlon / vmax
mass = (np.ones(g.shape) * cellA)[c.rows].reshape(-1); ta = cellA[c.rows].repeat(g.nlon, 1).reshape(-1)
q = mass / ta
def timeit(f, N=40):
    f(); t = time.process_time()
    for _ in range(N): f()
    return 1e3 * (time.process_time() - t) / N
grad = capnb.reconstruct(q, c.pinvc, c.stencil, c.cells, c.ncell, c.cent)
Vv = np.ascontiguousarray(case.velocity(0, c.VxyzAll).reshape(K + B + 1, c.nl, 3))
tr = lambda: capnb.trace(c.VxyzAll, Vv, dt, 1.0, c.r, float(c.lamf[0]), float(c.dl), c.nl, K + B, (K + 1) * c.nl)
Vd = np.ascontiguousarray(tr().reshape(K + 1, c.nl, 2))
rec0 = np.array([1.0, 0, 0, 0, 0])
ker = lambda V: (lambda: capnb.departure_remap(V, c.V, K, B, c.r, float(c.lamf[0]), float(c.dl), c.nl, c.cells, c.ncell,
                                              c.blo, c.bhi, q, grad, c.cent, merge0, c.poly0, rec0))
V0 = np.ascontiguousarray(c.V[:K + 1])
print(dict(nlat=n, K=K, B=B, merge0=merge0,
           reconstruct_ms=round(timeit(lambda: capnb.reconstruct(q, c.pinvc, c.stencil, c.cells, c.ncell, c.cent)), 3),
           velocity_eval_ms=round(timeit(lambda: case.velocity(0, c.VxyzAll)), 3),
           trace_ms=round(timeit(tr), 3), kernel_ms=round(timeit(ker(Vd)), 3), kernel_zero_shift_ms=round(timeit(ker(V0)), 3),
           fluxes_total_ms=round(timeit(lambda: c.fluxes(mass, lambda x: case.velocity(0, x), dt, ta)), 3)))
