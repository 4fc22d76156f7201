"""The DP-KPS library pipeline: events and accounting, recording before data is read, real Yelp data with the
hashing embedder and the n-gram generator, and parameter validation."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from privtext.data.vocabulary import PublicVocabulary, term_tokens, vocabulary_from_corpus
from privtext.embed.hashing import HashingEmbedder
from privtext.errors import ConfigError, DataError, InvalidPrivacyParameter
from privtext.generate.ngram import NgramGenerator
from privtext.methods.dpkps.core import (
    DPKPSOptions,
    dpkps_event,
    dpkps_plan,
    dpkps_sequences,
    run_dpkps,
)
from privtext.privacy.accounting import epsilon_for_delta
from privtext.privacy.pure import pure_epsilon
from privtext.privacy.release import DirectReleases
from tests.conftest import shared_file

A, B = "Business Category: Restaurants", "Business Category: Beauty & Spas"


@pytest.fixture(scope="module")
def yelp() -> dict[str, Any]:
    """247 Beauty & Spas and 250 Restaurants reviews (private), 1000 other reviews (public)."""
    with shared_file("yelp", "dev.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with shared_file("yelp", "test.csv").open(encoding="utf-8", newline="") as f:
        public = [r["text"] for _, r in zip(range(1000), csv.DictReader(f), strict=False)]
    priv = [r for r in rows if r["label1"] == B] + [r for r in rows if r["label1"] == A][:250]
    return {"texts": [r["text"] for r in priv], "labels": [r["label1"] for r in priv], "public": public,
            "vocab": vocabulary_from_corpus(public, min_count=3, max_terms=3000)}


def _params(eps: float, **kw: Any) -> DPKPSOptions:
    base = dict(epsilon_vocab=eps, epsilon_kde=eps, vocab_size=200, length=5, bandwidth=0.3, n_features=2048,
                max_terms=32)
    base.update(kw)
    return DPKPSOptions(**base)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- accounting


@pytest.mark.parametrize(("sequence", "ensemble", "k"), [("independent", "log", 1), ("iterative", "log", 3),
                                                          ("iterative", "linear", 5)])
def test_event_is_the_data_free_factory_and_composes(sequence: str, ensemble: str, k: int) -> None:
    p = DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=5.0, vocab_size=20, length=5, sequence=sequence,  # type: ignore[arg-type]
                     ensemble=ensemble, n_features=32, max_terms=10)  # type: ignore[arg-type]
    texts = ["alpha beta gamma delta epsilon zeta", "beta gamma alpha eta theta iota", "kappa alpha beta"] * 4
    labels = ["x", "y", "x"] * 4
    vocab = PublicVocabulary(tuple("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
                                   "omicron pi rho sigma tau upsilon".split()))
    keeper = DirectReleases()
    kp = dpkps_sequences(texts, labels, classes=["x", "y"], public_vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                         params=p, n_per_class=3, rng=np.random.default_rng(0), keeper=keeper)
    recorded = keeper.recorded
    assert kp.event == dpkps_event(p)
    assert [r.key for r in recorded] == [r.key for r in dpkps_plan(p)] == [r.key for r in kp.releases]
    assert len(recorded) == 1 + k
    assert [r.event for r in recorded] == [r.event for r in dpkps_plan(p)]
    assert pure_epsilon(kp.event) == pytest.approx(6.0)  # ε_vocab + ε_kde, whatever the split over sketches
    assert sum(r.meta["epsilon"] for r in recorded) == pytest.approx(6.0)
    assert 5.9 < epsilon_for_delta(kp.event, 1e-12) <= 6.0 + (1 + k) * 2e-3  # the PLD accountant agrees
    for r in recorded:
        assert r.meta["laplace_scale"] == pytest.approx(r.sensitivity / r.meta["epsilon"])
    assert len(kp.sequences) == 6 and all(len(s) == 5 and len(set(s)) == 5 for s in kp.sequences)
    assert kp.labels == ("x",) * 3 + ("y",) * 3


@pytest.mark.parametrize("options", [{}, {"vocab_selection": "idf", "term_weighting": "idf", "contrast": 1.0}])
def test_releases_are_recorded_before_private_data_is_read(options: dict[str, Any]) -> None:
    """Also with the idf selection, idf term weights and contrast sampling: they read public document counts
    and released values only (the private texts and labels are read exactly as often, and never after the
    last release)."""

    class Counted(Sequence[str]):
        def __init__(self, items: list[str]):
            self.items, self.reads = items, 0

        def __len__(self) -> int:
            return len(self.items)

        def __getitem__(self, i: Any) -> Any:
            self.reads += 1
            return self.items[i]

        def __iter__(self) -> Iterator[str]:
            for x in self.items:
                self.reads += 1
                yield x

    texts = Counted(["alpha beta gamma", "beta gamma delta", "gamma delta alpha"])
    labels = Counted(["x", "y", "x"])
    vocab = PublicVocabulary(("alpha", "beta", "gamma", "delta"), counts=(5, 4, 3, 2), documents=9)
    p = DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=1.0, vocab_size=4, length=2, sequence="iterative", n_features=8,
                     max_terms=4, **options)
    seen: list[tuple[str, int, int]] = []

    class Watching(DirectReleases):
        def release(self, release: Any, compute: Any) -> Any:
            seen.append((release.key, texts.reads, labels.reads))
            return super().release(release, compute)

    dpkps_sequences(texts, labels, classes=["x", "y"], public_vocabulary=vocab, embedder=HashingEmbedder(dim=8),
                    params=p, n_per_class=2, rng=np.random.default_rng(0), keeper=Watching())
    assert seen[0] == ("dpkps/vocabulary", 0, 0)  # nothing read before the first release is recorded
    assert seen[1] == ("dpkps/kde/m=2", 3, 0)  # the vocabulary read each text once; no label read yet
    assert texts.reads == 6 and labels.reads == 3

    class Refused(Exception):
        pass

    class Refusing(DirectReleases):
        def release(self, release: Any, compute: Any) -> Any:
            if release.key.startswith("dpkps/kde"):
                raise Refused(release.key)
            return super().release(release, compute)

    texts.reads = labels.reads = 0
    with pytest.raises(Refused):
        dpkps_sequences(texts, labels, classes=["x", "y"], public_vocabulary=vocab, embedder=HashingEmbedder(dim=8),
                        params=p, n_per_class=2, rng=np.random.default_rng(0), keeper=Refusing())
    assert texts.reads == 3 and labels.reads == 0  # a refused sketch reads nothing


# -------------------------------------------------------------------------------------------- real data


def _own_share(yelp: dict[str, Any], kp: Any) -> dict[str, tuple[float, float]]:
    """For each class c: (share of c's sampled terms that are c-typical, the same share among the other
    class's terms). c-typical: the term's document rate in c's private reviews is ≥ 2× the other class's."""
    texts, labels = yelp["texts"], yelp["labels"]
    dp_vocab = kp.vocabulary.vocabulary(yelp["vocab"])
    m = dp_vocab.matcher()
    rate = np.zeros((2, len(dp_vocab)))
    for t, lab in zip(texts, labels, strict=True):
        rate[[A, B].index(lab), m.find(t)] += 1
    rate = rate / np.array([[labels.count(A)], [labels.count(B)]]) + 1 / len(texts)
    out = {}
    for k, c in enumerate([A, B]):
        typical = rate[k] >= 2 * rate[1 - k]
        mine = [dp_vocab.index(t) for s, lab in zip(kp.sequences, kp.labels, strict=True) if lab == c for t in s]
        other = [dp_vocab.index(t) for s, lab in zip(kp.sequences, kp.labels, strict=True) if lab != c for t in s]
        out[c] = (float(typical[mine].mean()), float(typical[other].mean()))
    return out


def test_sequences_carry_their_class_at_large_epsilon(yelp: dict[str, Any], any_seed: int) -> None:
    kp = dpkps_sequences(yelp["texts"], yelp["labels"], classes=[A, B], public_vocabulary=yelp["vocab"],
                         embedder=HashingEmbedder(dim=256), params=_params(math.inf), n_per_class=100,
                         rng=np.random.default_rng(any_seed))
    for c, (mine, other) in _own_share(yelp, kp).items():
        assert mine - other > 0.15, (c, mine, other)  # measured ≈ 0.23–0.30


def test_sequences_ignore_the_labels_at_tiny_epsilon(yelp: dict[str, Any], any_seed: int) -> None:
    """At ε = 1e-6 the released noise is ~10⁸ times the data's contribution: shuffling the private labels does
    not change the sampled sequences (same randomness: the noise is seeded, the explicit opt-in), while at
    ε = ∞ it does."""
    from privtext.rng import noise_rng
    perm = np.random.default_rng(any_seed + 1).permutation(len(yelp["labels"]))
    shuffled = [yelp["labels"][i] for i in perm]

    def run(eps: float, labels: list[str]) -> np.ndarray:
        kp = dpkps_sequences(yelp["texts"], labels, classes=[A, B], public_vocabulary=yelp["vocab"],
                             embedder=HashingEmbedder(dim=256), params=_params(eps, n_features=512),
                             n_per_class=60, rng=np.random.default_rng(any_seed),
                             noise_rng=lambda key: noise_rng(any_seed, key, reproducible=True))
        return np.array(kp.sequences)

    assert (run(1e-6, yelp["labels"]) == run(1e-6, shuffled)).mean() > 0.99
    assert (run(math.inf, yelp["labels"]) == run(math.inf, shuffled)).mean() < 0.5


def test_end_to_end_with_the_ngram_generator(yelp: dict[str, Any], any_seed: int) -> None:
    """One prompt per sequence naming the document type and the terms, never the class; every text contains
    its terms in order and takes the class of its sketch."""

    class Capture:
        def __init__(self) -> None:
            self.records: list[dict[str, Any]] = []

        def log(self, **kw: Any) -> None:
            self.records.append(kw)

    log = Capture()
    gen = NgramGenerator(public=yelp["public"], prompt_log=log)  # type: ignore[arg-type]
    res = run_dpkps(yelp["texts"], yelp["labels"], classes=[A, B], public_vocabulary=yelp["vocab"],
                    embedder=HashingEmbedder(dim=256), generator=gen, params=_params(8.0, length=4),
                    n_per_class=4, rng=np.random.default_rng(any_seed), batch_size=3)
    assert len(res.texts) == len(res.labels) == len(res.sequences) == 8 == len(log.records)
    assert res.labels == [A] * 4 + [B] * 4 and res.doc_type == "text"
    assert gen.stats.prompts == 8
    for text, seq, rec in zip(res.texts, res.sequences, log.records, strict=True):
        toks = term_tokens(text)
        pos = 0
        for term in seq:  # every keyphrase appears, in order
            tt = term_tokens(term)
            hits = [i for i in range(pos, len(toks) - len(tt) + 1) if toks[i:i + len(tt)] == tt]
            assert hits, (term, text)
            pos = hits[0] + len(tt)
        assert rec["operation"] == "seeded" and rec["meta"]["keyphrases"] == list(seq)
        for cls in (A, B, "Restaurants", "Beauty"):
            assert cls not in str(rec["prompt"])
    assert res.event == dpkps_event(_params(8.0, length=4))


# ---------------------------------------------------------------------------------------------- validation


def test_bad_parameters_name_the_value() -> None:
    """A field out of range is refused when the options are built (pydantic names the field); a combination that
    cannot run is refused by ``check`` (called by the run before anything is written, and by every library
    function before anything is recorded)."""
    from pydantic import ValidationError

    for bad in ({"epsilon_kde": 0.0}, {"sequence": "greedy"}, {"bandwidth": -1.0}, {"contrast": -1.0},
                {"vocab_selection": "last"}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            DPKPSOptions(**{"epsilon_vocab": 1.0, "epsilon_kde": 1.0, **bad})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="vocab_size=5 < length=8"):  # the run's default length
        DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=1.0, vocab_size=5).check()
    with pytest.raises(ConfigError, match="max_terms=4 < length=8"):
        DPKPSOptions(sequence="iterative", max_terms=4).check()
    with pytest.raises(ConfigError, match="term_weighting='idf' needs weighting='mean'"):
        DPKPSOptions(term_weighting="idf", weighting="sum", max_points=3).with_epsilons(1.0, 1.0)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon_vocab"):
        DPKPSOptions().with_epsilons(-1.0, 1.0)
    with pytest.raises(ConfigError, match=r"epsilon_vocab and dpkps\.epsilon_kde"):  # the library needs both
        dpkps_plan(DPKPSOptions(epsilon_vocab=1.0))
    with pytest.raises(ConfigError, match="vocab_size=5 < length=8"):  # checked before anything is recorded
        dpkps_event(DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=1.0, vocab_size=5))
    p = DPKPSOptions.from_total(6.0)
    assert (p.epsilon_vocab, p.epsilon_kde) == pytest.approx((1.0, 5.0)) and p.epsilon_total == pytest.approx(6.0)
    # one class, one set of defaults: the library's are what `privtext run` uses (issue 37)
    assert (p.vocab_size, p.length, p.r) == (None, 8, 10)
    # the default |Ṽ|: 400, or the whole public vocabulary when it is smaller (issue 35: a small public corpus of
    # short messages holds about 110 terms); a size that was set stays as it is
    assert p.sized_for(5000).vocab_size == 400 and p.sized_for(113).vocab_size == 113
    assert p.model_copy(update={"vocab_size": 50}).sized_for(20).vocab_size == 50
    with pytest.raises(ConfigError, match="vocab_size=5 < length=8"):  # a public vocabulary smaller than L
        p.sized_for(5)
    small = DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=1.0, vocab_size=10, length=2, n_features=8)
    kw: dict[str, Any] = dict(public_vocabulary=PublicVocabulary(tuple(f"w{i}" for i in range(20))),
                              embedder=HashingEmbedder(dim=8), params=small, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="document counts"):  # a glossary has no frequencies; nothing recorded
        dpkps_sequences(["w1"], ["x"], classes=["x"], n_per_class=1,
                        **{**kw, "params": DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=1.0, vocab_size=10, length=2,
                                                        n_features=8, term_weighting="idf")})
    with pytest.raises(DataError, match="'z'"):
        dpkps_sequences(["w1 w2", "w3"], ["x", "z"], classes=["x", "y"], n_per_class=1, **kw)
    with pytest.raises(ConfigError, match="missing"):
        dpkps_sequences(["w1"], ["x"], classes=["x", "y"], n_per_class={"x": 1}, **kw)
    with pytest.raises(DataError, match="2 private texts but 1 labels"):
        dpkps_sequences(["w1", "w2"], ["x"], classes=["x"], n_per_class=1, **kw)
    with pytest.raises(ConfigError, match="vocab_size=10 exceeds"):
        dpkps_sequences(["w1"], ["x"], classes=["x"], n_per_class=1,
                        **{**kw, "public_vocabulary": PublicVocabulary(("w1", "w2"))})


# -------------------------------------------------------------------------------------------- noise source


def _tiny_run(**kw: Any) -> Any:
    p = DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=1.0, vocab_size=4, length=2, n_features=8, max_terms=4)
    vocab = PublicVocabulary(("alpha", "beta", "gamma", "delta", "eps", "zeta"))
    return dpkps_sequences(["alpha beta gamma", "beta gamma delta", "gamma delta alpha"], ["x", "y", "x"],
                           classes=["x", "y"], public_vocabulary=vocab, embedder=HashingEmbedder(dim=8), params=p,
                           n_per_class=2, rng=np.random.default_rng(0), **kw)


def test_noise_comes_from_os_entropy_unless_reproducible_noise_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21 bug 5: without ``noise_rng`` the Laplace noise must not be a function of the caller's ``rng``
    (whoever knows that seed could subtract it). Two calls with the same seeded ``rng`` draw different noise; the
    explicit opt-in (``noise_rng`` from a seed) draws the same noise twice."""
    from privtext import rng as prng

    calls: list[int] = []
    real = prng.secure_rng

    def counting() -> np.random.Generator:
        calls.append(1)
        return real()

    monkeypatch.setattr(prng, "secure_rng", counting)
    a, b = _tiny_run(), _tiny_run()
    assert len(calls) == 2 * len(a.releases), "each release's noise must come from a fresh OS-entropy CSPRNG"
    assert not np.array_equal(a.vocabulary.noisy_counts, b.vocabulary.noisy_counts)
    seeded = {"noise_rng": lambda key: prng.noise_rng(7, key, reproducible=True)}
    c, d = _tiny_run(**seeded), _tiny_run(**seeded)
    assert np.array_equal(c.vocabulary.noisy_counts, d.vocabulary.noisy_counts)
