"""Issue 20 prototype (not in the package): ``spherepde run`` with the amr mesh also resolving
the attention kernel wherever there is mass.

The tail study (../tail/README.md) found that at β ≥ 1000 the far tail (0.1–0.4 % of the mass,
30–46 % of W₂²) attends to itself inside base cells wider than the kernel (β·h² = 10–100), so
its motion follows the base grid, and mass-based refinement never reaches it.  Criterion added
here: every leaf that holds more than FLOOR·m_split (or touches such a leaf) is refined until
its latitude width h has β‖QᵀK‖₂·h² ≤ C; the mass criterion refines further as before.  It goes
through ``amr_adapt.adapt(..., indicator=I)`` (leaves flagged by max(m, I)):

    I_j = 2·m_split    if leaf j is occupied and β‖B‖h_j² > C            (split)
        = m_split/4    if occupied, β‖B‖h_j² ≤ C but β‖B‖(2h_j)² > C    (kept: no merge back)
        = 0            otherwise                                         (the mass decides)

``--refine F`` of the run pipeline scales the base grid and the split mass; pass C/F² for the
refined run (the prototype cannot see F).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python3 docs/prototypes/issue20/w2_change/run_kernel_floor.py \\
        C FLOOR run examples/metastability.toml --set ... --output DIR
"""
from __future__ import annotations

import sys

import numpy as np

from spherepde.cli import main
from spherepde.solvers.eulerian import amr

_adapt = amr.adapt
_init = amr.AMRDensity.__init__
#: C, FLOOR and β‖QᵀK‖₂ of the stepper built last
SETTINGS = {"C": 2.5, "FLOOR": 1e-3, "beta_b": 0.0}


def __init__(self, velocity, *args, **kw):
    _init(self, velocity, *args, **kw)
    Q, K = np.asarray(velocity.Q, float), np.asarray(velocity.K, float)
    SETTINGS["beta_b"] = float(velocity.beta) * float(np.linalg.norm(Q.T @ K, 2))


def indicator(mesh, m: np.ndarray, m_split: float) -> np.ndarray:
    """I (n,) of the module docstring for the leaves of ``mesh`` with masses m (n,)."""
    c = SETTINGS["C"]
    occ = m > SETTINGS["FLOOR"] * m_split
    near = occ.copy()
    np.logical_or.at(near, mesh.fa, occ[mesh.fb])
    np.logical_or.at(near, mesh.fb, occ[mesh.fa])
    bh2 = SETTINGS["beta_b"] * (mesh.lat1 - mesh.lat0) ** 2
    return np.where(near, np.where(bh2 > c, 2.0 * m_split, np.where(4 * bh2 > c, m_split / 4, 0.0)), 0.0)


def adapt(mesh, m, m_split, limiter, capacity, indicator_=None):
    return _adapt(mesh, m, m_split, limiter, capacity, indicator=indicator(mesh, m, m_split))


def install(c: float, floor: float) -> None:
    """Make every AMRDensity built from now on refine by the kernel floor (C, FLOOR)."""
    SETTINGS.update(C=c, FLOOR=floor)
    amr.adapt = adapt
    amr.AMRDensity.__init__ = __init__


if __name__ == "__main__":
    install(float(sys.argv.pop(1)), float(sys.argv.pop(1)))
    raise SystemExit(main(sys.argv[1:]))
