"""The ``random_words`` detector picks words at the stated frequency rank."""

from __future__ import annotations

import pytest

from privtext.errors import ConfigError
from privtext.secrets.random_words import RandomWordsDetector


def _corpus(n_words: int = 100) -> list[str]:
    """Word ``wXX`` (as letters) occurs ``n_words - k`` times for rank k: frequencies n_words, n_words-1, ..., 1."""
    names = [_name(k) for k in range(n_words)]
    texts = []
    for k, w in enumerate(names):
        for _ in range(n_words - k):
            texts.append(f"{w} filler")  # "filler" is the most frequent word of all
    return texts


def _name(k: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "wrd" + letters[k // 26] + letters[k % 26]


def test_picks_the_word_at_the_quantile_rank() -> None:
    texts = _corpus()
    d = RandomWordsDetector(quantile=0.2, num_secrets=1, stop_words=["filler"], from_private=True)
    m = d.detect(texts)
    # V = 100 words ranked by frequency (rank k has frequency 100 - k); centre = round(0.2 * 99) = 20
    assert d.words == (_name(20),)
    assert d.ranking()[20] == (_name(20), 80)
    assert m.secrets == (_name(20),) and m.types == ("RANDOM_WORD",)
    assert len(m.holders(0)) == 80 and m.private_mask().sum() == 80


def test_window_is_centred_and_clipped() -> None:
    texts = _corpus()
    d = RandomWordsDetector(quantile=0.2, num_secrets=5, stop_words=["filler"], from_private=True).fit(texts)
    assert d.words == tuple(_name(k) for k in range(18, 23))
    d = RandomWordsDetector(quantile=0.0, num_secrets=4, stop_words=["filler"], from_private=True).fit(texts)
    assert d.words == tuple(_name(k) for k in range(0, 4))  # shifted to stay inside the vocabulary
    d = RandomWordsDetector(quantile=1.0, num_secrets=3, stop_words=["filler"], from_private=True).fit(texts)
    assert d.words == tuple(_name(k) for k in range(97, 100))
    d = RandomWordsDetector(quantile=0.5, window=0.1, stop_words=["filler"], from_private=True).fit(texts)
    assert len(d.words) == 10 and _name(50) in d.words


def test_stop_words_min_length_and_frequency_mode() -> None:
    texts = ["the cat sat", "the cat ran", "the dog", "a b c"]
    d = RandomWordsDetector(quantile=0.0, num_secrets=1, from_private=True).fit(texts)  # "the": a stop word
    assert d.words == ("cat",)
    assert all(len(w) >= 3 for w, _ in d.ranking())
    d = RandomWordsDetector(quantile=0.0, num_secrets=1, stop_words=None, from_private=True).fit(texts)
    assert d.words == ("the",)
    # tokens vs records: "zz" repeated in one record only
    texts2 = ["foo foo foo foo", "bar", "bar", "bar"]
    mine = {"quantile": 0.0, "num_secrets": 1, "min_length": 1, "from_private": True}
    assert RandomWordsDetector(**mine).fit(texts2).words == ("foo",)
    assert RandomWordsDetector(**mine, frequency="records").fit(texts2).words == ("bar",)


def test_lowercasing_and_spans() -> None:
    texts = ["Zebra zebra ZEBRA", "horse"] + ["horse"] * 3
    d = RandomWordsDetector(quantile=1.0, num_secrets=1, from_private=True)
    m = d.detect(texts)
    assert d.words == ("zebra",)
    assert [texts[0][s.start:s.end] for s in m.spans[0]] == ["Zebra", "zebra", "ZEBRA"]
    d2 = RandomWordsDetector(quantile=1.0, num_secrets=1, lowercase=False, from_private=True)
    d2.detect(texts)
    assert d2.words[0] in {"ZEBRA", "Zebra", "zebra"}


def test_reference_corpus_fixes_the_vocabulary() -> None:
    ref = _corpus()
    d = RandomWordsDetector(quantile=0.2, num_secrets=1, stop_words=["filler"], reference=ref)
    assert d.words == (_name(20),)
    m = d.detect([f"I saw {_name(20)} today", "nothing", f"{_name(21)} only"])
    assert m.private_mask().tolist() == [True, False, False]
    assert m.shape == (3, 1)


def test_reference_from_file(tmp_path) -> None:
    p = tmp_path / "ref.csv"
    p.write_text("text\n" + "\n".join(_corpus(10)) + "\n", encoding="utf-8")
    d = RandomWordsDetector(quantile=0.0, num_secrets=1, stop_words=["filler"], reference=str(p))
    assert d.words == (_name(0),)


@pytest.mark.parametrize(
    ("opts", "match"),
    [
        ({"quantile": 1.5}, "quantile"),
        ({"num_secrets": 0}, "num_secrets"),
        ({"num_secrets": 3, "window": 0.1}, "not both"),
        ({"window": 0}, "window"),
        ({"frequency": "tf-idf"}, "frequency"),
        ({"stop_words": "french"}, "stop_words"),
        ({"min_length": 0}, "min_length"),
    ],
)
def test_option_errors(opts: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RandomWordsDetector(**opts, from_private=True)


def test_words_before_fit_is_an_error_and_empty_vocab_is_all_public() -> None:
    with pytest.raises(ConfigError, match="fit"):
        _ = RandomWordsDetector(from_private=True).words
    m = RandomWordsDetector(from_private=True).detect(["12 34", "!!"])
    assert m.shape == (2, 0) and not m.private_mask().any()


def test_without_a_reference_the_private_vocabulary_must_be_asked_for() -> None:
    """Issue 21 bug 4: without ``reference`` the secrets are chosen from the private corpus's own frequencies.
    That is the paper's set-up, but which words are secrets then depends on the private data: the user must say
    so (``from_private: true``), and the statement says it."""
    with pytest.raises(ConfigError, match="from_private"):
        RandomWordsDetector(quantile=0.2)
    with pytest.raises(ConfigError, match="not both"):
        RandomWordsDetector(reference=_corpus(), from_private=True)
    d = RandomWordsDetector(quantile=0.2, num_secrets=1, stop_words=["filler"], from_private=True)
    d.detect(_corpus())
    assert d.words == (_name(20),)
    assert any("private corpus" in s for s in d.structure())
    ref = RandomWordsDetector(quantile=0.2, num_secrets=1, stop_words=["filler"], reference=_corpus())
    assert not any("private corpus's own" in s for s in ref.structure())
