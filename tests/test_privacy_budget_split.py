"""The one budget-split object (privtext.privacy.budget.BudgetSplit): known splits of the methods, and refusals."""

from __future__ import annotations

import math

import pytest

from privtext.config import config_from_dict
from privtext.errors import ConfigError, InvalidPrivacyParameter
from privtext.methods.dpkps import DPKPSOptions
from privtext.methods.dpkps.method import budget_split
from privtext.privacy.budget import BudgetSplit


def test_pure_parts_add_up_and_are_kept_exactly() -> None:
    s = BudgetSplit.pure(6.0, {"labels": 0.6, "vocab": 0.9, "kde": 4.5})
    assert (s.epsilon("labels"), s.epsilon("vocab"), s.epsilon("kde")) == (0.6, 0.9, 4.5)
    with pytest.raises(InvalidPrivacyParameter, match=r"add up to 6\.1"):
        BudgetSplit.pure(6.0, {"vocab": 1.6, "kde": 4.5})
    with pytest.raises(InvalidPrivacyParameter, match="no budget part 'x'"):
        s.epsilon("x")
    with pytest.raises(InvalidPrivacyParameter, match="use epsilon"):
        s.mu("vocab")


def test_gdp_parts_are_shares_of_mu_squared() -> None:
    s = BudgetSplit.gdp(2.0, {"labels": 0.1, "votes": 0.9})
    assert s.mu("labels") == pytest.approx(2 * math.sqrt(0.1)) and s.mu("votes") == pytest.approx(2 * math.sqrt(0.9))
    # μ-GDP composes as μ² sums: the parts compose back to the total
    assert math.hypot(s.mu("labels"), s.mu("votes")) == pytest.approx(2.0)
    # Aug-PE's label σ: 1/σ_l² = 0.1·μ², T/σ² = 0.9·μ²  ⇒  σ_l/σ = √(0.9/(0.1·T)) = 3 at T = 1
    assert s.noise_ratio("labels", "votes", compositions=1) == pytest.approx(3.0)


def _cfg(**kw: object) -> object:
    raw = {"method": "dpkps", "data": {"private": "p.csv", "label_columns": ["c"]}, "privacy": {"epsilon": 6.0},
           **kw}
    return config_from_dict(raw)


def test_dpkps_splits_its_epsilon_as_the_docstring_says() -> None:
    s = budget_split(_cfg(evolution={"label_distribution": {"kind": "dp", "budget_fraction": 0.1}}), DPKPSOptions())
    assert s.epsilon("labels") == pytest.approx(0.6)
    assert s.epsilon("vocab") == pytest.approx(5.4 / 6) and s.epsilon("kde") == pytest.approx(5.4 * 5 / 6)
    s = budget_split(_cfg(), DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=5.0))
    assert not s.has("labels") and (s.epsilon("vocab"), s.epsilon("kde")) == (1.0, 5.0)
    with pytest.raises(ConfigError, match=r"exceeds privacy\.epsilon"):
        budget_split(_cfg(), DPKPSOptions(epsilon_vocab=2.0, epsilon_kde=5.0))


def test_dpkps_splits_the_runs_budget_not_the_configured_epsilon() -> None:
    """ε reaches DP-KPS one way: its pure budget (``budget_of`` → ``self.budget``) is what the split divides."""
    from privtext.methods.dpkps.method import pure_budget
    from privtext.privacy.budget import Budget

    cfg = _cfg()
    assert pure_budget(cfg) == Budget.pure(6.0)
    s = budget_split(cfg, DPKPSOptions(), Budget.pure(3.0))  # a budget other than the configured ε = 6
    assert s.total == 3.0 and s.epsilon("vocab") == pytest.approx(0.5) and s.epsilon("kde") == pytest.approx(2.5)
    # (ε, δ) is held to pure ε (pure ε-DP implies (ε, δ)-DP); μ-GDP, (p, r) and fixed noise are refused
    assert pure_budget(_cfg(privacy={"epsilon": 2.0, "delta": 1e-5})) == Budget.pure(2.0)
    for privacy in ({"mu": 1.0}, {"secret": {"p": 1e-4, "r": 1e-3}}, {"noise_multiplier": 1.0}):
        with pytest.raises(ConfigError, match="method dpkps is pure ε-DP"):
            budget_split(_cfg(privacy=privacy), DPKPSOptions())


def test_augpe_label_ratio_takes_its_share_of_mu_squared() -> None:
    """σ_l/σ = √((1−f)/(f·T)) (f = 0.2, T = 3: √(4/3)); composed, the label release holds f of μ²."""
    from privtext.methods.augpe import label_sigma_ratio
    from privtext.privacy.calibration import share_noise_ratio

    ratio = share_noise_ratio(0.2, compositions=3)
    assert ratio == pytest.approx(math.sqrt(4 / 3), rel=1e-12) and label_sigma_ratio(0.2, 3) == ratio
    sigma = 1.7
    labels, votes = 1 / (sigma * ratio) ** 2, 3 / sigma ** 2
    assert labels / (labels + votes) == pytest.approx(0.2, rel=1e-12)
