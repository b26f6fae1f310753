"""How much of the attention at the far-tail leaves comes from the tail itself?  For stored states
of amr runs: at every leaf with |⟨x, e_y⟩| < 0.5 (the far tail), the share of its softmax weight
Σ_j m_j e^{β⟨Bᵀx, x_j⟩} carried by sources that are themselves in the far tail, and the speed |X|
there; mass-weighted means over the far-tail leaves.  (Softmax normalises: at large β a leaf
attends to whatever maximises ⟨Bᵀx, y⟩ on the support, however little mass sits there.)

    python3 docs/prototypes/issue20/tail/self_attention.py RUN_DIR... --idx 16 24 32 --out FILE.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import netCDF4
import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.solvers.eulerian.amr import stored_leaves

E_Y = np.array([0.0, 1.0, 0.0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--idx", type=int, nargs="+", default=[24])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    out = {"script": "docs/prototypes/issue20/tail/self_attention.py", "runs": {}}
    for run in args.runs:
        folder = Path(run)
        a = json.loads((folder / "summary.json").read_text())["config"]["dynamics"]["attention"]
        att = Attention(np.array(a["Q"]), np.array(a["K"]), np.array(a["V"]), a["beta"])
        rows = []
        with netCDF4.Dataset(folder / "run.nc") as ds:
            ds.set_auto_mask(False)
            times = ds["time"][:]
            for i in args.idx:
                st = ds["density_leaves"][i]
                mesh, m = stored_leaves(st)
                x = mesh.xc
                tail = np.abs(x @ E_Y) < 0.5
                xt = x[tail]
                logits = att.beta * (xt @ att.B) @ x.T  # ⟨Bᵀx_t, x_j⟩ = x_tᵀ B x_j
                lw = logits + np.log(np.maximum(m, 1e-300))[None, :]
                lw -= lw.max(1, keepdims=True)
                wgt = np.exp(lw)
                share = wgt[:, tail].sum(1) / wgt.sum(1)
                X = att.velocity_from_mean(xt, att.mean_and_stats(xt, x, m, method="reference")[0])
                wm = m[tail] / m[tail].sum()
                slow = np.linalg.norm(X, axis=1) < 0.01
                mt = m[tail]
                lat = np.degrees(np.abs(mesh.latc[tail]))
                merged = (mesh.x1 - mesh.x0 != (mesh.S >> mesh.level))
                near = np.abs(x @ E_Y) < 0.9
                rows.append({"t": float(times[i]), "tail_mass": float(m[tail].sum()), "tail_leaves": int(tail.sum()),
                             "self_share_mean": float(np.sum(wm * share)),
                             "self_share_min": float(share.min()),
                             "speed_mean": float(np.sum(wm * np.linalg.norm(X, axis=1))),
                             "speed_below_0.01_mass": float(mt[slow].sum()),
                             "slow_abs_lat_range":
                                 [float(lat[slow].min()), float(lat[slow].max())] if slow.any() else None,
                             "slow_max_abs_y": float(np.abs(xt[slow, 1]).max()) if slow.any() else None,
                             "tail_mass_above_lat45": float(mt[lat > 45].sum()),
                             "tail_mass_above_lat60": float(mt[lat > 60].sum()),
                             "below09_mass": float(m[near].sum()),
                             "below09_in_merged_cells": float(m[near & merged].sum())})
                print(folder.name, rows[-1])
        out["runs"][folder.name] = {"beta": a["beta"], "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
