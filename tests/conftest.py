"""Shared test set-up.

* Every test runs with ``SPHEREPDE_TORCH_DEVICE=cpu``: on a machine with torch and a CUDA GPU,
  "auto" would otherwise send the attention sums to the GPU and skip the spectral paths that
  the tests are about.  Tests of the GPU choice patch ``torch_sums.gpu_present`` themselves.
* the fixture ``single_threaded`` gives a context manager that runs code with one BLAS/OpenMP
  thread and one numba thread, as the dask workers of an ensemble do, for tests that compare
  bits with a worker's result.
* helpers that several test files use, imported there with ``from conftest import …``: unit
  vectors, random points on the sphere, random rotations, fitted orders of convergence, and
  ``interrupt_after`` (a function that raises KeyboardInterrupt once it has run n times).
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest


# ---- helpers shared by the test files ----------------------------------------------------------
def unit(a):
    a = np.asarray(a, float)
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def unit_points(n: int, d: int, seed: int) -> np.ndarray:
    """n points on S^{d−1}, uniform (normalised Gaussians), seeded."""
    x = np.random.default_rng(seed).normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def random_rotation(rng, d=3):
    """A random rotation of R^d (det = +1), Haar distributed."""
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] *= -1
    return q


def random_orthogonal(rng, d=3):
    """A random orthogonal matrix of R^d (a rotation or a reflection), Haar distributed."""
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


def fitted_order(n, err):
    """Least-squares slope of log err against log(1/n) (n = grid size or number of steps)."""
    return -np.polyfit(np.log(np.asarray(n, float)), np.log(np.asarray(err, float)), 1)[0]


def interrupt_after(monkeypatch, module, name: str, n: int = 1) -> None:
    """Patch ``module.name`` so that its first ``n`` calls run it and the next raises
    KeyboardInterrupt (a Ctrl-C in the middle of a run)."""
    real = getattr(module, name)
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


@pytest.fixture(autouse=True)
def _torch_on_the_cpu(monkeypatch):
    monkeypatch.setenv("SPHEREPDE_TORCH_DEVICE", "cpu")


@pytest.fixture
def single_threaded():
    return _single_threaded


@contextlib.contextmanager
def _single_threaded():
    """One BLAS/OpenMP thread (threadpoolctl) and one numba thread inside the block."""
    import numba
    from threadpoolctl import threadpool_limits

    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        with threadpool_limits(1):
            yield
    finally:
        numba.set_num_threads(before)
