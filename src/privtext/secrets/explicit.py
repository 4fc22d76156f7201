"""``explicit``: a given list of secret strings.

The strings are compiled into one regular expression shaped as a trie (a shared-prefix alternation), so a
text is scanned once whatever the number of secrets: the cost is ``O(len(text) × trie depth)`` inside the regex
engine, not ``O(texts × secrets)`` Python loops. Every occurrence counts, overlapping ones included (with
secrets ``"Ann"`` and ``"Ann Lee"``, the text ``"Ann Lee"`` holds both).

Options:

* ``secrets``: a list of strings, and/or ``file``: a UTF-8 file with one secret per line (blank lines and
  surrounding whitespace ignored);
* ``case_sensitive`` (default ``False``): when false, ``"ALICE"`` matches the secret ``"Alice"``; when true, only
  the listed spelling is *found* (:meth:`ExplicitDetector.find`, ``detect_raw``), but ``detect`` still makes every
  record that holds a found secret case-folded a holder (:mod:`privtext.secrets.values`: the conservative side);
* ``whole_word`` (default ``True``): a match must not be glued to a letter, digit or underscore on a side where
  the secret itself begins/ends with one (``"Ann"`` does not match inside ``"Annual"``; ``"+44 20"`` still
  matches after a space);
* ``type`` (default ``"EXPLICIT"``): the entity type given to these secrets.

The canonical value of a secret is the string as listed (the first spelling, when case-insensitive duplicates
differ only in case).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError
from .holders import HoldersFromValues
from .matrix import MatrixBuilder, SecretMatrix, as_texts


def trie_regex(words: Iterable[str]) -> str:
    """A regex source matching exactly the given strings, as a prefix trie (greedy: longest first)."""
    trie: dict[str, Any] = {}
    for w in words:
        if not w:
            continue
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = True

    def build(node: dict[str, Any]) -> str:
        end = "" in node
        kids = sorted(k for k in node if k)
        if not kids:
            return ""
        alts = []
        singles = []
        for k in kids:
            sub = build(node[k])
            if sub:
                alts.append(re.escape(k) + sub)
            else:
                singles.append(k)
        if singles:
            if len(singles) == 1:
                alts.append(re.escape(singles[0]))
            else:
                alts.append("[" + "".join(_class_escape(c) for c in singles) + "]")
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if end:
            body = "(?:" + body + ")?"
        return body

    return build(trie)


def _class_escape(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


class ExplicitDetector(HoldersFromValues):
    """Secrets given as a list of strings (see the module docstring for the options)."""

    name = "explicit"

    def __init__(
        self,
        *,
        secrets: Sequence[str] | None = None,
        file: str | os.PathLike[str] | None = None,
        case_sensitive: bool = False,
        whole_word: bool = True,
        type: str = "EXPLICIT",
    ):
        if secrets is None and file is None:
            raise ConfigError("explicit secret detector needs 'secrets' (a list of strings) or 'file' (a path)")
        items: list[str] = []
        if secrets is not None:
            if isinstance(secrets, str) or not isinstance(secrets, Sequence):
                raise ConfigError(f"explicit 'secrets' must be a list of strings, got {type_name(secrets)}")
            for k, s in enumerate(secrets):
                if not isinstance(s, str):
                    raise ConfigError(f"explicit 'secrets'[{k}] is {type_name(s)} {s!r}, not a string")
                items.append(s)
        if file is not None:
            p = Path(file)
            if not p.is_file():
                raise ConfigError(f"explicit secrets file {str(p)!r} does not exist")
            try:
                items.extend(p.read_text(encoding="utf-8").splitlines())
            except UnicodeDecodeError as e:
                raise DataError(f"{p}: not valid UTF-8 ({e})") from None
        if not isinstance(type, str) or not type:
            raise ConfigError(f"explicit 'type' must be a non-empty string, got {type!r}")
        self.case_sensitive = bool(case_sensitive)
        self.whole_word = bool(whole_word)
        self.type = type
        self._canon: dict[str, str] = {}  # match key -> canonical (as listed)
        for s in items:
            s = s.strip()
            if not s:
                continue
            self._canon.setdefault(self._key(s), s)
        self._lengths = sorted({len(k) for k in self._canon}, reverse=True)
        self._pattern: re.Pattern[str] | None = None
        if self._canon:
            flags = 0 if self.case_sensitive else re.IGNORECASE
            # A zero-width lookahead finds the longest secret starting at *every* position (overlaps included);
            # the shorter secrets at that position are prefixes of it and are looked up directly.
            self._pattern = re.compile("(?=(" + trie_regex(self._canon) + "))", flags)

    @property
    def secrets(self) -> list[str]:
        return list(self._canon.values())

    def structure(self) -> list[str]:
        """What this configuration accepts, in words (never the strings themselves)."""
        n = len(self._canon)
        return [f"{self.type}: {n} listed string{'s' if n != 1 else ''}, matched "
                f"{'case-sensitively' if self.case_sensitive else 'case-insensitively'}"
                f"{' as whole words' if self.whole_word else ''}."]

    def _key(self, s: str) -> str:
        # str.lower (not casefold) keeps lengths aligned with the regex engine's per-character case folding
        return s if self.case_sensitive else s.lower()

    def _boundary_ok(self, text: str, start: int, end: int) -> bool:
        if not self.whole_word:
            return True
        if _is_word(text[start]) and start > 0 and _is_word(text[start - 1]):
            return False
        return not (_is_word(text[end - 1]) and end < len(text) and _is_word(text[end]))

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, canonical secret)`` for every occurrence in ``text``."""
        if self._pattern is None:
            return []
        out = []
        for m in self._pattern.finditer(text):
            start = m.start(1)
            longest = m.group(1)
            for n in self._lengths:
                if n > len(longest):
                    continue
                canon = self._canon.get(self._key(longest[:n]))
                if canon is not None and self._boundary_ok(text, start, start + n):
                    out.append((start, start + n, canon))
        return out

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        """What this detector itself finds (:meth:`detect` adds every other record holding a found value)."""
        texts = as_texts(texts)
        b = MatrixBuilder()
        for i, t in enumerate(texts):
            for start, end, canon in self.find(t):
                b.add(i, self.type, canon, start, end)
        return b.build(len(texts))


def type_name(x: object) -> str:
    return type(x).__name__
