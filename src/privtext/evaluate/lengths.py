"""Length distributions: synthetic vs real (SecPE Fig. 2 right, Fig. 5, Fig. 6).

Lengths are counted in whitespace-separated words (``unit="words"``) or characters (``unit="chars"``). Both
histograms share one set of bin edges (quantile-free: ``bins`` equal-width bins from 0 to the larger set's 99.5th
percentile, with the last bin open-ended), so they can be drawn on one axis. Distances: the 1-Wasserstein
(earth mover's) distance in the length unit and the two-sample Kolmogorov–Smirnov statistic with its p-value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import DataError
from .results import AsDict


def text_lengths(texts: Sequence[str], *, unit: Literal["words", "chars"] = "words") -> np.ndarray:
    if unit == "words":
        return np.array([len(t.split()) for t in texts], dtype=np.int64)
    if unit == "chars":
        return np.array([len(t) for t in texts], dtype=np.int64)
    raise DataError(f"length unit must be 'words' or 'chars', got {unit!r}")


@dataclass(frozen=True)
class LengthComparison(AsDict):
    unit: str
    bin_edges: list[float]
    synthetic_hist: list[float]
    real_hist: list[float]
    synthetic_mean: float
    real_mean: float
    synthetic_median: float
    real_median: float
    wasserstein: float
    ks_statistic: float
    ks_pvalue: float
    n_synthetic: int
    n_real: int


def length_distribution(
    synthetic: Sequence[str], real: Sequence[str], *, unit: Literal["words", "chars"] = "words", bins: int = 30
) -> LengthComparison:
    """Histograms (as densities: each sums to 1) and distances between synthetic and real text lengths."""
    from scipy.stats import ks_2samp, wasserstein_distance

    if len(synthetic) == 0 or len(real) == 0:
        raise DataError(f"length comparison needs non-empty sets (synthetic {len(synthetic)}, real {len(real)})")
    if bins < 1:
        raise DataError(f"bins must be at least 1, got {bins!r}")
    a, b = text_lengths(synthetic, unit=unit), text_lengths(real, unit=unit)
    hi = float(max(np.percentile(a, 99.5), np.percentile(b, 99.5), 1.0))
    edges = np.linspace(0.0, hi, bins + 1)
    ha = np.histogram(np.minimum(a, hi), bins=edges)[0] / len(a)
    hb = np.histogram(np.minimum(b, hi), bins=edges)[0] / len(b)
    ks = ks_2samp(a, b)
    return LengthComparison(
        unit=unit, bin_edges=edges.tolist(), synthetic_hist=ha.tolist(), real_hist=hb.tolist(),
        synthetic_mean=float(a.mean()), real_mean=float(b.mean()), synthetic_median=float(np.median(a)),
        real_median=float(np.median(b)), wasserstein=float(wasserstein_distance(a, b)),
        ks_statistic=float(ks.statistic), ks_pvalue=float(ks.pvalue), n_synthetic=len(a), n_real=len(b),
    )


__all__ = ["LengthComparison", "length_distribution", "text_lengths"]
