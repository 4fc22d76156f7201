"""Distributed Gaussian noise, drop-out-safe per-party std, quantisation plan, user-level sensitivities."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privtext.errors import ConfigError, DataError, PrivacyError
from privtext.federated import (
    cap_records,
    normalise_user_votes,
    plain_sum,
    plan_quantisation,
    quantise,
    user_level_sensitivity,
    user_vote_histogram,
)

D = 40_000


def zeros(data: object) -> np.ndarray:
    return np.zeros(D)


def _var_ok(x: np.ndarray, sigma: float) -> bool:
    """Two-sided χ² test of Var = σ² at level 1e-4: Σx²/σ² ~ χ²(n)."""
    n = x.size
    q = float(np.sum(x**2) / sigma**2)
    return stats.chi2.ppf(5e-5, n) < q < stats.chi2.ppf(1 - 5e-5, n)


def test_sum_of_party_noises_has_std_sigma() -> None:
    plan = plan_quantisation(n_parties=4, dim=D, sigma=3.0, value_bound=1.0)
    assert plan.party_std == pytest.approx(3.0 / 2)
    total = plain_sum([None] * 4, zeros, plan)  # CSPRNG noise, h = 0: the sum is the noise
    assert _var_ok(total, 3.0)
    assert not _var_ok(total, 3.0 * 1.05)  # the test can tell 5 % apart at this size


def test_drop_out_tolerant_noise_never_falls_below_sigma() -> None:
    # t = 2 of L = 4: each party adds σ/√2; 2 survivors carry exactly σ, 4 survivors σ√2 (conservative)
    plan = plan_quantisation(n_parties=4, dim=D, sigma=2.0, value_bound=1.0, min_survivors=2)
    assert _var_ok(plain_sum([None] * 4, zeros, plan, survivors=[1, 3]), 2.0)
    assert _var_ok(plain_sum([None] * 4, zeros, plan), 2.0 * math.sqrt(2))
    # σ/√L per party (the paper's full-participation setting) would under-noise a round with a drop-out
    naive = plan_quantisation(n_parties=4, dim=D, sigma=2.0, value_bound=1.0)
    assert not _var_ok(plain_sum([None] * 4, zeros, naive, survivors=[0, 1, 2]), 2.0)


def test_reproducible_noise_matches_across_calls_and_differs_per_party() -> None:
    plan = plan_quantisation(n_parties=2, dim=10, sigma=1.0, value_bound=1.0)
    a = plain_sum([None] * 2, lambda d: np.zeros(10), plan, seed=5, reproducible=True, survivors=[0])
    b = plain_sum([None] * 2, lambda d: np.zeros(10), plan, seed=5, reproducible=True, survivors=[0])
    c = plain_sum([None] * 2, lambda d: np.zeros(10), plan, seed=5, reproducible=True, survivors=[1])
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_plan_fits_secagg_and_bounds_the_quantisation_error() -> None:
    for L in (2, 3, 5, 17):
        p = plan_quantisation(n_parties=L, dim=10_000, sigma=7.3, value_bound=50.0, min_survivors=2)
        assert L * p.quantization_range < p.modulus and p.quantization_range <= 2**30
        assert math.log2(p.clip_range).is_integer() and math.log2(p.quantization_range).is_integer()
        assert p.clip_range >= 50.0 + 7.0 * p.party_std and p.clip_probability <= 1e-12
        x = np.random.default_rng(L).normal(0, 30, 10_000)
        xq = quantise(x, p)
        assert np.abs(xq - x).max() <= p.step / 2
        # on the grid: Flower's (x̂ + c)·Q/(2c) is an exact integer, so its stochastic rounding is a no-op
        pre = (xq + p.clip_range) * (p.quantization_range / (2 * p.clip_range))
        assert np.array_equal(pre, np.rint(pre)) and pre.min() >= 0 and pre.max() <= p.quantization_range
        assert p.max_error() == L * p.step / 2


def test_plan_refuses_bad_values() -> None:
    with pytest.raises(PrivacyError, match="sigma"):
        plan_quantisation(n_parties=3, dim=4, sigma=0.0, value_bound=1.0)
    with pytest.raises(ConfigError, match="min_survivors=4"):
        plan_quantisation(n_parties=3, dim=4, sigma=1.0, value_bound=1.0, min_survivors=4)
    with pytest.raises(ConfigError, match="value_bound"):
        plan_quantisation(n_parties=3, dim=4, sigma=1.0, value_bound=float("inf"))
    plan = plan_quantisation(n_parties=3, dim=4, sigma=1.0, value_bound=1.0)
    with pytest.raises(DataError, match=r"shape \(5,\)"):
        plain_sum([None] * 3, lambda d: np.zeros(5), plan)


def test_local_histogram_is_clipped_to_the_public_bound_before_noise() -> None:
    plan = plan_quantisation(n_parties=2, dim=3, sigma=1e-9, value_bound=2.0)
    total = plain_sum([None] * 2, lambda d: np.array([5.0, -7.0, 1.0]), plan)
    assert np.allclose(total, [4.0, -4.0, 2.0], atol=1e-6)


def test_user_level_sensitivity_is_cap_times_sample_sensitivity() -> None:
    assert user_level_sensitivity(4.0, 8) == 32.0  # WASP App E.4: Δ_user = 8 × 4
    with pytest.raises(ConfigError, match="max_records_per_user"):
        user_level_sensitivity(4.0, 0)
    with pytest.raises(PrivacyError, match="sample_sensitivity"):
        user_level_sensitivity(-1.0, 8)
    rng = np.random.default_rng(0)
    assert len(cap_records(20, 8, rng)) == 8 and len(cap_records(5, 8, rng)) == 5


def test_normalised_user_votes_have_unit_norm_and_sensitivity_one() -> None:
    rng = np.random.default_rng(1)
    votes = rng.poisson(3.0, size=(50, 30)).astype(float)
    votes[7] = 0.0
    v = normalise_user_votes(votes)
    norms = np.linalg.norm(v, axis=1)
    assert np.allclose(np.delete(norms, 7), 1.0) and norms[7] == 0.0
    total = v.sum(axis=0)
    worst = max(np.linalg.norm(total - np.delete(v, u, axis=0).sum(axis=0)) for u in range(50))
    assert worst == pytest.approx(1.0)
    # un-normalised, a heavy user moves the sum by far more than 1
    assert np.linalg.norm(votes[0]) > 5
    with pytest.raises(DataError, match="users × bins"):
        normalise_user_votes(np.zeros(3))


def test_user_vote_histogram_sums_records_per_user() -> None:
    rv = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    h = user_vote_histogram(rv, ["u", "u", "w"])  # u: (2, 0) → (1, 0); w: (0, 2) → (0, 1)
    assert np.allclose(h, [1.0, 1.0])


def test_secure_sum_without_flwr_names_the_extra(monkeypatch) -> None:
    import sys

    from privtext.errors import MissingDependencyError
    from privtext.federated import secure_sum

    monkeypatch.setitem(sys.modules, "flwr", None)
    with pytest.raises(MissingDependencyError, match=r"privtext\[flower\]"):
        secure_sum([[1], [2]], zeros, dim=D, sigma=1.0, value_bound=1.0)
