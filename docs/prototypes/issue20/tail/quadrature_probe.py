"""Is the attention field at the low-mass base leaves resolved?  The amr stepper evaluates
X = P_x V m_β[ρ](x) at leaf centres with the leaves as weighted points.  Where a leaf is much
wider than the kernel width β^(−1/2) (β·h² ≫ 1: every base leaf at β ≥ 1000), that point
quadrature of m_β may be far off.  This probe takes stored states of a run, and compares X at the
leaf centres from (a) the leaves as points with (b) every leaf split into k × k equal-area
sub-points (mass m_i/k² each, k = 2, 4, 8): the relative change of X, mass-weighted, by |⟨x, e_y⟩|
band.  Same leaves, same masses: only the quadrature of the attention sum changes.

    python3 docs/prototypes/issue20/tail/quadrature_probe.py RUN_DIR --idx 24 32 --out FILE.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import netCDF4
import numpy as np

from spherepde.dynamics.attention import Attention
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.solvers.eulerian.amr import stored_leaves
from spherepde.solvers.eulerian.amr_mesh import LeafMesh

E_Y = np.array([0.0, 1.0, 0.0])
BANDS = (0.0, 0.5, 0.9, 0.99, 1.0 + 1e-12)


def subpoints(mesh: LeafMesh, m: np.ndarray, k: int):
    """k × k equal-area sub-points of every leaf (uniform in λ and sin φ), mass m_i/k² each."""
    u = (np.arange(k) + 0.5) / k
    lon = mesh.lon0[:, None] + (mesh.lon1 - mesh.lon0)[:, None] * u[None, :]            # (n, k)
    s0, s1 = np.sin(mesh.lat0), np.sin(mesh.lat1)
    lat = np.arcsin(s0[:, None] + (s1 - s0)[:, None] * u[None, :])                       # (n, k)
    LON = np.repeat(lon[:, :, None], k, 2).reshape(-1)
    LAT = np.repeat(lat[:, None, :], k, 1).reshape(-1)
    return lonlat_to_xyz(LON, LAT), np.repeat(m / (k * k), k * k)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--idx", type=int, nargs="+", default=[24])
    ap.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    folder = Path(args.run)
    cfg = json.loads((folder / "summary.json").read_text())["config"]
    a = cfg["dynamics"]["attention"]
    att = Attention(np.array(a["Q"]), np.array(a["K"]), np.array(a["V"]), a["beta"])
    rows = []
    with netCDF4.Dataset(folder / "run.nc") as ds:
        ds.set_auto_mask(False)
        times = ds["time"][:]
        for i in args.idx:
            st = ds["density_leaves"][i]
            mesh, m = stored_leaves(st)
            n, x = mesh.n, mesh.xc
            X0 = att.velocity_from_mean(x, att.mean_and_stats(x, x, m, method="culled", tol=1e-10)[0])
            s = np.abs(x @ E_Y)
            band = np.digitize(s, BANDS) - 1
            row = {"t": float(times[i]), "leaves": n, "by_k": {}}
            prev = None
            for k in args.ks:
                y, w = subpoints(mesh, m, k)
                X = att.velocity_from_mean(x, att.mean_and_stats(x, y, w, method="culled", tol=1e-10)[0])
                d = np.linalg.norm(X - X0, axis=1)
                dk = None if prev is None else np.linalg.norm(X - prev, axis=1)
                rec = {}
                for b in range(4):
                    sel = band == b
                    if not sel.any():
                        continue
                    wm = m[sel] / m[sel].sum()
                    rec[f"band{b}"] = {"mass": float(m[sel].sum()),
                                       "mean_speed_points": float(np.sum(wm * np.linalg.norm(X0[sel], axis=1))),
                                       "mean_speed_sub": float(np.sum(wm * np.linalg.norm(X[sel], axis=1))),
                                       "mean_change_vs_points": float(np.sum(wm * d[sel])),
                                       "mean_change_vs_previous_k": None if dk is None else float(np.sum(wm * dk[sel]))}
                row["by_k"][str(k)] = rec
                prev = X
                print(f"t={times[i]:g} k={k} " + " ".join(
                    f"b{b}: |X|pts {r['mean_speed_points']:.3f} sub {r['mean_speed_sub']:.3f} "
                    f"d {r['mean_change_vs_points']:.3f}"
                    + ("" if r['mean_change_vs_previous_k'] is None else f" dk {r['mean_change_vs_previous_k']:.3f}")
                    for b, r in ((int(q[4:]), v) for q, v in rec.items())), file=sys.stderr)
            rows.append(row)
    out = {"script": "docs/prototypes/issue20/tail/quadrature_probe.py", "run": folder.name,
           "beta": a["beta"], "ks": args.ks, "bands": ["[0,.5)", "[.5,.9)", "[.9,.99)", "[.99,1]"], "rows": rows}
    Path(args.out).write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
