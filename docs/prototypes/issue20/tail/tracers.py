"""A Lagrangian reference for the tail of an ``amr`` run: ρ₀ pushed forward along the run's own
velocity field, without numerical diffusion.

The continuity equation ∂_t ρ + div(ρ X) = 0 with a given field X(t, x) is solved exactly by the
push-forward of ρ₀ along the flow of X.  Here X(t, x) = P_x V m_β[ρ_t^amr](x) is the attention
field of the ``amr`` run's own stored leaves (centres, masses) at the output times, linear in t
between outputs, and ρ₀ is a deterministic quadrature: a Fibonacci lattice of M points (equal
areas) with weights ∝ 1 + ½⟨x, â⟩.  The points move by classical RK4 (step ``h``, retracted to the
sphere).  The clusters (almost all the mass, where the energy is converged to ≈ 1 %) set the field;
the far tail is carried by it as a passive tracer, so the tracers' tail is free of the
finite-volume scheme's numerical diffusion on the base cells (the hypothesis under test).
Checks printed in the output: the output spacing used for the field (every output against every
other output) and M.

    python3 docs/prototypes/issue20/tail/tracers.py RUN_DIR --M 10000 --h 0.25 --t_end 20 --out FILE.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analyze import BAND_NAMES, E_Y, decompose, leaves  # noqa: E402

from spherepde.dynamics.attention import Attention  # noqa: E402


def fibonacci(M: int) -> np.ndarray:
    k = np.arange(M) + 0.5
    z = 1 - 2 * k / M
    phi = np.pi * (1 + 5**0.5) * k
    r = np.sqrt(1 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--M", type=int, default=20000)
    ap.add_argument("--h", type=float, default=0.1)
    ap.add_argument("--stride", type=int, default=1, help="use every stride-th output for the field")
    ap.add_argument("--t_end", type=float, default=None, help="stop at this output time")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    folder = Path(args.run)
    cfg = json.loads((folder / "summary.json").read_text())["config"]
    a = cfg["dynamics"]["attention"]
    att = Attention(np.array(a["Q"]), np.array(a["K"]), np.array(a["V"]), a["beta"])
    from spherepde.io.rundata import read_run
    times = np.asarray(read_run(folder / "run.nc").times, float)
    L = leaves(folder)
    if args.t_end is not None:
        keep = times <= args.t_end + 1e-9
        times, L = times[keep], L[:int(keep.sum())]
    idx = list(range(0, len(times), args.stride))
    tk = times[idx]
    src = [(L[i][0], L[i][1]) for i in idx]
    dirn = np.asarray(cfg["initial"]["direction"], float)
    dirn /= np.linalg.norm(dirn)
    x = fibonacci(args.M)
    w = 1 + cfg["initial"]["amplitude"] * (x @ dirn)
    w /= w.sum()
    a_own = float(w[x @ E_Y > 0].sum())

    def field(t, x):
        k = min(int(np.searchsorted(tk, t, side="right")) - 1, len(tk) - 2)
        th = (t - tk[k]) / (tk[k + 1] - tk[k])
        out = 0.0
        for j, c in ((k, 1 - th), (k + 1, th)):
            if c == 0:
                continue
            y, m = src[j]
            mean, _ = att.mean_and_stats(x, y, m, method="culled", tol=1e-10)
            out = out + c * att.velocity_from_mean(x, mean)
        return out

    def retract(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    rows = [{"t": float(times[0]), **decompose(x, w, np.zeros(len(w), int), a_own)}]
    t0 = time.process_time()
    for k in range(0, len(times) - 1, args.stride):
        if k + args.stride >= len(times):
            break
        T0, T1 = times[k], times[k + args.stride]
        n = max(1, int(np.ceil((T1 - T0) / args.h - 1e-9)))
        hh = (T1 - T0) / n
        for s in range(n):
            t = T0 + s * hh
            k1 = field(t, x)
            k2 = field(t + hh / 2, retract(x + hh / 2 * k1))
            k3 = field(t + hh / 2, retract(x + hh / 2 * k2))
            k4 = field(t + hh, retract(x + hh * k3))
            x = retract(x + hh / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
        rows.append({"t": float(T1), **decompose(x, w, np.zeros(len(w), int), a_own)})
        print(f"t={T1:g} tail [0,.5) {rows[-1]['bands']['[0,.5)']['mass']:.3e} W2 {rows[-1]['w2']:.4f}",
              file=sys.stderr)
    out = {"script": "docs/prototypes/issue20/tail/tracers.py", "run": folder.name, "M": args.M, "h": args.h,
           "stride": args.stride, "a_own": a_own, "cpu_s": time.process_time() - t0, "bands": BAND_NAMES,
           "rows": rows}
    Path(args.out).write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
