"""The particle column of docs/paper2.md's S² synchronisation table: N particles drawn from the
same ρ₀ and driven by the same Brownian paths as the S² density part of the synchronization experiment
(``docs/data/synchronization_density.json``, written by ``scripts/paper2_sync_density.py`` from
the configuration stored in ``docs/data/synchronization.json``: seed, σ, nlat, vMF start, Δt,
t_end, realisations), with the scaled E_β at the density's output times; written, with the
density's E_β beside it, to ``docs/data/synchronization_sphere_particles.json``.

    python scripts/paper2_sync_particles.py [--n 1000] [--seed 0]

The run is the density part's ``spherepde run`` configuration
(``synchronization._density_run_config``) with the density switched off and
``representations.particles = {n, seed}``: one sweep over the same realisations
(``out/paper2/sync_particles/``, in this process).  Stored per path: E_β at t_end and at
t_end/2 for both, their ratio at t_end (points / particles), and the particles' fitted
exponential rate of E_β over the second half [t_end/2, t_end].  Run it from the repository
root after ``scripts/paper2_sync_density.py``; a few minutes.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from regenerate_data import configuration
    from spherepde.experiments.synchronization import _density_run_config
    from spherepde.io.netcdf import open_dataset
    from spherepde.runs.sweep import run_sweep

    _, config = configuration("synchronization", 0)
    raw = _density_run_config(config)
    raw["representations"] = {"density": False, "particles": {"n": args.n, "seed": args.seed}}
    raw["outputs"]["diagnostics"] = ["energy"]
    outdir = ROOT / "out" / "paper2" / "sync_particles"
    start = time.perf_counter()
    res = run_sweep(raw, outdir, workers=0, progress=False)  # a second call reuses finished members
    seconds = time.perf_counter() - start
    density_file = ROOT / "docs" / "data" / "synchronization_density.json"
    if not density_file.exists():
        raise SystemExit(f"particles done in {outdir}; run again after scripts/paper2_sync_density.py")
    stored = json.loads(density_file.read_text())
    ds = open_dataset(res["file"])
    try:
        t = ds["time"].values
        e = ds["particles_energy"].transpose("realisation", "time").values
    finally:
        ds.close()
    dens = stored["density"]
    if not np.allclose(dens["times"], t):
        raise SystemExit("the particle run's output times differ from the density's")
    mid = int(np.argmin(np.abs(t - t[-1] / 2)))
    rows = []
    for r, (ep, ed) in enumerate(zip(e, np.asarray(dens["energy_paths"]))):
        half = slice(mid, None)
        rate = float(np.polyfit(t[half], np.log(ep[half]), 1)[0])
        rows.append({"r": r, "points_E_end": float(ed[-1]), "particles_E_end": float(ep[-1]),
                     "points_E_mid": float(ed[mid]), "particles_E_mid": float(ep[mid]),
                     "ratio_end_points_over_particles": float(ed[-1] / ep[-1]),
                     "particle_rate_second_half": rate})
    data = {"script": "scripts/paper2_sync_particles.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "density_data": "docs/data/synchronization_density.json",
            "density_scheme": dens["scheme"], "n_particles": args.n, "particle_seed": args.seed,
            "t_end": float(t[-1]), "t_mid": float(t[mid]), "seconds_this_call": round(seconds, 1),
            "ratio_end_min": min(row["ratio_end_points_over_particles"] for row in rows),
            "ratio_end_max": max(row["ratio_end_points_over_particles"] for row in rows),
            "paths": rows}
    (ROOT / "docs" / "data" / "synchronization_sphere_particles.json").write_text(
        json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
