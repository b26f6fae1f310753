"""The fixed-grid baseline: `spherepde run examples/metastability.toml` (ffsl-ppm on the Gauss
grid) at NLAT, BETA, T_END; its density in run.nc is turned into the diagnostics of common.py
(exact Π#ρ_0 target), written to data/ffsl_beta{B}_nlat{N}.json with the run's wall time.

python run_ffsl.py NLAT BETA T_END"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import netCDF4
import resource
import numpy as np

from common import diagnostics

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
DATA = Path(os.environ.get("OUT_DIR", HERE / "data"))


def main() -> None:
    nlat, beta, t_end = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "spherepde", "run", str(ROOT / "examples/metastability.toml"),
                        "--set", f"grid.nlat={nlat}", "--set", f"dynamics.attention.beta={beta}",
                        "--set", f"stepping.t_end={t_end}", "--output", tmp, "--quiet"],
                       check=True, cwd=ROOT)
        wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        rss = ru1.ru_maxrss / 1024
        summary = json.loads((Path(tmp) / "summary.json").read_text())
        ds = netCDF4.Dataset(Path(tmp) / "run.nc")
        lat, lon = np.deg2rad(ds["lat"][:]), np.deg2rad(ds["lon"][:])
        if np.abs(ds["lat"][:]).max() < 1.6:  # stored in radians
            lat, lon = ds["lat"][:], ds["lon"][:]
        area = ds["cell_area"][:]
        area = area / area.sum() * 4 * np.pi
        LA, LO = np.meshgrid(lat, lon, indexing="ij")
        x = np.stack([np.cos(LA) * np.cos(LO), np.cos(LA) * np.sin(LO), np.sin(LA)], -1).reshape(-1, 3)
        rows = []
        for k, t in enumerate(ds["time"][:]):
            w = (ds["density"][k] * area).reshape(-1)
            d = diagnostics(x, np.asarray(w), beta)
            rows.append({"t": float(t), **d, "mass_error": float(w.sum() - 1), "min_mass": float(w.min()),
                         "package_energy": float(ds["energy"][k])})
    out = {"beta": beta, "nlat": nlat, "scheme": "ffsl-ppm", "h_finest": np.pi / nlat, "wall_s": wall, "cpu_s": cpu, "max_rss_MB": rss,
           "solver_seconds": summary.get("density", {}).get("seconds"), "series": rows,
           "max_cells": 2 * nlat * nlat}
    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / f"ffsl_beta{int(beta)}_nlat{nlat}_t{t_end:g}.json").write_text(json.dumps(out, indent=1))
    print(f"nlat {nlat}: {wall:.0f} s, E(t_end) = {rows[-1]['energy']:.5f} (package {rows[-1]['package_energy']:.5f})")


if __name__ == "__main__":
    main()
