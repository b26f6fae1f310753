"""Collect the kernel-floor runs: for each pair RUN_DIR:REFINED_DIR, `spherepde validate
resolution` (the largest change of every diagnostic over the output times, relative to
max(|refined|, 0.05)), min W₂ of each run, its leaves at the end, and the CPU seconds (user + sys)
from the `/usr/bin/time -v` log beside each run directory (DIR.log), and the mass on the
separatrix band |⟨x, e⟩| < 0.1 between the two metastable clusters ±e (e the top eigenvector of
VBᵀ, B = QᵀK, from the run's configuration: e_y, or R e_y for rotated.py's runs) every 2 time
units (from the leaves stored in run.nc, read by ../tail/analyze.py).

    python3 pairs.py OUT.json NAME=RUN_DIR:REFINED_DIR[:C:C_REFINED] ...
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import xarray as xr

from spherepde.runs.compare import compare_runs
from spherepde.validation.metrics import top_eigenspace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tail"))
from analyze import leaves  # noqa: E402


def _cpu(run_dir: str) -> float | None:
    log = Path(run_dir + ".log")
    if not log.exists():
        return None
    text = log.read_text()
    user = re.search(r"User time \(seconds\): ([0-9.]+)", text)
    sys_ = re.search(r"System time \(seconds\): ([0-9.]+)", text)
    return float(user.group(1)) + float(sys_.group(1)) if user and sys_ else None


def _run(run_dir: str) -> dict:
    with xr.open_dataset(Path(run_dir) / "run.nc") as ds:
        w, t = ds["w2_projection"].values, ds["time"].values
        i = int(np.nanargmin(w))
        n = ds["density_leaves"].values[:, 0, 0]  # leaves at each output (row 0, column 0)
        config = json.loads(ds.attrs["config_json"])
    att = config["dynamics"]["attention"]
    Q, K, V = (np.array(att[k], float) for k in "QKV")
    e = top_eigenspace(V @ (Q.T @ K).T).basis[:, 0]
    band = {f"{tt:g}": float(m[np.abs(x @ e) < 0.1].sum() / m.sum())
            for tt, (x, m, _) in zip(t, leaves(Path(run_dir))) if tt % 2 == 0}
    return {"dir": Path(run_dir).name, "w2_min": float(w[i]), "t_w2_min": float(t[i]),
            "t_end": float(t[-1]), "cpu_s": _cpu(run_dir), "leaves_max": int(n.max()),
            "leaves_end": int(n[-1]), "separatrix_mass": band, "config": config}


def main(argv: list[str]) -> None:
    out, pairs = argv[0], {}
    for spec in argv[1:]:
        name, rest = spec.split("=", 1)
        a, b, *c = rest.split(":")
        check = compare_runs(Path(a) / "run.nc", Path(b) / "run.nc")
        pairs[name] = {"run": _run(a), "refined": _run(b), "C": [float(x) for x in c] or None,
                       "per_quantity": check["per_quantity"],
                       "max_relative_change": check["max_relative_change"]}
        print(name, {q: round(v["change"], 4) for q, v in check["per_quantity"].items()}, flush=True)
    json.dump({"script": "docs/prototypes/issue20/w2_change/pairs.py", "pairs": pairs},
              open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
