"""``regex``: PII found with regular expressions and check digits (no model, no network).

Entity types and what counts as a match:

``EMAIL``
    ``local@domain.tld`` (RFC 5322 "atext" local part with dots, domain labels of letters/digits/hyphens, a TLD
    of ≥ 2 letters).
``URL``
    ``http(s)://``, ``ftp://`` or ``www.`` followed by a host with a dot (or ``localhost``) and an optional path;
    trailing punctuation and unbalanced closing brackets are not part of the URL.
``IBAN``
    Country code, 2 check digits and the BBAN, written solid or in groups of 4; the length must be the
    country's and ISO 7064 mod 97 must equal 1.
``IP_ADDRESS``
    Dotted-quad IPv4 (each octet 0–255, no leading zeros) and IPv6 (any form :mod:`ipaddress` accepts, incl.
    ``::`` compression and an embedded IPv4 tail).
``CREDIT_CARD``
    12–19 digits written solid, in groups of 4 (``4-4-4-4``, ``4-4-4-1..4``, ``4-4-4-4-3``) or as ``4-6-5``/
    ``4-6-4`` (Amex, Diners), separators a single space or dash used consistently; the Luhn check must pass
    and either (``card_issuer_check``, default) the prefix and length fit a known scheme (12 digits only for
    Maestro) or a card cue ("card", "credit", "debit", "cc", "visa", …) lies within ``context_window``
    characters.
``US_SSN``
    ``AAA-GG-SSSS`` or ``AAA GG SSSS`` obeying the SSA rules (area not 000/666/900–999, group not 00, serial
    not 0000, not a publicly used sample number); nine solid digits only next to an SSN cue ("SSN", "social
    security").
``DATE_OF_BIRTH``
    A date (``m/d/yyyy``, ``d.m.yyyy``, ``yyyy-mm-dd``, ``March 3, 1990``, ``3rd of March 1990`` …) that
    parses as a real calendar date, preceded within ``context_window`` characters by a birth cue ("DOB",
    "date of birth", "birth date", "birthday", "born"). With ``dates="all"`` every other date is a ``DATE``
    secret too; ``dates="none"`` turns dates off.
``PHONE``
    Digit groups separated by single spaces, dots or dashes, optionally with ``+CC``/``00CC``, a ``(0)``
    trunk marker, an ``(area)`` code and an extension (``x123``, ``ext. 12``); 7–15 digits in all. Accepted
    without context when *strongly formatted*: an international ``+`` prefix, or a NANP number
    ``(NXX) NXX-XXXX`` / ``NXX-NXX-XXXX`` / ``NXX.NXX.XXXX`` (optionally ``1-``/``001-``/``+1`` first). Other
    digit groups (``0490 75 40 81``, ``467 3395``, ``5403926876``) are accepted only within
    ``context_window`` characters of a phone cue ("phone", "tel", "mobile", "cell", "fax", "call",
    "contact", "number", "message", "answering", "desk", "office", …). ``phone_mode="strict"`` keeps only
    strongly formatted numbers; ``phone_mode="loose"`` accepts any grouped 7–15-digit number that is not a
    date. Dates, IPs and numbers already matched as another type are never phones.

Overlaps are resolved by priority: a candidate overlapping an accepted match of a higher-priority type is
dropped (order: EMAIL, URL, IBAN, IP_ADDRESS, CREDIT_CARD, US_SSN, DATE_OF_BIRTH/DATE, PHONE; e-mails and URLs
may overlap each other). Values are canonicalised by :mod:`privtext.secrets.canonical`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError
from .canonical import (
    DATE_PATTERN,
    canonical_date,
    canonicalize,
    credit_card_valid,
    iban_valid,
    luhn_valid,
    parse_date,
    ssn_valid,
)
from .holders import HoldersFromValues
from .matrix import SecretMatrix, as_texts, from_mentions

ENTITY_TYPES = (
    "EMAIL", "URL", "IBAN", "IP_ADDRESS", "CREDIT_CARD", "US_SSN", "DATE_OF_BIRTH", "PHONE",
)

_EMAIL = re.compile(
    r"(?<![\w.!#$%&'*+/=?^`{|}~\-])"
    r"[\w!#$%&'*+/=?^`{|}~\-]+(?:\.[\w!#$%&'*+/=?^`{|}~\-]+)*"
    r"@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+[^\W\d_]{2,63}(?![\w\-]|\.[^\W_])"
)
_URL = re.compile(r"(?i)\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'`{}|\\^]+")
_URL_HOST = re.compile(r"(?i)^(?:(?:https?|ftp)://)?(?:[^@/\s]+@)?([^/:?#]+)")
_IBAN = re.compile(r"(?i)(?<![\w])[a-z]{2}\d{2}(?: ?[a-z0-9]){11,30}(?![\w])")
_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w]|\.\d)"
)
_IPV6 = re.compile(
    r"(?i)(?<![\w:.])(?:[0-9a-f]{0,4}:){2,7}(?:[0-9a-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?:%[\w.]+)?(?![\w:]|\.\d)"
)
_CARD = re.compile(
    r"(?<![\w\-.+/])(?:"
    r"\d{12,19}"
    r"|\d{4}(?P<s1>[ \-])\d{4}(?P=s1)\d{4}(?:(?P=s1)\d{1,4}){1,2}"
    r"|\d{4}(?P<s2>[ \-])\d{6}(?P=s2)\d{4,5}"
    r")(?![\w]|[\-.,/]\d)"
)
_CARD_CUE = re.compile(
    r"(?i)\b(?:card|cards|cc|credit|debit|visa|mastercard|master card|amex|american express|maestro|jcb"
    r"|discover|diners|unionpay|cvv|expir\w*)\b"
)
_SSN = re.compile(r"(?<![\w\-.+/])(?:\d{3}(?P<sep>[ \-])\d{2}(?P=sep)\d{4}|\d{9})(?![\w]|[\-./]\d)")
_SSN_CUE = re.compile(r"(?i)\b(?:ssn|ss#|ss no|social security(?: number| no\.?)?|soc\.? sec\.?)\b")

_DATE = DATE_PATTERN
_BIRTH_CUE = re.compile(
    r"(?i)(?:\bd\.?o\.?b\b\.?|\bdate\s+of\s+birth\b|\bbirth\s*date\b|\bbirthday\b|\bborn\b|\bnacido\b|\bgeboren\b)"
)

_PHONE = re.compile(
    r"(?i)(?<![\w+])(?<![\w][.\-])"
    r"(?:(?:\+|\b00)[ ]?\d{1,3}[ .\-]?)?"  # international prefix
    r"(?:\(0\)[ .\-]?)?"  # trunk marker
    r"(?:\(\d{1,5}\)[ .\-]?)?"  # area code in parentheses
    r"\d{1,15}(?:[ .\-]\d{1,15}){0,6}"  # digit groups
    r"(?:[ ]?(?:x|ext\.?|extension|\#)[ ]?\d{1,6})?"  # extension
    r"(?![\w]|[.\-]\d)"
)
_NANP = re.compile(
    r"(?:(?:\+?1|001)[ .\-]?)?(?:\([2-9]\d{2}\)[ ]?|[2-9]\d{2}(?P<s>[.\-]))[2-9]\d{2}[.\-]\d{4}"
    r"(?:[ ]?(?:x|ext\.?|extension|\#)[ ]?\d{1,6})?",
    re.IGNORECASE,
)
_PHONE_CUE = re.compile(
    r"(?i)\b(?:phone|ph|tel|tele|telephone|mobile|mob|cell|cellphone|fax|desk|office|home|work|call|called"
    r"|calling|contact|dial|text|sms|whatsapp|reach|ring|message|messages|answering|hotline"
    r"|landline|tlf|telefon|telefono|téléphone)\b"
)
_EXT = re.compile(r"(?i)(?:[ ]?(?:x|ext\.?|extension|\#)[ ]?\d{1,6})$")

_PRIORITY = {t: k for k, t in enumerate(ENTITY_TYPES)}
_PRIORITY["DATE"] = _PRIORITY["DATE_OF_BIRTH"]
_FREE = {"EMAIL", "URL"}  # may overlap each other
_NEEDS_DIGIT = {"IBAN", "CREDIT_CARD", "US_SSN", "DATE_OF_BIRTH", "PHONE"}
_DIGIT = re.compile(r"\d")

Candidate = tuple[int, int, str, str]  # start, end, type, matched text


class RegexDetector(HoldersFromValues):
    """PII by regular expressions (see the module docstring for what each type matches).

    Options: ``entities`` (subset of :data:`ENTITY_TYPES`, default all), ``phone_mode`` (``"context"``,
    ``"strict"`` or ``"loose"``), ``dates`` (``"birth"``, ``"all"`` or ``"none"``), ``dayfirst`` (numeric dates
    read day first), ``context_window`` (characters searched for cues, default 40 before and half that after),
    ``card_issuer_check`` (default true).
    """

    name = "regex"

    def __init__(
        self,
        *,
        entities: Sequence[str] | None = None,
        phone_mode: str = "context",
        dates: str = "birth",
        dayfirst: bool = False,
        context_window: int = 40,
        card_issuer_check: bool = True,
    ):
        if entities is None:
            ents = list(ENTITY_TYPES)
        else:
            if isinstance(entities, str) or not isinstance(entities, Sequence):
                raise ConfigError(f"regex 'entities' must be a list of entity types, got {entities!r}")
            ents = [str(e).upper() for e in entities]
            aliases = {"EMAIL_ADDRESS": "EMAIL", "PHONE_NUMBER": "PHONE", "IBAN_CODE": "IBAN", "SSN": "US_SSN",
                       "DATE": "DATE_OF_BIRTH", "DOB": "DATE_OF_BIRTH", "IP": "IP_ADDRESS"}
            ents = [aliases.get(e, e) for e in ents]
            bad = [e for e in ents if e not in ENTITY_TYPES]
            if bad:
                raise ConfigError(f"regex detector: unknown entity type(s) {bad}; valid: {', '.join(ENTITY_TYPES)}")
        if phone_mode not in ("context", "strict", "loose"):
            raise ConfigError(f"regex 'phone_mode' must be 'context', 'strict' or 'loose', got {phone_mode!r}")
        if dates not in ("birth", "all", "none"):
            raise ConfigError(f"regex 'dates' must be 'birth', 'all' or 'none', got {dates!r}")
        if isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 0:
            raise ConfigError(f"regex 'context_window' must be a non-negative integer, got {context_window!r}")
        self.entities = tuple(e for e in ENTITY_TYPES if e in ents)
        if dates == "none":
            self.entities = tuple(e for e in self.entities if e != "DATE_OF_BIRTH")
        self.phone_mode = phone_mode
        self.dates = dates
        self.dayfirst = bool(dayfirst)
        self.context_window = context_window
        self.card_issuer_check = bool(card_issuer_check)
        finders: dict[str, Callable[[str, dict[str, Any]], list[Candidate]]] = {
            "EMAIL": self._emails,
            "URL": self._urls,
            "IBAN": self._ibans,
            "IP_ADDRESS": self._ips,
            "CREDIT_CARD": self._cards,
            "US_SSN": self._ssns,
            "DATE_OF_BIRTH": self._dates,
            "PHONE": self._phones,
        }
        self._finders = [(e, finders[e]) for e in self.entities]

    # ------------------------------------------------------------------------------------------ helpers

    def _cue_near(self, cue: re.Pattern[str], text: str, start: int, end: int, *, after: bool = True) -> bool:
        w = self.context_window
        if cue.search(text, max(0, start - w), start):
            return True
        return after and cue.search(text, end, min(len(text), end + w // 2)) is not None

    # ------------------------------------------------------------------------------------------ finders

    def _emails(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        return [(m.start(), m.end(), "EMAIL", m.group(0)) for m in _EMAIL.finditer(text)]

    def _urls(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = []
        for m in _URL.finditer(text):
            s = m.start()
            u = m.group(0)
            while u:
                ch = u[-1]
                if ch in ".,;:!?*" or (ch in ")]" and u.count(ch) > u.count("(" if ch == ")" else "[")):
                    u = u[:-1]
                    continue
                break
            host = _URL_HOST.match(u)
            if not host:
                continue
            h = host.group(1).strip(".").lower()
            h = h[4:] if h.startswith("www.") else h
            if ("." not in h.strip(".") or not h) and h != "localhost":
                continue
            out.append((s, s + len(u), "URL", u))
        return out

    def _ibans(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = []
        for m in _IBAN.finditer(text):
            v = m.group(0)
            # a group-of-4 IBAN may be followed by more words; try the longest valid prefix at group boundaries
            for cut in _iban_cuts(v):
                if iban_valid(v[:cut]):
                    out.append((m.start(), m.start() + cut, "IBAN", v[:cut]))
                    break
        return out

    def _ips(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = [(m.start(), m.end(), "IP_ADDRESS", m.group(0)) for m in _IPV4.finditer(text)]
        for m in _IPV6.finditer(text):
            v = m.group(0)
            if v.count(":") < 2:
                continue
            try:
                ipaddress.IPv6Address(v.split("%")[0])
            except ValueError:
                continue
            if v.strip(":") == "":
                continue  # "::" alone is too often not an address
            out.append((m.start(), m.end(), "IP_ADDRESS", v))
        return out

    def _cards(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = []
        for m in _CARD.finditer(text):
            # "4111 1111 1111 1111 2 tickets": the greedy match swallows the "2"; try the shorter groupings too
            full = m.group(0)
            for v in [full] + [full[:k] for k in range(len(full) - 1, 13, -1) if full[k] in " -"]:
                if credit_card_valid(v, check_issuer=self.card_issuer_check) or (
                    luhn_valid(v) and self._cue_near(_CARD_CUE, text, m.start(), m.start() + len(v))
                ):
                    out.append((m.start(), m.start() + len(v), "CREDIT_CARD", v))
                    break
        return out

    def _ssns(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = []
        for m in _SSN.finditer(text):
            v = m.group(0)
            if not ssn_valid(v):
                continue
            if m.group("sep") is None and not self._cue_near(_SSN_CUE, text, m.start(), m.end(), after=False):
                continue
            out.append((m.start(), m.end(), "US_SSN", v))
        return out

    def _dates(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = []
        spans = self._valid_dates(text, ctx)
        prev_end = 0
        for s, e in spans:
            # a birth cue belongs to the first date after it: "born 1/2/1980, moved 3/4/1999" has one birth date
            if _BIRTH_CUE.search(text, max(prev_end, s - self.context_window), s):
                out.append((s, e, "DATE_OF_BIRTH", text[s:e]))
            elif self.dates == "all":
                out.append((s, e, "DATE", text[s:e]))
            prev_end = e
        return out

    def _valid_dates(self, text: str, ctx: dict[str, Any]) -> list[tuple[int, int]]:
        if "dates" not in ctx:
            ctx["dates"] = [
                (m.start(), m.end()) for m in _DATE.finditer(text)
                if parse_date(m.group(0), dayfirst=self.dayfirst) is not None
            ]
        return ctx["dates"]  # type: ignore[no-any-return]

    def _phones(self, text: str, ctx: dict[str, Any]) -> list[Candidate]:
        out = []
        dates = self._valid_dates(text, ctx)
        for m in _PHONE.finditer(text):
            v = m.group(0)
            s, e = m.start(), m.end()
            if any(ds < e and s < de for ds, de in dates):
                continue
            nanp = _NANP.match(v)
            if nanp and nanp.end() < len(v) and v[nanp.end()] in " .-":
                # "call 415-555-2671 2 times": keep the well-formed number, not the trailing group
                v, e = v[:nanp.end()], s + nanp.end()
            main = _EXT.sub("", v)
            n_digits = sum(c.isdigit() for c in main)
            if not 7 <= n_digits <= 15:
                continue
            if _IPV4.fullmatch(main):
                continue
            strong = main.startswith("+") or _NANP.fullmatch(v) is not None
            if self.phone_mode == "strict":
                ok = strong
            elif self.phone_mode == "loose":
                ok = True
            else:
                ok = strong or self._cue_near(_PHONE_CUE, text, s, e)
            if ok:
                out.append((s, e, "PHONE", v))
        return out

    # ------------------------------------------------------------------------------------------ statement

    def structure(self) -> list[str]:
        """Which values this configuration accepts, in words, for the privacy statement (module docstring)."""
        w = self.context_window
        card = ("12–19 digits (solid or grouped 4-4-4-4 / 4-6-5) passing the Luhn check, with a known issuer prefix "
                f"for its length or a card cue (card, credit, debit, visa, …) within {w} characters"
                if self.card_issuer_check else
                f"13–19 digits (solid or grouped) passing the Luhn check, or Luhn-valid with a card cue within {w} "
                "characters")
        phone = {
            "context": ("7–15 digits in groups; strongly formatted numbers (an international + prefix, NANP "
                        "(NXX) NXX-XXXX) anywhere, other digit groups only within "
                        f"{w} characters of a phone cue (phone, tel, mobile, call, contact, number, …)"),
            "strict": "7–15 digits, strongly formatted only (an international + prefix or a NANP number)",
            "loose": "any grouped 7–15-digit number that is not a date or an IP address",
        }[self.phone_mode]
        rules = {
            "EMAIL": "local@domain.tld with a top-level domain of at least 2 letters",
            "URL": "http(s)://, ftp:// or www. followed by a host with a dot",
            "IBAN": "country code, the country's length and ISO 7064 mod 97 check digits",
            "IP_ADDRESS": "dotted-quad IPv4 (octets 0–255) and IPv6 addresses",
            "CREDIT_CARD": card,
            "US_SSN": ("AAA-GG-SSSS obeying the SSA rules (area not 000, 666 or 900–999, group not 00, serial not "
                       "0000, not a published sample number); nine solid digits only next to an SSN cue"),
            "DATE_OF_BIRTH": (f"a real calendar date preceded within {w} characters by a birth cue (DOB, date of "
                              "birth, born, …)" + ("; every other date is a DATE secret" if self.dates == "all"
                                                   else "")),
            "PHONE": phone,
        }
        return [f"{e}: {rules[e]}." for e in self.entities]

    # ------------------------------------------------------------------------------------------ API

    def find(self, text: str) -> list[tuple[int, int, str, str]]:
        """``(start, end, type, canonical value)`` for each PII mention in ``text``, by position."""
        cands: list[Candidate] = []
        ctx: dict[str, Any] = {}
        has_digit = _DIGIT.search(text) is not None
        for kind, f in self._finders:
            # cheap prefilters: most texts have no '@', no URL marker, or no digit at all
            if kind == "EMAIL" and "@" not in text:
                continue
            if kind == "URL" and "://" not in text and "www." not in text.lower():
                continue
            if kind in _NEEDS_DIGIT and not has_digit:
                continue
            if kind == "IP_ADDRESS" and not has_digit and ":" not in text:  # IPv6 may be all hex letters
                continue
            cands.extend(f(text, ctx))
        cands.sort(key=lambda c: (_PRIORITY[c[2]], c[0], -(c[1] - c[0])))
        accepted: list[Candidate] = []
        seen: set[tuple[int, int, str]] = set()
        for c in cands:
            if c[:3] in seen:
                continue
            if c[2] not in _FREE and any(a[0] < c[1] and c[0] < a[1] for a in accepted):
                continue
            accepted.append(c)
            seen.add(c[:3])
        accepted.sort(key=lambda c: (c[0], c[1]))
        out = []
        for s, e, t, v in accepted:
            if t in ("DATE", "DATE_OF_BIRTH"):
                value = canonical_date(v, dayfirst=self.dayfirst)
            else:
                value = canonicalize(t, v)
            out.append((s, e, t, value))
        return out

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        """What this detector itself finds (:meth:`detect` adds every other record holding a found value)."""
        texts = as_texts(texts)
        return from_mentions((self.find(t) for t in texts), len(texts))


def _iban_cuts(v: str) -> list[int]:
    """Candidate end positions for an IBAN match: the whole match, then shorter ends at spaces."""
    cuts = [len(v)]
    for k in range(len(v) - 1, 0, -1):
        if v[k] == " ":
            cuts.append(k)
    return cuts
