"""Proof that private text never reaches a generator, and that no detected secret value comes out.

:class:`PrivateGuard` is built once per run from the private corpus (and the public one). It keeps only salted
hashes, never text:

* the hash of every private record (normalised: its words, runs of letters and digits, lower-cased), with,
  for the records of at least ``n`` words, the hash of their first and last ``n``-gram (to find a whole record
  inside a longer text in one pass);
* the hashes of every word ``n``-gram (default n = 8) that occurs in some private record and in *no* public
  text, with which of them hold a *private-only word* (a word that occurs in no public text);
* optionally (``secret_values=``) the detected secret values of the run (SecPE, Aug-PE's secret groups), as a
  :class:`~privtext.secrets.values.SecretValueIndex` (hashes too): canonical matching, so ``467-3395`` is the
  value ``467 3395``; with which of them some public text holds (found by the same index).

Uses:

* :meth:`assert_public` — the offline n-gram generator calls it on its training corpus and refuses to train on
  any record equal to a private one;
* :meth:`scan` — the run audits ``prompts.jsonl`` at the end. A prompt is *flagged* when it holds a private
  record's whole text (any length), or any ``n``-gram of a private record that no public text holds, or a
  detected secret value that no public text holds. ``privacy.json`` (``prompt_audit``) says whether none was; the
  counts go to ``private/diagnostics.json``. Zero flagged is what the run proves. (Before issue 21 only n-grams with a
  private-only word were flagged, and whole records only under n words: a 30-word private record of ordinary
  words, verbatim in every prompt, passed.)
* :meth:`scan_texts` — the synthetic texts: flagged when one holds a detected secret value no public text holds.

**Secret values that public text holds.** A detected value is private data only where the public side lacks it.
SecPE's "random words" secrets are ordinary words (the paper's set-up: the words near the 20 % frequency
quantile, ``pedicure``, ``lobster``), and a generator trained on public text that holds them writes them: the
5000-review Yelp benchmark flagged 67 of 8000 prompts and 17 of 500 synthetic reviews for 14 such words, every
one of them in the public reviews, and called the run NOT PRIVATE. A word that public text holds is public
vocabulary; its appearance in a prompt or an output is explained by public text whatever the private data is
(what the released votes say of who holds it is the (p, r) guarantee's business, not the audit's). So a prompt or
text whose detected values all occur in some public text is counted (``*_with_public_secret_value``) and not
flagged; a value no public text holds (a phone number, an address, a private-only word) is flagged whatever wrote
it.

**Text a generator wrote.** A generator trained on public text recombines it: the offline n-gram model, asked for
a clinic note, can write "findings weight tracking below the curve impression is acute" where only a private note
holds that 8-gram. Such a gram is public by provenance (a function of public text and released values), and a
variation prompt built from that output would otherwise be flagged although nothing private reached it (the
templated demo corpus did so in some runs: its noise, and so its votes, differ from run to run). The run tells the guard of every generator output
(:meth:`note_generated`, through :attr:`privtext.atomicio.PromptLog.observer`), with the number of prompt lines
logged before it came back; the guard keeps only the private-only n-grams an output holds, with the earliest
line count. In :meth:`scan`, an n-gram of prompt line ``i`` is *explained* when a generator wrote it before line
``i`` was logged; a prompt whose private n-grams are all explained is not flagged (it is counted in
``prompts_with_generated_ngram_only``). Order is what keeps this sound: a private text put into a prompt by a bug
is flagged even if the generator echoes it back afterwards, since the echo comes after the prompt. Whole private
records and detected secret values no public text holds are flagged whatever wrote them. Outputs of an earlier
process of a resumed run are not known to the guard: their grams are flagged (conservative).

Cost: one keyed BLAKE2b hash per word n-gram of a prompt, plus, at the positions whose n-gram opens a private
record of ≥ n words, a dictionary look-up per distinct length of such records (and a hash of the window only
when its last n-gram also closes one); windows for the records shorter than n; and the secret scan (one
``hash`` per token). ``benchmarks/guard.py`` prints the rates.
"""

from __future__ import annotations

import hashlib
import re
import secrets as _secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import PrivacyError

_WORD = re.compile(r"\w+", re.UNICODE)


def _norm_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class ValueFinder(Protocol):
    """What the guard needs of the detected secret values: :class:`privtext.secrets.values.SecretValueIndex`."""

    def find(self, text: str) -> Sequence[Any]: ...


@dataclass
class AuditResult:
    """Counts of flagged texts (prompts or synthetic texts) and their 1-based line numbers; never their text."""

    prompts: int = 0
    record_hits: int = 0
    ngram_hits: int = 0
    rare_hits: int = 0
    recombined_hits: int = 0
    explained_hits: int = 0
    secret_hits: int = 0
    public_secret_hits: int = 0
    secrets_found: set[int] = field(default_factory=set)
    flagged: list[int] = field(default_factory=list)
    what: str = "prompts"

    @property
    def clean(self) -> bool:
        return self.record_hits == 0 and self.ngram_hits == 0 and self.secret_hits == 0

    def to_dict(self) -> dict[str, Any]:
        if self.what == "prompts":
            out: dict[str, Any] = {
                "prompts_checked": self.prompts,
                "prompts_with_private_record": self.record_hits,
                "prompts_with_private_only_ngram": self.ngram_hits,
                "prompts_with_private_only_word_ngram": self.rare_hits,
                "prompts_with_recombined_ngram": self.recombined_hits,
                "prompts_with_generated_ngram_only": self.explained_hits,
                "prompts_with_secret_value": self.secret_hits,
                "prompts_with_public_secret_value": self.public_secret_hits,
                "flagged_prompt_lines": self.flagged[:50],
            }
        else:
            out = {f"{self.what}_checked": self.prompts, f"{self.what}_with_secret_value": self.secret_hits,
                   f"{self.what}_with_public_secret_value": self.public_secret_hits,
                   f"flagged_{self.what}_lines": self.flagged[:50]}
        out["distinct_secrets_found"] = len(self.secrets_found)
        out["clean"] = self.clean
        return out


class PrivateGuard:
    """Salted hashes of the private records and their private-only n-grams (module docstring).

    ``secret_values``: the run's detected secrets — a :class:`~privtext.secrets.SecretMatrix` (its
    :meth:`~privtext.secrets.SecretMatrix.value_index` is taken) or any object with ``find(text)`` returning
    hits with a ``secret`` column (a :class:`~privtext.secrets.values.SecretValueIndex`)."""

    def __init__(self, private_texts: Iterable[str], public_texts: Iterable[str] = (), *, n: int = 8,
                 secret_values: Any = None):
        self.n = n
        self._salt = _secrets.token_bytes(16)
        self._records: set[bytes] = set()
        self._short_lengths: set[int] = set()
        self._heads: dict[bytes, set[int]] = {}  # first n-gram of a record of ≥ n words → its lengths
        self._tails: set[bytes] = set()          # last n-gram of a record of ≥ n words
        pub: set[bytes] = set()
        pub_words: set[bytes] = set()
        self._public_texts = tuple(public_texts)  # public: kept to find which secret values public text holds
        for t in self._public_texts:
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
                continue
            grams = [self._h(" ".join(words[i:i + n])) for i in range(len(words) - n + 1)]
            self._heads.setdefault(grams[0], set()).add(len(words))
            self._tails.add(grams[-1])
            rare = [self._h(w) not in pub_words for w in words]
            for i, g in enumerate(grams):
                if g in pub:
                    continue
                (self._grams_rare if any(rare[i:i + n]) else self._grams_only).add(g)
        self._grams_only -= self._grams_rare
        self.private_records = len(self._records)
        #: private-only n-grams a generator wrote → the number of prompt lines logged before it did (earliest)
        self._generated: dict[bytes, int] = {}
        self.secret_values: ValueFinder | None = None
        #: the secret columns whose value some public text holds (module docstring)
        self.public_secrets: frozenset[int] = frozenset()
        self.set_secret_values(secret_values)

    def set_secret_values(self, secret_values: Any) -> None:
        """Give the guard the run's detected secrets (a SecretMatrix or a value index; None: no secret scan) —
        for a method that detects them after the guard is built (Aug-PE's secret groups). The public texts are
        scanned with the same index: the values they hold are not flagged (module docstring)."""
        if secret_values is not None and hasattr(secret_values, "value_index"):
            secret_values = secret_values.value_index()
        if secret_values is not None and not callable(getattr(secret_values, "find", None)):
            raise TypeError(f"secret_values must be a SecretMatrix or have find(text), got "
                            f"{type(secret_values).__name__}")
        self.secret_values = secret_values
        self.public_secrets = frozenset() if secret_values is None else frozenset(
            int(h.secret) for t in self._public_texts for h in secret_values.find(t))

    def note_generated(self, texts: Iterable[str], lines: int) -> None:
        """A generator wrote ``texts`` after ``lines`` prompt lines had been logged (module docstring: text a
        generator wrote). Only the private-only n-grams among theirs are kept. Called from generator threads
        without a lock: two outputs racing on one n-gram can only keep the later count, which explains fewer
        prompts (conservative), never an earlier one than either output's."""
        for t in texts:
            for g in self._grams(_norm_words(t)):
                if (g in self._grams_only or g in self._grams_rare) and self._generated.get(g, lines + 1) > lines:
                    self._generated[g] = lines

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

    def hits(self, text: str, line: int | None = None) -> tuple[bool, bool, bool]:
        """(holds a private record's whole text, holds a private n-gram that no public text holds and no generator
        wrote before prompt line ``line``, holds such an n-gram with a private-only word in it): :meth:`_hits`."""
        return self._hits(text, line)[:3]

    def _hits(self, text: str, line: int | None) -> tuple[bool, bool, bool, bool]:
        """:meth:`hits`, and whether private-only n-grams were there but every one was explained. With ``line`` (the prompt's 1-based line in the log), n-grams a
        generator wrote before that line was logged do not count (module docstring).

        Whole records: every window whose length is that of a private record shorter than ``n`` words; for the
        longer records, every position where a record's first n-gram starts, at each length of the records that
        start so, when the window's last n-gram ends one of them (then the window's hash is compared)."""
        words = _norm_words(text)
        W, n = len(words), self.n
        record = bool(words) and self._h(" ".join(words)) in self._records
        if not record:
            for L in self._short_lengths:
                if L < W and any(self._h(" ".join(words[i:i + L])) in self._records for i in range(W - L + 1)):
                    record = True
                    break
        grams = [self._h(" ".join(words[i:i + n])) for i in range(W - n + 1)]
        if not record and self._heads:
            for i, g in enumerate(grams):
                for L in self._heads.get(g, ()):
                    if i + L <= W and grams[i + L - n] in self._tails and \
                            self._h(" ".join(words[i:i + L])) in self._records:
                        record = True
                        break
                if record:
                    break
        return (record, *self._private_grams(grams, line))

    def _private_grams(self, grams: Sequence[bytes], line: int | None) -> tuple[bool, bool, bool]:
        """(a private-only n-gram not explained by earlier generator output, one with a private-only word, some
        private-only n-gram was there but every one was explained)."""
        found = [g for g in grams if g in self._grams_only or g in self._grams_rare]
        if line is not None and found and self._generated:
            kept = [g for g in found if self._generated.get(g, line) >= line]
        else:
            kept = found
        return bool(kept), any(g in self._grams_rare for g in kept), bool(found) and not kept

    def secrets_in(self, text: str) -> set[int]:
        """The columns of the detected secret values ``text`` holds (empty without ``secret_values``)."""
        if self.secret_values is None:
            return set()
        return {int(h.secret) for h in self.secret_values.find(text)}

    def scan(self, prompts: Iterable[Any]) -> AuditResult:
        """Audit prompts (strings, chat message lists, or prompts.jsonl records): whole private records, private
        n-grams no public text holds, detected secret values."""
        res = AuditResult()
        for i, p in enumerate(prompts):
            res.prompts += 1
            text = _prompt_text(p)
            rec, gram, rare, explained = self._hits(text, i + 1)
            res.explained_hits += explained
            found = self._private_secrets(self.secrets_in(text), res)
            res.record_hits += rec
            res.ngram_hits += gram
            res.rare_hits += rare
            res.recombined_hits += gram and not rare
            if rec or gram or found:
                res.flagged.append(i + 1)
        return res

    def _private_secrets(self, found: set[int], res: AuditResult) -> set[int]:
        """Count ``found`` in ``res``: the values no public text holds flag the text; a text holding only public
        ones is counted apart."""
        private = found - self.public_secrets
        res.secret_hits += bool(private)
        res.public_secret_hits += bool(found) and not private
        res.secrets_found |= private
        return private

    def scan_texts(self, texts: Iterable[str], *, what: str = "synthetic_texts") -> AuditResult:
        """Audit released texts (the synthetic output) for detected secret values."""
        res = AuditResult(what=what)
        for i, t in enumerate(texts):
            res.prompts += 1
            if self._private_secrets(self.secrets_in(t), res):
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
