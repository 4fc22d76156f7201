"""Nearest-neighbour search for voting: exact (faiss, chunked numpy, chunked torch) and approximate (IVF, HNSW).

All backends return, for each query row, the index of its nearest base row under the chosen metric:

* ``l2``      — argmin ‖q − b‖₂;
* ``cosine``  — argmax ⟨q/‖q‖, b/‖b‖⟩ (inputs are normalised here, so callers need not).

Exact backends agree with a float64 brute-force reference on every query, ties included: the float32 search
returns the top ``k`` candidates, and any query whose best two distances are closer than the float32 error
bound is re-decided in float64 (over the whole base if the top-k list cannot prove it), ties going to the lowest
index. Approximate backends (``ivf``, ``hnsw``) trade recall for speed; they still produce exactly one vote per
private record, so the *sensitivity of the vote histogram is unchanged by approximation* — the privacy analysis
does not depend on which candidate a record votes for, only on each record casting one vote.

Memory: the chunked backends hold one ``query_chunk × base_chunk`` block of distances at a time — O(chunk²),
never O(N_priv · N_syn).
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np

from ..errors import ConfigError

Metric = Literal["l2", "cosine"]
Backend = Literal["auto", "faiss", "numpy", "torch", "ivf", "hnsw"]
EXACT = ("faiss", "numpy", "torch")
APPROX = ("ivf", "hnsw")

_REFINE_K = 8


def _prep(x: np.ndarray, metric: Metric, name: str) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ConfigError(f"{name} must be a 2-d array (n, d), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ConfigError(f"{name} contains NaN or infinite values")
    if metric == "cosine":
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = x / np.maximum(norms, 1e-12)
    return x


def _scores64(q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:
    """Smaller is nearer, float64: squared L2 or negative cosine, shape (len(q), len(b)).

    Computed elementwise row by row (not with a BLAS matrix product, whose kernels may round identical rows
    differently depending on their position), so identical candidates get identical scores and ties are real.
    """
    q64, b64 = q.astype(np.float64), b.astype(np.float64)
    out = np.empty((len(q64), len(b64)), dtype=np.float64)
    for i, qi in enumerate(q64):
        out[i] = -(b64 * qi).sum(1) if metric == "cosine" else ((b64 - qi) ** 2).sum(1)
    return out


def brute_force_nn(queries: np.ndarray, base: np.ndarray, *, metric: Metric = "l2") -> np.ndarray:
    """Reference: float64, whole matrix, ties to the lowest index. For tests and small inputs only."""
    q, b = _prep(queries, metric, "queries"), _prep(base, metric, "base")
    if len(b) == 0:
        return np.full(len(q), -1, dtype=np.int64)
    out = np.empty(len(q), dtype=np.int64)
    for s in range(0, len(q), 256):
        out[s:s + 256] = np.argmin(_scores64(q[s:s + 256], b, metric), axis=1)
    return out


def _err_bound(q: np.ndarray, b: np.ndarray, metric: Metric) -> float:
    """A bound on float32 rounding error of one distance (generous: 64 ulp of the largest magnitude)."""
    qmax = float(np.sqrt(np.einsum("ij,ij->i", q, q).max())) if len(q) else 0.0
    bmax = float(np.sqrt(np.einsum("ij,ij->i", b, b).max())) if len(b) else 0.0
    scale = (qmax + bmax) ** 2 if metric == "l2" else qmax * bmax
    return 64 * np.finfo(np.float32).eps * max(scale, 1e-30) * max(1.0, np.sqrt(q.shape[1]) / 4)


def _refine(q: np.ndarray, b: np.ndarray, top_idx: np.ndarray, top_d: np.ndarray, metric: Metric) -> np.ndarray:
    """Re-decide in float64 every query whose float32 winner is not proven.

    A winner is proven when the runner-up is further than twice the float32 error bound. Otherwise the
    contenders are the top-k entries within that bound; when all k are within it (e.g. duplicated candidates),
    the query is rescanned over the whole base in float32 to collect every contender, then decided in float64.
    """
    best = top_idx[:, 0].copy()
    if top_idx.shape[1] < 2 or len(b) < 2:
        return best
    tol = 2 * _err_bound(q, b, metric)
    unsure = np.nonzero(top_d[:, 1] - top_d[:, 0] <= tol)[0]
    rescan = []
    for i in unsure:
        within = top_d[i] <= top_d[i, 0] + tol
        if within.all() and top_idx.shape[1] < len(b):
            rescan.append(i)
            continue
        cand = top_idx[i][within]
        best[i] = _decide64(q[i], b, cand, metric)
    if rescan:
        bn = (b * b).sum(1) if metric == "l2" else None
        for s in range(0, len(rescan), 256):
            rows = np.asarray(rescan[s:s + 256])
            g = q[rows] @ b.T
            d = ((q[rows] * q[rows]).sum(1)[:, None] + bn[None, :] - 2 * g) if metric == "l2" else -g  # type: ignore[index]
            for r, i in enumerate(rows):
                cand = np.nonzero(d[r] <= d[r].min() + tol)[0]
                best[i] = _decide64(q[i], b, cand, metric)
    return best


def _decide64(qi: np.ndarray, b: np.ndarray, cand: np.ndarray, metric: Metric) -> int:
    s = _scores64(qi[None, :], b[cand], metric)[0]
    return int(np.min(cand[s == s.min()]))


def _faiss_flat(q: np.ndarray, b: np.ndarray, metric: Metric, k: int) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    index = faiss.IndexFlatIP(b.shape[1]) if metric == "cosine" else faiss.IndexFlatL2(b.shape[1])
    index.add(b)
    d, i = index.search(q, k)
    return i, (-d if metric == "cosine" else d)


def _numpy_chunked(q: np.ndarray, b: np.ndarray, metric: Metric, k: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k by blocks of ``chunk`` queries × ``chunk`` base rows; O(chunk²) memory."""
    nq = len(q)
    k = min(k, len(b))
    top_d = np.full((nq, k), np.inf, dtype=np.float32)
    top_i = np.full((nq, k), -1, dtype=np.int64)
    bn = (b * b).sum(1) if metric == "l2" else None
    for qs in range(0, nq, chunk):
        qq = q[qs:qs + chunk]
        qn = (qq * qq).sum(1)[:, None] if metric == "l2" else None
        cur_d, cur_i = top_d[qs:qs + chunk], top_i[qs:qs + chunk]
        for bs in range(0, len(b), chunk):
            bb = b[bs:bs + chunk]
            g = qq @ bb.T
            if metric == "l2":
                d = qn + bn[None, bs:bs + len(bb)] - 2 * g  # type: ignore[index]
            else:
                d = -g
            kk = min(k, d.shape[1])
            part = np.argpartition(d, kk - 1, axis=1)[:, :kk] if kk < d.shape[1] else np.tile(
                np.arange(d.shape[1]), (len(d), 1)
            )
            pd = np.take_along_axis(d, part, axis=1)
            md = np.concatenate([cur_d, pd], axis=1)
            mi = np.concatenate([cur_i, part + bs], axis=1)
            # stable order: by distance, then by index (ties to the lowest index)
            order = np.lexsort((mi, md), axis=1)[:, :k]
            cur_d[:] = np.take_along_axis(md, order, axis=1)
            cur_i[:] = np.take_along_axis(mi, order, axis=1)
    return top_i, top_d


def _torch_chunked(q: np.ndarray, b: np.ndarray, metric: Metric, k: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    bt = torch.from_numpy(b).to(dev)
    bn = (bt * bt).sum(1) if metric == "l2" else None
    k = min(k, len(b))
    out_i = np.empty((len(q), k), dtype=np.int64)
    out_d = np.empty((len(q), k), dtype=np.float32)
    with torch.no_grad():
        for qs in range(0, len(q), chunk):
            qt = torch.from_numpy(q[qs:qs + chunk]).to(dev)
            best_d = torch.full((len(qt), k), float("inf"), device=dev)
            best_i = torch.full((len(qt), k), -1, dtype=torch.int64, device=dev)
            qn = (qt * qt).sum(1, keepdim=True) if metric == "l2" else None
            for bs in range(0, len(b), chunk):
                g = qt @ bt[bs:bs + chunk].T
                d = qn + bn[None, bs:bs + chunk] - 2 * g if metric == "l2" else -g  # type: ignore[index,operator]
                kk = min(k, d.shape[1])
                pd, pi = torch.topk(d, kk, dim=1, largest=False, sorted=True)
                md = torch.cat([best_d, pd], 1)
                mi = torch.cat([best_i, pi + bs], 1)
                sd, order = torch.sort(md, dim=1, stable=True)
                best_d, best_i = sd[:, :k], torch.gather(mi, 1, order)[:, :k]
            out_i[qs:qs + chunk] = best_i.cpu().numpy()
            out_d[qs:qs + chunk] = best_d.cpu().numpy()
    return out_i, out_d


def _faiss_ann(
    q: np.ndarray, b: np.ndarray, metric: Metric, kind: str, *, nlist: int | None, nprobe: int, hnsw_m: int,
    ef_search: int, seed: int,
) -> np.ndarray:
    import faiss

    d = b.shape[1]
    mt = faiss.METRIC_INNER_PRODUCT if metric == "cosine" else faiss.METRIC_L2
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, hnsw_m, mt)
        index.hnsw.efConstruction = max(40, 2 * hnsw_m)
        index.hnsw.efSearch = ef_search
        index.add(b)
    else:
        nl = nlist or max(1, int(4 * np.sqrt(len(b))))
        nl = min(nl, max(1, len(b) // 39))  # faiss wants ≥ 39 training points per list
        quant = faiss.IndexFlatIP(d) if metric == "cosine" else faiss.IndexFlatL2(d)
        index = faiss.IndexIVFFlat(quant, d, nl, mt)
        index.cp.seed = seed
        index.train(b)
        index.add(b)
        index.nprobe = min(nprobe, nl)
    _, i = index.search(q, 1)
    out = i[:, 0].astype(np.int64)
    if (out < 0).any():  # an empty probe: fall back to exact for those queries
        miss = np.nonzero(out < 0)[0]
        ti, td = _faiss_flat(q[miss], b, metric, min(_REFINE_K, len(b)))
        out[miss] = _refine(q[miss], b, ti, td, metric)
    return out


def resolve_backend(backend: Backend, n_queries: int, n_base: int) -> str:
    if backend != "auto":
        return backend
    try:
        import faiss  # noqa: F401

        return "faiss"
    except ImportError:  # pragma: no cover - faiss-cpu is a core dependency
        return "numpy"


def nearest(
    queries: np.ndarray,
    base: np.ndarray,
    *,
    metric: Metric = "l2",
    backend: Backend = "auto",
    chunk_size: int = 4096,
    nlist: int | None = None,
    nprobe: int = 16,
    hnsw_m: int = 32,
    ef_search: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """Index of the nearest ``base`` row for every ``queries`` row (``-1`` when ``base`` is empty)."""
    if metric not in ("l2", "cosine"):
        raise ConfigError(f"metric must be 'l2' or 'cosine', got {metric!r}")
    q, b = _prep(queries, metric, "queries"), _prep(base, metric, "base")
    if len(q) and len(b) and q.shape[1] != b.shape[1]:
        raise ConfigError(f"queries have dimension {q.shape[1]} but base has {b.shape[1]}")
    if len(b) == 0 or len(q) == 0:
        return np.full(len(q), -1, dtype=np.int64)
    kind = resolve_backend(backend, len(q), len(b))
    if kind in APPROX:
        return _faiss_ann(q, b, metric, kind, nlist=nlist, nprobe=nprobe, hnsw_m=hnsw_m, ef_search=ef_search,
                          seed=seed)
    k = min(_REFINE_K, len(b))
    if kind == "faiss":
        ti, td = _faiss_flat(q, b, metric, k)
    elif kind == "numpy":
        ti, td = _numpy_chunked(q, b, metric, k, chunk_size)
    elif kind == "torch":
        ti, td = _torch_chunked(q, b, metric, k, chunk_size)
    else:
        raise ConfigError(f"unknown voting backend {backend!r}; valid: auto, {', '.join(EXACT + APPROX)}")
    return _refine(q, b, ti, td, metric)


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
