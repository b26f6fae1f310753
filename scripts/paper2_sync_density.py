"""The S² density part of the synchronization experiment alone (noise-only paths on S², the
``density`` of its summary), with the configuration stored in ``docs/data/synchronization.json``
and this checkout's code, into ``docs/data/synchronization_density.json``.

    python scripts/paper2_sync_density.py [--workers W]

The particle cases and Lyapunov pairs of the experiment use exact Gaussian increments at the
tokens, not the grid's Brownian path, so issue 22.10 (the path made horizon-free) changes only
this part; it is the larger part of the experiment's time, and runs here on its own (the same
function, ``synchronization._sync_density``, into ``out/paper2/sync_density/``).  The file
holds the density configuration, ``density`` (as in the experiment's summary), ``script`` and
``regenerated``.  Run it from the repository root.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def _finite(value):
    """NaN (a path with no fit) as null: strict JSON."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value


def _relative(density: dict) -> dict:
    """The sweep file's path relative to the repository root (no machine paths in the data)."""
    path = Path(density["file"])
    return {**density, "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="a tiny run into /tmp, to test the script")
    args = ap.parse_args(argv)

    from regenerate_data import configuration
    from spherepde.experiments.synchronization import _sync_density

    _, config = configuration("synchronization", args.workers)
    outdir = ROOT / "out" / "paper2"
    target = ROOT / "docs" / "data" / "synchronization_density.json"
    if args.smoke:
        config = dataclasses.replace(config, density_nlat=40, density_t_end=0.6, density_dt=0.05,
                                     density_realisations=2)
        outdir, target = Path("/tmp/paper2_sync_density_smoke"), Path("/tmp/paper2_sync_density_smoke.json")
    if (outdir / "sync_density").exists():
        shutil.rmtree(outdir / "sync_density")
    outdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    density = _sync_density(config, outdir, False)
    seconds = time.perf_counter() - start
    cfg = {k: v for k, v in dataclasses.asdict(config).items()
           if k.startswith("density_") or k in ("seed", "beta", "workers")}
    data = {"script": "scripts/paper2_sync_density.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "config_from": "docs/data/synchronization.json", "config": cfg,
            "regenerated": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "seconds": round(seconds, 1), "load_after": list(os.getloadavg())},
            "density": _finite(_relative(density))}
    target.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
