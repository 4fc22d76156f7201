"""What a SecPE guarantee is conditional on: the public structure of the detector (issue 21, bug 4)."""

from __future__ import annotations

import pytest

from privtext.secrets import build_detector


def test_regex_structure_names_every_acceptance_rule() -> None:
    from privtext.secrets.structure import guarantee_structure

    st = guarantee_structure("regex")
    text = " ".join(st["accepted_values"])
    for rule in ("Luhn", "mod 97", "SSA rules", "phone cue", "birth cue", "issuer prefix"):
        assert rule in text, rule
    assert "ρ" in st["holder_structure"] and "σ" in st["holder_structure"]
    assert "conditional" in st["prior"] and st["depends_on_private_data"] is False
    assert st["detector"] == "regex"
    assert all(isinstance(s, str) and s.endswith(".") for s in st["sentences"])


def test_options_change_the_sentences() -> None:
    from privtext.secrets.structure import guarantee_structure

    strict = " ".join(guarantee_structure({"name": "regex", "phone_mode": "strict", "entities": ["PHONE"]})
                      ["accepted_values"])
    assert "phone cue" not in strict and "+" in strict and "Luhn" not in strict
    loose = " ".join(guarantee_structure({"name": "regex", "phone_mode": "loose"})["accepted_values"])
    assert "any grouped" in loose


def test_random_words_from_private_is_stated() -> None:
    from privtext.secrets.structure import guarantee_structure

    st = guarantee_structure(["regex", {"name": "random_words", "from_private": True}])
    assert st["depends_on_private_data"] is True
    assert any("private corpus's own" in s for s in st["sentences"])
    ref = guarantee_structure({"name": "random_words", "reference": ["alpha beta gamma", "beta delta"]})
    assert ref["depends_on_private_data"] is False


def test_explicit_and_user_detectors() -> None:
    from privtext.secrets.structure import guarantee_structure

    st = guarantee_structure({"name": "explicit", "secrets": ["Ann Lee", "Project Falcon"], "type": "NAME"})
    assert any("2 listed strings" in s for s in st["accepted_values"])
    assert "Ann" not in " ".join(st["sentences"])  # the strings themselves are never printed

    class Mine:
        name = "mine"

        def detect(self, texts):  # pragma: no cover - not called
            raise AssertionError

    st = guarantee_structure(build_detector(Mine()))
    assert any("mine" in s for s in st["accepted_values"])


@pytest.mark.parametrize("spec", ["regex", {"name": "explicit", "secrets": ["x"]}])
def test_built_detector_and_spec_give_the_same_words(spec: object) -> None:
    from privtext.secrets.structure import guarantee_structure

    assert guarantee_structure(spec) == guarantee_structure(build_detector(spec))
