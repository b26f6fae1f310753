"""Density maps of a run: orthographic discs and Mollweide maps on S², lines and a space–time
map on S¹, particles overlaid, and the animation.

Maps are rasters: every pixel is mapped back to the sphere (:mod:`spherepde.io.projections`) and
takes the value of the finite-volume cell it falls in, so the picture shows the cell averages
exactly, with no interpolation and no seam.  The far side of an orthographic view gets its own
row when it holds more than 10 % of the mass.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz, xyz_to_lonlat
from spherepde.io.projections import (SQRT2, _wrap, cell_index, mass_centre, mollweide,
                                      mollweide_inverse, orthographic, orthographic_inverse,
                                      quiet_longitude)
from spherepde.io.rundata import LOG_DECADES, RunData, density_norm, pick_times


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
    lonlats, ws = [], []  # per time: where the mass is, and its share
    for t in times:
        xyz, w = _measure(data, t)
        lonlats.append(xyz_to_lonlat(xyz))
        ws.append(w / w.sum())
    lon0 = (quiet_longitude(np.concatenate([ll[0] for ll in lonlats]), np.concatenate(ws)) + np.pi) % (2 * np.pi)
    k = len(times)
    nrow, ncol = (2, 2) if k == 4 else (1, k)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol + 0.6, 2.5 * nrow + 1.0),
                             squeeze=False, layout="constrained")
    norm = density_norm(data.density[times], log) if data.density is not None else None
    raster = mollweide_raster(data.gauss_grid, lon0) if data.density is not None else None
    im = None
    for ax, t, lonlat, w in zip(axes.flat, times, lonlats, ws):
        if data.density is not None:
            img = _image(data.density[t], raster)
            assert norm is not None  # with the density
            im = ax.imshow(np.ma.masked_where(img.mask, np.maximum(img.filled(0), norm.vmin)),
                           extent=(-2 * SQRT2, 2 * SQRT2, -SQRT2, SQRT2), origin="upper",
                           norm=norm, cmap="viridis", interpolation="nearest")
        else:
            ax.add_patch(_ellipse(plt))
        _graticule_mollweide(ax, lon0, colour="w" if data.density is not None else "0.3",
                             free=lambda deg, lonlat=lonlat, w=w: label_free(lonlat, w, deg))
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


__all__ = ["animate", "animation_writer", "circle_origin", "label_free", "mollweide_raster",
           "ortho_raster", "plot_circle", "plot_mollweide", "plot_orthographic"]
