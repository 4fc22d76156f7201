"""Dirichlet label split into parties (WASP §5.1: L parties, Dir(α) per label)."""

from __future__ import annotations

import numpy as np
import pytest

from privtext.data.corpus import Corpus
from privtext.errors import ConfigError, DataError
from privtext.federated import dirichlet_split, parties_from_files, split_parties

LABELS = np.repeat(["a", "b", "c", "d"], 500)  # N = 2000, 4 classes


def _shares(parts: list[np.ndarray]) -> np.ndarray:
    """classes × parties: the share of each class held by each party."""
    out = np.zeros((4, len(parts)))
    for k, ix in enumerate(parts):
        for c, lab in enumerate("abcd"):
            out[c, k] = np.sum(LABELS[ix] == lab) / 500
    return out


def test_sizes_sum_to_n_and_parts_are_disjoint() -> None:
    parts = dirichlet_split(LABELS, 7, alpha=1.0, seed=3)
    assert sum(len(p) for p in parts) == len(LABELS)
    allidx = np.concatenate(parts)
    assert len(np.unique(allidx)) == len(LABELS)
    assert min(len(p) for p in parts) >= 1


def test_deterministic_given_seed() -> None:
    a = dirichlet_split(LABELS, 5, alpha=0.5, seed=11)
    b = dirichlet_split(LABELS, 5, alpha=0.5, seed=11)
    c = dirichlet_split(LABELS, 5, alpha=0.5, seed=12)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_large_alpha_gives_near_uniform_shares() -> None:
    # Var[p] = (L−1)/(L²(Lα+1)): α = 1e5, L = 5 → std ≈ 9e-4; integer cuts add ≤ 1/500
    sh = _shares(dirichlet_split(LABELS, 5, alpha=1e5, seed=0))
    assert np.abs(sh - 0.2).max() < 0.01


def test_small_alpha_concentrates_each_label() -> None:
    sh = _shares(dirichlet_split(LABELS, 5, alpha=0.01, seed=0, min_size=0))
    assert sh.max(axis=1).mean() > 0.9
    # and α = 1 is in between: not concentrated like α = 0.01, not uniform like α = 1e5
    mid = _shares(dirichlet_split(LABELS, 5, alpha=1.0, seed=0))
    assert 0.25 < mid.max(axis=1).mean() < 0.9


def test_every_party_non_empty_or_a_clear_error() -> None:
    with pytest.raises(DataError, match=r"alpha=0\.001"):
        dirichlet_split(np.repeat(["a"], 30), 10, alpha=0.001, seed=0, max_tries=5)
    with pytest.raises(DataError, match="only 3 records"):
        dirichlet_split(["a", "b", "c"], 4, alpha=1.0, seed=0)
    with pytest.raises(ConfigError, match="alpha"):
        dirichlet_split(LABELS, 3, alpha=0.0, seed=0)
    with pytest.raises(ConfigError, match="n_parties"):
        dirichlet_split(LABELS, 0, alpha=1.0, seed=0)


def test_split_parties_on_a_corpus_and_one_file_per_party(tmp_path) -> None:
    corpus = Corpus.from_texts([f"t{i}" for i in range(60)], {"y": ["p", "q", "r"] * 20}, name="c")
    parties = split_parties(corpus, 3, alpha=1.0, seed=1)
    assert sum(len(p) for p in parties) == 60
    assert {t for p in parties for t in p.data.texts} == set(corpus.texts)
    with pytest.raises(DataError, match="no label column 'z'"):
        split_parties(corpus, 3, alpha=1.0, seed=1, label="z")
    f0, f1 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    f0.write_text('{"text": "x"}\n{"text": "y"}\n')
    f1.write_text('{"text": "z"}\n')
    ps = parties_from_files([f0, f1])
    assert [len(p) for p in ps] == [2, 1] and [p.index for p in ps] == [0, 1]
