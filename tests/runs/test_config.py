"""The configuration tree: round trips through TOML and JSON, --set/--seed, and every bad input
refused with a message that names the key path."""
from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from spherepde.runs.config import (DEFAULT, RunConfig, apply_seed, apply_set, default_config,
                                          dumps_toml, load, parse_value, read_raw)
from spherepde.runs.initial import initial_density
from spherepde.grids import CircleGrid, GaussGrid

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
I3 = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]

FULL = {  # every section, on S¹, with noise and the Itô calculus (particles alone)
    "grid": {"kind": "circle", "n": 64},
    "initial": {"kind": "vmf", "centres": [[1.0, 0.0], [0.0, -2.0]], "kappas": [4.0, 0.5],
                "weights": [0.25, 0.75]},
    "dynamics": {"attention": {"Q": [[1, 0], [0, 1]], "K": [[2.0, 0], [0, 1]], "V": [[1, 0.5], [0.5, 1]],
                               "beta": math.inf},
                 "noise": {"activation": "tanh", "sigma_u": 0.1, "sigma_w": 0.2, "n_max": 6,
                           "seed": 7, "calculus": "ito"}},
    "representations": {"density": False, "particles": {"n": 32, "seed": 3},
                        "transformer": {"depth": 8, "width": math.inf, "n": 16, "seed": 4}},
    "stepping": {"t_end": 1.0, "dt": 0.01, "output_every": 0.25},
    "outputs": {"fields": False, "positions": True, "diagnostics": ["energy"], "energy_beta": 2.0},
}


def _configs():
    return [default_config(), RunConfig.from_dict(FULL)] + [load(p) for p in EXAMPLES]


@pytest.mark.parametrize("config", _configs(), ids=lambda c: f"{c.grid.kind}-{c.initial.kind}")
def test_round_trip_toml_and_json(config):
    text = dumps_toml(config.to_dict())
    assert RunConfig.from_dict(tomllib.loads(text)) == config
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert RunConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_beta_inf_survives_both_formats():
    c = RunConfig.from_dict(FULL)
    assert math.isinf(c.dynamics.attention.beta)
    assert "beta = inf" in dumps_toml(c.to_dict())
    assert math.isinf(RunConfig.from_dict(json.loads(json.dumps(c.to_dict()))).dynamics.attention.beta)


def test_examples_are_valid_and_cover_the_required_set():
    names = {p.stem for p in EXAMPLES}
    assert {"metastability", "circle_clusters", "particles_vs_density", "spde_attention_noise"} <= names
    noisy = load(EXAMPLES[[p.stem for p in EXAMPLES].index("spde_attention_noise")])
    assert noisy.dynamics.noise is not None and noisy.representations.particles is not None


def test_defaults_filled_and_derived_values():
    c = default_config()
    assert c.stepping.n_outputs == round(c.stepping.t_end / c.stepping.output_every)
    assert c.energy_beta() == c.dynamics.attention.beta
    assert RunConfig.from_dict(FULL).energy_beta() == 2.0
    assert RunConfig.from_dict(FULL).seeds() == {"initial": None, "noise": 7, "particles": 3,
                                                 "transformer": 4}


@pytest.mark.parametrize("text, value", [
    ("30", 30), ("2.5", 2.5), ("inf", math.inf), ("true", True), ('"relu"', "relu"),
    ("relu", "relu"), ("[[1, 0], [0, 1]]", [[1, 0], [0, 1]]), ("low-mode", "low-mode"),
])
def test_set_values_parse_as_toml_literals(text, value):
    assert parse_value(text) == value


def test_apply_set_and_seed():
    raw = apply_set(DEFAULT, "dynamics.attention.beta=100")
    raw = apply_set(raw, "grid.nlat=16")
    raw = apply_set(raw, "dynamics.noise.sigma_u=0.1")  # creates the section
    raw = apply_set(raw, "stepping.dt=0.05")
    del raw["stepping"]["courant"]
    raw = apply_set(raw, "representations.transformer={depth = 32, width = inf}")
    raw = apply_seed(raw, 11)
    c = RunConfig.from_dict(raw)
    assert c.dynamics.attention.beta == 100.0 and c.grid.nlat == 16
    assert c.dynamics.noise.seed == 11 and c.representations.particles.seed == 11
    assert c.representations.transformer.seed == 11 and math.isinf(c.representations.transformer.width)
    assert DEFAULT["grid"]["nlat"] == 24  # not modified
    off = RunConfig.from_dict(apply_set(apply_set(raw, "dynamics.noise=false"),
                                        "representations.transformer=false"))
    assert off.dynamics.noise is None
    with pytest.raises(ValueError, match="KEY.PATH=VALUE"):
        apply_set(DEFAULT, "grid.nlat")
    with pytest.raises(ValueError, match="grid.nlat is a value"):
        apply_set(DEFAULT, "grid.nlat.x=3")


def _bad(*assignments, base=DEFAULT):
    raw = base
    for a in assignments:
        raw = apply_set(raw, a)
    return raw


def _without(path):
    raw = json.loads(json.dumps(DEFAULT))
    node = raw
    *head, last = path.split(".")
    for p in head:
        node = node[p]
    del node[last]
    return raw


NOISY = apply_set(apply_set(_without("stepping.courant"), "stepping.dt=0.05"),
                  "dynamics.noise.activation=relu")

BAD = [
    (_bad("grid.nlta=24"), ["grid.nlta", "unknown key", "did you mean 'grid.nlat'"]),
    (_bad("dynamics.atention.beta=3"), ["dynamics.atention", "did you mean 'dynamics.attention'"]),
    (_bad("outputs.diagnostic=[]"), ["outputs.diagnostic", "did you mean 'outputs.diagnostics'"]),
    (_bad("dynamics.attention.Q=[[1, 0], [0, 1]]"), ["dynamics.attention.Q", "3×3"]),
    (_bad("dynamics.attention.K=[[1, 0, 0], [0, 1, 0]]"), ["dynamics.attention.K", "3×3"]),
    (_bad("dynamics.attention.V=[[1, 0, 0], [0, nan, 0], [0, 0, 1]]"), ["dynamics.attention.V", "finite"]),
    (_bad("dynamics.attention.Q=[[1, 0, 0], [0, inf, 0], [0, 0, 1]]"), ["dynamics.attention.Q", "finite"]),
    (_bad("dynamics.attention.Q=3"), ["dynamics.attention.Q", "matrix"]),
    (_bad("dynamics.attention.beta=0"), ["dynamics.attention.beta", "> 0", "inf allowed"]),
    (_bad("dynamics.attention.beta=-2"), ["dynamics.attention.beta", "> 0"]),
    (_bad("dynamics.attention.beta=nan"), ["dynamics.attention.beta"]),
    (_bad("dynamics.attention.beta=hot"), ["dynamics.attention.beta"]),
    (_bad("dynamics.attention.beta=inf", "dynamics.attention.kind=usa"), ["dynamics.attention.beta", "softmax"]),
    (_bad("dynamics.attention.kind=soft"), ["dynamics.attention.kind", "softmax", "usa"]),
    (_bad("grid.kind=torus"), ["grid.kind", "'sphere'", "'circle'"]),
    (_bad("grid.kind=sphre"), ["grid.kind", "did you mean 'sphere'"]),
    (_bad("grid.limiter=positive"), ["grid.limiter", "moved to representations.density.limiter"]),
    (_bad("grid.scheme=ffsl-ppm"), ["grid.scheme", "moved to representations.density.scheme"]),
    (_bad("representations.density.limiter=postive"), ["representations.density.limiter", "positive"]),
    (_bad("representations.density.scheme=weno"), ["representations.density.scheme", "ffsl-ppm"]),
    (_bad("representations.density.sheme=weno"), ["did you mean 'representations.density.scheme'"]),
    (_bad("grid.nlat=24.5"), ["grid.nlat", "integer"]),
    (_bad("grid.nlat=24.0"), ["grid.nlat", "integer"]),
    (_bad("grid.nlat=25"), ["grid.nlat", "even"]),
    (_bad("grid.nlat=true"), ["grid.nlat", "integer"]),
    (_bad("grid.n=64"), ["grid.n", "not used with grid.kind = 'sphere'"]),
    (_bad("grid=3"), ["grid", "table"]),
    (_without("dynamics.attention.Q"), ["dynamics.attention.Q", "required"]),
    (_without("dynamics.attention.beta"), ["dynamics.attention.beta", "required"]),
    (_without("dynamics"), ["dynamics", "required"]),
    (_bad("dynamics.attention=false"), ["dynamics", "nothing moves"]),
    (_bad("initial.kind=vmf"), ["initial.direction", "not used with initial.kind = 'vmf'"]),
    (_bad("initial.kind=blob"), ["initial.kind", "uniform", "vmf"]),
    (_bad("initial.kappas=[1.0]"), ["initial.kappas", "not used with initial.kind = 'cosine'"]),
    (_bad("initial.direction=[1, 0]"), ["initial.direction", "3 entries"]),
    (_bad("initial.amplitude=1.5"), ["initial.amplitude", "[0, 1]"]),
    (_bad("initial={kind = \"vmf\", centres = [[1, 0, 0]]}"), ["initial.kappas", "required"]),
    (_bad("initial={kind = \"vmf\", centres = [[1, 0]], kappas = [2]}"), ["initial.centres", "3 entries"]),
    (_bad("initial={kind = \"vmf\", centres = [[1, 0, 0]], kappas = [2, 3]}"), ["initial.kappas", "1 entries"]),
    (_bad("initial={kind = \"low-mode\", amplitude = 1.0}"), ["initial.amplitude", "[0, 1)"]),
    (_bad("initial={kind = \"netcdf\"}"), ["initial.path", "required"]),
    (_bad("representations.particles.n=0"), ["representations.particles.n", "1..100000"]),
    (_bad("representations.particles.n=10.5"), ["representations.particles.n", "integer"]),
    (_bad("representations.particles.seed=-1"), ["representations.particles.seed", ">= 0"]),
    (_bad("representations.density=false", "representations.particles=false",
          "outputs.diagnostics=[\"energy\"]"), ["representations", "nothing to run"]),
    (_bad("representations.density=1"), ["representations.density", "table"]),
    (_bad("stepping.t_end=0"), ["stepping.t_end", "(0, 1e+06]"]),
    (_bad("stepping.dt=0.1"), ["stepping.dt", "stepping.courant", "not both"]),
    (_bad("stepping.output_every=0.3"), ["stepping.output_every", "divide"]),
    (_bad("stepping.courant=5"), ["stepping.courant", "(0, 4]"]),
    (_bad("outputs.diagnostics=[\"enrgy\"]"), ["outputs.diagnostics[0]", "did you mean 'energy'"]),
    (_bad("outputs.diagnostics=\"energy\""), ["outputs.diagnostics", "list"]),
    (_bad("outputs.diagnostics=[\"energy\", \"energy\"]"), ["outputs.diagnostics", "repeat"]),
    (_bad("representations.particles=false"), ["outputs.diagnostics", "w2_particles_density"]),
    (_bad("dynamics.attention.V=[[1, 1, 0], [0, 1, 0], [0, 0, 1]]"), ["outputs.diagnostics", "dist_eigenspace",
                                                                        "symmetric"]),
    (_bad("outputs.energy_beta=0"), ["outputs.energy_beta"]),
    (_bad("outputs.diagnostics=[\"dist_eigenspace_V\"]", "dynamics.attention.V=[[1, 2, 0], [0, 1, 0], [0, 0, 1]]"),
     ["outputs.diagnostics", "dist_eigenspace_V", "V symmetric"]),
    (_bad("outputs.diagnostics=[\"w2_projection\"]", "dynamics.attention.V=[[1, 2, 0], [0, 1, 0], [0, 0, 1]]"),
     ["outputs.diagnostics", "w2_projection", "symmetric"]),
    (_bad("dynamics.noise.activation=relu"), ["stepping.dt", "required with dynamics.noise"]),
    (_bad("dynamics.noise.activation=rellu", base=NOISY), ["dynamics.noise.activation", "did you mean 'relu'"]),
    (_bad("dynamics.noise.sigma_u=-0.5", base=NOISY), ["dynamics.noise.sigma_u", "[0, 10]"]),
    (_bad("dynamics.noise.n_max=100000", base=NOISY), ["dynamics.noise.n_max", "0..128"]),
    (_bad("dynamics.noise.n_max=4", "dynamics.noise.variance_fraction=0.9", base=NOISY),
     ["dynamics.noise.n_max", "dynamics.noise.variance_fraction", "not both"]),
    (_bad("dynamics.noise.variance_fraction=1", base=NOISY), ["dynamics.noise.variance_fraction", "(0, 1)"]),
    (_bad("dynamics.noise.calculus=ito", base=NOISY), ["dynamics.noise.calculus", "stratonovich"]),
    (_bad("dynamics.noise.calculus=levy", base=NOISY), ["dynamics.noise.calculus", "'ito'"]),
    (_bad("representations.transformer={width = 8}"), ["representations.transformer.depth", "required"]),
    (_bad("representations.transformer={depth = 32, width = 8}"),
     ["representations.transformer.width", "needs dynamics.noise"]),
    (_bad("representations.transformer={depth = 32}", base=NOISY),
     ["representations.transformer.width", "required with dynamics.noise"]),
    (_bad("representations.transformer={depth = 33}"), ["representations.transformer.depth", "multiple", "32"]),
    (_bad("representations.transformer={depth = 32, width = 0}", base=NOISY),
     ["representations.transformer.width", "or inf"]),
    (_bad("representations.transformer={depth = 32, width = 2.5}", base=NOISY),
     ["representations.transformer.width", "or inf"]),
    (_bad("representations.transformer={depth = 32, layers = 3}"),
     ["representations.transformer.layers", "unknown key"]),
]


@pytest.mark.parametrize("raw, words", BAD, ids=[w[0] for _, w in BAD])
def test_bad_input_names_the_key_path(raw, words):
    with pytest.raises(ValueError) as err:
        RunConfig.from_dict(raw)
    msg = str(err.value)
    for w in words:
        assert w in msg, msg


def test_read_raw_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        read_raw(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("grid = [")
    with pytest.raises(ValueError, match="not valid TOML"):
        read_raw(bad)
    other = tmp_path / "c.yaml"
    other.write_text("")
    with pytest.raises(ValueError, match=".toml or .json"):
        read_raw(other)


@pytest.mark.parametrize("initial", [
    {"kind": "uniform"},
    {"kind": "cosine", "direction": [0.0, 0.0, 1.0], "amplitude": 0.9},
    {"kind": "vmf", "centres": [[1.0, 0.0, 0.0], [0.0, 0.0, -1.0]], "kappas": [8.0, 2.0],
     "weights": [1.0, 3.0]},
    {"kind": "low-mode", "amplitude": 0.9, "max_degree": 6, "seed": 2},
])
@pytest.mark.parametrize("grid", [GaussGrid(12), CircleGrid(32)], ids=["sphere", "circle"])
def test_initial_densities_have_unit_mass_and_are_positive(initial, grid):
    d = 3 if isinstance(grid, GaussGrid) else 2
    initial = json.loads(json.dumps(initial))
    for key in ("direction",):
        if key in initial:
            initial[key] = initial[key][:d] if d == 3 else [1.0, 0.0]
    if "centres" in initial:
        initial["centres"] = [c[:d] if d == 3 else [1.0, 0.0] for c in initial["centres"]]
    kind = "sphere" if d == 3 else "circle"
    att = {"Q": np.eye(d).tolist(), "K": np.eye(d).tolist(), "V": np.eye(d).tolist(), "beta": 1.0}
    cfg = RunConfig.from_dict({"grid": {"kind": kind, "nlat": 12} if d == 3 else {"kind": kind, "n": 32},
                               "initial": initial, "dynamics": {"attention": att}})
    rho = initial_density(cfg.initial, grid)
    assert rho.shape == grid.shape and np.all(np.isfinite(rho))
    eps = np.finfo(float).eps
    assert abs(float(grid.integrate(rho)) - 1.0) <= 100 * eps * rho.size
    assert float(rho.min()) > 0.0


def test_vmf_weights_are_mass_fractions():
    grid = GaussGrid(16)
    cfg = RunConfig.from_dict(apply_set(DEFAULT, 'initial={kind = "vmf", centres = [[0, 0, 1], '
                                                 '[0, 0, -1]], kappas = [20, 20], weights = [1, 3]}'))
    rho = initial_density(cfg.initial, grid)
    north = float(np.sum((rho * grid.cell_area)[: grid.nlat // 2]))
    assert north == pytest.approx(0.25, abs=1e-6)


def test_low_mode_depends_on_the_seed_only():
    grid = GaussGrid(12)
    mk = lambda s: RunConfig.from_dict(apply_set(DEFAULT, f'initial={{kind = "low-mode", seed = {s}}}'))  # noqa: E731
    a, b, c = (initial_density(mk(s).initial, grid) for s in (0, 0, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_usage_page_configuration_is_valid():
    """The configuration shown in docs/usage.md (moved there from the README) is valid."""
    text = (Path(__file__).parents[2] / "docs" / "usage.md").read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    c = RunConfig.from_dict(tomllib.loads(block))
    assert c.dynamics.noise is not None and c.representations.particles.n == 500


def test_quadrature_particles_round_trip_and_ignore_n_and_seed():
    """representations.particles.initial = "quadrature" (validate sync-path's reference): n and
    seed are not used (kept at their defaults, not written); "sample" is the default and is not
    written either, so existing configurations write what they wrote before."""
    raw = apply_set(DEFAULT, 'representations.particles={initial = "quadrature", n = 7, seed = 3}')
    c = RunConfig.from_dict(raw)
    p = c.representations.particles
    assert (p.initial, p.n, p.seed) == ("quadrature", 1000, 0)
    assert c.to_dict()["representations"]["particles"] == {"initial": "quadrature"}
    assert RunConfig.from_dict(tomllib.loads(dumps_toml(c.to_dict()))) == c
    assert default_config().to_dict()["representations"]["particles"] == {"n": 500, "seed": 0}


@pytest.mark.parametrize("change, words", [
    ('representations.particles.initial="grid"', "representations.particles.initial: must be one of"),
    ('grid={kind = "circle", n = 64}', "'quadrature' (the weighted cell centres of ρ_0) needs "
                                       "grid.kind = 'sphere'"),
    ("grid.nlat=256", "at most 100000; got grid.nlat = 256"),
])
def test_quadrature_particles_bad_input(change, words):
    raw = apply_set(DEFAULT, 'representations.particles={initial = "quadrature"}')
    raw = apply_set(raw, change)
    if "circle" in change:  # a circle needs 2×2 matrices and a 2-vector
        raw = apply_set(raw, "dynamics.attention={Q = [[1, 0], [0, 1]], K = [[1, 0], [0, 1]], "
                             "V = [[1, 0], [0, 1]], beta = 1.0}")
        raw = apply_set(raw, 'initial={kind = "uniform"}')
        raw = apply_set(raw, 'outputs.diagnostics=["mass"]')
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        RunConfig.from_dict(raw)
