"""Issue 20 prototype (not in the package): ``spherepde run`` with the amr reconstruction's slopes
central (the mean of the forward and backward difference quotients), scaled down per leaf only as
far as keeps the reconstruction ≥ 0 at every face point of the leaf (Zhang–Shu: positivity
only, no clipping at smooth extrema), so a zero-mass leaf sends nothing and the positivity bound
of the step stays finite.  The question:
does the MC limiter's clipping at smooth extrema (first order there) hold mass on the separatrix
y = 0 between the two metastable clusters, the band that carries the `--refine 1.5` change of
W₂ at β = 1000 (README.md)?

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python3 docs/prototypes/issue20/w2_change/run_limiter.py \\
        run examples/metastability.toml --set ... --output DIR
"""
from __future__ import annotations

import sys

from spherepde.cli import main
import numpy as np

from spherepde.solvers.eulerian import amr
from spherepde.solvers.eulerian.amr_mesh import FaceMesh

_slopes = FaceMesh.slopes


def central(forward, backward):
    return 0.5 * (forward + backward)


def slopes(self, rho, limiter):
    """Central slopes (n, 2), each leaf's scaled by θ = min(1, ρ / max_faces(−s·offset))."""
    s = _slopes(self, rho, central)
    low = np.zeros(self.n)  # the most negative change s·offset over each leaf's face points
    np.minimum.at(low, self.fa, np.sum(s[self.fa] * self.off_a, 1))
    np.minimum.at(low, self.fb, np.sum(s[self.fb] * self.off_b, 1))
    theta = np.where(low < 0, np.minimum(1.0, rho / np.where(low < 0, -low, 1.0)), 1.0)
    return s * theta[:, None]


FaceMesh.slopes = slopes  # every limiter name: the run pipeline's default "mc" included
if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
