"""Time-step check of the LQ runs: nlat 32 at dt 0.1 against dt 0.05 (RK4), β = 100 -> dt_check.json"""
import json
import numpy as np
a = json.load(open("lq_beta100_n32_dt0.05.json")); b = json.load(open("lq_beta100_n32_dt0.1.json"))
res = {}
for key in ("energy", "w2_projection", "dist_eigenspace", "dist_eigenspace_V"):
    va, vb = np.array(a["series"][key]), np.array(b["series"][key])
    rel = np.abs(va - vb) / np.maximum(np.abs(va), 0.05)
    ta = np.array(a["times"])
    res[key] = {"max_rel_t<=12": float(rel[ta <= 12].max()), "max_rel_all": float(rel.max()),
                "t_of_max": float(ta[rel.argmax()])}
print(res); json.dump(res, open("dt_check.json", "w"), indent=1)
