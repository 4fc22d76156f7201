"""Backends ``numpy`` and ``torch``: exact search by chunked matrix products (GEMM) and a row argmax, exact at any
precision because every winner the rounding bound does not prove is re-decided (:mod:`.decide`).

:func:`gemm_nearest` checks the options, prepares the base once (its l2 augmentation and fp16 scaling) and runs the
engine: numpy fp32 here, torch in :mod:`.gemm_torch`, torch bf16 on a CPU in :mod:`.gemm_bf16_cpu`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..errors import ConfigError
from .decide import _augment_base, _augment_rows, _decide_dense, _max_norm, _row_norms, _tol32
from .gemm_bf16_cpu import _gemm_bf16_cpu
from .gemm_torch import torch_nearest
from .reference import Metric

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
Select = Literal["auto", "topk", "window", "int16"]
_BLOCK_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 28}  # scores per block: 64 MB fp32 on CPU, 512 MB fp16 on CUDA


def _torch_device(device: Device) -> str:
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("voting device is 'cuda' but torch sees no CUDA device; use 'auto' or 'cpu'")
    return device


def cpu_has_fast_bf16(cpuinfo: str | None = None) -> bool:
    """A bf16 GEMM beats the fp32 one: AMX-BF16 (Intel Sapphire Rapids and later: several times) or AVX-512-BF16
    (AMD Zen 4 and later, Intel Cooper Lake: twice — measured 180 against 89 GFLOP/s for one voting block on a
    2-core EPYC, benchmarks/scale.py). ``cpuinfo``: the text of /proc/cpuinfo (read when None;
    :func:`privtext.backends.hardware.has_fast_bf16`)."""
    from ..backends.hardware import has_fast_bf16

    return has_fast_bf16(cpuinfo)


def resolve_precision(precision: Precision, device: str) -> str:
    if precision not in ("auto", "fp32", "bf16", "fp16"):
        raise ConfigError(f"precision must be 'auto', 'fp32', 'bf16' or 'fp16', got {precision!r}")
    if precision != "auto":
        return precision
    if device == "cuda":
        return "fp16"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


def _resolve(engine: str, device: Device, precision: Precision, chunk_size: int | None, top_k: int,
             select: Select) -> tuple[str, str, str]:
    """The device, precision and contender selection :func:`gemm_nearest` runs with; a typed error naming any
    bad option."""
    if engine not in ("numpy", "torch"):
        raise ConfigError(f"engine must be 'numpy' or 'torch', got {engine!r}")
    dev = "cpu" if engine == "numpy" else _torch_device(device)
    if engine == "numpy" and precision not in ("auto", "fp32"):
        raise ConfigError(f"the numpy backend computes in fp32 only, got precision {precision!r}")
    prec = "fp32" if engine == "numpy" else resolve_precision(precision, dev)
    if chunk_size is not None and chunk_size <= 0:
        raise ConfigError(f"chunk_size must be > 0, got {chunk_size}")
    if top_k < 2:
        raise ConfigError(f"top_k must be ≥ 2, got {top_k}")
    if select not in ("auto", "topk", "window", "int16"):
        raise ConfigError(f"select must be 'auto', 'topk', 'window' or 'int16', got {select!r}")
    if select == "auto":
        select = "int16" if dev == "cpu" and prec == "bf16" else "topk"  # window measured slower on an H100
    if select == "int16" and (dev != "cpu" or prec != "bf16"):
        raise ConfigError("select 'int16' is for bf16 on CPU")
    return dev, prec, select


def gemm_nearest(
    q: np.ndarray,
    b: np.ndarray,
    metric: Metric,
    *,
    engine: Literal["numpy", "torch"] = "torch",
    device: Device = "auto",
    precision: Precision = "auto",
    chunk_size: int | None = None,
    top_k: int = 64,
    select: Select = "auto",
) -> np.ndarray:
    """Exact nearest neighbours by chunked matrix products (``q``, ``b`` prepared by :func:`~.reference._prep`).

    Per block of private rows, scores S = Q·Bᵀ — ``engine='numpy'``: float32 sgemm; ``'torch'``: on ``device``
    (``cpu`` runs the code CUDA runs) in ``precision``.

    * fp32: the row's argmax, proven when the runner-up is more than 2E below it (E: a rigorous bound on the
      fp32 rounding of a score, :func:`~.decide._tol32`); otherwise every score within 2E is re-decided in
      float64 like :func:`~.reference.brute_force_nn`, ties to the lowest index.
    * bf16/fp16: the exact winner is among the scores within 2E_low of the row maximum (:func:`~.decide._tol_low`
      plus output rounding). ``select='topk'`` (CUDA's default) takes the ``top_k`` largest, recomputing the
      row in fp32 when the k-th is still in the window; ``'window'`` every score in the window
      (:func:`~.gemm_torch._contenders_window`); ``'int16'`` (bf16 on CPU) thresholds the bit patterns
      (:func:`~.gemm_bf16_cpu._contenders_int16`). The contenders are rescored in fp32 and decided as above.

    So every backend returns the float64 reference's winner. Memory: one block of ``chunk_size × N_base`` scores
    (default: as many rows as fit in 2²⁴ scores on CPU, 2²⁸ on CUDA), never N_priv × N_base.
    """
    dev, prec, select = _resolve(engine, device, precision, chunk_size, top_k, select)
    rows_per = chunk_size or max(16, _BLOCK_ELEMENTS[dev] // max(len(b), 1))
    alpha = np.float32(1.0)
    if prec == "fp16":  # a power of two: exact, keeps every |entry| ≤ 1 and every |score| ≤ 1.5 (no overflow)
        top = max(float(np.abs(q).max()) * np.sqrt(q.shape[1]), _max_norm(b), 1e-30)  # ≥ every row's norm
        alpha = np.float32(2.0 ** -np.ceil(np.log2(top)))
    ba, col_err = _augment_base(b * alpha if alpha != 1 else b, metric)
    dim, nbmax = ba.shape[1], _max_norm(ba)
    if engine == "numpy":
        return _numpy_nearest(q, b, ba, metric, rows_per, dim, nbmax, col_err)
    if select == "int16":
        return _gemm_bf16_cpu(q, b, ba, metric, rows_per, dim, nbmax, col_err)
    return torch_nearest(q, b, ba, metric, dev=dev, prec=prec, alpha=alpha, select=select, top_k=top_k,
                         rows_per=rows_per, dim=dim, nbmax=nbmax, col_err=col_err)


def _numpy_nearest(q: np.ndarray, b: np.ndarray, ba: np.ndarray, metric: Metric, rows_per: int, dim: int,
                   nbmax: float, col_err: float) -> np.ndarray:
    """The numpy engine: one fp32 sgemm per block of ``rows_per`` queries against the augmented base ``ba``, each
    row's winner proven or re-decided by :func:`~.decide._decide_dense`."""
    nq = len(q)
    out = np.empty(nq, dtype=np.int64)
    btT = np.ascontiguousarray(ba.T)
    for s in range(0, nq, rows_per):
        e = min(nq, s + rows_per)
        qa = _augment_rows(q[s:e], metric)
        out[s:e] = _decide_dense(qa @ btT, _tol32(_row_norms(qa), dim, nbmax, col_err), q[s:e], b, metric)
    return out
