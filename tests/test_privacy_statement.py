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


def released_numbers(st: dict[str, Any]) -> set[float]:
    """Every number under the statement's ``released`` key."""
    return set(_numbers(st.get("released")))


def masked_skeleton(st: dict[str, Any], also: set[float] = frozenset()) -> Any:  # type: ignore[assignment]
    """privacy.json with its released values and assumed-public values masked (numbers and their words).
    ``also``: more released values to mask in the words: the other statement's, so that a released count that
    happens to round to a whole number of the text (a released 20.0 and the ``num_samples: 20`` or "top 20" of a
    description) is masked in both statements, not in one only."""
    assumed = {float(a["value"]) for a in st.get("assumed_public", []) if isinstance(a["value"], (int, float))}
    released = released_numbers(st) | set(also)

    def walk(x: Any) -> Any:
        if isinstance(x, bool) or x is None:
            return x
        if isinstance(x, (int, float)):
            return "<assumed>" if any(math.isclose(float(x), m, rel_tol=1e-9) for m in assumed) else x
        if isinstance(x, str):
            for m in assumed | released:  # whole numbers only: a released 20 is not the 20 of "ChaCha20"
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
    both = released_numbers(a) | released_numbers(b)  # a released 20.00 and num_samples: 20 mask in both
    assert masked_skeleton(a, both) == masked_skeleton(b, both)
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


# ------------------------------------------------------------------------------- the statement in plain words
# (issue 35, item 5: a compliance officer's reading, computed from the numbers and checked against them here)

ALPHA = 0.01  # the membership test's false-accusation rate the words quote


def _parse_meaning(words: str) -> dict[str, Any]:
    """Every figure the plain words quote, read back from the sentence."""
    out: dict[str, Any] = {}
    m = re.search(r"factor of e\^([\d.e+-]+) ≈ ([\d.,e+]+)", words)
    if m:
        out["epsilon"], out["factor"] = float(m.group(1)), float(m.group(2).replace(",", ""))
    m = re.search(r"plus at most δ = ([\d.e+-]+) \(1 in ([\d,]+)\)", words)
    if m:
        out["delta"], out["one_in"] = float(m.group(1)), float(m.group(2).replace(",", ""))
    if "with no exception (δ = 0)" in words:
        out["delta"] = 0.0
    m = re.search(r"wrongly accuses at most ([\d.]+) %", words)
    if m:
        out["alpha"] = float(m.group(1)) / 100
    m = re.search(r"catches at most ([\d.]+) %", words)
    if m:
        out["caught"] = float(m.group(1)) / 100
    elif "may catch every one" in words:
        out["caught"] = 1.0
    elif "may catch over 99.9 %" in words:
        out["caught"] = "over 99.9 %"
    m = re.search(r"equivalently ε = ([\d.e+-]+) at δ = ([\d.e+-]+)", words)
    if m:
        out["gdp_epsilon"], out["gdp_delta"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"at most ([\d.e+-]+) \(1 in ([\d,]+)\) recovers it .* at most ([\d.e+-]+)(?: \(1 in [\d,]+\))?: at most "
                  r"([\d.e+-]+) times", words)
    if m:
        out["p"], out["r"], out["ratio"] = float(m.group(1)), float(m.group(3)), float(m.group(4))
    return out


def _close(a: float, b: float, digits: int = 3) -> bool:
    return math.isclose(a, float(f"{b:.{digits}g}"), rel_tol=1e-9, abs_tol=1e-12)


def _dp_caught(eps: float, delta: float, alpha: float) -> float:
    """Kairouz, Oh & Viswanath 2015 Thm 2.1, computed here from scratch: TPR ≤ e^ε·α + δ and
    FNR ≥ e^−ε·(1 − δ − α)."""
    return min(1.0, math.exp(eps) * alpha + delta, 1 - math.exp(-eps) * (1 - delta - alpha))


def _gdp_delta(eps: float, mu: float) -> float:
    from scipy.stats import norm

    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize("guarantee", [
    {"kind": "dp", "budget": {"epsilon": 4.0, "delta": 1e-5}},
    {"kind": "dp", "budget": {"epsilon": 0.5, "delta": 1e-6}},
    {"kind": "dp", "budget": {"epsilon": 1.0, "delta": 3e-6}},
    {"kind": "dp", "budget": {"epsilon": 8.0, "delta": 1e-5}},
    {"kind": "pure", "budget": {"epsilon": 6.0}},
    {"kind": "pure", "budget": {"epsilon": 0.1}},
    {"kind": "gdp", "budget": {"mu": 1.0, "report_delta": 1e-5}},
    {"kind": "gdp", "budget": {"mu": 0.3, "report_delta": 1e-6}},
    {"kind": "noise", "budget": {"noise_multiplier": 2.0},
     "reference": {"epsilon_at_report_delta": 2.9432258226159367, "report_delta": 1e-5}},
])
def test_the_plain_words_quote_the_guarantees_own_numbers(guarantee: dict[str, Any]) -> None:
    from scipy.stats import norm

    from privtext.privacy.statement import plain_meaning

    m = plain_meaning(guarantee)
    got = _parse_meaning(m["words"])
    b = guarantee["budget"]
    kind = guarantee["kind"]
    if kind == "gdp":
        mu, delta = b["mu"], b["report_delta"]
        eps = got["gdp_epsilon"]
        unit = 10 ** (math.floor(math.log10(eps)) - 3)  # ε is quoted to 4 significant digits: δ(ε) brackets δ
        assert got["gdp_delta"] == delta and _gdp_delta(eps + unit / 2, mu) <= delta <= _gdp_delta(eps - unit / 2, mu)
        assert math.isclose(got["epsilon"], eps) and got["delta"] == delta
        caught = float(norm.cdf(norm.ppf(ALPHA) + mu))  # the GDP test bound, exact
    else:
        eps = (guarantee["reference"]["epsilon_at_report_delta"] if kind == "noise" else b["epsilon"])
        delta = 0.0 if kind == "pure" else (guarantee.get("reference") or b).get("report_delta", b.get("delta"))
        assert _close(got["epsilon"], eps, 4) and got["delta"] == delta
        caught = _dp_caught(eps, delta, ALPHA)
    x = math.exp(got["epsilon"])
    assert got["factor"] == (float(f"{x:.3g}") if x < 1000 else round(x) if x < 1e6 else float(f"{x:.3g}"))
    if delta > 0:
        assert math.isclose(got["one_in"], round(1 / delta), rel_tol=1e-9)
    assert got["alpha"] == ALPHA
    assert caught >= 0.9995 if got["caught"] == "over 99.9 %" else _close(got["caught"], caught, 3)
    assert m["strength"] == "ok" and "weak" not in m["words"] and "nothing meaningful" not in m["words"]
    assert "one private record is in the data" in m["words"]


def test_the_plain_words_for_secret_protection_quote_p_and_r() -> None:
    from privtext.privacy.statement import plain_meaning

    for p, r in ((1e-3, 2e-2), (1e-4, 2e-4), (0.01, 0.05)):
        got = _parse_meaning(plain_meaning({"kind": "secret", "budget": {"p": p, "r": r}})["words"])
        assert got["p"] == p and got["r"] == r and _close(got["ratio"], r / p, 4)


@pytest.mark.parametrize("guarantee,strength", [
    ({"kind": "dp", "budget": {"epsilon": 10.0, "delta": 1e-5}}, "ok"),
    ({"kind": "dp", "budget": {"epsilon": 12.0, "delta": 1e-5}}, "weak"),
    ({"kind": "dp", "budget": {"epsilon": 1e9, "delta": 1e-5}}, "void"),
    ({"kind": "pure", "budget": {"epsilon": 25.0}}, "void"),
    ({"kind": "gdp", "budget": {"mu": 2.5, "report_delta": 1e-5}}, "weak"),
    ({"kind": "gdp", "budget": {"mu": 4.0, "report_delta": 1e-5}}, "void"),
    ({"kind": "noise", "budget": {}, "reference": {"epsilon_at_report_delta": 505000.0, "report_delta": 1e-5}},
     "void"),
    ({"kind": "secret", "budget": {"p": 1e-3, "r": 0.3}}, "weak"),
    ({"kind": "secret", "budget": {"p": 1e-3, "r": 0.6}}, "void"),
])
def test_a_budget_too_large_to_protect_is_called_so_in_the_words(guarantee: dict[str, Any], strength: str) -> None:
    from privtext.privacy.statement import plain_meaning

    m = plain_meaning(guarantee)
    assert m["strength"] == strength
    assert ("This is a weak guarantee" in m["words"]) == (strength == "weak")
    assert ("It protects nothing meaningful" in m["words"]) == (strength == "void")


def test_too_large_a_budget_is_refused_without_allow_weak_and_stated_with_it(tmp_path: Path) -> None:
    from privtext.config import config_from_dict
    from privtext.errors import ConfigError

    base = {"data": {"private": "p.csv"}}
    for privacy in ({"epsilon": 1e9, "delta": 1e-5}, {"epsilon": 21.0, "delta": 1e-5}, {"mu": 4.0},
                    {"secret": {"p": 1e-3, "r": 0.6}}):
        with pytest.raises(ConfigError, match=r"too large to protect anything meaningful.*privacy\.allow_weak"):
            config_from_dict({**base, "privacy": privacy})
        config_from_dict({**base, "privacy": {**privacy, "allow_weak": True}})
    for privacy in ({"epsilon": 12.0, "delta": 1e-5}, {"epsilon": 20.0, "delta": 1e-5}, {"mu": 3.0}):
        config_from_dict({**base, "privacy": privacy})  # weak, not refused
    rng = np.random.default_rng(0)
    priv, pub, _ = toy_corpora(rng=rng, n_private=30, n_pool=100)
    run = tiny_run(tmp_path / "weak", private=priv, public=pub, iterations=1,
                   privacy={"epsilon": 1e9, "delta": 1e-5, "allow_weak": True})
    st = json.loads((run / "privacy.json").read_text())
    assert st["meaning"]["strength"] == "void" and "It protects nothing meaningful" in st["statement"]


@pytest.mark.parametrize("method", ["augpe", "secpe", "dpkps", "wasp"])
def test_every_methods_statement_reads_in_plain_words_with_clean_sentences(tmp_path: Path, method: str) -> None:
    """privacy.json's `meaning` is plain_meaning of its own guarantee and quotes its numbers; sections are joined
    without ".;"; what a method says about its scope is not headed "Not covered"; the public corpus is stated as
    public (issue 36: a public text equal to a private record)."""
    from privtext.privacy.statement import PUBLIC_CORPUS_ASSUMPTION, plain_meaning

    rng = np.random.default_rng(1)
    priv, pub, _ = toy_corpora(rng=rng, n_private=36, n_pool=120)
    kw: dict[str, Any] = {"privacy": {"epsilon": 4.0, "delta": 1e-5}}
    if method == "secpe":
        priv, kw = _with_emails(priv, 3, rng), {}
    elif method == "dpkps":
        kw = {"privacy": {"epsilon": 6.0}, "dpkps": {"vocab_size": 15, "length": 4, "n_features": 32}}
    run = tiny_run(tmp_path / method, private=priv, public=pub, method=method, iterations=2, **kw)
    st = json.loads((run / "privacy.json").read_text())
    assert st["meaning"] == json.loads(json.dumps(plain_meaning(st["guarantee"])))
    assert st["meaning"]["words"] in st["statement"]
    got = _parse_meaning(st["meaning"]["words"])
    b = st["guarantee"]["budget"]
    if method == "secpe":
        assert got["p"] == b["p"] and got["r"] == b["r"]
    else:
        assert _close(got["epsilon"], b["epsilon"], 4) and got["delta"] == b.get("delta", 0.0)
    assert ".;" not in st["statement"] and ". ;" not in st["statement"]
    assert "Not covered" not in st["statement"]
    if st["coverage"]:
        assert "Scope and limits: " in st["statement"]
    assert PUBLIC_CORPUS_ASSUMPTION in st["treated_as_public"]


def test_sections_join_phrases_and_sentences_without_a_dot_before_a_semicolon() -> None:
    """Items that end with their own full stop (dpft's, DP-KPS's) were joined into ".; "."""
    from privtext.privacy.statement import section_line, statement_words

    assert section_line("Treated as public (used without noise)", ["the public corpus.", "the label schema"]) == \
        "Treated as public (used without noise): the public corpus; the label schema."
    assert section_line("Scope and limits", ["The weights are not released.", "A record longer than 64 tokens "
                                             "contributes its first 64"]) == \
        "Scope and limits: The weights are not released. A record longer than 64 tokens contributes its first 64."
    st = {"headline": "(4, 1e-05)-differential privacy.", "guarantee": {"kind": "dp", "budget": {"epsilon": 4,
          "delta": 1e-5}}, "treated_as_public": ["the public corpus.", "the label schema."],
          "coverage": ["It covers the samples."], "assumed_public": []}
    words = statement_words(st)
    assert ".;" not in words and "Not covered" not in words and "Scope and limits: It covers the samples." in words
    assert words.index("What ε = 4 means") < words.index("Treated as public")


def test_the_mu_thresholds_are_the_epsilon_thresholds_at_the_report_delta() -> None:
    """config.WEAK_MU / REFUSE_MU (config cannot import the privacy layer) are the μ whose ε at δ = 1e-5 is 10
    and 20 (GDP Remark C.1), so a μ budget is refused exactly where its (ε, 1e-5) form is."""
    from privtext.config import REFUSE_EPSILON, REFUSE_MU, WEAK_EPSILON, WEAK_MU, config_from_dict
    from privtext.errors import ConfigError
    from privtext.privacy.conversions import gdp_mu_for_dp

    assert math.isclose(WEAK_MU, gdp_mu_for_dp(WEAK_EPSILON, 1e-5), rel_tol=1e-6)
    assert math.isclose(REFUSE_MU, gdp_mu_for_dp(REFUSE_EPSILON, 1e-5), rel_tol=1e-6)
    base = {"data": {"private": "p.csv"}}
    assert config_from_dict({**base, "privacy": {"mu": REFUSE_MU * 0.999}}).privacy.strength()[0] == "weak"
    with pytest.raises(ConfigError, match=r"μ = 3\.451 \(its ε at δ = 1e-05 is above 20\)"):
        config_from_dict({**base, "privacy": {"mu": REFUSE_MU * 1.001}})
