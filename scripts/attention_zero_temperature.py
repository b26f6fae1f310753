"""The zero-temperature (β = ∞) check that docs/attention.md quotes: the density solver
``meanfield-ffsl`` against the exact solution by characteristics (``validation/exact.py``),
written to ``docs/data/attention_zero_temperature.json``.

    python scripts/attention_zero_temperature.py [--nlat 16 32 64]

Set-up: Q = I, B = diag(0.5, 1, 1), V = diag(1, 0.8, 0.2), β = ∞ (velocity P_x V Bᵀx/|Bᵀx|),
ρ₀ = 1 + 0.8·exp(−4(1 − ⟨x, b⟩)) with b at latitude 10°, longitude −30° (the smooth density of
tests/solvers/test_meanfield.py), t = 1, the stepper's defaults (Courant 0.8, polar cap).  The
exact field is the cell average (2×2 Gauss rule) of the characteristics solution (RK4, 40 steps).
Stored per nlat: the Williamson-normalised l1, l2, l∞ errors and the mass error; the fitted
orders (least squares of log error against log nlat, with standard errors).  Under a minute.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.grids import GaussGrid  # noqa: E402
from spherepde.solvers import make_stepper  # noqa: E402
from spherepde.solvers.controller import Controller  # noqa: E402
from spherepde.validation.exact import ZeroTemperatureFlow, characteristics_solution  # noqa: E402
from spherepde.validation.fits import fit_order  # noqa: E402
from spherepde.validation.transport_cases import error_norms  # noqa: E402

B = np.diag([0.5, 1.0, 1.0])
V = np.diag([1.0, 0.8, 0.2])
LAT, LON = math.radians(10.0), math.radians(-30.0)
BUMP = np.array([math.cos(LAT) * math.cos(LON), math.cos(LAT) * math.sin(LON), math.sin(LAT)])
T_END = 1.0


def rho0(X):
    return 1.0 + 0.8 * np.exp(-4.0 * (1.0 - X @ BUMP))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nlat", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--out", default=str(ROOT / "docs" / "data" / "attention_zero_temperature.json"))
    args = ap.parse_args(argv)
    att = Attention(np.eye(3), B, V, math.inf)
    flow = ZeroTemperatureFlow(att.B, att.V)
    rows = []
    start = time.perf_counter()
    for nlat in args.nlat:
        t0 = time.perf_counter()
        g = GaussGrid(nlat)
        r0 = g.cell_average(rho0, 2)
        exact = g.cell_average(lambda X: characteristics_solution(flow, rho0, X, T_END, steps=40), 2)
        stepper = make_stepper("meanfield-ffsl", g, DensityAttention(att, g))
        out = Controller(stepper).run(r0, (0.0, T_END))
        norms = error_norms(g, out.state, exact)
        rows.append({"nlat": nlat, "l1": norms["l1"], "l2": norms["l2"], "linf": norms["linf"],
                     "relative_mass_error": float(abs(g.integrate(out.state) - g.integrate(r0))
                                                  / g.integrate(r0)),
                     "seconds": round(time.perf_counter() - t0, 2)})
        print(rows[-1], flush=True)
    nl = [r["nlat"] for r in rows]
    orders = {}
    for norm in ("l1", "l2", "linf"):  # error against h ∝ 1/nlat: order = −slope in nlat
        slope, se = fit_order(nl, [r[norm] for r in rows])
        orders[norm] = {"order": -slope, "stderr": se}
    data = {"script": "scripts/attention_zero_temperature.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "setup": "Q = I, B = diag(0.5, 1, 1), V = diag(1, 0.8, 0.2), beta = inf, "
                     "rho0 = 1 + 0.8 exp(-4(1 - <x, b>)), b at (10N, 30W), t = 1, meanfield-ffsl defaults; "
                     "exact: characteristics (RK4, 40 steps), "
                     "2x2 Gauss cell averages",
            "t_end": T_END, "rows": rows, "orders": orders,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": round(time.perf_counter() - start, 1), "load_after": list(os.getloadavg())}
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
