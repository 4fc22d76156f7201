"""build_detector specs, errors, the union detector, and a contract every built-in light detector passes."""

from __future__ import annotations

import pytest

from privtext.data import Corpus
from privtext.errors import ConfigError, UnknownNameError
from privtext.secrets import (
    SECRET_DETECTORS,
    SecretDetector,
    SecretMatrix,
    UnionDetector,
    build_detector,
    detect_and_split,
    detector_options,
)
from privtext.secrets.canonical import canonicalize

TEXTS = [
    "Email Ann.Lee@Example.com about Project Falcon.",
    "Nothing to see here, just a review of a quiet cafe.",
    "Call (415) 555-2671 or write ann.lee@example.com",
    "The falcon flew over the cafe at dawn.",
    "",
    "card 4111 1111 1111 1111 and SSN 123-45-6788",
]

LIGHT_SPECS = [
    "regex",
    {"name": "explicit", "secrets": ["Project Falcon", "cafe"]},
    {"name": "random_words", "quantile": 0.5, "num_secrets": 3, "min_length": 4, "from_private": True},
    ["regex", {"name": "explicit", "secrets": ["falcon"]}],
]


@pytest.mark.parametrize("spec", LIGHT_SPECS, ids=lambda s: str(s)[:40])
def test_detector_contract(spec) -> None:
    det = build_detector(spec)
    assert isinstance(det, SecretDetector) and isinstance(det.name, str) and det.name
    m = det.detect(TEXTS)
    assert isinstance(m, SecretMatrix) and m.n_records == len(TEXTS)
    assert m.spans is not None and len(m.spans) == len(TEXTS)
    for i, rec in enumerate(m.spans):
        held = set(m.secrets_of(i).tolist())
        assert {s.secret for s in rec} == held  # every span's secret is held, every held secret has a span
        for s in rec:
            assert 0 <= s.start < s.end <= len(TEXTS[i])
            assert m.types[s.secret] == s.type
            if s.type not in ("EXPLICIT", "RANDOM_WORD"):
                assert canonicalize(s.type, TEXTS[i][s.start:s.end]) == m.secrets[s.secret]
    assert not m.private_mask()[4]  # the empty text holds nothing
    assert det.detect([]).n_records == 0
    # a Corpus is accepted wherever texts are
    assert det.detect(Corpus.from_texts(TEXTS[:2])).n_records == 2


def test_union_is_the_union_of_its_parts() -> None:
    a = build_detector("regex").detect(TEXTS)
    b = build_detector({"name": "explicit", "secrets": ["falcon"]}).detect(TEXTS)
    u = build_detector(["regex", {"name": "explicit", "secrets": ["falcon"]}])
    assert isinstance(u, UnionDetector) and u.name == "union(regex,explicit)"
    m = u.detect(TEXTS)
    assert m.n_secrets == a.n_secrets + b.n_secrets
    assert (m.private_mask() == (a.private_mask() | b.private_mask())).all()
    assert m.private_mask().tolist() == [True, False, True, True, False, True]
    same = build_detector({"name": "union", "detectors": ["regex", {"name": "explicit", "secrets": ["falcon"]}]})
    assert same.detect(TEXTS).secrets == m.secrets


def test_names_and_aliases_resolve() -> None:
    assert set(SECRET_DETECTORS.names()) >= {"regex", "explicit", "random_words", "presidio", "hf", "union"}
    assert build_detector("pii").name == "regex"
    assert build_detector({"name": "Random-Words", "from_private": True}).name == "random_words"
    assert "phone_mode" in detector_options("regex")
    det = build_detector("regex")
    assert build_detector(det) is det


def test_unknown_detector_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError, match="regexp") as e:
        build_detector("regexp")
    assert "regex" in str(e.value) and "random_words" in str(e.value)
    with pytest.raises(UnknownNameError):
        build_detector(["regex", "nope"])


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"name": "regex", "phone_mod": "strict"}, r"'phone_mod' \(did you mean 'phone_mode'\?\)"),
        ({"name": "random_words", "quantiles": 0.2}, "quantiles"),
        ({"name": "explicit", "secrets": ["a"], "colour": 1}, "colour.*valid options: secrets"),
        ({"phone_mode": "strict"}, "'name'"),
        ({"name": "hf"}, "needs option.*'model'"),
        ([], "at least one"),
        (42, "int"),
        ({"name": 3}, "string"),
        ({"name": "union", "detectors": "regex"}, "list"),
    ],
)
def test_bad_specs_name_the_problem(spec, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_detector(spec)


def test_detect_and_split() -> None:
    corpus = Corpus.from_texts(TEXTS[:4], ids=["a", "b", "c", "d"])
    pub, priv, m = detect_and_split(corpus, "regex")
    assert pub.ids == ("b", "d") and priv.ids == ("a", "c") and m.n_records == 2
