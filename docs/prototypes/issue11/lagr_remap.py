"""Candidate B: weighted Lagrangian points (ALE with the cells carried by the flow) + periodic
conservative remap (NGP deposit, exact in mass, positive) onto a grid adapted to the mass: a
rotated lat-lon grid whose pole sits on the cluster's mean direction, Schmidt-stretched so that
`cells` pole cells span one rms width.  After a remap the points are the non-empty cells
(cell centre, or the mass centroid of the deposited points with --centroid) with the cell masses.

usage: python lagr_remap.py --every STEPS [--nlat-a 48] [--cells 8] [--centroid] [--fixed] [--tag T]
  --every 0: never remap (= the reference);  --fixed: remap onto a fixed, unrotated, unstretched
  lat-lon grid (what a regular grid can hold)."""
import argparse, json, time, math
import numpy as np
from common import Setup, heun, energy, width_estimate, AdaptedGrid, stretch_for

ap = argparse.ArgumentParser()
ap.add_argument("--every", type=int, required=True)
ap.add_argument("--nlat-a", type=int, default=48)
ap.add_argument("--cells", type=float, default=8.0)
ap.add_argument("--centroid", action="store_true")
ap.add_argument("--fixed", action="store_true")
ap.add_argument("--tag", default=None)
a = ap.parse_args()
if a.every < 0 or a.nlat_a < 4 or a.cells <= 0:
    raise SystemExit("--every ≥ 0, --nlat-a ≥ 4, --cells > 0")
ref = json.load(open("ref.json"))
S = Setup(48)
x, w = S.quadrature_particles()
m0 = w.sum()
rows = []; nrem = 0; t_rem = t_step = t_e = 0.0; min_w = w.min()
t_all = time.perf_counter()
def grid_for(x, w):
    width, c = width_estimate(x, w)
    if a.fixed:
        return AdaptedGrid(np.array([0, 0, 1.0]), 1.0, a.nlat_a)
    return AdaptedGrid(c, stretch_for(width, a.nlat_a, a.cells), a.nlat_a)
for k in range(S.nsteps + 1):
    if k % S.out_every == 0:
        t0 = time.perf_counter()
        Ep = energy(x, w)
        G = grid_for(x, w); mg, pg = G.deposit(x, w)  # the field one would write (on the adapted grid)
        Eg = energy(pg, mg)
        t_e += time.perf_counter() - t0
        i = len(rows)
        rows.append(dict(t=k * S.dt, E_points=Ep, E_grid=Eg, ratio=Ep / ref["E_48"][i], ratio_grid=Eg / ref["E_48"][i],
                         n_points=int(len(x)), stretch=float(np.tan(G.th_f[1] / 2) and np.tan(math.pi / G.nlat / 2) / np.tan(G.th_f[1] / 2)),
                         mass_error=float(w.sum() - m0)))
    if k == S.nsteps:
        break
    t0 = time.perf_counter(); x = heun(x, S.C(k), S.fn); t_step += time.perf_counter() - t0
    if a.every and (k + 1) % a.every == 0:
        t0 = time.perf_counter()
        G = grid_for(x, w)
        m, p = G.deposit(x, w, centroid=a.centroid)
        nz = m > 0
        x, w = p[nz].copy(), m[nz].copy()
        min_w = min(min_w, w.min()); nrem += 1
        t_rem += time.perf_counter() - t0
sec = time.perf_counter() - t_all
r = np.array([q["ratio"] for q in rows]); rg = np.array([q["ratio_grid"] for q in rows])
E0, Eend = ref["E_48"][0], ref["E_48"][-1]
res = dict(args=vars(a), rows=rows, remaps=nrem, seconds=sec, seconds_steps=t_step, seconds_remap=t_rem,
           seconds_energy=t_e, decades=math.log10(E0 / Eend), min_weight=float(min_w),
           mass_error=float(w.sum() - m0), ratio_min=float(r.min()), ratio_max=float(r.max()),
           ratio_grid_min=float(rg.min()), ratio_grid_max=float(rg.max()))
tag = a.tag or f"B_every{a.every}_n{a.nlat_a}_c{a.cells:g}{'_cen' if a.centroid else ''}{'_fixed' if a.fixed else ''}"
json.dump(res, open(f"out/{tag}.json", "w"), indent=1)
for q in rows[::4]:
    print("t=%.2f ratio %.4f ratio_grid %.4f n %d stretch %.1f" % (q["t"], q["ratio"], q["ratio_grid"], q["n_points"], q["stretch"]))
print("%s: ratio [%.4f, %.4f] grid-view [%.4f, %.4f] remaps %d mass err %.2e min w %.2e  %.1fs (steps %.1f remap %.2f energy %.1f)" % (
    tag, r.min(), r.max(), rg.min(), rg.max(), nrem, res["mass_error"], min_w, sec, t_step, t_rem, t_e))
