"""WASP's round arithmetic (wasp.txt §4, Alg 1): samples per round and per generator (Eq 2), generator weights
(Eq 8), in-context examples (Eq 7) and the ``output: nearest`` selection. Pure functions of released values and
public sizes (post-processing)."""

from __future__ import annotations

import numpy as np

from ...errors import ConfigError
from ...mechanisms.labels import allocate


def round_sizes(total: int, rounds: int) -> np.ndarray:
    """N split over T rounds by largest remainder (N/T each, the first rounds take the remainder)."""
    if rounds < 1:
        raise ConfigError(f"WASP needs at least one round (evolution.iterations), got {rounds}")
    return allocate(np.ones(rounds), int(total))


def generator_counts(weights: np.ndarray, n: int) -> np.ndarray:
    """N_k = n·w_k rounded by largest remainder (Eq 2): integers adding up to n."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0 or not np.all(np.isfinite(w)) or (w < 0).any():
        raise ConfigError(f"generator weights must be finite and ≥ 0, got {list(w)}")
    return allocate(w, int(n))


def generator_weights(nearest: np.ndarray, generator_index: np.ndarray, k: int) -> np.ndarray:
    """Eq 8: w_k ∝ (Σ_{x∈D_k} H̃ⁿ[x]) / |D_k|, each mean clipped at 0 (noisy values can be negative), then
    normalised; equal weights when no mean is positive. A generator with no sample gets mean 0."""
    h = np.asarray(nearest, dtype=np.float64)
    gi = np.asarray(generator_index, dtype=np.int64)
    if len(h) != len(gi):
        raise ConfigError(f"{len(h)} histogram bins for {len(gi)} generator indices")
    sums = np.bincount(gi, weights=h, minlength=k)[:k]
    counts = np.bincount(gi, minlength=k)[:k]
    means = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    m = np.clip(means, 0, None)
    return m / m.sum() if m.sum() > 0 else np.full(k, 1.0 / k)


def select_output(nearest: np.ndarray, groups: np.ndarray, label_weights: np.ndarray, n: int, *,
                  rng: np.random.Generator) -> np.ndarray:
    """``output: nearest``: per label c, the n_c samples of D[c] with the largest released H̃ⁿ (n_c: n split over
    the labels by the public label weights, largest remainder; all of D[c] when it holds fewer). Ties at random.
    Post-processing of the last release. Returns sorted indices into D."""
    h = np.asarray(nearest, dtype=np.float64)
    g = np.asarray(groups, dtype=np.int64)
    if len(h) != len(g):
        raise ConfigError(f"{len(h)} histogram bins for {len(g)} candidates")
    want = allocate(np.asarray(label_weights, dtype=np.float64), int(n), min_each=0)
    keep = []
    for c, k in enumerate(want):
        idx = np.nonzero(g == c)[0]
        if len(idx) == 0 or k <= 0:
            continue
        jit = rng.random(len(idx))
        keep.append(idx[np.lexsort((jit, -h[idx]))[: int(k)]])
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, dtype=np.int64)


def select_examples(nearest: np.ndarray, furthest: np.ndarray, groups: np.ndarray, n_groups: int, s: int, *,
                    rng: np.random.Generator, contrastive: bool = True) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Eq 7: per label group c, indices of the top-S of H̃ⁿ over D[c] (better) and of H̃ᶠ (worse; minus the
    better ones; empty when ``contrastive`` is false). Ties are broken at random."""
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for c in range(n_groups):
        idx = np.nonzero(groups == c)[0]
        if len(idx) == 0:
            continue
        jit = rng.random(len(idx))
        good = idx[np.lexsort((jit, -nearest[idx]))[:s]]
        bad = np.zeros(0, dtype=np.int64)
        if contrastive:
            bad = idx[np.lexsort((jit, -furthest[idx]))[:s]]
            bad = bad[~np.isin(bad, good)]
        out[c] = (good, bad)
    return out


__all__ = ["generator_counts", "generator_weights", "round_sizes", "select_examples", "select_output"]
