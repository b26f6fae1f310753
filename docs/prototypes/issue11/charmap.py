"""Candidate C: characteristic mapping (Taylor & Nave style, spectral variant).
Backward submaps X_j (time (j+1)τ -> jτ) computed at the nodes of a coarse Gauss grid by exact
inversion of every forward Heun step (so the map is the inverse of the reference's discrete flow),
fitted by least squares with a total-degree-D Chebyshev polynomial in (x, y, z) (the displacement),
composed at output times: rho_t(x) = rho0(X(x)) det DX(x) (central differences), evaluated at the
cell centres of a rotated Schmidt-stretched grid centred on the forward image of the vMF mean,
stretch chosen from det DX there.

usage: python charmap.py [--nlat-c 32] [--deg 14] [--every 25] [--nlat-e 48] [--cells 8] [--approx]
  --approx: backward Heun with -dW instead of exact inversion (cheaper, not the same discrete flow)."""
import argparse, json, math, time
import numpy as np
from numpy.polynomial import chebyshev as Ch
from common import (Setup, heun, inverse_heun, energy, AdaptedGrid, stretch_for, retract, rho0_fn,
                    DIRECTION, KAPPA0, config)

ap = argparse.ArgumentParser()
ap.add_argument("--nlat-c", type=int, default=32)
ap.add_argument("--deg", type=int, default=14)
ap.add_argument("--every", type=int, default=25)
ap.add_argument("--nlat-e", type=int, default=48)
ap.add_argument("--cells", type=float, default=8.0)
ap.add_argument("--approx", action="store_true")
ap.add_argument("--tag", default=None)
a = ap.parse_args()
ref = json.load(open("ref.json"))
S = Setup(48)
if S.out_every % a.every and a.every % S.out_every:
    raise SystemExit("--every must divide or be a multiple of the output interval (25 steps)")


def cheb_basis(x, D):
    Tx, Ty, Tz = (Ch.chebvander(x[:, k], D) for k in range(3))
    cols = [Tx[:, i] * Ty[:, j] * Tz[:, l] for i in range(D + 1) for j in range(D + 1 - i) for l in range(D + 1 - i - j)]
    return np.stack(cols, 1)


def backward(y, k0, k1):
    """points at step k1 -> their positions at step k0 < k1 (exact inverse Heun)."""
    x = y.copy(); its = 0
    for k in range(k1 - 1, k0 - 1, -1):
        if a.approx:
            x = heun(x, -S.C(k), S.fn)
        else:
            x, it = inverse_heun(x, S.C(k), S.fn); its += it
    return x, its


gc = config(a.nlat_c).make_grid()
nodes = gc.xyz.reshape(-1, 3)
rng = np.random.default_rng(5)
test = rng.standard_normal((400, 3)); test /= np.linalg.norm(test, axis=1, keepdims=True)
Bn = cheb_basis(nodes, a.deg)
pinv = np.linalg.pinv(Bn, rcond=1e-12)
Bt = cheb_basis(test, a.deg)
submaps, fit_err = [], []
t_all = time.perf_counter(); t_sub = 0.0; t_eval = 0.0; t_e = 0.0; iters = 0
nsub = S.nsteps // a.every


def apply(j, x):
    return retract(x + cheb_basis(x, a.deg) @ submaps[j])


def compose(n, x):
    for j in range(n - 1, -1, -1):
        x = apply(j, x)
    return x


amean = np.asarray(DIRECTION, float); amean /= np.linalg.norm(amean)
centre = amean[None].copy()
kap = KAPPA0
width0 = math.sqrt(2 * (1 - (1 / math.tanh(kap) - 1 / kap)))
rows = []
eps = 1e-6


def density_on(G, n):
    """rho at the centres of G: rho0(X) * det DX by central differences in the tangent plane."""
    c = G.centres
    e1 = np.cross(c, np.array([0.3, -0.5, 0.81])); e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(c, e1)
    P = np.concatenate([c, retract(c + eps * e1), retract(c - eps * e1), retract(c + eps * e2), retract(c - eps * e2)])
    X = compose(n, P).reshape(5, -1, 3)
    d1 = (X[1] - X[2]) / (2 * eps); d2 = (X[3] - X[4]) / (2 * eps)
    J = np.abs(np.einsum("ij,ij->i", np.cross(d1, d2), X[0]))
    return rho0_fn(X[0]) * J


def jac_at(p, n):
    e1 = np.cross(p, [0.3, -0.5, 0.81]); e1 /= np.linalg.norm(e1); e2 = np.cross(p, e1)
    P = np.stack([p, retract(p + eps * e1), retract(p - eps * e1), retract(p + eps * e2), retract(p - eps * e2)])
    X = compose(n, P)
    return abs(np.cross((X[1] - X[2]) / (2 * eps), (X[3] - X[4]) / (2 * eps)) @ X[0])


def output(k):
    global t_e
    n = k // a.every
    t0 = time.perf_counter()
    J = jac_at(centre[0], n) if n else 1.0
    width = width0 / math.sqrt(J)
    G = AdaptedGrid(centre[0], stretch_for(width, a.nlat_e, a.cells), a.nlat_e)
    rho = density_on(G, n)
    m = rho * G.area
    E = energy(G.centres, m)
    t_e += time.perf_counter() - t0
    i = len(rows)
    rows.append(dict(t=k * S.dt, E=E, ratio=E / ref["E_48"][i], mass=float(m.sum()), min_rho=float(rho.min()),
                     E_mass_normalised=E / m.sum() ** 2, width=width, fit_error_max=max(fit_err) if fit_err else 0.0))
    print("t=%.2f E %.4e ratio %.4f mass-1 %.2e width %.2e fit %.1e" % (k * S.dt, E, E / ref["E_48"][i], m.sum() - 1, width,
          rows[-1]["fit_error_max"]), flush=True)


for k in range(S.nsteps + 1):
    if k % S.out_every == 0 and (k // a.every) * a.every == k:
        output(k)
    if k == S.nsteps:
        break
    centre = heun(centre, S.C(k), S.fn)
    if (k + 1) % a.every == 0:
        j = (k + 1) // a.every - 1
        t0 = time.perf_counter()
        X, its = backward(nodes, j * a.every, (j + 1) * a.every); iters += its
        coef = pinv @ (X - nodes)
        submaps.append(coef)
        Xt, _ = backward(test, j * a.every, (j + 1) * a.every)
        fit_err.append(float(np.abs(retract(test + Bt @ coef) - Xt).max()))
        t_sub += time.perf_counter() - t0
sec = time.perf_counter() - t_all
r = np.array([q["ratio"] for q in rows])
res = dict(args=vars(a), rows=rows, seconds=sec, seconds_submaps=t_sub, seconds_eval_energy=t_e,
           fit_error=fit_err, inverse_iterations_per_step=iters / max(1, S.nsteps * len(nodes) / len(nodes)),
           ratio_min=float(r.min()), ratio_max=float(r.max()),
           mass_error_max=float(max(abs(q["mass"] - 1) for q in rows)), min_rho=float(min(q["min_rho"] for q in rows)))
tag = a.tag or f"C_nc{a.nlat_c}_D{a.deg}_every{a.every}_ne{a.nlat_e}_c{a.cells:g}{'_approx' if a.approx else ''}"
json.dump(res, open(f"out/{tag}.json", "w"), indent=1)
print("%s: ratio [%.4f, %.4f] max|mass-1| %.2e min rho %.2e  fit err max %.2e  %.1fs (submaps %.1f, eval+energy %.1f)" % (
    tag, r.min(), r.max(), res["mass_error_max"], res["min_rho"], max(fit_err), sec, t_sub, t_e))
