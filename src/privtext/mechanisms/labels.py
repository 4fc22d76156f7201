"""DP label histogram: how many synthetic samples each label gets, released privately.

Sensitivity: each private record falls in exactly one label group, so adding or removing a record changes one
bin by one — L2 sensitivity Δ = 1 — and N(0, σ²) per bin is the Gaussian mechanism with noise multiplier σ
(``GaussianDpEvent(σ)``); replacing one record moves one count between two bins: Δ = √2 (the run's relation
decides, :mod:`privtext.privacy.relation`). Under a group relation (Aug-PE's ``sensitivity: secret_group``: removing a secret
removes every one of the k records holding it) the k records may all sit in one label, so Δ = k and the noise
std is σ·k — the same noise multiplier σ = std/Δ, the same event. The noisy counts are clipped at 0 and
normalised (post-processing).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..privacy.events import gaussian_event
from ..privacy.noise import add_gaussian, add_laplace


def dp_label_histogram(
    private_groups: np.ndarray, n_groups: int, *, noise_multiplier: float, rng: np.random.Generator,
    sensitivity: float = 1.0,
) -> tuple[np.ndarray, Any]:
    """Noisy counts of private records per label group (records with group −1 are outside the public label
    space and are not counted), with noise N(0, (σΔ)²) per bin. Returns ``(noisy counts, gaussian_event(σ))``."""
    if not (noise_multiplier >= 0 and np.isfinite(noise_multiplier)):
        raise ConfigError(f"noise_multiplier must be a finite number ≥ 0, got {noise_multiplier}")
    if not (sensitivity > 0 and np.isfinite(sensitivity)):
        raise ConfigError(f"sensitivity must be a positive number, got {sensitivity}")
    g = np.asarray(private_groups)
    counts = np.bincount(g[g >= 0], minlength=n_groups).astype(np.float64)
    std = float(noise_multiplier) * float(sensitivity)
    counts = add_gaussian(counts, std, rng)
    return counts, gaussian_event(noise_multiplier)


def laplace_label_histogram(
    private_groups: np.ndarray, n_groups: int, *, epsilon: float, rng: np.random.Generator,
    sensitivity: float = 1.0,
) -> tuple[np.ndarray, Any]:
    """Noisy counts of private records per label group with Laplace(Δ₁/ε) per bin (DP-KPS's pure-DP label shares).

    Sensitivity: one record adds 1 to one count (:data:`privtext.privacy.relation.ONE_COUNT_L1`), so Δ₁ = 1 when
    one record is added or removed, 2 when one is replaced (the count of its old label falls by one, that of its
    new label rises by one), k for a group of k records: ``sensitivity`` is the run relation's Δ₁. Laplace(Δ₁/ε) on
    every bin is ε-DP (Dwork et al. 2006). Records with group −1 are not counted. Returns
    ``(noisy, LaplaceDpEvent(1/ε))``."""
    from ..privacy.conversions import check_epsilon
    from ..privacy.events import laplace_event

    eps = float(check_epsilon(epsilon, name="epsilon_labels", positive=True))
    if not (sensitivity > 0 and np.isfinite(sensitivity)):
        raise ConfigError(f"sensitivity must be a positive number, got {sensitivity}")
    g = np.asarray(private_groups)
    counts = np.bincount(g[g >= 0], minlength=n_groups).astype(np.float64)
    counts = add_laplace(counts, 0.0 if math.isinf(eps) else float(sensitivity) / eps, rng)
    return counts, laplace_event(eps)


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
