"""``spherepde plot`` and :mod:`spherepde.io.figures`: the projection maths, a known blob landing
where it should, the files written for sphere and circle runs with and without particles, and
bad input refused naming the path (exit 2)."""
from __future__ import annotations

import math

import netCDF4
import numpy as np
import pytest

from spherepde.cli import main
from spherepde.runs.config import RunConfig
from spherepde.runs.execute import run
from spherepde.grids import GaussGrid
from spherepde.grids.geometry import lonlat_to_xyz
from spherepde.io import figures, maps, projections, rundata, series

EYE3 = np.eye(3).tolist()
SPHERE = {
    "grid": {"kind": "sphere", "nlat": 8},
    "initial": {"kind": "cosine", "direction": [0.6, 0.5, 0.3], "amplitude": 0.5},
    "dynamics": {"attention": {"Q": EYE3, "K": [[0.1, 0, 0], [0, 1, 0], [0, 0, 1]],
                               "V": [[1, 0, 0], [0, 0.5, 0], [0, 0, 0.1]], "beta": 10.0}},
    "representations": {"density": True, "particles": {"n": 20, "seed": 0}},
    "stepping": {"t_end": 1.0, "courant": 0.8, "output_every": 0.25},
    "outputs": {"diagnostics": ["mass", "min_density", "max_density", "energy", "dist_eigenspace",
                                "w2_projection"]},
}
CIRCLE = {
    "grid": {"kind": "circle", "n": 32},
    "initial": {"kind": "low-mode", "amplitude": 0.2, "max_degree": 4, "seed": 1},
    "dynamics": {"attention": {"Q": np.eye(2).tolist(), "K": np.eye(2).tolist(),
                               "V": np.eye(2).tolist(), "beta": 10.0}},
    "representations": {"density": True, "particles": {"n": 16, "seed": 0}},
    "stepping": {"t_end": 1.0, "courant": 0.8, "output_every": 0.5},
    "outputs": {"diagnostics": ["mass", "energy"]},
}


def _make(tmp_path, raw, name, **changes):
    raw = {**raw, **changes}
    run(RunConfig.from_dict(raw), tmp_path / name, progress=False)
    return tmp_path / name / "run.nc"


# ---- projections ------------------------------------------------------------------------------
@pytest.mark.parametrize("lon, lat", [(0.0, 0.0), (1.0, 0.4), (-2.5, -1.2), (0.3, math.pi / 2),
                                      (2.0, -math.pi / 2)])
def test_orthographic_centre_origin_far_side_hidden(lon, lat):
    c = lonlat_to_xyz(lon, lat)
    x, y, vis = projections.orthographic(c, c)
    assert abs(x) < 1e-12 and abs(y) < 1e-12 and vis
    assert not projections.orthographic(-c, c)[2]
    b = projections.view_basis(c)
    assert np.allclose(b @ b.T, np.eye(3), atol=1e-12)
    rng = np.random.default_rng(0)
    p = rng.normal(size=(200, 3))
    p /= np.linalg.norm(p, axis=1)[:, None]
    x, y, vis = projections.orthographic(p, c)
    assert np.array_equal(vis, p @ c >= 0) and np.all(x**2 + y**2 <= 1 + 1e-12)
    q, inside = projections.orthographic_inverse(x[vis], y[vis], c)  # the near side round-trips
    assert inside.all() and np.allclose(q, p[vis], atol=1e-9)


def test_orthographic_north_is_up():
    c = lonlat_to_xyz(0.3, 0.2)
    x, y, _ = projections.orthographic(lonlat_to_xyz(0.3, 0.5), c)  # due north of the centre
    assert abs(x) < 1e-12 and y > 0
    x, y, _ = projections.orthographic(lonlat_to_xyz(0.6, 0.2), c)  # east of the centre
    assert x > 0


def test_mollweide_equator_meridian_poles_and_inverse():
    lon = np.linspace(-3.0, 3.0, 13)
    x, y = projections.mollweide(lon, 0.0, 0.0)
    assert np.allclose(y, 0.0, atol=1e-14) and np.allclose(x, 2 * math.sqrt(2) / math.pi * lon)
    lat = np.linspace(-1.5, 1.5, 11)
    x, y = projections.mollweide(0.7, lat, 0.7)
    assert np.allclose(x, 0.0, atol=1e-14) and np.all(np.diff(y) > 0)
    x, y = projections.mollweide(1.0, [math.pi / 2, -math.pi / 2], 0.0)
    assert np.allclose(y, [math.sqrt(2), -math.sqrt(2)]) and np.allclose(x, 0.0, atol=1e-7)
    # equal area: the band |φ| ≤ 30° holds half the sphere, so half of the ellipse's area
    theta = math.asin(projections.mollweide(0.0, math.radians(30), 0.0)[1] / math.sqrt(2))
    assert math.isclose((2 * theta + math.sin(2 * theta)) / math.pi, 0.5, rel_tol=1e-12)
    # central longitude: λ₀ maps to x = 0, λ₀ ± (π − ε) next to the edges x = ±2√2
    x, _ = projections.mollweide([2.0, 2.0 + 3.1, 2.0 - 3.1], 0.0, 2.0)
    assert abs(x[0]) < 1e-14 and x[1] > 2.75 and x[2] < -2.75
    rng = np.random.default_rng(1)
    lo, la = rng.uniform(0, 2 * np.pi, 100), rng.uniform(-1.5, 1.5, 100)
    x, y = projections.mollweide(lo, la, 1.0)
    lo2, la2, inside = projections.mollweide_inverse(x, y, 1.0)
    assert inside.all() and np.allclose(la2, la, atol=1e-9)
    assert np.allclose(np.angle(np.exp(1j * (lo2 - lo))), 0.0, atol=1e-9)
    _, _, inside = projections.mollweide_inverse([3.0, 0.0, 2.8], [0.0, 1.5, 0.0], 0.0)
    assert inside.tolist() == [False, False, True]


def _vmf(grid, lon, lat, kappa=40.0):
    mu = lonlat_to_xyz(lon, lat)
    return np.exp(kappa * (grid.xyz @ mu - 1.0))


def test_known_blob_lands_where_it_should():
    """A von Mises–Fisher blob at (60°E, 30°N): the brightest pixel of each raster is the blob's
    own cell, and sits where the forward projection puts the blob's centre."""
    grid = GaussGrid(32)
    lon, lat = math.radians(60), math.radians(30)
    rho = _vmf(grid, lon, lat)
    jmax, imax = np.unravel_index(np.argmax(rho), grid.shape)
    for lon0 in (0.0, math.radians(200)):
        j, i, inside = maps.mollweide_raster(grid, lon0, width=401)
        img = np.where(inside, rho[j, i], -1.0)
        r, c = np.unravel_index(np.argmax(img), img.shape)
        assert (j[r, c], i[r, c]) == (jmax, imax)
        px, py = projections.mollweide(lon, lat, lon0)
        xs = np.linspace(-2 * math.sqrt(2), 2 * math.sqrt(2), 401)
        ys = np.linspace(math.sqrt(2), -math.sqrt(2), 201)
        cell = 2 * math.pi / grid.nlon * 2  # a cell's width in map units, with room
        assert abs(xs[c] - px) < cell and abs(ys[r] - py) < cell
    centre = lonlat_to_xyz(math.radians(20), math.radians(10))
    j, i, inside = maps.ortho_raster(grid, centre, npix=301)
    img = np.where(inside, rho[j, i], -1.0)
    r, c = np.unravel_index(np.argmax(img), img.shape)
    assert (j[r, c], i[r, c]) == (jmax, imax)
    px, py, vis = projections.orthographic(lonlat_to_xyz(lon, lat), centre)
    s = np.linspace(-1, 1, 301)
    assert vis and abs(s[c] - px) < 0.15 and abs(s[::-1][r] - py) < 0.15
    # seen from the far side the blob is hidden
    j, i, inside = maps.ortho_raster(grid, -lonlat_to_xyz(lon, lat), npix=101)
    assert rho[j, i][inside].max() < 1e-3 * rho.max()


def test_cell_index_matches_the_cell_centres():
    grid = GaussGrid(12)
    j, i = projections.cell_index(grid, grid.lon2d, grid.lat2d)
    assert np.array_equal(j, np.repeat(np.arange(12)[:, None], 24, 1))
    assert np.array_equal(i, np.repeat(np.arange(24)[None, :], 12, 0))


def test_mass_centre_and_quiet_longitude():
    ey = np.array([0.0, 1.0, 0.0])
    x = np.array([ey, -ey])
    assert np.allclose(projections.mass_centre(x, [0.6, 0.4]), ey)
    assert np.allclose(projections.mass_centre(x, [0.3, 0.7]), -ey)
    c = projections.mass_centre(lonlat_to_xyz(np.array([0.1, 0.2]), np.array([0.0, 0.1])), [0.5, 0.5])
    assert np.linalg.norm(c - lonlat_to_xyz(0.15, 0.05)) < 0.05
    # clusters at 170°E and 170°W: the map edge must not fall between them
    lon = np.radians([170.0, -170.0, 20.0])
    q = projections.quiet_longitude(lon, [0.4, 0.4, 0.2])
    for a in lon:
        assert abs(np.angle(np.exp(1j * (q - a)))) > math.radians(40)


# ---- files ------------------------------------------------------------------------------------
def _sizes(paths):
    return {p.name: p.stat().st_size for p in paths}


def test_plot_sphere_with_particles_writes_maps_series_animation(tmp_path, capsys):
    nc = _make(tmp_path, SPHERE, "s")
    rc = main(["plot", str(nc), "--output", str(tmp_path / "fig"), "--json"])
    assert rc == 0
    names = _sizes((tmp_path / "fig").iterdir())
    for name in ("density_orthographic.png", "density_mollweide.png", "diagnostics.png"):
        assert names[name] > 20_000
    anim = [n for n in names if n.startswith("animation")]
    assert anim and names[anim[0]] > 10_000
    out = capsys.readouterr().out
    assert "density_mollweide.png" in out


def test_plot_sphere_density_only_and_particles_only(tmp_path):
    nc = _make(tmp_path, SPHERE, "d", representations={"density": True})
    res = figures.plot_run(nc, animation=False)
    assert {p.split("/")[-1] for p in res["figures"]} == {
        "density_orthographic.png", "density_mollweide.png", "diagnostics.png"}
    assert all((nc.parent / n).stat().st_size > 20_000 for n in ("density_orthographic.png",))
    nc = _make(tmp_path, SPHERE, "p", representations={"density": False, "particles": {"n": 30, "seed": 1}},
               outputs={"diagnostics": ["energy", "dist_eigenspace"]})
    res = figures.plot_run(nc, tmp_path / "pfig", animation=False)
    assert len(res["figures"]) == 3
    assert all(p.stat().st_size > 10_000 for p in (tmp_path / "pfig").iterdir())


def test_plot_circle_with_and_without_particles(tmp_path):
    nc = _make(tmp_path, CIRCLE, "c")
    res = figures.plot_run(nc)
    names = _sizes(nc.parent.glob("*.*"))
    assert names["density_circle.png"] > 20_000 and names["diagnostics.png"] > 10_000
    assert any(n.startswith("animation") and names[n] > 5_000 for n in names)
    assert len(res["times"]) <= 4 and res["times"][0] == 0.0
    nc = _make(tmp_path, CIRCLE, "c2", representations={"density": True})
    figures.plot_run(nc, animation=False)
    assert (nc.parent / "density_circle.png").stat().st_size > 10_000


def test_pick_times_at_most_four_and_skips_unwritten(tmp_path):
    nc = _make(tmp_path, SPHERE, "s", stepping={"t_end": 2.0, "courant": 0.8, "output_every": 0.25})
    with netCDF4.Dataset(nc, "a") as ds:  # an interrupted run: the last outputs not written
        ds["density"][6:] = np.nan
        ds["position"][6:] = np.nan
    data = rundata.read_run(nc)
    assert data.valid().tolist() == list(range(6))
    t = rundata.pick_times(data)
    assert 2 <= t.size <= 4 and t[0] == 0 and t[-1] == 5 and np.all(np.diff(t) > 0)
    figures.plot_run(nc, tmp_path / "fig", animation=False)


# ---- bad input --------------------------------------------------------------------------------
def test_plot_bad_input_exit_2_naming_the_path(tmp_path, capsys):
    missing = tmp_path / "nothere.nc"
    foreign = tmp_path / "foreign.nc"
    with netCDF4.Dataset(foreign, "w") as ds:
        ds.createDimension("x", 3)
        ds.createVariable("a", "f8", ("x",))[:] = [1, 2, 3]
    text = tmp_path / "text.nc"
    text.write_text("not a netcdf file\n")
    for path, word in ((missing, "no such file"), (foreign, "not a spherepde run file"),
                       (tmp_path, "is a folder"), (text, "not a spherepde run file")):
        rc = main(["plot", str(path)])
        err = capsys.readouterr().err
        assert rc == 2 and str(path) in err and word in err, err
    nc = _make(tmp_path, CIRCLE, "c")
    (tmp_path / "file").write_text("")
    rc = main(["plot", str(nc), "--output", str(tmp_path / "file")])
    err = capsys.readouterr().err
    assert rc == 2 and "file" in err and "not a folder" in err


# ---- labels that say what the figure shows (issue 22.11) ------------------------------------
def test_longitude_labels_keep_off_the_mass():
    """A cluster at 60°E: the 60° label (and its ± 22° neighbourhood) is not free, 180° is."""
    lon, lat = np.radians([60.0, 62.0, 58.0]), np.radians([0.0, 5.0, -5.0])
    w = np.array([0.4, 0.3, 0.3])
    assert not maps.label_free((lon, lat), w, 60.0)
    assert not maps.label_free((lon, lat), w, 70.0)
    assert maps.label_free((lon, lat), w, 180.0) and maps.label_free((lon, lat), w, -60.0)
    # a cluster far from the equator leaves the equator's labels free
    assert maps.label_free((lon, np.radians([60.0, 62.0, 58.0])), w, 60.0)


def test_diagnostics_panels_name_the_quantity_and_the_energy_beta(tmp_path):
    nc = _make(tmp_path, SPHERE, "s", outputs={"diagnostics": ["energy", "mass"], "energy_beta": 2.5})
    data = rundata.read_run(nc)
    assert data.energy_beta == 2.5
    assert series.panel_labels("particles_energy", data) == (
        "interaction energy, β = 2.5 (particles)", r"$e^{-\beta} E_\beta$")
    assert series.panel_labels("energy", data)[0] == "interaction energy, β = 2.5 (density)"
    assert series.panel_labels("mass", data) == ("mass error (density)", "mass − mass(0)")


def test_an_unresolved_metastability_check_is_said_on_the_figure():
    from spherepde.experiments.metastability import resolution_note

    check = {"beta": 100.0, "nlat": [36, 48], "w2_min": [0.135, 0.116], "at_end": [False, False],
             "relative_change": 0.164, "resolved": False}
    note = resolution_note(check)
    assert note.startswith("UNRESOLVED at β = 100") and "16.4 %" in note and "nlat 36" in note
    assert resolution_note({**check, "resolved": True}) is None and resolution_note(None) is None
    assert "not reached" in resolution_note({**check, "at_end": [False, True]})
    # the trajectory check (summaries from now on): the worst quantity, its change and time
    check = {**check, "max_relative_change": 0.083, "tolerance": 0.02,
             "worst": {"quantity": "energy", "t": 10.5}}
    note = resolution_note(check)
    assert note == "UNRESOLVED at β = 100: E_β changes by 8.3 % at t = 10.5 (≥ 2 %) between nlat 36 and nlat 48"
