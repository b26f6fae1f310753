"""Refinement and coarsening of the AMR leaves (:mod:`.amr`): the mesh follows the mass.

Criterion (equidistribution of mass).  A refinable leaf splits into its children (2×2 on S²,
2 on S¹: :meth:`FaceMesh.children`) when its
mass, or the mass it would hold at its densest neighbour's density, exceeds ``m_split``; four
sibling leaves (2 on S¹) merge into their parent when none is flagged, their total mass is below
``m_split/8`` and the parent would keep the 2:1 balance.  Leaves next to a leaf that would end
two levels finer split as well (2:1 balance).

Mass transfer.  A parent's mass m goes to its children by the limited linear reconstruction
ρ + s·(x_child − x_parent) (clipped at 0) times the child areas, rescaled so that the children
hold exactly m (equal quarters if the reconstruction vanishes): conservative and positive.
Merged leaves give their parent the sum of their masses.  Masses (n,) are leaf masses, not
densities.
"""
from __future__ import annotations

import numpy as np

from spherepde.solvers.eulerian.amr_mesh import FaceMesh


def flags(mesh: FaceMesh, m: np.ndarray, m_split: float) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray | None]:
    """(split (n,) bool, merge (n,) bool, parent key (n,) int64 or None) for masses m (n,)."""
    n = mesh.n
    rho = m / mesh.area
    dens = np.maximum(rho, mesh.neighbour_max(rho))
    split = mesh.refinable() & (dens * mesh.area > m_split)
    for _ in range(mesh.lmax + 1):  # 2:1 balance against the new levels
        new = mesh.level + split
        bad = np.zeros(n, bool)
        np.logical_or.at(bad, mesh.fa, new[mesh.fb] > new[mesh.fa] + 1)
        np.logical_or.at(bad, mesh.fb, new[mesh.fa] > new[mesh.fb] + 1)
        add = bad & mesh.refinable() & ~split
        if not add.any():
            break
        split |= add
    merge = np.zeros(n, bool)
    cand = (mesh.level > 0) & ~split
    if not cand.any():
        return split, merge, None
    s2 = 2 * (mesh.S >> mesh.level)
    key = (mesh.level * (mesh.NY + 1) + mesh.y0 // s2) * (mesh.NX + 1) + mesh.x0 // s2
    keys, inv, cnt = np.unique(np.where(cand, key, -1), return_inverse=True, return_counts=True)
    tot = np.bincount(inv, weights=m, minlength=keys.size)
    # the parent (level − 1) must not be two levels coarser than any neighbour after the split
    lev_nb = np.zeros(n, np.int64)
    np.maximum.at(lev_nb, mesh.fa, mesh.level[mesh.fb] + split[mesh.fb])
    np.maximum.at(lev_nb, mesh.fb, mesh.level[mesh.fa] + split[mesh.fa])
    gmax = np.zeros(keys.size, np.int64)
    np.maximum.at(gmax, inv, lev_nb)
    glev = np.zeros(keys.size, np.int64)
    np.maximum.at(glev, inv, mesh.level)
    ok = (keys >= 0) & (cnt == mesh.nchildren) & (tot < m_split / 8) & (gmax <= glev)
    merge = cand & ok[inv]
    return split, merge, key


def adapt(mesh: FaceMesh, m: np.ndarray, m_split: float, limiter, capacity: int,
          indicator: np.ndarray | None = None):
    """New (leaves (n', 5) int64, masses (n',)) after one pass of splitting and merging, or
    None when nothing changes.  RuntimeError when the leaves would exceed ``capacity``.
    ``indicator`` (n,) ≥ 0: what the criterion equidistributes instead of the mass (the leaves are
    flagged by max(m, indicator)); the masses are moved as always."""
    split, merge, key = flags(mesh, m if indicator is None else np.maximum(m, indicator), m_split)
    if not split.any() and not merge.any():
        return None
    c = mesh.nchildren
    n_new = mesh.n + (c - 1) * int(split.sum()) - (c - 1) * int(merge.sum()) // c
    if n_new > capacity:
        raise RuntimeError(
            f"the adaptive mesh needs {n_new} leaves, more than max_cells = {capacity}: raise "
            f"max_cells, or lower lmax or raise mass_per_cell")
    rho = m / mesh.area
    sl = mesh.slopes(rho, limiter)
    keep = ~split & ~merge
    fi = np.flatnonzero(split)
    children, cmass = mesh.children(fi, rho, sl)  # (c·k, 5), (c, k)
    tot = cmass.sum(0)
    cmass = np.where(tot > 0, cmass * (m[fi] / np.where(tot > 0, tot, 1.0)), m[fi] / mesh.nchildren)
    mi = np.flatnonzero(merge)
    pm: np.ndarray
    parents: np.ndarray
    if mi.size:
        assert key is not None  # merging leaves have parent keys
        pk, pinv = np.unique(key[mi], return_inverse=True)
        pm = np.bincount(pinv, weights=m[mi])
        big = np.iinfo(np.int64).max
        px0 = np.full(pk.size, big)
        py0 = np.full(pk.size, big)
        px1 = np.zeros(pk.size, np.int64)
        py1 = np.zeros(pk.size, np.int64)
        np.minimum.at(px0, pinv, mesh.x0[mi])
        np.minimum.at(py0, pinv, mesh.y0[mi])
        np.maximum.at(px1, pinv, mesh.x1[mi])
        np.maximum.at(py1, pinv, mesh.y1[mi])
        plev = np.zeros(pk.size, np.int64)
        np.maximum.at(plev, pinv, mesh.level[mi] - 1)
        parents = np.stack([px0, px1, py0, py1, plev], 1)
    else:
        pm, parents = np.zeros(0), np.zeros((0, 5), np.int64)
    # children stored leaf by leaf (consecutive rows)
    leaves = np.concatenate([mesh.leaves[keep], children, parents])
    masses = np.concatenate([m[keep], cmass.T.reshape(-1), pm])
    return leaves, masses
