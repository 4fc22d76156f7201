"""Length control: a target length from public or released information, honoured by the n-gram generator and
the prompted backends; the clinical_note prompt family; the DP length histogram (its sensitivity and noise)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from privtext.data import Corpus
from privtext.errors import ConfigError
from privtext.generate import (
    GeneratorContext,
    LabelInfo,
    LengthTarget,
    VariationSpec,
    build_generator,
    load_family,
)
from privtext.generate.base import PromptedGenerator
from privtext.generate.length import cap_words, length_target
from privtext.generate.prompts import PromptFamily
from privtext.mechanisms.lengths import (
    dp_length_histogram,
    length_bin_edges,
    length_histogram_event,
    word_counts,
)

WORDS = ("patients study results treatment trial group analysis outcome risk clinical cohort dose effect "
         "disease therapy response").split()


def long_public(n: int = 120, seed: int = 0) -> Corpus:
    """Abstract-like public text: 3-6 sentences of 12-20 words (40-120 words), none short."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        sents = [" ".join(rng.choice(WORDS, size=int(rng.integers(12, 21)))).capitalize() + "."
                 for _ in range(int(rng.integers(3, 7)))]
        texts.append(" ".join(sents))
    return Corpus.from_texts(texts, {}, name="abstracts")


@pytest.fixture(scope="module")
def public() -> Corpus:
    return long_public()


# --------------------------------------------------------------------------------------------- the target


def test_length_target_parses_samples_within_its_bins_and_refuses_bad_input() -> None:
    t = LengthTarget.parse(20)
    assert (t.low, t.high, t.max_words) == ((15,), (25,), 37)
    t = LengthTarget.parse([10, 30], max_words=40)
    rng = np.random.default_rng(0)
    draws = np.array([t.draw(rng) for _ in range(4000)])
    assert draws.min() == 10 and draws.max() == 30
    # uniform over 21 values: a chi-square test at the sample size
    assert stats.chisquare(np.bincount(draws - 10, minlength=21)).pvalue > 1e-3
    h = LengthTarget.from_histogram([0.0, -3.0, 9.0], [1, 5, 10, 20])  # bins [1,4], [5,9], [10,19]
    draws = np.array([h.draw(rng) for _ in range(2000)])
    assert draws.min() >= 1 and draws.max() <= 19 and np.mean(draws >= 10) == 1.0  # all mass in the third bin
    assert h.max_words == 20 and h.mean() == pytest.approx(14.5)
    for bad in (0, -5, [10], [30, 10], "20", True, [1.5, 3]):
        with pytest.raises(ConfigError):
            LengthTarget.parse(bad)
    with pytest.raises(ConfigError):
        LengthTarget.from_histogram([1.0, 2.0], [1, 5])


def test_cap_words_cuts_at_the_cap_and_ends_the_sentence() -> None:
    assert cap_words("one two three", 5) == "one two three"
    assert cap_words("one two three four, five", 4) == "one two three four."
    assert len(cap_words(" ".join(["w"] * 100), 30).split()) == 30


# -------------------------------------------------------------------------------------------- the n-gram


def _lengths(texts: list[str]) -> np.ndarray:
    return np.array([len(t.split()) for t in texts])


def test_ngram_writes_to_the_target_length_not_the_public_texts_length(public: Corpus) -> None:
    ctx = GeneratorContext(public=public)
    free = build_generator({"backend": "ngram"}, ctx)
    short = build_generator({"backend": "ngram", "target_words": [10, 20]}, ctx)
    assert free.length is None and short.length is not None and short.cap == 30
    rng = np.random.default_rng(1)
    long_out = _lengths(free.random(None, 60, rng=rng))
    short_out = _lengths(short.random(None, 60, rng=np.random.default_rng(1)))
    assert long_out.mean() > 40  # the public texts' lengths (40-120 words)
    assert short_out.max() <= 30 and 10 <= np.median(short_out) <= 26
    # every operation honours the cap: a variation of a long text, a paraphrase, a seeded and a contrastive text
    long_text = public.texts[0]
    assert len(long_text.split()) > 30
    for spec in (VariationSpec(kind="blank", mask_prob=0.5), VariationSpec(kind="paraphrase")):
        out = short.variation([long_text] * 5, None, spec, rng=np.random.default_rng(2))
        assert _lengths(out).max() <= 30, spec
    out = short.seeded([["treatment", "dose effect"]] * 5, "abstract", rng=np.random.default_rng(3))
    assert _lengths(out).max() <= 30 and all("dose effect" in t for t in out)
    out = short.contrastive([long_text], [public.texts[1]], None, 5, rng=np.random.default_rng(4))
    assert _lengths(out).max() <= 30


def test_a_range_keeps_the_public_length_profile_inside_it() -> None:
    """In-domain public text whose lengths fall inside the range keeps its own lengths (not uniform)."""
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=int(n))) + "." for n in rng.choice([18, 19, 20], size=200)]
    texts = [t[:-1].replace(" ", ". ", 1) + "." for t in texts]  # sentence ends inside each text too
    gen = build_generator({"backend": "ngram", "target_words": [10, 40]},
                          GeneratorContext(public=Corpus.from_texts(texts, {}, name="notes")))
    out = _lengths(gen.random(None, 80, rng=np.random.default_rng(6)))
    assert 17 <= np.median(out) <= 24 and out.max() <= 60


def test_released_length_takes_precedence_over_the_configured_and_the_family(public: Corpus) -> None:
    released = LengthTarget.from_histogram([0, 10.0, 0], [1, 5, 9, 40], source="released")
    g = build_generator({"backend": "ngram", "prompt_family": "clinical_note", "target_words": 30},
                        GeneratorContext(public=public, length=released))
    assert g.length is released
    out = _lengths(g.random(None, 40, rng=np.random.default_rng(7)))
    assert out.max() <= 40 and np.median(out) <= 15  # the released bin [5, 8], then to a sentence end
    g = build_generator({"backend": "ngram", "prompt_family": "clinical_note", "target_words": 30},
                        GeneratorContext(public=public))
    assert g.length is not None and g.length.source.startswith("configured") and g.length.low == (22,)
    g = build_generator({"backend": "ngram", "prompt_family": "clinical_note"}, GeneratorContext(public=public))
    assert g.length is load_family("clinical_note").length and g.cap == 60  # off-domain public text: the prior


def test_ngram_declines_the_family_prior_when_its_public_text_is_in_domain() -> None:
    rng = np.random.default_rng(8)
    notes = [". ".join(" ".join(rng.choice(WORDS, size=7)) for _ in range(4)) + "." for _ in range(100)]  # 28 words
    g = build_generator({"backend": "ngram", "prompt_family": "clinical_note"},
                        GeneratorContext(public=Corpus.from_texts(notes, {}, name="notes")))
    assert g.length is None and g.cap == 1000  # the public texts' own lengths, as without the family
    g = build_generator({"backend": "ngram", "prompt_family": "clinical_note", "target_words": [10, 20]},
                        GeneratorContext(public=Corpus.from_texts(notes, {}, name="notes")))
    assert g.length is not None  # a configured target is always honoured


# ----------------------------------------------------------------------------------------- prompt families


def test_clinical_note_family_asks_for_short_notes_and_is_detected() -> None:
    fam = load_family("clinical_note")
    assert fam.length is not None and (fam.length.low, fam.length.high, fam.length.max_words) == ((15,), (45,), 60)
    label = LabelInfo.from_mapping({"department": "Department: Cardiology", "visit": "Visit: follow-up"})
    p = fam.random_prompt(label, np.random.default_rng(0))
    n = p.meta["target_words"]
    assert 15 <= n <= 45 and f"about {n} words" in p.user and "Cardiology" in p.user
    from privtext.generate import detect_family

    assert detect_family(["department", "visit"], label=label) == "clinical_note"
    assert detect_family(["label1", "label2"]) != "clinical_note"


def test_a_target_reaches_a_family_without_the_placeholder_and_a_placeholder_needs_a_length() -> None:
    fam = load_family("pubmed")
    p = fam.random_prompt(None, np.random.default_rng(0), target_words=25)
    assert p.user.endswith("The medical paper abstract should have about 25 words.")
    assert "words" not in fam.random_prompt(None, np.random.default_rng(0)).user.split(".")[-2]
    import yaml

    from privtext.generate.prompts import _package_dir

    d = yaml.safe_load(_package_dir().joinpath("clinical_note.yaml").read_text())
    del d["length"]
    with pytest.raises(ConfigError, match="length section"):
        PromptFamily.from_dict(d, source="no-length.yaml")
    d["length"] = {"target_words": [10, 20], "max_words": 0}
    with pytest.raises(ConfigError, match="max_words"):
        PromptFamily.from_dict(d, source="bad.yaml")


class EchoGenerator(PromptedGenerator):
    """A prompted backend whose model answers every prompt with 100 words (a model that ignores the length it
    was asked for): the cap must still hold."""

    backend = "echo"

    def _complete(self, operation: str, prompts: list, rng: np.random.Generator) -> list[str]:
        self.prompts = [p.user for p in prompts]
        return [" ".join(["word"] * 100) for _ in prompts]


def test_prompted_backends_ask_for_the_target_and_cap_the_reply() -> None:
    gen = EchoGenerator(family=load_family("clinical_note"))
    assert _lengths(gen.random(None, 3, rng=np.random.default_rng(0))).max() == 100  # no target set: no cap
    gen.length = LengthTarget.parse([10, 20], max_words=25)
    out = gen.random(None, 4, rng=np.random.default_rng(0))
    assert _lengths(out).max() == 25 and all("about 1" in p or "about 2" in p for p in gen.prompts)
    out = gen.variation(["a b c"], None, VariationSpec(kind="blank"), rng=np.random.default_rng(1))
    assert _lengths(out).max() == 25


# ------------------------------------------------------------------------------------ DP length histogram


def test_length_histogram_counts_each_record_once_in_its_bin() -> None:
    edges = length_bin_edges(64, bins=8)
    assert edges[0] == 1 and edges[-1] == 65 and all(b > a for a, b in itertools.pairwise(edges))
    texts = ["w " * 3, "w " * 3, "w " * 30, "w " * 500]  # 500 is clipped into the last bin
    exact, ev = dp_length_histogram(texts, edges=edges, rng=np.random.default_rng(0), epsilon=math.inf)
    assert exact.sum() == 4 and exact[np.searchsorted(edges, 3, side="right") - 1] == 2 and exact[-1] == 1
    assert ev.noise_multiplier == 0.0
    # add/remove one record changes one bin by one (Δ₁ = Δ₂ = 1), whatever its length
    for extra in ("", "w", "w " * 9, "w " * 1000):
        more, _ = dp_length_histogram([*texts, extra] if extra else texts, edges=edges,
                                      rng=np.random.default_rng(0), epsilon=math.inf)
        assert np.abs(more - exact).sum() == (1 if extra else 0)
    assert list(word_counts(["a b", "", " c  d e "])) == [2, 0, 3]


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_length_histogram_noise_has_the_stated_scale(kind: str) -> None:
    """The noise per bin is Laplace(Δ/ε) or N(0, (σΔ)²): a Kolmogorov-Smirnov test on 20 000 draws, and the
    event names the same scale. A planted fault (half the noise) must fail the same test."""
    edges = [1, 2, 3]
    texts = ["w"] * 7  # 7 in the first bin, 0 in the second
    rng = np.random.default_rng(11)
    kw = {"epsilon": 0.5} if kind == "laplace" else {"noise_multiplier": 2.0}
    draws = np.array([dp_length_histogram(texts, edges=edges, rng=rng, sensitivity=3.0, **kw)[0]
                      for _ in range(10_000)])
    noise = np.concatenate([draws[:, 0] - 7, draws[:, 1]])
    ref = stats.laplace(scale=3.0 / 0.5) if kind == "laplace" else stats.norm(scale=2.0 * 3.0)
    assert stats.kstest(noise, ref.cdf).pvalue > 1e-3
    assert stats.kstest(noise * 0.5, ref.cdf).pvalue < 1e-6  # half the noise is caught
    ev = length_histogram_event(**kw)
    assert ev.noise_multiplier == pytest.approx(2.0)  # 1/ε for Laplace, σ for Gaussian
    with pytest.raises(ConfigError):
        length_histogram_event(epsilon=1.0, noise_multiplier=1.0)


def test_released_histogram_becomes_a_target_with_a_cap_from_its_mass() -> None:
    edges = length_bin_edges(256, bins=16)
    rng = np.random.default_rng(3)
    notes = [" ".join(["w"] * int(n)) for n in rng.integers(25, 44, size=240)]
    noisy, _ = dp_length_histogram(notes, edges=edges, rng=rng, epsilon=0.5)
    t = length_target(noisy, edges)
    draws = np.array([t.draw(rng) for _ in range(2000)])
    assert 20 <= np.median(draws) <= 50 and t.max_words <= 100  # not PubMed's 100+ words
    assert t.source.startswith("released")
