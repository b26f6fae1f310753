"""The sampling error of every particle diagnostic at the particle counts of the examples and
the demo, at t = 0: what one run's particle numbers can be trusted to, before any dynamics.

For each configuration (the demo's and every example with particles), the N particles are drawn
from ρ_0 with ``--seeds`` different seeds (``representations.particles.seed`` = 0, 1, …) and
every diagnostic the configuration writes for them is evaluated on the draw
(:func:`spherepde.runs.outputs.measure_diagnostics`, the functions run.nc is written with).
Reported per diagnostic: the mean and the standard deviation over the seeds (the sampling
error of one run at this N, with its own relative uncertainty ≈ 1/sqrt(2(S−1))), and where
there is a density, its value on ρ_0 and the bias (mean − density value) with its standard
error std/sqrt(S).  W₂ between the particles and ρ_0 (chordal) is the sampling distance
itself.  The dynamics may amplify these errors later (a cluster whose share of particles is
off by the sampling error of its weight stays off); the figures of Paper 1 in docs/ show
that over time.

    python3 scripts/particle_sampling_error.py [--seeds 8] [--out docs/data/particle_sampling_error.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from spherepde import __version__  # noqa: E402
from spherepde.experiments.demo import DEMO  # noqa: E402
from spherepde.runs.build import build  # noqa: E402
from spherepde.runs.config import RunConfig, apply_set, read_raw  # noqa: E402
from spherepde.runs.outputs import evaluate, measure_diagnostics, particle_weights  # noqa: E402
from spherepde.validation.metrics import as_measure, w2_with_bound  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def configurations() -> dict:
    """name -> raw configuration: the demo and every example with particles."""
    out = {"demo": DEMO}
    for path in sorted((ROOT / "examples").glob("*.toml")):
        raw = read_raw(path)
        reps = raw.get("representations", {})
        if isinstance(reps.get("particles"), dict):
            out[path.stem] = raw
    return out


def measure(raw: dict, seeds: int) -> dict:
    rows: dict[str, list[float]] = {}
    density: dict[str, float] = {}
    n = None
    for s in range(seeds):
        config = RunConfig.from_dict(apply_set(raw, f"representations.particles.seed={s}"))
        model = build(config)
        assert model.particle_rep is not None
        x0 = model.particle_rep.x0
        n = x0.shape[0]
        w = particle_weights(model, n)
        values = evaluate(measure_diagnostics(model, model.particle_rep), x0, w)
        if model.grid is not None and model.rho0 is not None:
            xd, wd = as_measure(model.grid, np.clip(model.rho0, 0.0, None))
            values["w2_particles_density"] = float(w2_with_bound(x0, w, xd, wd).value)
            if not density and config.representations.density:
                density = {k: float(v) for k, v in
                           evaluate(measure_diagnostics(model), xd, wd).items()
                           if np.ndim(v) == 0}
        for k, v in values.items():
            if np.ndim(v) == 0:
                rows.setdefault(k, []).append(float(v))
    out = {"n": n, "seeds": seeds, "diagnostics": {}}
    for k, v in rows.items():
        a = np.asarray(v)
        entry = {"mean": float(a.mean()), "std": float(a.std(ddof=1)),
                 "std_relative": float(a.std(ddof=1) / abs(a.mean())) if a.mean() != 0 else math.nan}
        base = k[len("particles_"):] if k.startswith("particles_") else None
        if base == "w2_projection_rho0":
            base = "w2_projection"  # the density's is to its own Π#ρ₀ = the same target
        if base in density:
            entry["density"] = density[base]
            entry["bias"] = float(a.mean() - density[base])
            entry["bias_se"] = float(a.std(ddof=1) / math.sqrt(a.size))
        out["diagnostics"][k] = entry
    return out


def _g(v: float) -> str:
    return f"{v:.2g}".replace("e-0", "e-").replace("-", "−")


def markdown_table(result: dict) -> str:
    """The table of docs/usage.md, from the measured numbers (rendered there by
    scripts/docs_numbers.py)."""
    lines = ["| configuration | N | diagnostic | on ρ₀ (density) | mean of the draws | std of one draw | "
             "bias ± SE |", "|---|---|---|---|---|---|---|"]
    for name, c in result["configurations"].items():
        for k, v in c["diagnostics"].items():
            dens = f"{v['density']:.4g}" if "density" in v else "–"
            bias = f"{_g(v['bias'])} ± {_g(v['bias_se'])}" if "bias" in v else "–"
            lines.append(f"| {name} | {c['n']} | `{k}` | {dens} | {v['mean']:.4g} | {_g(v['std'])} "
                         f"({100 * v['std_relative']:.2g} %) | {bias} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--out", default=str(ROOT / "docs" / "data" / "particle_sampling_error.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    result = {"script": "scripts/particle_sampling_error.py", "version": __version__,
              "python": platform.python_version(), "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "seeds": args.seeds, "configurations": {}}
    for name, raw in configurations().items():
        result["configurations"][name] = measure(raw, args.seeds)
        print(f"{name}: N = {result['configurations'][name]['n']}", file=sys.stderr)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["markdown_table"] = markdown_table(result)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
