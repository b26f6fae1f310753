"""Shared pieces for the issue-11 prototypes: the sync-path set-up, a fast evaluation of the
n_max = 4 noise at scattered points (degree-4 polynomials in x, y, z), the Heun step of
ParticleSDE (same formula), the exact reference (cell-centre quadrature particles), E_beta,
and a rotated, Schmidt-stretched lat-lon grid (the adapted grid)."""
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "pkg"))  # optional: `git archive c1fec45 spherepde | tar -x -C pkg`; else the installed package
import numpy as np

from spherepde.runs.ensemble import SPDEConfig, initial_density
from spherepde.validation.metrics import interaction_energy
from spherepde.grids.geometry import project_tangent

BETA = 1.0
DIRECTION = [0.48, 0.6, 0.64]
KAPPA0 = 10.0


def config(nlat=48, t_end=6.0, dt=0.01, seed=0):
    return SPDEConfig(grid="sphere", nlat=nlat, sigma_u=0.5, sigma_w=0.5, t_end=t_end, dt=dt,
                      initial={"kind": "vmf", "direction": DIRECTION, "concentration": KAPPA0},
                      energy_beta=BETA, seed=seed)


def rho0_fn(x):
    a = np.asarray(DIRECTION, float); a = a / np.linalg.norm(a)
    c = KAPPA0
    return c / (2 * math.pi * (1 - math.exp(-2 * c))) * np.exp(c * (x @ a - 1.0))


# ---- fast noise at scattered points -----------------------------------------------------
def _monomials(x, deg):
    X, Y, Z = x[:, 0], x[:, 1], x[:, 2]
    cols = []
    for a in range(deg + 1):
        for b in range(deg + 1 - a):
            for c in range(deg + 1 - a - b):
                cols.append((X ** a) * (Y ** b) * (Z ** c))
    return np.stack(cols, 1)


class FastNoise:
    """W(dt, x) = M(x) @ A @ (sqrt_c * dB): M the monomials of degree ≤ n_max (exact on S²:
    harmonics of degree ≤ n_max are restrictions of such polynomials)."""

    def __init__(self, noise, seed=1):
        self.noise = noise
        self.deg = noise.nmax
        rng = np.random.default_rng(seed)
        p = rng.standard_normal((4000, 3)); p /= np.linalg.norm(p, axis=1, keepdims=True)
        K = noise.n_coefficients
        # basis values Y_k(p): evaluate with one-hot coefficients (undo the sqrt_c scaling)
        Yk = np.empty((len(p), K))
        for k in range(K):
            xi = np.zeros(noise.shape); xi[k, 0] = 1.0 / noise.sqrt_c[k]
            noise._last_x = None
            Yk[:, k] = noise.values(xi, p)[:, 0]
        M = _monomials(p, self.deg)
        self.A, *_ = np.linalg.lstsq(M, Yk, rcond=None)
        q = rng.standard_normal((500, 3)); q /= np.linalg.norm(q, axis=1, keepdims=True)
        Yq = np.empty((len(q), K))
        for k in range(K):
            xi = np.zeros(noise.shape); xi[k, 0] = 1.0 / noise.sqrt_c[k]
            noise._last_x = None
            Yq[:, k] = noise.values(xi, q)[:, 0]
        self.fit_error = float(np.abs(_monomials(q, self.deg) @ self.A - Yq).max())

    def coef(self, dB):
        return self.A @ (self.noise.sqrt_c[:, None] * dB)  # (n_monomials, 3)

    def values(self, C, x):
        return _monomials(x, self.deg) @ C


def retract(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def heun(x, C, fn, f=None, h=0.0):
    """ParticleSDE heun step with the increment coefficients C (optional drift f(x))."""
    g0 = project_tangent(x, fn.values(C, x))
    if f is None:
        xp = retract(x + g0)
        g1 = project_tangent(xp, fn.values(C, xp))
        return retract(x + 0.5 * (g0 + g1))
    f0 = f(x)
    xp = retract(x + f0 * h + g0)
    f1 = f(xp)
    g1 = project_tangent(xp, fn.values(C, xp))
    return retract(x + 0.5 * (f0 + f1) * h + 0.5 * (g0 + g1))


def inverse_heun(y, C, fn, tol=1e-14, maxit=30):
    """x with heun(x) = y, by defect correction from the backward-Heun guess."""
    x = heun(y, -C, fn)
    for it in range(maxit):
        r = y - heun(x, C, fn)
        x = retract(x + r)
        if np.abs(r).max() < tol:
            break
    return x, it + 1


def energy_pairs(x, w, beta=BETA, block=256):
    """e^{-beta} E_beta = 1/2 sum w_i w_j (1 - e^{-beta |x_i - x_j|^2 / 2}), by coordinate differences
    and expm1 (no cancellation for close pairs; same quantity as metrics.interaction_energy)."""
    m = w > 1e-13 * w.max()
    x, w = x[m], w[m]
    tot = 0.0
    for s in range(0, len(x), block):
        d = x[s:s + block, None, :] - x[None, :, :]
        d2 = np.einsum("ijk,ijk->ij", d, d)
        tot += float(w[s:s + block] @ (-np.expm1(-0.5 * beta * d2)) @ w)
    return 0.5 * tot


def energy_slow(x, w, beta=BETA):
    m = w > 1e-13 * w.max()
    return interaction_energy(x[m], w[m], beta)


class Setup:
    def __init__(self, nlat=48, t_end=6.0, dt=0.01, seed=0, realisation=0):
        self.cfg = config(nlat, t_end, dt, seed)
        self.g = self.cfg.make_grid()
        self.noise = self.cfg.make_noise()
        self.path = self.cfg.make_path(self.noise, realisation)
        self.fn = FastNoise(self.noise)
        self.dt = dt
        self.nsteps = int(round(t_end / dt))
        self.out_every = max(1, int(round(0.25 / dt)))
        self._C = {}

    def C(self, k):
        if k not in self._C:
            self._C[k] = self.fn.coef(self.path.increment(k * self.dt, (k + 1) * self.dt))
        return self._C[k]

    def quadrature_particles(self, nlat=None):
        g = self.g if nlat is None else config(nlat).make_grid()
        rho = initial_density(config(g.nlat), g)
        x = g.xyz.reshape(-1, 3); w = (rho * g.cell_area).reshape(-1)
        keep = w > 1e-10 * w.max()
        return x[keep].copy(), w[keep] / w[keep].sum()


# ---- rotated, Schmidt-stretched lat-lon grid ---------------------------------------------
def rotation_to_pole(c):
    """Orthogonal R with R c = e_z."""
    c = c / np.linalg.norm(c)
    a = np.array([1.0, 0, 0]) if abs(c[0]) < 0.9 else np.array([0, 1.0, 0])
    e1 = a - (a @ c) * c; e1 /= np.linalg.norm(e1)
    e2 = np.cross(c, e1)
    return np.stack([e1, e2, c])


class AdaptedGrid:
    """nlat x 2 nlat cells: colatitude faces theta' = 2 atan(tan(s/2)/stretch) of uniform s, in the
    frame with its pole on `centre`.  Cells are exact spherical band x sector cells of that frame."""

    def __init__(self, centre, stretch, nlat=48):
        self.R = rotation_to_pole(np.asarray(centre, float))
        self.nlat, self.nlon = nlat, 2 * nlat
        s = np.linspace(0, math.pi, nlat + 1)
        th = 2 * np.arctan(np.tan(s / 2) / stretch); th[-1] = math.pi
        self.th_f = th
        self.dphi = 2 * math.pi / self.nlon
        self.ring_area = self.dphi * (np.cos(th[:-1]) - np.cos(th[1:]))
        self.area = np.repeat(self.ring_area, self.nlon)
        # area-centroid of each cell (direction of ∫x dA)
        thm = np.arccos(0.5 * (np.cos(th[:-1]) + np.cos(th[1:])))
        ph = (np.arange(self.nlon) + 0.5) * self.dphi
        T, P = np.meshgrid(thm, ph, indexing="ij")
        xp = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
        self.centres = xp @ self.R  # back to the world frame
        self.dtheta_pole = th[1]

    def index(self, x):
        xp = x @ self.R.T
        th = np.arccos(np.clip(xp[:, 2], -1, 1))
        j = np.clip(np.searchsorted(self.th_f, th, side="right") - 1, 0, self.nlat - 1)
        ph = np.mod(np.arctan2(xp[:, 1], xp[:, 0]), 2 * math.pi)
        i = np.minimum((ph / self.dphi).astype(int), self.nlon - 1)
        return j * self.nlon + i

    def deposit(self, x, w, centroid=False):
        """NGP deposit: cell masses (exactly Σw), and optionally the mass centroid per cell."""
        idx = self.index(x)
        m = np.bincount(idx, weights=w, minlength=self.nlat * self.nlon)
        if not centroid:
            return m, self.centres
        cx = np.stack([np.bincount(idx, weights=w * x[:, k], minlength=m.size) for k in range(3)], 1)
        pts = self.centres.copy()
        nz = m > 0
        pts[nz] = retract(cx[nz])
        return m, pts


def width_estimate(x, w):
    """rms chordal distance from the (normalised) mean direction and the mean direction."""
    mvec = (w[:, None] * x).sum(0)
    r = np.linalg.norm(mvec) / w.sum()
    return math.sqrt(max(2 * (1 - r), 1e-300)), mvec / np.linalg.norm(mvec)


def stretch_for(width, nlat, cells_per_width):
    """Schmidt factor c with `cells_per_width` pole cells across one rms width: Δθ'_pole ≈ Δs/c."""
    ds = math.pi / nlat
    return max(1.0, cells_per_width * ds / width)


def energy_moments(x, w, beta=BETA, nmax=None):
    """The same E by moments: sum_ij w_i w_j e^{beta<x_i,x_j>} = sum_alpha beta^|alpha| / alpha! (sum_i w_i x_i^alpha)^2,
    O(N n_max^2) — exact to round-off for beta = 1 with n_max = 30 (remainder beta^31/31!)."""
    from math import lgamma, exp
    nmax = nmax or int(30 + 3 * beta)
    X, Y, Z = x[:, 0], x[:, 1], x[:, 2]
    px = [np.ones_like(X)]; py = [np.ones_like(Y)]; pz = [np.ones_like(Z)]
    for n in range(nmax):
        px.append(px[-1] * X); py.append(py[-1] * Y); pz.append(pz[-1] * Z)
    S = 0.0
    for n in range(nmax + 1):
        for a in range(n + 1):
            wa = w * px[a]
            for b in range(n + 1 - a):
                c = n - a - b
                M = float((wa * py[b]) @ pz[c])
                S += exp(n * math.log(beta) - beta - lgamma(a + 1) - lgamma(b + 1) - lgamma(c + 1)) * M * M if beta != 1 else \
                    exp(-1.0 - lgamma(a + 1) - lgamma(b + 1) - lgamma(c + 1)) * M * M
    return 0.5 * (w.sum() ** 2 - S)


def energy(x, w, beta=BETA):
    return energy_moments(x, w, beta)
