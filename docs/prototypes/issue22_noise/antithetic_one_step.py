"""How often does one antithetic pair pass test_ensemble's one-step check (pair mean's change
< 1/3 of one path's change, max norm) on its S¹ set-up, over noise seeds 0..N−1, for Δt = 0.05
(the test's step before issue 22.10) and 0.01?  Writes antithetic_one_step.json beside this file.

    PYTHONPATH=. python docs/prototypes/issue22_noise/antithetic_one_step.py [N]
"""
import json
import sys
from pathlib import Path

import numpy as np

from spherepde.runs.build import build
from spherepde.runs.config import RunConfig

CIRCLE = {"grid": {"kind": "circle", "n": 32},
          "initial": {"kind": "vmf", "centres": [[1.0, 0.0]], "kappas": [2.0]},
          "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5,
                                 "variance_fraction": 0.999, "seed": 0, "antithetic": True}},
          "representations": {"density": True},
          "stepping": {"t_end": 0.05, "dt": 0.05, "output_every": 0.05},
          "outputs": {"diagnostics": ["mass"]}}


def ratio(seed: int, dt: float) -> float:
    rho = []
    for r in (0, 1):
        raw = json.loads(json.dumps(CIRCLE))
        raw["dynamics"]["noise"].update(seed=seed, realisation=r)
        raw["stepping"].update(t_end=dt, dt=dt, output_every=dt)
        m = build(RunConfig.from_dict(raw))
        rho.append(m.density.step(m.rho0.copy(), 0.0, dt))
    rho0 = build(RunConfig.from_dict(CIRCLE)).rho0
    one = np.abs(rho[0] - rho0).max()
    pair = np.abs(0.5 * (rho[0] + rho[1]) - rho0).max()
    return float(pair / one)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    out = {"what": __doc__.split("\n\n")[0], "seeds": n}
    for dt in (0.05, 0.01):
        r = [ratio(s, dt) for s in range(n)]
        out[f"dt={dt}"] = {"pair_over_one": r, "fraction_below_one_third": float(np.mean(np.array(r) < 1 / 3)),
                           "seed0": r[0], "max": max(r)}
    (Path(__file__).parent / "antithetic_one_step.json").write_text(json.dumps(out, indent=1))
    print({k: v for k, v in out.items() if k.startswith("dt")} and
          {k: (v["fraction_below_one_third"], v["seed0"], v["max"]) for k, v in out.items() if k.startswith("dt")})


if __name__ == "__main__":
    main()
