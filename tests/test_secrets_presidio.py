"""The ``presidio`` detector, offline (presidio-analyzer is in the [dev] extra: these tests run in CI — a
detector that cut long texts short would move secrets into the public split)."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("presidio_analyzer")

from privtext.errors import ConfigError
from privtext.secrets import build_detector

TEXTS = [
    "Write to ann.lee@example.com or call 212-555-1234.",
    "My social security number is 123-45-6788",
    "Nothing personal in this sentence.",
    "Pay with 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 7654 32, from 10.1.2.3",
]


@pytest.fixture(scope="module")
def presidio_blank():
    return build_detector({"name": "presidio"})


def test_finds_pattern_entities_without_network(presidio_blank, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("presidio detector tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    m = presidio_blank.detect(TEXTS)
    found = {(m.types[s.secret], m.secrets[s.secret]) for rec in m.spans for s in rec}
    assert ("EMAIL", "ann.lee@example.com") in found
    assert ("PHONE", "2125551234") in found
    assert ("US_SSN", "123456788") in found
    assert ("CREDIT_CARD", "4111111111111111") in found
    assert ("IBAN", "GB82WEST12345698765432") in found
    assert ("IP_ADDRESS", "10.1.2.3") in found
    assert m.private_mask().tolist() == [True, True, False, True]
    names = [type(r).__name__ for r in presidio_blank._analyzer.registry.recognizers]
    assert "OfflineEmailRecognizer" in names and "EmailRecognizer" not in names


def test_secrets_deep_in_long_texts_are_found(presidio_blank) -> None:
    long = "The patient was seen again today for a routine review. " * 400 + "Results to ann.lee@example.com."
    m = presidio_blank.detect([long])
    assert len(long) > 20000 and m.private_mask().tolist() == [True]
    assert ("EMAIL", "ann.lee@example.com") in {(m.types[s.secret], m.secrets[s.secret]) for s in m.spans[0]}


def test_entity_list_threshold_and_noop_engine() -> None:
    d = build_detector({"name": "presidio", "entities": ["EMAIL", "US_SSN"], "nlp": "none"})
    m = d.detect(TEXTS)
    assert set(m.types) <= {"EMAIL", "US_SSN"} and "EMAIL" in m.types
    # with no tokens the SSN keeps its pattern score (0.5); a threshold of 0.6 removes it, while the blank
    # engine's lower-cased lemmas let the context words ("social security") lift it above
    strict = build_detector({"name": "presidio", "entities": ["US_SSN"], "nlp": "none", "score_threshold": 0.6})
    assert not strict.detect(TEXTS[1:2]).private_mask().any()
    ctx = build_detector({"name": "presidio", "entities": ["US_SSN"], "score_threshold": 0.6})
    assert ctx.detect(TEXTS[1:2]).private_mask().all()


def test_errors() -> None:
    with pytest.raises(ConfigError, match="PERSON"):
        build_detector({"name": "presidio", "entities": ["PERSON"]})  # needs an NER model
    with pytest.raises(ConfigError, match="not installed"):
        build_detector({"name": "presidio", "nlp": "en_core_web_nonexistent"})
    with pytest.raises(ConfigError, match="score_threshold"):
        build_detector({"name": "presidio", "score_threshold": 2})
