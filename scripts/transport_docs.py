"""Measure the transport numbers that docs/transport.md, docs/transport-validation.md and
docs/weaknesses.md quote, and write them to docs/data/transport_docs.json.

    PYTHONPATH=. python3 scripts/transport_docs.py          # ≈ 10 min on 2 busy cores
    python3 scripts/docs_numbers.py                         # then re-render the pages

Every run is ``run_transport`` (what ``spherepde validate transport --json`` prints), Courant
0.8, the `positive` limiter, one period:

* ``williamson``: Williamson 1 (cosine bell) at α = π/2, π/2 − 0.05 and 0, with the split
  step alone (``--polar split``) and the default (``--polar auto``, the polar cap) at nlat 32,
  64, 128 (and the split at 256 for α = π/2), plus the split at nlat 60 and 120; derived:
  the orders between successive grids and the ratios to the α = 0 error;
* ``nl_case4``: Gaussian hills in the non-divergent Lauritzen et al. (2012) flow at nlat 60,
  120, 240 with the fitted l2 order (:func:`spherepde.validation.fits.fit_order`, with its
  standard error) and the ratios to the best published MPDATA column;
* ``mpdata``: the published MPDATA l2 errors and mixing diagnostics (Waruszewski et al. 2018),
  copied from the libmpdata++ reference data (see docs/transport-references.md); they are
  quoted, not measured, and kept here so that the pages and the ratios use one copy.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spherepde.experiments.transport import TransportConfig, run_transport  # noqa: E402
from spherepde.validation.fits import fit_order  # noqa: E402

HALF_PI = math.pi / 2
ALPHAS = {"pi_2": HALF_PI, "pi_2_minus_0_05": HALF_PI - 0.05, "0": 0.0}
KEEP = ("nlat", "alpha", "polar", "steps", "l1", "l2", "linf", "mass_error", "min_value", "seconds")

#: libmpdata++ tests/mp3_paper_JCP/reversing_deform/refdata: reversing_deform_conv.txt (l2 at
#: t = T by ny) and reversing_deform_mixing.txt (ny = 240) — Waruszewski et al. (2018)
MPDATA = {
    "source": "Waruszewski et al. (2018), J. Comput. Phys. 359, 361-379; libmpdata++ "
              "tests/mp3_paper_JCP/reversing_deform/refdata/reversing_deform_{conv,mixing}.txt",
    "l2": {"60": {"Mp3": 3.23e-1, "Mg3No": 2.67e-1, "Mg2No": 2.80e-1, "Mp3cc": 3.29e-1},
           "120": {"Mp3": 1.18e-1, "Mg3No": 9.86e-2, "Mg2No": 1.08e-1, "Mp3cc": 1.22e-1},
           "240": {"Mp3": 2.35e-2, "Mg3No": 2.18e-2, "Mg2No": 2.98e-2, "Mp3cc": 2.47e-2},
           "480": {"Mp3": 3.27e-3, "Mg3No": 3.19e-3, "Mg2No": 6.56e-3, "Mp3cc": 3.58e-3},
           "960": {"Mp3": 4.15e-4, "Mg3No": 4.39e-4, "Mg2No": 1.56e-3, "Mp3cc": 4.66e-4}},
    "mixing_ny240": {"l_r": {"Mp3": 1.28e-3, "Mg3No": 7.56e-4, "Mg2No": 8.85e-4, "Mp3cc": 1.64e-3},
                     "l_u": {"Mp3": 2.00e-4, "Mg3No": 2.32e-4, "Mg2No": 2.77e-4, "Mp3cc": 3.46e-4},
                     "l_o": {"Mp3": 6.99e-4, "Mg3No": 0, "Mg2No": 0, "Mp3cc": 7.14e-4}},
}


def _run(case: str, field: str, nlat: int, alpha: float = 0.0, polar: str = "auto") -> dict:
    r = run_transport(TransportConfig(case=case, field=field, nlat=nlat, alpha=alpha, polar=polar),
                      progress=False)
    print(f"{case} {field} nlat {nlat} alpha {alpha:.4f} {r['polar']}: l2 {r['l2']:.4g} "
          f"({r['seconds']:.1f} s)", flush=True)
    return {k: r[k] for k in KEEP if k in r}


def _order(e_coarse: float, e_fine: float) -> float:
    return math.log(e_coarse / e_fine) / math.log(2.0)


def williamson() -> dict:
    out: dict = {}
    grids = {"split": (32, 60, 64, 120, 128), "auto": (32, 64, 128)}
    for name, alpha in ALPHAS.items():
        out[name] = {}
        for polar, nlats in grids.items():
            runs = {str(n): _run("williamson1", "cosine-bell", n, alpha, polar) for n in nlats}
            if polar == "split" and name == "pi_2":
                runs["256"] = _run("williamson1", "cosine-bell", 256, alpha, polar)
            l2 = {n: r["l2"] for n, r in runs.items()}
            orders = {f"{a}_{b}": _order(l2[a], l2[b]) for a, b in (("32", "64"), ("64", "128"), ("128", "256"))
                      if a in l2 and b in l2}
            out[name][polar] = {"runs": runs, "l2": l2, "order": orders}
    zero = out["0"]
    for name in ("pi_2", "pi_2_minus_0_05"):
        for polar in ("split", "auto"):
            w = out[name][polar]
            w["ratio_to_alpha_0"] = {n: w["l2"][n] / zero[polar]["l2"][n] for n in w["l2"] if n in zero[polar]["l2"]}
    runs = [r for a in out.values() for p in a.values() for r in p["runs"].values()]
    out["max_abs_mass_error"] = max(abs(r["mass_error"]) for r in runs)
    out["min_value_cap"] = min(r["min_value"] for a in ALPHAS for r in out[a]["auto"]["runs"].values())
    return out


def nl_case4() -> dict:
    runs = {str(n): _run("nl-case4", "gaussian-hills", n) for n in (60, 120, 240)}
    nlat = [int(n) for n in runs]
    l2 = [runs[str(n)]["l2"] for n in nlat]
    order, se = fit_order([1.0 / n for n in nlat], l2)
    best = {n: min(MPDATA["l2"][n].values()) for n in ("60", "120", "240")}
    return {"runs": runs, "l2_order_fit": order, "l2_order_fit_se": se,
            "l2_order_120_240": _order(runs["120"]["l2"], runs["240"]["l2"]),
            "best_mpdata_over_spherepde": {n: best[n] / runs[n]["l2"] for n in best},
            "max_abs_mass_error": max(abs(r["mass_error"]) for r in runs.values()),
            "min_value": min(r["min_value"] for r in runs.values())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", default=str(ROOT / "docs" / "data" / "transport_docs.json"))
    a = ap.parse_args(argv)
    load, t0 = os.getloadavg()[0], time.time()
    data = {"script": "scripts/transport_docs.py",
            "command": "PYTHONPATH=. python3 scripts/transport_docs.py",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip(),
            "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
            "load_average_at_start": round(load, 2),
            "courant": 0.8, "limiter": "positive",
            "williamson": williamson(), "nl_case4": nl_case4(), "mpdata": MPDATA}
    data["seconds"] = round(time.time() - t0, 1)
    data["load_average_at_end"] = round(os.getloadavg()[0], 2)
    Path(a.output).write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {a.output} in {data['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
