"""SecPE Secret Clustering (Alg 2, Thm 1 / Eq 7) and selection."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privtext.engine.loop import select
from privtext.errors import ConfigError
from privtext.mechanisms.clustering import (
    PublicClusters,
    centre_votes,
    clip_rows,
    public_kmeans,
    secret_clustering,
)
from privtext.mechanisms.nn import brute_force_nn


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _setup(seed: int, d: int = 12):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, d)) * 3
    pub = _unit(centres[rng.integers(0, 6, 600)] + rng.normal(size=(600, d)))
    priv = _unit(centres[rng.integers(0, 6, 150)] + rng.normal(size=(150, d)))
    groups_pub = rng.integers(0, 2, 600)
    groups_priv = rng.integers(0, 2, 150)
    cl = public_kmeans(pub, groups_pub, 2, 8, seed=seed)
    return rng, pub, priv, groups_pub, groups_priv, cl


def test_public_kmeans_statistics_are_exact(any_seed: int) -> None:
    _, pub, _, gp, _, cl = _setup(any_seed)
    assert cl.sizes.sum() == 600 and (cl.sizes >= 1).all()
    assert set(cl.group.tolist()) == {0, 1} and len(cl) <= 8
    # each centre is the mean of the public points of its group that are nearest to it
    for g in (0, 1):
        ki = np.nonzero(cl.group == g)[0]
        x = pub[gp == g]
        a = brute_force_nn(x, cl.centres[ki])
        for j, k in enumerate(ki):
            np.testing.assert_allclose(cl.centres[k], x[a == j].mean(0), atol=1e-5)
            assert cl.sizes[k] == (a == j).sum()


def test_sigma_zero_rho_one_gives_exact_pooled_means(any_seed: int) -> None:
    rng, _, priv, _, gpriv, cl = _setup(any_seed)
    rel = secret_clustering(priv, gpriv, cl, rho=np.ones(len(priv)), sigma=0.0, rng=rng)
    assert rel.sampled == len(priv)
    sums = cl.centres.astype(np.float64) * cl.sizes[:, None]
    m = np.zeros(len(cl))
    for g in (0, 1):
        ki = np.nonzero(cl.group == g)[0]
        qi = np.nonzero(gpriv == g)[0]
        a = ki[brute_force_nn(priv[qi], cl.centres[ki])]
        for i, k in zip(qi, a, strict=True):
            sums[k] += priv[i]
            m[k] += 1
    np.testing.assert_allclose(rel.centres, sums / (cl.sizes + m)[:, None], atol=1e-6)
    np.testing.assert_allclose(rel.counts, cl.sizes + m)
    # with ρ = 0 nothing private enters: the public statistics come back
    rel0 = secret_clustering(priv, gpriv, cl, rho=np.zeros(len(priv)), sigma=0.0, rng=rng)
    np.testing.assert_allclose(rel0.centres, cl.centres, atol=1e-6)
    np.testing.assert_allclose(rel0.counts, cl.sizes)


def test_released_statistics_have_stated_mean_and_variance(any_seed: int) -> None:
    """Thm 1: ñ_k − (n_k+m_k) ~ N(0, σ²); ẽ_k − mean_k ~ (2R/n_k)·N(0, σ² I). Zero signal: ρ = 0."""
    rng = np.random.default_rng(any_seed)
    d, K = 16, 5
    cl = PublicClusters(centres=_unit(rng.normal(size=(K, d))), sizes=np.array([3, 10, 40, 7, 100]),
                        group=np.zeros(K, dtype=np.int64))
    priv = _unit(rng.normal(size=(20, d)))
    sigma, R = 1.7, 0.8
    reps = 600
    dn = np.empty((reps, K))
    de = np.empty((reps, K, d))
    base = clip_rows(cl.centres, R)  # centres already have norm 1 > R; the release adds to the given centres
    for i in range(reps):
        rel = secret_clustering(priv, np.zeros(20, dtype=int), cl, rho=np.zeros(20), sigma=sigma, rng=rng, radius=R)
        dn[i] = rel.counts - cl.sizes
        de[i] = rel.centres - cl.centres
    assert base.shape == cl.centres.shape
    n = dn.size
    lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], n - 1) / (n - 1)
    assert lo <= dn.var(ddof=1) / sigma**2 <= hi
    assert abs(dn.mean()) <= 4.5 * sigma / np.sqrt(n)
    for k in range(K):
        scale = 2 * R / cl.sizes[k] * sigma
        z = de[:, k, :].ravel() / scale
        nk = z.size
        lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], nk - 1) / (nk - 1)
        assert lo <= z.var(ddof=1) <= hi, k
        assert abs(z.mean()) <= 4.5 / np.sqrt(nk)


def test_bernoulli_sampling_rate(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    _, _, priv, _, gpriv, cl = _setup(any_seed)
    rho = np.full(len(priv), 0.3)
    draws = [secret_clustering(priv, gpriv, cl, rho=rho, sigma=0.0, rng=rng).sampled for _ in range(200)]
    n = 200 * len(priv)
    p_hat = sum(draws) / n
    assert abs(p_hat - 0.3) <= 4.5 * np.sqrt(0.3 * 0.7 / n)


def test_clip_rows() -> None:
    x = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    np.testing.assert_allclose(clip_rows(x, 1.0), [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]])
    with pytest.raises(ConfigError):
        clip_rows(x, 0)


def test_centre_votes_go_to_nearest_candidate_of_same_group() -> None:
    cand = np.eye(4, dtype=np.float32)
    cg = np.array([0, 0, 1, 1])
    centres = np.array([[1, 0.1, 0, 0], [0, 0, 0.9, 0.1], [0.1, 0, 1, 0]], dtype=np.float32)
    h = centre_votes(centres, np.array([5.0, 2.0, 3.0]), np.array([0, 1, 0]), cand, cg)
    # centre 2 is nearest to candidate 2 overall, but it belongs to group 0: it votes for candidate 0
    assert h.tolist() == [8.0, 0.0, 2.0, 0.0]


def test_selection_rank_and_sample(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    h = np.array([5.0, 1.0, 9.0, 0.0, 3.0, 7.0])
    g = np.array([0, 0, 0, 1, 1, 1])
    sel = select(h, g, np.array([2, 1]), mode="rank", rng=rng)
    assert sorted(sel.tolist()) == [0, 2, 5]
    # sampling never picks a zero-probability candidate and follows the histogram
    h2 = np.array([0.0, 1.0, 3.0])
    draws = select(h2, np.zeros(3, dtype=int), np.array([20000]), mode="sample", rng=rng)
    frac = np.bincount(draws, minlength=3) / 20000
    assert frac[0] == 0
    assert abs(frac[2] - 0.75) <= 4.5 * np.sqrt(0.75 * 0.25 / 20000)
    # an all-zero group samples uniformly
    draws = select(np.zeros(4), np.zeros(4, dtype=int), np.array([8000]), mode="sample", rng=rng)
    assert set(draws.tolist()) == {0, 1, 2, 3}
    # negative noisy values are never probabilities
    draws = select(np.array([-5.0, 2.0]), np.zeros(2, dtype=int), np.array([100]), mode="sample", rng=rng)
    assert (draws == 1).all()
    with pytest.raises(ConfigError):
        select(h, g, np.array([1, 1]), mode="best", rng=rng)
