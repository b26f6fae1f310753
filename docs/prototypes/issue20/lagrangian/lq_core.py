"""One LQ run (lagq.py) on examples/metastability.toml at β, as a function (CPU and GPU drivers)."""
import math
import resource
import time

import numpy as np

from common import Diagnostics
from lagq import initial_points, lattice_stretch, stepper


def run(beta, nlat, dt, t_end, *, method="auto", tol=1e-8, every=0.5, snap_times=(),
        energy=None, log=print):
    """Diagnostics every ``every``; positions at ``snap_times``.  ``energy(x, w, beta)``
    replaces the package's interaction_energy (the GPU driver passes the same formula in torch)."""
    x, w, g = initial_points(nlat)
    diag = Diagnostics(beta, x, w)
    ode = stepper(beta, w, attention_method=method, tol=tol)
    out = {"beta": beta, "nlat": nlat, "points": int(w.size), "dt": dt, "method": method,
           "tol": tol, "times": [], "series": {}, "stretch": [], "attention_stats": [],
           "diag_s": 0.0}
    snaps, snap_t = [], []
    spo = round(every / dt)
    snap_k = {round(s / dt) for s in snap_times}
    t0 = time.perf_counter()
    k = 0
    while True:
        t = k * dt
        if k % spo == 0:
            td = time.perf_counter()
            out["times"].append(round(t, 10))
            d = diag(x, w) if energy is None else {"energy": energy(x, w, beta), **diag.light(x, w)}
            for key, v in d.items():
                out["series"].setdefault(key, []).append(v)
            out["stretch"].append(lattice_stretch(x, w, g, beta))
            out["attention_stats"].append(dict(ode.last_stats))
            out["diag_s"] += time.perf_counter() - td
            log(f"b={beta:g} n={nlat} t={t:.2f} E={out['series']['energy'][-1]:.6f} "
                f"W2={out['series']['w2_projection'][-1]:.4f} stretch={out['stretch'][-1]:.2f} "
                f"{time.perf_counter() - t0:.0f}s")
        if k in snap_k:
            snaps.append(x.copy())
            snap_t.append(t)
        if t >= t_end - 1e-9:
            break
        x = ode.step(x, t, dt)
        k += 1
    out["wall_s"] = time.perf_counter() - t0
    out["step_s"] = out["wall_s"] - out["diag_s"]
    out["maxrss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["mass_error"] = float(abs(w.sum() - 1.0))
    out["min_weight"] = float(w.min())
    return out, (np.array(snap_t), np.array(snaps), w)
