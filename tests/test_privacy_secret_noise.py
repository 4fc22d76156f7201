"""SecretNoise (SecPE Alg 1): the LP of Eq 6 on hand-solvable cases, the ρ rules, groups, and σ."""

from __future__ import annotations

import itertools
import math

import dp_accounting
import numpy as np
import pytest
import scipy.sparse as sp

from privtext.errors import DataError, InvalidPrivacyParameter
from privtext.privacy import (
    Budget,
    Ledger,
    Release,
    blowup_of,
    lp_weights,
    mu_from_pr,
    poisson_binomial_pmf,
    r_from_mu_p,
    sampling_probabilities,
    secret_blowup,
    secret_noise,
)
from privtext.privacy.events import MixtureOfGaussiansDpEvent

# rows = records, columns = secrets.   r0 holds s0 and s1; r1 holds s0; r2 holds s1; r3 holds nothing
SHARED = sp.csr_matrix(np.array([[1, 1], [1, 0], [0, 1], [0, 0]]))


# -------------------------------------------------------------------------------------------------- LP


def test_lp_two_secrets_sharing_a_record_by_hand() -> None:
    # max w0+w1+w2 s.t. w0+w1 ≤ 1, w0+w2 ≤ 1: w = (t, 1−t, 1−t) has value 2 − t, so the optimum is (0, 1, 1)
    w, in_lp = lp_weights(SHARED, 1.0)
    np.testing.assert_allclose(w, [0, 1, 1, 0], atol=1e-9)
    np.testing.assert_array_equal(in_lp, [True, True, True, False])


def test_lp_capacity_below_one() -> None:
    w, _ = lp_weights(SHARED, 0.5)
    np.testing.assert_allclose(w, [0, 0.5, 0.5, 0], atol=1e-9)
    # per-secret capacities
    w2, _ = lp_weights(SHARED, [0.3, 0.8])
    np.testing.assert_allclose(w2, [0, 0.3, 0.8, 0], atol=1e-9)


def test_lp_feasible_and_optimal_on_random_small_cases(rng: np.random.Generator) -> None:
    from scipy.optimize import linprog

    m = sp.csr_matrix((rng.random((12, 5)) < 0.3).astype(float))
    eta = rng.uniform(0.2, 1.5, 5)
    w, in_lp = lp_weights(m, eta)
    assert np.all((w >= 0) & (w <= 1))
    assert np.all(m.T @ w <= eta + 1e-9)  # feasible
    assert np.all(w[~in_lp] == 0)
    # optimal: brute-force the LP value with a dense solver over the same records
    rows = np.flatnonzero(in_lp)
    if rows.size:
        res = linprog(-np.ones(rows.size), A_ub=m[rows].T.toarray(), b_ub=eta, bounds=(0, 1), method="highs-ds")
        assert w.sum() == pytest.approx(-res.fun, abs=1e-7)


def test_membership_must_be_zero_one() -> None:
    with pytest.raises(DataError, match="0/1"):
        lp_weights(sp.csr_matrix(np.array([[2, 0]])), 1.0)


# ----------------------------------------------------------------------------------------------- ρ rules


def test_rho_formulas() -> None:
    w = np.array([0.0, 1.0, 0.5, 0.0])
    in_lp = np.array([True, True, True, False])
    # paper (Alg 1 line 4): ρ = (1/max w)·w/Σw
    np.testing.assert_allclose(sampling_probabilities(w, in_lp, "paper"), [0, 1 / 1.5, 0.5 / 1.5, 1])
    np.testing.assert_allclose(sampling_probabilities(w, in_lp, "max"), [0, 1, 0.5, 1])
    np.testing.assert_allclose(sampling_probabilities(w, in_lp, "scaled:0.5"), [0, 0.5, 0.25, 1])
    with pytest.raises(InvalidPrivacyParameter):
        sampling_probabilities(w, in_lp, "scaled:2")


def test_poisson_binomial_pmf_by_enumeration() -> None:
    rho = [0.1, 0.5, 0.7, 1.0]
    want = np.zeros(5)
    for bits in itertools.product([0, 1], repeat=4):
        want[sum(bits)] += math.prod(r if b else 1 - r for r, b in zip(rho, bits, strict=True))
    np.testing.assert_allclose(poisson_binomial_pmf(rho), want, atol=1e-15)


# ------------------------------------------------------------------------------------------- σ and groups


def test_secret_noise_shared_record_max_mode() -> None:
    # w = (0, 1, 1, 0) → ρ(max) = (0, 1, 1, 1): each secret has one holder always sampled — a Gaussian with Δ = 1
    res = secret_noise(SHARED, p=1e-4, r=1e-3, compositions=4, sampling="max")
    np.testing.assert_allclose(res.rho, [0, 1, 1, 1])
    mu = mu_from_pr(1e-4, 1e-3)
    assert res.sigma == pytest.approx(2 / mu, rel=2e-6)  # √T/μ
    assert len(res.group_info) == 1 and res.groups == ("g0000", "g0000")  # same ρ-multiset {1}: one computation
    np.testing.assert_allclose(res.secret_sigma, res.sigma)
    np.testing.assert_allclose(res.eta, mu)
    assert not res.in_lp[3] and res.rho[3] == 1.0  # a record holding no secret is always kept


def test_secret_noise_paper_mode_and_events() -> None:
    # η = 1 → w = (0, 1, 1) → ρ(paper) = (1/1)·w/2 = (0, ½, ½)
    res = secret_noise(SHARED, p=1e-4, r=1e-3, compositions=4, sampling="paper", eta=1.0)
    np.testing.assert_allclose(res.rho[:3], [0, 0.5, 0.5])
    ev = res.events()
    assert set(ev) == {"g0000"}
    e = ev["g0000"]
    assert isinstance(e, MixtureOfGaussiansDpEvent)
    assert list(e.sensitivities) == [0.0, 1.0] and list(e.sampling_probs) == pytest.approx([0.5, 0.5])
    assert e.standard_deviation == res.sigma
    # σ meets (p, r) after 4 releases, exactly at the calibration's tolerance
    b = res.blowups()["g0000"]
    assert 1e-3 * (1 - 2e-3) <= b <= 1e-3
    # subsampling helps: less noise than always sampling
    assert res.sigma < secret_noise(SHARED, p=1e-4, r=1e-3, compositions=4, sampling="max").sigma


def test_auto_maximises_signal_over_noise() -> None:
    res = secret_noise(SHARED, p=1e-4, r=1e-3, compositions=2, sampling="auto")
    scores = {c["mode"]: c["score"] for c in res.candidates}
    assert {"paper", "max", "scaled:0.5"} <= set(scores)
    assert res.mode == max(scores, key=scores.get)
    best = next(c for c in res.candidates if c["mode"] == res.mode)
    rho = np.asarray(res.rho)[np.asarray(res.in_lp)]
    assert best["score"] == pytest.approx(res.signal / np.sqrt(res.sigma ** 2 + (rho * (1 - rho)).sum()))


def test_groups_split_by_rho_multiset_and_budget() -> None:
    # s0: holders {r0, r1}; s1: holders {r2}; s2: holders {r3}; η large → every w = 1 → ρ(max) = 1
    m = sp.csr_matrix(np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]))
    res = secret_noise(m, p=[1e-4, 1e-4, 1e-4], r=[0.5, 0.5, 0.01], compositions=1, sampling="max", eta=5.0)
    g = res.group_info
    assert len(g) == 3  # {1,1}; {1} at r = 0.5; {1} at r = 0.01
    assert res.groups[1] != res.groups[2]
    mu_loose, mu_tight = mu_from_pr(1e-4, 0.5), mu_from_pr(1e-4, 0.01)
    want = np.array([2 / mu_loose, 1 / mu_loose, 1 / mu_tight])
    assert res.sigma == pytest.approx(want.max(), rel=2e-6)
    # by default only the group that sets the maximum is calibrated; the others are bounded by it
    np.testing.assert_array_equal(res.secret_sigma_exact, [False, False, True])
    np.testing.assert_allclose(res.secret_sigma, [res.sigma] * 3)
    full = secret_noise(m, p=[1e-4, 1e-4, 1e-4], r=[0.5, 0.5, 0.01], compositions=1, sampling="max", eta=5.0,
                        exact_per_secret=True)
    np.testing.assert_allclose(full.secret_sigma, want, rtol=2e-6)
    assert full.secret_sigma_exact.all() and full.sigma == pytest.approx(res.sigma, rel=1e-12)


def test_one_record_holding_two_secrets_is_one_group_at_the_gaussian_noise() -> None:
    """One record holds both secrets, sampled with ρ = 1: each secret is a deterministic shift of 1, so its σ is
    the Gaussian mechanism's, √T/μ with μ = Φ⁻¹(1−p) − Φ⁻¹(1−r) (Eq 4), and the two secrets form one group."""
    m = sp.csr_matrix(np.array([[1, 1]]))
    res = secret_noise(m, p=1e-4, r=2e-4, compositions=2, sampling="max")
    mu = float(mu_from_pr(1e-4, 2e-4))
    assert res.rho[0] == 1.0 and len(res.group_info) == 1
    assert res.sigma == pytest.approx(math.sqrt(2) / mu, rel=2e-3)


def test_paper_approximation_underestimates_sigma_for_a_mixture() -> None:
    # two holders at ρ = ½ (paper rule): the single Gaussian N(E[S], σ²) needs less noise than the truth,
    # and at its σ the exact blow-up exceeds r — the approximation is not a valid bound
    m = sp.csr_matrix(np.array([[1], [1]]))
    exact = secret_noise(m, p=1e-4, r=1e-3, compositions=1, sampling="paper", eta=2.0, blowup="exact")
    paper = secret_noise(m, p=1e-4, r=1e-3, compositions=1, sampling="paper", eta=2.0, blowup="paper")
    worst = secret_noise(m, p=1e-4, r=1e-3, compositions=1, sampling="paper", eta=2.0, blowup="worst")
    np.testing.assert_allclose(exact.rho, [0.5, 0.5])
    assert paper.sigma < exact.sigma < worst.sigma
    assert secret_blowup([0.5, 0.5], sigma=paper.sigma, p=1e-4, compositions=1) > 1.2e-3


def test_secret_blowup_methods_and_sensitivity_scaling() -> None:
    rho = [0.3, 0.6]
    b1 = secret_blowup(rho, sigma=2.0, p=1e-4, compositions=3)
    b2 = secret_blowup(rho, sigma=6.0, p=1e-4, compositions=3, sensitivity=3.0)
    assert b1 == pytest.approx(b2, rel=1e-9)
    assert secret_blowup(rho, sigma=2.0, p=1e-4, compositions=3, method="worst") == pytest.approx(
        r_from_mu_p(1e-4, math.sqrt(3) * 2 / 2.0))
    assert secret_blowup([], sigma=1.0, p=1e-4, compositions=3) == 1e-4


def test_result_events_pass_the_ledger_for_2T_releases(tmp_path) -> None:
    """The engine's flow: σ from secret_noise for 2·T releases (counts + centres per iteration)."""
    rng = np.random.default_rng(3)
    m = sp.csr_matrix((rng.random((40, 6)) < 0.15).astype(float))
    T = 2
    res = secret_noise(m, p=1e-4, r=1e-3, compositions=2 * T, sampling="paper")
    led = Ledger(tmp_path / "ledger.jsonl", Budget.secret(1e-4, 1e-3))
    for it in range(T):
        for part in ("counts", "centres"):
            led.record(Release(key=f"clusters/{part}/iter_{it:03d}", mechanism="secret_clustering",
                               event=dp_accounting.GaussianDpEvent(res.sigma), noise_std=res.sigma, sensitivity=1.0,
                               iteration=it, secret_events=res.secret_events()))
    spent = led.spent()
    assert not spent["exceeded"] and spent["max_posterior_over_r"] <= 1.0
    # one more release of the same kind would exceed (p, r) for the worst group
    from privtext.errors import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        led.record(Release(key="one/more", mechanism="secret_clustering", event=dp_accounting.GaussianDpEvent(res.sigma),
                           noise_std=res.sigma, sensitivity=1.0, secret_events=res.secret_events()))


def test_per_secret_vectors_must_match_columns() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="one entry per secret"):
        secret_noise(SHARED, p=[1e-4] * 3, r=[1e-3] * 3, compositions=1)


def test_mixture_event_equals_direct_blowup() -> None:
    from privtext.privacy import mixture_event

    ev = mixture_event([0.2, 0.7], 1.5)
    assert blowup_of(dp_accounting.SelfComposedDpEvent(ev, 2), 1e-3) == pytest.approx(
        secret_blowup([0.2, 0.7], sigma=1.5, p=1e-3, compositions=2), rel=1e-12)


def test_sampling_alone_can_protect_and_the_ledger_agrees() -> None:
    """One holder sampled with probability q: without noise B = q + (1 − q)p. If that is ≤ r, σ_j = 0 (the
    paper's ρ rule does this at r/p ≥ 50 in Fig 3's set-up), and the ledger accepts the zero-noise release."""
    m = sp.csr_matrix(np.array([[1], [0]]))
    q = 0.002
    assert q + (1 - q) * 1e-4 <= 5e-3
    res = secret_noise(m, p=1e-4, r=5e-3, compositions=1, sampling="scaled:0.002", eta=1.0)
    np.testing.assert_allclose(res.rho, [q, 1.0])
    assert res.sigma == 0.0
    led = Ledger(None, Budget.secret(1e-4, 5e-3))
    led.record(Release(key="c0", mechanism="clusters", event=dp_accounting.GaussianDpEvent(0.0), noise_std=0.0,
                       sensitivity=1.0, secret_events=res.secret_events()))
    assert led.spent()["groups"]["g0000"]["posterior"] == pytest.approx(q + (1 - q) * 1e-4, rel=1e-12)
    # two zero-noise releases: 1 − (1 − q)²(1 − p) ≈ 0.0041 ≤ r; three: ≈ 0.0061 > r
    led.record(Release(key="c1", mechanism="clusters", event=dp_accounting.GaussianDpEvent(0.0), noise_std=0.0,
                       sensitivity=1.0, secret_events=res.secret_events()))
    from privtext.errors import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        led.record(Release(key="c2", mechanism="clusters", event=dp_accounting.GaussianDpEvent(0.0), noise_std=0.0,
                           sensitivity=1.0, secret_events=res.secret_events()))
