"""Backends ``ivf`` and ``hnsw`` (and ``ivf-sq8``, ``ivf-pq``): approximate search with faiss's IVF and HNSW
indexes. ``ivf-gemm`` is :mod:`.ivf_gemm` (reached through :func:`ann_nearest` too).

Approximation changes *which* candidate a record votes for, never how many votes it casts: every query gets
exactly one result (an empty probe falls back to the exact numpy search)."""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .gemm import gemm_nearest
from .ivf_gemm import _ivf_gemm, ivf_sizes
from .reference import Metric, _prep

ANN_KINDS = ("ivf", "ivf-gemm", "ivf-sq8", "ivf-pq", "hnsw")


def ann_nearest(
    queries: np.ndarray, base: np.ndarray, metric: Metric, kind: str, *, nlist: int | None = None,
    nprobe: int | None = None, m: int = 32, ef: int = 256, rerank: int = 8, niter: int = 10, seed: int = 0,
) -> np.ndarray:
    """Approximate nearest base row per query with faiss: ``ivf`` (IVF-Flat), ``ivf-sq8`` (8-bit scalar
    quantiser), ``ivf-pq`` (product quantiser, d/8 sub-quantisers) — the quantised ones re-rank their ``rerank``
    best codes by exact distance (``IndexRefineFlat``) — or ``hnsw`` (HNSW-Flat, ``m`` links, efSearch ``ef``).

    ``nprobe`` defaults to 16 (2 for ``ivf-gemm``, :func:`ivf_sizes`). ``nlist`` defaults to √N_base (IVF
    trains ``niter`` k-means iterations on the base: the build is part of the cost at voting scale, where the
    index is rebuilt every iteration). Each query still gets exactly one result —
    one vote per private record whatever the recall; queries whose probes are all empty fall back to exact search.
    """
    import faiss

    q, b = _prep(queries, metric, "queries"), _prep(base, metric, "base")
    if kind not in ANN_KINDS:
        raise ConfigError(f"unknown approximate search {kind!r}; valid: {', '.join(ANN_KINDS)}")
    if kind == "ivf-gemm":
        return _ivf_gemm(q, b, metric, nlist=nlist, nprobe=nprobe, niter=niter, seed=seed)
    ivf_sizes(len(b), nlist, nprobe)  # typed errors for a bad nlist/nprobe, whichever kind
    nprobe = nprobe or 16
    d = b.shape[1]
    mt = faiss.METRIC_INNER_PRODUCT if metric == "cosine" else faiss.METRIC_L2
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, m, mt)
        index.hnsw.efConstruction = max(40, 2 * m)
        index.hnsw.efSearch = ef
        index.add(b)
    else:
        nl = nlist or max(1, round(np.sqrt(len(b))))
        nl = max(1, min(nl, len(b) // 39))  # faiss wants ≥ 39 training points per list
        quant = faiss.IndexFlatIP(d) if metric == "cosine" else faiss.IndexFlatL2(d)
        if kind == "ivf":
            ivf = faiss.IndexIVFFlat(quant, d, nl, mt)
        elif kind == "ivf-sq8":
            ivf = faiss.IndexIVFScalarQuantizer(quant, d, nl, faiss.ScalarQuantizer.QT_8bit, mt)
        else:
            ivf = faiss.IndexIVFPQ(quant, d, nl, max(1, d // 8) if d % 8 == 0 else d, 8, mt)
        ivf.cp.seed = seed
        ivf.cp.niter = niter
        ivf.train(b)
        ivf.add(b)
        ivf.nprobe = min(nprobe, nl)
        index = ivf
        if kind != "ivf":
            index = faiss.IndexRefineFlat(ivf, faiss.swig_ptr(b))
            index.k_factor = float(max(1, rerank))
    _, i = index.search(q, 1)
    out = i[:, 0].astype(np.int64)
    if (out < 0).any():  # an empty probe: fall back to exact for those queries
        miss = np.nonzero(out < 0)[0]
        out[miss] = gemm_nearest(q[miss], b, metric, engine="numpy")
    return out
