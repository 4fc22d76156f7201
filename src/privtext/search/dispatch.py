"""Which backend runs a search: :func:`resolve_backend` (``auto``) and :func:`nearest`, the one entry point
the mechanisms call."""

from __future__ import annotations

import os
from typing import Literal

import numpy as np

from ..errors import ConfigError
from .faiss_ann import ann_nearest
from .faiss_flat import faiss_nearest
from .gemm import Device, Precision, cpu_has_fast_bf16, gemm_nearest
from .reference import Metric, _prep

Backend = Literal["auto", "faiss", "numpy", "torch", "ivf", "ivf-gemm", "hnsw"]
EXACT = ("faiss", "numpy", "torch")
APPROX = ("ivf", "ivf-gemm", "hnsw")


def resolve_backend(backend: Backend, n_queries: int = 0, n_base: int = 0, *, device: Device = "auto") -> str:
    """``auto``: torch (CUDA, or a CPU with AMX-BF16 or AVX-512-BF16, where a bf16 GEMM beats an fp32 one),
    else the numpy fp32 GEMM — measured as fast as faiss exact on an idle CPU and degrading more gracefully under
    contention (faiss's OpenMP threads spin)."""
    if backend not in ("auto", *EXACT, *APPROX):
        raise ConfigError(f"unknown voting backend {backend!r}; valid: auto, {', '.join(EXACT + APPROX)}")
    if backend != "auto":
        return backend
    try:
        import torch
    except ImportError:  # pragma: no cover - torch comes with sentence-transformers
        return "numpy"
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()) or cpu_has_fast_bf16():
        return "torch"
    return "numpy"


def nearest(
    queries: np.ndarray,
    base: np.ndarray,
    *,
    metric: Metric = "l2",
    backend: Backend = "auto",
    chunk_size: int | None = None,
    device: Device = "auto",
    precision: Precision = "auto",
    nlist: int | None = None,
    nprobe: int | None = None,
    hnsw_m: int = 32,
    ef_search: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Index of the nearest ``base`` row for every ``queries`` row (``-1`` when ``base`` is empty).

    ``device``/``precision``/``chunk_size`` apply to the GEMM backends (``numpy`` is CPU fp32 only);
    ``nlist``/``nprobe``/``hnsw_m``/``ef_search``/``seed`` to the approximate ones."""
    if metric not in ("l2", "cosine"):
        raise ConfigError(f"metric must be 'l2' or 'cosine', got {metric!r}")
    q, b = _prep(queries, metric, "queries"), _prep(base, metric, "base")
    if len(q) and len(b) and q.shape[1] != b.shape[1]:
        raise ConfigError(f"queries have dimension {q.shape[1]} but base has {b.shape[1]}")
    if len(b) == 0 or len(q) == 0:
        return np.full(len(q), -1, dtype=np.int64)
    kind = resolve_backend(backend, len(q), len(b), device=device)
    if backend == "auto" and precision in ("bf16", "fp16"):
        kind = "torch"  # an explicit low precision is torch's
    if kind in ("numpy", "torch"):
        return gemm_nearest(q, b, metric, engine=kind, device=device if kind == "torch" else "cpu",  # type: ignore[arg-type]
                            precision=precision, chunk_size=chunk_size)
    if kind in APPROX:
        return ann_nearest(q, b, metric, kind, nlist=nlist, nprobe=nprobe, m=hnsw_m, ef=ef_search, seed=seed)
    return faiss_nearest(q, b, metric)


def set_threads(n: int | None) -> None:
    """Limit faiss/BLAS threads (benchmarks)."""
    if n is None:
        return
    os.environ["OMP_NUM_THREADS"] = str(n)
    try:
        import faiss

        faiss.omp_set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass
