"""Proof that private text never reaches a generator.

:class:`PrivateGuard` is built once per run from the private corpus (and the public one). It keeps only salted
hashes, never text:

* the hash of every private record (normalised whitespace and case), and
* the hashes of every word ``n``-gram (default n = 8) that occurs in some private record and in *no* public
  record, split into those holding a *private-only word* (a word that occurs in no public text: a name, a
  number, a rare term — content that can only have come from private data) and the rest.

Two uses:

* :meth:`assert_public` — the offline n-gram generator calls it on its training corpus and refuses to train on
  any record equal to a private one;
* :meth:`scan` — the run audits ``prompts.jsonl`` at the end. A prompt is *flagged* when it holds a whole
  private record, or a private-only 8-gram with a private-only word. ``privacy.json`` (``prompt_audit``) gives
  both counts; zero is what the run proves. Private-only 8-grams made only of public words are counted too
  (``prompts_with_recombined_ngram``) but not flagged: a generator trained on similar public text recombines
  public phrases, and some recombinations happen to occur in a private record (common in templated text).
"""

from __future__ import annotations

import hashlib
import re
import secrets as _secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import PrivacyError

_WORD = re.compile(r"\w+", re.UNICODE)


def _norm_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass
class AuditResult:
    prompts: int = 0
    record_hits: int = 0
    ngram_hits: int = 0
    recombined_hits: int = 0
    flagged: list[int] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.record_hits == 0 and self.ngram_hits == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompts_checked": self.prompts,
            "prompts_with_private_record": self.record_hits,
            "prompts_with_private_only_ngram": self.ngram_hits,
            "prompts_with_recombined_ngram": self.recombined_hits,
            "flagged_prompt_lines": self.flagged[:50],
            "clean": self.clean,
        }


class PrivateGuard:
    def __init__(self, private_texts: Iterable[str], public_texts: Iterable[str] = (), *, n: int = 8):
        self.n = n
        self._salt = _secrets.token_bytes(16)
        self._records: set[bytes] = set()
        self._short_lengths: set[int] = set()
        pub: set[bytes] = set()
        pub_words: set[bytes] = set()
        for t in public_texts:
            words = _norm_words(t)
            pub.update(self._grams(words))
            pub_words.update(self._h(w) for w in words)
        self._grams_rare: set[bytes] = set()  # private-only n-grams holding a private-only word
        self._grams_only: set[bytes] = set()  # private-only n-grams of public words
        for t in private_texts:
            words = _norm_words(t)
            if not words:
                continue
            self._records.add(self._h(" ".join(words)))
            if len(words) < n:
                self._short_lengths.add(len(words))
            rare = [self._h(w) not in pub_words for w in words]
            for i in range(len(words) - n + 1):
                g = self._h(" ".join(words[i:i + n]))
                if g in pub:
                    continue
                (self._grams_rare if any(rare[i:i + n]) else self._grams_only).add(g)
        self._grams_only -= self._grams_rare
        self.private_records = len(self._records)

    def _h(self, s: str) -> bytes:
        return hashlib.blake2b(s.encode("utf-8"), key=self._salt, digest_size=12).digest()

    def _grams(self, words: Sequence[str]) -> set[bytes]:
        n = self.n
        return {self._h(" ".join(words[i:i + n])) for i in range(len(words) - n + 1)}

    def is_private_record(self, text: str) -> bool:
        return self._h(" ".join(_norm_words(text))) in self._records

    def assert_public(self, texts: Iterable[str], *, what: str) -> None:
        """Raise :class:`PrivacyError` if any text equals a private record."""
        for i, t in enumerate(texts):
            if self.is_private_record(t):
                raise PrivacyError(
                    f"{what}: record {i} equals a private record; a generator must never be trained on or "
                    "prompted with private text"
                )

    def hits(self, text: str) -> tuple[bool, bool, bool]:
        """(holds a whole private record, holds a private-only n-gram with a private-only word,
        holds a private-only n-gram of public words).

        Whole-record containment is checked for every window whose length equals a private record shorter than
        ``n`` words (longer records are caught by their private-only n-grams) and for the whole text.
        """
        words = _norm_words(text)
        record = bool(words) and self._h(" ".join(words)) in self._records
        if not record:
            for L in self._short_lengths:
                if L < len(words) and any(
                    self._h(" ".join(words[i:i + L])) in self._records for i in range(len(words) - L + 1)
                ):
                    record = True
                    break
        grams = self._grams(words) if len(words) >= self.n else set()
        rare = any(g in self._grams_rare for g in grams)
        recombined = any(g in self._grams_only for g in grams)
        return record, rare, recombined

    def scan(self, prompts: Iterable[Any]) -> AuditResult:
        """Audit prompts (strings, chat message lists, or prompts.jsonl records)."""
        res = AuditResult()
        for i, p in enumerate(prompts):
            res.prompts += 1
            text = _prompt_text(p)
            rec, gram, recombined = self.hits(text)
            res.record_hits += rec
            res.ngram_hits += gram
            res.recombined_hits += recombined
            if rec or gram:
                res.flagged.append(i + 1)
        return res


def _prompt_text(p: Any) -> str:
    if isinstance(p, str):
        return p
    if isinstance(p, dict):
        if "prompt" in p:
            return _prompt_text(p["prompt"])
        if "content" in p:
            return _prompt_text(p["content"])
        return " ".join(_prompt_text(v) for v in p.values() if isinstance(v, (str, list, dict)))
    if isinstance(p, (list, tuple)):
        return "\n".join(_prompt_text(x) for x in p)
    return str(p)
