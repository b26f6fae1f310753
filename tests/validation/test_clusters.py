"""Clusters of a density on S¹ (spherepde.validation.clusters): basins merged by mass."""
from __future__ import annotations

import numpy as np
import pytest

from spherepde.validation import clusters


def test_find_clusters_on_known_density():
    th = 2 * np.pi * np.arange(360) / 360
    rho = 1e-6 + np.exp(50 * (np.cos(th - 1.0) - 1)) + 2 * np.exp(50 * (np.cos(th - 4.0) - 1))
    cl = clusters.find_clusters(th, rho, 3.0)
    assert len(cl) == 2
    pos = sorted(c["position"] for c in cl)
    assert pos == pytest.approx([1.0, 4.0], abs=1e-3)
    masses = sorted(c["mass"] for c in cl)
    assert masses[1] / masses[0] == pytest.approx(2.0, rel=1e-3)


def lobed_clusters(n=512):
    """Four clusters (one at θ = 0, across the seam; two collapsed into a single cell; masses
    within a factor 2) with odd–even side lobes like those of the old 'positive' limiter: in
    each flank cells 2, 4, 6 away from the peak hold 5 %, 1 %, 0.2 % of the peak value, the
    cells between them 1/20 of that, over a floor 1e-8.  Returns θ, ρ, the cluster centres,
    their masses (Gaussian + lobes) and the floor."""
    th = 2 * np.pi * np.arange(n) / n
    dth = 2 * np.pi / n
    centres = np.array([0, 120, 250, 400])  # cell indices
    widths = np.array([3.0, 0.3, 5.0, 0.3])  # Gaussian σ in cells (0.3: one cell)
    heights = np.array([1.0, 6.0, 0.9, 4.0])
    floor = 1e-8
    rho = np.full(n, floor)
    masses = []
    for c, w, h in zip(centres, widths, heights):
        d = (np.arange(n) - c + n // 2) % n - n // 2
        bump = h * np.exp(-0.5 * (d / w) ** 2)
        peak = bump.max()
        half = int(np.ceil(3 * w))
        lobes = np.zeros(n)
        for k, a in ((2, 0.05), (4, 0.01), (6, 0.002)):
            for side in (1, -1):
                lobes[(c + side * (half + k)) % n] += a * peak
                lobes[(c + side * (half + k - 1)) % n] += a * peak / 20
        rho += bump + lobes
        masses.append(float((bump + lobes).sum() * dth))
    return th, rho, th[centres], np.array(masses), floor


def test_find_clusters_merges_side_lobes_by_mass():
    th, rho, centres, masses, floor = lobed_clusters()
    # without merging the lobes pass the peak threshold: the data can fool a lobe counter
    assert len(clusters.find_clusters(th, rho, 3.0, 0.0)) > 4
    cl = clusters.find_clusters(th, rho, 3.0)
    assert len(cl) == 4
    pos = np.array([c["position"] for c in cl])
    order = np.argsort(np.mod(pos + 0.1, 2 * np.pi))  # the θ = 0 cluster may sit just below 2π
    pos, m = pos[order], np.array([c["mass"] for c in cl])[order]
    # positions: the lobes are symmetric about their peak, so the centre is exact up to the
    # floor's pull (floor mass 2π·1e-8 against ≥ 0.008) and round-off
    np.testing.assert_allclose(np.angle(np.exp(1j * (pos - centres))), 0.0, atol=1e-5)
    # masses: each basin holds its cluster, its lobes and its share of the floor
    np.testing.assert_allclose(m, masses, atol=2 * np.pi * floor + 1e-12)
    assert sum(m) == pytest.approx(rho.sum() * 2 * np.pi / rho.size, rel=1e-12)
    # a real cluster a fifth of its neighbour's mass or heavier is kept
    th = 2 * np.pi * np.arange(360) / 360
    pair = np.exp(200 * (np.cos(th - 1.0) - 1)) + 0.25 * np.exp(200 * (np.cos(th - 1.3) - 1))
    assert len(clusters.find_clusters(th, pair + 1e-9, 3.0)) == 2
    assert len(clusters.find_clusters(th, pair + 1e-9, 3.0, 0.3)) == 1


def test_find_clusters_bad_input_and_flat_density():
    th = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    assert clusters.find_clusters(th, np.ones(16), 3.0) == []
    for kw, msg in (({"min_mass_ratio": 1.0}, "min_mass_ratio"),
                    ({"min_mass_ratio": -0.1}, "min_mass_ratio"), ({"factor": 0.0}, "factor")):
        args = {"factor": 3.0, **kw}
        with pytest.raises(ValueError, match=msg):
            clusters.find_clusters(th, np.ones(16), **args)
    with pytest.raises(ValueError, match="finite"):
        clusters.find_clusters(th, np.full(16, np.nan), 3.0)
    with pytest.raises(ValueError, match="shape"):
        clusters.find_clusters(th, np.ones(15), 3.0)
