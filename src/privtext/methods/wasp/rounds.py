"""WASP's round arithmetic (wasp.txt §4, Alg 1): samples per round and per generator (Eq 2), generator weights
(Eq 8), in-context examples (Eq 7) and the ``output: nearest`` selection. Pure functions of released values and
public sizes (post-processing)."""

from __future__ import annotations

import numpy as np

from ...errors import ConfigError, RunError
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


def generator_weights(nearest: np.ndarray, generator_index: np.ndarray, k: int,
                      row_weight: np.ndarray | None = None) -> np.ndarray:
    """Eq 8: w_k ∝ (Σ_{x∈D_k} H̃ⁿ[x]) / |D_k|, each mean clipped at 0 (noisy values can be negative), then
    normalised; equal weights when no mean is positive. A generator with no sample gets mean 0.

    ``row_weight``: what each bin counts in |D_k| (default 1). A shared-pool text sits in every label's D[c] as
    one copy per label; its copies count 1/copies each, so |D_k| counts texts, not copies, and the text's votes
    are summed over the labels — as a label-conditioned sample's are in its one label."""
    h = np.asarray(nearest, dtype=np.float64)
    gi = np.asarray(generator_index, dtype=np.int64)
    if len(h) != len(gi):
        raise ConfigError(f"{len(h)} histogram bins for {len(gi)} generator indices")
    rw = np.ones(len(h)) if row_weight is None else np.asarray(row_weight, dtype=np.float64)
    if len(rw) != len(h):
        raise ConfigError(f"{len(rw)} row weights for {len(h)} histogram bins")
    sums = np.bincount(gi, weights=h, minlength=k)[:k]
    counts = np.bincount(gi, weights=rw, minlength=k)[:k]
    means = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    m = np.clip(means, 0, None)
    return m / m.sum() if m.sum() > 0 else np.full(k, 1.0 / k)


#: the id suffix of a shared-pool copy: ``<text id>@<label group>``
SHARED_SEP = "@"


def shared_keys(ids: list[str], origin: list[str]) -> list[str | None]:
    """The pool text behind each sample: its id without the ``@<group>`` suffix for a shared-pool copy (origin
    ``shared``), ``None`` for a label-conditioned sample."""
    return [i.rsplit(SHARED_SEP, 1)[0] if o == "shared" else None for i, o in zip(ids, origin, strict=True)]


def copy_weights(keys: list[str | None]) -> np.ndarray:
    """1 per label-conditioned sample, 1/copies per copy of a shared-pool text (``generator_weights``)."""
    n: dict[str, int] = {}
    for k in keys:
        if k is not None:
            n[k] = n.get(k, 0) + 1
    return np.array([1.0 if k is None else 1.0 / n[k] for k in keys], dtype=np.float64)


def assign_shared(keys: list[str | None], nearest: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
    """Label a shared pool by the released votes: keep every label-conditioned sample (key ``None``) and, of each
    pool text's copies (one per label group, each voted on by that label's private samples only), the copy with
    the largest released H̃ⁿ — the label whose private samples are nearest to it (ties at random). ``nearest``
    covers the first ``len(nearest)`` samples; a pool text whose copies lie beyond it was never voted on and
    cannot be labelled: :class:`RunError` (the rounds never write one). Post-processing of a released histogram.
    Returns sorted indices."""
    h = np.asarray(nearest, dtype=np.float64)
    jit = rng.random(len(keys))
    best: dict[str, int] = {}
    keep = []
    for i, k in enumerate(keys):
        if k is None:
            keep.append(i)
            continue
        if i >= len(h):
            raise RunError(f"the shared-pool text {k!r} was never voted on, so no label can be given to it")
        j = best.get(k)
        if j is None or (h[i], jit[i]) > (h[j], jit[j]):
            best[k] = i
    keep.extend(best.values())
    return np.sort(np.asarray(keep, dtype=np.int64))


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


__all__ = ["SHARED_SEP", "assign_shared", "copy_weights", "generator_counts", "generator_weights", "round_sizes",
           "select_examples", "select_output", "shared_keys"]
