"""One Flower SecAgg+ round, each party in its own process on 127.0.0.1 (privtext.federated.secagg)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("flwr")

from privtext.errors import AggregationError, ConfigError
from privtext.federated import plain_sum
from privtext.federated.secagg import _chacha_masks, masked_vectors, secure_sum

DIM = 1000


def vote_histogram(data: np.ndarray) -> np.ndarray:
    """A party's local histogram: how many of its records voted for each of DIM candidates."""
    return np.bincount(np.asarray(data), minlength=DIM).astype(float)


def _parties(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, DIM, int(rng.integers(30, 80))) for _ in range(n)]


def _files_under(path) -> list[str]:
    return sorted(str(p) for p in path.rglob("*") if p.is_file())


def test_three_parties_sum_equals_local_noisy_sum_and_server_sees_only_masks(tmp_path, monkeypatch) -> None:
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(tmp))
    parties = _parties(3)
    r = secure_sum(parties, vote_histogram, dim=DIM, sigma=2.0, value_bound=100.0, seed=7, reproducible=True,
                   observe=True)
    assert r.survivors == [0, 1, 2] and r.dropped == []
    # the aggregate IS the sum of the parties' quantised noisy vectors, and within S·s/2 of the unquantised sum
    exact = plain_sum(parties, vote_histogram, r.plan, seed=7, reproducible=True, quantised=True)
    noisy = plain_sum(parties, vote_histogram, r.plan, seed=7, reproducible=True)
    assert np.array_equal(r.values, exact)
    assert np.abs(r.values - noisy).max() <= r.max_error == 3 * r.plan.step / 2
    assert not np.allclose(noisy, sum(vote_histogram(p) for p in parties), atol=0.5)  # noise was added
    # what the server received: one masked vector per party, uniform on Z_M and unrelated to the party's vector
    seen = masked_vectors(r)
    assert sorted(seen) == [0, 1, 2]
    M, Q, c, s = r.plan.modulus, r.plan.quantization_range, r.plan.clip_range, r.plan.step
    for k, masked in seen.items():
        own = plain_sum(parties, vote_histogram, r.plan, seed=7, reproducible=True, quantised=True, survivors=[k])
        q_int = np.rint((own + c) / s).astype(np.int64)  # the integers the party handed to SecAgg+
        assert q_int.max() <= Q and stats.kstest(masked / M, "uniform").pvalue > 1e-4
        assert np.mean(masked == q_int) < 0.01
        assert abs(stats.pearsonr(masked, q_int)[0]) < 0.2
    # no per-party histogram (nor anything else) was written to disk by the server or the parties
    assert _files_under(work) == [] and _files_under(tmp) == []


def test_chacha_masks_are_deterministic_per_seed_and_uniform() -> None:
    a = _chacha_masks(b"k" * 32, 2**32, [(1,), (50_000,)])
    b = _chacha_masks(b"k" * 32, 2**32, [(1,), (50_000,)])
    c = _chacha_masks(b"k" * 31 + b"j", 2**32, [(1,), (50_000,)])
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[1], c[1])
    assert stats.kstest(a[1] / 2**32, "uniform").pvalue > 1e-4


def test_secure_sum_refuses_bad_settings() -> None:
    with pytest.raises(ConfigError, match="at least 2 parties"):
        secure_sum(_parties(1), vote_histogram, dim=DIM, sigma=1.0, value_bound=10.0)
    with pytest.raises(ConfigError, match="min_survivors"):
        secure_sum(_parties(3), vote_histogram, dim=DIM, sigma=1.0, value_bound=10.0, min_survivors=1)
    with pytest.raises(ConfigError, match="drop"):
        secure_sum(_parties(3), vote_histogram, dim=DIM, sigma=1.0, value_bound=10.0, drop={5: "unmask"})


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["setup", "share_keys", "collect_masked_vectors"])
def test_a_party_dropping_out_leaves_the_survivors_sum(stage: str) -> None:
    parties = _parties(4, seed=1)
    r = secure_sum(parties, vote_histogram, dim=DIM, sigma=2.0, value_bound=100.0, min_survivors=3,
                   seed=3, reproducible=True, drop={2: stage})
    assert r.survivors == [0, 1, 3] and r.dropped == [2]
    ref = plain_sum(parties, vote_histogram, r.plan, seed=3, reproducible=True, quantised=True, survivors=[0, 1, 3])
    assert np.array_equal(r.values, ref)
    assert r.noise_std == pytest.approx(2.0)  # 3 survivors × (σ/√3)² = σ²


@pytest.mark.slow
def test_a_party_dropping_out_after_sending_its_vector_stays_in_the_sum() -> None:
    parties = _parties(3, seed=2)
    r = secure_sum(parties, vote_histogram, dim=DIM, sigma=2.0, value_bound=100.0, min_survivors=2,
                   seed=4, reproducible=True, drop={0: "unmask"})
    assert r.survivors == [0, 1, 2]
    ref = plain_sum(parties, vote_histogram, r.plan, seed=4, reproducible=True, quantised=True)
    assert np.array_equal(r.values, ref)


@pytest.mark.slow
def test_too_many_drop_outs_is_a_clear_error() -> None:
    with pytest.raises(AggregationError, match="min_survivors=3"):
        secure_sum(_parties(3), vote_histogram, dim=DIM, sigma=2.0, value_bound=100.0,
                   drop={1: "collect_masked_vectors"})


@pytest.mark.slow
def test_five_parties_ten_thousand_bins_with_csprng_noise() -> None:
    dim = 10_000
    parties = [np.random.default_rng(k).integers(0, dim, 100) for k in range(5)]

    from functools import partial

    r = secure_sum(parties, partial(_bincount, dim=dim), dim=dim, sigma=3.0, value_bound=200.0)
    truth = sum(np.bincount(p, minlength=dim) for p in parties)
    # CSPRNG noise: the residual is N(0, σ²) up to the quantisation (χ² at level 1e-4)
    resid = r.values - truth
    q = float(np.sum(resid**2) / 9.0)
    assert stats.chi2.ppf(5e-5, dim) < q < stats.chi2.ppf(1 - 5e-5, dim)


def _bincount(data: np.ndarray, dim: int) -> np.ndarray:
    return np.bincount(np.asarray(data), minlength=dim).astype(float)
