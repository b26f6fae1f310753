"""Issue 20 prototype: refine where the attention goes, not only where the mass is.

With K ≠ I the softmax weight of a token at x peaks at y ∝ Bᵀ-rotated directions away from x,
so a little mass far from the clusters can steer them (measured on the demo's amr run at
t = 12: leaves below the finest level hold 1.9 % of the mass and receive 44 % of the
mass-weighted attention).  The amr criterion splits a leaf holding more than m_split; here a leaf
also splits when the attention it receives,

    R_j = Σ_i m_i a_ij,   a_ij = m_j e^{β⟨Qx_i, Kx_j⟩} / Σ_k m_k e^{β⟨Qx_i, Kx_k⟩}   (Σ_j R_j = 1),

exceeds m_split (``AMRDensity`` adapt passes with ``indicator`` = R).  R is a dense numpy sum
here (the prototype; O(n²) per adapt pass).

    python3 attention_refine.py OUT.json MODE:NLAT0:LMAX:DT[:R_FACTOR] ...   # MODE mass | attention | hybrid-attention
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from hybrid import HybridAMR, demo_attention, rho0

from spherepde.dynamics.energy import scaled_interaction_energy
from spherepde.grids import GaussGrid
from spherepde.solvers.eulerian.amr import AMRDensity
from spherepde.solvers.eulerian.amr_adapt import adapt


def received(att, x, m, block=1024):
    """R (n,): the mass-weighted softmax weight each of the weighted points (x, m) receives
    from all of them."""
    B = att.beta * (np.asarray(att.Q).T @ np.asarray(att.K))
    logm = np.log(np.maximum(m, 1e-300))
    R = np.zeros(m.size)
    for s in range(0, m.size, block):
        L = (x[s:s + block] @ B) @ x.T + logm[None, :]
        L -= L.max(1, keepdims=True)
        a = np.exp(L)
        a /= a.sum(1, keepdims=True)
        R += m[s:s + block] @ a
    return R


class _IndicatorRefined:
    """The amr sub-step's end (AMRDensity._finish_substep) with the adapt pass flagging leaves by
    max(m, R): ``indicator(mesh, m, t)`` gives (R (n,), the split mass it is compared with)."""

    def _finish_substep(self, mesh, m, steps, t, regrid=False):
        if np.any(m < 0):
            raise RuntimeError("negative mass")
        steps += 1
        if regrid or steps % self.regrid_every == 0:
            R, m_split = self.indicator(mesh, m, t)
            new = adapt(mesh, m, m_split, self._limit, self.max_cells, indicator=R)
            if new is not None:
                self._mesh = mesh = self._mesh_cls(self.nlat0, self.lmax, new[0])
                return mesh, new[1], steps, True
        return mesh, m, steps, False


class AttentionRefined(_IndicatorRefined, AMRDensity):
    #: a leaf splits when the attention it receives exceeds m_split / R_FACTOR
    R_FACTOR = 1.0

    def indicator(self, mesh, m, t):
        total = float(m.sum())
        return received(self.velocity, mesh.xc, m) * total * self.R_FACTOR, self.m_split * total


class HybridRefined(_IndicatorRefined, HybridAMR):
    """HybridAMR (collapsed clusters as points) refined by the attention the leaves receive from
    leaves and points."""

    def indicator(self, mesh, m, t):
        xa = self.atoms_at(t)
        R = received(self.velocity, np.concatenate([mesh.xc, xa]), np.concatenate([m, self.W]))[:m.size]
        return R, self.m_split


def run(mode, nlat0, lmax, dt, mpc=0.83, t_end=18.0, every=0.5):
    att = demo_attention()
    cls = {"attention": AttentionRefined, "mass": AMRDensity, "hybrid-attention": HybridRefined}[mode]
    kw = {"conv": 10.0} if mode == "hybrid-attention" else {}
    st = cls(att, GaussGrid(nlat0), nlat0=nlat0, lmax=lmax, mass_per_cell=mpc, max_cells=200000, **kw)
    s = st.initial_state(rho0)
    rows, t, c0 = [], 0.0, time.process_time()
    n_out, n_end = round(every / dt), round(t_end / dt)
    for k in range(n_end + 1):
        if k % n_out == 0:
            x, w = st.measure(s)
            rows.append({"t": round(t, 10), "energy": scaled_interaction_energy(x, w, att.beta),
                         "dist_V": float(np.sqrt(np.sum(w * (x[:, 1] ** 2 + x[:, 2] ** 2)) / w.sum())),
                         "mass_error": float(w.sum() - 1), "leaves": int(s[0, 0])})
            print(mode, nlat0, lmax, rows[-1], flush=True)
        if k == n_end:
            break
        s = st.step_all(s, t, dt) if mode == "hybrid-attention" else st.step(s, t, dt)
        t = (k + 1) * dt
    return {"mode": mode, "nlat0": nlat0, "lmax": lmax, "mass_per_cell": mpc, "dt": dt,
            "cpu_s": time.process_time() - c0, "rows": rows}


if __name__ == "__main__":
    out, res = sys.argv[1], []
    for spec in sys.argv[2:]:
        mode, n0, lm, dt, *rf = spec.split(":")
        AttentionRefined.R_FACTOR = float(rf[0]) if rf else 1.0
        res.append(run(mode, int(n0), int(lm), float(dt)))
        res[-1]["r_factor"] = AttentionRefined.R_FACTOR
        json.dump({"script": "docs/prototypes/issue20/hybrid/attention_refine.py", "runs": res},
                  open(out, "w"), indent=1)
