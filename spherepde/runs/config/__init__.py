"""One model description: the configuration tree of a run (``spherepde run CONFIG.toml``).

A run is described by one :class:`RunConfig`, a tree of frozen dataclasses::

    grid             kind (sphere | circle | none), nlat (sphere) or n (circle); dimension (none:
                     tokens on S^{d−1}, d ≥ 4, particles/transformer only)
    initial          kind (uniform | cosine | vmf | low-mode | netcdf) and that kind's keys
    dynamics
      attention      Q, K, V (d×d; d = 3 on S², 2 on S¹), beta (> 0, inf allowed), kind, method
      noise          activation, sigma_u, sigma_w, n_max or variance_fraction, seed, calculus
    representations  density (true/false, or a table: scheme (ffsl-ppm | lagrangian-remap | amr)
                     and its keys: limiter, polar; remap_every, cells_per_width, remap_nlat;
                     base_nlat, max_level, mass_per_cell, max_cells);
                     particles (n, seed; or initial = "quadrature": the
                     weighted cell centres of ρ_0) on the same noise path;
                     transformer (depth L, width m or inf, n, seed, realisations)
    stepping         t_end, dt or courant, output_every
    outputs          fields, positions, diagnostics, energy_beta

Every section round-trips: ``RunConfig.from_dict(c.to_dict()) == c``; :func:`dumps_toml`
writes TOML that :mod:`tomllib` reads back, JSON via :func:`json.dumps` of ``to_dict()``.
Validation is complete at construction, before any file is created: every error is a
``ValueError`` naming the key path (``dynamics.attention.Q``), the allowed values, and for an
unknown key the closest valid key.  Optional sections (``dynamics.attention``,
``dynamics.noise``, ``representations.particles``) and optional values (``stepping.dt``,
``stepping.courant``, …) are absent, or switched off with ``false`` (handy with ``--set``).

The package's modules: :mod:`~spherepde.runs.config.values` (allowed values, limits, the checks
of single values), :mod:`~spherepde.runs.config.section` (the generic section),
:mod:`~spherepde.runs.config.model` (grid, initial, dynamics), :mod:`~spherepde.runs.config.numerics`
(representations, stepping, outputs), :mod:`~spherepde.runs.config.tree` (:class:`RunConfig`)
and :mod:`~spherepde.runs.config.files` (files, ``--set``, ``--seed``, TOML, the default).
Everything public is importable from ``spherepde.runs.config``.
"""
from __future__ import annotations

from spherepde.runs.config.values import (  # noqa: F401
    ACTIVATIONS, ATTENTION_KINDS, ATTENTION_METHODS, CALCULI, DIAGNOSTICS,
    GRIDLESS_INITIAL_KINDS, GRID_KINDS, INITIAL_KINDS, LIMITERS, MAX_CIRCLE_N, MAX_DIMENSION,
    MAX_MOMENT_DEGREE, MAX_NLAT, MAX_NOISE_DEGREE, MAX_OUTPUTS, MAX_PARTICLES,
    MAX_TOKENS_IN_ALL, MAX_TOKEN_REALISATIONS, MIN_DIMENSION, PARTICLE_INITIAL, POLAR,
    PRECISIONS, SCHEMES, SCHEME_KEYS, check_bool, check_choice, check_float, check_int,
    check_matrix, check_vector)
from spherepde.runs.config.model import (  # noqa: F401
    AttentionConfig, DynamicsConfig, GridConfig, InitialConfig, NoiseConfig)
from spherepde.runs.config.numerics import (  # noqa: F401
    DensityConfig, OutputsConfig, ParticlesConfig, RepresentationsConfig, SteppingConfig,
    TransformerConfig)
from spherepde.runs.config.tree import (  # noqa: F401
    RunConfig)
from spherepde.runs.config.files import (  # noqa: F401
    DEFAULT, apply_seed, apply_set, assign, default_config, dumps_toml, key_paths, load, parse_value,
    read_raw, toml_value)

__all__ = ["ACTIVATIONS", "ATTENTION_KINDS", "ATTENTION_METHODS", "CALCULI", "DIAGNOSTICS",
           "GRIDLESS_INITIAL_KINDS", "GRID_KINDS", "INITIAL_KINDS", "LIMITERS", "MAX_CIRCLE_N",
           "MAX_DIMENSION", "MAX_MOMENT_DEGREE", "MAX_NLAT", "MAX_NOISE_DEGREE", "MAX_OUTPUTS",
           "MAX_PARTICLES", "MAX_TOKENS_IN_ALL", "MAX_TOKEN_REALISATIONS", "MIN_DIMENSION",
           "PARTICLE_INITIAL", "POLAR", "PRECISIONS", "SCHEMES", "SCHEME_KEYS", "check_bool",
           "check_choice", "check_float", "check_int", "check_matrix", "check_vector",
           "AttentionConfig", "DynamicsConfig", "GridConfig", "InitialConfig", "NoiseConfig",
           "DensityConfig", "OutputsConfig", "ParticlesConfig", "RepresentationsConfig",
           "SteppingConfig", "TransformerConfig", "RunConfig", "DEFAULT", "apply_seed",
           "apply_set", "assign", "default_config", "dumps_toml", "key_paths", "load", "parse_value",
           "read_raw", "toml_value"]
