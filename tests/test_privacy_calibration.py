"""calibrate → account returns the target (and σ is minimal to rtol), over grids with edge values; the papers'
formulas against the PLD."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from privtext.errors import InvalidPrivacyParameter
from privtext.privacy import (
    Budget,
    DpTarget,
    GdpTarget,
    SecretTarget,
    augpe_noise_multiplier,
    blowup_of,
    calibrate,
    epsilon_for_delta,
    gaussian_noise_multiplier,
    gdp_epsilon,
    gdp_mu_for_dp,
    gdp_mu_of,
    laplace_scale,
    mixture_event,
    mu_from_pr,
)
from privtext.privacy.calibration import (
    gaussian_share_noise_multiplier,
    noise_multiplier,
    paper_noise_multiplier,
    target_of,
)

G = dp_accounting.GaussianDpEvent
SC = dp_accounting.SelfComposedDpEvent
RTOL = 1e-4


def gauss(T: int):
    return lambda s: SC(G(s), T)


def _assert_minimal(make, target, sigma: float) -> None:
    """σ meets the target and σ·(1 − 2·rtol) does not."""
    assert target.gap(make(sigma)) <= 0
    assert target.gap(make(sigma * (1 - 2 * RTOL))) > 0


@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-5])
@pytest.mark.parametrize("T", [1, 20])
def test_dp_round_trip(eps: float, delta: float, T: int) -> None:
    make = gauss(T)
    s = calibrate(make, DpTarget(eps, delta), rtol=RTOL)
    achieved = epsilon_for_delta(make(s), delta)
    assert eps * (1 - 1e-3) <= achieved <= eps
    _assert_minimal(make, DpTarget(eps, delta), s)
    # the paper's (Aug-PE) closed form is exact for Gaussians; the PLD is pessimistic by a hair
    paper = augpe_noise_multiplier(gdp_mu_for_dp(eps, delta), compositions=T)
    assert paper <= s <= paper * (1 + 2e-4)


@pytest.mark.parametrize("mu", [0.01, 0.5, 1.0, 8.0])
@pytest.mark.parametrize("T", [1, 7, 100])
def test_gdp_round_trip(mu: float, T: int) -> None:
    make = gauss(T)
    s = calibrate(make, GdpTarget(mu))
    assert gdp_mu_of(make(s)) == pytest.approx(mu, rel=2e-6)
    assert gdp_mu_of(make(s)) <= mu
    assert s == pytest.approx(math.sqrt(T) / mu, rel=2e-6)


@pytest.mark.parametrize("p", [1e-8, 1e-4, 0.1])
@pytest.mark.parametrize("ratio", [1.01, 10, 400])
def test_secret_round_trip_gaussian(p: float, ratio: float) -> None:
    r = min(p * ratio, 0.99)
    make = gauss(5)
    s = calibrate(make, SecretTarget(p, r))
    b = blowup_of(make(s), p)
    assert r * (1 - 1e-3) <= b <= r
    assert s == pytest.approx(math.sqrt(5) / mu_from_pr(p, r), rel=2e-6)


def test_secret_round_trip_mixture() -> None:
    # a secret held by 3 records, each sampled with probability 0.4, over 6 releases
    make = lambda s: SC(mixture_event([0.4, 0.4, 0.4], s), 6)  # noqa: E731
    t = SecretTarget(1e-4, 1e-3)
    s = calibrate(make, t, rtol=RTOL)
    assert 1e-3 * (1 - 2e-3) <= blowup_of(make(s), 1e-4) <= 1e-3
    _assert_minimal(make, t, s)


def test_composed_event_with_label_share() -> None:
    # the shape Aug-PE uses: one label release at σ·k plus T vote releases at σ
    k, T = 3.0, 10
    make = lambda s: dp_accounting.ComposedDpEvent([G(s * k), SC(G(s), T)])  # noqa: E731
    s = calibrate(make, GdpTarget(1.0))
    assert s == pytest.approx(math.sqrt(T + 1 / k**2), rel=2e-6)


def test_laplace_calibration_is_generic() -> None:
    make = lambda b: SC(dp_accounting.LaplaceDpEvent(b), 3)  # noqa: E731
    b = calibrate(make, DpTarget(1.0, 1e-5))
    assert epsilon_for_delta(make(b), 1e-5) <= 1.0
    # with δ > 0 PLD accounting can only improve on pure-DP composition (b = Tε⁻¹), up to discretisation
    assert b <= laplace_scale(1.0, compositions=3) * (1 + 2e-3)


def test_unreachable_target_is_refused() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="no noise multiplier up to"):
        calibrate(gauss(10), DpTarget(0.01, 1e-12), upper=10.0)


def test_lower_bound_is_returned_when_it_already_meets() -> None:
    assert calibrate(gauss(1), GdpTarget(1.0), lower=5.0, upper=10.0) == pytest.approx(5.0, rel=2e-6)


# ---------------------------------------------------------------------------------------- named formulas


def test_gaussian_noise_multiplier_methods_agree_where_they_should() -> None:
    from privtext.methods.wasp.calibration import paper_formula

    b = Budget.dp(4.0, 1e-5)
    pld = gaussian_noise_multiplier(b, compositions=5)
    paper = gaussian_noise_multiplier(b, compositions=5, method="paper")
    wasp = paper_formula(releases=5)(b)  # WASP's own formula, T − 1 = 5 (it lives with the method)
    assert paper <= pld <= paper * (1 + 2e-4)
    assert wasp > pld  # classical-mechanism calibration is conservative at ε = 4
    assert epsilon_for_delta(SC(G(wasp), 5), 1e-5) == pytest.approx(3.511, abs=2e-3)


def test_secret_budget_uses_lemma_32_strictest_pair() -> None:
    b = Budget.secret([1e-4, 1e-4, 2e-4], [1e-3, 2e-3, 1e-3])
    s = gaussian_noise_multiplier(b, compositions=4)
    strictest = min(mu_from_pr(1e-4, 1e-3), mu_from_pr(1e-4, 2e-3), mu_from_pr(2e-4, 1e-3))
    assert s == pytest.approx(2 / strictest, rel=2e-6)
    assert gaussian_noise_multiplier(b, compositions=4, method="paper") == pytest.approx(2 / strictest, rel=1e-12)


def test_noise_budget_returns_its_multiplier_and_wasp_needs_dp() -> None:
    from privtext.methods.wasp.calibration import paper_formula

    assert gaussian_noise_multiplier(Budget.noise(noise_multiplier=1.7), compositions=3) == 1.7
    with pytest.raises(InvalidPrivacyParameter, match="needs an \\(ε, δ\\) budget for WASP"):
        paper_formula(releases=3)(Budget.gdp(1.0))
    # the calibration module names no method: WASP's formula is not one of its options
    with pytest.raises(InvalidPrivacyParameter, match="one of pld, paper; got 'wasp'"):
        gaussian_noise_multiplier(Budget.dp(4.0, 1e-5), compositions=3, method="wasp")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ the one entry point for σ


def test_noise_multiplier_is_calibrate_on_the_budgets_target_bit_for_bit() -> None:
    """The entry point adds no arithmetic: its σ is exactly calibrate's on the budget's target (a σ that
    differed in the last bit would change every noise draw of a reproducible run)."""
    make = gauss(3)
    assert noise_multiplier(Budget.dp(4.0, 1e-5), make) == calibrate(make, DpTarget(4.0, 1e-5))
    assert noise_multiplier(Budget.gdp(0.7), make) == calibrate(make, GdpTarget(0.7))
    sec = Budget.secret([1e-4, 2e-4], [1e-3, 1e-3])
    assert noise_multiplier(sec, make) == max(calibrate(make, SecretTarget(1e-4, 1e-3)),
                                              calibrate(make, SecretTarget(2e-4, 1e-3)))
    assert noise_multiplier(Budget.dp(4.0, 1e-5), make, lower=0.05, upper=1e3) == calibrate(
        make, DpTarget(4.0, 1e-5), lower=0.05, upper=1e3)
    # the search interval is the caller's: a lower bound above the answer is returned (μ = 1, T = 1: σ = 1)
    assert noise_multiplier(Budget.gdp(1.0), gauss(1), lower=5.0, upper=10.0) == pytest.approx(5.0, rel=2e-6)


def test_noise_multiplier_fixed_noise_wins_then_formula_then_search() -> None:
    make = gauss(2)
    calls = []

    def formula(b: Budget) -> float:
        calls.append(b.kind)
        return 2.5

    assert noise_multiplier(Budget.noise(noise_multiplier=1.3), make, formula=formula) == 1.3 and not calls
    assert noise_multiplier(Budget.dp(1.0, 1e-5), make, formula=formula) == 2.5 and calls == ["dp"]
    assert noise_multiplier(Budget.dp(1.0, 1e-5), make) != 2.5
    with pytest.raises(InvalidPrivacyParameter, match="fixes no σ"):
        noise_multiplier(Budget(kind="noise"), make)


def test_target_of_each_budget_kind() -> None:
    assert target_of(Budget.dp(2.0, 1e-6)) == [DpTarget(2.0, 1e-6)]
    assert target_of(Budget.gdp(0.5)) == [GdpTarget(0.5)]
    assert target_of(Budget.secret([1e-4, 1e-4, 2e-4], [1e-3, 1e-3, 1e-3])) == [SecretTarget(1e-4, 1e-3),
                                                                               SecretTarget(2e-4, 1e-3)]
    with pytest.raises(InvalidPrivacyParameter, match="pure ε-DP budget cannot be met by Gaussian noise"):
        target_of(Budget.pure(1.0))
    with pytest.raises(InvalidPrivacyParameter, match="sets no calibration target"):
        target_of(Budget.noise())


def test_paper_noise_multiplier_is_sqrt_T_over_mu() -> None:
    assert paper_noise_multiplier(Budget.gdp(0.5), compositions=9) == pytest.approx(6.0, rel=1e-15)
    mu = float(gdp_mu_for_dp(4.0, 1e-5))
    assert paper_noise_multiplier(Budget.dp(4.0, 1e-5), compositions=4) == pytest.approx(2 / mu, rel=1e-15)


def test_a_shares_noise_multiplier_spends_exactly_its_share_of_mu_squared() -> None:
    # μ = 1, f = 0.25: μ_L = 0.5, σ_L = 2; and for (ε, δ) the μ is Remark C.1's
    assert gaussian_share_noise_multiplier(Budget.gdp(1.0), 0.25) == pytest.approx(2.0, rel=1e-15)
    b = Budget.dp(4.0, 1e-5)
    s = gaussian_share_noise_multiplier(b, 0.1)
    assert gdp_mu_of(G(s)) ** 2 == pytest.approx(0.1 * float(gdp_mu_for_dp(4.0, 1e-5)) ** 2, rel=1e-12)


def test_wasp_formula_and_its_T1_case() -> None:
    from privtext.methods.wasp import wasp_noise_multiplier

    # σ = Δ√(2 ln(1.25/δ))√(T−1)/ε; T = 1 gives σ = 0, which we refuse
    s = wasp_noise_multiplier(4.0, 1e-5, iterations=6, sensitivity=4.0)
    assert s == pytest.approx(4 * math.sqrt(2 * math.log(1.25e5)) * math.sqrt(5) / 4.0, rel=1e-12)
    with pytest.raises(InvalidPrivacyParameter, match="T = 1 it gives σ = 0"):
        wasp_noise_multiplier(4.0, 1e-5, iterations=1)


def test_wasp_classical_bound_fails_for_large_epsilon() -> None:
    from privtext.methods.wasp import wasp_noise_multiplier

    # the classical Gaussian mechanism bound is only proven for ε < 1; at ε = 10 it is not (10, δ)-DP
    z = wasp_noise_multiplier(10.0, 1e-5, iterations=2)
    assert gdp_epsilon(1e-5, 1 / z) > 10.3
    assert epsilon_for_delta(G(z), 1e-5) > 10.3


def test_calibrating_a_secret_held_by_100_records_needs_few_pld_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work, not time (timings are printed by benchmarks/secret_noise_ratio.py): the cheap bounds and the
    regula falsi keep the number of mixture PLD builds small."""
    from privtext.privacy import accounting
    from privtext.privacy.secretnoise import _group_sigma

    builds = []
    real = accounting.mixture_pld

    def counting(*a, **k):
        builds.append(1)
        return real(*a, **k)

    monkeypatch.setattr(accounting, "mixture_pld", counting)
    accounting._base_pld_cached.cache_clear()
    _group_sigma.cache_clear()
    with accounting.certificate_scope():
        s = _group_sigma(tuple([0.3] * 100), 1e-4, 1e-3, 10, "exact")
    assert 1 <= len(builds) <= 12, len(builds)
    b = blowup_of(SC(mixture_event([0.3] * 100, s), 10), 1e-4)
    assert 1e-3 * (1 - 2e-3) <= b <= 1e-3
