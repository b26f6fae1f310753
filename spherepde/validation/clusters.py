"""Clusters of a density on the circle S¹: basins between local minima, merged by mass.

A pure analysis of one array of cell values (used by ``spherepde experiment circle-clusters``
and by the positivity tests of the limiters).
"""
from __future__ import annotations

import math

import numpy as np


def find_clusters(theta: np.ndarray, rho: np.ndarray, factor: float,
                  min_mass_ratio: float = 0.2) -> list[dict]:
    """Clusters of a density on S¹ (cell values ``rho`` at angles ``theta``), merged by mass.

    1. Basins: the circle is cut at the local minima of ``rho`` (ρ_i ≤ ρ_{i−1}, ρ_i < ρ_{i+1});
       each basin runs from one minimum to the next, the cell of a minimum split half and half
       between its two basins, so the basin masses add up to the total mass Σρ·Δθ.
    2. Merging by mass: each basin faces the neighbour across the *higher* of its two bounding
       minima (the weaker separation, towards its cluster for a lobe).  While some basin holds
       less than ``min_mass_ratio`` × the mass of that neighbour, the one with the smallest
       such ratio is merged into it (the minimum between them is dropped).  A grid-scale side
       lobe (an odd–even wiggle in a cluster's flank) is a satellite of its cluster: measured
       on the oscillating runs of the old ``positive`` limiter (S¹, n = 1024, β = 3…100),
       lobes held 0.6–7 % of the mass of the cluster next to them, neighbouring clusters
       58–170 % of each other.  A cluster's width cannot make the distinction (a collapsed
       cluster is one cell wide, like a lobe), nor its share of the total mass (that falls like
       1/number of clusters).  So a cluster lighter than ``min_mass_ratio`` of the neighbour
       it is least separated from is counted with it.
    3. A merged basin is a cluster when its highest value exceeds ``factor`` × the mean of
       ``rho``.  Reported per cluster: ``mass`` (the basin's), ``position`` (the centre of the
       basin's mass above its lowest value, which would bias it) and ``peak`` (highest value).

    ``min_mass_ratio`` ∈ [0, 1): 0 counts every local maximum above the threshold, lobes
    included (the behaviour before the merging).
    """
    rho = np.asarray(rho, float)
    theta = np.asarray(theta, float)
    if rho.ndim != 1 or theta.shape != rho.shape:
        raise ValueError(f"theta and rho must be 1-D arrays of one shape, got {theta.shape} and "
                         f"{rho.shape}")
    if not np.all(np.isfinite(rho)):
        raise ValueError("rho must be finite")
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a positive number, got {factor!r}")
    if not (0.0 <= min_mass_ratio < 1.0):
        raise ValueError(f"min_mass_ratio must be in [0, 1), got {min_mass_ratio!r}")
    n = rho.size
    left, right = np.roll(rho, 1), np.roll(rho, -1)
    threshold = factor * rho.mean()
    if not np.any((rho > left) & (rho >= right) & (rho > threshold)):
        return []
    cell_mass = rho * (2 * np.pi / n)
    # basin k runs from the minimum bounds[k] to bounds[k + 1] (cyclically)
    bounds = np.nonzero((rho <= left) & (rho < right))[0]
    if bounds.size == 0:  # a flat floor has no strict minimum: one basin, the whole circle
        bounds = np.array([int(np.argmin(rho))])
    # masses from the cumulative sum over two turns: strictly between minima a < b (unrolled)
    # C[b] − C[a + 1], plus half of each minimum's own cell
    csum = np.concatenate([[0.0], np.cumsum(np.concatenate([cell_mass, cell_mass]))])
    ends = np.append(bounds[1:], bounds[0] + n)
    masses = csum[ends] - csum[bounds + 1] + 0.5 * (cell_mass[bounds] + cell_mass[ends % n])
    bounds_l: list[int] = [int(b) for b in bounds]
    masses_l: list[float] = list(masses)
    while len(bounds_l) > 1:
        m = np.asarray(masses_l)
        lo = rho[bounds_l]  # left minimum of each basin; the right one is that of the next basin
        hi = np.roll(lo, -1)
        right = hi >= lo  # the higher minimum is on the right: merge with basin k + 1
        ratio = m / np.where(right, np.roll(m, -1), np.roll(m, 1))
        k = int(np.argmin(ratio))
        if not ratio[k] < min_mass_ratio:
            break
        # dropping the minimum bounds_l[j] merges basins j − 1 and j: with basin k + 1 that is
        # j = k + 1, with basin k − 1 it is j = k
        K = len(bounds_l)
        j = (k + 1) % K if right[k] else k
        masses_l[(j - 1) % K] += masses_l[j]
        del bounds_l[j], masses_l[j]
    out = []
    K = len(bounds_l)
    for k in range(K):
        a = bounds_l[k]
        b = bounds_l[(k + 1) % K] if K > 1 else a + n
        b = b if b > a else b + n
        idx = np.arange(a, b + 1) % n
        vals = rho[idx]
        if not vals.max() > threshold:
            continue
        lift = vals - vals.min()
        ang = np.angle(np.sum(lift * np.exp(1j * theta[idx])))
        out.append({"position": float(np.mod(ang, 2 * np.pi)), "mass": float(masses_l[k]),
                    "peak": float(vals.max())})
    return out


__all__ = ["find_clusters"]
