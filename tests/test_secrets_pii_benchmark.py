"""Recall floors of the ``regex`` detector on presidio-research's synthetic PII (../shared/data/pii).

Span-level: a gold span is recalled when a predicted span of the mapped type overlaps it (see
privtext.secrets.evaluate). Skips when the shared data is absent.
"""

from __future__ import annotations

import pytest

from privtext.secrets import build_detector
from privtext.secrets.evaluate import load_presidio_research, score_spans

from .conftest import shared_file

FLOORS = {"EMAIL_ADDRESS": 0.9, "PHONE_NUMBER": 0.9, "CREDIT_CARD": 0.9, "US_SSN": 0.9, "IP_ADDRESS": 0.9}


@pytest.fixture(scope="module")
def pii_data(shared_data):
    path = shared_file("pii", "synth_dataset_v2.json")
    return load_presidio_research(path)


def test_regex_recall_floors_on_presidio_research(pii_data) -> None:
    texts, gold = pii_data
    assert len(texts) == 1500
    m = build_detector("regex").detect(texts)
    scores = score_spans(texts, gold, m)
    recall = {lab: scores["recall"][lab]["recall"] for lab in FLOORS}
    short = {lab: r for lab, r in recall.items() if r < FLOORS[lab]}
    assert not short, f"recall below floor: {short} (all: {recall})"
    assert scores["recall"]["IBAN_CODE"]["recall"] >= 0.9 and scores["recall"]["DOMAIN_NAME"]["recall"] >= 0.9
    # false-positive control: what regex predicts for these types is mostly gold
    for t in ("EMAIL", "PHONE", "CREDIT_CARD", "US_SSN", "IP_ADDRESS", "IBAN"):
        assert scores["precision"][t]["precision"] >= 0.9, (t, scores["precision"][t])


def test_regex_canonical_values_match_gold_values(pii_data) -> None:
    """Where a regex span exactly matches a gold span, the canonical value is the gold value canonicalised."""
    from privtext.secrets.canonical import canonicalize
    from privtext.secrets.evaluate import PRIVTEXT_TO_GOLD

    texts, gold = pii_data
    m = build_detector("regex").detect(texts[:500])
    checked = 0
    for i, rec in enumerate(m.spans):
        gspans = {(g.start, g.end): g.label for g in gold[i]}
        for s in rec:
            if gspans.get((s.start, s.end)) == PRIVTEXT_TO_GOLD.get(s.type):
                assert m.secrets[s.secret] == canonicalize(s.type, texts[i][s.start:s.end])
                checked += 1
    assert checked > 50
