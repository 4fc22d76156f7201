"""Where a detected secret value occurs, in any text: every holder of a secret, and the guard's secret scan.

A detector decides that a mention is a secret from its context (a phone cue near ``467 3395``, a check digit, a
model's score). Once a value is known to be a secret, every record that contains it holds it, whatever the
context there: with the regex detector ``"Please call me on 467 3395"`` is a holder, and so is ``"Locker code
467 3395"``, where no phone cue is near. Were the second record left public, SecPE would train the generator on
it, vote with it exactly and show it in prompts, and Aug-PE's secret-group size k would count one holder too few.
:meth:`SecretMatrix.with_all_holders <privtext.secrets.matrix.SecretMatrix.with_all_holders>` (and
:func:`privtext.secrets.holders.propagate_holders`) make every such record a holder; every built-in detector's
``detect`` returns its matrix through it.

Matching is on canonical forms (:mod:`privtext.secrets.canonical`), in three families chosen by the value:

``digits``
    A value made of digits and separators only (phones, card numbers, SSNs, IPv4 addresses, ISO dates, numeric
    ids of any type) is its digit string. A text's *digit runs* are digit groups joined by at most three of
    `` -./()+`` (a ``(0)`` trunk marker is skipped); a run's digit string holds the value when the value is a
    substring of it. A value of 7 or more digits may start and end anywhere in the run (``+44 (0)20 7946 0958``,
    ``0044 20…`` and ``020 7946 0958`` all hold ``2079460958``: country codes and trunk prefixes are digits in
    front of the same number); a shorter one must begin and end on group boundaries (``42`` is held by
    ``"room 42"`` and ``"4-2"``, not by ``"2042"``).
``dates``
    A value of a date type (``DATE``, ``DATE_OF_BIRTH``; canonical ``YYYY-MM-DD``) is also found in any date the
    regex detector's date pattern finds, read month-first and day-first (``17/05/1990``, ``May 17, 1990``).
``tokens``
    Any other value (e-mails, URLs, IBANs, names, explicit strings, random words) is split into tokens (``\\w+``
    runs and single punctuation marks, case-folded); a text holds it when consecutive tokens of the text join to
    the same sequence, with whitespace (of any length) where the value has whitespace and none where it has none:
    ``Ann@Example.com`` and ``Project  FALCON`` hold ``ann@example.com`` and ``project falcon``. A value of letters
    and digits without whitespace (an IBAN, an id) is also held when the text writes it in groups
    (``DE89 3704 0044 0532 0130 00``). A match starts and ends on token boundaries, so ``ann`` is not found in
    ``annual``, nor ``tina`` in ``weren't in a``.

The direction of every choice is conservative: a record that holds a value under these rules but not under the
detector's only becomes one more holder, which costs utility (SecPE's split, a larger k), never privacy.

The index keeps no text: prefixes are held as Python string hashes (``hash``, keyed per process) and values as
keyed BLAKE2b digests, so a :class:`SecretValueIndex` can sit in the run's guard
(:class:`privtext.guard.PrivateGuard`, ``secret_values=``) next to its hashed records. Found spans say where
and which column, never the value.
"""

from __future__ import annotations

import hashlib
import re
import secrets as _secrets
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .canonical import DATE_PATTERN, parse_date

#: types whose values are dates (canonical ``YYYY-MM-DD``)
DATE_TYPES = frozenset({"DATE", "DATE_OF_BIRTH"})
#: a digit value this long or longer may sit anywhere in a digit run (prefixes are country/trunk codes)
FREE_DIGITS = 7

_NUMERIC_VALUE = re.compile(r"[\d\s\-./()+]*\d[\d\s\-./()+]*")
_DIGIT_RUN = re.compile(r"\d+(?:[ \t\-./()+]{1,3}\d+)*")
_DIGIT_GROUP = re.compile(r"\d+")
_TOKEN = re.compile(r"\w+|[^\w\s]")


class ValueHit(NamedTuple):
    """One occurrence: ``text[start:end]`` holds the secret of column ``secret``."""

    start: int
    end: int
    secret: int


def value_family(value: str, type: str = "") -> str:
    """``"digits"``, ``"date"`` or ``"tokens"``: how :class:`SecretValueIndex` finds ``value`` (module docstring).

    A date value is found both as a date and as digits; this names the first."""
    if type in DATE_TYPES and parse_date(value) is not None:
        return "date"
    if _NUMERIC_VALUE.fullmatch(value):
        return "digits"
    return "tokens"


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


def _tokens(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)``: ``\\w+`` runs and single punctuation marks, case-folded; a token that follows
    whitespace starts with one space (so ``"Project  Falcon"`` joins to ``"project falcon"``)."""
    out = []
    prev = None
    for m in _TOKEN.finditer(text):
        tok = m.group(0).casefold()
        if prev is not None and m.start() > prev:
            tok = " " + tok
        out.append((m.start(), m.end(), tok))
        prev = m.end()
    return out


def _spaced(value: str) -> str:
    """A value's key for the token walk: its tokens joined as :func:`_tokens` joins a text's."""
    return "".join(t for _, _, t in _tokens(value))


def _is_code(key: str) -> bool:
    """A key with letters and digits and no space (an IBAN, an id): also found with spaces inside (grouped)."""
    return " " not in key and any(c.isdigit() for c in key) and any(c.isalpha() for c in key)


class _Walk:
    """Consecutive tokens of a text whose join is one of ``keys`` (hashed prefixes; keys themselves are never
    kept): joined as :func:`_tokens` gives them (``spaced``), or with the spaces dropped (codes written in
    groups: ``DE89 3704 …``)."""

    def __init__(self, keys: Sequence[str], *, spaced: bool):
        self.spaced = spaced
        self.prefixes = frozenset(hash(k[:i]) for k in keys for i in range(1, len(k) + 1))
        self.full = frozenset(hash(k) for k in keys)
        self.longest = max((len(k) for k in keys), default=0)

    def matches(self, toks: Sequence[tuple[int, int, str]]) -> Iterable[tuple[int, int, str]]:
        """``(first token, last token, joined text)`` of every window whose join is a key."""
        n = len(toks)
        for i in range(n):
            cur = toks[i][2].lstrip(" ")
            hc = hash(cur)
            if hc not in self.prefixes:
                continue
            j = i
            while True:
                if hc in self.full:
                    yield i, j, cur
                j += 1
                if j == n:
                    break
                nxt = toks[j][2]
                cur += nxt if self.spaced else nxt.lstrip(" ")
                if len(cur) > self.longest:
                    break
                hc = hash(cur)
                if hc not in self.prefixes:
                    break


class SecretValueIndex:
    """Finds the canonical secret values ``values[j]`` (of types ``types[j]``) in any text (module docstring).

    ``find(text)`` returns every :class:`ValueHit`; ``holders(texts)`` the records × columns membership."""

    def __init__(self, values: Sequence[str], types: Sequence[str] | None = None):
        values = [str(v) for v in values]
        types = [""] * len(values) if types is None else [str(t) for t in types]
        if len(types) != len(values):
            raise ValueError(f"{len(values)} secret values but {len(types)} types")
        self.n_secrets = len(values)
        self._salt = _secrets.token_bytes(16)
        self._digit_cols: dict[bytes, list[int]] = {}
        self._token_cols: dict[bytes, list[int]] = {}
        self._date_cols: dict[bytes, list[int]] = {}
        digit_keys: list[str] = []
        token_keys: list[str] = []
        code_keys: list[str] = []
        for j, (v, t) in enumerate(zip(values, types, strict=True)):
            fam = value_family(v, t)
            if fam == "date":
                d = parse_date(v)
                assert d is not None
                self._date_cols.setdefault(self._h(d.isoformat()), []).append(j)
            if fam in ("date", "digits"):
                key = _digits(v)
                self._digit_cols.setdefault(self._h(key), []).append(j)
                digit_keys.append(key)
            else:
                key = _spaced(v)
                if not key:
                    continue
                self._token_cols.setdefault(self._h(key), []).append(j)
                (code_keys if _is_code(key) else token_keys).append(key)
        self._digit_prefixes = frozenset(hash(k[:i]) for k in digit_keys for i in range(1, len(k) + 1))
        self._digit_full = frozenset(hash(k) for k in digit_keys)
        self._digit_max = max((len(k) for k in digit_keys), default=0)
        self._walks = [_Walk(token_keys, spaced=True), _Walk(code_keys, spaced=False)]

    def __len__(self) -> int:
        return self.n_secrets

    def __repr__(self) -> str:  # never shows values
        return (f"SecretValueIndex(secrets={self.n_secrets}, digits={len(self._digit_cols)}, "
                f"tokens={len(self._token_cols)}, dates={len(self._date_cols)})")

    def _h(self, s: str) -> bytes:
        return hashlib.blake2b(s.encode("utf-8"), key=self._salt, digest_size=16).digest()

    # ------------------------------------------------------------------------------------------ finding

    def find(self, text: str) -> list[ValueHit]:
        """Every occurrence of every value in ``text``, sorted by position (a span may name several columns)."""
        out: list[ValueHit] = []
        if self._digit_cols:
            out.extend(self._find_digits(text))
        if self._date_cols:
            out.extend(self._find_dates(text))
        if self._token_cols:
            out.extend(self._find_tokens(text))
        return sorted(set(out))

    def contains_any(self, text: str) -> bool:
        return bool(self.find(text))

    def _find_digits(self, text: str) -> Iterable[ValueHit]:
        scan = text.replace("(0)", "   ")  # a trunk marker is no digit of the number (canonical_phone)
        prefixes, full, cols, longest = self._digit_prefixes, self._digit_full, self._digit_cols, self._digit_max
        for run in _DIGIT_RUN.finditer(scan):
            pos: list[int] = []
            starts: set[int] = set()
            ends: set[int] = set()
            for g in _DIGIT_GROUP.finditer(run.group(0)):
                starts.add(len(pos))
                pos.extend(range(run.start() + g.start(), run.start() + g.end()))
                ends.add(len(pos))
            digits = "".join(scan[p] for p in pos)
            n = len(digits)
            for i in range(n):
                for j in range(i + 1, min(n, i + longest) + 1):
                    cur = digits[i:j]
                    hc = hash(cur)
                    if hc not in prefixes:
                        break
                    if hc in full and (j - i >= FREE_DIGITS or (i in starts and j in ends)):
                        for c in cols.get(self._h(cur), ()):
                            yield ValueHit(pos[i], pos[j - 1] + 1, c)

    def _find_dates(self, text: str) -> Iterable[ValueHit]:
        for m in DATE_PATTERN.finditer(text):
            seen = set()
            for dayfirst in (False, True):
                d = parse_date(m.group(0), dayfirst=dayfirst)
                if d is None or d in seen:
                    continue
                seen.add(d)
                for c in self._date_cols.get(self._h(d.isoformat()), ()):
                    yield ValueHit(m.start(), m.end(), c)

    def _find_tokens(self, text: str) -> Iterable[ValueHit]:
        toks = _tokens(text)
        for walk in self._walks:
            if not walk.longest:
                continue
            for i, j, key in walk.matches(toks):
                for c in self._token_cols.get(self._h(key), ()):
                    yield ValueHit(toks[i][0], toks[j][1], c)

    # ------------------------------------------------------------------------------------------ corpora

    def holders(self, texts: Sequence[str]) -> sp.csr_matrix:
        """``len(texts) × n_secrets`` 0/1 membership: record i contains value j (int8, CSR)."""
        rows: list[int] = []
        cols: list[int] = []
        for i, t in enumerate(texts):
            for c in {h.secret for h in self.find(t)}:
                rows.append(i)
                cols.append(c)
        return sp.csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(len(texts), self.n_secrets))


__all__ = ["DATE_TYPES", "FREE_DIGITS", "SecretValueIndex", "ValueHit", "value_family"]
