"""``random_words``: the SecPE paper's "random words" secrets (§4.2).

The paper: *"we sort all vocabulary items in each dataset by frequency and designate words near the 20% quantile
as secrets; a sample is treated as secret-containing if it includes any designated word."* Precisely, here:

1. **Tokens.** Each text is split into words ``[^\\W\\d_]+(?:['’][^\\W\\d_]+)?`` (runs of letters, one inner
   apostrophe allowed: ``don't``); lower-cased when ``lowercase`` (default). Digits and punctuation are not words.
2. **Vocabulary.** The distinct words of the *vocabulary corpus* — the ``reference`` texts, or, with
   ``from_private=True``, the texts passed to :meth:`RandomWordsDetector.detect` — keeping words with at least
   ``min_length`` characters
   (default 3), at least ``min_count`` occurrences (default 1) and not in ``stop_words`` (default: scikit-learn's
   English list; ``None`` keeps them).
3. **Frequency** of a word is its number of occurrences (``frequency="tokens"``, default) or the number of
   records containing it (``frequency="records"``).
4. **Ranking.** Words are sorted by decreasing frequency, ties broken alphabetically: rank 0 is the most
   frequent word, rank ``V − 1`` the rarest (``V`` = vocabulary size).
5. **Quantile.** The centre rank is ``c = round(quantile × (V − 1))``; ``quantile=0.2`` (default) is the word 20%
   of the way down the list from the most frequent one (i.e. more frequent than 80% of the vocabulary). Whoever
   reads "the 20% quantile" from the rare end can pass ``quantile=0.8``.
6. **Window.** The designated secrets are the ``n`` consecutive ranks centred on ``c``: ranks
   ``[c − (n−1)//2, c − (n−1)//2 + n)``, shifted to stay inside ``[0, V)``; ``n = num_secrets`` (default 50) or
   ``n = max(1, round(window × V))`` when ``window`` (a fraction of the vocabulary) is given instead.

**Which corpus chooses the secrets** must be said: ``reference`` (public texts: a list, a ``Corpus`` or a corpus
file) or ``from_private=True`` (the paper's set-up: the private corpus's own frequencies). With the latter, which
words are secrets is a function of the private data, which the (p, r) guarantee does not protect: the guarantee
then holds for an adversary whose prior is conditional on that choice, and :meth:`RandomWordsDetector.structure`
(the run's statement) says so. Neither given is refused (:class:`~privtext.errors.ConfigError`); both too.

A record holds secret ``w`` when one of its tokens (normalised as in 1) equals ``w``. The secret's canonical
value is the normalised word; its type is ``RANDOM_WORD``. :attr:`RandomWordsDetector.words` and
:meth:`RandomWordsDetector.ranking` expose the choice after fitting.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConfigError
from .holders import HoldersFromValues
from .matrix import MatrixBuilder, SecretMatrix, as_texts

WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
TYPE = "RANDOM_WORD"


def _english_stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


class RandomWordsDetector(HoldersFromValues):
    """Words near a frequency quantile of the vocabulary are the secrets (see the module docstring)."""

    name = "random_words"

    def __init__(
        self,
        *,
        quantile: float = 0.2,
        num_secrets: int | None = None,
        window: float | None = None,
        min_length: int = 3,
        min_count: int = 1,
        lowercase: bool = True,
        stop_words: str | Sequence[str] | None = "english",
        frequency: str = "tokens",
        reference: Sequence[str] | str | os.PathLike[str] | Any | None = None,
        reference_text_column: str = "text",
        from_private: bool = False,
    ):
        if reference is None and not from_private:
            raise ConfigError(
                "random_words needs 'reference' (public texts whose word frequencies choose the secrets: a list of "
                "texts or a corpus file) or 'from_private: true' (the paper's set-up: the private corpus's own "
                "frequencies choose them, so which words are secrets depends on the private data; the privacy "
                "statement then says so)"
            )
        if reference is not None and from_private:
            raise ConfigError("random_words takes 'reference' or 'from_private: true', not both")
        if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile <= 1:
            raise ConfigError(f"random_words 'quantile' must be a number in [0, 1], got {quantile!r}")
        if num_secrets is not None and window is not None:
            raise ConfigError(
                f"random_words takes 'num_secrets' or 'window', not both (got num_secrets={num_secrets!r}, "
                f"window={window!r})"
            )
        if num_secrets is not None and (
            isinstance(num_secrets, bool) or not isinstance(num_secrets, int) or num_secrets < 1
        ):
            raise ConfigError(f"random_words 'num_secrets' must be a positive integer, got {num_secrets!r}")
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, (int, float)) or not 0 < window <= 1
        ):
            raise ConfigError(f"random_words 'window' must be a fraction of the vocabulary in (0, 1], got {window!r}")
        for opt, val in (("min_length", min_length), ("min_count", min_count)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ConfigError(f"random_words {opt!r} must be a positive integer, got {val!r}")
        if frequency not in ("tokens", "records"):
            raise ConfigError(f"random_words 'frequency' must be 'tokens' or 'records', got {frequency!r}")
        if stop_words is None:
            stops: frozenset[str] = frozenset()
        elif isinstance(stop_words, str):
            if stop_words != "english":
                raise ConfigError(
                    f"random_words 'stop_words' must be 'english', a list of words or null, got {stop_words!r}"
                )
            stops = _english_stop_words()
        else:
            stops = frozenset(str(w) for w in stop_words)
        self.quantile = float(quantile)
        self.num_secrets = num_secrets if (num_secrets is not None or window is not None) else 50
        self.window = None if window is None else float(window)
        self.min_length = min_length
        self.min_count = min_count
        self.lowercase = bool(lowercase)
        self.stop_words = frozenset(w.lower() for w in stops) if self.lowercase else stops
        self.frequency = frequency
        self._reference = reference
        self._reference_text_column = reference_text_column
        self.from_private = bool(from_private)
        self._ranking: list[tuple[str, int]] | None = None
        self._words: tuple[str, ...] | None = None
        if reference is not None:
            self.fit(self._load_reference(reference))

    # --------------------------------------------------------------------------------------------- fitting

    def _load_reference(self, reference: Any) -> list[str]:
        if isinstance(reference, (str, os.PathLike)):
            from ..data import load_corpus

            return list(load_corpus(reference, text_column=self._reference_text_column).texts)
        return as_texts(reference)

    def tokens(self, text: str) -> Iterable[tuple[int, int, str]]:
        """``(start, end, normalised word)`` for each word of ``text``."""
        for m in WORD_RE.finditer(text):
            w = m.group(0)
            yield m.start(), m.end(), (w.lower() if self.lowercase else w)

    def fit(self, texts: Sequence[str]) -> RandomWordsDetector:
        """Rank the vocabulary of ``texts`` and designate the secrets (done by :meth:`detect` when no
        ``reference`` was given)."""
        texts = as_texts(texts)
        counts: Counter[str] = Counter()
        for t in texts:
            words = [w for _, _, w in self.tokens(t)]
            counts.update(set(words) if self.frequency == "records" else words)
        vocab = [
            (w, c) for w, c in counts.items()
            if len(w) >= self.min_length and c >= self.min_count and w not in self.stop_words
        ]
        vocab.sort(key=lambda wc: (-wc[1], wc[0]))
        self._ranking = vocab
        v = len(vocab)
        if v == 0:
            self._words = ()
            return self
        n = self.num_secrets if self.window is None else max(1, round(self.window * v))
        assert n is not None
        n = min(n, v)
        centre = math.floor(self.quantile * (v - 1) + 0.5)
        start = min(max(centre - (n - 1) // 2, 0), v - n)
        self._words = tuple(w for w, _ in vocab[start:start + n])
        return self

    @property
    def words(self) -> tuple[str, ...]:
        """The designated secret words (after fitting), most frequent first."""
        if self._words is None:
            raise ConfigError("random_words has not chosen its words yet: call fit() or detect() first")
        return self._words

    def ranking(self) -> list[tuple[str, int]]:
        """The ranked vocabulary ``[(word, frequency), ...]`` (after fitting)."""
        if self._ranking is None:
            raise ConfigError("random_words has no vocabulary yet: call fit() or detect() first")
        return list(self._ranking)

    def structure(self) -> list[str]:
        """What makes a word a secret, in words, for the privacy statement (configuration only, no word)."""
        size = (f"the {self.num_secrets} words" if self.window is None else
                f"a window of {self.window:g} of the vocabulary")
        rank = "occurrences" if self.frequency == "tokens" else "records containing them"
        if self.from_private:
            source = ("the private corpus's own word frequencies (random_words.from_private: true): which words "
                      "are secrets is a function of the private data, which the guarantee does not protect")
        elif isinstance(self._reference, (str, os.PathLike)):
            source = f"the word frequencies of the public reference corpus {os.fspath(self._reference)}"
        else:
            source = "the word frequencies of a public reference list of texts"
        return [f"RANDOM_WORD: {size} ranked around the {self.quantile:g} frequency quantile ({rank}; at least "
                f"{self.min_length} letters; stop words excluded: {bool(self.stop_words)}) of {source}; a record "
                "holds a word when one of its tokens equals it" + (" case-folded." if self.lowercase else ".")]

    # --------------------------------------------------------------------------------------------- detection

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        """What this detector itself finds (:meth:`detect` adds every other record holding a found value)."""
        texts = as_texts(texts)
        if self._reference is None:
            self.fit(texts)
        chosen = set(self.words)
        b = MatrixBuilder()
        for w in self.words:  # columns in rank order, whether or not a record holds the word
            b.column(TYPE, w)
        for i, t in enumerate(texts):
            for start, end, w in self.tokens(t):
                if w in chosen:
                    b.add(i, TYPE, w, start, end)
        return b.build(len(texts))
