"""Accuracy under the sync-path noise (Courant ≈ 3–5 near the poles at nlat 48): split and cap
at NLAT, and the split at NREF, against the exact pushforward (the cell centres of GaussGrid(NREF)
with weights ρ₀·area carried by the particle SDE on the same increments, as in sync-path), binned
onto GaussGrid(NLAT); compared by spherical-harmonic coefficients up to degree LMAX (relative l2).
python noise_ref.py NLAT NREF T_END INIT K B [LMAX]   INIT: pole | uniform | syncpath"""
import sys, json, time
import numpy as np
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import cap as capmod
from spherepde.validation.sync_path import SyncPathConfig
from spherepde.validation.ensemble import initial_density
from spherepde.solvers.eulerian.transport import FFSLSphere
from spherepde.grids.sht import SphericalHarmonics

nlat, nref, t_end, init, K, B = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
import os
NSUB = int(os.environ.get('CAP_NSUB', '1'))
LABELS = [x for x in os.environ.get('CAP_LABELS', '').split(',') if x]  # run only these (plus ref)
lmax = int(sys.argv[7]) if len(sys.argv) > 7 else 16
def setup(n):
    cfg = SyncPathConfig(nlat=n, t_end=t_end)
    spde = cfg.spde(); g = spde.make_grid(); noise = spde.make_noise(); path = spde.make_path(noise, 0)
    rho0 = initial_density(spde, g)
    if init == "pole":
        z = g.xyz[..., 2]; rho0 = np.exp(10 * (z - 1)); rho0 /= g.integrate(rho0)
    elif init == "uniform":
        rho0 = np.full(g.shape, 1 / (4 * np.pi))
    return cfg, g, noise, path, rho0
res = {}
for label, n, kind, handover in (("ref", nref, "split", None), ("split", nlat, "split", None),
                                 ("cap-after", nlat, "cap", "after"), ("cap-source", nlat, "cap", "source"),
                                 ("cap-overlap", nlat, "cap", "overlap"),
                                 ("cap-overlap-scale", nlat, "cap", "overlap-scale")):
    if LABELS and label not in LABELS and label != "ref":
        continue
    cfg, g, noise, path, rho = setup(n)
    capmod.HANDOVER = handover or "after"
    s = FFSLSphere(g, lambda t, x: x * 0) if kind == "split" else capmod.CapFFSL(g, lambda t, x: x * 0, K=K, B=B)
    pts = s.points
    nsteps = int(round(t_end / cfg.dt)); mn = np.inf
    for k in range(nsteps):
        t = k * cfg.dt; dw = path.increment(t, t + cfg.dt)
        vel = lambda x: noise.tangent_values(dw, x) / cfg.dt
        az, am, _ = s.face_velocities(vel(pts))
        if kind == "split":
            rho = s.advance(rho, az, am, cfg.dt)
        else:  # CAP_NSUB whole sub-steps of the coupled step (same frozen velocity)
            for _ in range(NSUB):
                rho = s.advance_with(rho, vel, az, am, cfg.dt / NSUB)
        mn = min(mn, rho.min())
    coef = SphericalHarmonics(g, lmax=lmax).analyse(rho)
    res[label] = dict(coef=coef, rho=rho, min=float(mn), mass=float(g.integrate(rho) - 1.0),
                      fix_mass=getattr(s, "fix_mass", 0.0), ring_fix=getattr(s, "ring_fix", 0), cap_substeps=getattr(s, "cap_substeps", 0))
# exact pushforward of the fine quadrature, binned onto the coarse grid
from spherepde.solvers.lagrangian.sde import ParticleSDE
cfg, gf, noise, path, rhof = setup(nref)
cfgc, g, _, _, _ = setup(nlat)
x = gf.xyz.reshape(-1, 3).copy(); w = (rhof * gf.cell_area).reshape(-1)
part = ParticleSDE(noise=noise, path=path)
for k in range(int(round(t_end / cfg.dt))):
    x = part.step(x, k * cfg.dt, cfg.dt)
lat = np.arcsin(np.clip(x[:, 2], -1, 1)); lon = np.arctan2(x[:, 1], x[:, 0])
jj = np.clip(np.searchsorted(-np.asarray(g.lat_faces), -lat) - 1, 0, g.nlat - 1)
ii = np.floor((lon - g.lon_faces[0]) / g.dlon).astype(int) % g.nlon
binned = np.bincount(jj * g.nlon + ii, weights=w, minlength=g.nlat * g.nlon).reshape(g.shape) / g.cell_area
ref = SphericalHarmonics(g, lmax=lmax).analyse(binned)
res["ref"]["coef"] = SphericalHarmonics(gf, lmax=lmax).analyse(res["ref"].pop("rho"))
res["ref"]["label"] = "split at NREF"
out = {"cap_nsub": NSUB, "nlat": nlat, "nref": nref, "t_end": t_end, "init": init, "K": K, "B": B, "lmax": lmax}
for k, v in res.items():
    out[k] = {"err_lmax": float(np.linalg.norm(v["coef"] - ref) / np.linalg.norm(ref)),
              **{a: v[a] for a in ("min", "mass", "fix_mass", "ring_fix", "cap_substeps")}}
print(json.dumps(out))
