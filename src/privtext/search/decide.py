"""Proving a low-precision winner exact: rigorous bounds on the rounding of fp32 and bf16/fp16 scores, and the
re-decision in float64 (:func:`~privtext.search.reference._decide64_pairs`) of every row whose winner the bound
does not prove. Used by the GEMM backends (:mod:`.gemm`, :mod:`.gemm_torch`, :mod:`.gemm_bf16_cpu`) and by
:mod:`.ivf_gemm`'s base augmentation."""

from __future__ import annotations

import numpy as np

from .reference import Metric, _decide64_pairs

_U32 = 2.0 ** -24  # unit roundoff of float32 (round to nearest)
_U_LOW = {"fp32": 0.0, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11}


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
