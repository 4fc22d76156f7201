"""Backend ``torch``: the GEMM search in torch on ``cpu`` or ``cuda``, fp32 or bf16/fp16 with fp32 accumulation
(:func:`~privtext.search.gemm.gemm_nearest` prepares the base and calls :func:`torch_nearest`). A low-precision
block's contenders (every score within the rounding bound of the row maximum, by ``topk`` or a window) are
rescored in fp32 on the device, near ties decided in float64."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from .decide import _U_LOW, _augment_rows, _decide_dense, _row_norms, _tol32, _tol_low
from .reference import Metric, _decide64_pairs


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


@contextmanager
def _fp32_accumulation(dev: str) -> Iterator[None]:
    """On CUDA, fp32 accumulation everywhere while the block loop runs (no TF32, no reduced-precision reductions):
    the error bounds assume it. The flags are restored afterwards."""
    import torch

    if dev != "cuda":
        yield
        return
    mm = torch.backends.cuda.matmul
    cuda_flags = (mm.allow_tf32, mm.allow_fp16_reduced_precision_reduction, mm.allow_bf16_reduced_precision_reduction)
    mm.allow_tf32 = mm.allow_fp16_reduced_precision_reduction = mm.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        mm.allow_tf32, mm.allow_fp16_reduced_precision_reduction, mm.allow_bf16_reduced_precision_reduction = cuda_flags


def torch_nearest(q: np.ndarray, b: np.ndarray, ba: np.ndarray, metric: Metric, *, dev: str, prec: str,
                  alpha: np.float32, select: str, top_k: int, rows_per: int, dim: int, nbmax: float,
                  col_err: float) -> np.ndarray:
    """The torch engine of :func:`~privtext.search.gemm.gemm_nearest`: blocks of ``rows_per`` queries (scaled by
    ``alpha``, the fp16 power of two) against the augmented base ``ba`` on ``dev`` in ``prec``. fp32: each row's
    winner proven or re-decided (:func:`_decide_dense_torch`); bf16/fp16: the contenders within the
    low-precision bound (``select``: ``topk`` or ``window``) rescored in fp32 (:func:`_decide_pairs32`)."""
    import torch

    nq = len(q)
    out = np.empty(nq, dtype=np.int64)
    tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[prec]
    with _fp32_accumulation(dev), torch.no_grad():
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
    return out
