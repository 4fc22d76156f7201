"""Check digits, validity rules and canonical forms of PII values.

Canonicalisation makes the same secret written two ways one secret (one column of the
:class:`~privtext.secrets.matrix.SecretMatrix`):

========================  ==================================================================================
type                      canonical value
========================  ==================================================================================
``EMAIL``                 lower-cased address
``PHONE``                 digits only; a ``(0)`` trunk marker is dropped, an international ``+``/``00`` prefix is
                          dropped (the country code is kept), a NANP country code ``1`` is dropped, the extension
                          is dropped (the line is the secret)
``CREDIT_CARD``           digits only
``US_SSN``                nine digits
``IBAN``                  upper case, no spaces
``IP_ADDRESS``            :mod:`ipaddress`'s compressed form (IPv6 lower case, ``::`` compression)
``URL``                   host lower-cased without ``www.``, the path kept, no scheme, no trailing ``/``
``DATE_OF_BIRTH``/``DATE``  ISO ``YYYY-MM-DD``
other types               whitespace collapsed, case-folded
========================  ==================================================================================

Merging is the privacy-conservative direction: two records that share a merged value are treated as holding
the same secret, which only tightens SecPE's per-secret constraint.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import re

# ---------------------------------------------------------------------------------------------- check digits


def luhn_valid(number: str) -> bool:
    """Luhn (mod 10) check of the digits in ``number`` (separators ignored). Needs at least 2 digits."""
    digits = [int(c) for c in number if c.isdigit()]
    if len(digits) < 2:
        return False
    total = 0
    for k, d in enumerate(reversed(digits)):
        if k % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# Issuer identification: (prefix ranges as (low, high) over the first n digits, allowed lengths).
_CARD_ISSUERS: tuple[tuple[str, tuple[tuple[int, int, int], ...], tuple[int, ...]], ...] = (
    # name, ((n_digits, low, high), ...), lengths
    ("visa", ((1, 4, 4),), tuple(range(13, 20))),
    ("mastercard", ((2, 51, 55), (4, 2221, 2720)), (16,)),
    ("amex", ((2, 34, 34), (2, 37, 37)), (15,)),
    ("discover", ((4, 6011, 6011), (3, 644, 649), (2, 65, 65), (6, 622126, 622925)), tuple(range(16, 20))),
    ("diners", ((3, 300, 305), (4, 3095, 3095), (2, 36, 36), (2, 38, 39)), tuple(range(14, 20))),
    ("jcb", ((4, 3528, 3589),), tuple(range(16, 20))),
    ("jcb15", ((4, 2131, 2131), (4, 1800, 1800)), (15,)),
    ("maestro", ((2, 50, 50), (2, 56, 69)), tuple(range(12, 20))),
    ("unionpay", ((2, 62, 62), (2, 81, 81)), tuple(range(16, 20))),
    ("mir", ((4, 2200, 2204),), tuple(range(16, 20))),
    ("rupay", ((2, 60, 60), (2, 82, 82), (3, 508, 508)), (16,)),
)


def card_issuer(digits: str) -> str | None:
    """The card scheme whose issuer prefix and length ``digits`` fits, else ``None``."""
    n = len(digits)
    for name, prefixes, lengths in _CARD_ISSUERS:
        if n not in lengths:
            continue
        for k, lo, hi in prefixes:
            if n >= k and lo <= int(digits[:k]) <= hi:
                return name
    return None


def credit_card_valid(number: str, *, check_issuer: bool = True) -> bool:
    """A payment card number: 12–19 digits (12 only for Maestro), Luhn-valid, and (by default) a known
    issuer prefix for its length. Without the issuer check, 13–19 Luhn-valid digits pass."""
    digits = re.sub(r"[ \-]", "", number)
    if not digits.isdigit() or not 12 <= len(digits) <= 19:
        return False
    if not luhn_valid(digits):
        return False
    if check_issuer:
        return card_issuer(digits) is not None
    return len(digits) >= 13


# Known-invalid or publicly used example SSNs (advertising, Woolworth wallet card, "123-45-6789").
_SSN_BLOCKLIST = frozenset({"078051120", "219099999", "123456789"})


def ssn_valid(number: str) -> bool:
    """US Social Security Number rules: 9 digits; area (first 3) not 000, 666 or 900–999; group (middle 2)
    not 00; serial (last 4) not 0000; not one of the publicly used sample numbers."""
    digits = re.sub(r"[ \-]", "", number)
    if len(digits) != 9 or not digits.isdigit():
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9":
        return False
    if group == "00" or serial == "0000":
        return False
    return digits not in _SSN_BLOCKLIST


# IBAN lengths by country (SWIFT IBAN registry, plus countries using IBAN-format accounts in practice).
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
    "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
    # partial / national IBAN formats in use
    "AO": 25, "BF": 28, "BJ": 28, "CF": 27, "CG": 27, "CI": 28, "CM": 27, "CV": 25, "DZ": 26, "GA": 27,
    "GQ": 27, "GW": 25, "IR": 26, "KM": 27, "MA": 28, "MG": 27, "ML": 28, "MZ": 25, "NE": 28, "SN": 28,
    "TD": 27, "TG": 28,
}


def iban_mod97(iban: str) -> int:
    """ISO 7064 mod 97-10 of an IBAN (valid IBANs give 1). Letters count A=10 … Z=35."""
    s = re.sub(r"\s", "", iban).upper()
    rearranged = s[4:] + s[:4]
    rem = 0
    for ch in rearranged:
        if ch.isdigit():
            rem = (rem * 10 + int(ch)) % 97
        elif "A" <= ch <= "Z":
            rem = (rem * 100 + ord(ch) - 55) % 97
        else:
            return -1
    return rem


def iban_valid(iban: str, *, check_length: bool = True) -> bool:
    """Country code + 2 check digits + BBAN; correct length for the country; mod 97 == 1."""
    s = re.sub(r"\s", "", iban).upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", s):
        return False
    if check_length:
        want = IBAN_LENGTHS.get(s[:2])
        if want is None or len(s) != want:
            return False
    return iban_mod97(s) == 1


# ---------------------------------------------------------------------------------------------- canonical forms


def canonical_email(value: str) -> str:
    return value.strip().lower()


def canonical_phone(value: str) -> str:
    v = value.strip()
    v = re.split(r"(?i)\s*(?:ext\.?|extension|x|#)\s*\d+\s*$", v)[0]  # drop an extension
    v = v.replace("(0)", "")
    intl = v.startswith("+")
    digits = re.sub(r"\D", "", v)
    if not intl and digits.startswith("00") and len(digits) > 9:
        digits, intl = digits[2:], True
    # NANP: +1 NXX NXX XXXX, 1-NXX-..., 001-NXX-... all become the 10-digit national number
    nanp_prefix = intl or re.match(r"1[ .\-(]", v) is not None
    if nanp_prefix and len(digits) == 11 and digits[0] == "1" and digits[1] in "23456789":
        digits = digits[1:]
    return digits


def canonical_digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def canonical_iban(value: str) -> str:
    return re.sub(r"\s", "", value).upper()


def canonical_ip(value: str) -> str:
    try:
        return ipaddress.ip_address(value.strip()).compressed
    except ValueError:
        return value.strip().lower()


def canonical_url(value: str) -> str:
    v = value.strip().rstrip("/")
    v = re.sub(r"(?i)^[a-z][a-z0-9+.\-]*://", "", v)
    host, sep, rest = v.partition("/")
    host = host.lower()
    if host.startswith("www."):
        host = host[4:]
    return (host + sep + rest).rstrip("/")


def canonical_text(value: str) -> str:
    return " ".join(value.split()).casefold()


_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
         ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
         ("oct", "october"), ("nov", "november"), ("dec", "december")]
    )
    for m in names
}


def _year(y: str) -> int:
    n = int(y)
    if len(y) == 2:  # fixed pivot, so results do not depend on today's date
        n += 1900 if n > 30 else 2000
    return n


def parse_date(value: str, *, dayfirst: bool = False) -> _dt.date | None:
    """Parse the date formats the regex detector finds; ``None`` when the text is not a valid date.

    Numeric ``a/b/yyyy`` is month/day unless ``dayfirst`` (or unless ``a`` > 12, which can only be a day).
    Two-digit years ``yy`` are ``19yy`` when ``yy`` > 30, else ``20yy``.
    """
    v = value.strip().lower().replace(",", " ")
    m = re.fullmatch(r"(\d{4})[/.\-](\d{1,2})[/.\-](\d{1,2})", v)
    parts: tuple[int, int, int] | None = None
    if m:
        parts = (int(m[1]), int(m[2]), int(m[3]))
    else:
        m = re.fullmatch(r"(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{4}|\d{2})", v)
        if m:
            a, b, y = int(m[1]), int(m[2]), _year(m[3])
            if dayfirst:
                d, mo = a, b
                if mo > 12 and d <= 12:
                    d, mo = mo, d
            else:
                mo, d = a, b
                if mo > 12 and d <= 12:
                    d, mo = mo, d
            parts = (y, mo, d)
        else:
            m = re.fullmatch(r"([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?\s+(\d{4})", v)
            if m and m[1] in _MONTHS:
                parts = (int(m[3]), _MONTHS[m[1]], int(m[2]))
            else:
                m = re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+)\.?\s+(\d{4})", v)
                if m and m[2] in _MONTHS:
                    parts = (int(m[3]), _MONTHS[m[2]], int(m[1]))
    if parts is None:
        return None
    try:
        return _dt.date(*parts)
    except ValueError:
        return None


_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
#: the written dates :func:`parse_date` reads (``1990-05-17``, ``17/05/1990``, ``May 17, 1990``, ``17th of May 1990``)
DATE_PATTERN = re.compile(
    r"(?i)(?<![\w/.\-])(?:"
    r"\d{4}(?P<d1>[/.\-])\d{1,2}(?P=d1)\d{1,2}"
    r"|\d{1,2}(?P<d2>[/.\-])\d{1,2}(?P=d2)(?:\d{4}|\d{2})"
    rf"|{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+\d{{4}}"
    r")(?![\w]|[/.\-]\d)"
)


def canonical_date(value: str, *, dayfirst: bool = False) -> str:
    d = parse_date(value, dayfirst=dayfirst)
    return d.isoformat() if d is not None else canonical_text(value)


_CANONICAL = {
    "EMAIL": canonical_email,
    "PHONE": canonical_phone,
    "CREDIT_CARD": canonical_digits,
    "US_SSN": canonical_digits,
    "IBAN": canonical_iban,
    "IP_ADDRESS": canonical_ip,
    "URL": canonical_url,
    "DATE_OF_BIRTH": canonical_date,
    "DATE": canonical_date,
}


def canonicalize(entity_type: str, value: str) -> str:
    """The canonical value of ``value`` as a secret of type ``entity_type`` (see the module table)."""
    fn = _CANONICAL.get(entity_type, canonical_text)
    out = fn(value)
    return out if out else canonical_text(value)
