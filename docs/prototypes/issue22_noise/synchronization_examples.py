"""Issue 22.10 helper: the synchronisation examples' numbers on the horizon-free Brownian path
(main now measures the docs' numbers with scripts/docs_examples.py; this keeps the evidence).

    python docs/prototypes/issue22_noise/synchronization_examples.py points
    python docs/prototypes/issue22_noise/synchronization_examples.py schemes
    python docs/prototypes/issue22_noise/synchronization_examples.py coarse

``points`` runs the example into ``out/examples/sync-points`` and writes
``docs/prototypes/issue22_noise/synchronization_points_example.json``: E_β (β = 1) of the points and the particles at
every output, E_β(0)/E_β(6) and W₂(particles, density) at t = 6.  ``schemes`` runs the sweep
(one member after the other, in this process) into ``out/examples/sync-schemes`` and writes
``docs/prototypes/issue22_noise/synchronization_schemes.json``: at t = 1, 2, 4, 6 E_β of each density scheme, of
the 500 particles, and W₂(particles, density) per scheme.  ``coarse`` runs the set-up of
``tests/runs/test_point_density.py::test_points_follow_the_cluster_that_the_fixed_grid_loses``
(nlat 12, seed 0, t = 0..4) with no remap (the exact pushforward of ρ₀'s quadrature), with the
remap every 10 steps and as ``ffsl-ppm``, and writes ``docs/prototypes/issue22_noise/synchronization_coarse.json``:
E_β of each at t = 0..4 and the ratios to the exact one.  Run from the repository root.
"""
from __future__ import annotations

import json
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
TIMES = (1.0, 2.0, 4.0, 6.0)


def _at(times, t) -> int:
    i = int(np.argmin(np.abs(np.asarray(times) - t)))
    assert abs(times[i] - t) < 1e-9, (t, times[i])
    return i


def points() -> dict:
    from spherepde.io.netcdf import open_dataset
    from spherepde.runs.config import load
    from spherepde.runs.execute import run

    out = Path("out") / "examples" / "sync-points"
    start = time.perf_counter()
    run(load(ROOT / "examples" / "synchronization_points.toml"), out, progress=False)
    seconds = time.perf_counter() - start
    ds = open_dataset(out / "run.nc")
    t = ds["time"].values
    e, ep = ds["energy"].values.astype(float), ds["particles_energy"].values.astype(float)
    w2 = ds["w2_particles_density"].values.astype(float)
    return {"example": "examples/synchronization_points.toml", "seconds": seconds,
            "times": t.tolist(), "energy": e.tolist(), "particles_energy": ep.tolist(),
            "w2_particles_density": w2.tolist(), "energy_fall_0_to_6": float(e[0] / e[_at(t, 6.0)]),
            "w2_at_6": float(w2[_at(t, 6.0)])}


def schemes() -> dict:
    from spherepde.io.netcdf import open_dataset
    from spherepde.runs.sweep import run_sweep

    raw = tomllib.loads((ROOT / "examples" / "sweeps" / "synchronization_schemes.toml").read_text())
    out = Path("out") / "examples" / "sync-schemes"
    start = time.perf_counter()
    run_sweep(raw, out, workers=0, progress=False)
    seconds = time.perf_counter() - start
    ds = open_dataset(out / "sweep.nc")
    t = ds["time"].values
    idx = [_at(t, s) for s in TIMES]
    dim = "representations__density__scheme"
    names = [str(n) for n in raw["sweep"]["representations.density.scheme"]]
    res: dict = {"example": "examples/sweeps/synchronization_schemes.toml", "seconds": seconds,
                 "times": list(TIMES), "energy": {}, "w2_particles_density": {}}
    for k, name in enumerate(sorted(names)):  # the swept dimension is sorted
        sel = {dim: k}
        res["energy"][name] = ds["energy"].isel(sel).values[idx].astype(float).tolist()
        res["w2_particles_density"][name] = ds["w2_particles_density"].isel(sel).values[idx].astype(float).tolist()
    pe = ds["particles_energy"]
    pe = pe.isel({dim: 0}) if dim in pe.dims else pe
    res["particles_energy"] = pe.values[idx].astype(float).tolist()
    return res


COARSE = {
    "grid": {"kind": "sphere", "nlat": 12},
    "initial": {"kind": "vmf", "centres": [[0.48, 0.6, 0.64]], "kappas": [10.0]},
    "dynamics": {"noise": {"activation": "relu", "sigma_u": 0.5, "sigma_w": 0.5, "n_max": 4, "seed": 0}},
    "representations": {"density": {"scheme": "lagrangian-remap", "remap_every": 10}},
    "stepping": {"t_end": 4.0, "dt": 0.025, "output_every": 1.0},
    "outputs": {"diagnostics": ["energy"], "energy_beta": 1.0},
}


def coarse() -> dict:
    from spherepde.io.netcdf import open_dataset
    from spherepde.runs.config import RunConfig
    from spherepde.runs.execute import run

    energy = {}
    for name, dens in (("exact", {"remap_every": 10**6}), ("points", {}), ("grid", {"scheme": "ffsl-ppm"})):
        raw = json.loads(json.dumps(COARSE))
        raw["representations"]["density"] = ({"scheme": "ffsl-ppm"} if name == "grid" else
                                             {**raw["representations"]["density"], **dens})
        out = Path("out") / "examples" / f"sync-coarse-{name}"
        run(RunConfig.from_dict(raw), out, progress=False)
        energy[name] = open_dataset(out / "run.nc")["energy"].values.astype(float)
    ref = energy["exact"]
    return {"setup": COARSE, "times": [0.0, 1.0, 2.0, 3.0, 4.0],
            "energy": {k: v.tolist() for k, v in energy.items()},
            "exact_fall_0_to_4": float(ref[0] / ref[-1]),
            "points_over_exact": (energy["points"] / ref).tolist(),
            "grid_over_exact_at_4": float(energy["grid"][-1] / ref[-1])}


def main(argv) -> int:
    which = argv[0] if argv else ""
    jobs = {"points": (points, "synchronization_points_example"),
            "schemes": (schemes, "synchronization_schemes"), "coarse": (coarse, "synchronization_coarse")}
    if which not in jobs:
        raise SystemExit(__doc__)
    fn, name = jobs[which]
    res = fn()
    (HERE / f"{name}.json").write_text(json.dumps(res, indent=1, allow_nan=False) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k not in ("energy", "particles_energy", "times",
                                                             "w2_particles_density", "setup")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
