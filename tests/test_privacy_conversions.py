"""Closed forms of SecPE §2–3 and App C: known values, round trips over grids with edge values, tails."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from privtext.errors import InvalidPrivacyParameter
from privtext.privacy import (
    Budget,
    compose_pr,
    dp_blowup,
    dp_to_pr,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_for_dp,
    gdp_tradeoff,
    mu_from_pr,
    r_from_mu_p,
)

# ------------------------------------------------------------------------------------------- known values


@pytest.mark.parametrize(("ratio", "mu"), [(2, 0.17893), (10, 0.62878), (50, 1.14319)])
def test_mu_known_values_p_1e4(ratio: float, mu: float) -> None:
    assert mu_from_pr(1e-4, ratio * 1e-4) == pytest.approx(mu, abs=5e-6)


def test_gdp_delta_known_value() -> None:
    assert gdp_delta(1.0, 1.0) == pytest.approx(0.126937, abs=5e-7)


def test_gdp_epsilon_matches_pld_known_value() -> None:
    # σ = 1, T = 10 Gaussian releases are √10-GDP; dp_accounting's PLD gives 17.857 at δ = 1e-5
    assert gdp_epsilon(1e-5, math.sqrt(10)) == pytest.approx(17.857, abs=5e-4)


def test_tradeoff_is_gaussian_testing_curve() -> None:
    # G_μ(α) = type-II error of the level-α test of N(0,1) vs N(μ,1): P(N(μ,1) ≤ z_{1−α})
    for a in (1e-6, 1e-3, 0.1, 0.5, 0.9):
        for m in (0.0, 0.3, 2.0):
            assert gdp_tradeoff(a, m) == pytest.approx(norm.cdf(norm.ppf(1 - a) - m), rel=1e-10, abs=1e-300)
    assert gdp_tradeoff(0.0, 1.0) == 1.0 and gdp_tradeoff(1.0, 1.0) == 0.0


def test_lemma_32_is_one_minus_tradeoff() -> None:
    for p in (1e-8, 1e-4, 0.2):
        for m in (0.1, 1.0, 3.0):
            assert r_from_mu_p(p, m) == pytest.approx(1 - gdp_tradeoff(p, m), rel=1e-9)


# ------------------------------------------------------------------------------------------- round trips

P_GRID = [1e-12, 1e-8, 1e-4, 1e-2, 0.3]
RATIOS = [1.0001, 1.5, 2, 10, 50, 400]


@pytest.mark.parametrize("p", P_GRID)
@pytest.mark.parametrize("ratio", RATIOS)
def test_pr_mu_round_trip(p: float, ratio: float) -> None:
    r = min(p * ratio, 0.999)
    if r <= p:
        pytest.skip("ratio too large for this p")
    mu = mu_from_pr(p, r)
    assert mu > 0
    assert r_from_mu_p(p, mu) == pytest.approx(r, rel=1e-9)


def test_tails_are_accurate_for_tiny_p() -> None:
    # the naive ndtri(1 − p) loses all digits at p = 1e-17; our form does not
    p = 1e-17
    mu = mu_from_pr(p, 2 * p)
    assert 0 < mu < 0.2
    assert r_from_mu_p(p, mu) == pytest.approx(2 * p, rel=1e-8)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-5, 1e-2, 0.3])
def test_gdp_epsilon_delta_round_trip(mu: float, delta: float) -> None:
    eps = gdp_epsilon(delta, mu)
    if eps == 0:
        assert gdp_delta(0.0, mu) <= delta
        return
    assert gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-7)
    assert gdp_mu_for_dp(eps, delta) == pytest.approx(mu, rel=1e-7)


def test_gdp_delta_is_hockey_stick_of_gaussians() -> None:
    # δ(ε) = ∫ (φ(x − μ) − e^ε φ(x))₊ dx  — independent check of Remark C.1 by numerical integration
    for mu, eps in [(1.0, 0.5), (2.0, 1.0), (0.5, 0.0)]:
        f = lambda x, mu=mu, eps=eps: max(norm.pdf(x - mu) - math.exp(eps) * norm.pdf(x), 0.0)  # noqa: E731
        val, _ = integrate.quad(f, -20, 20, points=[eps / mu + mu / 2], limit=200)
        assert gdp_delta(eps, mu) == pytest.approx(val, rel=1e-8, abs=1e-12)


def test_gdp_delta_extreme_tail_keeps_relative_accuracy() -> None:
    d = gdp_delta(30.0, 1.0)
    assert 0 < d < 1e-150
    assert gdp_epsilon(d, 1.0) == pytest.approx(30.0, rel=1e-8)


def test_vectors_broadcast() -> None:
    p = np.array([1e-4, 1e-3, 1e-2])
    r = 10 * p
    mu = mu_from_pr(p, r)
    assert isinstance(mu, np.ndarray) and mu.shape == (3,)
    np.testing.assert_allclose(r_from_mu_p(p, mu), r, rtol=1e-10)


# ------------------------------------------------------------------------------------ (ε, δ) → (p, r)


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("delta", [0.0, 1e-8, 1e-5])
@pytest.mark.parametrize("p", [1e-4, 0.01])
def test_lemma_c2_uses_the_best_c(eps: float, delta: float, p: float) -> None:
    lemma = dp_to_pr(eps, delta, p)
    assert p < lemma <= 1
    for c in (1.0, 1.5, 2.0, 10.0, 1e3, 1e6):
        assert lemma <= dp_to_pr(eps, delta, p, c=c) + 1e-15


def test_lemma_c2_against_the_blowup_bound() -> None:
    # different bounds, neither dominates (docs/privacy.md): small p, δ > 0 → Lemma C.2 pays ~2√(pδ) instead of δ
    assert dp_to_pr(1.0, 1e-5, 1e-4) == pytest.approx(3.3501e-4, rel=1e-4)
    assert dp_blowup(1.0, 1e-5, 1e-4) == pytest.approx(math.e * 1e-4 + 1e-5, rel=1e-12)
    # δ = 0: Lemma C.2's Bayes form is below e^ε p
    assert dp_to_pr(1.0, 0.0, 1e-4) < dp_blowup(1.0, 0.0, 1e-4)


def test_lemma_c2_pure_dp_limit() -> None:
    eps, p = 1.0, 1e-3
    assert dp_to_pr(eps, 0.0, p) == pytest.approx(1 / (1 + math.exp(-eps) * (1 - p) / p), rel=1e-12)


def test_dp_blowup_of_gaussian_pair_is_valid() -> None:
    # a μ-GDP mechanism is (ε, δ_μ(ε))-DP for every ε, so its blow-up is below every dp_blowup(ε, δ_μ(ε))
    mu, p = 1.0, 1e-4
    exact = r_from_mu_p(p, mu)
    for eps in (0.5, 1.0, 2.0, 4.0):
        assert exact <= dp_blowup(eps, gdp_delta(eps, mu), p) * (1 + 1e-12)


def test_naive_composition() -> None:
    p, r = compose_pr([(1e-4, 2e-4), (np.array([1e-4, 2e-4]), np.array([3e-4, 5e-4]))])
    np.testing.assert_allclose(p, [1e-4, 2e-4])
    np.testing.assert_allclose(r, [5e-4, 7e-4])
    _, r1 = compose_pr([(0.1, 0.6), (0.1, 0.7)])
    assert r1 == 1.0


# ---------------------------------------------------------------------------------------------- errors


def test_r_not_above_p_is_refused_with_the_privacy_reason() -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"r=1e-05 must exceed p=0\.0001: a posterior bound"):
        mu_from_pr(1e-4, 1e-5)
    with pytest.raises(InvalidPrivacyParameter, match="p must lie in"):
        mu_from_pr(0.0, 0.1)
    with pytest.raises(InvalidPrivacyParameter, match="delta must lie"):
        gdp_epsilon(0.0, 1.0)


def test_budget_constructors_validate() -> None:
    assert Budget.secret(1e-4, 1e-3).pairs == [(1e-4, 1e-3)]
    b = Budget.secret([1e-4, 1e-4, 2e-4], [1e-3, 1e-3, 1e-3])
    assert b.per_secret and b.pairs == [(1e-4, 1e-3), (2e-4, 1e-3)] and b.pair_of(2) == (2e-4, 1e-3)
    with pytest.raises(InvalidPrivacyParameter):
        Budget.secret(1e-3, 1e-4)
    with pytest.raises(InvalidPrivacyParameter):
        Budget.gdp(-1.0)
    with pytest.raises(InvalidPrivacyParameter):
        Budget.dp(1.0, 0.0)


def test_budget_from_config() -> None:
    from privtext.config import PrivacyConfig

    assert Budget.from_config(PrivacyConfig(epsilon=4, delta=1e-5)) == Budget.dp(4, 1e-5)
    assert Budget.from_config(PrivacyConfig(mu=1.0)).kind == "gdp"
    s = Budget.from_config(PrivacyConfig(secret={"p": 1e-4, "r": 1e-3}))
    assert s.kind == "secret" and s.p == 1e-4 and s.r == 1e-3
    n = Budget.from_config(PrivacyConfig(noise_multiplier=2.0))
    assert n.kind == "noise" and n.noise_multiplier == 2.0
