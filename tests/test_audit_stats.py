"""The audit's statistics: the one-run ε lower bound (Steinke, Nasr & Jagielski 2023) against closed forms, the
trial-count formula against its own exact power and against simulated binomial counts, and the group sizing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import binom

from privtext.audit import group_size
from privtext.audit.onerun import canaries_needed, epsilon_lower_bound, p_value, perfect_guess_bound
from privtext.audit.stats import (
    clopper_pearson,
    mu_bounds,
    power_epsilon,
    power_mu,
    trials_for_halved_gaussian_noise,
)


def test_clopper_pearson_known_values() -> None:
    lo, hi = clopper_pearson(5, 10, 0.05)
    assert lo == pytest.approx(0.187086, abs=1e-6) and hi == pytest.approx(0.812914, abs=1e-6)
    assert clopper_pearson(0, 20, 0.05) == (0.0, pytest.approx(0.168433, abs=1e-6))


def test_one_run_bound_closed_forms() -> None:
    """δ = 0, all r guesses right: Pr[Bin(r, q) ≥ r] = q^r, so ε = logit(0.05^(1/r)) — r = 100 gives 3.493
    (Steinke et al.'s Theorem 3.1 with perfect guesses); at ε = 0 the p-value is the fair-coin tail."""
    assert epsilon_lower_bound(100, 100, 100) == pytest.approx(perfect_guess_bound(100), abs=1e-5)
    assert perfect_guess_bound(100) == pytest.approx(math.log(0.05 ** 0.01 / (1 - 0.05 ** 0.01)))
    assert perfect_guess_bound(100) == pytest.approx(3.4930, abs=1e-4)
    assert p_value(1000, 50, 30, 0.0) == pytest.approx(binom.sf(29, 50, 0.5))
    # half right is what a coin does: no bound
    assert epsilon_lower_bound(1000, 200, 100) == 0.0 and epsilon_lower_bound(10, 0, 0) == 0.0


def test_one_run_bound_with_delta() -> None:
    """Theorem 5.2: the δ term 2mδ·max_i Pr[v − i ≤ Bin < v]/i only raises the p-value, so the bound falls with δ
    and with m (the number of canaries the δ is paid for), and is the pure bound at δ = 0."""
    pure = epsilon_lower_bound(1000, 500, 450)
    assert epsilon_lower_bound(1000, 500, 450, delta=0.0) == pure
    small, large = epsilon_lower_bound(1000, 500, 450, delta=1e-6), epsilon_lower_bound(1000, 500, 450, delta=1e-4)
    assert pure >= small >= large > 0
    assert epsilon_lower_bound(10_000, 500, 450, delta=1e-4) <= large
    # the p-value is monotone in ε, and the bound is where it crosses 1 − confidence
    eps = epsilon_lower_bound(1000, 500, 450, delta=1e-5)
    assert p_value(1000, 500, 450, eps * 0.999, 1e-5) < 0.05 <= p_value(1000, 500, 450, eps * 1.01, 1e-5)


def test_canaries_needed_is_the_threshold_of_perfect_attacks() -> None:
    m = canaries_needed(1.0, delta=1e-5, tests=8)
    conf = 1 - 0.05 / 8
    assert epsilon_lower_bound(m, m, m, delta=1e-5, confidence=conf) > 1.0
    assert epsilon_lower_bound(m - 1, m - 1, m - 1, delta=1e-5, confidence=conf) <= 1.0 + 1e-3


@pytest.mark.parametrize("claim", [0.7, 1.5, 3.0])
@pytest.mark.parametrize("alpha", [0.05, 1e-3])
def test_trial_count_catches_halved_noise_with_probability_095(claim: float, alpha: float) -> None:
    """The count is the smallest with exact power ≥ 0.95 against halved noise (true μ = 2·claim)."""
    n = trials_for_halved_gaussian_noise(claim, alpha=alpha)
    rate = float(ndtr(-claim))  # the midpoint test at shift 2·claim deviations
    assert power_mu(n, claim, rate, rate, alpha) >= 0.95
    assert power_mu(n - 1, claim, rate, rate, alpha) < 0.95 or power_mu(n - 2, claim, rate, rate, alpha) < 0.95
    assert power_mu(n, claim, float(ndtr(-claim / 2)), float(ndtr(-claim / 2)), alpha) <= alpha  # no false alarms


def test_power_formula_against_simulated_counts() -> None:
    """The exact power equals the share of simulated (FP, FN) binomial pairs whose μ bound exceeds the claim."""
    rng = np.random.default_rng(3)
    claim, alpha = 1.5, 1e-3
    n = trials_for_halved_gaussian_noise(claim, alpha=alpha)
    rate = float(ndtr(-claim))
    fp, fn = rng.binomial(n, rate, size=1500), rng.binomial(n, rate, size=1500)
    caught = np.mean([mu_bounds(int(a), int(b), n, alpha)[0] > claim for a, b in zip(fp, fn, strict=True)])
    assert caught == pytest.approx(power_mu(n, claim, rate, rate, alpha), abs=4 * math.sqrt(0.05 * 0.95 / 1500))
    # the pure-ε power formula likewise
    tpr, fpr = 0.5, 0.5 * math.exp(-3.0)
    tp, f = rng.binomial(300, tpr, size=1500), rng.binomial(300, fpr, size=1500)
    lo = [math.log(clopper_pearson(int(a), 300, alpha / 2)[0] / clopper_pearson(int(b), 300, alpha / 2)[1])
          if a else 0.0 for a, b in zip(tp, f, strict=True)]
    assert np.mean(np.asarray(lo) > 1.5) == pytest.approx(power_epsilon(300, 1.5, tpr, fpr, alpha), abs=0.05)


def test_group_size_aims_at_claim_one_and_a_half() -> None:
    assert group_size(1 / 10) == 15 and group_size(1 / 2.16) == 3 and group_size(2.0) == 1
    assert group_size(math.inf) == 1
