"""privacy.json is shareable: every number in it is a configured parameter, a released noisy value or a listed
assumption — never an exact statistic of the private data.

The test runs one configuration on two private corpora of different size and content and compares the two
statements after masking released values and assumptions: anything else that differs was computed from the
private data. Exact counts go to private/diagnostics.json, which must hold them."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.data import Corpus
from privtext.testing.tinyrun import tiny_run, toy_corpora

MASK = "<masked>"


def _numbers(x: Any) -> list[float]:
    if isinstance(x, bool) or x is None:
        return []
    if isinstance(x, (int, float)):
        return [float(x)]
    if isinstance(x, dict):
        return [n for v in x.values() for n in _numbers(v)]
    if isinstance(x, list):
        return [n for v in x for n in _numbers(v)]
    return []


def _skeleton(st: dict[str, Any]) -> Any:
    """The statement with released values and assumed-public values masked wherever they occur."""
    masked = set(_numbers(st.get("released"))) | set(_numbers([a["value"] for a in st.get("assumed_public", [])]))

    def walk(x: Any) -> Any:
        if isinstance(x, bool) or x is None:
            return x
        if isinstance(x, (int, float)):
            return MASK if any(math.isclose(float(x), m, rel_tol=1e-9) for m in masked) else x
        if isinstance(x, str):
            for m in masked:  # numbers quoted in the words (e.g. σ in "Assumed public: noise_std = 2.5"), whole
                # numbers only: a released count of 20 is not the 20 of "ChaCha20"
                x = re.sub(rf"(?<![\w.]){re.escape(f'{m:.4g}')}(?![\w]|\.\d)", MASK, x)
            return x
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k != "released"}
        return [walk(v) for v in x]

    return walk(st)


def _with_emails(c: Corpus, every: int, rng: np.random.Generator) -> Corpus:
    """Plant e-mail addresses (secrets for the regex detector) in every ``every``-th record; a handful of
    addresses, some repeated, so groups of holders exist."""
    texts = list(c.texts)
    for i in range(0, len(texts), every):
        texts[i] += f" contact user{int(rng.integers(0, 4))}@example.org"
    return Corpus(c.ids, tuple(texts), c.labels, name=c.name)


def _pair(tmp: Path, method: str, **kw: Any) -> tuple[dict[str, Any], dict[str, Any], Path, Path]:
    out = []
    for n, seed in ((37, 1), (53, 2)):
        rng = np.random.default_rng(seed)
        priv, pub, _ = toy_corpora(rng=rng, n_private=n, n_pool=120)
        if method == "secpe" or kw.get("augpe", {}).get("sensitivity") == "secret_group":
            priv = _with_emails(priv, 3, rng)
        run = tiny_run(tmp / f"{method}-{n}", private=priv, public=pub, method=method, seed=7, **kw)
        out.append(run)
    a, b = (json.loads((r / "privacy.json").read_text()) for r in out)
    return a, b, out[0], out[1]


@pytest.mark.parametrize("case", ["dp_labels", "gdp_record", "secpe", "dpkps"])
def test_statement_depends_on_private_data_only_through_released_values_and_assumptions(
        tmp_path: Path, case: str) -> None:
    if case == "dp_labels":
        kw: dict[str, Any] = {"privacy": {"epsilon": 4.0, "delta": 1e-5},
                              "evolution": {"label_distribution": {"kind": "dp"}}}
        method = "augpe"
    elif case == "gdp_record":
        kw, method = {"privacy": {"secret": {"p": 1e-3, "r": 2e-2}}}, "augpe"
    elif case == "dpkps":
        kw = {"privacy": {"epsilon": 6.0}, "evolution": {"label_distribution": {"kind": "dp"}},
              "dpkps": {"vocab_size": 15, "length": 4, "n_features": 32, "vocabulary_min_count": 3}}
        method = "dpkps"
    else:
        kw, method = {"secpe": {"detector": "regex", "clusters": 6}}, "secpe"
    a, b, ra, rb = _pair(tmp_path, method, **kw)
    assert _skeleton(a) == _skeleton(b)
    # the exact counts are kept — privately
    da, db = (json.loads((r / "private" / "diagnostics.json").read_text()) for r in (ra, rb))
    assert da["records"]["private"] != db["records"]["private"] or method == "secpe"
    if case == "dpkps":
        assert a["released"]["dp_vocabulary"] and a["guarantee"]["kind"] == "pure"
    if case in ("dp_labels", "dpkps"):
        assert a["released"]["label_histogram"] and a["released"] != b["released"]
        # released noisy values are rounded before they leave private/ (floating-point attacks)
        for v in a["released"]["label_histogram"].values():
            assert v == float(f"{v:.4g}")
    for st in (a, b):
        text = json.dumps(st)
        for n in (37, 53):
            assert f": {n}," not in text and f": {n}}}" not in text  # no exact N anywhere


def test_reproducible_noise_says_not_private_first(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    priv, pub, _ = toy_corpora(rng=rng, n_private=30, n_pool=100)
    run = tiny_run(tmp_path / "r", private=priv, public=pub, privacy={"mu": 1.0, "reproducible_noise": True})
    st = json.loads((run / "privacy.json").read_text())
    assert st["private"] is False and st["statement"].startswith("NOT PRIVATE")
    assert st["noise"]["reproducible"] is True
    run2 = tiny_run(tmp_path / "s", private=priv, public=pub, privacy={"mu": 1.0})
    st2 = json.loads((run2 / "privacy.json").read_text())
    assert st2["private"] is True and st2["headline"].startswith("1-Gaussian differential privacy")
    assert "ChaCha20" in st2["noise"]["source"]


def test_default_noise_is_not_reproducible(tmp_path: Path) -> None:
    """Same seed, same data, default configuration: the released histograms differ (noise from OS entropy), while
    with reproducible_noise they are identical."""
    rng = np.random.default_rng(0)
    priv, pub, _ = toy_corpora(rng=rng, n_private=30, n_pool=100)

    def first_release(name: str, **privacy: Any) -> np.ndarray:
        run = tiny_run(tmp_path / name, private=priv, public=pub, iterations=1, privacy={"mu": 1.0, **privacy})
        with np.load(run / "private" / "checkpoints" / "iter_000" / "releases" / "votes_iter_000.npz") as z:
            return z["raw_noisy"]

    a, b = first_release("a"), first_release("b")
    assert not np.array_equal(a, b)
    c, d = first_release("c", reproducible_noise=True), first_release("d", reproducible_noise=True)
    assert np.array_equal(c, d)


def test_subsample_is_stated_as_the_guarantee_scope(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    priv, pub, _ = toy_corpora(rng=rng, n_private=40, n_pool=100)
    run = tiny_run(tmp_path / "sub", private=priv, public=pub, data={"max_private": 25})
    st = json.loads((run / "privacy.json").read_text())
    assert any("random sample of 25 private records" in c for c in st["coverage"])
    assert "no guarantee is stated for adding or removing a record of the input file" in st["statement"]
    diag = json.loads((run / "private" / "diagnostics.json").read_text())
    assert diag["records"]["private"] == 25
