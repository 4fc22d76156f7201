"""Distribution distances between embedding sets: FID, kNN precision/recall, MAUVE.

* **FID** (the papers' "FID on text embeddings"): fit a Gaussian to each set of sentence embeddings and take the
  Fréchet (2-Wasserstein) distance between them,

  ``d² = ‖μ₁ − μ₂‖² + Tr(Σ₁ + Σ₂ − 2 (Σ₁^{1/2} Σ₂ Σ₁^{1/2})^{1/2})``.

  The trace of the matrix square root is computed through symmetric eigen-decompositions (``Σ₁^{1/2}`` from
  ``eigh(Σ₁)``, then the eigenvalues of the symmetric PSD matrix ``Σ₁^{1/2} Σ₂ Σ₁^{1/2}``), which equals
  ``Tr((Σ₁Σ₂)^{1/2})`` and never produces the complex round-off that ``scipy.linalg.sqrtm(Σ₁Σ₂)`` does on
  near-singular covariances. With fewer samples than dimensions a covariance is rank-deficient; ``ridge="auto"``
  then adds ``1e-6 · mean variance`` to both diagonals, and the result reports the ridge it used.
  FID is biased upwards at small n: compare numbers computed on sets of equal size.
* **kNN precision/recall** (Kynkäänniemi et al., 2019): the k-NN ball around each real sample spans the "real
  manifold"; precision is the share of synthetic samples inside it, recall the share of real samples inside the
  synthetic manifold.
* **MAUVE** (Pillutla et al., 2021) on the same embeddings, when the ``mauve-text`` package is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import DataError, optional_import
from ._threads import single_blas
from .results import AsDict


def _as_2d(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise DataError(f"{what} must be a 2-d array (n, d), got shape {a.shape}")
    if a.shape[0] < 2:
        raise DataError(f"{what} needs at least 2 rows to fit a Gaussian, got {a.shape[0]}")
    if not np.all(np.isfinite(a)):
        raise DataError(f"{what} contains NaN or infinite values")
    return a


def _psd_sqrt(s: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((s + s.T) / 2)
    w = np.clip(w, 0.0, None)
    return (v * np.sqrt(w)) @ v.T


def trace_sqrt_product(sigma1: np.ndarray, sigma2: np.ndarray) -> float:
    """``Tr((Σ₁Σ₂)^{1/2})`` for symmetric PSD matrices, via ``Σ₁^{1/2} Σ₂ Σ₁^{1/2}`` (symmetric, PSD)."""
    with single_blas():
        r = _psd_sqrt(np.asarray(sigma1, dtype=np.float64))
        m = r @ np.asarray(sigma2, dtype=np.float64) @ r
        ev = np.linalg.eigvalsh((m + m.T) / 2)
    return float(np.sqrt(np.clip(ev, 0.0, None)).sum())


def frechet_distance(mu1: Any, sigma1: Any, mu2: Any, sigma2: Any) -> float:
    """Squared Fréchet distance between N(μ₁, Σ₁) and N(μ₂, Σ₂) (clipped at 0 against round-off)."""
    mu1, mu2 = np.atleast_1d(np.asarray(mu1, np.float64)), np.atleast_1d(np.asarray(mu2, np.float64))
    s1, s2 = np.atleast_2d(np.asarray(sigma1, np.float64)), np.atleast_2d(np.asarray(sigma2, np.float64))
    d = mu1.shape[0]
    for name, s in (("sigma1", s1), ("sigma2", s2)):
        if s.shape != (d, d):
            raise DataError(f"{name} has shape {s.shape}; expected ({d}, {d}) to match the means")
    if mu2.shape != mu1.shape:
        raise DataError(f"means have shapes {mu1.shape} and {mu2.shape}")
    diff = mu1 - mu2
    val = float(diff @ diff + np.trace(s1) + np.trace(s2) - 2.0 * trace_sqrt_product(s1, s2))
    return max(val, 0.0)


@dataclass(frozen=True)
class FIDResult(AsDict):
    fid: float
    mean_term: float
    cov_term: float
    n_a: int
    n_b: int
    dim: int
    ridge: float
    rank_deficient: bool


def fid(a: Any, b: Any, *, ridge: float | Literal["auto"] = "auto") -> FIDResult:
    """FID between two embedding sets (rows are samples).

    ``ridge``: added to both covariance diagonals; ``"auto"`` adds ``1e-6 ·`` the mean per-dimension variance
    when either set has no more samples than dimensions (its covariance is then singular), else nothing.
    """
    x, y = _as_2d(a, "first embedding set"), _as_2d(b, "second embedding set")
    if x.shape[1] != y.shape[1]:
        raise DataError(f"embedding sets have different dimensions: {x.shape[1]} and {y.shape[1]}")
    d = x.shape[1]
    mu1, mu2 = x.mean(0), y.mean(0)
    s1, s2 = np.atleast_2d(np.cov(x, rowvar=False)), np.atleast_2d(np.cov(y, rowvar=False))
    deficient = min(x.shape[0], y.shape[0]) <= d
    if ridge == "auto":
        r = 1e-6 * float(np.trace(s1) + np.trace(s2)) / (2 * d) if deficient else 0.0
    else:
        r = float(ridge)
        if r < 0:
            raise DataError(f"ridge must be non-negative, got {ridge!r}")
    if r > 0:
        s1 = s1 + r * np.eye(d)
        s2 = s2 + r * np.eye(d)
    diff = mu1 - mu2
    mean_term = float(diff @ diff)
    total = frechet_distance(mu1, s1, mu2, s2)
    return FIDResult(fid=total, mean_term=mean_term, cov_term=total - mean_term, n_a=x.shape[0], n_b=y.shape[0],
                     dim=d, ridge=r, rank_deficient=deficient)


# ----------------------------------------------------------------------------------------- precision / recall


def _sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d, 0.0)


def knn_radii(x: np.ndarray, *, k: int, chunk: int = 2048) -> np.ndarray:
    """Squared distance from each row of ``x`` to its k-th nearest other row."""
    n = x.shape[0]
    if not 1 <= k < n:
        raise DataError(f"k must be in [1, {n - 1}] for a set of {n} samples, got {k!r}")
    out = np.empty(n, dtype=np.float64)
    for s in range(0, n, chunk):
        d = _sq_dists(x[s:s + chunk], x)
        # the row's own zero distance is the 0-th order statistic, so the k-th is its k-th neighbour
        out[s:s + chunk] = np.partition(d, k, axis=1)[:, k]
    return out


def _coverage(points: np.ndarray, centres: np.ndarray, radii: np.ndarray, chunk: int = 2048) -> np.ndarray:
    inside = np.zeros(points.shape[0], dtype=bool)
    for s in range(0, points.shape[0], chunk):
        d = _sq_dists(points[s:s + chunk], centres)
        inside[s:s + chunk] = (d <= radii[None, :] * (1 + 1e-9) + 1e-12).any(1)
    return inside


@dataclass(frozen=True)
class PrecisionRecall(AsDict):
    precision: float
    recall: float
    k: int
    n_real: int
    n_synthetic: int


def precision_recall(real: Any, synthetic: Any, *, k: int = 3) -> PrecisionRecall:
    """Improved precision and recall (Kynkäänniemi et al., 2019) with k-NN balls."""
    r, s = _as_2d(real, "real embeddings"), _as_2d(synthetic, "synthetic embeddings")
    if r.shape[1] != s.shape[1]:
        raise DataError(f"embedding sets have different dimensions: {r.shape[1]} and {s.shape[1]}")
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise DataError(f"k must be a positive integer, got {k!r}")
    precision = float(_coverage(s, r, knn_radii(r, k=int(k))).mean())
    recall = float(_coverage(r, s, knn_radii(s, k=int(k))).mean())
    return PrecisionRecall(precision=precision, recall=recall, k=int(k), n_real=r.shape[0], n_synthetic=s.shape[0])


# ---------------------------------------------------------------------------------------------------- MAUVE


@dataclass(frozen=True)
class MauveResult(AsDict):
    mauve: float
    frontier_integral: float
    num_buckets: int
    n_real: int
    n_synthetic: int


def require_mauve() -> Any:
    """The ``mauve`` module (mauve-text), or a :class:`~privtext.errors.MissingDependencyError` naming the extra."""
    return optional_import("mauve", "mauve", "MAUVE", package="mauve-text")


def mauve_score(
    real: Any, synthetic: Any, *, rng: np.random.Generator, num_buckets: int | Literal["auto"] = "auto",
    scaling_factor: float = 5.0,
) -> MauveResult:
    """MAUVE between real and synthetic embedding sets (needs ``pip install 'privtext[mauve]'``).

    Features are the given embeddings (no GPT-2 featurisation: no model is downloaded).
    """
    mauve = require_mauve()
    r, s = _as_2d(real, "real embeddings"), _as_2d(synthetic, "synthetic embeddings")
    seed = int(rng.integers(0, 2**31 - 1))
    out = mauve.compute_mauve(
        p_features=r, q_features=s, num_buckets=num_buckets, seed=seed, verbose=False, device_id=-1,
        mauve_scaling_factor=scaling_factor,
    )
    return MauveResult(mauve=float(out.mauve), frontier_integral=float(out.frontier_integral),
                       num_buckets=int(out.num_buckets), n_real=r.shape[0], n_synthetic=s.shape[0])


__all__ = ["FIDResult", "MauveResult", "PrecisionRecall", "fid", "frechet_distance", "knn_radii", "mauve_score",
           "precision_recall", "trace_sqrt_product"]
