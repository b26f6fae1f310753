"""The PyTorch attention backend (spherepde.dynamics.attention.torch_sums) against the float64
numpy reference: blocked path on the CPU here, the fused Triton kernel through Triton's CPU
interpreter, the "auto" choice when a GPU is present (simulated), and bad input."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spherepde import GaussGrid  # noqa: E402
from spherepde.dynamics.attention import torch_sums  # noqa: E402
from spherepde.dynamics.attention import Attention, DensityAttention  # noqa: E402
from spherepde.solvers.lagrangian import ParticleODE, ParticleSDE  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _unit(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _weighted_rel(m, ref, w):
    """Σ w_i |m_i − ref_i| / Σ w_i |ref_i| (density-weighted relative error)."""
    return float(np.sum(w * np.linalg.norm(m - ref, axis=1)) / np.sum(w * np.linalg.norm(ref, axis=1)))


def _vmf_density(grid, kappa, axis):
    """e^{κ(⟨x, a⟩ − 1)} + 1e-12 on the grid (a von Mises–Fisher bump with a floor)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.exp(kappa * (grid.xyz @ a - 1.0)) + 1e-12


@pytest.fixture(autouse=True)
def _cpu_device(monkeypatch):
    monkeypatch.setenv(torch_sums.DEVICE_ENV, "cpu")


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("beta", [0.1, 10.0, 1e3, 1e4])
def test_torch_float64_matches_reference_on_concentrated_density(kind, beta):
    """Density already concentrated (vMF κ = 200) on GaussGrid(32), targets everywhere
    (far field included): the torch float64 sums equal the numpy reference to round-off."""
    grid = GaussGrid(32)
    rho = _vmf_density(grid, 200.0, (1.0, 2.0, 0.5))
    att = Attention(np.eye(3), np.diag([0.3, 0.6, 1.0]), np.eye(3), beta, kind=kind)  # ‖B‖ = 1: usa finite
    y, w = grid.xyz.reshape(-1, 3), (rho * grid.cell_area).reshape(-1)
    x = _unit(np.random.default_rng(1), 500, 3)
    ref = att.mean(x, y, w, method="reference")
    out, stats = att.mean_and_stats(x, y, w, method="torch")
    assert stats["method"] == "torch"
    # per target, relative: round-off of logits of size ≈ β (usa means underflow to exactly 0
    # far from the mass, in both)
    # error model: logits of size ≈ β‖B‖ rounded (ε each) and sums over m = 1024 sources; an
    # absolute floor for the usa means that underflow to (or next to) 0
    eps = np.finfo(float).eps
    rtol = 8 * eps * (max(1.0, beta) + np.log2(y.shape[0]))
    assert np.all(np.linalg.norm(out - ref, axis=1)
                  <= rtol * np.linalg.norm(ref, axis=1) + 1e-300)


@pytest.mark.parametrize("d", [2, 4, 6])
def test_torch_any_dimension_and_blocks(d, monkeypatch):
    """Any d, and the result does not depend on the block size (forced to many blocks)."""
    rng = np.random.default_rng(d)
    att = Attention(np.eye(d), rng.normal(size=(d, d)), rng.normal(size=(d, d)), 5.0)
    y, x = _unit(rng, 300, d), _unit(rng, 200, d)
    w = rng.random(300)
    ref = att.velocity(x, y, w, method="reference")
    one = att.velocity(x, y, w, method="torch")
    monkeypatch.setattr(torch_sums, "BLOCK_BYTES", 8 * 300 * 7)  # 7 rows per block
    many = att.velocity(x, y, w, method="torch")
    np.testing.assert_allclose(one, ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(many, ref, rtol=0, atol=1e-13)


@pytest.mark.parametrize("nlat, beta", [(24, 1.0), (24, 10.0), (24, 100.0), (24, 1000.0),
                                         (128, 1.0), (128, 100.0)])
def test_torch_float32_within_the_float32_error_model(nlat, beta):
    """float32 (what "auto" takes where tol ≥ 1e-6·max(1, β‖B‖)·sqrt(max(1, m/2¹⁶))): the
    density-weighted relative error of the mean stays below that tolerance, diffuse and
    concentrated, also with m = 32 768 sources (the sums over the sources are float64)."""
    grid = GaussGrid(nlat)
    B = np.diag([0.5, 1.0, 1.5])
    att = Attention(np.eye(3), B, np.eye(3), beta)
    tol = 1e-6 * max(1.0, beta * 1.5)
    y = grid.xyz.reshape(-1, 3)
    x = y[:: max(1, y.shape[0] // 2048)]  # targets at cell centres, weighted by the density
    for rho in (1.0 + 0.5 * grid.xyz[..., 0], _vmf_density(grid, 50.0, (0.0, 1.0, 1.0))):
        w = (rho * grid.cell_area).reshape(-1)
        ref = att.mean(x, y, w, method="reference")
        out = att.mean(x, y, w, method="torch-float32")
        wt = w[:: max(1, y.shape[0] // 2048)]
        assert _weighted_rel(out, ref, wt) < tol
        assert 0 < np.max(np.abs(out - ref))  # really single precision


def test_fused_triton_kernel_in_the_interpreter():
    """The fused kernel (what runs on a GPU) executed by Triton's CPU interpreter, float64 and
    float32, softmax and usa, d = 2, 3, 5, ragged sizes (masks), against the numpy reference."""
    pytest.importorskip("triton")
    code = textwrap.dedent("""
        import numpy as np
        from spherepde.dynamics.attention import torch_sums as T
        from spherepde.dynamics.attention.direct import _mean_direct
        rng = np.random.default_rng(0)
        worst = {"float64": 0.0, "float32": 0.0}
        for d in (2, 3, 5, 6):
            for beta in (1.0, 300.0):
                z = rng.normal(size=(37, d)) / np.sqrt(d)
                y = rng.normal(size=(45, d)); y /= np.linalg.norm(y, axis=1, keepdims=True)
                lw = np.log(rng.random(45))
                for kind in ("softmax", "usa"):
                    ref = _mean_direct(z, y, lw, beta, kind, 4096)
                    for prec in worst:
                        out = T.mean_direct(z, y, lw, beta, kind, precision=prec, fused=True)
                        err = np.max(np.abs(out - ref)) / np.max(np.abs(ref))
                        worst[prec] = max(worst[prec], err / max(1.0, beta))
        print(worst["float64"], worst["float32"])
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", torch_sums.DEVICE_ENV: "cpu",
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    err64, err32 = map(float, res.stdout.split())
    assert err64 < 1e-15  # per unit β: round-off of logits of size ≤ β
    assert 1e-10 < err32 < 1e-6


def test_auto_takes_torch_when_a_gpu_is_present(monkeypatch):
    """With a GPU (simulated: the flag patched, the sums run on the CPU) "auto" and "direct"
    take "torch" at the default tol and "torch-float32" where float32 is allowed; small
    problems stay on the numpy paths; DensityAttention skips the spectral path."""
    monkeypatch.setattr(torch_sums, "gpu_present", lambda: True)
    rng = np.random.default_rng(3)
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 10.0)  # B = I: spectral would apply
    y, x = _unit(rng, 2048, 3), _unit(rng, 256, 3)
    w = np.full(2048, 1 / 2048)
    ref = att.mean(x, y, w, method="reference")
    for method in ("auto", "direct"):
        out, stats = att.mean_and_stats(x, y, w, method=method)
        assert stats["method"] == "torch"
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13)
    _, stats = att.mean_and_stats(x, y, w, tol=1e-4)
    assert stats["method"] == "torch-float32"
    _, stats = att.mean_and_stats(x[:8], y[:64], w[:64])
    assert stats["method"] in ("reference", "compiled")  # the CPU's direct choice
    grid = GaussGrid(16)
    da = DensityAttention(att, grid)
    assert not da.spectral and "GPU" in da.spectral_reason
    rho = np.ones(grid.shape) / (4 * np.pi)
    v = da(0.0, grid.xyz, rho)
    assert da.last_stats["method"] == "direct" and v.shape == grid.xyz.shape
    assert da.last_stats["chosen"] == "torch"  # what "direct" chose, on the (simulated) GPU
    ref = att.velocity(grid.xyz.reshape(-1, 3), grid.xyz.reshape(-1, 3),
                       (rho * grid.cell_area).reshape(-1), method="reference")
    np.testing.assert_allclose(v.reshape(-1, 3), ref, rtol=0, atol=1e-14)


def test_particles_on_torch_match_numpy():
    """ParticleODE(attention_method="torch") follows the numpy run to round-off."""
    rng = np.random.default_rng(5)
    att = Attention(np.eye(3), np.diag([0.1, 1.0, 1.0]), np.diag([1.0, 0.5, 0.2]), 20.0)
    x0 = _unit(rng, 300, 3)
    a = ParticleODE(att).run(x0, (0.0, 0.5), dt=0.05).state
    b = ParticleODE(att, attention_method="torch").run(x0, (0.0, 0.5), dt=0.05).state
    c = ParticleODE(att, attention_method="torch-float32").run(x0, (0.0, 0.5), dt=0.05).state
    assert np.max(np.abs(a - b)) < 1e-12
    assert 1e-9 < np.max(np.abs(a - c)) < 1e-4


def test_bad_input(monkeypatch):
    att = Attention(np.eye(3), np.eye(3), np.eye(3), 2.0)
    x = _unit(np.random.default_rng(0), 4, 3)
    with pytest.raises(ValueError, match="attention_method must be one of"):
        ParticleODE(att, attention_method="gpu")
    with pytest.raises(ValueError, match="tol must be"):
        ParticleODE(att, tol=2.0)
    with pytest.raises(ValueError, match="precision must be"):
        torch_sums.sums(x, x, np.zeros(4), 1.0, precision="float16")
    for args, word in (((x[:, :1], x[:, :1], np.zeros(4), 1.0), "z must have shape"),
                       ((x, x[:, :2], np.zeros(4), 1.0), "y must have shape"),
                       ((x, x, np.zeros(3), 1.0), "logw must have shape")):
        with pytest.raises(ValueError, match=word):
            torch_sums.sums(*args)
    with pytest.raises(ValueError, match="beta must be"):  # β is checked once, by Attention
        Attention(np.eye(3), np.eye(3), np.eye(3), -1.0)
    with pytest.raises(ValueError, match="kind must be"):
        torch_sums.mean_direct(x, x, np.zeros(4), 1.0, "softmx")
    monkeypatch.setenv(torch_sums.DEVICE_ENV, "no-such-device")
    with pytest.raises(ValueError, match=torch_sums.DEVICE_ENV):
        att.mean(x, x, np.ones(4), method="torch")
    if not torch.cuda.is_available():
        monkeypatch.setenv(torch_sums.DEVICE_ENV, "cuda")
        with pytest.raises(ValueError, match="sees no CUDA device"):
            att.mean(x, x, np.ones(4), method="torch")
    monkeypatch.setenv(torch_sums.DEVICE_ENV, "cpu")
    with pytest.raises(ValueError, match="fused=True needs Triton and a CUDA device"):
        torch_sums.sums(x, x, np.zeros(4), 1.0, fused=True)
    monkeypatch.setattr(torch_sums, "available", lambda: False)
    with pytest.raises(ImportError, match="pip install torch"):
        att.mean(x, x, np.ones(4), method="torch")
    with pytest.raises(ImportError, match="pip install torch"):
        ParticleODE(att, attention_method="torch-float32")
    ParticleSDE(None, d=3, attention_method="torch")  # no attention: torch is not needed
