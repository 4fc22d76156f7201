"""Backend ``faiss``: faiss's exact flat index (inner product or L2), its top 8 per query re-decided in float64
wherever the float32 winner is not separated from the runner-up by twice a float32 error bound."""

from __future__ import annotations

import numpy as np

from .reference import Metric, _scores64

_REFINE_K = 8


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


def faiss_nearest(q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:
    """Exact nearest base row per query (``q``, ``b`` prepared by :func:`~.reference._prep`, ``b`` not empty)."""
    ti, td = _faiss_flat(q, b, metric, min(_REFINE_K, len(b)))
    return _refine(q, b, ti, td, metric)
