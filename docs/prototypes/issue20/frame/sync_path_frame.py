"""``spherepde validate sync-path --json --scheme amr --realisation 1`` with the co-moving frame
(:class:`frame_amr.FrameAMR`) in place of AMRDensity: the same configuration, run loop and
analysis (:func:`spherepde.experiments.sync_path.run_sync_path`), the builder's class patched for
the duration of the run (``spherepde.runs.build.AMRDensity``, the name ``_amr`` constructs).

    python sync_path_frame.py check                       # t_end 0.5: plain vs frame → check.json
    python sync_path_frame.py run NAME [--clusters 2] [--max-level 5] [--mass-per-cell 10] [--t-end 6]
                               [--omega-mode substep|step] [--regrid-every N]
                               [--courant C] [--limit 560] [--plain FILE]

``run`` writes NAME.json beside this file: the keys of docs/data/amr_sync_path/*.json plus
substeps, cpu_seconds, wall_seconds, leaves, the frame's rotation (angle_path = Σ|ω|h, angle_net
= the angle of R at the end), the noise evaluations' seconds, decades_in_band (the largest
log₁₀ E_ref(0)/E_ref(t) over the outputs before the ratio first leaves [0.98, 1.02]) and the
stored plain result (``--plain``) at the same times.  A run past ``--limit`` wall seconds is
interrupted like Ctrl-C (SIGALRM → KeyboardInterrupt) and keeps the outputs both reached.
Run with one thread (OMP/NUMBA/OPENBLAS_NUM_THREADS=1) and PYTHONPATH at the repository root.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ROOT = HERE.parents[3]
SCRIPT = "docs/prototypes/issue20/frame/sync_path_frame.py"
BAND = (0.98, 1.02)

from frame_amr import FrameAMR, table_cost  # noqa: E402

from spherepde.experiments.sync_path import SyncPathConfig, run_sync_path  # noqa: E402
from spherepde.solvers.eulerian.amr import AMRDensity  # noqa: E402


class PlainAMR(AMRDensity):
    """AMRDensity unchanged (recorded, so that its final state can be looked at)."""


def _recording(cls, made: list, regrid_every: int | None = None, courant: float | None = None, **extra):
    def make(*args, **kwargs):
        if courant is not None:  # not a configuration key: given to the constructor
            kwargs["courant"] = courant
        st = cls(*args, **kwargs, **extra)
        if regrid_every is not None:  # not a configuration key: set on the stepper
            st.regrid_every = regrid_every
        made.append(st)
        return st
    return make


def _alarm(signum, frame):
    raise KeyboardInterrupt


def run_one(cfg: SyncPathConfig, frame: bool, limit: float, omega_mode: str = "substep",
            output: str | None = None, regrid_every: int | None = None,
            courant: float | None = None) -> tuple[dict, AMRDensity]:
    """run_sync_path(cfg) with FrameAMR (``frame``) or the plain class; (result, stepper)."""
    made: list = []
    cls = (_recording(FrameAMR, made, regrid_every, courant, omega_mode=omega_mode) if frame
           else _recording(PlainAMR, made, regrid_every, courant))
    old = signal.signal(signal.SIGALRM, _alarm)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with mock.patch("spherepde.runs.build.AMRDensity", cls):
            res = run_sync_path(cfg, output=output)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    res["cpu_seconds"] = round(time.process_time() - cpu0, 1)
    res["wall_seconds"] = round(time.perf_counter() - wall0, 1)
    res["limit_seconds"] = limit
    st = made[-1]
    res["substeps"] = res.get("amr_steps")
    if frame:
        res["frame"] = {"omega_mode": omega_mode, "angle_path": st.angle_path, "angle_net": st.angle_net,
                        "noise_seconds": round(st.noise_seconds, 2),
                        "noise_evaluations": st.noise_evaluations,
                        "bound_leaf_levels": {str(k): v for k, v in sorted(st.bound_levels.items())},
                        "bound_leaf_mass_sum": st.bound_mass}
    return res, st


def in_band(times, e_ref, ratio) -> dict:
    """The outputs before the ratio first leaves BAND: the last such time and the largest
    log₁₀ E_ref(0)/E_ref(t) among them."""
    k = 0
    while k < len(ratio) and BAND[0] <= ratio[k] <= BAND[1]:
        k += 1
    if k == 0:
        return {"last_time_in_band": None, "decades_in_band": 0.0}
    return {"last_time_in_band": times[k - 1],
            "decades_in_band": max(math.log10(e_ref[0] / e) for e in e_ref[:k]),
            "first_time_out": times[k] if k < len(times) else None}


def check(limit: float) -> dict:
    """t_end 0.5: plain and frame on the same path, energies, ratios, final fields, mass, ≥ 0."""
    cfg = SyncPathConfig(t_end=0.5, realisation=1, scheme="amr", max_level=4, mass_per_cell=10.0)
    out: dict = {"script": SCRIPT, "command": f"python {SCRIPT} check",
                 "config": {"t_end": 0.5, "realisation": 1, "max_level": 4, "mass_per_cell": 10.0}}
    fields = {}
    for name, frame in (("plain", False), ("frame", True)):
        with tempfile.TemporaryDirectory() as d:
            res, st = run_one(cfg, frame, limit, output=d)
            from spherepde.io.runfile import read_restart
            state = read_restart(Path(d) / "run.nc").state["density"]
        rho = st.field(state)
        _, m = st.measure(state)
        fields[name] = rho
        out[name] = {k: res[k] for k in ("times", "energy_density", "energy_reference", "ratio", "substeps",
                                         "cpu_seconds", "wall_seconds", "leaves", "mass_error", "min_density",
                                         "seconds")}
        out[name].update(min_leaf_mass=float(m.min()), mass_error_leaves=float(m.sum() - 1.0),
                         min_field=float(rho.min()), interrupted=res["interrupted"])
        if frame:
            out[name]["frame"] = res["frame"]
    grid_area = st.output_grid.cell_area
    diff = np.abs(fields["frame"] - fields["plain"])
    out["field_l1_difference"] = float(np.sum(diff * grid_area))
    out["field_max_relative_difference"] = float(diff.max() / fields["plain"].max())
    e_p, e_f = np.array(out["plain"]["energy_density"]), np.array(out["frame"]["energy_density"])
    out["energy_relative_difference"] = (np.abs(e_f - e_p) / e_p).tolist()
    # what a per-stage basis table would cost against the direct evaluation, on the final mesh
    mesh, _, _ = st.unpack(state)
    coef = np.asarray(st.path.increment(0.0, 0.01), float) / 0.01
    out["table_cost"] = table_cost(st, mesh, coef)
    return out


def run(args) -> dict:
    cfg = SyncPathConfig(t_end=args.t_end, realisation=1, scheme="amr", max_level=args.max_level,
                         mass_per_cell=args.mass_per_cell, clusters=args.clusters)
    res, st = run_one(cfg, True, args.limit, args.omega_mode, regrid_every=args.regrid_every,
                      courant=args.courant)
    opts = f"--realisation 1 --t-end {args.t_end:g} --max-level {args.max_level} --mass-per-cell {args.mass_per_cell:g}"
    if args.clusters != 1:
        opts += f" --clusters {args.clusters}"
    out = {"script": SCRIPT,
           "command": f"python {SCRIPT} run {args.name} --clusters {args.clusters} --max-level {args.max_level} "
                      f"--t-end {args.t_end:g} --omega-mode {args.omega_mode} --limit {args.limit:g}"
                      + (f" --regrid-every {args.regrid_every}" if args.regrid_every else "")
                      + (f" --courant {args.courant:g}" if args.courant else "")
                      + (f" --plain {args.plain}" if args.plain else ""),
           "equivalent_to": f"spherepde validate sync-path --json --scheme amr {opts} (AMRDensity → FrameAMR)",
           **res}
    out.update(in_band(res["times"], res["energy_reference"], res["ratio"]))
    out["ratio_t_end"] = res["ratio"][-1] if res["ratio"] else None
    if args.plain:
        p = json.loads((ROOT / args.plain).read_text())
        pin = in_band(p["times"], p["energy_reference"], p["ratio"])
        by_t = {round(t, 9): r for t, r in zip(p["times"], p["ratio"])}
        out["plain"] = {"file": args.plain, "ratio_at_frame_times": [by_t.get(round(t, 9)) for t in res["times"]],
                        "substeps": p.get("amr_steps"), "seconds": p.get("seconds"), "leaves": p.get("leaves"),
                        "times": p["times"], "interrupted": p.get("interrupted"), **pin}
        # the reference is the same computation in both runs
        e_ref_p = {round(t, 9): e for t, e in zip(p["times"], p["energy_reference"])}
        out["plain"]["reference_max_relative_difference"] = max(
            (abs(e - e_ref_p[round(t, 9)]) / e_ref_p[round(t, 9)] for t, e in
             zip(res["times"], res["energy_reference"]) if round(t, 9) in e_ref_p), default=None)
    out["load_after"] = list(os.getloadavg())
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check")
    c.add_argument("--limit", type=float, default=560.0)
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--clusters", type=int, default=1)
    r.add_argument("--max-level", type=int, default=4)
    r.add_argument("--mass-per-cell", type=float, default=10.0)
    r.add_argument("--t-end", type=float, default=6.0)
    r.add_argument("--omega-mode", default="substep")
    r.add_argument("--limit", type=float, default=560.0)
    r.add_argument("--regrid-every", type=int, default=None, help="adapt every N sub-steps (default 4)")
    r.add_argument("--courant", type=float, default=None, help="positivity factor (default 0.5)")
    r.add_argument("--plain", default=None, help="stored plain result (path from the repository root)")
    args = ap.parse_args(argv)
    if args.mode == "check":
        out, name = check(args.limit), "check"
    else:
        out, name = run(args), args.name
    (HERE / f"{name}.json").write_text(json.dumps(out, indent=1) + "\n")
    show = {k: out[k] for k in ("ratio", "substeps", "cpu_seconds", "decades_in_band", "last_time_in_band",
                                "field_l1_difference", "energy_relative_difference") if k in out}
    print(name, json.dumps(show), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
