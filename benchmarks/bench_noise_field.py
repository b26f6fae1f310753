"""Cost of the noise field at the FFSL face points: ring-wise evaluation against the dense basis.

    python benchmarks/bench_noise_field.py           # nlat 32, 64, 128 × n_max 4, 16, 32; writes
                                                     # results/noise_field.json
    python benchmarks/bench_noise_field.py --quick   # fewer repetitions, shorter samples
    python benchmarks/bench_noise_field.py --out PATH

What is timed: ``NoiseField.tangent_values(dw, points)`` (field + tangent projection) at the face
points of ``FFSLSphere(GaussGrid(nlat))`` (what ``spde-ffsl`` asks for every step), the noise of
bench_spde.py (``NoiseKernel("relu", d=3, σ_u=0.5, σ_w=0.5)``, n_max = 4, 16, 32), one increment
dw, each variant on its own NoiseField with its table built before timing:

* ``rings``    — the default: :class:`~spherepde.noise.field.LatitudeRings` (per-ring Legendre
                 sums, then an inverse real FFT on each ring), O(rings · K + P log nlon);
* ``dense``    — the tabulated basis Y_k(x_p) (K, P), one matrix product, O(P · K): the cached path
                 before ring-wise evaluation (the BASIS_CACHE_BYTES limit lifted for it here);
* ``spectral`` — ``SphericalHarmonics.evaluate`` every call (no table): what the code did before
                 when the dense basis exceeded BASIS_CACHE_BYTES (64 MiB: nlat 64 at n_max 32,
                 nlat 128 at n_max ≥ 16).

``old`` in the table is what the previous code used at that size (dense when the basis fits in
64 MiB, else spectral).  Variants are interleaved in a shuffled order within each repetition;
each sample is a batch of calls lasting ≥ ``min_sample`` s; reported: medians over repetitions of
the time per call and of the per-repetition ratios.  The largest difference between the variants'
values (relative to max |value|) is recorded.  BLAS runs single-threaded (as in bench_spde.py and
the ensemble workers) unless OPENBLAS_NUM_THREADS is set.  The machine is shared: only ratios
measured in the same run mean anything.
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import spherepde.noise.field as noise_field  # noqa: E402
from spherepde.grids import GaussGrid  # noqa: E402
from spherepde.noise import NoiseField, NoiseKernel  # noqa: E402
from spherepde.solvers.eulerian.transport import FFSLSphere  # noqa: E402

KERNEL = dict(activation="relu", d=3, sigma_u=0.5, sigma_w=0.5)
OLD_LIMIT = 64 * 2**20  # BASIS_CACHE_BYTES of the previous code


@contextlib.contextmanager
def _settings(ring_fraction=None, cache_bytes=None):
    saved = noise_field.RING_FRACTION, noise_field.BASIS_CACHE_BYTES
    if ring_fraction is not None:
        noise_field.RING_FRACTION = ring_fraction
    if cache_bytes is not None:
        noise_field.BASIS_CACHE_BYTES = cache_bytes
    try:
        yield
    finally:
        noise_field.RING_FRACTION, noise_field.BASIS_CACHE_BYTES = saved


def make_variants(points, nmax, dw):
    """name → (NoiseField with its table built, settings context factory)."""
    kernel = NoiseKernel(KERNEL["activation"], d=KERNEL["d"], sigma_u=KERNEL["sigma_u"],
                         sigma_w=KERNEL["sigma_w"])
    settings = {
        "rings": lambda: _settings(),
        "dense": lambda: _settings(ring_fraction=-1.0, cache_bytes=2**62),  # no rings, any size
        "spectral": lambda: _settings(cache_bytes=0),
    }
    out = {}
    for name, ctx in settings.items():
        f = NoiseField(kernel, nmax=nmax)
        with ctx():
            f.tangent_values(dw, points)
            f.tangent_values(dw, points)  # second call in a row: builds the table
        out[name] = (f, ctx)
    assert isinstance(out["rings"][0]._rings, noise_field.LatitudeRings)
    assert out["dense"][0]._basis is not None and out["dense"][0]._rings is None
    return out


def timed(fn, min_sample):
    """Seconds per call of fn, over a batch lasting ≥ min_sample."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        t = time.perf_counter() - t0
        if t >= min_sample:
            return t / n


def bench_case(nlat, nmax, reps, min_sample, rng):
    grid = GaussGrid(nlat)
    points = FFSLSphere(grid, lambda t, x: np.zeros_like(x)).points
    dw = 0.1 * rng.standard_normal(NoiseField(NoiseKernel("relu", d=3), nmax=nmax).shape)
    variants = make_variants(points, nmax, dw)
    vals = {}
    for name, (f, ctx) in variants.items():
        with ctx():
            vals[name] = f.tangent_values(dw, points)
    scale = np.abs(vals["spectral"]).max()
    diff = {f"{a}_vs_{b}": float(np.abs(vals[a] - vals[b]).max() / scale)
            for a, b in (("rings", "dense"), ("rings", "spectral"), ("dense", "spectral"))}
    times = {name: [] for name in variants}
    names = list(variants)
    for _ in range(reps):
        rng.shuffle(names)
        for name in names:
            f, ctx = variants[name]
            with ctx():
                times[name].append(timed(lambda f=f: f.tangent_values(dw, points), min_sample))
    t = {k: np.array(v) for k, v in times.items()}
    dense_fits_old = points.shape[0] * variants["rings"][0].n_coefficients * 8 <= OLD_LIMIT
    old = "dense" if dense_fits_old else "spectral"
    rings = variants["rings"][0]._rings
    row = {
        "nlat": nlat, "nmax": nmax, "n_points": int(points.shape[0]),
        "n_coefficients": int(variants["rings"][0].n_coefficients),
        "n_rings": rings.n_rings, "rings_fft_groups": len(rings.layout.fft_groups),
        "rings_direct": int(rings.layout.direct.size), "ring_table_bytes": rings.nbytes,
        "dense_basis_bytes": int(points.shape[0] * variants["rings"][0].n_coefficients * 8),
        "old_path": old,
        "median_s": {k: float(np.median(v)) for k, v in t.items()},
        "samples_s": {k: v.tolist() for k, v in t.items()},
        "ratio_dense_to_rings": float(np.median(t["dense"] / t["rings"])),
        "ratio_spectral_to_rings": float(np.median(t["spectral"] / t["rings"])),
        "ratio_old_to_rings": float(np.median(t[old] / t["rings"])),
        "max_rel_difference": diff,
    }
    m = row["median_s"]
    print(f"  {nlat:4d} {nmax:5d} {points.shape[0]:7d} {m['rings']*1e3:9.3f} {m['dense']*1e3:9.3f} "
          f"{m['spectral']*1e3:9.3f}  {old:8s} {row['ratio_old_to_rings']:8.1f} "
          f"{row['ratio_dense_to_rings']:8.1f}   {diff['rings_vs_dense']:.1e} "
          f"{diff['rings_vs_spectral']:.1e}", flush=True)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="3 repetitions, 0.05 s samples")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "noise_field.json")
    args = p.parse_args(argv)
    reps = args.reps or (3 if args.quick else 7)
    min_sample = 0.05 if args.quick else 0.2
    rng = np.random.default_rng(0)
    load_start = list(os.getloadavg())
    t_start = time.perf_counter()
    print(f"NoiseField.tangent_values at the FFSL face points; {reps} interleaved repetitions, medians; "
          f"BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS')}")
    print("  nlat  nmax  points  rings ms  dense ms  spectral ms old  old/rings dense/rings  "
          "|rings−dense| |rings−spectral| (rel. to max)")
    rows = [bench_case(nlat, nmax, reps, min_sample, rng) for nlat in (32, 64, 128) for nmax in (4, 16, 32)]
    result = {
        "description": "NoiseField.tangent_values at the FFSL face points of GaussGrid(nlat): ring-wise "
                       "(LatitudeRings) vs the dense cached basis vs SphericalHarmonics.evaluate",
        "kernel": KERNEL, "reps": reps, "min_sample_s": min_sample,
        "old_basis_cache_bytes": OLD_LIMIT, "rows": rows,
        "seconds": time.perf_counter() - t_start,
        "load_average_at_start": load_start, "load_average_at_end": list(os.getloadavg()),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "machine": platform.machine(), "cpus": os.cpu_count()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
