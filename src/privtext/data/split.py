"""Deterministic, seeded splits."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..errors import DataError
from .corpus import Corpus


def _sizes(n: int, parts: Sequence[float | int]) -> list[int]:
    if not parts:
        raise DataError("split needs at least one part")
    if any(p < 0 for p in parts):
        raise DataError(f"split parts must be non-negative, got {list(parts)}")
    if all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in parts):
        sizes = [int(p) for p in parts]
        if sum(sizes) > n:
            raise DataError(f"split sizes {sizes} add up to {sum(sizes)} > {n} records")
        return sizes
    total = float(sum(parts))
    if total > 1 + 1e-9:
        raise DataError(f"split fractions {list(parts)} add up to {total} > 1")
    sizes = [int(np.floor(n * float(p))) for p in parts]
    if abs(total - 1) < 1e-9:  # fractions cover everything: give the rounding remainder to the last part
        sizes[-1] = n - sum(sizes[:-1])
    return sizes


def split_corpus(
    corpus: Corpus,
    parts: Sequence[float | int],
    *,
    seed: int,
    stratify: str | Sequence[str] | None = None,
) -> list[Corpus]:
    """Split into disjoint parts given as fractions (summing to ≤ 1) or counts.

    The same ``seed`` always gives the same split. With ``stratify`` (label column(s)) each part keeps the label
    proportions as closely as integer counts allow (largest-remainder allocation per label).
    """
    n = len(corpus)
    sizes = _sizes(n, parts)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5B1]))
    if stratify is None:
        perm = rng.permutation(n)
        out, start = [], 0
        for k, sz in enumerate(sizes):
            out.append(corpus.subset(np.sort(perm[start:start + sz]), name=f"{corpus.name}[{k}]"))
            start += sz
        return out
    cols = [stratify] if isinstance(stratify, str) else list(stratify)
    keys = corpus.label_tuples(cols)
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        groups[k].append(i)
    buckets: list[list[int]] = [[] for _ in sizes]
    for key in sorted(groups):
        idx = np.array(groups[key])
        idx = idx[rng.permutation(len(idx))]
        share = [sz * len(idx) / n for sz in sizes]
        alloc = [int(np.floor(s)) for s in share]
        rem = sorted(range(len(sizes)), key=lambda j: share[j] - alloc[j], reverse=True)
        left = min(len(idx), round(sum(share))) - sum(alloc)
        for j in rem[: max(0, left)]:
            alloc[j] += 1
        start = 0
        for j, a in enumerate(alloc):
            buckets[j].extend(idx[start:start + a].tolist())
            start += a
    return [corpus.subset(sorted(b), name=f"{corpus.name}[{k}]") for k, b in enumerate(buckets)]


def train_test_split(corpus: Corpus, *, test_size: float | int, seed: int,
                     stratify: str | Sequence[str] | None = None) -> tuple[Corpus, Corpus]:
    n = len(corpus)
    if isinstance(test_size, float):
        if not 0 < test_size < 1:
            raise DataError(f"test_size must be in (0, 1) as a fraction, got {test_size}")
        parts: list[float | int] = [1 - test_size, test_size]
    else:
        if not 0 < test_size < n:
            raise DataError(f"test_size must be in (0, {n}) as a count, got {test_size}")
        parts = [n - test_size, test_size]
    train, test = split_corpus(corpus, parts, seed=seed, stratify=stratify)
    return train, test


def sample(corpus: Corpus, n: int, *, rng: np.random.Generator, replace: bool = False) -> Corpus:
    if n > len(corpus) and not replace:
        raise DataError(f"cannot sample {n} of {len(corpus)} records without replacement")
    idx = rng.choice(len(corpus), size=n, replace=replace)
    return corpus.subset(np.sort(idx) if not replace else idx)
