"""test_depth_width's SMALL depth study on the horizon-free Brownian path (issue 22.10), seeds
0..5, for ref_steps_per_layer 8 (the test's before) and 16: slope vs L, sup-t slope,
err[-1]/err[0] and ref_check/err[-1] (the test asks < 0.1).  Writes
depth_width_small_seeds.json beside this file (merged with what is there).

    PYTHONPATH=. python docs/prototypes/issue22_noise/depth_width_small_seeds.py REF [SEEDS...]
"""
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from spherepde.experiments import depth_width as dw

SMALL = dw.DepthWidthConfig(n_tokens=8, nmax=4, depths=(4, 8, 16, 32, 64), paths=4,
                            ref_steps_per_layer=8, widths=(2, 8), width_depth=4,
                            width_realisations=60, batch=25, seed=0, workers=0)


def main() -> None:
    ref = int(sys.argv[1])
    seeds = [int(s) for s in sys.argv[2:]] or list(range(6))
    path = Path(__file__).with_suffix(".json")
    data = json.loads(path.read_text()) if path.exists() else {"what": __doc__.split("\n\n")[0]}
    for s in seeds:
        cfg = dataclasses.replace(SMALL, seed=s, ref_steps_per_layer=ref)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            d = dw.depth_study(cfg, Path(tmp))
        err = d["errors"].mean(axis=1)
        row = {"slope_vs_L": dw.depth_fits(cfg.depths, d["errors"])["slope_vs_L"],
               "slope_sup_t": dw.depth_fits(cfg.depths, d["errors_sup_t"])["slope_vs_L"],
               "err_last_over_first": float(err[-1] / err[0]),
               "ref_check_over_err_last": float(d["ref_check"].mean() / err[-1]),
               "seconds": time.perf_counter() - t0}
        data[f"ref{ref}_seed{s}"] = row
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(s, row, flush=True)


if __name__ == "__main__":
    main()
