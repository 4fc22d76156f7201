"""Data parties: L holders of private records (WASP §4.7, Alg 2).

A party is a set of private records that one data holder keeps; privtext never moves a party's records to
another party or to the server. For experiments the parties are cut from one private corpus by a **Dirichlet
label split** (Hsu et al. 2019; Yurochkin et al. 2019; WASP §5.1 uses α = 1.0 over L = 10 parties): for every
label value k a share vector p_k ~ Dir(α·1_L) is drawn and the records of label k are dealt to the parties in
the proportions p_k. Small α concentrates each label on few parties (non-i.i.d., unbalanced); α → ∞ gives every
party the share 1/L of every label (E[p_k,l] = 1/L, Var[p_k,l] = (L−1)/(L²(Lα+1)) → 0).

The split parameters (L, α, seed) are public; which record went to which party is not released by anything.
In a real deployment every party reads its own file (:func:`parties_from_files`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.corpus import Corpus
from ..errors import ConfigError, DataError


@dataclass(frozen=True)
class Party:
    """One data holder: its index and its private records (a :class:`Corpus` or any sequence/array)."""

    index: int
    data: object

    def __len__(self) -> int:
        return len(self.data)  # type: ignore[arg-type]


def _check_split_args(n: int, n_parties: int, alpha: float) -> None:
    if not isinstance(n_parties, (int, np.integer)) or isinstance(n_parties, bool) or n_parties < 1:
        raise ConfigError(f"n_parties must be an integer ≥ 1, got {n_parties!r}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha > 0):
        raise ConfigError(f"Dirichlet alpha must be a finite number > 0, got {alpha!r}")
    if n < n_parties:
        raise DataError(f"cannot give each of {n_parties} parties a record: only {n} records")


def dirichlet_split(
    labels: Sequence[object] | np.ndarray,
    n_parties: int,
    *,
    alpha: float,
    seed: int,
    min_size: int = 1,
    max_tries: int = 1000,
) -> list[np.ndarray]:
    """Indices of each party's records: a Dirichlet(α) label split (see the module docstring).

    Per label k (in sorted order): p_k ~ Dir(α·1_L), the label's records are shuffled and cut at
    ⌊cumsum(p_k)·n_k⌋. The draw is repeated (same seeded stream) until every party holds ≥ ``min_size``
    records; after ``max_tries`` draws a :class:`DataError` names L, α and N (lower L or raise α).
    Deterministic given ``seed``; the sizes add up to N and the parts are disjoint.
    """
    lab = np.asarray([str(x) for x in labels], dtype=object)
    n = len(lab)
    _check_split_args(n, n_parties, alpha)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if min_size < 0:
        raise ConfigError(f"min_size must be ≥ 0, got {min_size!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xD1C1]))
    classes = sorted(set(lab.tolist()))
    by_class = [np.flatnonzero(lab == k) for k in classes]
    for _ in range(int(max_tries)):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_parties)]
        for idx in by_class:
            p = rng.dirichlet(np.full(n_parties, float(alpha)))
            perm = rng.permutation(idx)
            cuts = (np.cumsum(p)[:-1] * len(perm)).astype(int)
            for k, chunk in enumerate(np.split(perm, cuts)):
                parts[k].append(chunk)
        out = [np.sort(np.concatenate(ch)) if ch else np.zeros(0, dtype=int) for ch in parts]
        if min(len(o) for o in out) >= min_size:
            return out
    raise DataError(
        f"a Dirichlet(alpha={alpha}) split of {n} records over {n_parties} parties left a party with fewer than "
        f"{min_size} record(s) in {max_tries} draws; use fewer parties or a larger alpha"
    )


def split_parties(
    corpus: Corpus, n_parties: int, *, alpha: float, seed: int, label: str | None = None, min_size: int = 1,
) -> list[Party]:
    """Cut ``corpus`` into ``n_parties`` parties by a Dirichlet(α) split of its label column ``label`` (the first
    label column when None; one class when the corpus has none)."""
    if label is None:
        labels: Sequence[object] = corpus.labels[corpus.label_columns[0]] if corpus.label_columns else [""] * len(corpus)
    else:
        if label not in corpus.labels:
            raise DataError(f"corpus {corpus.name!r} has no label column {label!r}; it has {corpus.label_columns}")
        labels = corpus.labels[label]
    idx = dirichlet_split(labels, n_parties, alpha=alpha, seed=seed, min_size=min_size)
    return [Party(k, corpus.subset(ix, name=f"{corpus.name}[party {k}]")) for k, ix in enumerate(idx)]


def parties_from_files(paths: Sequence[str | os.PathLike[str]], **load_kwargs: object) -> list[Party]:
    """One party per file (each data holder's own corpus), loaded with :func:`privtext.data.io.load_corpus`.
    An empty party is an error naming its file."""
    from ..data.io import load_corpus

    if not paths:
        raise ConfigError("parties_from_files needs at least one file")
    out = []
    for k, p in enumerate(paths):
        c = load_corpus(p, **load_kwargs)  # type: ignore[arg-type]
        if len(c) == 0:
            raise DataError(f"party {k}: {p} holds no records")
        out.append(Party(k, c))
    return out
