"""The offline n-gram generator: the Kneser-Ney model, exact sampling, fill-in-the-blanks, keyphrase seeding,
contrastive generation, label conditioning, the public-only rule, and perplexity on real data."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest

from privtext.atomicio import PromptLog
from privtext.data import Corpus, load_corpus
from privtext.errors import ConfigError, PrivacyError, UnknownNameError
from privtext.generate import GeneratorContext, LabelInfo, VariationSpec, build_generator
from privtext.generate.ngram import (
    BOS,
    EOS,
    KNModel,
    NgramGenerator,
    NgramLM,
    _Uniforms,
    detokenize,
    tokenize,
)
from privtext.guard import PrivateGuard
from tests.conftest import shared_file

FOOD = ["soup", "bread", "pasta", "coffee", "pizza", "salad", "burger", "noodles"]
HOTEL = ["room", "bed", "lobby", "pool", "shower", "balcony", "elevator", "towels"]
ADJS = ["great", "cold", "fresh", "small", "clean", "noisy", "friendly", "slow", "warm", "cheap"]


def two_topic_corpus() -> Corpus:
    texts, labels = [], []
    for w, a, b in itertools.product(FOOD + HOTEL, ADJS, ADJS[::2]):
        if w in FOOD:
            texts.append(f"The {w} was {a} and the {FOOD[(FOOD.index(w) + 1) % 8]} tasted {b}. I ordered more {w}.")
            labels.append("Topic: Food")
        else:
            texts.append(f"Our {w} was {a} and the {HOTEL[(HOTEL.index(w) + 1) % 8]} looked {b}. We booked the {w}.")
            labels.append("Topic: Hotel")
    return Corpus.from_texts(texts, {"topic": labels}, name="two-topics")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return two_topic_corpus()


@pytest.fixture(scope="module")
def gen(corpus: Corpus) -> NgramGenerator:
    return build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, label_columns=["topic"]))


# ------------------------------------------------------------------------------------------ tokenisation


@pytest.mark.parametrize("text", [
    "Great food!! The staff (mostly) were friendly; prices: $12.50 per plate.",
    'He said "wow" and left... I don\'t know why, it\'s 5.0/5 stars - well-known place.',
    "First paragraph.\n\nSecond paragraph, after a break.",
    "Emails: a_b@example.com, 50% off, covid-19 rules.",
    "Quotes ' single ' and ’curly’ ones; rock'n'roll.",
])
def test_detokenize_round_trips_tokens(text: str) -> None:
    toks = tokenize(text)
    assert toks, text
    assert tokenize(detokenize(toks)) == toks


def test_detokenize_is_readable() -> None:
    assert detokenize(tokenize("Hello , world ! It ' s ( really ) fine .")) == "Hello, world! It' s (really) fine."
    assert detokenize(["a", "\n\n", "b"]) == "a\n\nb"


# ------------------------------------------------------------------------------------------ the KN model


def _small_lm(order: int = 3, scale: float = 1.0) -> NgramLM:
    texts = ["the cat sat on the mat .", "the dog sat on the log .", "a cat and a dog .",
             "the cat ate .", "on the mat the dog sat ."]
    return NgramLM(texts, order=order, backoff_scale=scale)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("scale", [1.0, 0.4])
def test_conditional_distributions_sum_to_one(order: int, scale: float) -> None:
    lm = _small_lm(order, scale)
    m = lm.global_model
    V = len(lm.vocab)
    enc = lm.vocab.encode
    for ctx in (["the"], ["on", "the"], ["sat", "on", "the"], ["zzz", "unseen"], []):
        hist = [BOS] * 3 + enc(ctx)
        rids = m.chain(hist)
        total = sum(m.prob(rids, w) for w in range(1, V))
        assert total == pytest.approx(1.0, abs=1e-9), (ctx, total)


def test_discounts_are_in_range() -> None:
    lm = _small_lm(4)
    for k in range(1, 5):
        d1, d2, d3 = lm.global_model.discounts[k]
        assert 0 < d1 < 1 and 0 < d2 < 2 and 0 < d3 < 3


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_sampler_is_exact(scale: float, any_seed: int) -> None:
    """Zero-signal statistical test: draws follow prob() (total variation within sampling noise)."""
    lm = _small_lm(3, scale)
    m = lm.global_model
    V = len(lm.vocab)
    hist = [BOS] * 3 + lm.vocab.encode(["on", "the"])
    rids = m.chain(hist)
    p = np.array([0.0] + [m.prob(rids, w) for w in range(1, V)])
    rng = np.random.default_rng(any_seed)
    n = 20000
    counts = np.bincount([m.draw(rids, u) for u in rng.random(n)], minlength=V)
    tv = 0.5 * np.abs(counts / n - p).sum()
    # E[TV] <= 0.5 * sum sqrt(p(1-p)/n) ~ 0.01 here; 0.03 leaves a wide margin for any seed
    assert tv < 0.03, tv


def test_dist_matches_prob() -> None:
    lm = _small_lm(3, 0.6)
    m = lm.global_model
    rids = m.chain([BOS] * 3 + lm.vocab.encode(["sat", "on"]))
    d = m.dist(rids)
    assert d[BOS] == 0 and d.sum() == pytest.approx(1.0)
    assert np.allclose(d[1:], [m.prob(rids, w) for w in range(1, len(lm.vocab))])


def test_forbidden_words_are_renormalised_away(any_seed: int) -> None:
    """Sampling with a forbidden word (here the most likely one) follows P restricted to the other words."""
    lm = _small_lm(3, 1.0)
    mix = lm.mixture(None)
    hist = [BOS] * 3 + lm.vocab.encode(["on", "the"])
    p = mix.dist(hist)
    top = int(np.argmax(p))
    forbid = frozenset({top})
    q = p.copy()
    q[[top, 2]] = 0
    q /= q.sum()
    u = _Uniforms(np.random.default_rng(any_seed))
    n = 10000
    counts = np.bincount([lm._next(mix, list(hist), u, forbid) for _ in range(n)], minlength=len(q))
    assert counts[top] == 0
    assert 0.5 * np.abs(counts / n - q).sum() < 0.04


def test_interpolated_kneser_ney_by_hand() -> None:
    """Bigram KN on a toy corpus against a hand computation of the same formula."""
    lm = NgramLM(["a b", "a c", "b c"], order=2)
    m = lm.global_model
    vid = lm.vocab.tok2id
    V = len(lm.vocab)
    # continuation counts: a<-{<s>}, b<-{a,<s>}, c<-{a,b}, </s><-{b,c}: 7 bigram types
    cont = {"a": 1, "b": 2, "c": 2, "</s>": 2}
    d1, d2, _ = m.discounts[1]
    disc = {w: c - (d1 if c == 1 else d2) for w, c in cont.items()}
    gamma1 = 1 - sum(disc.values()) / 7
    p1 = {w: disc[w] / 7 + gamma1 / (V - 1) for w in cont}
    # bigram after "a": c(a b) = c(a c) = 1
    e1, _, _ = m.discounts[2]
    gamma2 = 2 * e1 / 2
    expected = (1 - e1) / 2 + gamma2 * p1["b"]
    rids = m.chain([BOS, vid["a"]])
    assert m.prob(rids, vid["b"]) == pytest.approx(expected, rel=1e-12)
    assert m.prob(rids, EOS) == pytest.approx(gamma2 * p1["</s>"], rel=1e-12)


def test_unknown_words_get_tiny_probability() -> None:
    lm = _small_lm(3)
    lp_known, n1 = lm.log_prob("the cat sat on the mat .")
    lp_unknown, n2 = lm.log_prob("the zebra sat on the quasar .")
    assert n1 == n2 and lp_unknown < lp_known - 5


# ------------------------------------------------------------------------------------------ operations


def _match_template(template: list[str], out: list[str]) -> bool:
    """Does ``out`` equal ``template`` with every "_" replaced by one or more tokens?"""

    @__import__("functools").lru_cache(maxsize=None)
    def ok(i: int, j: int) -> bool:
        if i == len(template):
            return j == len(out)
        if template[i] == "_":
            return any(ok(i + 1, k) for k in range(j + 1, len(out) + 1))
        return j < len(out) and out[j] == template[i] and ok(i + 1, j + 1)

    return ok(0, 0)


@pytest.mark.parametrize("mask_prob", [0.2, 0.5, 0.8])
def test_fill_in_the_blanks_keeps_unmasked_tokens(gen: NgramGenerator, mask_prob: float, any_seed: int) -> None:
    log = PromptLog(None)
    gen.prompt_log = log
    try:
        texts = [two_topic_corpus().texts[i] for i in (0, 50, 500, 700)] + ["Short one, with commas: yes!"]
        out = gen.variation(texts, None, VariationSpec(kind="blank", mask_prob=mask_prob),
                            rng=np.random.default_rng(any_seed))
    finally:
        gen.prompt_log = None
    assert len(out) == len(texts)
    for rec, o, src in zip(log.memory, out, texts, strict=True):
        template = tokenize(rec["meta"]["masked"])
        assert _match_template(template, tokenize(o)), (rec["meta"]["masked"], o)
        kept = [t for t in template if t != "_"]
        assert len(kept) < len(tokenize(src)) or "_" not in template
        n_blank_src = len(tokenize(src)) - len(kept)
        # blanks are refilled to about their original length (noise 10%, at least one token each)
        assert abs(len(tokenize(o)) - len(tokenize(src))) <= max(3, 0.5 * n_blank_src)


def test_mask_prob_zero_returns_the_text(gen: NgramGenerator) -> None:
    src = "The soup was cold and the bread tasted fresh. I ordered more soup."
    out = gen.variation([src], None, VariationSpec(kind="blank", mask_prob=0.0), rng=np.random.default_rng(0))
    assert tokenize(out[0]) == tokenize(src)


def test_blank_fill_uses_the_right_context() -> None:
    """A blank before "tasted fresh" is filled with food words far more often than chance."""
    lm_gen = build_generator({"backend": "ngram", "blank_candidates": 8},
                             GeneratorContext(public=two_topic_corpus()))
    # "The soup was cold and the _ tasted fresh." : the filler must be a food word to be followed by "tasted"
    items = [("fixed", tokenize("The soup was cold and the")), ("gap", 1), ("fixed", tokenize("tasted fresh ."))]
    mix = lm_gen.lm.mixture(None)
    u = _Uniforms(np.random.default_rng(7))
    fills = [lm_gen.lm.fill(items, mix, u, candidates=8, max_words=0)[6] for _ in range(200)]
    food = sum(f in FOOD for f in fills)
    assert food / len(fills) > 0.8, fills[:20]


@pytest.mark.parametrize("kps", [
    [["fresh bread", "cold"], ["quiet balcony"], ["zyxwv quantum", "covid-19", "Dr. Smith"]],
    [["the"], ["pool", "pool", "pool"], ["great and the"]],
])
def test_seeded_contains_every_keyphrase_in_order(gen: NgramGenerator, kps, any_seed: int) -> None:
    out = gen.seeded(kps, "business review", rng=np.random.default_rng(any_seed))
    assert len(out) == len(kps)
    for phrases, text in zip(kps, out, strict=True):
        pos = 0
        for p in phrases:
            i = text.find(p, pos)
            assert i >= 0, (p, text)
            pos = i + len(p)
        assert len(text) > sum(len(p) for p in phrases)


def test_seeded_uses_no_label_model(corpus: Corpus) -> None:
    log = PromptLog(None)
    g = build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, label_columns=["topic"], prompt_log=log))
    g.seeded([["pool"]], "review", rng=np.random.default_rng(0))
    assert "label" not in log.memory[0]["meta"]


def _filler_topics(rng: np.random.Generator) -> list[str]:
    """Two topics (alpha*, beta* words) in a sea of shared filler words: a word's n-gram context barely tells
    the topics apart, so only retrieval can keep the text around a keyphrase on its topic."""
    fillers = ["the", "and", "was", "very", "we", "it", "so", "then", "with", "a"]
    texts = []
    for prefix in ("alpha", "beta"):
        for _ in range(150):
            toks = [f"{prefix}{rng.integers(12)}" if rng.random() < 0.3 else str(rng.choice(fillers))
                    for _ in range(40)]
            texts.append(" ".join(toks) + ".")
    return texts


def _topic_share(texts: list[str], keyphrase: str) -> float:
    a = b = 0
    for t in texts:
        for w in tokenize(t):
            if w != keyphrase:
                a += w.startswith("alpha")
                b += w.startswith("beta")
    return a / max(a + b, 1)


def test_seeded_retrieval_puts_the_terms_topic_in_the_text(any_seed: int) -> None:
    """Statistical: with retrieval the words around an alpha keyphrase are alpha words (measured 0.93 against
    0.54 without, 60 texts); without it the model writes from both topics."""
    texts = _filler_topics(np.random.default_rng(any_seed))
    shares = {}
    for k in (0, 20):
        g = NgramGenerator(public=texts, options=NgramGenerator.Options(seeded_retrieval=k))
        out = g.seeded([["alpha3"]] * 60, "text", rng=np.random.default_rng(any_seed + 1))
        assert all("alpha3" in t for t in out)
        shares[k] = _topic_share(out, "alpha3")
    assert shares[0] < 0.7, shares
    assert shares[20] > 0.8 and shares[20] > shares[0] + 0.2, shares


def test_keyphrase_retriever_ranks_by_idf_and_needs_every_word() -> None:
    texts = ["the pool was warm", "the pool and the sauna", "a warm sauna", "cold soup", "hot soup and bread"]
    g = NgramGenerator(public=texts, options=NgramGenerator.Options(seeded_retrieval=2))
    r = g.lm.retriever
    assert r.n_docs == len(texts)
    assert r.holding(["Pool"]).tolist() == [0, 1]  # case-insensitive
    assert r.holding(["warm", "sauna"]).tolist() == [2]  # a phrase: every word
    assert r.holding(["nothing"]).tolist() == []
    # "sauna" (df 2) and "warm" (df 2) outweigh "pool" (df 2) + nothing; text 2 holds both sauna and warm
    assert r.top([["sauna"], ["warm"]], 2) == [2, 0]
    assert r.top([["soup"], ["bread"]], 5) == [4, 3]  # idf ln(5/1) + ln(5/2) > ln(5/2)
    assert r.top([["zebra"]], 5) == []


def test_seeded_retrieval_reads_only_the_public_training_text(corpus: Corpus) -> None:
    """A keyphrase found only in private text retrieves nothing (the index is the guarded public corpus), and the
    prompt log records how many public texts were retrieved."""
    private = ["my secret zanzibar pool was cold"]
    log = PromptLog(None)
    guard = PrivateGuard(private, corpus.texts)
    g = build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, label_columns=["topic"], prompt_log=log,
                                                               guard=guard))
    assert g.lm.retriever.n_docs == len(corpus)
    out = g.seeded([["zanzibar"], ["pool", "balcony"]], "review", rng=np.random.default_rng(0))
    assert "zanzibar" in out[0]
    assert [m["meta"]["ngram"]["retrieved_public_texts"] for m in log.memory] == [0, 20]


def _bigrams(text: str) -> set[tuple[str, str]]:
    t = [w.lower() for w in tokenize(text)]
    return set(itertools.pairwise(t))


def test_contrastive_output_is_closer_to_good_than_bad(corpus: Corpus, any_seed: int) -> None:
    # the good-examples model is off by default (docs/wasp.md); this checks the option itself
    g = build_generator({"backend": "ngram", "contrastive_boost": 0.5}, GeneratorContext(public=corpus))
    rng = np.random.default_rng(any_seed)
    food = [t for t in corpus.texts if any(f"The {w} " in t for w in FOOD)]
    hotel = [t for t in corpus.texts if t.startswith("Our ")]
    good = [food[int(i)] for i in rng.choice(len(food), 6, replace=False)]
    bad = [hotel[int(i)] for i in rng.choice(len(hotel), 6, replace=False)]
    gb = set().union(*map(_bigrams, good))
    bb = set().union(*map(_bigrams, bad))
    out = g.contrastive(good, bad, None, 20, rng=rng)
    to_good = np.mean([len(_bigrams(o) & gb) / max(1, len(_bigrams(o))) for o in out])
    to_bad = np.mean([len(_bigrams(o) & bb) / max(1, len(_bigrams(o))) for o in out])
    assert to_good > to_bad + 0.1, (to_good, to_bad)
    # and closer than plain random sampling is
    base = g.random(None, 20, rng=rng)
    base_good = np.mean([len(_bigrams(o) & gb) / max(1, len(_bigrams(o))) for o in base])
    assert to_good > base_good


def test_label_conditioning_moves_the_vocabulary(gen: NgramGenerator, any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    food = gen.random(LabelInfo(("topic",), ("Topic: Food",)), 30, rng=rng)
    hotel = gen.random(LabelInfo(("topic",), ("Topic: Hotel",)), 30, rng=rng)

    def share(texts: list[str], words: list[str]) -> float:
        toks = [t.lower() for x in texts for t in tokenize(x)]
        return sum(t in words for t in toks) / len(toks)

    assert share(food, FOOD) > share(food, HOTEL)
    assert share(hotel, HOTEL) > share(hotel, FOOD)


def test_unknown_label_falls_back_to_the_global_model(gen: NgramGenerator) -> None:
    out = gen.random(LabelInfo(("topic",), ("Topic: Cars",)), 3, rng=np.random.default_rng(0))
    assert len(out) == 3 and all(out)
    assert gen.lm.label_keys(LabelInfo(("topic",), ("Topic: Cars",))) == []


def test_lengths_follow_the_public_corpus(corpus: Corpus) -> None:
    g = build_generator({"backend": "ngram"}, GeneratorContext(public=corpus))
    out = g.random(None, 60, rng=np.random.default_rng(0))
    lens = [sum(t[0].isalnum() for t in tokenize(o)) for o in out]
    public = [sum(t[0].isalnum() for t in tokenize(o)) for o in corpus.texts]
    assert min(lens) >= min(public)
    assert abs(np.median(lens) - np.median(public)) <= 0.5 * np.median(public)


def test_prompt_log_records_what_the_model_conditions_on(corpus: Corpus) -> None:
    log = PromptLog(None)
    g = build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, label_columns=["topic"], prompt_log=log))
    lab = LabelInfo(("topic",), ("Topic: Hotel",))
    g.random(lab, 2, rng=np.random.default_rng(0))
    g.seeded([["pool"]], "review", rng=np.random.default_rng(0))
    g.contrastive(["The pool was warm."], ["The soup was cold."], lab, 1, rng=np.random.default_rng(0))
    assert [r["backend"] for r in log.memory] == ["ngram"] * 4
    assert [r["operation"] for r in log.memory] == ["random", "random", "seeded", "contrastive"]
    assert "Topic: Hotel" in log.memory[0]["prompt"]
    assert log.memory[0]["meta"]["ngram"]["label_models"] == [["topic", "Topic: Hotel"]]
    assert "pool" in log.memory[2]["prompt"]
    assert "The pool was warm." in log.memory[3]["prompt"] and "The soup was cold." in log.memory[3]["prompt"]


# ------------------------------------------------------------------------------------------ public only


def test_refuses_private_text_in_its_training_corpus(corpus: Corpus) -> None:
    private = ["My name is Alice Example and my card number is 4111 1111 1111 1111.", corpus.texts[5]]
    # private text that no public text holds (a bug handing private records to the generator) is refused
    guard = PrivateGuard(private, [t for i, t in enumerate(corpus.texts) if i != 5])
    with pytest.raises(PrivacyError, match="ngram training corpus: record 5 equals a private record"):
        build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, guard=guard))
    # a record the public corpus holds is public (the run's stated assumption): the public corpus trains the model,
    # whichever of its texts a private file also holds (no data-dependent abort, issue 36)
    for ok_guard in (PrivateGuard(private, corpus.texts), PrivateGuard(private[:1], corpus.texts)):
        g = build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, guard=ok_guard))
        assert len(g.random(None, 1, rng=np.random.default_rng(0))) == 1


def test_refuses_to_build_without_public_text() -> None:
    with pytest.raises(ConfigError, match="public"):
        build_generator({"backend": "ngram"}, GeneratorContext(public=None))
    empty = Corpus.from_texts([])
    with pytest.raises(ConfigError, match="public"):
        build_generator({"backend": "ngram"}, GeneratorContext(public=empty))


def test_options_are_validated(corpus: Corpus) -> None:
    ctx = GeneratorContext(public=corpus)
    with pytest.raises(ConfigError, match=r"unknown option 'ordr' \(did you mean 'order'\?\)"):
        build_generator({"backend": "ngram", "ordr": 3}, ctx)
    with pytest.raises(ConfigError, match="order"):
        build_generator({"backend": "ngram", "order": 0}, ctx)
    with pytest.raises(ConfigError, match="backoff_scale"):
        build_generator({"backend": "ngram", "backoff_scale": 1.5}, ctx)
    with pytest.raises(UnknownNameError, match="ngram"):
        build_generator({"backend": "ngramm"}, ctx)


def _hundred_samples(corpus: Corpus) -> list[str]:
    lm = NgramLM(list(corpus.texts) * 2, order=4)
    u = _Uniforms(np.random.default_rng(0))
    return [lm.sample(u, length=60, exact_length=True) for _ in range(100)]


def test_exact_length_samples_have_that_many_words(corpus: Corpus) -> None:
    assert all(sum(t[0].isalnum() for t in tokenize(x)) == 60 for x in _hundred_samples(corpus))


@pytest.mark.timing
def test_training_and_sampling_are_fast_enough(corpus: Corpus) -> None:
    """Loose guard against accidental O(V) work per word (the benchmark measures the real rate)."""
    t0 = time.perf_counter()
    _hundred_samples(corpus)
    dt = time.perf_counter() - t0
    assert dt < 5.0, f"training and 100 sixty-word samples took {dt:.1f} s"


def test_kn_model_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigError):
        KNModel([[3, 4]], order=0, vocab_size=5)
    with pytest.raises(ConfigError):
        KNModel([[3, 4]], order=2, vocab_size=5, scale=0.0)


# ------------------------------------------------------------------------------------------ real data


def test_yelp_model_prefers_yelp_over_pubmed() -> None:
    yelp = load_corpus(shared_file("yelp", "test.csv"), label_columns=["label1", "label2"])
    pubmed = load_corpus(shared_file("pubmed", "test.csv"))
    train, held = yelp.texts[:3000], yelp.texts[4900:5000]
    gen = build_generator({"backend": "ngram"}, GeneratorContext(public=Corpus.from_texts(train)))
    ppl_yelp = gen.perplexity(held)
    ppl_pubmed = gen.perplexity(pubmed.texts[:100])
    assert math.isfinite(ppl_yelp) and ppl_yelp < 0.25 * ppl_pubmed, (ppl_yelp, ppl_pubmed)
    assert ppl_yelp < 1000


def test_yelp_labels_choose_the_yelp_family() -> None:
    yelp = load_corpus(shared_file("yelp", "test.csv"), label_columns=["label1", "label2"])
    sub = yelp.subset(range(300))
    g = build_generator({"backend": "ngram"}, GeneratorContext(public=sub, label_columns=["label1", "label2"]))
    assert g.family.name == "yelp"
    lab = LabelInfo(("label1", "label2"), ("Business Category: Restaurants", "Review Stars: 5.0"))
    assert len(g.lm.label_keys(lab)) == 3  # two per-column models and the combination
    assert len(g.random(lab, 2, rng=np.random.default_rng(0))) == 2
