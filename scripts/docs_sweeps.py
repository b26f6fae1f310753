"""Run the two S¹ sweeps that docs/sweeps.md quotes and write their fitted convergence slopes
to docs/data/sweeps.json (≈ 5 min on 2 busy cores).

    PYTHONPATH=. python3 scripts/docs_sweeps.py
    python3 scripts/docs_numbers.py            # then re-render the page

* ``particles_vs_density_circle``: ``spherepde sweep examples/sweeps/particles_vs_density_circle.toml``
  (N = 64 … 1024, 2 seeds, β = 10, t = 4), then ``spherepde plot DIR/sweep.nc --json``: the
  slopes of W₂(particles, density) and |Δ energy| against N;
* ``grid_circle``: the same file with the sweep replaced by ``grid.n`` = 32, 64, 128, 256, no
  particles, β = 5, t_end = 0.5: the slope of the energy's self-convergence against n = 256.

Both run with ``--workers 0`` (in one process) through the command line, in a temporary folder;
the file records each command with the folder written DIR, and its wall time and load.
"""
from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/sweeps/particles_vs_density_circle.toml"
GRID_SETS = ['sweep={"grid.n" = [32, 64, 128, 256]}', "dynamics.attention.beta=5.0", "stepping.t_end=0.5",
             "stepping.output_every=0.25", "representations.particles=false",
             'outputs.diagnostics=["mass", "energy"]']


def _cli(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "spherepde", *args, "--json"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def _sweep(folder: Path, sets: list[str]) -> dict:
    load, t0 = os.getloadavg()[0], time.perf_counter()
    set_args = [a for s in sets for a in ("--set", s)]
    _cli(["sweep", EXAMPLE, "--workers", "0", "--quiet", "--output", str(folder), *set_args])
    plot = _cli(["plot", str(folder / "sweep.nc"), "--no-animation"])
    lines = {ln["label"].rsplit(": slope", 1)[0]: {"slope": ln["slope"], "stderr": ln["stderr"]}
             for p in plot["plots"] for ln in p["lines"]}
    shown = " ".join(f"--set '{s}'" for s in sets)
    return {"command": f"python3 -m spherepde sweep {EXAMPLE} --workers 0 --output DIR {shown}".strip()
                       + "; python3 -m spherepde plot DIR/sweep.nc --json",
            "seconds": round(time.perf_counter() - t0, 1), "load_average": round(load, 2),
            "reference": plot["plots"][0]["reference"]["label"], "lines": lines}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        pvd = _sweep(Path(tmp) / "pvd", [])
        grid = _sweep(Path(tmp) / "grid", GRID_SETS)
    data = {"script": "scripts/docs_sweeps.py",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cores": os.cpu_count(),
            "particles_vs_density_circle": {**pvd, "w2": pvd["lines"]["W₂(particles, density)"],
                                            "energy": pvd["lines"]["|energy: particles − density|"]},
            "grid_circle": {**grid, "energy": grid["lines"]["|energy − energy(n = 256)|"]}}
    out = ROOT / "docs" / "data" / "sweeps.json"
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
