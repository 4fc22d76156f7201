"""Keyphrases of a text, from a vocabulary of the *public* corpus: the lm generator's keyphrase control codes.

The extractor is deliberately simple and public:

1. **Vocabulary** — :func:`privtext.data.vocabulary.vocabulary_from_corpus` on the public texts: words (not a stop
   word, ≥ 3 characters, no digits or contractions) and 2-word phrases whose first and last words are such
   words, kept when they occur in at least ``min_count`` public texts; each term carries its public document
   frequency df. The same term normal form as DP-KPS (lower-case word tokens), so a DP-KPS keyphrase sequence
   and a training condition look alike.
2. **Occurrences** — a text's whitespace words are turned into term tokens and scanned with the vocabulary's
   greedy longest match (:meth:`~privtext.data.vocabulary.TermMatcher.spans`); each term is reported once, at its
   first occurrence, with the whitespace words it covers.
3. **Keyphrases** — :meth:`KeyphraseExtractor.extract` keeps the ``k`` occurring terms of highest inverse
   document frequency ``ln((N + 1) / df)`` (ties: the earlier occurrence) and returns them in text order.

Training draws *random ordered subsets* of a text's occurrences as conditions (so any ordered list of public
terms is a condition the model has seen, including DP-KPS's); ``extract`` is what the generator uses where it
must choose keyphrases itself (paraphrase anchors, the good examples of a contrastive prompt). Nothing here
reads private text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...data.vocabulary import PublicVocabulary, TermMatcher, term_tokens, vocabulary_from_corpus
from ...errors import DataError


@dataclass(frozen=True)
class Occurrence:
    """A vocabulary term's first occurrence in a text: ``words[start:end]`` (whitespace words) hold it."""

    term: int
    start: int
    end: int


class KeyphraseExtractor:
    """Finds public vocabulary terms in texts (see the module docstring)."""

    def __init__(self, vocabulary: PublicVocabulary):
        self.vocabulary = vocabulary
        self.matcher = TermMatcher(vocabulary.terms)
        self.idf = vocabulary.idf() if vocabulary.counts is not None and vocabulary.documents else np.ones(
            len(vocabulary))

    @classmethod
    def from_public(cls, texts: Sequence[str], *, min_count: int = 3, ngram_max: int = 2,
                    max_terms: int | None = 20000) -> KeyphraseExtractor:
        try:
            vocab = vocabulary_from_corpus(texts, min_count=min_count, ngram_max=ngram_max, max_terms=max_terms)
        except DataError:  # a tiny or odd corpus: every word is a candidate
            vocab = vocabulary_from_corpus(texts, min_count=1, ngram_max=1, max_terms=max_terms,
                                           stop_words=None, min_chars=1)
        return cls(vocab)

    # ------------------------------------------------------------------------------------ (de)serialising
    def to_dict(self) -> dict[str, Any]:
        v = self.vocabulary
        return {"terms": list(v.terms), "counts": list(v.counts) if v.counts is not None else None,
                "documents": v.documents, "source": v.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyphraseExtractor:
        return cls(PublicVocabulary(tuple(d["terms"]), source=d.get("source", ""),
                                    counts=tuple(d["counts"]) if d.get("counts") is not None else None,
                                    documents=d.get("documents")))

    # ------------------------------------------------------------------------------------------- finding
    def occurrences(self, words: Sequence[str]) -> list[Occurrence]:
        """First occurrence of each vocabulary term among the whitespace ``words``, in text order."""
        toks: list[str] = []
        word_of: list[int] = []
        for i, w in enumerate(words):
            for t in term_tokens(w):
                toks.append(t)
                word_of.append(i)
        out: list[Occurrence] = []
        seen: set[int] = set()
        last_end = 0
        for tid, s, e in self.matcher.spans(toks):
            ws, we = word_of[s], word_of[e - 1] + 1
            if tid in seen or ws < last_end:  # one occurrence per term; spans never share a word
                continue
            seen.add(tid)
            out.append(Occurrence(tid, ws, we))
            last_end = we
        return out

    def term(self, occ: Occurrence) -> str:
        return self.vocabulary.terms[occ.term]

    def extract(self, text: str, k: int, *, exclude: frozenset[str] = frozenset()) -> list[str]:
        """The ``k`` terms of ``text`` with the highest public idf (not in ``exclude``), in text order."""
        if k <= 0:
            return []
        occ = [o for o in self.occurrences(text.split()) if self.vocabulary.terms[o.term] not in exclude]
        ranked = sorted(range(len(occ)), key=lambda i: (-float(self.idf[occ[i].term]), i))[:k]
        return [self.vocabulary.terms[occ[i].term] for i in sorted(ranked)]


__all__ = ["KeyphraseExtractor", "Occurrence"]
