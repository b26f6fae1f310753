"""The exact pushforward reference (quadrature particles: Gauss-cell centres with weight rho0*area,
carried by the Heun SDE on the path), at initial quadrature nlat 48 (the issue's) and a finer one
(its own convergence check).  usage: python ref.py [NLAT_FINE]  -> ref.json, ref_positions.npz"""
import json, sys, time
import numpy as np
from common import Setup, heun, energy, width_estimate

fine = int(sys.argv[1]) if len(sys.argv) > 1 else 96
S = Setup(48)
out = {"times": [], "dt": S.dt}
pos = {}
for nq in (48, fine):
    x, w = S.quadrature_particles(nq)
    E, W, T = [], [], []
    t0 = time.perf_counter(); te = 0.0
    for k in range(S.nsteps + 1):
        if k % S.out_every == 0:
            a = time.perf_counter()
            E.append(energy(x, w)); W.append(width_estimate(x, w)[0]); te += time.perf_counter() - a
            if nq == 48:
                T.append(k * S.dt); pos[f"x{k}"] = x.copy()
        if k == S.nsteps:
            break
        x = heun(x, S.C(k), S.fn)
    sec = time.perf_counter() - t0
    out[f"E_{nq}"] = E; out[f"width_{nq}"] = W; out[f"seconds_{nq}"] = sec; out[f"seconds_energy_{nq}"] = te
    out[f"n_{nq}"] = int(len(x))
    if nq == 48:
        out["times"] = T
        np.savez_compressed("ref_positions.npz", w=w, **pos)
    print(nq, "points", len(x), "seconds %.1f (energy %.1f)" % (sec, te), flush=True)
for i, t in enumerate(out["times"]):
    print("t=%.2f E48 %.4e E%d %.4e  ratio %.4f width %.4f" % (t, out["E_48"][i], fine, out[f"E_{fine}"][i],
          out[f"E_{fine}"][i] / out["E_48"][i], out["width_48"][i]))
json.dump(out, open("ref.json", "w"), indent=1)
