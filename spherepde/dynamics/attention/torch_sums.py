"""PyTorch backend for the direct attention sums — on a GPU when one is present (optional).

The sums are those of the log-domain reference (:func:`spherepde.dynamics.attention.direct._mean_direct`):
for targets z_i = Bᵀx_i (n, d), sources y_j (m, d) and log-weights log w_j (m,),

    ℓ_ij = β⟨z_i, y_j⟩ + log w_j,   M_i = max_j ℓ_ij,
    num_i = Σ_j e^{ℓ_ij − M_i} y_j,   den_i = Σ_j e^{ℓ_ij − M_i},
    softmax: m_i = num_i / den_i;     usa: m_i = num_i · e^{M_i − β}.

Two implementations, both exact log-domain sums in the requested precision (float64 or float32):

* **fused** (CUDA with Triton, d ≤ :data:`FUSED_MAX_D`): one kernel; each program owns a block
  of targets and sweeps the sources twice in tiles — first for the exact row maximum M_i, then
  for Σ_j 2^{ℓ'_ij − M'_i}(1, y_j) (logits in log2 units, ℓ' = ℓ·log₂e) — accumulating
  elementwise in registers and reducing across the tile only at the end.  The n×m logit matrix
  is never stored (memory traffic O((n + m)·d) per call).  Plain FMA/exp2 arithmetic, no tensor
  cores, so no TF32 rounding in float32.  On an H200: 5.5e11 (float32) and 2.5e11 (float64)
  target–source pairs per second at n = m = 65 536, 2.6× a one-pass online-softmax version of
  the kernel in both precisions (``benchmarks/bench_gpu.py``, results/gpu_run1.json, gpu_run3.json).
* **blocked** (any torch device, and the fallback): the numpy reference's algorithm on torch
  tensors, ``rows × m`` logits at a time (:data:`BLOCK_BYTES` on CPU, up to
  :data:`GPU_BLOCK_BYTES` on a GPU), float32 products at "highest" precision (no TF32).

The device is ``$SPHEREPDE_TORCH_DEVICE`` when set (e.g. ``cpu``, ``cuda:1``), else ``cuda`` when
torch sees a GPU, else ``cpu``.  Inputs and outputs are numpy float64 arrays; only (n + m)·d
numbers cross to the device and back per call.

Accuracy: float64 agrees with the numpy reference to round-off (≈ 1e-15 relative; the order of
the sums differs).  float32: the logits carry an absolute error ≈ 6e-8·|ℓ| ≲ 1e-7·β‖B‖, which
is the relative error of the weights and so of the mean — the model of the numpy "float32"
method.  The blocked path sums over the sources in float64; the fused kernel sums in float32,
each of its BLOCK_M lanes adding m/BLOCK_M terms in turn, which adds ≈ sqrt(m/16)·6e-8 (2.7e-6
at m = 2²⁰ in Triton's interpreter).  :meth:`Attention.choose_method` allows float32 only where
``tol`` covers both (its factor sqrt(max(1, m/2¹⁶))).
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import math
import os
import sys
import threading
import warnings
from contextlib import contextmanager, nullcontext

import numpy as np

#: environment variable naming the torch device ("cpu", "cuda", "cuda:1", ...)
DEVICE_ENV = "SPHEREPDE_TORCH_DEVICE"
#: bytes of one logit block of the blocked path on a CPU (as the numpy reference)
BLOCK_BYTES = 2**24
#: ... and at most this much on a GPU (a quarter of the free memory if that is less)
GPU_BLOCK_BYTES = 2**31


def available() -> bool:
    """Whether torch can be imported."""
    try:
        import torch  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def device():
    """The torch device the backend uses (see the module docstring)."""
    import torch  # noqa: PLC0415

    name = os.environ.get(DEVICE_ENV)
    if name:
        try:
            dev = torch.device(name)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"{DEVICE_ENV}={name!r} is not a torch device ({exc})") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"{DEVICE_ENV}={name!r} but torch sees no CUDA device")
        return dev
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def gpu_present() -> bool:
    """Whether torch is installed and its device (:func:`device`) is a CUDA GPU (cached per
    value of ``$SPHEREPDE_TORCH_DEVICE``).  Importing torch takes seconds, so it is imported only
    where a GPU can be there at all (:func:`cuda_possible`)."""
    return _gpu_present(os.environ.get(DEVICE_ENV))


def cuda_possible(env: str | None = None) -> bool:
    """False when no CUDA (or ROCm) device can exist, found without importing torch: on Linux no
    NVIDIA driver (/proc/driver/nvidia, /dev/nvidia*) and no ROCm device (/dev/kfd), or
    ``$SPHEREPDE_TORCH_DEVICE`` naming the CPU; torch not installed.  True otherwise (then torch
    itself is asked)."""
    if env is not None and env.strip().lower().startswith("cpu"):
        return False
    if importlib.util.find_spec("torch") is None:
        return False
    if sys.platform.startswith("linux") and not (env or "").strip().lower().startswith("cuda"):
        return (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/kfd")
                or bool(glob.glob("/dev/nvidia[0-9]*")))
    return True


@functools.lru_cache(maxsize=8)
def _gpu_present(env: str | None) -> bool:
    if not cuda_possible(env) or not available():
        return False
    try:
        return device().type == "cuda"  # (an MPS device has no float64)
    except ValueError:
        return False


def require() -> None:
    """Raise ImportError naming the fix when torch is missing."""
    if not available():
        raise ImportError("the torch attention methods need PyTorch: pip install torch "
                          "(a CPU build works; a CUDA build uses the GPU)")


_PRECISION_LOCK = threading.Lock()


@contextmanager
def _highest_precision():
    """float32 matrix products in full float32 (no TF32), whatever the caller set.  torch's
    setting is process-wide: it is switched under a lock and restored on exit."""
    import torch  # noqa: PLC0415

    with _PRECISION_LOCK:
        old = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(old)


def sums(z: np.ndarray, y: np.ndarray, logw: np.ndarray, beta: float, *,
         precision: str = "float64", fused: bool | None = None):
    """(num (n, d), den (n,), M (n,)) of the module docstring, as numpy float64.

    ``precision`` is "float64" or "float32"; ``fused`` None picks the fused kernel where it
    runs (CUDA device and Triton importable), False forces the blocked path, True requires the
    fused kernel (ValueError where it cannot run).  ``beta`` is finite and > 0: it comes from an
    :class:`~spherepde.dynamics.attention.Attention`, which checked it (β = ∞ never reaches the
    sums), and is not checked again here.
    """
    require()
    import torch  # noqa: PLC0415

    if precision not in ("float64", "float32"):
        raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}")
    z, y, logw = (np.asarray(a, dtype=float) for a in (z, y, logw))
    if z.ndim != 2 or z.shape[1] < 2:
        raise ValueError(f"z must have shape (n, d) with d ≥ 2, got {z.shape}")
    n, d = z.shape
    if y.ndim != 2 or y.shape[1] != d:
        raise ValueError(f"y must have shape (m, {d}) like z's columns, got {y.shape}")
    m = y.shape[0]
    if logw.shape != (m,):
        raise ValueError(f"logw must have shape ({m},), one per source, got {logw.shape}")
    if n == 0 or m == 0:
        raise ValueError(f"need at least one target and one source, got n = {n}, m = {m}")
    dt = torch.float64 if precision == "float64" else torch.float32
    dev = device()
    if fused is None:
        use_fused = d <= FUSED_MAX_D and fused_available()
    else:
        use_fused = bool(fused)
        if use_fused and (_triton() is None or (dev.type != "cuda" and not _interpreting())):
            raise ValueError("fused=True needs Triton and a CUDA device (or TRITON_INTERPRET=1 "
                             "for Triton's CPU interpreter)")
        if use_fused and d > FUSED_MAX_D:
            raise ValueError(f"fused=True handles d ≤ {FUSED_MAX_D}, got d = {d}")
    zt = torch.as_tensor(np.ascontiguousarray(beta * z), dtype=dt, device=dev)
    yt = torch.as_tensor(np.ascontiguousarray(y), dtype=dt, device=dev)
    lw = torch.as_tensor(np.ascontiguousarray(logw), dtype=dt, device=dev)
    with torch.no_grad():
        num = None
        if use_fused:
            try:
                num, den, mx = _fused_sums(zt, yt, lw)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as exc:  # noqa: BLE001  (a Triton that cannot compile it here)
                if fused:
                    raise
                _disable_fused(exc)
        if num is None:
            num, den, mx = _blocked_sums(zt, yt, lw)
    return (num.double().cpu().numpy(), den.double().cpu().numpy(), mx.double().cpu().numpy())


def mean_direct(z: np.ndarray, y: np.ndarray, logw: np.ndarray, beta: float, kind: str, *,
                precision: str = "float64", fused: bool | None = None) -> np.ndarray:
    """The attention mean (softmax or usa) from :func:`sums`; (n, d) float64."""
    if kind not in ("softmax", "usa"):
        raise ValueError(f"kind must be 'softmax' or 'usa', got {kind!r}")
    num, den, mx = sums(z, y, logw, beta, precision=precision, fused=fused)
    if kind == "softmax":
        return num / den[:, None]
    with np.errstate(over="ignore"):
        return num * np.exp(mx - beta)[:, None]


def _blocked_sums(zt, yt, lw):
    import torch  # noqa: PLC0415

    n, m = zt.shape[0], yt.shape[0]
    budget = BLOCK_BYTES
    if zt.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(zt.device)
        budget = max(BLOCK_BYTES, min(GPU_BLOCK_BYTES, free // 4))
    rows = max(1, min(n, budget // (zt.element_size() * m)))
    yT = yt.T.contiguous()
    single = zt.dtype == torch.float32
    y64 = yt.double()
    num = torch.empty(zt.shape, dtype=torch.float64, device=zt.device)
    den = torch.empty(n, dtype=torch.float64, device=zt.device)
    mx = torch.empty(n, dtype=zt.dtype, device=zt.device)
    for s in range(0, n, rows):
        k = min(rows, n - s)
        with _highest_precision() if single else nullcontext():  # float32 logits: no TF32
            b = torch.addmm(lw, zt[s:s + k], yT)
        mk = b.amax(dim=1)
        b.sub_(mk[:, None]).exp_()
        # the sums over the m sources in float64: a float32 sum's error grows with m
        # (1.6e-6 at m = 8192, 3.3e-6 at 32 768 for β = 1), above the float32 error model
        b64 = b.double() if single else b
        num[s:s + k] = b64 @ y64
        den[s:s + k] = b64.sum(dim=1)
        mx[s:s + k] = mk
    return num, den, mx


# ---- fused Triton kernel -------------------------------------------------------------------------
_KERNEL = None


def fused_available() -> bool:
    """Whether the fused kernel runs here: Triton importable and the device a CUDA GPU (or
    Triton's CPU interpreter switched on, TRITON_INTERPRET=1: slow, for tests)."""
    return _triton() is not None and (device().type == "cuda" or _interpreting())


def _disable_fused(exc: Exception) -> None:
    """Fall back to the blocked path for the rest of the process, saying why once."""
    global _KERNEL
    _KERNEL = False
    warnings.warn(f"spherepde: the fused Triton attention kernel failed ({exc!r:.300}); "
                  "using the blocked torch path", RuntimeWarning, stacklevel=3)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _triton():
    """The fused kernel (built on first use), or None without Triton."""
    global _KERNEL
    if _KERNEL is None:
        try:
            _KERNEL = _build_kernel()
        except Exception:  # noqa: BLE001  (no Triton, or one that cannot be imported here)
            _KERNEL = False
    return _KERNEL or None


def _build_kernel():
    import triton  # noqa: PLC0415
    import triton.language as tl  # noqa: PLC0415

    @triton.jit
    def attention_sums(zT_ptr, yT_ptr, lw_ptr, num_ptr, den_ptr, mx_ptr, n, m,
                       D: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
        # zT (D, n): β·Bᵀx × log2 e, transposed; yT (D, m): sources, transposed; lw (m,): log w ×
        # log2 e; out: num (n, D), den (n,), mx (n,) — logits in log2 units.  Pass 1: the row
        # maximum M; pass 2: Σ 2^{ℓ − M}·(1, y).  Both passes accumulate elementwise in
        # (BLOCK_N, BLOCK_M) registers and reduce across the tile once, at the end (2.6× faster
        # than a one-pass online softmax that reduces every tile).  One variable per coordinate,
        # written out for D ≤ 6 under compile-time `if D > c` (a Triton loop cannot carry a list
        # of tensors, and a (BLOCK_N, D) accumulator needed layout conversions every tile).
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        rmask = rows < n
        z0 = tl.load(zT_ptr + 0 * n + rows, mask=rmask, other=0.0)
        z1 = tl.load(zT_ptr + 1 * n + rows, mask=rmask, other=0.0)
        if D > 2:
            z2 = tl.load(zT_ptr + 2 * n + rows, mask=rmask, other=0.0)
        if D > 3:
            z3 = tl.load(zT_ptr + 3 * n + rows, mask=rmask, other=0.0)
        if D > 4:
            z4 = tl.load(zT_ptr + 4 * n + rows, mask=rmask, other=0.0)
        if D > 5:
            z5 = tl.load(zT_ptr + 5 * n + rows, mask=rmask, other=0.0)
        zero = z0[:, None] * tl.zeros((BLOCK_M,), dtype=z0.dtype)[None, :]
        mx2 = zero - float("inf")
        for start in range(0, m, BLOCK_M):
            cols = start + tl.arange(0, BLOCK_M)
            cmask = cols < m
            logit = tl.load(lw_ptr + cols, mask=cmask, other=-float("inf"))[None, :]
            logit = logit + z0[:, None] * tl.load(yT_ptr + 0 * m + cols, mask=cmask, other=0.0)[None, :]
            logit = logit + z1[:, None] * tl.load(yT_ptr + 1 * m + cols, mask=cmask, other=0.0)[None, :]
            if D > 2:
                logit = logit + z2[:, None] * tl.load(yT_ptr + 2 * m + cols, mask=cmask, other=0.0)[None, :]
            if D > 3:
                logit = logit + z3[:, None] * tl.load(yT_ptr + 3 * m + cols, mask=cmask, other=0.0)[None, :]
            if D > 4:
                logit = logit + z4[:, None] * tl.load(yT_ptr + 4 * m + cols, mask=cmask, other=0.0)[None, :]
            if D > 5:
                logit = logit + z5[:, None] * tl.load(yT_ptr + 5 * m + cols, mask=cmask, other=0.0)[None, :]
            mx2 = tl.maximum(mx2, logit)
        row_max = tl.max(mx2, axis=1)
        den2 = zero
        a0 = zero
        a1 = zero
        if D > 2:
            a2 = zero
        if D > 3:
            a3 = zero
        if D > 4:
            a4 = zero
        if D > 5:
            a5 = zero
        for start in range(0, m, BLOCK_M):
            cols = start + tl.arange(0, BLOCK_M)
            cmask = cols < m
            logit = tl.load(lw_ptr + cols, mask=cmask, other=-float("inf"))[None, :]
            y0 = tl.load(yT_ptr + 0 * m + cols, mask=cmask, other=0.0)[None, :]
            logit = logit + z0[:, None] * y0
            y1 = tl.load(yT_ptr + 1 * m + cols, mask=cmask, other=0.0)[None, :]
            logit = logit + z1[:, None] * y1
            if D > 2:
                y2 = tl.load(yT_ptr + 2 * m + cols, mask=cmask, other=0.0)[None, :]
                logit = logit + z2[:, None] * y2
            if D > 3:
                y3 = tl.load(yT_ptr + 3 * m + cols, mask=cmask, other=0.0)[None, :]
                logit = logit + z3[:, None] * y3
            if D > 4:
                y4 = tl.load(yT_ptr + 4 * m + cols, mask=cmask, other=0.0)[None, :]
                logit = logit + z4[:, None] * y4
            if D > 5:
                y5 = tl.load(yT_ptr + 5 * m + cols, mask=cmask, other=0.0)[None, :]
                logit = logit + z5[:, None] * y5
            p = tl.exp2(logit - row_max[:, None])
            den2 += p
            a0 += p * y0
            a1 += p * y1
            if D > 2:
                a2 += p * y2
            if D > 3:
                a3 += p * y3
            if D > 4:
                a4 += p * y4
            if D > 5:
                a5 += p * y5
        tl.store(num_ptr + rows * D + 0, tl.sum(a0, axis=1), mask=rmask)
        tl.store(num_ptr + rows * D + 1, tl.sum(a1, axis=1), mask=rmask)
        if D > 2:
            tl.store(num_ptr + rows * D + 2, tl.sum(a2, axis=1), mask=rmask)
        if D > 3:
            tl.store(num_ptr + rows * D + 3, tl.sum(a3, axis=1), mask=rmask)
        if D > 4:
            tl.store(num_ptr + rows * D + 4, tl.sum(a4, axis=1), mask=rmask)
        if D > 5:
            tl.store(num_ptr + rows * D + 5, tl.sum(a5, axis=1), mask=rmask)
        tl.store(den_ptr + rows, tl.sum(den2, axis=1), mask=rmask)
        tl.store(mx_ptr + rows, row_max, mask=rmask)

    return attention_sums


#: the fused kernel handles d ≤ FUSED_MAX_D (one accumulator per coordinate); larger d, blocked
FUSED_MAX_D = 6
#: (targets per program, sources per tile, warps) of the fused kernel, by precision: the fastest
#: of the configurations timed on an H200 (benchmarks/results/gpu_run3.json: 5.5e11 / 2.5e11
#: pairs/s in float32 / float64 at n = m = 65 536)
FUSED_BLOCKS = {"float32": (256, 16, 8), "float64": (32, 16, 2)}


def _fused_sums(zt, yt, lw):
    import torch  # noqa: PLC0415

    n, d = zt.shape
    m = yt.shape[0]
    num = torch.empty_like(zt)
    den = torch.empty(n, dtype=zt.dtype, device=zt.device)
    mx = torch.empty_like(den)
    bn, bm, warps = FUSED_BLOCKS["float64" if zt.dtype == torch.float64 else "float32"]
    _triton()[(math.ceil(n / bn),)](
        zt.T.contiguous() * LOG2E, yt.T.contiguous(), lw * LOG2E, num, den, mx, n, m, D=d,
        BLOCK_N=bn, BLOCK_M=bm, num_warps=warps)
    mx /= LOG2E  # back from log2 units
    return num, den, mx


LOG2E = 1.0 / math.log(2.0)
