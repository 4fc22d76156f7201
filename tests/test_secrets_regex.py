"""The ``regex`` PII detector: what it finds, what it refuses, canonical merging across records."""

from __future__ import annotations

import pytest

from privtext.errors import ConfigError
from privtext.secrets.pii_regex import RegexDetector


def _found(text: str, **opts) -> list[tuple[str, str, str]]:
    """(type, matched text, canonical value) per mention."""
    return [(t, text[s:e], v) for s, e, t, v in RegexDetector(**opts).find(text)]


def _types(text: str, **opts) -> list[str]:
    return [t for t, _, _ in _found(text, **opts)]


def test_email() -> None:
    assert _found("write to Ann.Lee+news@Mail.Example.co.uk, thanks.") == [
        ("EMAIL", "Ann.Lee+news@Mail.Example.co.uk", "ann.lee+news@mail.example.co.uk")
    ]
    assert _types("not an address: a@b or @handle or x@y.z") == []


@pytest.mark.parametrize(
    "text",
    ["call 415-555-2671 now", "(415) 555-2671", "415.555.2671", "+1 415 555 2671", "+44 20 7946 0958",
     "+41 (0)69 979 80 58", "001-415-555-2671", "415-555-2671x459"],
)
def test_phone_strong_formats_need_no_context(text: str) -> None:
    assert _types(text) == ["PHONE"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Phone: 0490 75 40 81", ["PHONE"]),
        ("Mobile:\n467 3395", ["PHONE"]),
        ("can someone call me on 9472 7916?", ["PHONE"]),
        ("085 175 7641-Office", ["PHONE"]),  # cue after the number
        ("0490 75 40 81", []),  # weak format, no cue: refused (false-positive control)
        ("we sold 1200 300 units in 2019", []),
        ("order 5403926876 shipped", []),
        ("123-456-7890", []),  # NANP area code cannot start with 1 and there is no cue
    ],
)
def test_phone_weak_formats_need_a_cue(text: str, expected: list[str]) -> None:
    assert _types(text) == expected


def test_phone_modes() -> None:
    assert _types("Phone: 0490 75 40 81", phone_mode="strict") == []
    assert _types("0490 75 40 81", phone_mode="loose") == ["PHONE"]
    assert _types("call me: 2020-01-15", phone_mode="loose") == []  # a date is never a phone


def test_credit_cards_need_luhn() -> None:
    assert _found("card 4111 1111 1111 1111 ok") == [("CREDIT_CARD", "4111 1111 1111 1111", "4111111111111111")]
    assert _types("card 4111 1111 1111 1112 ok") == []  # Luhn fails
    assert _types("amex 3782-822463-10005") == ["CREDIT_CARD"]
    assert _types("ref 060426070011 shipped") == []  # Luhn-valid, no issuer prefix, no card cue
    assert _types("credit card 060426070011") == ["CREDIT_CARD"]  # ... a card cue admits it
    assert _types("4111 1111-1111 1111") == []  # inconsistent separators are not a card


def test_ssn_rules_and_formats() -> None:
    assert _found("SSN 123-45-6788.") == [("US_SSN", "123-45-6788", "123456788")]
    assert _types("id 666-45-6788") == [] and _types("id 123-00-6788") == [] and _types("x 123-45-0000") == []
    assert _types("id 123456788 here") == []  # nine solid digits only with an SSN cue
    assert _types("social security number: 123456788") == ["US_SSN"]


def test_ip_addresses() -> None:
    assert _found("from 192.168.0.1.") == [("IP_ADDRESS", "192.168.0.1", "192.168.0.1")]
    assert _types("bad 256.1.1.1 and 1.2.3.4.5 and v1.2.3") == []
    assert _found("v6 2001:0DB8:0:0:0:0:0:1 here") == [("IP_ADDRESS", "2001:0DB8:0:0:0:0:0:1", "2001:db8::1")]
    assert _types("at 12:45:18 sharp") == []  # a time is not an IPv6 address


def test_iban_needs_mod97() -> None:
    assert _found("IBAN GB82 WEST 1234 5698 7654 32 please") == [
        ("IBAN", "GB82 WEST 1234 5698 7654 32", "GB82WEST12345698765432")
    ]
    assert _types("IBAN GB82 WEST 1234 5698 7654 33 please") == []


def test_urls_strip_trailing_punctuation() -> None:
    assert _found("see https://www.Example.com/a_(b)). Next") == [
        ("URL", "https://www.Example.com/a_(b)", "example.com/a_(b)")
    ]
    assert _types("www.nodot") == []


def test_dates_of_birth_need_a_cue_unless_all_dates() -> None:
    text = "DOB: 03/04/1985; visited 2020-01-15"
    assert _found(text) == [("DATE_OF_BIRTH", "03/04/1985", "1985-03-04")]
    assert _types(text, dates="all") == ["DATE_OF_BIRTH", "DATE"]
    assert _types(text, dates="none") == []
    assert _found("born on 4th of March 1985") == [("DATE_OF_BIRTH", "4th of March 1985", "1985-03-04")]
    assert _types("born 02/30/1985") == []  # not a real date


def test_overlaps_resolved_by_priority() -> None:
    # an SSN-shaped number is not also a phone; an IP is not also a phone
    assert _types("Phone or SSN: 123-45-6788") == ["US_SSN"]
    assert _types("tel 192.168.100.200") == ["IP_ADDRESS"]


def test_same_secret_written_two_ways_is_one_secret() -> None:
    texts = ["Reach me at (415) 555-2671.", "my cell: +1 415.555.2671", "mail ANN@X.ORG", "ann@x.org", "none"]
    m = RegexDetector().detect(texts)
    assert m.n_secrets == 2
    assert m.holders(m.index("4155552671")).tolist() == [0, 1]
    assert m.holders(m.index("ann@x.org")).tolist() == [2, 3]
    assert m.private_mask().tolist() == [True, True, True, True, False]


def test_entities_option_and_errors() -> None:
    text = "ann@x.org 415-555-2671"
    assert _types(text, entities=["PHONE_NUMBER"]) == ["PHONE"]  # presidio-style names are accepted
    with pytest.raises(ConfigError, match="PASSPORT"):
        RegexDetector(entities=["PASSPORT"])
    with pytest.raises(ConfigError, match="phone_mode"):
        RegexDetector(phone_mode="lenient")
    with pytest.raises(ConfigError, match="dates"):
        RegexDetector(dates="some")


def test_trailing_number_groups_are_not_swallowed() -> None:
    assert _found("card 4111 1111 1111 1111 2 tickets") == [
        ("CREDIT_CARD", "4111 1111 1111 1111", "4111111111111111")
    ]
    assert _found("call me at 415-555-2671 2 times") == [("PHONE", "415-555-2671", "4155552671")]
