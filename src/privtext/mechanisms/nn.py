"""Nearest-neighbour search for voting: exact (chunked GEMM in numpy or torch, faiss) and approximate (IVF, HNSW).

All backends return, for each query row, the index of its nearest base row under the chosen metric:

* ``l2``      — argmin ‖q − b‖₂;
* ``cosine``  — argmax ⟨q/‖q‖, b/‖b‖⟩ (inputs are normalised here, so callers need not).

Exact backends agree with a float64 brute-force reference on every query, ties included (to the lowest index).
``numpy`` and ``torch`` (:func:`gemm_nearest`) compute one block of private rows × all candidates by a matrix
product — fp32, or bf16/fp16 with fp32 accumulation — take each row's maximum, and re-decide every row whose
winner is not proven by a rigorous rounding-error bound: its contenders are rescored in fp32 and, if still too
close, in float64. ``torch`` runs on ``device`` (``auto``: CUDA when available); ``precision='auto'`` is fp16 on
CUDA, bf16 on CPUs with AMX-BF16 or AVX-512-BF16 (:func:`cpu_has_fast_bf16`) and fp32 elsewhere.
``faiss`` is faiss's flat index plus the same float64 refinement.

Approximate backends (``ivf``, ``hnsw``) trade recall for speed; they still produce exactly one vote per private
record, so the *sensitivity of the vote histogram is unchanged by approximation* — the privacy analysis does not
depend on which candidate a record votes for, only on each record casting one vote.

Memory: the GEMM backends hold one ``chunk × N_base`` block of scores at a time — O(chunk · N_syn), never
O(N_priv · N_syn).
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np

from ..errors import ConfigError

Metric = Literal["l2", "cosine"]
Backend = Literal["auto", "faiss", "numpy", "torch", "ivf", "ivf-gemm", "hnsw"]
EXACT = ("faiss", "numpy", "torch")
APPROX = ("ivf", "ivf-gemm", "hnsw")
ANN_KINDS = ("ivf", "ivf-gemm", "ivf-sq8", "ivf-pq", "hnsw")

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


def center_rows(x: np.ndarray, center: np.ndarray) -> np.ndarray:
    """x ↦ (x − c)/‖x − c‖ (rows equal to c map to 0)."""
    y = np.asarray(x, dtype=np.float32) - np.asarray(center, dtype=np.float32)[None, :]
    n = np.linalg.norm(y, axis=1, keepdims=True)
    return (y / np.maximum(n, 1e-12)).astype(np.float32)


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


# ---------------------------------------------------------------------------------------------------------------
# Chunked GEMM + argmax: exact at low precision by re-deciding near-ties
# ---------------------------------------------------------------------------------------------------------------

Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
_U32 = 2.0 ** -24  # unit roundoff of float32 (round to nearest)
_U_LOW = {"fp32": 0.0, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
_BLOCK_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 28}  # scores per block: 64 MB fp32 on CPU, 512 MB fp16 on CUDA


def _augment_base(b: np.ndarray, metric: Metric) -> tuple[np.ndarray, float]:
    """Base rows whose inner products with the (augmented) queries are the scores to maximise, and the fp32
    rounding error of the extra column.

    cosine: the rows themselves (already unit). l2: argmin ‖q − b‖² = argmax q·b + (c − ‖b‖²/2) with the constant
    c = max‖b‖²/2, so queries get a column of ones (:func:`_augment_rows`, per block) and base rows the column
    c − ‖b‖²/2 ≥ 0 (float64, rounded once) — one GEMM, no extra pass; for unit rows the scores are the cosines,
    as small as they can be, which keeps low-precision output rounding small and the row maxima positive."""
    if metric == "cosine":
        return b, 0.0
    n2 = np.einsum("ij,ij->i", b.astype(np.float64), b.astype(np.float64))
    col = 0.5 * (n2.max() - n2)
    ba = np.ascontiguousarray(np.concatenate([b, col[:, None].astype(np.float32)], axis=1))
    return ba, float(col.max()) * _U32


def _augment_rows(q, metric: Metric):  # type: ignore[no-untyped-def]
    """Queries (numpy or torch) with the column of ones that l2 needs."""
    if metric == "cosine":
        return q
    if isinstance(q, np.ndarray):
        return np.concatenate([q, np.ones((len(q), 1), dtype=q.dtype)], axis=1)
    import torch

    return torch.cat([q, torch.ones((len(q), 1), dtype=q.dtype, device=q.device)], dim=1)


_NORM_UP = 1 + 1e-4  # an fp32 norm is within (D/2 + 1)·2⁻²⁴ ≈ 10⁻⁵ relative: this makes it an upper bound


def _row_norms(x):  # type: ignore[no-untyped-def]
    """Upper bounds on the rows' Euclidean norms (numpy or torch, fp32, on the array's device)."""
    if isinstance(x, np.ndarray):
        return np.sqrt(np.einsum("ij,ij->i", x, x)) * np.float32(_NORM_UP)
    return x.norm(dim=1) * _NORM_UP


def _max_norm(x: np.ndarray) -> float:
    x64 = x.astype(np.float64)
    return float(np.sqrt(np.einsum("ij,ij->i", x64, x64).max())) if len(x) else 0.0


def _tol32(nq, dim: int, nb: float, col_err: float):  # type: ignore[no-untyped-def]
    """Twice a rigorous per-row bound on |fp32 score − exact score| from the rows' norms ``nq``: fp32
    accumulation in any order, γ_D·Σ|q_k||b_k| ≤ D·2⁻²⁴·‖q‖·max‖b‖ (Higham, Thm 3.5; Cauchy–Schwarz), plus the
    rounding of the l2 column; a 1 % margin and 10⁻¹² absorb the float64 reference's own rounding."""
    scale = nq * nb
    return 2 * (1.01 * ((dim + 2) * _U32 * scale + col_err) + 1e-12 * (1.0 + scale))


def _tol_low(nql, eq, dim: int, nbl: float, eb: float, precision: str, col_err: float):  # type: ignore[no-untyped-def]
    """Twice a rigorous per-row bound on |low-precision score − exact score|, before output rounding.

    q = q̃ + e_q and b = b̃ + e_b with the rounding errors known exactly (``nql`` = ‖q̃‖, ``eq`` = ‖e_q‖ per row;
    ``nbl``, ``eb`` their maxima over the base), so |q·b − q̃·b̃| ≤ ‖q̃‖·max‖e_b‖ + ‖e_q‖·max‖b̃‖ + ‖e_q‖·max‖e_b‖
    (Cauchy–Schwarz), plus fp32 accumulation γ_D·‖q̃‖·max‖b̃‖ (the bound assumes fp32 accumulation — oneDNN's
    AMX/AVX-512-BF16 kernels, and cuBLAS with reduced-precision reductions off, which :func:`gemm_nearest`
    sets), plus D·2⁻²⁴ for fp16 subnormals (|entries| ≤ 1 there). The output rounding u·|s̃| is added per
    block from the row maximum."""
    d = dim + 2
    sub = d * _U32 if precision == "fp16" else 0.0
    e = nql * eb + eq * nbl + eq * eb + d * _U32 * nql * nbl + sub + col_err
    return 2 * (1.01 * e + 1e-12 * (1.0 + nql * nbl))


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


def _decide64_pairs(q: np.ndarray, b: np.ndarray, rows: np.ndarray, cols: np.ndarray, metric: Metric,
                    n_rows: int) -> np.ndarray:
    """For (row, col) contender pairs: per row the float64 winner, ties to the lowest index (−1: no pair).

    Same arithmetic as :func:`brute_force_nn` (elementwise products summed along the row), so equal candidates
    get equal scores."""
    best = np.full(n_rows, -1, dtype=np.int64)
    if len(rows) == 0:
        return best
    s = np.empty(len(rows), dtype=np.float64)
    for p in range(0, len(rows), 4096):
        r, c = rows[p:p + 4096], cols[p:p + 4096]
        q64, b64 = q[r].astype(np.float64), b[c].astype(np.float64)
        s[p:p + 4096] = -(b64 * q64).sum(1) if metric == "cosine" else ((b64 - q64) ** 2).sum(1)
    order = np.lexsort((cols, s, rows))  # by row, then score (smaller is nearer), then index
    r_sorted = rows[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = r_sorted[1:] != r_sorted[:-1]
    best[r_sorted[first]] = cols[order][first]
    return best


def _decide_dense(s: np.ndarray, tol: np.ndarray, q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:
    """fp32 scores (numpy, rows × all of ``b``; modified in place and restored): the argmax, proven by the gap to
    the runner-up, else re-decided in float64 among every score within ``tol``."""
    ar = np.arange(len(s))
    win = s.argmax(1)
    m1 = s[ar, win].copy()
    s[ar, win] = -np.inf
    m2 = s.max(1) if s.shape[1] > 1 else np.full(len(s), -np.inf, dtype=s.dtype)
    s[ar, win] = m1
    unsure = np.nonzero(m1 - m2 <= tol)[0]
    if len(unsure):
        r, c = np.divmod(np.flatnonzero(s[unsure] >= (m1[unsure] - tol[unsure])[:, None]), s.shape[1])
        best = _decide64_pairs(q, b, unsure[r], c, metric, len(s))
        win[unsure] = best[unsure]
    return win


def _decide_dense_torch(s, tol, q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:  # type: ignore[no-untyped-def]
    """:func:`_decide_dense` for a torch tensor on any device (CUDA: top-2 by ``topk``)."""
    import torch

    if s.device.type == "cpu":
        return _decide_dense(s.numpy(), tol.cpu().numpy(), q, b, metric)
    if s.shape[1] < 2:
        return s.argmax(1).cpu().numpy()
    vals, idx = s.topk(2, dim=1)
    win = idx[:, 0].cpu().numpy()
    unsure = torch.nonzero(vals[:, 0] - vals[:, 1] <= tol).flatten()
    if len(unsure):
        r, c = torch.nonzero(s[unsure] >= (vals[unsure, 0] - tol[unsure])[:, None], as_tuple=True)
        un = unsure.cpu().numpy()
        best = _decide64_pairs(q, b, un[r.cpu().numpy()], c.cpu().numpy(), metric, len(s))
        win[un] = best[un]
    return win


def _contenders_topk(s, tol_fn, k: int):  # type: ignore[no-untyped-def]
    """Low-precision scores (torch, any device) → contender pairs (r, c) and rows needing a dense fp32 pass:
    the ``k`` largest scores; a row whose k-th score is still within the window may have more contenders."""
    import torch

    k = min(k, s.shape[1])
    vals, idx = s.topk(k, dim=1)
    vals = vals.float()
    m = vals[:, 0]
    lo = m - tol_fn(m)
    full = vals[:, -1] >= lo if k < s.shape[1] else torch.zeros_like(m, dtype=torch.bool)
    cand = (vals >= lo[:, None]) & ~full[:, None]
    r, j = torch.nonzero(cand, as_tuple=True)
    return r, idx[r, j], torch.nonzero(full).flatten()


def _contenders_window(s, tol_fn):  # type: ignore[no-untyped-def]
    """:func:`_contenders_topk` without a top-k: the row maximum m, then every score ≥ m − tol (compared in fp32,
    the low-precision scores promoted on the fly), so no row ever needs the dense pass and there is no k to
    outgrow. Rows with one contender (the common case) are decided by the comparison alone: that contender is
    the row maximum, and the float64 winner is among the contenders (the window's guarantee), so it is the
    winner. Two reductions over the block instead of a sort; measured on an H100 at Yelp scale (1.9M × 35k ×
    384, bf16) it was slower than ``topk`` (3.2 s against 2.7 s): the time goes to per-block synchronisation and
    pair bookkeeping, not the selection (the resident bf16 GEMM + argmax alone takes 0.18 s, the host-to-device
    copy of the private rows 0.34 s). Kept as an option, tested like the others."""
    import torch

    mx, am = s.max(dim=1)
    m = mx.float()
    lo = m - tol_fn(m)
    mask = s >= lo[:, None]
    multi = mask.sum(dim=1) > 1
    single_rows = torch.nonzero(~multi).flatten()
    single_cols = am[single_rows]
    mr = torch.nonzero(multi).flatten()
    r, c = torch.nonzero(mask[mr], as_tuple=True)
    return torch.cat([single_rows, mr[r]]), torch.cat([single_cols, c]), mr[:0]


def _contenders_int16(s, tol_fn):  # type: ignore[no-untyped-def]
    """:func:`_contenders_topk` for bf16 scores on CPU, in numpy and without a sort: non-negative bf16 values
    order like their bit patterns read as int16 (negative ones read as negative int16s), so numpy's vectorised
    int16 argmax and comparison find the maximum and every score ≥ the window's lower end (rounded down to a
    bf16). Rows whose window reaches 0 (no positive score to anchor it) get the dense fp32 pass."""
    import torch

    s16 = s.view(torch.int16).numpy()
    ar = np.arange(len(s16))
    mb = torch.from_numpy(np.ascontiguousarray(s16[ar, s16.argmax(1)])).view(torch.bfloat16).float()
    lo = mb - tol_fn(mb)
    full = (lo <= 0).numpy()
    lob = lo.clamp(min=float(np.finfo(np.float32).tiny)).to(torch.bfloat16)
    lo16 = lob.view(torch.int16).numpy().copy()
    lo16 -= (lob.float() > lo).numpy().astype(np.int16)  # round down: one bf16 step lower (positive values)
    lo16[full] = np.iinfo(np.int16).max  # nothing selected; these rows go dense
    r, c = np.divmod(np.flatnonzero(s16 >= lo16[:, None]), s16.shape[1])  # 1-d nonzero: ~30× the 2-d one
    return r, c, np.nonzero(full)[0]


def _decide_pairs32_np(qa: np.ndarray, ba: np.ndarray, r: np.ndarray, c: np.ndarray, tol32: np.ndarray,
                       q: np.ndarray, b: np.ndarray, metric: Metric, n_rows: int) -> np.ndarray:
    """:func:`_decide_pairs32` in numpy (CPU)."""
    s32 = np.empty(len(r), dtype=np.float32)
    for p in range(0, len(r), 16384):
        s32[p:p + 16384] = np.einsum("ij,ij->i", qa[r[p:p + 16384]], ba[c[p:p + 16384]])
    o = np.lexsort((-s32, r))  # by row, then score descending
    rs, cs, ss = r[o], c[o], s32[o]
    win = np.full(n_rows, -1, dtype=np.int64)
    if len(rs) == 0:
        return win
    first = np.ones(len(rs), dtype=bool)
    first[1:] = rs[1:] != rs[:-1]
    fi = np.nonzero(first)[0]
    rows = rs[fi]
    win[rows] = cs[fi]
    nxt = np.minimum(fi + 1, len(rs) - 1)
    unsure = (fi + 1 < len(rs)) & (rs[nxt] == rows) & (ss[fi] - ss[nxt] <= tol32[rows])
    if unsure.any():
        m1 = np.full(n_rows, np.inf, dtype=np.float32)
        m1[rows[unsure]] = ss[fi[unsure]]
        pick = ss >= m1[rs] - tol32[rs]
        best = _decide64_pairs(q, b, rs[pick], cs[pick], metric, n_rows)
        win[rows[unsure]] = best[rows[unsure]]
    return win


def _decide_pairs32(q32, ba32, r, c, tol32, q: np.ndarray, b: np.ndarray, metric: Metric, n_rows: int,
                    pairs_per: int = 16384) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Contender pairs (row r of the block, column c): fp32 rescoring on the device; per row the best, proven by
    the gap to the row's runner-up, else re-decided in float64 among the pairs within ``tol32``."""
    import torch

    s32 = torch.empty(len(r), dtype=torch.float32, device=q32.device)
    for p in range(0, len(r), pairs_per):
        s32[p:p + pairs_per] = (q32[r[p:p + pairs_per]] * ba32[c[p:p + pairs_per]]).sum(1)
    o = torch.sort(s32, descending=True, stable=True).indices
    o = o[torch.sort(r[o], stable=True).indices]  # by row, then score descending
    rs, cs, ss = r[o], c[o], s32[o]
    first = torch.ones(len(rs), dtype=torch.bool, device=rs.device)
    first[1:] = rs[1:] != rs[:-1]
    fi = torch.nonzero(first).flatten()
    win = np.full(n_rows, -1, dtype=np.int64)
    rows = rs[fi]
    win[rows.cpu().numpy()] = cs[fi].cpu().numpy()
    nxt = torch.clamp(fi + 1, max=len(rs) - 1)
    has2 = (fi + 1 < len(rs)) & (rs[nxt] == rows)
    unsure = has2 & (ss[fi] - ss[nxt] <= tol32[rows])
    if unsure.any():
        m1 = torch.full((n_rows,), float("inf"), device=rs.device)
        m1[rows[unsure]] = ss[fi[unsure]]
        pick = ss >= m1[rs] - tol32[rs]
        un = rows[unsure].cpu().numpy()
        best = _decide64_pairs(q, b, rs[pick].cpu().numpy(), cs[pick].cpu().numpy(), metric, n_rows)
        win[un] = best[un]
    return win


def _gemm_bf16_cpu(q: np.ndarray, b: np.ndarray, ba: np.ndarray, metric: Metric, rows_per: int, dim: int,
                   nbmax: float, col_err: float) -> np.ndarray:
    """:func:`gemm_nearest` in bf16 on CPU (oneDNN: AMX or AVX-512-BF16), contenders by :func:`_contenders_int16`.

    Built for throughput: the augmented fp32 query block, its bf16 copy and the block of bf16 scores live in
    buffers allocated once (a fresh 33 MB score block per GEMM costs page faults comparable to the selection);
    per-row norms and tolerances are numpy on the block; only the GEMM and the bf16 casts are torch. The next
    block's GEMM runs in a second thread while this block's contenders are selected and decided (torch and numpy
    release the GIL), so the selection hides behind the GEMM on a machine with a core to spare."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    nq, nb = len(q), len(ba)
    rows_per = min(rows_per, nq)
    u = _U_LOW["bf16"]
    with torch.no_grad():
        blow = torch.from_numpy(ba).to(torch.bfloat16)
        bTlow = blow.T.contiguous()  # (D, N): the layout oneDNN's bf16 kernels run fastest on
        blf = blow.float().numpy()
        nbl = float(np.sqrt(np.einsum("ij,ij->i", blf.astype(np.float64), blf.astype(np.float64)).max()))
        dif = ba.astype(np.float64) - blf  # exact differences
        eb = float(np.sqrt(np.einsum("ij,ij->i", dif, dif).max()))
        del blow, blf, dif
    out = np.empty(nq, dtype=np.int64)
    n_buf = 2
    qbuf = [np.ones((rows_per, dim), dtype=np.float32) for _ in range(n_buf)]  # l2: the last column stays 1
    sbuf = [torch.empty((rows_per, nb), dtype=torch.bfloat16) for _ in range(n_buf)]
    d = q.shape[1]

    def prepare_and_multiply(s: int, k: int):  # type: ignore[no-untyped-def]
        e = min(nq, s + rows_per)
        qa = qbuf[k][: e - s]
        qa[:, :d] = q[s:e]
        with torch.no_grad():
            qlow = torch.from_numpy(qa).to(torch.bfloat16)
            sc = sbuf[k][: e - s]
            torch.mm(qlow, bTlow, out=sc)
        qlf = qlow.float().numpy()
        nql = np.sqrt(np.einsum("ij,ij->i", qlf, qlf)) * np.float32(_NORM_UP)
        dq = qa - qlf
        eq = np.sqrt(np.einsum("ij,ij->i", dq, dq)) * np.float32(_NORM_UP)
        return s, e, qa, sc, _tol_low(nql, eq, dim, nbl, eb, "bf16", col_err)

    def decide(s: int, e: int, qa: np.ndarray, sc, tl: np.ndarray) -> None:  # type: ignore[no-untyped-def]
        t32 = _tol32(_row_norms(qa), dim, nbmax, col_err)

        def tol_fn(m, tl=torch.from_numpy(tl)):  # type: ignore[no-untyped-def]
            return tl + 2.02 * u * (m.abs() + tl)  # + output rounding of the winner's and a rival's score

        r, c, fn = _contenders_int16(sc, tol_fn)
        res = _decide_pairs32_np(qa, ba, r, c, t32, q[s:e], b, metric, e - s)
        if len(fn):  # no positive maximum to anchor the window: these rows in fp32
            res[fn] = _decide_dense(qa[fn] @ ba.T, t32[fn], q[s:e][fn], b, metric)
        out[s:e] = res

    starts = list(range(0, nq, rows_per))
    with ThreadPoolExecutor(1) as pool:
        nxt = pool.submit(prepare_and_multiply, starts[0], 0)
        for i in range(len(starts)):
            cur = nxt.result()
            if i + 1 < len(starts):
                nxt = pool.submit(prepare_and_multiply, starts[i + 1], (i + 1) % n_buf)
            decide(*cur)
    return out


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
    select: Literal["auto", "topk", "window", "int16"] = "auto",
) -> np.ndarray:
    """Exact nearest neighbours by chunked matrix products (``q``, ``b`` prepared by :func:`_prep`).

    Per block of private rows, scores S = Q·Bᵀ — ``engine='numpy'``: float32 sgemm; ``'torch'``: on ``device``
    (``cpu`` runs the code CUDA runs) in ``precision``.

    * fp32: the row's argmax, proven when the runner-up is more than 2E below it (E: a rigorous bound on the
      fp32 rounding of a score, :func:`_tol32`); otherwise every score within 2E is re-decided in
      float64 like :func:`brute_force_nn`, ties to the lowest index.
    * bf16/fp16: the exact winner is among the scores within 2E_low of the row maximum (:func:`_tol_low`
      plus output rounding). ``select='topk'`` (CUDA's default) takes the ``top_k`` largest, recomputing the
      row in fp32 when the k-th is still in the window; ``'window'`` every score in the window
      (:func:`_contenders_window`); ``'int16'`` (bf16 on CPU) thresholds the bit patterns
      (:func:`_contenders_int16`). The contenders are rescored in fp32 and decided as above.

    So every backend returns the float64 reference's winner. Memory: one block of ``chunk_size × N_base`` scores
    (default: as many rows as fit in 2²⁴ scores on CPU, 2²⁸ on CUDA), never N_priv × N_base.
    """
    import torch

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
    nq, nb = len(q), len(b)
    rows_per = chunk_size or max(16, _BLOCK_ELEMENTS[dev] // max(nb, 1))
    alpha = np.float32(1.0)
    if prec == "fp16":  # a power of two: exact, keeps every |entry| ≤ 1 and every |score| ≤ 1.5 (no overflow)
        top = max(float(np.abs(q).max()) * np.sqrt(q.shape[1]), _max_norm(b), 1e-30)  # ≥ every row's norm
        alpha = np.float32(2.0 ** -np.ceil(np.log2(top)))
    ba, col_err = _augment_base(b * alpha if alpha != 1 else b, metric)
    dim, nbmax = ba.shape[1], _max_norm(ba)
    out = np.empty(nq, dtype=np.int64)
    if engine == "numpy":
        btT = np.ascontiguousarray(ba.T)
        for s in range(0, nq, rows_per):
            e = min(nq, s + rows_per)
            qa = _augment_rows(q[s:e], metric)
            out[s:e] = _decide_dense(qa @ btT, _tol32(_row_norms(qa), dim, nbmax, col_err), q[s:e], b, metric)
        return out
    if select == "int16":
        return _gemm_bf16_cpu(q, b, ba, metric, rows_per, dim, nbmax, col_err)
    tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[prec]
    cuda_flags = None
    if dev == "cuda":  # fp32 accumulation everywhere: the error bounds assume it
        mm = torch.backends.cuda.matmul
        cuda_flags = (mm.allow_tf32, mm.allow_fp16_reduced_precision_reduction, mm.allow_bf16_reduced_precision_reduction)
        mm.allow_tf32 = mm.allow_fp16_reduced_precision_reduction = mm.allow_bf16_reduced_precision_reduction = False
    try:
        with torch.no_grad():
            ba32 = torch.from_numpy(ba).to(dev)
            bT32 = ba32.T.contiguous()
            if prec != "fp32":
                blow = ba32.to(tdtype)
                bTlow = blow.T.contiguous()  # (D, N): the layout oneDNN's bf16 kernels run fastest on
                bl64 = blow.double()
                nbl = float(bl64.norm(dim=1).max())
                eb = float((ba32.double() - bl64).norm(dim=1).max())  # the differences are exact
                del bl64
                u = _U_LOW[prec]
            for s in range(0, nq, rows_per):
                e = min(nq, s + rows_per)
                qt = torch.from_numpy(q[s:e]).to(dev)
                q32 = _augment_rows(qt * float(alpha) if alpha != 1 else qt, metric)
                t32 = _tol32(_row_norms(q32), dim, nbmax, col_err)
                if prec == "fp32":
                    out[s:e] = _decide_dense_torch(q32 @ bT32, t32, q[s:e], b, metric)
                    continue
                qlow = q32.to(tdtype)
                qlf = qlow.float()
                tl = _tol_low(_row_norms(qlf), _row_norms(q32 - qlf), dim, nbl, eb, prec, col_err)
                sc = qlow @ bTlow

                def tol_fn(m, tl=tl):  # type: ignore[no-untyped-def]
                    return tl + 2.02 * u * (m.abs() + tl)  # + output rounding of the winner's and a rival's score

                r, c, full = (_contenders_window(sc, tol_fn) if select == "window"
                              else _contenders_topk(sc, tol_fn, top_k))
                del sc
                res = _decide_pairs32(q32, ba32, r, c, t32, q[s:e], b, metric, e - s)
                if len(full):  # more contenders than top_k: these rows in fp32 over the whole base
                    fn = full.cpu().numpy()
                    res[fn] = _decide_dense_torch(q32[full] @ bT32, t32[full], q[s:e][fn], b, metric)
                out[s:e] = res
    finally:
        if cuda_flags is not None:
            mm = torch.backends.cuda.matmul
            mm.allow_tf32, mm.allow_fp16_reduced_precision_reduction, mm.allow_bf16_reduced_precision_reduction = cuda_flags
    return out


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
    ti, td = _faiss_flat(q, b, metric, min(_REFINE_K, len(b)))
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
