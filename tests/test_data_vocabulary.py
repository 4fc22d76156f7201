"""Public vocabularies (glossary, corpus) and the first-r-terms matcher of DP-KPS App A.1."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from privtext.data.vocabulary import (
    PublicVocabulary,
    TermMatcher,
    first_terms,
    load_glossary,
    normalize_term,
    term_tokens,
    vocabulary_from_corpus,
)
from privtext.errors import ConfigError, DataError
from tests.conftest import shared_file


def test_normal_form() -> None:
    assert term_tokens("Ice-Cream, the BEST’s!") == ["ice", "cream", "the", "best's"]
    assert normalize_term("  Congestive   Heart-Failure ") == "congestive heart failure"
    assert normalize_term("!!") == ""


def test_glossary_file(tmp_path: Path) -> None:
    p = tmp_path / "g.txt"
    p.write_text("# medical terms\nHeart Failure\n\nbeta-blocker\nheart  failure\n  aspirin \n", encoding="utf-8")
    v = load_glossary(p)
    assert v.terms == ("heart failure", "beta blocker", "aspirin")  # normalised, de-duplicated, file order
    assert v.counts is None and v.source.startswith("glossary:")
    assert load_glossary(p, max_terms=2).terms == ("heart failure", "beta blocker")
    with pytest.raises(DataError, match="not found"):
        load_glossary(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no terms"):
        load_glossary(tmp_path / "empty.txt")


def test_vocabulary_validation() -> None:
    with pytest.raises(DataError, match="normal form"):
        PublicVocabulary(("Heart",))
    with pytest.raises(DataError, match="twice"):
        PublicVocabulary(("a b", "c", "a b"))
    with pytest.raises(DataError, match="at least one"):
        PublicVocabulary(())
    v = PublicVocabulary(("apple", "pear pie", "fig"), counts=(3, 2, 1))
    assert v.index("fig") == 2 and "pear pie" in v and v.max_words == 2
    s = v.subset([2, 0])
    assert s.terms == ("fig", "apple") and s.counts == (1, 3)
    with pytest.raises(DataError, match="not in the vocabulary"):
        v.index("kiwi")


CORPUS = [
    "The ice cream was great and the ice cream shop was clean.",
    "Ice cream for dessert; the waiter was friendly.",
    "Friendly waiter, cold ice cream, 20 minutes wait.",
    "I don't like the shop but the ice cream is fine.",
]


def test_vocabulary_from_corpus_known_counts() -> None:
    v = vocabulary_from_corpus(CORPUS, min_count=2, ngram_max=2)
    counts = dict(zip(v.terms, v.counts or (), strict=True))
    # document frequencies, stop words ("the", "was", "for") dropped, numbers and contractions dropped
    assert counts["ice cream"] == 4 and counts["ice"] == 4 and counts["cream"] == 4
    assert counts["friendly"] == 2 and counts["waiter"] == 2 and counts["shop"] == 2
    assert "friendly waiter" not in v and "cream shop" not in v  # df 1 < min_count
    assert "the" not in v and "20" not in v and "don't" not in v and "minutes wait" not in v
    assert vocabulary_from_corpus(CORPUS, min_count=1, ngram_max=2).counts[0] == 4
    assert "friendly waiter" in vocabulary_from_corpus(CORPUS, min_count=1, ngram_max=2)
    assert "20 minutes" not in vocabulary_from_corpus(CORPUS, min_count=1, ngram_max=2)  # numbers never
    # order: df descending, then alphabetical
    assert list(v.terms) == sorted(v.terms, key=lambda t: (-counts[t], t))


def test_vocabulary_from_corpus_is_deterministic(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    shuffled = [CORPUS[i] for i in rng.permutation(len(CORPUS))]
    assert vocabulary_from_corpus(shuffled, min_count=1) == vocabulary_from_corpus(CORPUS, min_count=1)


def test_vocabulary_from_corpus_options() -> None:
    words = vocabulary_from_corpus(CORPUS, min_count=1, ngram_max=1)
    assert all(" " not in t for t in words.terms)
    assert len(vocabulary_from_corpus(CORPUS, min_count=1, max_terms=3)) == 3
    phrases_strict = vocabulary_from_corpus(CORPUS, min_count=1, phrase_min_count=3)
    assert [t for t in phrases_strict.terms if " " in t] == ["ice cream"]
    with pytest.raises(ConfigError, match="min_count"):
        vocabulary_from_corpus(CORPUS, min_count=0)
    with pytest.raises(ConfigError, match="max_terms"):
        vocabulary_from_corpus(CORPUS, max_terms=0)
    with pytest.raises(DataError, match="at least 50"):
        vocabulary_from_corpus(CORPUS, min_count=50)
    with pytest.raises(DataError, match="single string"):
        vocabulary_from_corpus("ice cream")  # type: ignore[arg-type]


def test_matcher_longest_match_first_occurrence() -> None:
    v = PublicVocabulary(("ice", "ice cream", "cream", "waiter", "ice cream shop"))
    m = v.matcher()
    # "ice cream shop" is the longest term at position 0; then "ice cream" (a different term), "waiter"
    assert m.find("Ice cream shop! The ice cream... waiter, waiter, ice") == [4, 1, 3, 0]
    assert m.find("ice cream shop, ice cream", max_terms=1) == [4]
    assert m.find("nothing here") == []
    assert m.find("ice cream", max_terms=0) == []
    assert first_terms("cream, then ice cream", v, 5) == ["cream", "ice cream"]
    with pytest.raises(DataError, match="no word"):
        TermMatcher(["ok", "!!"])


def test_matcher_agrees_with_a_direct_scan_on_real_reviews() -> None:
    """With a words-only vocabulary, greedy longest match reduces to 'vocabulary tokens, first occurrences, in
    order': an independent computation. With phrases, every reported term occurs in the review as whole words."""
    path = shared_file("yelp", "test.csv")
    with path.open(encoding="utf-8", newline="") as f:
        texts = [row["text"] for _, row in zip(range(300), csv.DictReader(f), strict=False)]
    words = vocabulary_from_corpus(texts[:200], min_count=3, max_terms=800, ngram_max=1)
    phrases = vocabulary_from_corpus(texts[:200], min_count=3, max_terms=800, ngram_max=3)
    assert any(" " in t for t in phrases.terms)
    mw, mp = words.matcher(), phrases.matcher()
    for text in texts[200:]:
        toks = term_tokens(text)
        direct: list[str] = []
        for t in toks:
            if t in words and t not in direct:
                direct.append(t)
        assert [words.terms[i] for i in mw.find(text)] == direct
        assert [words.terms[i] for i in mw.find(text, max_terms=10)] == direct[:10]
        norm = " " + " ".join(toks) + " "
        ids = mp.find(text, max_terms=10)
        assert len(ids) == len(set(ids)) <= 10
        for i in ids:
            assert re.search(" " + re.escape(phrases.terms[i]) + " ", norm), (phrases.terms[i], text[:80])
