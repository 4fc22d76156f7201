"""Check digits, validity rules and canonical forms (privtext.secrets.canonical)."""

from __future__ import annotations

import pytest

from privtext.secrets.canonical import (
    canonical_phone,
    canonicalize,
    card_issuer,
    credit_card_valid,
    iban_mod97,
    iban_valid,
    luhn_valid,
    parse_date,
    ssn_valid,
)

VALID_CARDS = [
    "4111111111111111",  # Visa 16
    "4222222222222",  # Visa 13
    "5500005555555559",  # Mastercard
    "2223003122003222",  # Mastercard 2-series
    "378282246310005",  # Amex 15
    "6011111111111117",  # Discover
    "3530111333300000",  # JCB
    "30569309025904",  # Diners 14
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
]


@pytest.mark.parametrize("number", VALID_CARDS)
def test_valid_card_numbers_pass(number: str) -> None:
    assert luhn_valid(number)
    assert credit_card_valid(number)


@pytest.mark.parametrize(
    "number",
    [
        "4111111111111112",  # Luhn fails (last digit off by one)
        "4111111111111121",  # two digits swapped: Luhn catches adjacent transpositions
        "1234567812345670",  # Luhn-valid but no issuer has prefix 12
        "41111111111",  # too short
        "41111111111111111111",  # 20 digits: too long
    ],
)
def test_invalid_card_numbers_fail(number: str) -> None:
    assert not credit_card_valid(number)


def test_luhn_known_values() -> None:
    assert luhn_valid("79927398713")  # the textbook example
    assert not luhn_valid("79927398710")
    assert luhn_valid("1234567812345670")
    assert not luhn_valid("7")  # fewer than two digits is never valid


def test_issuer_check_can_be_turned_off() -> None:
    assert card_issuer("1234567812345670") is None
    assert not credit_card_valid("1234567812345670")
    assert credit_card_valid("1234567812345670", check_issuer=False)
    assert card_issuer("378282246310005") == "amex"
    assert card_issuer("37828224631000") is None  # Amex prefix but 14 digits


@pytest.mark.parametrize(
    "iban",
    [
        "GB82WEST12345698765432",
        "GB82 WEST 1234 5698 7654 32",
        "DE89370400440532013000",
        "FR1420041010050500013M02606",
        "NL91ABNA0417164300",
        "BE68539007547034",
        "NO9386011117947",
        "gb82west12345698765432",  # case does not matter
    ],
)
def test_valid_ibans_pass(iban: str) -> None:
    assert iban_mod97(iban) == 1
    assert iban_valid(iban)


@pytest.mark.parametrize(
    "iban",
    [
        "GB82WEST12345698765433",  # check digits fail mod 97
        "GB83WEST12345698765432",
        "DE8937040044053201300",  # one character short for DE
        "XX89370400440532013000",  # unknown country
        "GB82-WEST-1234",  # not an IBAN shape
    ],
)
def test_invalid_ibans_fail(iban: str) -> None:
    assert not iban_valid(iban)


@pytest.mark.parametrize("ssn", ["123-45-6788", "001-01-0001", "772 12 3456", "665123456", "899-99-9999"])
def test_valid_ssns_pass(ssn: str) -> None:
    assert ssn_valid(ssn)


@pytest.mark.parametrize(
    "ssn",
    [
        "000-12-3456",  # area 000
        "666-12-3456",  # area 666
        "900-12-3456",  # area 9xx
        "999-12-3456",
        "123-00-4567",  # group 00
        "123-45-0000",  # serial 0000
        "078-05-1120",  # the Woolworth wallet card
        "123-45-678",  # 8 digits
    ],
)
def test_invalid_ssns_fail(ssn: str) -> None:
    assert not ssn_valid(ssn)


@pytest.mark.parametrize(
    ("typ", "variants"),
    [
        ("EMAIL", ["Ann.Lee@Example.COM", "ann.lee@example.com", " ANN.LEE@EXAMPLE.COM "]),
        ("PHONE", ["(415) 555-2671", "415-555-2671", "415.555.2671", "+1 415 555 2671", "1-415-555-2671",
                   "001-415-555-2671", "415-555-2671 x12"]),
        ("PHONE", ["+41 (0)69 979 80 58", "+41 69 979 80 58", "0041 69 979 80 58"]),
        ("CREDIT_CARD", ["4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111"]),
        ("US_SSN", ["123-45-6788", "123 45 6788", "123456788"]),
        ("IBAN", ["GB82 WEST 1234 5698 7654 32", "gb82west12345698765432"]),
        ("IP_ADDRESS", ["2001:DB8:0:0:0:0:0:1", "2001:db8::1", "2001:0db8::0001"]),
        ("URL", ["https://www.Example.com/Path/", "http://example.com/Path", "www.EXAMPLE.com/Path"]),
        ("DATE_OF_BIRTH", ["03/04/1985", "March 4, 1985", "4th of March 1985", "1985-03-04"]),
        ("PERSON", ["Ann  Lee", "ann lee", "ANN LEE"]),
    ],
)
def test_canonicalisation_merges_variants(typ: str, variants: list[str]) -> None:
    values = {canonicalize(typ, v) for v in variants}
    assert len(values) == 1, values


def test_canonicalisation_keeps_distinct_values_apart() -> None:
    assert canonicalize("PHONE", "415-555-2671") != canonicalize("PHONE", "415-555-2672")
    assert canonicalize("URL", "example.com/a") != canonicalize("URL", "example.com/A")  # paths are case-sensitive
    assert canonical_phone("+44 20 7946 0958") == "442079460958"
    assert canonicalize("US_SSN", "123-45-6788") == "123456788"


def test_parse_date_rules() -> None:
    assert parse_date("03/04/1985").isoformat() == "1985-03-04"  # month first by default
    assert parse_date("03/04/1985", dayfirst=True).isoformat() == "1985-04-03"
    assert parse_date("25/12/1990").isoformat() == "1990-12-25"  # 25 can only be a day
    assert parse_date("02/30/1990") is None  # no such day
    assert parse_date("5/5/37").isoformat() == "1937-05-05"  # two-digit year pivot: > 30 → 19yy
    assert parse_date("5/5/21").isoformat() == "2021-05-05"
