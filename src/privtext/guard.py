"""Proof that private text never reaches a generator, and that no detected secret value comes out.

:class:`PrivateGuard` is built once per run from the private corpus and the public text. It keeps only salted
hashes, never text:

* the hash of every private record (normalised: its words, runs of letters and digits, lower-cased), with the
  hash of its first word (records shorter than ``n`` words) or of its first and last ``n``-gram (the longer ones),
  to find a whole record inside a longer text in one pass;
* the hashes of every word ``n``-gram (default n = 8) that occurs in some private record and in *no* public
  text, with which of them hold a *private-only word* (a word that occurs in no public text);
* optionally (``secret_values=``) the detected secret values of the run (SecPE, Aug-PE's secret groups), as a
  :class:`~privtext.secrets.values.SecretValueIndex` (hashes too): canonical matching, so ``467-3395`` is the
  value ``467 3395``; with which of them some public text holds (found by the same index).

Uses:

* :meth:`assert_public` — the offline generators call it on their training corpus and refuse to train on a record
  equal to a private one that no public text holds (a text of the public corpus is public, so it never refuses
  the public corpus itself: no data-dependent abort);
* :meth:`scan` — the run audits ``prompts.jsonl`` at the end. A prompt is *flagged* when it holds text that only
  the private data can explain (below). ``privacy.json`` (``prompt_audit``) says whether none was; the counts and,
  for each flagged prompt, what matched go to ``private/diagnostics.json`` (``privtext diagnose RUN --prompts``
  prints them with the matched text). Zero flagged is what the run proves;
* :meth:`scan_texts` — the synthetic texts: flagged when one holds a detected secret value no public text holds.

**What explains text in a prompt.** Text in a prompt is a leak only if no public source explains it. The
sources, each sound on its own:

1. *Public text* — the public corpus, and whatever else the run adds with :meth:`add_public` (the prompt
   templates, the declared label values; never anything derived from private data). By the run's own assumption
   (stated in ``privacy.json``) a text the public corpus holds is public, so a private record that occurs in some
   public text, whole, as a run of its words, is public: it is counted (``prompts_with_public_record``), never
   flagged. Support tickets show why this matters: one private ticket is the two words "pending transaction?",
   three public messages hold them, and the 4-gram trained on the public messages writes them; before this rule
   every run on that corpus said NOT PRIVATE. The same holds for an ``n``-gram: only the ``n``-grams no public
   text holds are private-only.
2. *Released values* — the DP vocabulary and keyphrases of DP-KPS and Aug-PE's vocabulary prompts are terms of
   the *public* vocabulary (the public corpus or glossary), selected by a noisy release; their text is public
   (source 1), their selection is accounted in the ledger.
3. *Text a generator wrote* before the prompt was sent. A generator trained on public text recombines it: the
   offline n-gram model, asked for a clinic note, can write "findings weight tracking below the curve impression
   is acute" where only a private note holds that 8-gram, and a 4-gram writes a three-word ticket "card not
   working" that no public message holds as such. Such text is public by provenance (a function of public text and
   released values), and a variation prompt built from it holds nothing private. The run tells the guard of every
   generator output (:meth:`note_generated`, through :attr:`privtext.atomicio.PromptLog.observer`) with the number
   of prompt lines logged before it came back; the guard keeps the private-only n-grams and the short private
   records (under ``n`` words) an output holds, with the earliest line count. In :meth:`scan`, an n-gram or short
   record of prompt line ``i`` is *explained* when a generator wrote it before line ``i`` was logged. Order is what
   keeps this sound: the first prompt that carries private text is flagged, since everything a generator wrote
   before it came from clean prompts; an echo after the prompt explains nothing about it. A whole private record
   of ``n`` or more words is explained by generator output only when every ``n`` words of it occur in public text:
   it is then a chain of public n-grams, which is what a model trained on public text writes. A long record with an
   n-gram no public text holds is never explained by generator output: it is treated as a memorised (leaked) record.
   That rule cried wolf on formulaic short texts: on the corpus matrix's ``tickets:labelled`` cell the 4-gram
   trained on 600 public Banking77 messages wrote the 9-word private ticket "Why was I charged a fee for
   transferring money", neither of whose 8-grams a public message holds, and WASP's contrastive prompts showed it.
   So the rule applies to generators trained elsewhere (a Hugging Face model, vLLM, an API): output of a model
   whose *whole training text the guard checked* (the offline n-gram and lm generators, :meth:`assert_public`;
   ``PromptLog.generated(..., public_model=True)``) is public by provenance however long, since such a model never
   saw a private record it could memorise. Outputs of an earlier process of
   a resumed run are known to the guard through ``private/guard/`` (:class:`_ProvenanceFile`: the salt and the keys of
   what the generators wrote, with their line counts), so a resume does not turn them into false alarms.

What stays flagged: a whole private record of ``n`` or more words with an ``n``-gram no public text holds, unless a
model trained on checked public text wrote it before the prompt (one whose every ``n``-gram is public is flagged
unless any generator wrote it before the prompt), and a
detected secret value no public text holds (a phone number, an address, a private-only word). **Secret values
that public text holds** are public vocabulary: SecPE's "random words" secrets are ordinary words (``pedicure``,
``lobster``), and the 5000-review Yelp benchmark flagged 67 of 8000 prompts and 17 of 500 synthetic reviews for 14
such words, every one of them in the public reviews. A prompt or text whose detected values all occur in some
public text is counted (``*_with_public_secret_value``), not flagged (what the released votes say of who holds a
value is the (p, r) guarantee's business, not the audit's).

Cost: one keyed BLAKE2b hash per word and per word n-gram of a prompt; at positions whose word opens a short
private record, one hash per length of such records; at positions whose n-gram opens a longer record whose last
n-gram also closes one, one hash of the window; and the secret scan (one ``hash`` per token). Building hashes every
public text the same way once. ``benchmarks/guard.py`` prints the rates.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets as _secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import PrivacyCheckError

_WORD = re.compile(r"\w+", re.UNICODE)

#: findings kept per audit in ``private/diagnostics.json`` (the counts cover every prompt)
MAX_FINDINGS = 200


def _norm_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class ValueFinder(Protocol):
    """What the guard needs of the detected secret values: :class:`privtext.secrets.values.SecretValueIndex`."""

    def find(self, text: str) -> Sequence[Any]: ...


@dataclass(frozen=True)
class Finding:
    """One piece of private text the audit found in a flagged prompt (private: ``private/diagnostics.json``).

    ``kind``: ``private_record`` (a whole private record), ``private_ngram`` (an n-gram of a private record that no
    public text holds) or ``secret_value`` (a detected value no public text holds). ``words``: its span
    ``[start, end)`` in the prompt's normalised words (``privtext.guard.prompt_words``), for ``privtext diagnose``
    to show the text; ``record``: the index of the (first) private record that holds it (None for a secret value);
    ``secret``: the secret column; ``why``: why no public source explains it."""

    line: int
    kind: str
    words: tuple[int, int] | None
    record: int | None
    why: str
    secret: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "kind": self.kind, "words": list(self.words) if self.words else None,
                "record": self.record, "secret": self.secret, "why": self.why}


@dataclass
class AuditResult:
    """Counts of flagged texts (prompts or synthetic texts), their 1-based line numbers and (private) what was
    found in them; never their text."""

    prompts: int = 0
    record_hits: int = 0
    ngram_hits: int = 0
    rare_hits: int = 0
    recombined_hits: int = 0
    explained_hits: int = 0
    public_record_hits: int = 0
    generated_record_hits: int = 0
    secret_hits: int = 0
    public_secret_hits: int = 0
    secrets_found: set[int] = field(default_factory=set)
    flagged: list[int] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
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
                "prompts_with_public_record": self.public_record_hits,
                "prompts_with_generated_record_only": self.generated_record_hits,
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
        if self.findings:
            out["findings"] = [f.to_dict() for f in self.findings[:MAX_FINDINGS]]
        return out


def prompt_words(p: Any) -> list[str]:
    """The normalised words of a prompt (a string, chat messages or a ``prompts.jsonl`` record), as the audit sees
    them: :class:`Finding` spans index into this list."""
    return _norm_words(_prompt_text(p))


class PrivateGuard:
    """Salted hashes of the private records and their private-only n-grams (module docstring).

    ``secret_values``: the run's detected secrets — a :class:`~privtext.secrets.SecretMatrix` (its
    :meth:`~privtext.secrets.SecretMatrix.value_index` is taken) or any object with ``find(text)`` returning
    hits with a ``secret`` column (a :class:`~privtext.secrets.values.SecretValueIndex`)."""

    def __init__(self, private_texts: Iterable[str], public_texts: Iterable[str] = (), *, n: int = 8,
                 secret_values: Any = None, state_dir: str | os.PathLike[str] | None = None):
        self.n = n
        self._state = _ProvenanceFile(Path(state_dir)) if state_dir is not None else None
        self._salt = self._state.salt() if self._state is not None else _secrets.token_bytes(16)
        private = [_norm_words(t) for t in private_texts]
        #: every private record's hash → the index of the first record with that text
        self._all_records: dict[bytes, int] = {}
        self._first_word: dict[bytes, set[int]] = {}  # first word of a record under n words → its lengths
        self._heads: dict[bytes, set[int]] = {}  # first n-gram of a record of ≥ n words → its lengths
        self._tails: set[bytes] = set()          # last n-gram of a record of ≥ n words
        for i, words in enumerate(private):
            if not words:
                continue
            h = self._h(" ".join(words))
            if h in self._all_records:
                continue
            self._all_records[h] = i
            if len(words) < n:
                self._first_word.setdefault(self._h(words[0]), set()).add(len(words))
            else:
                self._heads.setdefault(self._h(" ".join(words[:n])), set()).add(len(words))
                self._tails.add(self._h(" ".join(words[-n:])))
        #: private records some public source holds → that source (public by the run's assumption)
        self._public_records: dict[bytes, str] = {}
        pub: set[bytes] = set()
        pub_words: set[bytes] = set()
        self._public_texts: list[str] = []
        for t in public_texts:
            words = _norm_words(t)
            self._public_texts.append(t)  # public: kept to find which secret values public text holds
            wh = [self._h(w) for w in words]
            grams = self._gram_list(words)
            pub.update(grams)
            pub_words.update(wh)
            for h, _, _ in self._records_in(words, wh, grams):
                self._public_records.setdefault(h, "the public corpus")
        #: private-only n-grams → the first record holding them; with a private-only word / of public words only
        self._grams_rare: dict[bytes, int] = {}
        self._grams_only: dict[bytes, int] = {}
        for i, words in enumerate(private):
            if len(words) < n:
                continue
            rare = [self._h(w) not in pub_words for w in words]
            for j, g in enumerate(self._gram_list(words)):
                if g in pub or g in self._grams_rare or g in self._grams_only:
                    continue
                (self._grams_rare if any(rare[j:j + n]) else self._grams_only)[g] = i
        self.private_records = len(self._all_records)
        #: private-only n-grams and short private records a generator wrote → prompt lines logged before (earliest);
        #: with ``state_dir``, what the earlier processes of a resumed run noted (module docstring, source 3)
        self._generated: dict[bytes, int] = self._state.load() if self._state is not None else {}
        self.secret_values: ValueFinder | None = None
        #: the secret columns whose value some public text holds (module docstring)
        self.public_secrets: frozenset[int] = frozenset()
        self.set_secret_values(secret_values)

    # ------------------------------------------------------------------ public sources
    def add_public(self, texts: Iterable[str], *, source: str) -> int:
        """Add public text beyond the public corpus (the prompt templates, the declared label values; never a
        value derived from private data): the private records and private-only n-grams it holds become public
        (module docstring, source 1), and so do the secret values it holds. Returns how many private records it
        made public."""
        before = len(self._public_records)
        added = []
        for t in texts:
            words = _norm_words(t)
            if not words:
                continue
            added.append(t)
            grams = self._gram_list(words)
            for g in grams:
                self._grams_only.pop(g, None)
                self._grams_rare.pop(g, None)
            for h, _, _ in self._records_in(words, [self._h(w) for w in words], grams):
                self._public_records.setdefault(h, source)
        if added:
            self._public_texts.extend(added)
            if self.secret_values is not None:
                self.set_secret_values(self.secret_values)
        return len(self._public_records) - before

    @property
    def public_records(self) -> int:
        """How many distinct private records some public text holds (an exact private count: diagnostics only)."""
        return len(self._public_records)

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

    def note_generated(self, texts: Iterable[str], lines: int, *, public_model: bool = False) -> None:
        """A generator wrote ``texts`` after ``lines`` prompt lines had been logged (module docstring, source 3).
        Only the private-only n-grams and the private records among theirs are kept (which of them explain a
        prompt is :meth:`_audit`'s rule: a long record only when every n-gram of it is public). Called from generator
        threads without a lock: two outputs racing on one key can only keep the later count, which explains fewer
        prompts (conservative), never an earlier one than either output's."""
        for t in texts:
            words = _norm_words(t)
            grams = self._gram_list(words)
            keys = [g for g in grams if g in self._grams_only or g in self._grams_rare]
            if self._first_word or self._heads:
                wh = [self._h(w) for w in words]
                recs = self._records_in(words, wh, grams)
                keys += [h for h, _, _ in recs]  # :meth:`_audit` decides which explain a prompt
                if public_model:  # a model trained on checked public text: its long records are explained too
                    keys += [self._model_key(h) for h, _, L in recs if L >= self.n]
            new = [k for k in keys if self._generated.get(k, lines + 1) > lines]
            for k in new:
                self._generated[k] = lines
            if new and self._state is not None:
                self._state.append(new, lines)

    def close(self) -> None:
        """Flush the provenance kept for a resume (``state_dir``)."""
        if self._state is not None:
            self._state.close()

    # ------------------------------------------------------------------ hashing and matching
    def _h(self, s: str) -> bytes:
        return hashlib.blake2b(s.encode("utf-8"), key=self._salt, digest_size=12).digest()

    def _gram_list(self, words: Sequence[str]) -> list[bytes]:
        n = self.n
        return [self._h(" ".join(words[i:i + n])) for i in range(len(words) - n + 1)]

    def _records_in(self, words: Sequence[str], word_hashes: Sequence[bytes], grams: Sequence[bytes], *,
                    long: bool = True) -> list[tuple[bytes, int, int]]:
        """Every private record that occurs in ``words`` as a run of words: (its hash, start, length). Short
        records: at each position whose word opens one, a hash per such length; longer ones (``long``): at each
        position whose n-gram opens one, when the window's last n-gram closes one, a hash of the window."""
        W, n = len(words), self.n
        found: list[tuple[bytes, int, int]] = []
        if self._first_word:
            for i, wh in enumerate(word_hashes):
                for L in self._first_word.get(wh, ()):
                    if i + L <= W:
                        h = self._h(" ".join(words[i:i + L])) if L > 1 else wh
                        if h in self._all_records:
                            found.append((h, i, L))
        if long and self._heads:
            for i, g in enumerate(grams):
                for L in self._heads.get(g, ()):
                    if i + L <= W and grams[i + L - n] in self._tails:
                        h = self._h(" ".join(words[i:i + L]))
                        if h in self._all_records:
                            found.append((h, i, L))
        return found

    def is_private_record(self, text: str) -> bool:
        """Whether ``text`` (normalised) equals a private record."""
        return self._h(" ".join(_norm_words(text))) in self._all_records

    def assert_public(self, texts: Iterable[str], *, what: str) -> None:
        """Raise :class:`PrivacyCheckError` if any text equals a private record that no public source holds (a
        generator's training text must be public). A text of the public corpus equal to a private record is public
        by the run's assumption (stated in ``privacy.json``), so it never stops a run: the check catches private
        text a bug hands to a generator, and whether it fires does not depend on which records are private."""
        for i, t in enumerate(texts):
            h = self._h(" ".join(_norm_words(t)))
            if h in self._all_records and h not in self._public_records:
                raise PrivacyCheckError(
                    f"{what}: record {i} equals a private record; a generator must never be trained on or "
                    "prompted with private text"
                )

    def hits(self, text: str, line: int | None = None) -> tuple[bool, bool, bool]:
        """(holds a private record's whole text that nothing public explains, holds a private n-gram that no
        public text holds and no generator wrote before prompt line ``line``, holds such an n-gram with a
        private-only word in it)."""
        res = AuditResult()
        self._audit(_norm_words(text), line, res)
        return bool(res.record_hits), bool(res.ngram_hits), bool(res.rare_hits)

    def _model_key(self, record: bytes) -> bytes:
        """The provenance key of a private record written by a model whose training text the guard checked public
        (:meth:`note_generated` with ``public_model``): kept apart from the record's own key, so output of any other
        generator never explains a long record this way."""
        return self._h("\x00checked-public-model\x00" + record.hex())

    def _public_chain(self, grams: Sequence[bytes], i: int, length: int) -> bool:
        """Whether every n-gram of the ``length`` words from word ``i`` occurs in public text (none private-only):
        the words are a chain of public n-grams, what a model trained on public text writes by recombining it."""
        return not any(g in self._grams_only or g in self._grams_rare for g in grams[i:i + length - self.n + 1])

    def _explained_at(self, key: bytes, line: int | None) -> bool:
        """Whether a generator wrote ``key`` (an n-gram or a short record) before prompt line ``line``."""
        return line is not None and self._generated.get(key, line) < line

    def _audit(self, words: list[str], line: int | None, res: AuditResult) -> bool:
        """Count one prompt's private text in ``res`` (module docstring: what explains text); the findings of a
        flagged prompt are appended. Returns whether it is flagged (before the secret scan)."""
        n = self.n
        grams = self._gram_list(words)
        found: list[Finding] = []
        public_rec = generated_rec = False
        seen: set[bytes] = set()
        for h, i, L in self._records_in(words, [self._h(w) for w in words], grams):
            if h in seen:
                continue
            seen.add(h)
            if h in self._public_records:
                public_rec = True
            elif ((L < n or self._public_chain(grams, i, L)) and self._explained_at(h, line)) or (
                    L >= n and self._explained_at(self._model_key(h), line)):
                generated_rec = True
            else:
                found.append(Finding(
                    line=line or 0, kind="private_record", words=(i, i + L), record=self._all_records[h],
                    why=(f"a whole private record of {L} words; no public text holds it (public corpus, prompt "
                         "templates, label values)" + (
                             f", and no generator wrote it before prompt line {line}" if L < n else
                             f", and no generator wrote it before prompt line {line} (every {n} words of it occur "
                             "in public text)" if self._public_chain(grams, i, L) else
                             f"; it holds {n} words in a row that no public text holds, and no model trained on "
                             f"checked public text wrote it before prompt line {line}, so it is treated as a "
                             "memorised record"))))
        record = bool(found)
        private_grams = [(j, g) for j, g in enumerate(grams) if g in self._grams_only or g in self._grams_rare]
        kept = [(j, g) for j, g in private_grams if not self._explained_at(g, line)]
        for j, g in kept[:3]:  # enough to show what matched; the counts cover the rest
            rare = g in self._grams_rare
            found.append(Finding(
                line=line or 0, kind="private_ngram", words=(j, j + n),
                record=(self._grams_rare if rare else self._grams_only)[g],
                why=(f"{n} words in a row of a private record that no public text holds"
                     + (" (one of its words occurs in no public text)" if rare else "")
                     + (f", and no generator wrote them before prompt line {line}" if line is not None else ""))))
        res.record_hits += record
        res.ngram_hits += bool(kept)
        rare_hit = any(g in self._grams_rare for _, g in kept)
        res.rare_hits += rare_hit
        res.recombined_hits += bool(kept) and not rare_hit
        res.explained_hits += bool(private_grams) and not kept
        res.public_record_hits += public_rec and not record
        res.generated_record_hits += generated_rec and not record and not public_rec
        if found and len(res.findings) < MAX_FINDINGS:
            res.findings.extend(found[:MAX_FINDINGS - len(res.findings)])
        return bool(found)

    def secrets_in(self, text: str) -> set[int]:
        """The columns of the detected secret values ``text`` holds (empty without ``secret_values``)."""
        if self.secret_values is None:
            return set()
        return {int(h.secret) for h in self.secret_values.find(text)}

    def scan(self, prompts: Iterable[Any]) -> AuditResult:
        """Audit prompts (strings, chat message lists, or prompts.jsonl records): whole private records, private
        n-grams no public text holds, detected secret values; what public sources explain is counted apart."""
        res = AuditResult()
        for i, p in enumerate(prompts):
            res.prompts += 1
            text = _prompt_text(p)
            flagged = self._audit(_norm_words(text), i + 1, res)
            found = self._private_secrets(self.secrets_in(text), res)
            if found and len(res.findings) < MAX_FINDINGS:
                res.findings.extend(
                    Finding(line=i + 1, kind="secret_value", words=None, record=None, secret=s,
                            why="a detected secret value that no public text holds")
                    for s in sorted(found)[:3])
            if flagged or found:
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


class _ProvenanceFile:
    """What a run's guard keeps for a resume, in ``private/guard/`` (mode 0700): the salt of its hashes
    (``salt``) and the keys of what its generators wrote with their prompt line counts (``generated``: one line per
    key, ``hex line``, appended and flushed as they come, so a kill keeps everything noted before it). The keys are
    salted hashes of text a generator wrote (public by provenance); no private text or private hash is stored. A
    resumed run's guard so knows what the earlier processes' generators wrote, and their prompts are not flagged for
    it (before, they were: the guard started with an empty memory)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh: Any = None

    def salt(self) -> bytes:
        p = self.folder / "salt"
        if p.exists():
            data = p.read_bytes()
            if len(data) == 16:
                return data
        data = _secrets.token_bytes(16)
        from .atomicio import atomic_write_bytes

        atomic_write_bytes(p, data)
        os.chmod(p, 0o600)
        (self.folder / "generated").unlink(missing_ok=True)  # keys under another salt mean nothing now
        return data

    def load(self) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        p = self.folder / "generated"
        if not p.exists():
            return out
        for row in p.read_text(encoding="ascii", errors="replace").splitlines():
            parts = row.split()
            if len(parts) != 2:
                continue  # a line cut by a kill
            try:
                k, line = bytes.fromhex(parts[0]), int(parts[1])
            except ValueError:
                continue
            if out.get(k, line + 1) > line:
                out[k] = line
        return out

    def append(self, keys: Sequence[bytes], lines: int) -> None:
        with self._lock:
            if self._fh is None:
                self._fh = open(self.folder / "generated", "a", encoding="ascii")
            self._fh.write("".join(f"{k.hex()} {lines}\n" for k in keys))
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


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
