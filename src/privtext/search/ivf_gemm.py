"""Backend ``ivf-gemm``: approximate search by an inverted file searched with matrix products — k-means lists over
the base (:func:`kmeans_gemm`), each query probing its ``nprobe`` nearest lists, one fp32 GEMM per list."""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .decide import _augment_base
from .gemm import cpu_has_fast_bf16, gemm_nearest
from .reference import Metric


def _assign(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Nearest centre (l2) per row by fp32 GEMM blocks and argmax; approximate near ties are fine here."""
    cn = 0.5 * (c * c).sum(1)
    out = np.empty(len(x), dtype=np.int64)
    for s in range(0, len(x), 16384):
        out[s:s + 16384] = (x[s:s + 16384] @ c.T - cn[None, :]).argmax(1)
    return out


def kmeans_gemm(x: np.ndarray, k: int, *, niter: int = 10, seed: int = 0, spherical: bool = False,
                max_points_per_centre: int = 64) -> np.ndarray:
    """Lloyd's k-means on a seeded sample of ≤ ``max_points_per_centre``·k rows, assignment by GEMM + argmax,
    initialised on k distinct sample rows; an empty cluster keeps its centre. For index building (public data
    and candidates only — never released)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n = len(x)
    sample = x[np.sort(rng.choice(n, size=min(n, max_points_per_centre * k), replace=False))]
    c = sample[rng.choice(len(sample), size=k, replace=False)].copy()
    for _ in range(niter):
        a = _assign(sample, c)
        counts = np.bincount(a, minlength=k)
        onehot = sp.csr_matrix((np.ones(len(a), dtype=np.float32), (a, np.arange(len(a)))), shape=(k, len(a)))
        sums = np.asarray(onehot @ sample)
        nz = counts > 0
        c[nz] = sums[nz] / counts[nz, None]
        if spherical:
            c /= np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    return c


def _top_lists(cs: np.ndarray, p: int) -> np.ndarray:
    """The ``p`` largest columns of every row of ``cs`` (modified), by ``p`` argmax passes — an argmax over a row
    of a few hundred fp32 scores is one vectorised pass, measured 50× faster than ``np.argpartition`` here."""
    out = np.empty((len(cs), p), dtype=np.int64)
    ar = np.arange(len(cs))
    for j in range(p):
        out[:, j] = cs.argmax(1)
        if j + 1 < p:
            cs[ar, out[:, j]] = -np.inf
    return out


def ivf_sizes(n_base: int, nlist: int | None, nprobe: int | None) -> tuple[int, int]:
    """(nlist, nprobe) for :func:`_ivf_gemm`, checked: ``nlist`` defaults to √N_base and is capped so every list
    can hold ≈ 39 base rows (faiss's rule); ``nprobe`` (default 2) is capped at nlist. Why: the cost per query
    is nlist centroid scores + nprobe·N_base/nlist member scores, and the build's k-means grows with nlist; at
    400k × 35k × 384 (benchmarks/voting.py data) √N lists cost 82 % of the CPU time of 2√N at equal or better
    agreement, and with the k-means on 256 points per list, nprobe 2 agreed 99.67 % at 300k × 35k (nprobe 1:
    97.1 %, nprobe 3: 99.97 %)."""
    if nlist is not None and nlist < 1:
        raise ConfigError(f"nlist must be ≥ 1, got {nlist}")
    if nprobe is not None and nprobe < 1:
        raise ConfigError(f"nprobe must be ≥ 1, got {nprobe}")
    nl = nlist or max(1, round(np.sqrt(n_base)))
    nl = max(1, min(nl, n_base // 39))
    return nl, max(1, min(nprobe or 2, nl))


def _ivf_gemm(q: np.ndarray, b: np.ndarray, metric: Metric, *, nlist: int | None, nprobe: int | None, niter: int,
              seed: int, block: int = 1 << 16) -> np.ndarray:
    """IVF searched by matrix products: k-means lists over the base (:func:`kmeans_gemm`, ``niter`` iterations);
    each query probes its ``nprobe`` nearest centroids (l2, k-means' own geometry); then, per list, ONE fp32 GEMM
    of the queries probing it against its members and a row argmax — exact within the probed lists, like
    IVF-Flat, but at GEMM speed instead of per-query scans. Ties: lowest index.

    Queries go in blocks of ``block`` rows (memory O(block · (d + nlist))): one coarse GEMM against the
    centroids (bf16 where :func:`cpu_has_fast_bf16`: it only picks the probes), the probes by :func:`_top_lists`, the block's (query, list) pairs grouped by list with one sort,
    each list's product on its members (stored transposed and contiguous, once), and every pair's best written
    to its slot of a (block, nprobe) table, reduced at the end — no per-list scatter-merge. Lists are shared
    between two threads with one BLAS thread each (the per-list products are small: threaded small sgemms wait
    for each other on a contended machine; numpy releases the GIL in the gather and the product).

    Defaults (:func:`ivf_sizes`: nlist = √N_base, nprobe 2): benchmarks/voting.py --pareto and
    benchmarks/scale.py print the time-agreement curve."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    nl, npr = ivf_sizes(len(b), nlist, nprobe)
    if nl <= 1:
        return gemm_nearest(q, b, metric, engine="numpy")
    ba, _ = _augment_base(b, metric)
    # k-means on up to 256 points per list (faiss's default), not 64: at 300k × 35k nprobe 2 agreed 99.67 %
    # instead of 98.63 % for 0.4 s more build — fewer probes for the same agreement pay for it many times over
    cen = kmeans_gemm(b, nl, niter=niter, seed=seed, spherical=metric == "cosine", max_points_per_centre=256)
    owner = _assign(b, cen)  # each base row's list
    used = np.unique(owner)  # lists with members (a centre may own no base row): only these are probed
    cen = cen[used]
    owner = np.searchsorted(used, owner)
    nl = len(used)
    npr = min(npr, nl)
    members = np.argsort(owner, kind="stable")  # ascending within a list: a row's first maximum is the lowest index
    mb = np.searchsorted(owner[members], np.arange(nl + 1))
    lists_T = [np.ascontiguousarray(ba[members[mb[li]:mb[li + 1]]].T) for li in range(nl)]
    cT = np.ascontiguousarray(cen.T)
    chalf = 0.5 * np.einsum("ij,ij->i", cen, cen)
    coarse_bf16 = cpu_has_fast_bf16()  # 10-18 % less CPU time at 300k × 35k, agreement 99.71 % against 99.73 %
    if coarse_bf16:
        import torch

        caug = np.concatenate([cT, -chalf[None, :].astype(np.float32)], axis=0) if metric == "l2" else cT
        cT_low = torch.from_numpy(np.ascontiguousarray(caug)).to(torch.bfloat16)
    out = np.empty(len(q), dtype=np.int64)
    d = q.shape[1]
    qa = np.ones((min(block, len(q)), ba.shape[1]), dtype=np.float32)  # l2: the last column stays 1
    # lists split between two workers by alternating size order, so both get about the same work
    by_size = np.argsort(-(mb[1:] - mb[:-1]), kind="stable")
    halves = [by_size[0::2], by_size[1::2]]
    with ThreadPoolExecutor(2) as pool:
        for s in range(0, len(q), block):
            e = min(len(q), s + block)
            n = e - s
            qa[:n, :d] = q[s:e]
            if coarse_bf16:  # probes only: bf16 rounding moves a probe at most between near-equal centroids
                with torch.no_grad():
                    cs = (torch.from_numpy(qa[:n]).to(torch.bfloat16) @ cT_low).float().numpy()
            else:
                cs = q[s:e] @ cT
                cs -= chalf
            probes = _top_lists(cs, npr)
            flat_l = probes.ravel()
            order = np.argsort(flat_l, kind="stable")
            bounds = np.searchsorted(flat_l[order], np.arange(nl + 1))
            qrow = order // npr
            pair_s = np.empty(n * npr, dtype=np.float32)
            pair_i = np.empty(n * npr, dtype=np.int64)

            def run(lists: np.ndarray, qa=qa, order=order, bounds=bounds, qrow=qrow, pair_s=pair_s,
                    pair_i=pair_i) -> None:
                for li in lists:
                    lo, hi = bounds[li], bounds[li + 1]
                    if lo == hi:
                        continue
                    sc = qa[qrow[lo:hi]] @ lists_T[li]
                    j = sc.argmax(1)
                    slots = order[lo:hi]
                    pair_s[slots] = sc[np.arange(hi - lo), j]
                    pair_i[slots] = members[mb[li] + j]

            with threadpool_limits(1, user_api="blas"):  # the coarse product above keeps every BLAS thread
                for f in [pool.submit(run, h) for h in halves]:
                    f.result()
            ps, pi = pair_s.reshape(n, npr), pair_i.reshape(n, npr)
            top = ps.max(1, keepdims=True)
            out[s:e] = np.where(ps == top, pi, np.iinfo(np.int64).max).min(1)
    return out
