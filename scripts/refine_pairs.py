"""Resolution checks of run pairs (a run and the same configuration with ``--refine 1.5``) into
one data file for the docs: ``spherepde validate resolution`` of each pair, the process CPU
seconds of each run and their leaf or cell counts.

Each pair is two run folders made by

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 /usr/bin/time -f "%U user %e wall" \\
        python3 -m spherepde run CONFIG [--set …] --output A
    … the same with --refine 1.5 --output B

with /usr/bin/time's output collected in a log file, one line per run in the order of the
runs (the CPU seconds; the machine is shared, so the wall times say little).  The pairs are
given as NAME=A,B,LOG,K (K: the index of A's line in LOG; B's is K + 1).  K = ``watch``: LOG
holds lines ``FOLDER USER user SYS sys …`` written by a watcher that read the run's
/proc/PID/stat once a second until it exited, one line per run folder (its name).

    python3 scripts/refine_pairs.py demo-ffsl=DIR/ffsl-1,DIR/ffsl-15,DIR/run.log,0 … \\
        --out docs/data/refine_pairs.json
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from spherepde import __version__
from spherepde.io.summary import jsonable
from spherepde.runs.compare import compare_runs

USER = re.compile(r"^([0-9.]+) user ([0-9.]+) wall$")
WATCH = re.compile(r"^(\S+) ([0-9.]+) user ([0-9.]+) sys")


def _run_info(folder: Path) -> dict:
    s = json.loads((folder / "summary.json").read_text())
    cfg = s["config"]
    dens = cfg["representations"].get("density", {})
    info = {"nlat": cfg["grid"].get("nlat"), "beta": cfg["dynamics"]["attention"]["beta"],
            "scheme": dens.get("scheme", "ffsl-ppm"), "t_end": cfg["stepping"]["t_end"],
            "steps": s["density"]["steps"], "interrupted": bool(s.get("interrupted"))}
    if info["scheme"] == "amr":
        info.update(base_nlat=dens.get("base_nlat", info["nlat"]), max_level=dens.get("max_level", 3),
                    mass_per_cell=dens.get("mass_per_cell", 3.3), leaves_end=s["density"].get("leaves"))
    return info


def pair(spec: str) -> tuple[str, dict]:
    name, rest = spec.split("=", 1)
    a, b, log, k = rest.split(",")
    lines = Path(log).read_text().splitlines()
    if k == "watch":
        user = {m[1]: float(m[2]) for m in map(WATCH.match, lines) if m}
        cpu = [user[Path(a).name], user[Path(b).name]]
    else:
        times = [m for m in (USER.match(line.strip()) for line in lines) if m]
        cpu = [float(times[int(k)][1]), float(times[int(k) + 1][1])]
    out = {"run": _run_info(Path(a)), "refined": _run_info(Path(b)), "cpu_s": cpu,
           "check": compare_runs(Path(a) / "run.nc", Path(b) / "run.nc")}
    out["check"].pop("times")
    out["check"]["run"], out["check"]["refined"] = Path(a).name, Path(b).name
    return name, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", metavar="NAME=A,B,LOG,K")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    pairs = dict(pair(s) for s in args.pairs)
    data = {"script": "scripts/refine_pairs.py", "version": __version__,
            "command": "python3 scripts/refine_pairs.py " + " ".join(f"{n}=A,B,LOG,K" for n in pairs)
                       + f" --out {Path(args.out).name}",
            "how": " ".join(" ".join(__doc__.split("\n\n")[1:3]).split()), "pairs": pairs}
    Path(args.out).write_text(json.dumps(jsonable(data), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
