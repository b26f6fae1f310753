"""Issue 20 prototype (not in the package): ``spherepde run`` with the amr stepper's two
options that the run configuration does not reach, set on the command line: the positivity
factor ``courant`` of its (sub-)steps (AMRDensity default 0.5: dt·outflow_i ≤ courant·m_i at the
first stage, so the sub-step follows the leaves) and the attention sums' tolerance ``tol``
(default 1e-8).  ``stepping.courant`` of the configuration sets only the outer step
(courant·Δlon/‖V‖₂ of the output grid), which amr splits into sub-steps within its bound.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python3 run_amr_opts.py COURANT TOL run CONFIG ... --output DIR
"""
from __future__ import annotations

import functools
import sys

from spherepde.cli import main
from spherepde.solvers.eulerian import amr


def _patch(courant: float, tol: float) -> None:
    init = amr.AMRDensity.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        kwargs["courant"], kwargs["tol"] = courant, tol
        init(self, *args, **kwargs)

    amr.AMRDensity.__init__ = __init__


if __name__ == "__main__":
    _patch(float(sys.argv[1]), float(sys.argv[2]))
    raise SystemExit(main(sys.argv[3:]))
