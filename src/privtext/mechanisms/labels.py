"""DP label histogram: how many synthetic samples each label gets, released privately.

Sensitivity: each private record falls in exactly one label group, so adding or removing a record changes one
bin by one — L2 sensitivity Δ = 1 — and N(0, σ²) per bin is the Gaussian mechanism with noise multiplier σ
(``GaussianDpEvent(σ)``). The noisy counts are clipped at 0 and normalised (post-processing).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError


def label_event(noise_multiplier: float):
    import dp_accounting

    return dp_accounting.GaussianDpEvent(noise_multiplier=float(noise_multiplier))


def dp_label_histogram(
    private_groups: np.ndarray, n_groups: int, *, noise_multiplier: float, rng: np.random.Generator
) -> np.ndarray:
    """Noisy counts of private records per label group (records with group −1 are outside the public label
    space and are not counted)."""
    if noise_multiplier < 0:
        raise ConfigError(f"noise_multiplier must be ≥ 0, got {noise_multiplier}")
    g = np.asarray(private_groups)
    counts = np.bincount(g[g >= 0], minlength=n_groups).astype(np.float64)
    if noise_multiplier > 0:
        counts = counts + rng.normal(0.0, noise_multiplier, size=n_groups)
    return counts


def allocate(weights: np.ndarray, total: int, *, min_each: int = 0) -> np.ndarray:
    """Integer counts summing to ``total`` proportional to non-negative ``weights`` (largest remainder).

    ``min_each`` gives every group at least that many (when ``total`` allows) so no label disappears.
    """
    w = np.clip(np.asarray(weights, dtype=np.float64), 0, None)
    k = len(w)
    if k == 0:
        raise ConfigError("no label groups to allocate samples to")
    if total < 0:
        raise ConfigError(f"total must be ≥ 0, got {total}")
    base = np.full(k, min_each if min_each * k <= total else 0, dtype=np.int64)
    rest = total - int(base.sum())
    if w.sum() <= 0:
        w = np.ones(k)
    share = w / w.sum() * rest
    alloc = np.floor(share).astype(np.int64)
    left = rest - int(alloc.sum())
    order = np.argsort(-(share - alloc), kind="stable")
    alloc[order[:left]] += 1
    return base + alloc
