"""One velocity evaluation at saved LQ states: all N points as sources (the package's "auto" →
compiled culled sums, 1 thread) against the coarsened sources of lq_coarse.py (δ = ¼ and ⅛ kernel
width), same targets.  Wall time (best of 2), pairs, and the velocity difference
max|v_c − v|/max|v| -> bench_coarse.json"""
import json
import time

import numpy as np

from common import attention
from lq_coarse import CoarseSources

import sys
cases = [(100.0, "lq_beta100_n48_dt0.05.npz", [2.0, 8.0, 16.0, 24.0]),
         (100.0, "gpu/snaps_b100_n96.npz", [2.0, 8.0, 16.0, 24.0]),
         (1000.0, "gpu/snaps_b1000_n128.npz", [4.0, 12.0, 24.0])]
res = []
if len(sys.argv) > 1 and sys.argv[1] == "--beta1000-only":   # resume after the β = 100 cases
    res = [r for r in json.load(open("bench_coarse.json")) if r["beta"] != 1000.0]
    cases = cases[2:]
for beta, f, ts in cases:
    d = np.load(f)
    att = attention(beta)
    w = d["w"]
    for t in ts:
        k = int(np.argmin(np.abs(d["t"] - t)))
        x = d["x"][k]
        best = []
        for _ in range(2):
            t0 = time.perf_counter()
            m, st = att.mean_and_stats(x, x, w, method="auto", tol=1e-8)
            best.append(time.perf_counter() - t0)
        v = att.velocity_from_mean(x, m)
        row = {"beta": beta, "file": f, "t": float(d["t"][k]), "N": int(w.size),
               "allpairs_s": min(best), "allpairs_pairs": st.get("pairs"), "method": st["method"]}
        for delta in (0.25, 0.125):
            src = CoarseSources(beta, delta)
            best = []
            for _ in range(2):
                t0 = time.perf_counter()
                ys, ws = src(x, w)
                mc, sc = att.mean_and_stats(x, ys, ws, method="auto", tol=1e-8)
                best.append(time.perf_counter() - t0)
            vc = att.velocity_from_mean(x, mc)
            row[f"d{delta}"] = {"M": int(ws.size), "s": min(best), "pairs": sc.get("pairs"),
                                "max_dv_rel": float(np.abs(vc - v).max() / np.abs(v).max()),
                                "mass_error": float(abs(ws.sum() - w.sum()))}
        res.append(row)
        print(json.dumps(row), flush=True)
        json.dump(res, open("bench_coarse.json", "w"), indent=1)
