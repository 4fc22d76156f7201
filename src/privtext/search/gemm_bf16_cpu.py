"""Backend ``torch`` in bf16 on a CPU (oneDNN: AMX-BF16 or AVX-512-BF16), the path
:func:`~privtext.search.gemm.gemm_nearest` takes for ``select='int16'`` (its default there): contenders selected
on the int16 view of the bf16 scores, rescored in fp32 in numpy, near ties decided in float64."""

from __future__ import annotations

import numpy as np

from .decide import _NORM_UP, _U_LOW, _decide_dense, _row_norms, _tol32, _tol_low
from .reference import Metric, _decide64_pairs


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
