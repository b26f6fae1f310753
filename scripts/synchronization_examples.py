"""The numbers docs/usage.md quotes from the synchronisation examples, as data files.

    python scripts/synchronization_examples.py points    # examples/synchronization_points.toml
    python scripts/synchronization_examples.py schemes   # examples/sweeps/synchronization_schemes.toml

``points`` runs the example into ``out/examples/sync-points`` and writes
``docs/data/synchronization_points_example.json``: E_β (β = 1) of the points and the particles at
every output, E_β(0)/E_β(6) and W₂(particles, density) at t = 6.  ``schemes`` runs the sweep
(one member after the other, in this process) into ``out/examples/sync-schemes`` and writes
``docs/data/synchronization_schemes.json``: at t = 1, 2, 4, 6 E_β of each density scheme, of
the 500 particles, and W₂(particles, density) per scheme.  Run from the repository root.
"""
from __future__ import annotations

import json
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
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


def main(argv) -> int:
    which = argv[0] if argv else ""
    if which not in ("points", "schemes"):
        raise SystemExit(__doc__)
    res = points() if which == "points" else schemes()
    name = "synchronization_points_example" if which == "points" else "synchronization_schemes"
    (ROOT / "docs" / "data" / f"{name}.json").write_text(json.dumps(res, indent=1, allow_nan=False) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k not in ("energy", "particles_energy", "times",
                                                             "w2_particles_density")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
