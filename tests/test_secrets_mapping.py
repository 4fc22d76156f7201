"""Fast checks of how backend outputs (HF pipeline entities, Presidio results) become mentions — no heavy imports."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from privtext.errors import BackendError
from privtext.secrets.hf import base_label, entities_to_mentions
from privtext.secrets.presidio import results_to_mentions


def test_base_label_strips_bio_prefixes() -> None:
    assert [base_label(x) for x in ["B-PER", "I-per", "E-LOC", "S-ORG", "L-X", "U-Y", "O", "EMAIL"]] == [
        "PER", "PER", "LOC", "ORG", "X", "Y", "O", "EMAIL"
    ]


def test_entities_to_mentions_maps_types_trims_and_canonicalises() -> None:
    text = "Ann Lee  mailed ANN@X.ORG from 10.0.0.1"
    ents = [
        {"entity_group": "EMAIL", "score": 0.99, "start": 15, "end": 25},  # " ANN@X.ORG" with a leading space
        {"entity_group": "PER", "score": 0.9, "start": 0, "end": 9},  # "Ann Lee  " with trailing spaces
        {"entity_group": "IPV4", "score": 0.3, "start": 31, "end": 39},  # below the threshold
    ]
    out = entities_to_mentions(text, ents, score_threshold=0.5)
    assert out == [(0, 7, "PERSON", "ann lee"), (16, 25, "EMAIL", "ann@x.org")]
    assert entities_to_mentions(text, ents, score_threshold=0.5, entities=["EMAIL"]) == [
        (16, 25, "EMAIL", "ann@x.org")
    ]
    assert entities_to_mentions(text, ents)[-1] == (31, 39, "IP_ADDRESS", "10.0.0.1")
    with pytest.raises(BackendError, match="offsets"):
        entities_to_mentions(text, [{"entity_group": "PER", "score": 1.0, "start": None, "end": None}])


@dataclass
class _Result:  # the attributes of presidio's RecognizerResult that matter
    entity_type: str
    start: int
    end: int
    score: float = 1.0


def test_presidio_results_are_renamed_and_canonicalised() -> None:
    text = "Call 415.555.2671 or mail Ann@X.org; IBAN GB82 WEST 1234 5698 7654 32"
    res = [_Result("EMAIL_ADDRESS", 26, 35), _Result("PHONE_NUMBER", 5, 17), _Result("IBAN_CODE", 42, 69)]
    assert results_to_mentions(text, res) == [
        (5, 17, "PHONE", "4155552671"),
        (26, 35, "EMAIL", "ann@x.org"),
        (42, 69, "IBAN", "GB82WEST12345698765432"),
    ]
