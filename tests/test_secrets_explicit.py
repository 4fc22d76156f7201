"""The ``explicit`` detector: word boundaries, case, overlaps, files, scale."""

from __future__ import annotations

import re

import numpy as np
import pytest

from privtext.errors import ConfigError
from privtext.secrets.explicit import ExplicitDetector, trie_regex


def test_word_boundaries() -> None:
    d = ExplicitDetector(secrets=["Ann", "Project X"])
    m = d.detect(["Ann came", "Annual report", "JoAnn left", "ann.", "Project X1", "(Project X)", "Ann_b"])
    assert m.private_mask().tolist() == [True, False, False, True, False, True, False]
    loose = ExplicitDetector(secrets=["Ann"], whole_word=False).detect(["Annual report", "JoAnn"])
    assert loose.private_mask().tolist() == [True, True]


def test_secret_starting_with_punctuation_matches_after_a_word() -> None:
    d = ExplicitDetector(secrets=["+44 20", "#alpha"])
    assert [v for _, _, v in d.find("dial x+44 20 or tag#alpha")] == ["+44 20", "#alpha"]


def test_case_sensitivity() -> None:
    texts = ["ALICE was here", "alice", "Alice"]
    assert ExplicitDetector(secrets=["Alice"]).detect(texts).private_mask().tolist() == [True, True, True]
    d = ExplicitDetector(secrets=["Alice"], case_sensitive=True)
    assert d.detect_raw(texts).private_mask().tolist() == [False, False, True]
    # detect() then makes every record holding the value, case-folded, a holder too (the conservative side)
    assert d.detect(texts).private_mask().tolist() == [True, True, True]
    # case-insensitive duplicates are one secret, named as first listed
    m2 = ExplicitDetector(secrets=["Alice", "ALICE"]).detect(texts)
    assert m2.secrets == ("Alice",) and m2.holders(0).tolist() == [0, 1, 2]


def test_overlapping_and_nested_secrets_all_count() -> None:
    d = ExplicitDetector(secrets=["Ann", "Ann Lee", "Lee Road"])
    found = d.find("Ann Lee Road")
    assert sorted(v for _, _, v in found) == ["Ann", "Ann Lee", "Lee Road"]
    m = d.detect(["Ann Lee Road", "Ann Smith"])
    assert m.holders(m.index("Ann")).tolist() == [0, 1]
    assert m.spans[0][0][:3] == (0, 3, "EXPLICIT")


def test_spans_point_at_the_text() -> None:
    texts = ["x Falcon y falcon", "none"]
    m = ExplicitDetector(secrets=["Falcon"], type="PROJECT").detect(texts)
    assert [texts[0][s.start:s.end] for s in m.spans[0]] == ["Falcon", "falcon"]
    assert m.types == ("PROJECT",) and m.counts_by_type()["PROJECT"]["mentions"] == 2


def test_file_option(tmp_path) -> None:
    p = tmp_path / "secrets.txt"
    p.write_text("alpha\n\n  beta gamma  \n", encoding="utf-8")
    d = ExplicitDetector(file=p, secrets=["delta"])
    assert sorted(d.secrets) == ["alpha", "beta gamma", "delta"]
    with pytest.raises(ConfigError, match="does not exist"):
        ExplicitDetector(file=tmp_path / "nope.txt")


def test_errors() -> None:
    with pytest.raises(ConfigError, match="secrets"):
        ExplicitDetector()
    with pytest.raises(ConfigError, match="list of strings"):
        ExplicitDetector(secrets="alice")
    with pytest.raises(ConfigError, match=r"\[1\]"):
        ExplicitDetector(secrets=["a", 3])
    assert ExplicitDetector(secrets=[]).detect(["a", "b"]).shape == (2, 0)


def test_trie_regex_matches_exactly_the_words() -> None:
    words = ["a", "ab", "abc", "b.d", "x]y", "-", "^"]
    pat = re.compile("(?:" + trie_regex(words) + ")")
    for w in words:
        assert pat.fullmatch(w)
    for w in ["abd", "bxd", "x", ""]:
        assert not pat.fullmatch(w)


def test_thousands_of_secrets_scale() -> None:
    rng = np.random.default_rng(0)
    secrets = [f"cust{n:05d}" for n in rng.choice(100_000, size=5000, replace=False)]
    words = ["lorem", "ipsum", "dolor", "sit", "amet"]
    texts = []
    for i in range(3000):
        body = " ".join(rng.choice(words, size=40))
        texts.append(f"{body} {secrets[i]} {body}" if i % 3 == 0 else body)
    d = ExplicitDetector(secrets=secrets)

    class Counting:  # the one compiled trie pattern, wrapped to count scans
        def __init__(self, pat):
            self.pat, self.scans = pat, 0

        def finditer(self, text):
            self.scans += 1
            return self.pat.finditer(text)

    counting = Counting(d._pattern)
    d._pattern = counting
    m = d.detect(texts)
    assert m.private_mask().sum() == 1000
    assert m.n_secrets == 1000  # only held secrets get a column
    # 5000 secrets are one trie-shaped pattern, and each text is scanned once (not once per secret)
    assert counting.scans == len(texts)
