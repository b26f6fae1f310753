"""Figures of a run file (``spherepde plot DIR/run.nc``): density maps on the sphere, diagnostic
time series and an animation, made with plain matplotlib (Agg).

Maps are rasters: every pixel is mapped back to the sphere (the inverse projection) and takes
the value of the finite-volume cell it falls in, so the picture shows the cell averages exactly,
with no interpolation and no seam.  The projections, with (λ, φ) longitude and latitude:

* **orthographic** about a view centre c (unit vector) with basis (e, n, c), e = east, n = north
  at c:  (x, y) = (⟨p, e⟩, ⟨p, n⟩), visible where ⟨p, c⟩ ≥ 0; the disc x² + y² ≤ 1.
* **Mollweide** about a central longitude λ₀:  2θ + sin 2θ = π sin φ,
  x = (2√2/π)(λ − λ₀) cos θ,  y = √2 sin θ, with λ − λ₀ wrapped into [−π, π); the ellipse
  |x| ≤ 2√2, |y| ≤ √2.

The view centre of an orthographic panel is the mass's mean direction, or for two antipodal
clusters the heavier end of its principal axis (:func:`mass_centre`), so a cluster sits in the
middle of its disc; the far side gets its own row when it holds more than 10 % of the mass;
the Mollweide map puts its edge at the longitude holding the least mass
(:func:`quiet_longitude`), so that no cluster is split at the date line.  On S¹ the density is
drawn as lines and as a space–time map.

Files written by :func:`plot_run` (``OUT`` = ``--output``, default the folder of run.nc)::

    S²   OUT/density_orthographic.png, OUT/density_mollweide.png   (≤ 4 times, particles overlaid)
    S¹   OUT/density_circle.png
    both OUT/diagnostics.png (one panel per diagnostic group), OUT/animation.gif (or .mp4)
    no grid (grid.kind = "none", d ≥ 4)   OUT/diagnostics.png only
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from spherepde.grids import CircleGrid, GaussGrid, grid_from_dict
from spherepde.grids.geometry import lonlat_to_xyz, xyz_to_lonlat
from spherepde.validation.fits import log_rate
from spherepde.noise.kernel import synchronisation_rate

SQRT2 = math.sqrt(2.0)
#: the colour scale is logarithmic when max/min of the shown density exceeds this
LOG_SPAN = 100.0
#: how many decades below the maximum a logarithmic scale shows
LOG_DECADES = 3.0


# ---- projections ------------------------------------------------------------------------------
def view_basis(centre) -> np.ndarray:
    """Rows (e, n, c) of the orthographic view about ``centre`` (3,), shape (3, 3).

    c = centre/|centre|; e = ẑ × c normalised (east; x̂-based when c is at a pole); n = c × e."""
    c = np.asarray(centre, float)
    c = c / np.linalg.norm(c)
    e = np.cross([0.0, 0.0, 1.0], c)
    if np.linalg.norm(e) < 1e-9:  # at a pole: "up" is −x̂ seen from +ẑ
        e = np.cross(c, [1.0, 0.0, 0.0]) if c[2] > 0 else np.cross([1.0, 0.0, 0.0], c)
        e = np.array([0.0, 1.0, 0.0]) if np.linalg.norm(e) < 1e-9 else e
    e = e / np.linalg.norm(e)
    return np.stack([e, np.cross(c, e), c])


def orthographic(xyz, centre) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orthographic projection of points ``xyz`` (..., 3) about ``centre`` (3,).

    Returns x, y (...,) in the unit disc and ``visible`` (...,), ⟨p, c⟩ ≥ 0 (the near side)."""
    b = view_basis(centre)
    p = np.asarray(xyz, float) @ b.T
    return p[..., 0], p[..., 1], p[..., 2] >= 0.0


def orthographic_inverse(x, y, centre) -> tuple[np.ndarray, np.ndarray]:
    """Points (..., 3) of the near side that project to (x, y), and ``inside`` (x² + y² ≤ 1)."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    r2 = x**2 + y**2
    z = np.sqrt(np.clip(1.0 - r2, 0.0, None))
    return np.stack([x, y, z], axis=-1) @ view_basis(centre), r2 <= 1.0


def _wrap(dlon):
    """Angles wrapped into [−π, π)."""
    return np.mod(np.asarray(dlon, float) + np.pi, 2.0 * np.pi) - np.pi


def mollweide(lon, lat, lon0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mollweide projection of (λ, φ) in radians (broadcast shapes) about λ₀; returns x, y.

    θ solves 2θ + sin 2θ = π sin φ (monotone in θ: bisection to machine precision)."""
    lon, lat = np.broadcast_arrays(np.asarray(lon, float), np.asarray(lat, float))
    target = np.pi * np.sin(lat)
    lo, hi = np.full(lat.shape, -np.pi / 2), np.full(lat.shape, np.pi / 2)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = 2 * mid + np.sin(2 * mid) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    theta = 0.5 * (lo + hi)
    theta = np.where(np.abs(target) >= np.pi, np.sign(target) * np.pi / 2, theta)  # the poles exactly
    return 2 * SQRT2 / np.pi * _wrap(lon - lon0) * np.cos(theta), SQRT2 * np.sin(theta)


def mollweide_inverse(x, y, lon0: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(λ, φ) in radians of map points (x, y), and ``inside`` (the ellipse), each (...)."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    theta = np.arcsin(np.clip(y / SQRT2, -1.0, 1.0))
    lat = np.arcsin(np.clip((2 * theta + np.sin(2 * theta)) / np.pi, -1.0, 1.0))
    cos_t = np.cos(theta)
    with np.errstate(divide="ignore", invalid="ignore"):
        dlon = np.where(cos_t > 1e-12, np.pi * x / (2 * SQRT2 * np.where(cos_t > 1e-12, cos_t, 1.0)), 0.0)
    inside = (x / (2 * SQRT2))**2 + (y / SQRT2)**2 <= 1.0
    return np.mod(lon0 + dlon, 2 * np.pi), lat, inside


def cell_index(grid: GaussGrid, lon, lat) -> tuple[np.ndarray, np.ndarray]:
    """Indices (j, i) of the cells of ``grid`` holding the points (λ, φ) (radians, (...))."""
    j = np.searchsorted(-grid.lat_faces, -np.asarray(lat, float), side="right") - 1
    i = np.floor((np.asarray(lon, float) - grid.lon_faces[0]) / grid.dlon).astype(int)
    return np.clip(j, 0, grid.nlat - 1), np.mod(i, grid.nlon)


# ---- where to look ----------------------------------------------------------------------------
def mass_centre(xyz, w) -> np.ndarray:
    """A view centre (3,) for the measure Σ w_i δ_{x_i} (``xyz`` (n, 3), ``w`` (n,)).

    The mean direction m/|m|, m = Σ w_i x_i, when the mass is mostly on one side (|m| > 1/2:
    all clusters in one hemisphere).  Otherwise the principal axis of the second moment
    M = Σ w_i x_i x_iᵀ signed towards m, when M has a clear top eigenvalue (gap > 0.05): it
    points at the heavier of two antipodal clusters.  Otherwise m/|m|, and (lon 0, lat 30°) for a
    measure with neither."""
    xyz, w = np.asarray(xyz, float).reshape(-1, 3), np.asarray(w, float).ravel()
    w = w / w.sum()
    m = w @ xyz
    if np.linalg.norm(m) > 0.5:
        return m / np.linalg.norm(m)
    vals, vecs = np.linalg.eigh((xyz * w[:, None]).T @ xyz)
    if vals[2] - vals[1] > 0.05:
        v = vecs[:, 2]
        return -v if v @ m < 0 else v
    if np.linalg.norm(m) > 1e-3:
        return m / np.linalg.norm(m)
    return lonlat_to_xyz(0.0, math.radians(30.0))


def quiet_longitude(lon, w, bins: int = 72) -> float:
    """The longitude (radians) farthest inside the emptiest stretch of Σ w_i δ at ``lon`` (...):
    a histogram of ``bins`` bins, smoothed over ±2 bins around the circle; of the bins within
    1 % of the largest bin of the lightest one, the middle of the longest circular run."""
    h, _ = np.histogram(np.mod(np.ravel(lon), 2 * np.pi), bins=bins, range=(0, 2 * np.pi),
                        weights=np.ravel(w))
    smooth = np.zeros_like(h)
    for s in range(-2, 3):
        smooth += np.roll(h, s)
    light = smooth <= smooth.min() + 0.01 * (smooth.max() - smooth.min())
    if light.all():
        return math.pi
    start = int(np.argmin(light))  # a heavy bin: runs of light bins start after it
    best, run, best_mid = 0, 0, 0.0
    for k in range(1, bins + 1):
        b = (start + k) % bins
        run = run + 1 if light[b] else 0
        if run > best:
            best, best_mid = run, b - (run - 1) / 2
    return (best_mid % bins + 0.5) * 2 * np.pi / bins


# ---- reading a run file -----------------------------------------------------------------------
@dataclass
class RunData:
    """What the figures need from one run.nc.

    grid : GaussGrid, CircleGrid or None (grid.kind = "none": tokens in R^d, d ≥ 4); times : (k,);
    density : (k, *grid.shape) or None;
    positions : (k, N, d) or None (particles), tokens : (k, N_T, d) or None (transformer);
    series : name -> (k,) diagnostics; long_names : name -> text; label : a one-line title;
    config : the run's configuration (config_json), {} when the file has none; status : the file's
    status ("complete", "interrupted" or "running"), said in the label when it is not complete;
    energy_beta : the β of the energy diagnostics (their ``beta`` attribute), None without one."""

    path: Path
    grid: GaussGrid | CircleGrid | None
    times: np.ndarray
    density: np.ndarray | None = None
    positions: np.ndarray | None = None
    tokens: np.ndarray | None = None
    series: dict = field(default_factory=dict)
    long_names: dict = field(default_factory=dict)
    label: str = ""
    config: dict = field(default_factory=dict)
    status: str = "complete"
    energy_beta: float | None = None

    @property
    def sphere(self) -> bool:
        return isinstance(self.grid, GaussGrid)

    @property
    def gauss_grid(self) -> GaussGrid:
        """The grid of a density on S² (for the figures that draw one)."""
        assert isinstance(self.grid, GaussGrid), "a density on S²"
        return self.grid

    @property
    def circle_grid(self) -> CircleGrid:
        """The grid of a density on S¹ (for the figures that draw one)."""
        assert isinstance(self.grid, CircleGrid), "a density on S¹"
        return self.grid

    @property
    def points(self) -> np.ndarray:
        """The particles' positions (k, N, d), else the transformer's tokens."""
        pts = self.positions if self.positions is not None else self.tokens
        assert pts is not None, "a run with particles or tokens"
        return pts

    def valid(self) -> np.ndarray:
        """Indices of the output times that were written (an interrupted run leaves NaN)."""
        ok = np.ones(self.times.size, bool)
        for a in (self.density, self.positions, self.tokens):
            if a is not None:
                ok &= np.all(np.isfinite(a.reshape(a.shape[0], -1)), axis=1)
        return np.flatnonzero(ok)


def _not_a_run(path, why: str) -> ValueError:
    return ValueError(f"{str(path)!r} is not a spherepde run file ({why}); give the run.nc that "
                      f"`spherepde run` or `spherepde demo` wrote")


def read_run(path: str | os.PathLike) -> RunData:
    """Read a run.nc; ValueError naming the path when it is missing, a folder, not NetCDF or not a
    spherepde run file."""
    import netCDF4

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a folder; give the run file, e.g. {str(path / 'run.nc')!r}")
    if not path.exists():
        raise ValueError(f"{str(path)!r}: no such file")
    try:
        ds = netCDF4.Dataset(path, "r")
    except OSError as err:
        raise _not_a_run(path, f"cannot be read as NetCDF: {err}") from None
    with ds:
        attrs = ds.ncattrs()
        if "grid_json" not in attrs or "time" not in ds.variables:
            raise _not_a_run(path, "no grid_json attribute or time variable")
        try:
            gd = json.loads(ds.getncattr("grid_json"))
            grid = None if gd.get("kind") == "none" else grid_from_dict(gd)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise _not_a_run(path, f"grid_json: {err}") from None
        if not any(v.dimensions[:1] == ("time",) and name != "time" for name, v in ds.variables.items()):
            raise _not_a_run(path, "no variable over time (density, positions or diagnostics)")

        def get(name):
            if name not in ds.variables:
                return None
            v = ds[name]
            v.set_auto_mask(False)
            return np.asarray(v[...], float)

        data = RunData(path, grid, get("time"), get("density"), get("position"),
                       get("transformer_position"))
        for name, v in ds.variables.items():
            if v.dimensions == ("time",) and name != "time":
                data.series[name] = get(name)
                data.long_names[name] = getattr(v, "long_name", name)
                if name.endswith("energy") and "beta" in v.ncattrs():
                    data.energy_beta = float(v.getncattr("beta"))
        if "config_json" in attrs:
            data.config = json.loads(ds.getncattr("config_json"))
            data.label = _config_label(data.config, data)
        data.status = str(ds.getncattr("status")) if "status" in attrs else "complete"
    if data.status != "complete":
        data.label += f" [{data.status} at t = {_last_written(data):g}]"
    return data


def _last_written(data: RunData) -> float:
    """The last output time at which any representation or diagnostic was written (NaN: none)."""
    written = np.zeros(data.times.size, bool)
    for a in (data.density, data.positions, data.tokens, *data.series.values()):
        if a is not None:
            written |= np.any(np.isfinite(a.reshape(a.shape[0], -1)), axis=1)
    return float(data.times[written][-1]) if written.any() else math.nan


def _sup(n: int) -> str:
    """n in superscript digits (S⁴)."""
    return str(n).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _config_label(cfg: dict, data: RunData) -> str:
    """``S², nlat 24, β = 30; density + 400 particles`` from the stored configuration."""
    parts = []
    g = cfg.get("grid", {})
    parts.append(f"S², nlat {g['nlat']}" if g.get("kind") == "sphere" and "nlat" in g
                 else f"S¹, n {g['n']}" if "n" in g
                 else f"S{_sup(g['dimension'] - 1)} ⊂ R{_sup(g['dimension'])}, no grid"
                 if "dimension" in g
                 else "")
    att = (cfg.get("dynamics") or {}).get("attention") or {}
    if "beta" in att:
        parts.append(f"β = {att['beta']:g}" if isinstance(att["beta"], (int, float)) else f"β = {att['beta']}")
    if (cfg.get("dynamics") or {}).get("noise"):
        parts.append(f"{cfg['dynamics']['noise'].get('activation', '')} noise")
    reps = []
    if data.density is not None:
        reps.append("density")
    if data.positions is not None:
        reps.append(f"{data.positions.shape[1]} particles")
    if data.tokens is not None:
        reps.append(f"transformer ({data.tokens.shape[1]} tokens)")
    return ", ".join(p for p in parts if p) + ("; " + " + ".join(reps) if reps else "")


# ---- choosing times and scales ----------------------------------------------------------------
def pick_times(data: RunData, k: int = 4) -> np.ndarray:
    """≤ k output indices to show: the first and last written, the minimum of ``w2_projection``
    (the metastable state) and the switch of ``dist_eigenspace_V`` below ``dist_eigenspace``
    (the terminal phase) when the run has them, then evenly spaced times."""
    valid = data.valid()
    if valid.size <= k:
        return valid
    chosen = [valid[0], valid[-1]]
    s = data.series
    w2 = s.get("w2_projection", s.get("particles_w2_projection"))
    if w2 is not None and np.isfinite(w2[valid]).any():
        chosen.append(valid[int(np.nanargmin(np.where(np.isfinite(w2[valid]), w2[valid], np.inf)))])
    dE, dV = s.get("dist_eigenspace"), s.get("dist_eigenspace_V")
    if dE is not None and dV is not None:
        below = valid[(dV[valid] < dE[valid])]
        if below.size:
            chosen.append(below[0])
    gap = max(1, (valid.size - 1) // (2 * k))  # chosen times at least this many outputs apart
    out: list[int] = []
    for i in chosen + list(valid[np.linspace(0, valid.size - 1, k).round().astype(int)]):
        if len(out) < k and all(abs(int(i) - j) >= gap for j in out):
            out.append(int(i))
    return np.array(sorted(out))


def density_norm(values, log: bool | None = None):
    """A shared colour scale for the densities ``values`` (any shape): linear from 0, or
    logarithmic over :data:`LOG_DECADES` decades below the maximum when ``log`` is True or, for
    ``log=None``, when max/min of the positive values exceeds :data:`LOG_SPAN`."""
    from matplotlib.colors import LogNorm, Normalize

    v = np.asarray(values, float)
    vmax = float(np.nanmax(v)) if np.isfinite(v).any() else 1.0
    vmax = vmax if vmax > 0 else 1.0
    pos = v[v > 0]
    if log is None:
        log = pos.size > 0 and vmax / float(pos.min()) > LOG_SPAN
    if log:
        return LogNorm(vmin=vmax * 10**-LOG_DECADES, vmax=vmax)
    return Normalize(vmin=0.0, vmax=vmax)


# ---- rasters ----------------------------------------------------------------------------------
def ortho_raster(grid: GaussGrid, centre, npix: int = 241):
    """Pixel → cell map of an orthographic disc about ``centre``: (j, i, inside) each
    (npix, npix), rows from y = +1 (top) to −1."""
    s = np.linspace(-1.0, 1.0, npix)
    x, y = np.meshgrid(s, s[::-1])
    p, inside = orthographic_inverse(x, y, centre)
    lon, lat = xyz_to_lonlat(p)
    j, i = cell_index(grid, lon, lat)
    return j, i, inside


def mollweide_raster(grid: GaussGrid, lon0: float, width: int = 361):
    """Pixel → cell map of a Mollweide map about λ₀: (j, i, inside) each (width//2 + 1, width),
    rows from y = +√2 (top) to −√2."""
    xs = np.linspace(-2 * SQRT2, 2 * SQRT2, width)
    ys = np.linspace(SQRT2, -SQRT2, width // 2 + 1)
    x, y = np.meshgrid(xs, ys)
    lon, lat, inside = mollweide_inverse(x, y, lon0)
    j, i = cell_index(grid, lon, lat)
    return j, i, inside


def _image(field2d, raster):
    j, i, inside = raster
    return np.ma.masked_where(~inside, field2d[j, i])


def _lat_text(deg: float) -> str:
    """30°N, 45°S, 0° for a latitude in degrees."""
    d = int(round(deg))
    return "0°" if d == 0 else f"{abs(d)}°{'N' if d > 0 else 'S'}"


def _graticule_ortho(ax, centre, step: float = 30.0, colour: str = "w") -> None:
    """Meridians and parallels every ``step`` degrees on the near side, and the disc's rim."""
    t = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(t), np.sin(t), color="0.3", lw=0.8)
    ll = np.radians(np.linspace(-90, 90, 181))
    for lon in np.radians(np.arange(0, 360, step)):
        x, y, vis = orthographic(lonlat_to_xyz(lon, ll), centre)
        ax.plot(np.where(vis, x, np.nan), np.where(vis, y, np.nan), color=colour, lw=0.4, alpha=0.5)
    lo = np.radians(np.linspace(0, 360, 361))
    for lat in np.radians(np.arange(-90 + step, 90, step)):
        x, y, vis = orthographic(lonlat_to_xyz(lo, lat), centre)
        ax.plot(np.where(vis, x, np.nan), np.where(vis, y, np.nan), color=colour, lw=0.4, alpha=0.5)


def _lon_text(deg: float) -> str:
    """60°E, 120°W, 0°, 180° for a longitude in degrees."""
    d = int(round((deg + 180) % 360 - 180))
    return "180°" if d == -180 else "0°" if d == 0 else f"{abs(d)}°{'E' if d > 0 else 'W'}"


def label_free(lonlat, w, label_lon: float, *, half_width: float = 22.0,
               half_height: float = 12.0) -> bool:
    """Whether a longitude label at (``label_lon`` degrees, the equator) covers no more mass than
    a uniform density would: the share of ``w`` (at ``lonlat``, radians) within ± ``half_width``
    degrees of longitude and ± ``half_height`` of latitude of it is at most that box's share of
    the sphere's area.  A label is drawn over thin or empty regions, never over a cluster."""
    lon, lat = lonlat
    dlon = np.abs(np.degrees(_wrap(lon - math.radians(label_lon))))
    near = (dlon <= half_width) & (np.abs(np.degrees(lat)) <= half_height)
    area_share = math.radians(2 * half_width) * 2 * math.sin(math.radians(half_height)) / (4 * math.pi)
    return float(w[near].sum()) <= area_share * float(w.sum())


def _graticule_mollweide(ax, lon0: float, step: float = 30.0, colour: str = "w",
                         free=lambda deg: True) -> None:
    """Meridians (at multiples of ``step`` degrees, every other one labelled on the equator where
    ``free(degrees)`` says the label covers no mass), parallels every ``step`` degrees, and the
    outline."""
    ll = np.radians(np.linspace(-90, 90, 181))
    for d in np.arange(0, 360, step):
        dl = float(_wrap(math.radians(d) - lon0))
        if abs(abs(dl) - np.pi) < 1e-9:  # the edge itself
            continue
        x, y = mollweide(lon0 + dl, ll, lon0)
        ax.plot(x, y, color=colour, lw=0.4, alpha=0.5)
        if d % (2 * step) == 0 and abs(dl) < np.pi - math.radians(20) and free(d):
            ax.text(x[90], -0.05, _lon_text(d), color=colour, fontsize=6, ha="center", va="top",
                    alpha=0.85)
    lo = np.linspace(lon0 - np.pi, lon0 + np.pi, 361)
    for d in np.arange(-90 + step, 90, step):
        x, y = mollweide(lo, math.radians(d), lon0)
        x[-1] = -x[0]  # the right edge is λ₀ + π, not its wrapped value
        ax.plot(x, y, color=colour, lw=0.4, alpha=0.5)
    t = np.linspace(0, 2 * np.pi, 361)
    ax.plot(2 * SQRT2 * np.cos(t), SQRT2 * np.sin(t), color="0.3", lw=0.8)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _point_sets(data: RunData, t: int):
    """[(positions (N, d), label, style)] of the point sets at output ``t``."""
    out = []
    if data.positions is not None:
        out.append((data.positions[t], f"particles (N = {data.positions.shape[1]})",
                    dict(s=3, c="#ff3b30", linewidths=0)))
    if data.tokens is not None:
        out.append((data.tokens[t], f"transformer tokens (N = {data.tokens.shape[1]})",
                    dict(s=6, c="w", marker="x", linewidths=0.6)))
    return out


def _measure(data: RunData, t: int):
    """(xyz (n, 3), w (n,)) of what is shown at output ``t``: the density's cells, else points."""
    if data.density is not None:
        return data.gauss_grid.xyz.reshape(-1, 3), (data.density[t] * data.gauss_grid.cell_area).ravel()
    pts = data.points
    return pts[t], np.full(pts.shape[1], 1.0 / pts.shape[1])


def _density_label(norm) -> str:
    from matplotlib.colors import LogNorm

    return "density ρ (per unit area)" + (", log scale" if isinstance(norm, LogNorm) else "")


# ---- S² figures -------------------------------------------------------------------------------
def plot_orthographic(data: RunData, path, times=None, *, log: bool | None = None,
                      dpi: int = 120) -> Path:
    """Orthographic discs at ≤ 4 output indices ``times``: one column per time, each centred on
    that time's mass (:func:`mass_centre`); a second row shows the far side when it holds more
    than 10 % of the mass at one of the times.  Particles overlaid; one colour bar."""
    plt = _plt()
    times = pick_times(data) if times is None else np.asarray(times)
    centres = [mass_centre(*_measure(data, t)) for t in times]
    far = []
    for t, c in zip(times, centres):
        xyz, w = _measure(data, t)
        far.append(float(w[xyz @ c < 0].sum() / w.sum()))
    rows = [("near side", 1.0)] + ([("far side", -1.0)] if max(far) > 0.1 else [])
    ncol = len(times)
    fig, axes = plt.subplots(len(rows), ncol, figsize=(2.6 * ncol + 1.2, 2.75 * len(rows) + 0.5),
                             squeeze=False, layout="constrained")
    norm = density_norm(data.density[times], log) if data.density is not None else None
    im = None
    for col, (t, c) in enumerate(zip(times, centres)):
        for row, (name, sign) in enumerate(rows):
            ax, view = axes[row, col], sign * c
            if data.density is not None:
                img = _image(data.density[t], ortho_raster(data.gauss_grid, view))
                assert norm is not None  # with the density
                im = ax.imshow(np.ma.masked_where(img.mask, np.maximum(img.filled(0), norm.vmin)),
                               extent=(-1, 1, -1, 1), origin="upper", norm=norm, cmap="viridis",
                               interpolation="nearest")
            else:
                ax.add_patch(plt.Circle((0, 0), 1, color="0.92", zorder=0))
            _graticule_ortho(ax, view, colour="w" if data.density is not None else "0.45")
            for pts, label, style in _point_sets(data, t):
                x, y, vis = orthographic(pts, view)
                ax.scatter(x[vis], y[vis], label=label, **style)
            lon, lat = (math.degrees(a) for a in xyz_to_lonlat(view))
            where = f"centre {_lon_text(lon)}, {_lat_text(lat)}"
            if row == 0:
                ax.set_title(f"t = {data.times[t]:.3g}\n{name}: {where}", fontsize=8)
            else:
                share = 100 * far[col]
                share_text = f"{share:.0f} %" if share >= 1 else "< 1 %"
                ax.set_title(f"{name}: {where}\n({share_text} of the mass)", fontsize=8)
            ax.set_xlim(-1.03, 1.03)
            ax.set_ylim(-1.03, 1.03)
            ax.set_aspect("equal")
            ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label=_density_label(norm))
    _legend(fig, axes[0, 0])
    fig.suptitle(f"{data.label}\northographic views centred on the mass", fontsize=9)
    return _save(fig, path, dpi)


def plot_mollweide(data: RunData, path, times=None, *, log: bool | None = None,
                      dpi: int = 120) -> Path:
    """Mollweide maps at ≤ 4 output indices ``times`` (2 × 2 for four), all about one central
    longitude whose antimeridian holds the least mass over those times; particles overlaid; one
    colour bar."""
    plt = _plt()
    times = pick_times(data) if times is None else np.asarray(times)
    lons, ws = [], []
    for t in times:
        xyz, w = _measure(data, t)
        lons.append(xyz_to_lonlat(xyz)[0])
        ws.append(w / w.sum())
    lon0 = (quiet_longitude(np.concatenate(lons), np.concatenate(ws)) + np.pi) % (2 * np.pi)
    k = len(times)
    nrow, ncol = (2, 2) if k == 4 else (1, k)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol + 0.6, 2.5 * nrow + 1.0),
                             squeeze=False, layout="constrained")
    norm = density_norm(data.density[times], log) if data.density is not None else None
    raster = mollweide_raster(data.gauss_grid, lon0) if data.density is not None else None
    im = None
    for ax, t in zip(axes.flat, times):
        if data.density is not None:
            img = _image(data.density[t], raster)
            assert norm is not None  # with the density
            im = ax.imshow(np.ma.masked_where(img.mask, np.maximum(img.filled(0), norm.vmin)),
                           extent=(-2 * SQRT2, 2 * SQRT2, -SQRT2, SQRT2), origin="upper",
                           norm=norm, cmap="viridis", interpolation="nearest")
        else:
            ax.add_patch(_ellipse(plt))
        xyz, w = _measure(data, t)
        lonlat = xyz_to_lonlat(xyz)
        _graticule_mollweide(ax, lon0, colour="w" if data.density is not None else "0.3",
                             free=lambda deg: label_free(lonlat, w, deg))
        for pts, label, style in _point_sets(data, t):
            lon, lat = xyz_to_lonlat(pts)
            x, y = mollweide(lon, lat, lon0)
            ax.scatter(x, y, label=label, **style)
        ax.set_title(f"t = {data.times[t]:.3g}", fontsize=9)
        ax.set_xlim(-2 * SQRT2 * 1.02, 2 * SQRT2 * 1.02)
        ax.set_ylim(-SQRT2 * 1.04, SQRT2 * 1.04)
        ax.set_aspect("equal")
        ax.axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label=_density_label(norm))
    _legend(fig, axes[0, 0])
    fig.suptitle(f"{data.label}\nMollweide, central longitude {_lon_text(math.degrees(lon0))} "
                 f"(edge at the longitude of least mass)",
                 fontsize=9)
    return _save(fig, path, dpi)


def _ellipse(plt):
    from matplotlib.patches import Ellipse

    return Ellipse((0, 0), 4 * SQRT2, 2 * SQRT2, color="0.92", zorder=0)


def _legend(fig, ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower left", fontsize=7, markerscale=3,
                   frameon=False)


def _save(fig, path, dpi: int = 120) -> Path:
    path = Path(path)
    fig.savefig(path, dpi=dpi)
    _plt().close(fig)
    return path


# ---- S¹ figure --------------------------------------------------------------------------------
def _circle_angles(data: RunData, t: int) -> np.ndarray:
    pts = data.points
    return np.arctan2(pts[t, :, 1], pts[t, :, 0])


def circle_origin(data: RunData, times) -> float:
    """θ₀ (radians) such that the interval [θ₀, θ₀ + 2π) starts where the least mass is."""
    th, w = [], []
    for t in times:
        if data.density is not None:
            th.append(data.circle_grid.theta)
            w.append(data.density[t] * data.circle_grid.cell_length)
        else:
            a = _circle_angles(data, t)
            th.append(a)
            w.append(np.full(a.size, 1.0 / a.size))
    return quiet_longitude(np.concatenate(th), np.concatenate(w) / len(times))


def plot_circle(data: RunData, path, times=None, *, log: bool | None = None,
                      dpi: int = 120) -> Path:
    """S¹: ρ(θ) at ≤ 4 output indices ``times`` (lines; below them the particles' angles, one
    row per time), beside the space–time map ρ(θ, t) with particle paths overlaid (≤ 64); θ
    starts at the least-mass angle so that no cluster is split at the edge."""
    plt = _plt()
    times = pick_times(data) if times is None else np.asarray(times)
    valid = data.valid()
    th0 = circle_origin(data, valid)
    points = data.positions is not None or data.tokens is not None
    mosaic = [["lines", "map"], ["rug", "map"]] if points else [["lines", "map"]]
    fig, ax = plt.subplot_mosaic(mosaic, figsize=(10.5, 4.4), layout="constrained",
                                 gridspec_kw={"width_ratios": [1, 1.15],
                                              **({"height_ratios": [3, 1]} if points else {})})
    colours = plt.cm.plasma(np.linspace(0.0, 0.85, len(times)))
    shift = lambda a: np.degrees(np.mod(np.asarray(a) - th0, 2 * np.pi) + th0)  # noqa: E731
    xlim = (math.degrees(th0), math.degrees(th0) + 360)
    labels = [f"t = {data.times[t]:.3g}" for t in times]
    if data.density is not None:
        th = data.circle_grid.theta
        order = np.argsort(np.mod(th - th0, 2 * np.pi))
        for t, col, label in zip(times, colours, labels):
            ax["lines"].plot(shift(th)[order], data.density[t][order], color=col, lw=1.2, label=label)
        ax["lines"].set_ylabel("density ρ(θ) (per unit length)")
        if log or (log is None and isinstance(density_norm(data.density[times]), _lognorm())):
            ax["lines"].set_yscale("log")
            top = float(np.nanmax(data.density[times]))
            ax["lines"].set_ylim(top * 10**-LOG_DECADES, top * 2)
        ax["lines"].legend(fontsize=7)
        ax["lines"].set_title("ρ at selected times", fontsize=9)
    else:
        ax["lines"].set_axis_off()
    if points:
        for row, (t, col) in enumerate(zip(times, colours)):
            a = shift(_circle_angles(data, t))
            ax["rug"].plot(a, np.full(a.size, row), "|", color=col, ms=5)
        ax["rug"].set_yticks(range(len(times)), labels, fontsize=7)
        ax["rug"].set_ylim(len(times) - 0.5, -0.5)
        ax["rug"].set_xlim(*xlim)
        ax["rug"].set_xlabel("θ (degrees)")
        ax["rug"].set_title("particle angles", fontsize=8)
        ax["lines"].sharex(ax["rug"])
        ax["lines"].tick_params(labelbottom=False)
    else:
        ax["lines"].set_xlabel("θ (degrees)")
        ax["lines"].set_xlim(*xlim)
    tt = data.times[valid]
    if data.density is not None:
        th = data.circle_grid.theta
        order = np.argsort(np.mod(th - th0, 2 * np.pi))
        start = th0 + np.mod(th[order[0]] - th0, 2 * np.pi) - 0.5 * data.circle_grid.dtheta
        faces = np.degrees(start + data.circle_grid.dtheta * np.arange(th.size + 1))
        tf = np.concatenate([[tt[0]], 0.5 * (tt[1:] + tt[:-1]), [tt[-1]]]) if tt.size > 1 else \
            np.array([tt[0] - 0.5, tt[0] + 0.5])
        norm = density_norm(data.density[valid], log)
        vals = np.maximum(data.density[valid][:, order], norm.vmin)
        m = ax["map"].pcolormesh(faces, tf, vals, norm=norm, cmap="viridis", shading="flat")
        fig.colorbar(m, ax=ax["map"], label="density ρ (per unit length)"
                     + (", log scale" if isinstance(norm, _lognorm()) else ""))
    if points:
        pts = data.points
        pick = np.unique(np.linspace(0, pts.shape[1] - 1, min(64, pts.shape[1])).round().astype(int))
        a = np.stack([shift(_circle_angles(data, t)[pick]) for t in valid])
        jump = np.abs(np.diff(a, axis=0)) > 180  # a path crossing the edge: break the line
        a[1:][jump] = np.nan
        ax["map"].plot(a, tt, color="#ff3b30", lw=0.4, alpha=0.6)
        ax["map"].plot([], [], color="#ff3b30", lw=0.8, label=f"{pick.size} particle paths")
        ax["map"].legend(fontsize=7, loc="lower right")
    ax["map"].set_xlim(*xlim)
    for a in ax.values():  # θ runs over [θ₀, θ₀ + 360°): label it modulo 360°
        a.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x % 360:.0f}°"))
    ax["map"].set_xlabel("θ (degrees)")
    ax["map"].set_ylabel("time t")
    ax["map"].set_title("space–time", fontsize=9)
    fig.suptitle(data.label, fontsize=9)
    return _save(fig, path, dpi)


def _lognorm():
    from matplotlib.colors import LogNorm

    return LogNorm


# ---- diagnostics ------------------------------------------------------------------------------
#: panels of the diagnostics figure: (title, y label, base names, log y)
PANELS = (
    ("mass error", "mass − mass(0)", ("mass",), False),
    ("range of the density", "ρ", ("min_density", "max_density"), True),
    ("interaction energy", r"$e^{-\beta} E_\beta$", ("energy",), "auto"),
    ("distance to the eigenspaces", "dist", ("dist_eigenspace", "dist_eigenspace_V"), False),
    ("W₂ to the projected ρ₀ (Π#ρ₀)", "W₂ (chordal)", ("w2_projection",), False),
    ("W₂ between particles and density", "W₂ (chordal)", ("w2_particles_density",), False),
)
_SERIES_LABEL = {"mass": "mass", "min_density": "min ρ", "max_density": "max ρ", "energy": "energy",
                 "dist_eigenspace": "to VBᵀ's top eigenspace", "dist_eigenspace_V": "to V's top eigenspace",
                 "w2_projection": "W₂", "w2_particles_density": "W₂"}
#: a line of a diagnostics panel: (series name, label or None, (colour, line style))
_Line = tuple[str, str | None, tuple[str, str]]
_PREFIXES = (("", "density", "-"), ("particles_", "particles", "--"),
             ("transformer_", "transformer", ":"))


#: the energy's log-rate is fitted on the outputs with t ≥ this fraction of the last time (after
#: the first, not yet concentrated phase)
RATE_FIT_FROM = 0.25


def panel_labels(name: str, data: RunData) -> tuple[str, str]:
    """(title, y label) of the diagnostic ``name`` (e.g. ``particles_energy``) from
    :data:`PANELS`, the representation in the title and the energy's β where the file gives it;
    the variable's long_name and name for a diagnostic without a panel."""
    for prefix, what, _ in reversed(_PREFIXES):
        if name.startswith(prefix):
            base = name[len(prefix):]
            break
    for title, ylabel, bases, _ in PANELS:
        if base in bases:
            title = _with_beta(title, data)
            return (title if len(bases) == 1 else f"{title}: {_SERIES_LABEL[base]}") + f" ({what})", ylabel
    return data.long_names.get(name, name), name


def _with_beta(title: str, data: RunData) -> str:
    if title == "interaction energy" and data.energy_beta is not None:
        return f"{title}, β = {data.energy_beta:g}"
    return title


def _energy_rate(ax, data: RunData, t, lines, valid) -> None:
    """On a log-scale energy panel: each line's fitted log-rate (t ≥ RATE_FIT_FROM·t_end) in its
    label, and for a noise-only run the reference slope 2λ₁ through the first line's last point."""
    fit = t >= RATE_FIT_FROM * t[-1]
    if fit.sum() < 3:
        return
    for line, (name, _, _) in zip(ax.get_lines(), lines):
        rate = log_rate(t[fit], data.series[name][valid][fit])[0]
        what = line.get_label() if not line.get_label().startswith("_") else name
        line.set_label(f"{what}: fitted rate {rate:.3g} (t ≥ {t[fit][0]:.3g})")
    theory = synchronisation_rate(data.config)
    if theory is not None:
        y_end = data.series[lines[0][0]][valid][-1]
        ax.plot(t, y_end * np.exp(theory * (t - t[-1])), ":", color="k", lw=1.0,
                label=f"slope 2λ₁ = {theory:.3g} (theory)")


def plot_diagnostics(data: RunData, path, *, dpi: int = 120) -> Path | None:
    """One panel per diagnostic group (:data:`PANELS`: the density solid, particles dashed, the
    transformer dotted): one row up to three panels, 2 × 2 for four, else three columns; None
    when the run has none."""
    plt = _plt()
    valid = data.valid()
    panels: list[tuple[str, str, list[_Line], bool | str]] = []
    for title, ylabel, bases, logy in PANELS:
        lines: list[_Line] = [(p + b, f"{what}: {_SERIES_LABEL[b]}" if len(bases) > 1 else what,
                               (f"C{k}", ls)) for k, b in enumerate(bases)
                              for p, what, ls in _PREFIXES if p + b in data.series]
        lines = [ln for ln in lines if np.isfinite(data.series[ln[0]][valid]).any()]
        if lines:
            panels.append((title, ylabel, lines, logy))
    known = {name for _, _, lines, _ in panels for name, _, _ in lines}
    for name in sorted(set(data.series) - known):  # diagnostics without a panel of their own
        if np.isfinite(data.series[name][valid]).any():
            panels.append((name, name, [(name, None, ("C0", "-"))], False))
    if not panels or valid.size == 0:
        return None
    n = len(panels)
    ncol = n if n <= 3 else 2 if n == 4 else 3
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.1 * ncol, 2.9 * nrow + 0.4), squeeze=False,
                             layout="constrained")
    t = data.times[valid]
    for ax, (title, ylabel, lines, logy) in zip(axes.flat, panels):
        for name, label, (colour, ls) in lines:
            y = data.series[name][valid]
            if name.endswith("mass"):
                y = y - y[0]
            ax.plot(t, y, ls, color=colour, label=label, lw=1.4)
        values = np.concatenate([data.series[n][valid] for n, _, _ in lines])
        positive = bool(np.all(values > 0))  # False for NaN too
        if logy == "auto":
            logy = positive and float(np.max(values) / np.min(values)) > LOG_SPAN
        if logy and positive:
            ax.set_yscale("log")
            if title == "interaction energy":
                _energy_rate(ax, data, t, lines, valid)
        ax.set_title(_with_beta(title, data), fontsize=9)
        ax.set_xlabel("time t")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if len(handles) > 1:
            ax.legend(fontsize=7)
    for ax in axes.flat[len(panels):]:
        fig.delaxes(ax)
    fig.suptitle(f"{data.label}: diagnostics", fontsize=9)
    return _save(fig, path, dpi)


def plot_ensemble_diagnostics(runs: list, path, *, dpi: int = 120) -> Path | None:
    """The (time,) diagnostics of an ensemble, one panel each (:func:`plot_diagnostics`' layout):
    every realisation a thin line, their mean a thick one with the band mean ± 2 standard errors
    (s/√R, the Monte Carlo uncertainty of the mean, R ≥ 2).  ``runs``: the RunData of each
    realisation on the same output times.  None when they share no diagnostic."""
    plt = _plt()
    valid = runs[0].valid()
    for d in runs[1:]:
        valid = np.intersect1d(valid, d.valid())
    names = [n for n in runs[0].series if all(n in d.series for d in runs)]
    names = [n for n in names if np.isfinite(np.stack([d.series[n][valid] for d in runs])).any()]
    if not names or valid.size == 0:
        return None
    n, R = len(names), len(runs)
    ncol = n if n <= 3 else 2 if n == 4 else 3
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.1 * ncol, 2.9 * nrow + 0.4), squeeze=False,
                             layout="constrained")
    t = runs[0].times[valid]
    for ax, name in zip(axes.flat, names):
        y = np.stack([d.series[name][valid] for d in runs])
        if name.endswith("mass"):
            y = y - y[:, :1]
        for row in y:
            ax.plot(t, row, "-", color="0.6", lw=0.6, alpha=0.6)
        mean = y.mean(axis=0)
        ax.plot(t, mean, "-", color="C0", lw=2.0, label=f"mean of {R}")
        if R > 1:
            se = y.std(axis=0, ddof=1) / math.sqrt(R)
            ax.fill_between(t, mean - 2 * se, mean + 2 * se, color="C0", alpha=0.25,
                            label="mean ± 2 s.e.")
        positive = bool(np.all(y > 0))
        if positive and float(np.max(y) / np.min(y)) > LOG_SPAN:
            ax.set_yscale("log")
        title, ylabel = panel_labels(name, runs[0])
        ax.set_title(title, fontsize=8, wrap=True)
        ax.set_xlabel("time t")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.flat[n:]:
        fig.delaxes(ax)
    fig.suptitle(f"{runs[0].label}: {R} realisations (grey), their mean (blue)", fontsize=9)
    return _save(fig, path, dpi)


# ---- animation --------------------------------------------------------------------------------
def animation_writer():
    """(writer, suffix): Pillow's GIF writer when pillow is installed, else ffmpeg's MP4 writer
    where ffmpeg exists, else (None, None)."""
    from matplotlib import animation

    if animation.writers.is_available("pillow"):
        return animation.PillowWriter(fps=6), ".gif"
    if animation.writers.is_available("ffmpeg"):
        return animation.FFMpegWriter(fps=6), ".mp4"
    return None, None


def animate(data: RunData, path, *, log: bool | None = None, max_frames: int = 60) -> Path | None:
    """An animation over the written output times (≤ ``max_frames``, evenly subsampled): the
    Mollweide map with the particles on S², ρ(θ) with a particle rug on S¹.  ``path`` without
    suffix; the suffix is that of :func:`animation_writer` (None when there is no writer)."""
    writer, suffix = animation_writer()
    valid = data.valid()
    if writer is None or valid.size == 0:
        return None
    frames = valid[np.unique(np.linspace(0, valid.size - 1, min(max_frames, valid.size)).round().astype(int))]
    plt = _plt()
    norm = density_norm(data.density[valid], log) if data.density is not None else None
    if data.sphere:
        lonlats, ws = zip(*((xyz_to_lonlat(x), w / w.sum()) for x, w in
                            (_measure(data, t) for t in frames)))
        lons = [ll[0] for ll in lonlats]
        lon0 = (quiet_longitude(np.concatenate(lons), np.concatenate(ws)) + np.pi) % (2 * np.pi)
        every = (np.concatenate(lons), np.concatenate([ll[1] for ll in lonlats]))  # all frames
        fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
        ax.set_xlim(-2 * SQRT2 * 1.02, 2 * SQRT2 * 1.02)
        ax.set_ylim(-SQRT2 * 1.04, SQRT2 * 1.04)
        ax.set_aspect("equal")
        ax.axis("off")
        im = None
        if data.density is not None:
            raster = mollweide_raster(data.gauss_grid, lon0, width=321)
            assert norm is not None  # with the density
            im = ax.imshow(_image(np.maximum(data.density[frames[0]], norm.vmin), raster),
                           extent=(-2 * SQRT2, 2 * SQRT2, -SQRT2, SQRT2), origin="upper",
                           norm=norm, cmap="viridis", interpolation="nearest")
            fig.colorbar(im, ax=ax, shrink=0.7, label=_density_label(norm))
        else:
            ax.add_patch(_ellipse(plt))
        _graticule_mollweide(ax, lon0, colour="w" if data.density is not None else "0.3",
                             free=lambda deg: label_free(every, np.concatenate(ws), deg))
        scats = [ax.scatter([], [], label=label, **style) for _, label, style in _point_sets(data, frames[0])]
        if scats:
            ax.legend(loc="lower left", fontsize=7, markerscale=3, frameon=False,
                      bbox_to_anchor=(0.0, -0.08))

        def draw(t):
            if im is not None:
                im.set_data(_image(np.maximum(data.density[t], norm.vmin), raster))
            for sc, (pts, _, _) in zip(scats, _point_sets(data, t)):
                sc.set_offsets(np.column_stack(mollweide(*xyz_to_lonlat(pts), lon0)))
            ax.set_title(f"{data.label}   t = {data.times[t]:.3g}", fontsize=8)
    else:
        th0 = circle_origin(data, valid)
        fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
        th = data.circle_grid.theta
        order = np.argsort(np.mod(th - th0, 2 * np.pi))
        x = np.degrees(np.mod(th - th0, 2 * np.pi) + th0)[order]
        line = None
        if data.density is not None:
            (line,) = ax.plot(x, data.density[frames[0]][order], color="C0", label="density")
            top = float(np.nanmax(data.density[valid]))
            if isinstance(norm, _lognorm()):
                ax.set_yscale("log")
                ax.set_ylim(top * 10**-LOG_DECADES, top * 2)
            else:
                ax.set_ylim(0, top * 1.05)
            ax.set_ylabel("density ρ(θ) (per unit length)")
        rugs = [ax.plot([], [], "|", color="#ff3b30", ms=6, transform=ax.get_xaxis_transform(),
                        clip_on=False, label=label)[0] for _, label, _ in _point_sets(data, frames[0])]
        ax.set_xlim(math.degrees(th0), math.degrees(th0) + 360)
        ax.set_xlabel("θ (degrees)")
        ax.legend(fontsize=7, loc="upper right")

        def draw(t):
            if line is not None:
                line.set_ydata(data.density[t][order])
            for rug, (pts, _, _) in zip(rugs, _point_sets(data, t)):
                a = np.degrees(np.mod(np.arctan2(pts[:, 1], pts[:, 0]) - th0, 2 * np.pi) + th0)
                rug.set_data(a, np.full(a.size, 0.02))
            ax.set_title(f"{data.label}   t = {data.times[t]:.3g}", fontsize=8)

    out = Path(path).with_suffix(suffix)
    draw(frames[0])
    fig.canvas.draw()
    fig.set_layout_engine("none")  # keep the first frame's layout: constrained layout per frame is slow
    with writer.saving(fig, str(out), dpi=80):  # one draw per frame (FuncAnimation draws twice)
        for t in frames:
            draw(t)
            writer.grab_frame()
    plt.close(fig)
    return out


# ---- everything -------------------------------------------------------------------------------
def plot_run(path: str | os.PathLike, output: str | os.PathLike | None = None, *,
             log: bool | None = None, animation: bool = True, dpi: int = 120) -> dict:
    """All figures of one run.nc into ``output`` (default: the file's folder), PNGs at ``dpi``; returns
    {"file": …, "figures": [paths], "times": [shown times]}.  ValueError naming the path on a
    missing, unreadable or foreign file, or an output folder that cannot be written."""
    data = read_run(path)
    out = Path(output) if output is not None else Path(path).parent
    if out.exists() and not out.is_dir():
        raise ValueError(f"--output: {str(out)!r} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--output: cannot create the folder {str(out)!r}: {err.strerror or err}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"--output: the folder {str(out)!r} is not writable")
    times = pick_times(data)
    if times.size == 0:
        raise ValueError(f"{str(path)!r}: no output time was written (the run stopped before its first output)")
    figures = []
    maps = data.grid is not None and any(a is not None for a in (data.density, data.positions,
                                                                   data.tokens))
    if not maps:
        pass  # tokens on S^{d−1}, d ≥ 4, or a run that stored no fields or positions: diagnostics only
    elif data.sphere:
        figures.append(plot_orthographic(data, out / "density_orthographic.png", times, log=log,
                                         dpi=dpi))
        figures.append(plot_mollweide(data, out / "density_mollweide.png", times, log=log, dpi=dpi))
    else:
        figures.append(plot_circle(data, out / "density_circle.png", times, log=log, dpi=dpi))
    diag = plot_diagnostics(data, out / "diagnostics.png", dpi=dpi)
    if diag is not None:
        figures.append(diag)
    if animation and maps:
        anim = animate(data, out / "animation", log=log)
        if anim is not None:
            figures.append(anim)
    return {"file": str(path), "figures": [str(f) for f in figures],
            "times": [float(data.times[t]) for t in times]}


__all__ = ["RunData", "animate", "cell_index", "mass_centre", "mollweide", "mollweide_inverse",
           "orthographic", "orthographic_inverse", "pick_times", "plot_circle", "plot_diagnostics",
           "plot_ensemble_diagnostics",
           "plot_mollweide", "plot_orthographic", "plot_run", "quiet_longitude", "read_run",
           "view_basis"]
