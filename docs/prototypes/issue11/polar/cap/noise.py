"""Noise-only SPDE (the sync-path noise: ReLU, σ_U = σ_W = 0.5, n_max = 4, Δt = 0.01) with the
cap against the split scheme on the same path.
python noise.py NLAT T_END INIT K B [SEED]    INIT: syncpath | pole | uniform
prints per scheme: min, mass error, max polar Courant, cap sub-steps, seconds/step (cap, outer)."""
import sys, time, json
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cap as capmod
from spherepde.validation.sync_path import SyncPathConfig
from spherepde.validation.ensemble import initial_density
from spherepde.solvers.eulerian.transport import FFSLSphere

nlat, t_end, init, K, B = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
seed = int(sys.argv[6]) if len(sys.argv) > 6 else 0
cfg = SyncPathConfig(nlat=nlat, t_end=t_end, seed=seed)
spde = cfg.spde()
g = spde.make_grid(); noise = spde.make_noise(); path = spde.make_path(noise, 0)
rho0 = initial_density(spde, g)
if init == "pole":
    z = g.xyz[..., 2]; rho0 = np.exp(10 * (z - 1)); rho0 /= g.integrate(rho0)
elif init == "uniform":
    rho0 = np.full(g.shape, 1 / (4 * np.pi))
dt = cfg.dt
nsteps = int(round(t_end / dt))
split = FFSLSphere(g, lambda t, x: np.zeros_like(x))
capS = capmod.CapFFSL(g, lambda t, x: np.zeros_like(x), K=K, B=B)
pts = split.points
rs, rc = rho0.copy(), rho0.copy()
ts = tc = 0.0; cmax = 0.0; mins = [np.inf, np.inf]; maxdep = 0
polar_rows = np.r_[0:K + B, nlat - K - B:nlat]
# warm-up (numba compilation) on a throw-away step
_dw = path.increment(0.0, dt); _v = lambda x: noise.tangent_values(_dw, x) / dt
_f = split.face_velocities(_v(pts)); split.advance(rho0, _f[0], _f[1], dt); capmod.CapFFSL(g, lambda t, x: x * 0, K=K, B=B).advance_with(rho0, _v, _f[0], _f[1], dt)
import time as _t
for k in range(nsteps):
    t = k * dt
    dw = path.increment(t, t + dt)
    vel = lambda x: noise.tangent_values(dw, x) / dt
    az, am, vmax = split.face_velocities(vel(pts))
    cmax = max(cmax, dt * vmax / g.dlon)
    t0 = time.process_time(); rs = split.advance(rs, az, am, dt); t1 = time.process_time()
    rc = capS.advance_with(rc, vel, az, am, dt); t2 = time.process_time()
    ts += t1 - t0; tc += t2 - t1
    mins = [min(mins[0], rs.min()), min(mins[1], rc.min())]
    maxdep = max(maxdep, max(c.max_dep_r for c in capS.caps))
    if not np.all(np.isfinite(rc)):
        print("non-finite at step", k); break
m0 = g.integrate(rho0)
rK = capS.caps[0].r
print(json.dumps(dict(nlat=nlat, t_end=t_end, init=init, K=K, B=B, seed=seed, courant_max=cmax,
    max_departure_rings=float(np.searchsorted(rK, maxdep)), 
    split=dict(min=float(mins[0]), mass=float((g.integrate(rs) - m0) / m0), max=float(rs.max()), s_per_step=ts / nsteps),
    cap=dict(min=float(mins[1]), mass=float((g.integrate(rc) - m0) / m0), max=float(rc.max()), s_per_step=tc / nsteps,
             cap_s_per_step=capS.cap_time / nsteps, cap_substeps=capS.cap_substeps, fix_count=capS.fix_count, fix_mass=capS.fix_mass, ring_fix=capS.ring_fix, handover=capmod.HANDOVER, trace=capmod.TRACE, vel_s_per_step=sum(c.vel_time for c in capS.caps) / nsteps),
    diff_l2=float(np.sqrt(g.integrate((rc - rs) ** 2) / g.integrate(rs ** 2))),
    diff_polar_max=float(np.abs(rc - rs)[polar_rows].max() / rs.max()))), flush=True)
