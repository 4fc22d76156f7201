"""Public vocabularies for DP-KPS: a glossary file or words and frequent phrases of a public corpus.

DP-KPS (dpkps.txt §2, "a large public vocabulary V") draws its keyphrases from a *public* list of terms: a
domain glossary (UMLS for medical records, a dictionary for encyclopaedia text) or, when none is at hand, the
words and frequent n-gram phrases of the public corpus. Everything here reads public text only; the private
corpus is touched by :class:`TermMatcher` alone, inside the DP mechanisms that use it
(:mod:`privtext.mechanisms.vocabulary`, :mod:`privtext.mechanisms.kde`).

Normal form
-----------
A term is a tuple of tokens: lower-cased words ``\\w+(?:'\\w+)*`` (the curly apostrophe becomes ``'``), the same
word pattern as the n-gram generator's tokenizer, so a term the generator writes is found again by the matcher.
Its display form is the tokens joined by one space (``"Ice-Cream"`` → ``"ice cream"``).

Finding a document's terms (App A.1, "the first r terms that appear in the document")
--------------------------------------------------------------------------------------
:meth:`TermMatcher.find` scans the document's tokens left to right and, at each position, takes the *longest*
vocabulary term starting there (``"customer service"`` wins over ``"customer"``), then continues after it.
A term is reported once, at its first occurrence; the result lists distinct term ids in order of first
occurrence, cut at ``max_terms``. Distinctness matters for the privacy proof: a document contributes at most
one count to each of at most r terms (L1 sensitivity r of the vocabulary histogram).

Vocabulary from a corpus
------------------------
:func:`vocabulary_from_corpus` counts *document frequencies* (number of public texts containing the term) of

* words: not a stop word, at least ``min_chars`` characters, not a number, no apostrophe (contractions);
* phrases of 2..``ngram_max`` words: first and last word not stop words, no number, no apostrophe;

keeps terms with df ≥ ``min_count`` (phrases: ≥ ``phrase_min_count``), and orders them by df (descending),
then alphabetically — a deterministic order that does not depend on hash seeds or insertion order — cut at
``max_terms``. Stop words are scikit-learn's English list by default.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import ConfigError, DataError

if TYPE_CHECKING:
    import numpy as np

_WORD = re.compile(r"\w+(?:'\w+)*", re.UNICODE)


def term_tokens(text: str) -> list[str]:
    """Lower-cased word tokens (the matching normal form)."""
    if not isinstance(text, str):
        raise DataError(f"expected a string, got {type(text).__name__}")
    return _WORD.findall(text.lower().replace("’", "'"))


def normalize_term(term: str) -> str:
    """The display form of a term: its tokens joined by one space (``""`` when it has no word)."""
    return " ".join(term_tokens(term))


def english_stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@dataclass(frozen=True)
class PublicVocabulary:
    """An ordered list of distinct public terms (display forms), with their public counts when known.

    ``counts`` are document frequencies in the public corpus (``None`` for a glossary); ``source`` says where
    the terms came from. The order is part of the vocabulary: it breaks ties deterministically downstream.
    """

    terms: tuple[str, ...]
    source: str = ""
    counts: tuple[int, ...] | None = None
    documents: int | None = None  # the number of public texts the counts were taken over
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        terms = tuple(self.terms)
        object.__setattr__(self, "terms", terms)
        if not terms:
            raise DataError(f"a public vocabulary needs at least one term ({self.source or 'no source'})")
        index: dict[str, int] = {}
        for i, t in enumerate(terms):
            if not isinstance(t, str) or normalize_term(t) != t or not t:
                raise DataError(f"vocabulary term {i} is not in normal form (lower-case words, single spaces): {t!r}")
            if t in index:
                raise DataError(f"vocabulary term {t!r} appears twice (positions {index[t]} and {i})")
            index[t] = i
        object.__setattr__(self, "_index", index)
        if self.counts is not None:
            counts = tuple(int(c) for c in self.counts)
            if len(counts) != len(terms):
                raise DataError(f"{len(counts)} counts for {len(terms)} vocabulary terms")
            object.__setattr__(self, "counts", counts)
        if self.documents is not None:
            if isinstance(self.documents, bool) or not isinstance(self.documents, int) or self.documents < 1:
                raise DataError(f"documents must be a positive integer, got {self.documents!r}")
            if self.counts is not None and max(self.counts) > self.documents:
                raise DataError(f"a document frequency {max(self.counts)} exceeds the {self.documents} documents")

    def idf(self) -> np.ndarray:
        """ln((N + 1)/df) per term (> 0), from the public document frequencies ``counts`` over ``documents`` = N
        texts. Public: computed from the public corpus only. A glossary has no frequencies: ConfigError."""
        import numpy as np

        if self.counts is None or self.documents is None:
            raise ConfigError(f"inverse document frequencies need public document counts; the vocabulary from "
                              f"{self.source or 'an unknown source'} has none (a glossary): use a vocabulary built "
                              "from the public corpus")
        df = np.maximum(np.asarray(self.counts, dtype=np.float64), 1.0)
        return np.log((self.documents + 1.0) / df)

    def __len__(self) -> int:
        return len(self.terms)

    def __iter__(self) -> Iterator[str]:
        return iter(self.terms)

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and term in self._index

    def index(self, term: str) -> int:
        try:
            return self._index[term]
        except KeyError:
            raise DataError(f"{term!r} is not in the vocabulary ({len(self)} terms from {self.source})") from None

    @property
    def max_words(self) -> int:
        """The number of words of the longest term."""
        return max(t.count(" ") + 1 for t in self.terms)

    def subset(self, indices: Iterable[int], *, source: str | None = None) -> PublicVocabulary:
        """The terms at ``indices``, in that order."""
        idx = [int(i) for i in indices]
        for i in idx:
            if not 0 <= i < len(self):
                raise DataError(f"vocabulary index {i} out of range for {len(self)} terms")
        counts = None if self.counts is None else tuple(self.counts[i] for i in idx)
        return PublicVocabulary(tuple(self.terms[i] for i in idx), source=source or self.source, counts=counts,
                                documents=self.documents)

    def matcher(self) -> TermMatcher:
        return TermMatcher(self.terms)


def load_glossary(path: str | Path, *, max_terms: int | None = None) -> PublicVocabulary:
    """A glossary file: one term per line (UTF-8); blank lines and lines starting with ``#`` are skipped,
    terms are normalised (:func:`normalize_term`) and de-duplicated keeping the first occurrence."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"glossary file not found: {p}") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{p}: not valid UTF-8 ({e})") from None
    if max_terms is not None and (isinstance(max_terms, bool) or max_terms < 1):
        raise ConfigError(f"max_terms must be a positive integer, got {max_terms!r}")
    seen: dict[str, None] = {}
    for line in raw.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        t = normalize_term(s)
        if t:
            seen.setdefault(t, None)
        if max_terms is not None and len(seen) >= max_terms:
            break
    if not seen:
        raise DataError(f"{p}: the glossary has no terms (one term per line; '#' starts a comment)")
    return PublicVocabulary(tuple(seen), source=f"glossary:{p}")


def _content(tok: str, stop: Collection[str], min_chars: int) -> bool:
    return tok not in stop and len(tok) >= min_chars and not tok.isdigit() and "'" not in tok


def vocabulary_from_corpus(
    texts: Sequence[str],
    *,
    min_count: int = 5,
    max_terms: int | None = 5000,
    ngram_max: int = 3,
    phrase_min_count: int | None = None,
    stop_words: Literal["english"] | Collection[str] | None = "english",
    min_chars: int = 3,
) -> PublicVocabulary:
    """Words and frequent phrases of a *public* corpus, ordered by document frequency (see the module docs).

    ``phrase_min_count`` defaults to ``min_count``; ``ngram_max=1`` gives words only; ``max_terms=None`` keeps
    every term above the counts."""
    for name, v, lo in (("min_count", min_count, 1), ("ngram_max", ngram_max, 1), ("min_chars", min_chars, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{name} must be an integer ≥ {lo}, got {v!r}")
    if max_terms is not None and (isinstance(max_terms, bool) or not isinstance(max_terms, int) or max_terms < 1):
        raise ConfigError(f"max_terms must be a positive integer or None, got {max_terms!r}")
    pmin = min_count if phrase_min_count is None else phrase_min_count
    if isinstance(pmin, bool) or not isinstance(pmin, int) or pmin < 1:
        raise ConfigError(f"phrase_min_count must be a positive integer, got {phrase_min_count!r}")
    if isinstance(texts, str):
        raise DataError("texts must be a sequence of strings, got a single string")
    stop: Collection[str] = english_stop_words() if stop_words == "english" else frozenset(stop_words or ())
    df: Counter[str] = Counter()
    n_texts = 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise DataError(f"texts[{i}] is {type(text).__name__}, not str")
        n_texts += 1
        toks = term_tokens(text)
        ok = [_content(t, stop, min_chars) for t in toks]
        # phrases may contain inner stop words ("bang for the buck") but not numbers or contractions
        inner = [not t.isdigit() and "'" not in t for t in toks]
        found: set[str] = {t for t, good in zip(toks, ok, strict=True) if good}
        for n in range(2, ngram_max + 1):
            for s in range(len(toks) - n + 1):
                if ok[s] and ok[s + n - 1] and all(inner[s + 1:s + n - 1]):
                    found.add(" ".join(toks[s:s + n]))
        df.update(found)
    if n_texts == 0:
        raise DataError("cannot build a vocabulary from an empty public corpus")
    keep = [(t, c) for t, c in df.items() if c >= (min_count if " " not in t else pmin)]
    keep.sort(key=lambda tc: (-tc[1], tc[0]))
    if max_terms is not None:
        keep = keep[:max_terms]
    if not keep:
        raise DataError(
            f"no term occurs in at least {min_count} of the {n_texts} public texts; lower min_count or add text"
        )
    return PublicVocabulary(tuple(t for t, _ in keep), source=f"corpus:{n_texts} texts", counts=tuple(c for _, c in keep),
                            documents=n_texts)


class TermMatcher:
    """Greedy longest-match search of vocabulary terms in text (see the module docs)."""

    def __init__(self, terms: Sequence[str]):
        self._ids: dict[tuple[str, ...], int] = {}
        for i, t in enumerate(terms):
            key = tuple(term_tokens(t))
            if not key:
                raise DataError(f"vocabulary term {i} ({t!r}) has no word")
            self._ids.setdefault(key, i)
        self._prefixes: set[tuple[str, ...]] = set()  # proper prefixes of terms: stop scanning early
        for key in self._ids:
            for n in range(1, len(key)):
                self._prefixes.add(key[:n])
        self.max_words = max(len(k) for k in self._ids)
        self.n_terms = len(terms)

    def spans(self, tokens: Sequence[str]) -> Iterator[tuple[int, int, int]]:
        """``(term id, start, end)`` of every greedy longest match in ``tokens`` (term tokens, see
        :func:`term_tokens`), left to right; ``tokens[start:end]`` is the term. Repeated terms are reported at
        each occurrence."""
        pos, n_tok = 0, len(tokens)
        while pos < n_tok:
            best_len, best_id = 0, -1
            for n in range(1, min(self.max_words, n_tok - pos) + 1):
                key = tuple(tokens[pos:pos + n])
                tid = self._ids.get(key)
                if tid is not None:
                    best_len, best_id = n, tid
                if key not in self._prefixes:
                    break
            if best_id >= 0:
                yield best_id, pos, pos + best_len
                pos += best_len
            else:
                pos += 1

    def find(self, text: str, *, max_terms: int | None = None) -> list[int]:
        """Distinct term ids in order of first occurrence, at most ``max_terms`` of them."""
        if max_terms is not None and max_terms <= 0:
            return []
        out: list[int] = []
        seen: set[int] = set()
        for tid, _, _ in self.spans(term_tokens(text)):
            if tid not in seen:
                seen.add(tid)
                out.append(tid)
                if max_terms is not None and len(out) >= max_terms:
                    break
        return out

    def find_all(self, texts: Iterable[str], *, max_terms: int | None = None) -> list[list[int]]:
        return [self.find(t, max_terms=max_terms) for t in texts]


def first_terms(text: str, vocabulary: PublicVocabulary, r: int) -> list[str]:
    """The first ``r`` distinct vocabulary terms of ``text`` in order of first occurrence (App A.1, step 1)."""
    return [vocabulary.terms[i] for i in vocabulary.matcher().find(text, max_terms=r)]


__all__ = ["PublicVocabulary", "TermMatcher", "english_stop_words", "first_terms", "load_glossary",
           "normalize_term", "term_tokens", "vocabulary_from_corpus"]
