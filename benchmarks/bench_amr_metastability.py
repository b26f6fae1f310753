"""Accuracy and cost of the adaptive density (``amr-fv``) against the fixed-grid ``ffsl-ppm`` on
Paper 1's metastability set-up at β = 100, both checked against the particle reference
(tests/data/particles_metastability_beta100.json: N = 20 000, 8 seeds, mean ± SE).

Each configuration runs once, single-threaded, from t = 0 to ``--t-end`` with outputs every
``--every``; the energy e^{−β}E_β (spherepde.validation.metrics.interaction_energy) of the
density's weighted points — the AMR leaves (centres, masses), the Gauss cells (centres,
ρ·area) — is compared with the reference at each output time.  Cost: process CPU seconds and
wall seconds of the stepping alone (diagnostics excluded), cells and steps.

    python benchmarks/bench_amr_metastability.py amr:32:4:26.56 ffsl:32 ffsl:48 ffsl:64 [--t-end 12] [--out PATH]

``amr:NLAT0:LMAX:MASS_PER_CELL`` (output grid nlat 32) and ``ffsl:NLAT`` (the package's run
pipeline stepper, ``meanfield-ffsl`` with its defaults and fixed step).  Results are merged by
configuration into ``--out`` (default benchmarks/results/amr_metastability.json); give every
configuration to compare in one command, so they run side by side on the same machine state.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from spherepde.grids import GaussGrid  # noqa: E402
from spherepde.runs.build import build  # noqa: E402
from spherepde.runs.config import RunConfig, apply_set, read_raw  # noqa: E402
from spherepde.solvers.controller import Controller  # noqa: E402
from spherepde.solvers.eulerian.amr import AMRDensity  # noqa: E402
from spherepde.validation.metrics import interaction_energy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "particles_metastability_beta100.json"


def _config(nlat: int, t_end: float, every: float) -> RunConfig:
    raw = read_raw(ROOT / "examples" / "metastability.toml")
    for s in (f"grid.nlat={nlat}", "dynamics.attention.beta=100.0", f"stepping.t_end={t_end}",
              f"stepping.output_every={every}"):
        raw = apply_set(raw, s)
    return RunConfig.from_dict(raw)


class _Energy:
    """Tracker-like callback: the energy at output times of a weighted-point view of the state."""

    def __init__(self, points, beta):
        self.points, self.beta, self.rows, self.seconds = points, beta, [], 0.0

    def record(self, state, t, extra):
        t0 = time.perf_counter()
        x, w = self.points(state)
        self.rows.append({"t": float(t), "energy": float(interaction_energy(x, w, self.beta)),
                          "mass_error": float(w.sum() - 1.0), "min_mass": float(w.min()), **extra(state)})
        self.seconds += time.perf_counter() - t0


def _run(stepper, state0, times, dt, points, extra, beta):
    """Run output interval by output interval (the controller's even split hits each output
    time anyway), timing only the stepping."""
    rec = _Energy(points, beta)
    rec.record(state0, 0.0, extra)
    ctl = Controller(stepper, dt=dt)
    ctl.run(state0, (0.0, 1e-3))  # compile the numba kernels (cached on disk) before timing
    cpu = wall = 0.0
    steps = 0
    state, t_prev = state0, 0.0
    for t in times[1:]:
        c0, w0 = time.process_time(), time.perf_counter()
        result = ctl.run(state, (t_prev, t))
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        state, steps, t_prev = result.state, steps + result.n_steps, t
        rec.record(state, t, extra)
    return rec, cpu, wall, steps


def run_amr(nlat0, lmax, mpc, t_end, every):
    cfg = _config(32, t_end, every)
    model = build(cfg)
    a = np.asarray(cfg.initial.direction, float)
    a /= np.linalg.norm(a)
    amp = cfg.initial.amplitude
    st = AMRDensity(model.attention, GaussGrid(32), nlat0=nlat0, lmax=lmax, mass_per_cell=mpc)
    state0 = st.initial_state(lambda x: 1.0 + amp * (x @ a))
    rec, cpu, wall, steps = _run(st, state0, model.times, None, st.measure,
                                 lambda s: {"cells": int(s[0, 0])}, model.attention.beta)
    return {"scheme": "amr-fv", "nlat0": nlat0, "lmax": lmax, "mass_per_cell": mpc,
            "h_finest": st.h, "memory_estimate_MB": st.memory_bytes / 2**20,
            "max_cells": max(r["cells"] for r in rec.rows)}, rec, cpu, wall, steps


def run_ffsl(nlat, t_end, every):
    cfg = _config(nlat, t_end, every)
    model = build(cfg)
    g = model.grid
    x = g.xyz.reshape(-1, 3)
    rec, cpu, wall, steps = _run(model.density, model.density_rep.state0, model.times, model.dt,
                                 lambda s: (x, (s * g.cell_area).reshape(-1)),
                                 lambda s: {"cells": int(s.size)}, model.attention.beta)
    return {"scheme": "ffsl-ppm", "nlat": nlat, "h_finest": float(np.pi / nlat),
            "max_cells": 2 * nlat * nlat, "dt": model.dt}, rec, cpu, wall, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--t-end", type=float, default=12.0)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "amr_metastability.json"))
    args = ap.parse_args()
    ref = json.loads(REFERENCE.read_text())
    rt = np.asarray(ref["times"])
    out_path = Path(args.out)
    data = json.loads(out_path.read_text()) if out_path.exists() else {"runs": {}}
    data.update({"benchmark": "benchmarks/bench_amr_metastability.py", "what": __doc__.split("\n\n")[0],
                 "reference": str(REFERENCE.relative_to(ROOT)),
                 "command": "python benchmarks/bench_amr_metastability.py " + " ".join(args.configs)
                 + f" --t-end {args.t_end:g} --every {args.every:g}"})
    for spec in args.configs:
        kind, *p = spec.split(":")
        if kind == "amr":
            meta, rec, cpu, wall, steps = run_amr(int(p[0]), int(p[1]), float(p[2]), args.t_end, args.every)
        else:
            meta, rec, cpu, wall, steps = run_ffsl(int(p[0]), args.t_end, args.every)
        for r in rec.rows:
            k = int(np.argmin(np.abs(rt - r["t"])))
            if abs(rt[k] - r["t"]) < 1e-9:
                m, se = ref["mean"]["energy"][k], ref["stderr"]["energy"][k]
                r.update(ref_energy=m, ref_stderr=se, rel_error=(r["energy"] - m) / m,
                         rel_stderr=se / m)
        data["runs"][spec] = {**meta, "t_end": args.t_end, "cpu_s": cpu, "wall_s": wall, "steps": steps,
                              "diagnostics_s": rec.seconds, "loadavg_end": os.getloadavg()[0],
                              "series": rec.rows}
        errs = {r["t"]: round(100 * r["rel_error"], 2) for r in rec.rows if "rel_error" in r and r["t"] >= 8}
        print(f"{spec}: cpu {cpu:.0f} s wall {wall:.0f} s steps {steps} energy error % {errs}", flush=True)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
