"""The float64 reference every exact search returns: the winner by elementwise float64 scores, ties to the lowest
index — and the input preparation every backend shares.

* ``l2``      — argmin ‖q − b‖₂;
* ``cosine``  — argmax ⟨q/‖q‖, b/‖b‖⟩ (inputs are normalised by :func:`_prep`, so callers need not).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..errors import ConfigError

Metric = Literal["l2", "cosine"]


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
