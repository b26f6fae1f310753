"""Issue 20 prototype: adaptive finite volumes whose collapsed clusters become weighted points.

Candidate.  Once an attention cluster (or a cluster of the common-noise collapse) is narrower
than a few finest cells, the grid can only smear it (the limiter's numerical diffusion of a
moving narrow cluster: docs/amr.md), while the exact dynamics keep contracting it towards a
Dirac mass.  Weighted points follow a contracting flow without error beyond the time step.
So: the amr-fv density (:class:`~spherepde.solvers.eulerian.amr.AMRDensity`) plus weighted
points ("atoms"); after each step, every finest-level leaf holding more than m_conv = ``conv`` ×
m_split (the amr split threshold mass_per_cell·h², total mass 1) becomes four points of a
quarter of its mass each at (λ_c ± a_λ, φ_c ± a_φ), a = (leaf width)/√12 (the uniform in-cell
second moments), and its mass is set to 0.  Mass moves between two arrays, so it is exact; the
points are moved by the same velocity formula as the leaves (``attention.mean_and_stats`` with
leaves and atoms as the sources, then ``velocity_from_mean``).

Coupling over a step [t, t + Δt]: V₀ = X[leaves(t) + atoms(t)] at the atoms; the grid steps with
the atoms as sources at the predicted positions x_a + (t' − t)V₀ (normalised); the atoms then take
Heun's step x₁ = x + ΔtV₀, V₁ = X[leaves(t + Δt) + atoms x₁](x₁), x ← x + Δt(V₀ + V₁)/2,
normalised.

The measure of the whole state is leaves (centres, masses) ∪ atoms; diagnostics here are
computed from it: e^{−β}E_β (spherepde.dynamics.energy) and the distance to V's top eigenspace.

    python3 hybrid.py demo OUT.json CONV:NLAT0:LMAX:DT[:AMPLITUDE[:EPS]] ...   # the demo (β = 30, to t = 18);
                                                              # CONV inf: amr without points; appends to OUT
    python3 hybrid.py sync-path CONV OUT.json [validate sync-path options]   # the noise collapse
"""
from __future__ import annotations

import json
import math
import sys
import time

import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.dynamics.energy import scaled_interaction_energy
from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.solvers.eulerian.amr import AMRDensity
from spherepde.solvers.lagrangian.remap import deposit_on_grid


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class HybridAMR(AMRDensity):
    """AMRDensity plus atoms (positions ``X`` (p, 3), masses ``W`` (p,))."""

    def __init__(self, *a, conv: float = math.inf, **k):
        super().__init__(*a, **k)
        self.m_conv = conv * self.m_split  # total mass 1
        self.X, self.W = np.zeros((0, 3)), np.zeros(0)
        self._pred = None  # (t0, X0, V0): atoms' predicted positions during the grid step

    def atoms_at(self, t):
        if self._pred is None or not self.W.size:
            return self.X
        t0, X0, V0 = self._pred
        return _unit(X0 + (t - t0) * V0)

    def velocity_at(self, targets, xl, ml, xa):
        src = np.concatenate([xl, xa]) if xa.size else xl
        w = np.concatenate([ml, self.W]) if self.W.size else ml
        mean, _ = self.velocity.mean_and_stats(targets, src, w, method=self.method, tol=self.tol)
        return self.velocity.velocity_from_mean(targets, mean)

    def leaf_velocity(self, mesh, m, t, u=None):
        if not self.W.size or self.velocity is None:
            return super().leaf_velocity(mesh, m, t, u)
        return self.velocity_at(mesh.xc, mesh.xc, m, self.atoms_at(t))

    def step_all(self, state, t, dt):
        mesh, m, _ = self.unpack(state)
        if self.W.size:
            V0 = self.velocity_at(self.X, mesh.xc, m, self.X)
            self._pred = (t, self.X.copy(), V0)
        state = self.step(state, t, dt)
        if self.W.size:
            mesh, m, _ = self.unpack(state)
            X1 = _unit(self.X + dt * V0)
            V1 = self.velocity_at(X1, mesh.xc, m, X1)
            self.X = _unit(self.X + 0.5 * dt * (V0 + V1))
            self._pred = None
        return self.convert(state)

    def convert(self, state):
        mesh, m, steps = self.unpack(state)
        big = (mesh.level == mesh.lmax) & (m > self.m_conv)
        if not big.any():
            return state
        i = np.flatnonzero(big)
        al = (mesh.lon1[i] - mesh.lon0[i]) / math.sqrt(12)
        ap = (mesh.lat1[i] - mesh.lat0[i]) / math.sqrt(12)
        pts = [lonlat_to_xyz(mesh.lonc[i] + sl * al, mesh.latc[i] + sp * ap)
               for sl in (-1, 1) for sp in (-1, 1)]
        self.X = np.concatenate([self.X] + pts)
        self.W = np.concatenate([self.W] + [0.25 * m[i]] * 4)
        m = m.copy()
        m[i] = 0.0
        return self.pack(mesh.leaves, m, steps)

    # ---- common noise without attention, through the run pipeline ------------------------
    # (the atoms live on the stepper, not in the state array: enough for one straight run)
    def step(self, state, t, dt):
        if self.noise is None or self.velocity is not None:
            return super().step(state, t, dt)
        if self.W.size:  # Heun with the step's frozen noise velocity ΔW/Δt, as the leaves
            coef = np.asarray(self.path.increment(t, t + dt), float) / dt
            U0 = self.noise.tangent_values(coef, self.X)
            X1 = _unit(self.X + dt * U0)
            self.X = _unit(self.X + 0.5 * dt * (U0 + self.noise.tangent_values(coef, X1)))
        return self.convert(super().step(state, t, dt))

    def measure(self, state):
        """Leaves (centres, masses) and the points."""
        xl, ml = super().measure(state)
        return (np.concatenate([xl, self.X]), np.concatenate([ml, self.W])) if self.W.size else (xl, ml)

    def mass(self, state):
        return super().mass(state) + float(self.W.sum())

    def field(self, state):
        out = super().field(state)
        if self.W.size:  # each point's mass into the output cell that holds it
            out += deposit_on_grid(self.output_grid, self.X, self.W)
        return out


def sync_path(conv, out, *cli):
    """``spherepde validate sync-path --scheme amr`` with this stepper (points above conv·m_split)."""
    import contextlib
    import io

    import spherepde.runs.build as build

    class Stepper(HybridAMR):
        def __init__(self, *a, **k):
            super().__init__(*a, conv=conv, **k)

    build.AMRDensity = Stepper
    from spherepde.cli import main as cli_main

    args = ["validate", "sync-path", "--json", "--scheme", "amr", *cli]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli_main(args)
    data = {"script": "docs/prototypes/issue20/hybrid/hybrid.py", "conv": conv,
            "command": "spherepde " + " ".join(a for i, a in enumerate(args)
                                               if a != "--output" and (i == 0 or args[i - 1] != "--output")),
            **json.loads(buf.getvalue())}
    with open(out, "w") as f:
        json.dump(data, f, indent=1)


def demo_attention():
    Q = np.eye(3)
    K = np.diag([0.1, 1, 1])
    V = np.diag([1, 0.5, 0.1])
    return Attention(Q, K, V, beta=30.0)


#: a fixed direction for the generic perturbation of ρ₀ (seed 0)
_U = _unit(np.random.default_rng(0).standard_normal((1, 3)))[0]


def rho0(x, amplitude=0.5, eps=0.0):
    """The demo's ρ₀ ∝ 1 + amplitude·⟨x, a⟩, a ∝ (0.6, 0.5, 0.3), times 1 + eps·cos(3⟨x, u⟩ + 1)
    (a generic perturbation: u a fixed random direction)."""
    a = np.array([0.6, 0.5, 0.3])
    return (1 + amplitude * x @ (a / np.linalg.norm(a))) * (1 + eps * np.cos(3 * x @ _U + 1))


def run(conv, nlat0=24, lmax=2, mpc=0.83, t_end=18.0, dt=0.1, every=0.5, amplitude=0.5, eps=0.0):
    att = demo_attention()
    st = HybridAMR(att, GaussGrid(nlat0), nlat0=nlat0, lmax=lmax, mass_per_cell=mpc, conv=conv,
                   max_cells=200000)
    s = st.initial_state(lambda x: rho0(x, amplitude, eps))
    rows, t, c0 = [], 0.0, time.process_time()
    n_out = round(every / dt)
    for k in range(round(t_end / dt) + 1):
        if k % n_out == 0:
            x, w = st.measure(s)
            rows.append({"t": round(t, 10), "energy": scaled_interaction_energy(x, w, att.beta),
                         "dist_V": float(np.sqrt(np.sum(w * (x[:, 1] ** 2 + x[:, 2] ** 2)) / w.sum())),
                         "mass_error": float(w.sum() - 1), "atoms": int(st.W.size),
                         "atom_mass": float(st.W.sum()), "leaves": int(s[0, 0])})
            print(conv, nlat0, lmax, rows[-1], flush=True)
        if k == round(t_end / dt):
            break
        s = st.step_all(s, t, dt)
        t = (k + 1) * dt
    return {"conv": conv if math.isfinite(conv) else None, "nlat0": nlat0, "lmax": lmax, "mass_per_cell": mpc,
            "dt": dt, "amplitude": amplitude, "eps": eps, "cpu_s": time.process_time() - c0, "rows": rows}


if __name__ == "__main__" and sys.argv[1] == "sync-path":
    sync_path(float(sys.argv[2]), sys.argv[3], *sys.argv[4:])
elif __name__ == "__main__":
    out, specs = sys.argv[2], sys.argv[3:]
    try:  # runs already in OUT are kept (one data file from several invocations)
        with open(out) as f:
            res = json.load(f)["runs"]
    except FileNotFoundError:
        res = []
    for spec in specs:  # conv:nlat0:lmax:dt[:amplitude[:eps]]
        cv, n0, lm, dt, *more = spec.split(":")
        amp, eps = (list(map(float, more)) + [0.5, 0.0][len(more):])[:2]
        res.append(run(float(cv), int(n0), int(lm), dt=float(dt), amplitude=amp, eps=eps))
        with open(out, "w") as f:
            json.dump({"script": "docs/prototypes/issue20/hybrid/hybrid.py", "runs": res}, f, indent=1)
