"""Shared test set-up.

* Every test runs with ``SPHEREPDE_TORCH_DEVICE=cpu``: on a machine with torch and a CUDA GPU,
  "auto" would otherwise send the attention sums to the GPU and skip the spectral paths that
  the tests are about.  Tests of the GPU choice patch ``torch_sums.gpu_present`` themselves.
* the fixture ``single_threaded`` gives a context manager that runs code with one BLAS/OpenMP
  thread and one numba thread, as the dask workers of an ensemble do, for tests that compare
  bits with a worker's result.
"""
from __future__ import annotations

import contextlib

import pytest


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
