"""The DP vocabulary of DP-KPS (App A.1): sensitivity, noise level, event, selection, and bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from dp_accounting import LaplaceDpEvent
from scipy import stats

from privtext.data.vocabulary import PublicVocabulary
from privtext.errors import ConfigError, InvalidPrivacyParameter
from privtext.mechanisms.vocabulary import (
    dp_vocabulary,
    term_histogram,
    vocabulary_event,
    vocabulary_sensitivity,
)
from privtext.privacy.pure import pure_epsilon

WORDS = tuple(f"w{i}" for i in range(40))
VOCAB = PublicVocabulary(WORDS)


def _doc(rng: np.random.Generator) -> str:
    return " ".join(rng.choice((*WORDS, "filler", "the", "and"), size=int(rng.integers(0, 30))))


def _hist(texts: list[str], r: int) -> np.ndarray:
    return term_histogram(VOCAB.matcher().find_all(texts, max_terms=r), len(VOCAB), r)


@pytest.mark.parametrize("r", [1, 3, 10])
def test_add_remove_changes_the_histogram_by_at_most_r(r: int, any_seed: int) -> None:
    """Δ₁ = r (add/remove) and 2r (replace one), over random corpora and random extra documents; the bound is
    attained by a document with at least r distinct terms."""
    rng = np.random.default_rng(any_seed)
    for _ in range(50):
        texts = [_doc(rng) for _ in range(int(rng.integers(0, 12)))]
        x, y = _doc(rng), _doc(rng)
        h = _hist(texts, r)
        add = np.abs(_hist([*texts, x], r) - h).sum()
        n_terms = len(set(VOCAB.matcher().find(x)))
        assert add == min(r, n_terms) <= vocabulary_sensitivity(r, "add_remove")
        if texts:
            j = int(rng.integers(len(texts)))
            replaced = [*texts[:j], y, *texts[j + 1:]]
            assert np.abs(_hist(replaced, r) - h).sum() <= vocabulary_sensitivity(r, "replace_one") == 2 * r
    rich = " ".join(WORDS)
    assert np.abs(_hist([rich], r) - _hist([], r)).sum() == r


def test_event_equals_the_data_free_factory(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    texts = [_doc(rng) for _ in range(30)]
    for eps, rel in [(0.5, "add_remove"), (2.0, "replace_one"), (math.inf, "add_remove")]:
        rel_, ev = dp_vocabulary(texts, VOCAB, r=5, epsilon=eps, size=10, rng=rng, neighbouring=rel)  # type: ignore[arg-type]
        assert ev == vocabulary_event(5, eps, neighbouring=rel)  # type: ignore[arg-type]
        assert ev == LaplaceDpEvent(0.0 if math.isinf(eps) else 1 / eps)
        assert pure_epsilon(ev) == pytest.approx(eps)
        assert rel_.scale == (0.0 if math.isinf(eps) else rel_.sensitivity / eps)
        assert rel_.sensitivity == (5 if rel == "add_remove" else 10)


@pytest.mark.parametrize(("eps", "r", "rel"), [(1.0, 10, "add_remove"), (0.3, 2, "add_remove"),
                                               (2.0, 4, "replace_one")])
def test_zero_signal_noise_is_laplace_with_the_stated_scale(eps: float, r: int, rel: str, any_seed: int) -> None:
    """No document holds a vocabulary term: the released counts are the Laplace noise itself (every bin).
    KS test against Laplace(0, b) at α = 1e-6 and the variance 2b² within 6 standard errors."""
    words = tuple(f"t{i}" for i in range(3000))
    vocab = PublicVocabulary(words)
    texts = ["no term here"] * 50
    rel_, _ = dp_vocabulary(texts, vocab, r=r, epsilon=eps, size=len(vocab), rng=np.random.default_rng(any_seed),
                            neighbouring=rel)  # type: ignore[arg-type]
    b = (r if rel == "add_remove" else 2 * r) / eps
    assert rel_.scale == pytest.approx(b)
    x = rel_.noisy_counts
    n = len(x)
    d_crit = math.sqrt(-math.log(1e-6 / 2) / (2 * n))  # one-sample KS critical value (asymptotic)
    assert stats.kstest(x, stats.laplace(scale=b).cdf).statistic < d_crit
    var = 2 * b * b
    se = math.sqrt((24 * b**4 - var**2) / n)  # Var of x² for Laplace: E x⁴ − (E x²)² = 24b⁴ − 4b⁴
    assert abs(np.mean(x**2) - var) < 6 * se
    assert np.all(np.diff(x) <= 0)  # released in decreasing order


def test_selection_without_noise_is_the_exact_top_by_count() -> None:
    texts = ["w3 w1", "w1 w2 w3", "w1", "w5 w5 w5 w5", "w2 w1"]
    rel, _ = dp_vocabulary(texts, VOCAB, r=2, epsilon=math.inf, size=4, rng=np.random.default_rng(0))
    # first 2 distinct terms: {w3,w1}, {w1,w2}, {w1}, {w5}, {w2,w1} → w1: 4, w2: 2, w3: 1, w5: 1 (ties: public order)
    assert rel.terms == ("w1", "w2", "w3", "w5")
    assert rel.noisy_counts.tolist() == [4.0, 2.0, 1.0, 1.0]
    assert rel.indices.tolist() == [1, 2, 3, 5]
    assert rel.vocabulary(VOCAB).terms == rel.terms


def test_idf_selection_counts_each_documents_rarest_terms(any_seed: int) -> None:
    """select="idf": a document's r counted terms are its r terms of highest public idf (ties by first
    occurrence); Δ₁ stays r under add/remove."""
    counts = tuple(40 - i for i in range(40))  # w0 the most frequent in public, w39 the rarest
    v = PublicVocabulary(WORDS, counts=counts, documents=50)
    rel, _ = dp_vocabulary(["w1 w2 w30 w3 w20", "w0 w39"], v, r=2, epsilon=math.inf, size=4,
                           rng=np.random.default_rng(0), select="idf")
    assert set(rel.terms) == {"w30", "w20", "w39", "w0"} and rel.noisy_counts.tolist() == [1.0] * 4
    first, _ = dp_vocabulary(["w1 w2 w30 w3 w20"], v, r=2, epsilon=math.inf, size=2, rng=np.random.default_rng(0))
    assert set(first.terms) == {"w1", "w2"}  # the paper's first r
    prio = v.idf()
    assert np.all(np.diff(prio) > 0) and prio[0] == pytest.approx(math.log(51 / 40))
    rng = np.random.default_rng(any_seed)
    for _ in range(50):
        texts = [_doc(rng) for _ in range(int(rng.integers(0, 12)))]
        x = _doc(rng)

        def h(ts: list[str]) -> np.ndarray:
            return term_histogram(v.matcher().find_all(ts), len(v), 3, prio)

        assert np.abs(h([*texts, x]) - h(texts)).sum() == min(3, len(set(v.matcher().find(x))))
    with pytest.raises(ConfigError, match="document counts"):
        dp_vocabulary(["w1"], VOCAB, r=2, epsilon=1.0, size=3, rng=rng, select="idf")
    with pytest.raises(ConfigError, match="select"):
        dp_vocabulary(["w1"], v, r=2, epsilon=1.0, size=3, rng=rng, select="last")  # type: ignore[arg-type]


def test_large_epsilon_recovers_frequent_terms(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    texts = [f"w7 w8 {_doc(rng)}" for _ in range(200)]
    rel, _ = dp_vocabulary(texts, VOCAB, r=3, epsilon=5.0, size=2, rng=rng)
    assert set(rel.terms) == {"w7", "w8"}  # counts 200 vs ≤ 200·(1/…) for the rest; noise scale 0.6


def test_release_is_recorded_before_private_text_is_read(tmp_path: Any) -> None:
    """Through the keeper (the only path a run uses): an over-budget vocabulary release is refused by the ledger
    before the mechanism reads a single private text."""
    from privtext.errors import BudgetExceededError
    from privtext.mechanisms.vocabulary import vocabulary_contribution
    from privtext.privacy import Budget, Ledger
    from privtext.privacy.relation import NeighbouringRelation
    from privtext.privacy.release import ReleaseKeeper, laplace_release

    class Exploding(list):
        def __iter__(self):  # type: ignore[override]
            raise AssertionError("private text read before the release was recorded")

    keeper = ReleaseKeeper(Ledger(None, Budget.pure(0.5)), lambda r: tmp_path / "v.npz")
    planned = laplace_release("dpkps/vocabulary", mechanism="laplace", epsilon=1.0,
                              contribution=vocabulary_contribution(2), relation=NeighbouringRelation.add_remove())
    assert planned.sensitivity == 2.0 and planned.meta["laplace_scale"] == 2.0
    with pytest.raises(BudgetExceededError):
        keeper.release(planned, lambda: dp_vocabulary(Exploding(["w1"]), VOCAB, r=2, epsilon=1.0, size=3,
                                                                   rng=np.random.default_rng(0)))  # type: ignore[arg-type,return-value]


def test_bad_input_names_the_value() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon_vocab"):
        dp_vocabulary(["w1"], VOCAB, r=2, epsilon=0.0, size=3, rng=rng)
    with pytest.raises(InvalidPrivacyParameter, match="-1"):
        vocabulary_event(2, -1.0)
    with pytest.raises(ConfigError, match="r must"):
        dp_vocabulary(["w1"], VOCAB, r=0, epsilon=1.0, size=3, rng=rng)
    with pytest.raises(ConfigError, match="size=41 exceeds"):
        dp_vocabulary(["w1"], VOCAB, r=2, epsilon=1.0, size=41, rng=rng)
    with pytest.raises(ConfigError, match="neighbouring"):
        vocabulary_sensitivity(2, "swap")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="rng"):
        dp_vocabulary(["w1"], VOCAB, r=2, epsilon=1.0, size=3, rng=0)  # type: ignore[arg-type]
