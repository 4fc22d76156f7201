"""The n-gram analogue (issue 38): vote-weighted Kneser-Ney counts — the copies per released weight, the counts of
the re-estimated models (known values and a cross-check with a model trained on the multiset directly), label
models touched only by their label's texts, and the generator writing the voted text more often."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privtext.data.labels import LabelInfo
from privtext.data.population import Population
from privtext.errors import PrivacyError
from privtext.generate.ngram import KNModel, NgramGenerator, NgramLM, tokenize
from privtext.learn.ngram import NgramReweighter, multiplicities, reweighted_lm
from privtext.learn.options import NgramLearnOptions
from privtext.learn.pairs import ReleasedVotes

from .test_learn_pairs import _keeper, _release

X = LabelInfo(("label1",), ("X",))
Y = LabelInfo(("label1",), ("Y",))


def _votes(tmp_path: Path, values: list[float]) -> ReleasedVotes:
    keeper = _keeper(tmp_path)
    _release(keeper, "votes/iter_000", noisy=np.asarray(values, dtype=np.float64))
    return ReleasedVotes.kept(keeper, "votes/iter_000", "noisy")


def _pop(texts: list[str], groups: list[int]) -> Population:
    n = len(texts)
    return Population([f"c{i}" for i in range(n)], list(texts), np.asarray(groups, dtype=np.int64), ["random"] * n,
                      [None] * n, ["ngram"] * n)


def test_copies_follow_the_released_weights() -> None:
    # s = share · N_public / Σ w⁺ = 1 · 8 / 4 = 2: copies 6, 2, 0, and none for a negative noisy count
    assert multiplicities([3, 1, 0, -2], n_public=8, share=1.0, max_copies=50).tolist() == [6, 2, 0, 0]
    assert multiplicities([3, 1, 0, -2], n_public=8, share=1.0, max_copies=4).tolist() == [4, 2, 0, 0]
    assert multiplicities([3, 1], n_public=8, share=0.5, max_copies=50).tolist() == [3, 1]
    assert multiplicities([0, -1.5], n_public=8, share=1.0, max_copies=50).tolist() == [0, 0]


def _count(model: KNModel, lm: NgramLM, context: str) -> float:
    """The top-order count c(context ·): how often ``context`` was followed by any token."""
    rids = model.chain([lm.vocab.tok2id[context]])
    assert len(rids) == 2
    return float(model.total[2][rids[1]])


def test_counts_are_public_plus_copies_of_the_voted_texts(tmp_path: Path) -> None:
    public = ["a b .", "a c .", "d b .", "d c ."]
    labels = {"label1": ["X", "X", "Y", "Y"]}
    base = NgramLM(public, labels, order=2, min_label_texts=1)
    # two candidates: "a b ." for X with released weight 3, "d c ." for Y with weight 1; share 1 of 4 texts:
    # s = 4 / 4 = 1 → 3 copies and 1 copy
    pop = _pop(["a b .", "d c ."], [0, 1])
    new = reweighted_lm(base, pop, _votes(tmp_path, [3.0, 1.0]), label_info=[X, Y].__getitem__,
                        options=NgramLearnOptions(share=1.0))
    assert _count(base.global_model, base, "a") == 2 and _count(new.global_model, new, "a") == 5
    assert _count(base.global_model, base, "d") == 2 and _count(new.global_model, new, "d") == 3
    kx, ky = ("label1", "X"), ("label1", "Y")
    assert _count(new.label_models[kx], new, "a") == 2 + 3 and _count(new.label_models[ky], new, "d") == 2 + 1
    # Y's voted text went to Y's model only: X's model never saw "d" as a context
    assert new.label_models[kx].chain([new.vocab.tok2id["d"]]) == [0]
    # the same arrays as a model trained on the multiset of documents directly
    docs = [np.asarray(base.vocab.encode(tokenize(t))) for t in public]
    extra = [np.asarray(base.vocab.encode(tokenize("a b .")))] * 3 + [np.asarray(base.vocab.encode(tokenize("d c .")))]
    direct = KNModel(docs + extra, order=2, vocab_size=len(base.vocab), scale=base.global_model.scale)
    for k in (1, 2):
        np.testing.assert_array_equal(direct.words[k], new.global_model.words[k])
        np.testing.assert_allclose(direct.cum[k], new.global_model.cum[k])
        np.testing.assert_allclose(direct.total[k], new.global_model.total[k])
    # P(b | a) rises (from the KN estimate of 1 b in 2 to 4 in 5); base is left as it was
    a, b = base.vocab.tok2id["a"], base.vocab.tok2id["b"]
    p0 = base.global_model.prob(base.global_model.chain([a]), b, scale=1.0)
    p1 = new.global_model.prob(new.global_model.chain([a]), b, scale=1.0)
    assert p1 > p0 and _count(base.global_model, base, "a") == 2


def test_no_positive_vote_changes_nothing_and_an_array_is_refused(tmp_path: Path) -> None:
    base = NgramLM(["a b .", "a c ."], order=2)
    pop = _pop(["a b ."], [0])
    same = reweighted_lm(base, pop, _votes(tmp_path, [-1.0]), label_info=lambda g: None)
    assert same.global_model is base.global_model
    with pytest.raises(PrivacyError, match="ReleasedVotes"):
        reweighted_lm(base, pop, np.array([5.0]), label_info=lambda g: None)  # type: ignore[arg-type]


def test_the_generator_writes_the_voted_text_more_often(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    nouns = ["soup", "pizza", "bread", "cake", "salad", "steak"]
    public = [f"the {rng.choice(nouns)} was {rng.choice(['good', 'bad', 'fine'])} ." for _ in range(300)]
    gen = NgramGenerator(public=public)
    learner = NgramReweighter(gen, NgramLearnOptions(share=0.5))
    cands = ["the soup was good .", "the pizza was bad .", "the cake was fine ."]
    before = gen.random(None, 400, rng=np.random.default_rng(1))
    changed = learner.apply(_pop(cands, [0, 0, 0]), _votes(tmp_path, [6.0, 0.0, 0.0]), label_info=lambda g: None)
    assert changed == {"texts": 1, "copies": 50, "public_texts": 300}  # s = 0.5 · 300 / 6 = 25: round(25 · 6) = 150, capped at 50
    after = gen.random(None, 400, rng=np.random.default_rng(1))
    k0, k1 = sum("soup" in t for t in before), sum("soup" in t for t in after)
    # the soup share rises: 300 public texts hold "soup" about 50 times, plus 50 voted copies → about 2×;
    # a one-sided two-proportion z-test at 1e-4
    p0, p1, pooled = k0 / 400, k1 / 400, (k0 + k1) / 800
    z = (p1 - p0) / np.sqrt(pooled * (1 - pooled) * 2 / 400)
    assert z > 3.72, (k0, k1)
    learner.reset()
    assert gen.lm is learner.base


def _short_tickets() -> list[str]:
    """56 short support tickets (public): the 4-gram recombines them into tickets no public text holds."""
    rng = np.random.default_rng(0)
    a = ["my card", "the app", "my transfer", "the refund", "my login"]
    b = ["is not working", "was declined", "is still pending", "failed again", "never arrived"]
    c = ["today", "since monday", "please help", "at checkout", "after the update"]
    return [f"{x} {y} {z}" for x in a for y in b for z in c if rng.random() < 0.5]


def test_the_learning_checks_explain_what_the_generator_wrote_and_stop_a_planted_record(tmp_path: Path) -> None:
    """The learning checks (n-gram re-estimate, DPO pairs) use the prompt audit's rules (guard.py, source 3):

    * no false alarm: the 4-gram, trained on public tickets under the run's guard and logging through a PromptLog
      whose observer is the guard (as in a run), writes a ticket equal to a short private record that no public
      text holds; it is public by provenance, so the step re-estimates from it (``assert_public``, the old check,
      refuses it) and a preference pair with it passes;
    * caught: a short private record that no generator wrote, planted where a candidate was, stops both checks
      (PrivacyCheckError, nothing written); a generator echoing it only after now explains nothing."""
    from privtext.atomicio import PromptLog
    from privtext.errors import PrivacyCheckError
    from privtext.guard import PrivateGuard, _norm_words
    from privtext.learn.factory import build_learner
    from privtext.learn.pairs import PreferencePair, check_pair_texts
    from privtext.learn.step import DONE

    public = _short_tickets()
    probe = NgramGenerator(public=public).random(None, 100, rng=np.random.default_rng(0))
    seen = {tuple(_norm_words(t)) for t in public}
    written = next(t for t in probe if tuple(_norm_words(t)) not in seen and len(_norm_words(t)) < 8)
    planted = "zorvax quilmet brandle sorn"  # a short private record: no public text, no generator output
    private = [written, planted, "my card was stolen on holiday and the bank never called back"]
    guard = PrivateGuard(private, public)
    log = PromptLog(None)
    log.observer = guard.note_generated
    gen = NgramGenerator(public=public, guard=guard, prompt_log=log)
    texts = gen.random(None, 100, rng=np.random.default_rng(0))
    assert texts == probe and guard.is_private_record(written) and log.lines >= 1
    k = texts.index(written)
    votes = _votes(tmp_path, [5.0 if i == k else 0.0 for i in range(len(texts))])
    learner = build_learner({"kind": "ngram_counts"}, gen, label_info=lambda g: None, seed=0, name=gen.name)
    assert learner is not None
    with pytest.raises(PrivacyCheckError, match="equals a private record"):
        guard.assert_public([written], what="the old check")  # the false alarm the step used to raise
    rec = learner.step(0, _pop(texts, [0] * len(texts)), votes, folder=tmp_path / "ok", guard=guard, lines=log.lines)
    assert rec.trained["texts"] == 1 and (tmp_path / "ok" / DONE).exists()
    other = next(t for t in texts if t != written)
    check_pair_texts([PreferencePair(0, written, other, 5.0, 0.0, gen.name, "g0")], guard, lines=log.lines)
    # the planted fault: the private record no generator wrote, where the voted candidate was
    bad = list(texts)
    bad[k] = planted
    with pytest.raises(PrivacyCheckError, match=f"n-gram re-estimate text {k} holds private text"):
        learner.step(0, _pop(bad, [0] * len(bad)), votes, folder=tmp_path / "bad", guard=guard, lines=log.lines)
    assert not (tmp_path / "bad").exists()
    pair = [PreferencePair(0, other, planted, 5.0, 0.0, gen.name, "g0")]
    with pytest.raises(PrivacyCheckError, match="preference pair 0 \\(rejected\\)"):
        check_pair_texts(pair, guard, lines=log.lines)
    guard.note_generated([planted], log.lines + 1, public_model=True)  # written after the check: explains nothing
    with pytest.raises(PrivacyCheckError):
        check_pair_texts(pair, guard, lines=log.lines)
