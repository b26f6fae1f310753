"""Benchmark: SphericalHarmonics wrapper vs raw shtns calls (and the pyshtools backend).

Run from the repository root::

    python benchmarks/bench_sht.py [--lmax 63 127 255] [--budget 3] [--quick]

For each ``lmax`` (Gauss grid with ``nlat = lmax + 1``, ``nlon = 2 nlat``) it times single
calls, interleaved (every round times every shtns variant once, in rotating order, and the slow
pyshtools variants every few rounds, so that changes in machine load hit all variants alike),
and reports medians of ms per call (plus the ratio of the minima, the least noisy estimate of
the wrapper's overhead on a busy machine):

* ``raw``      — the shtns object the wrapper uses, called directly:
                 ``out = np.empty(...); sh.spat_to_SH(field, out)`` / ``sh.SH_to_spat(q, out)``;
* ``wrapper``  — ``SphericalHarmonics.analyse`` / ``.synthesise`` (shtns backend), including
                 its input validation;
* ``pyshtools``— the same methods with ``backend="pyshtools"``.

Results go to stdout as a table and to ``benchmarks/results/sht.json``.  No assertions on time.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from spherepde.grids import sht as sht_mod  # noqa: E402
from spherepde.grids.gauss import GaussGrid  # noqa: E402
from spherepde.grids.sht import SphericalHarmonics  # noqa: E402


def _one(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_lmax(lmax: int, budget_s: float, with_pyshtools: bool, rng) -> dict:
    grid = GaussGrid(lmax + 1)
    wrap = SphericalHarmonics(grid, backend="shtns")
    raw = wrap._impl.sh  # the very shtns object the wrapper calls
    q = rng.standard_normal(wrap.nlm) + 1j * rng.standard_normal(wrap.nlm)
    q.imag[wrap.m == 0] = 0.0
    field = wrap.synthesise(q)
    nlm, shape = wrap.nlm, grid.shape

    def raw_analyse():
        out = np.empty(nlm, dtype=np.complex128)
        raw.spat_to_SH(field, out)
        return out

    def raw_synthesise():
        out = np.empty(shape)
        raw.SH_to_spat(q, out)
        return out

    fast = {
        ("analyse", "raw"): raw_analyse,
        ("analyse", "wrapper"): lambda: wrap.analyse(field),
        ("synthesise", "raw"): raw_synthesise,
        ("synthesise", "wrapper"): lambda: wrap.synthesise(q),
    }
    slow = {}
    if with_pyshtools:
        pysh = SphericalHarmonics(grid, backend="pyshtools")
        assert np.allclose(pysh.analyse(field), q, atol=1e-10 * np.abs(q).max())
        slow[("analyse", "pyshtools")] = lambda: pysh.analyse(field)
        slow[("synthesise", "pyshtools")] = lambda: pysh.synthesise(q)

    # sanity: wrapper and raw compute the same thing
    assert np.array_equal(raw_analyse(), wrap.analyse(field))
    assert np.array_equal(raw_synthesise(), wrap.synthesise(q))

    # warm up, then size the run to the time budget
    for fn in list(fast.values()) + list(slow.values()):
        fn()
    round_s = sum(min(_one(fn) for _ in range(5)) for fn in fast.values())
    slow_s = sum(_one(fn) for fn in slow.values())
    n_slow = 25 if slow else 0
    rounds = int(np.clip((budget_s - n_slow * slow_s) / max(round_s, 1e-9), 200, 20000))
    stride = max(1, rounds // max(n_slow, 1))

    keys = list(fast)
    times = {k: [] for k in list(fast) + list(slow)}
    for r in range(rounds):
        # every round times every fast variant once, in rotating order
        for k in keys[r % 4:] + keys[: r % 4]:
            times[k].append(_one(fast[k]))
        if slow and r % stride == 0:
            for k, fn in slow.items():
                times[k].append(_one(fn))

    res = {"lmax": lmax, "nlat": grid.nlat, "nlon": grid.nlon, "nlm": nlm, "rounds": rounds, "ops": {}}
    for op in ("analyse", "synthesise"):
        d = {}
        for kind in ("raw", "wrapper", "pyshtools"):
            if (op, kind) in times:
                t = 1e3 * np.asarray(times[(op, kind)])
                d[kind] = {
                    "median_ms": float(np.median(t)),
                    "min_ms": float(t.min()),
                    "q25_ms": float(np.quantile(t, 0.25)),
                    "q75_ms": float(np.quantile(t, 0.75)),
                    "calls": int(t.size),
                }
        d["ratio_wrapper_raw"] = d["wrapper"]["median_ms"] / d["raw"]["median_ms"]
        d["ratio_wrapper_raw_min"] = d["wrapper"]["min_ms"] / d["raw"]["min_ms"]
        if "pyshtools" in d:
            d["ratio_pyshtools_shtns"] = d["pyshtools"]["median_ms"] / d["wrapper"]["median_ms"]
        res["ops"][op] = d
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lmax", type=int, nargs="+", default=[63, 127, 255])
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of timing per lmax")
    ap.add_argument("--no-pyshtools", action="store_true")
    ap.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sht.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.budget = 0.3
    if not sht_mod.shtns_available():
        print("shtns is not importable: nothing to compare against", file=sys.stderr)
        return 1

    rng = np.random.default_rng(0)
    load0 = os.getloadavg()
    t0 = time.time()
    results = [
        bench_lmax(L, args.budget, not args.no_pyshtools, rng)
        for L in args.lmax
    ]
    load1 = os.getloadavg()

    hdr = (f"{'lmax':>5} {'grid':>9} {'op':>10} {'raw ms':>9} {'wrapper ms':>10} "
           f"{'wrap/raw':>8} {'(min)':>6} {'pysh ms':>9} {'pysh/shtns':>10}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        for op, d in r["ops"].items():
            py = d.get("pyshtools", {}).get("median_ms")
            print(
                f"{r['lmax']:>5} {r['nlat']:>4}x{r['nlon']:<4} {op:>10} "
                f"{d['raw']['median_ms']:>9.4f} {d['wrapper']['median_ms']:>10.4f} "
                f"{d['ratio_wrapper_raw']:>8.3f} {d['ratio_wrapper_raw_min']:>6.3f} "
                + (f"{py:>9.3f} {d['ratio_pyshtools_shtns']:>10.1f}" if py is not None else "")
            )
    print(f"\nper-call medians (and ratio of minima) over interleaved rounds; "
          f"shtns threads = {sht_mod.SHTNS_NTHREADS} (0 = all); "
          f"load average {load0[0]:.2f} -> {load1[0]:.2f} on {os.cpu_count()} CPUs")

    import shtns  # noqa: PLC0415
    import pyshtools  # noqa: PLC0415

    meta = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": round(time.time() - t0, 2),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pyshtools": pyshtools.__version__,
        "shtns": getattr(shtns, "__version__", "3.x"),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "loadavg_start": load0,
        "loadavg_end": load1,
        "shtns_nthreads": sht_mod.SHTNS_NTHREADS,
        "shtns_polar_opt": sht_mod.SHTNS_POLAR_OPT,
        "budget_s_per_lmax": args.budget,
        "timer": "time.perf_counter per call; every round times raw/wrapper analyse/synthesise "
        "once each in rotating order; pyshtools every few rounds; medians",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
