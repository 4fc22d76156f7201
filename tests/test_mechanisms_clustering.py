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
    clustering_event,
    clustering_plan,
    clustering_secret_events,
    public_kmeans,
    secret_clustering,
)
from privtext.search import brute_force_nn


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
    rel, _ = secret_clustering(priv, gpriv, cl, rho=np.ones(len(priv)), sigma=0.0, rng=rng)
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
    rel0, _ = secret_clustering(priv, gpriv, cl, rho=np.zeros(len(priv)), sigma=0.0, rng=rng)
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
    for i in range(reps):
        rel, _ = secret_clustering(priv, np.zeros(20, dtype=int), cl, rho=np.zeros(20), sigma=sigma, rng=rng,
                                   radius=R)
        dn[i] = rel.counts - cl.sizes
        de[i] = rel.centres - cl.centres
    np.testing.assert_allclose(rel.noise_std_centres, 2 * R / cl.sizes * sigma)
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
    draws = [secret_clustering(priv, gpriv, cl, rho=rho, sigma=0.0, rng=rng)[0].sampled for _ in range(200)]
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


# --------------------------------------------------------------------------------------- one sample or two


def _single_cluster(d: int = 4) -> tuple[PublicClusters, np.ndarray]:
    """One public cluster of 10 points at e₁ and 200 private points at −e₁: a sampled private point moves both
    the count (by 1) and the centre (towards −e₁)."""
    e1 = np.zeros((1, d), dtype=np.float32)
    e1[0, 0] = 1
    cl = PublicClusters(centres=e1, sizes=np.array([10]), group=np.zeros(1, dtype=np.int64))
    return cl, np.repeat(-e1, 200, axis=0)


def test_counts_and_centres_draw_independent_samples_by_default(any_seed: int) -> None:
    """σ = 0, ρ = ½: the count reveals m (the counts' sample) and the centre reveals m' (the centres' sample).
    ``independent`` draws them separately: m and m' are uncorrelated; ``shared`` (Alg 2) makes them equal."""
    rng = np.random.default_rng(any_seed)
    cl, priv = _single_cluster()
    rho = np.full(len(priv), 0.5)
    g = np.zeros(len(priv), dtype=np.int64)

    def draws(sample: str) -> tuple[np.ndarray, np.ndarray]:
        m, m2 = [], []
        for _ in range(300):
            rel, _ = secret_clustering(priv, g, cl, rho=rho, sigma=0.0, rng=rng, sample=sample)
            m.append(rel.counts[0] - 10)
            # centre x-coordinate = (10 − m')/(10 + m')  ⇒  m' = 10(1 − x)/(1 + x)
            x = rel.centres[0, 0]
            m2.append(10 * (1 - x) / (1 + x))
        return np.array(m), np.array(m2)

    m, m2 = draws("shared")
    np.testing.assert_allclose(m, m2, atol=1e-6)
    m, m2 = draws("independent")
    assert not np.allclose(m, m2)
    r = np.corrcoef(m, m2)[0, 1]
    assert abs(r) <= 4.5 / np.sqrt(len(m))  # uncorrelated: |r| ~ N(0, 1/n)
    for x in (m, m2):  # each is still Binomial(200, ½)
        assert abs(x.mean() - 100) <= 4.5 * np.sqrt(50 / len(x))


def test_clustering_events_match_the_plan() -> None:
    """independent: two Gaussian compositions with multiplier σ per clustering; shared: one with σ/√2."""
    import dp_accounting

    assert clustering_plan(3, "independent").compositions == 6
    assert clustering_plan(3, "shared").compositions == 3
    assert clustering_plan(3, "shared").release_sensitivity == pytest.approx(np.sqrt(2))
    assert clustering_event(2.0, "independent") == dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(2.0), 2)
    assert clustering_event(2.0, "shared") == dp_accounting.GaussianDpEvent(2.0 / np.sqrt(2))
    cl, priv = _single_cluster()
    for sample in ("independent", "shared"):
        _, ev = secret_clustering(priv, np.zeros(len(priv), dtype=int), cl, rho=np.full(len(priv), 0.1), sigma=2.0,
                                  rng=np.random.default_rng(0), sample=sample)
        assert ev == clustering_event(2.0, sample)
    with pytest.raises(ConfigError, match="sample"):
        clustering_plan(1, "twice")


def test_shared_sample_accounted_as_two_releases_is_caught_and_fixed() -> None:
    """The review's finding: with ONE shared Bernoulli sample, accounting counts and centres as two independent
    mixture releases (2T compositions, Δ = 1) under-counts. A valid lower bound on the true posterior (test on the
    sum of the T outputs' projections, the pair moving by √2·S) exceeds r at the old σ; the shared-sample plan
    (Δ = √2, T compositions) and the independent-sample plan (2T compositions) both meet r by the ledger's
    own accountant, and independent needs less noise at the same ρ."""
    import math

    import scipy.sparse as sp
    from scipy.special import ndtr, ndtri

    from privtext.privacy import secret_noise
    from privtext.privacy.accounting import secret_check
    from privtext.privacy.secretnoise import poisson_binomial_pmf

    p, r = 1e-4, 1e-3
    m = sp.csr_matrix(np.ones((1, 1)))
    for eta, T in ((0.05, 1), (0.2, 1), (0.5, 5)):  # one holder; "max" sampling gives ρ = 1, so scale it
        sampling = f"scaled:{eta}"
        old = secret_noise(m, p=p, r=r, compositions=2 * T, sampling=sampling)  # the old accounting
        rho = old.rho[old.in_lp]
        pmf = poisson_binomial_pmf(rho)
        tot = np.ones(1)
        for _ in range(T):
            tot = np.convolve(tot, pmf)
        k = np.arange(tot.size)
        lower = float(np.dot(tot, ndtr(math.sqrt(2) * k / (old.sigma * math.sqrt(T)) - (-ndtri(p)))))
        assert lower > r * 1.1, (eta, T, lower / r)  # the old σ does not deliver r
        shared = secret_noise(m, p=p, r=r, compositions=T, sampling=sampling, release_sensitivity=math.sqrt(2))
        indep = secret_noise(m, p=p, r=r, compositions=2 * T, sampling=sampling)
        assert shared.sigma > old.sigma and indep.sigma == pytest.approx(old.sigma)
        assert indep.sigma <= shared.sigma * (1 + 1e-9)
        for res, sample in ((shared, "shared"), (indep, "independent")):
            evs = clustering_secret_events(res, res.sigma, sample)
            (se,) = evs.values()
            ok, bound, _ = secret_check([se.event] * T, p, r)
            assert ok and bound <= r, (sample, bound)
        # and the shared pair at the independent σ is NOT protected (so the modes are not interchangeable)
        (se,) = clustering_secret_events(
            secret_noise(m, p=p, r=r, compositions=T, sampling=sampling, release_sensitivity=math.sqrt(2)),
            indep.sigma, "shared").values()
        if indep.sigma < shared.sigma * 0.99:
            assert not secret_check([se.event] * T, p, r)[0]


def test_one_search_for_both_samples_in_chunks_equals_separate_exact_searches(any_seed: int) -> None:
    """The private records are searched once for the union of the counts' and the centres' samples, chunk by
    chunk: each release must equal its own exact search over its own sample (σ = 0, ρ = ½, independent)."""
    from privtext.mechanisms import clustering as C

    rng, _, priv, _, gpriv, cl = _setup(any_seed)
    priv = priv * rng.uniform(0.5, 1.5, size=(len(priv), 1)).astype(np.float32)  # some rows get clipped
    keep_a, keep_b = rng.random(len(priv)) < 0.5, rng.random(len(priv)) < 0.5
    asg = C.assign_records(priv, gpriv, cl, search=keep_a | keep_b, chunk=7)
    owner = asg.owner
    sums = C._cluster_sums(priv, owner, asg.scale, keep_b, len(cl), chunk=5)
    ehat = clip_rows(priv, 1.0)
    ref_owner = np.full(len(priv), -1)
    for g in (0, 1):
        ki, qi = np.nonzero(cl.group == g)[0], np.nonzero(gpriv == g)[0]
        ref_owner[qi] = ki[brute_force_nn(ehat[qi], cl.centres[ki])]
    both = keep_a | keep_b
    assert np.array_equal(owner[both], ref_owner[both]) and (owner[~both] == -1).all()
    ref_sums = np.zeros_like(sums)
    np.add.at(ref_sums, ref_owner[keep_b], ehat[keep_b].astype(np.float64))
    np.testing.assert_allclose(sums, ref_sums, atol=1e-5)
    assert np.array_equal(C._counts(owner, keep_a, len(cl)), np.bincount(ref_owner[keep_a], minlength=len(cl)))


def test_a_run_assignment_reused_gives_the_same_releases_as_fresh_searches(any_seed: int) -> None:
    """SecPE searches the private set once per run (assign_records) and reuses it for every clustering: the
    released values must equal, byte for byte, those of a search per release with the same privacy generator —
    for both sample modes, over several releases, with records that can never be sampled (ρ = 0) left out."""
    from privtext.mechanisms.clustering import assign_records

    _, _, priv, _, gpriv, cl = _setup(any_seed)
    rho = np.random.default_rng(any_seed + 1).uniform(0.0, 0.8, len(priv))
    rho[::7] = 0.0
    asg = assign_records(priv, gpriv, cl, search=rho > 0, chunk=11)
    assert (asg.owner[rho == 0] == -1).all() and (asg.owner[rho > 0] >= 0).all()
    for sample in ("independent", "shared"):
        for t in range(3):
            fresh, _ = secret_clustering(priv, gpriv, cl, rho=rho, sigma=0.7, rng=np.random.default_rng(t),
                                         sample=sample)
            reused, _ = secret_clustering(priv, gpriv, cl, rho=rho, sigma=0.7, rng=np.random.default_rng(t),
                                          sample=sample, assignment=asg)
            assert np.array_equal(fresh.centres, reused.centres) and np.array_equal(fresh.counts, reused.counts)
            assert fresh.sampled == reused.sampled
    # an assignment that cannot serve this release is refused, naming what is wrong
    with pytest.raises(ConfigError, match=r"lacks \d+ records that can be sampled"):
        secret_clustering(priv, gpriv, cl, rho=np.full(len(priv), 0.5), sigma=0.7,
                          rng=np.random.default_rng(0), assignment=asg)
    with pytest.raises(ConfigError, match=r"clipped at radius 1\.0, not 2\.0"):
        secret_clustering(priv, gpriv, cl, rho=rho, sigma=0.7, rng=np.random.default_rng(0), radius=2.0,
                          assignment=asg)
    with pytest.raises(ConfigError, match=f"a record assignment of {len(priv)} records for {len(priv) - 1}"):
        secret_clustering(priv[:-1], gpriv[:-1], cl, rho=rho[:-1], sigma=0.7, rng=np.random.default_rng(0),
                          assignment=asg)


def test_approximate_assignment_keeps_one_cluster_per_record_and_mostly_agrees() -> None:
    """ivf-gemm assignment (allowed: the sensitivity needs one cluster per record, not the nearest): σ = 0 and
    ρ = 1 put every record in exactly one cluster of its own group, and most in the exact one."""
    rng = np.random.default_rng(4)
    pub = _unit(rng.normal(size=(8000, 16)))
    priv = _unit(rng.normal(size=(3000, 16)))
    gpub, gpriv = np.zeros(8000, dtype=np.int64), np.zeros(3000, dtype=np.int64)
    cl = public_kmeans(pub, gpub, 1, 200, seed=0, sample_per_centre=20, assign_backend="ivf-gemm")
    assert cl.sizes.sum() == 8000
    exact, _ = secret_clustering(priv, gpriv, cl, rho=np.ones(3000), sigma=0.0, rng=rng)
    approx, _ = secret_clustering(priv, gpriv, cl, rho=np.ones(3000), sigma=0.0, rng=rng, backend="ivf-gemm",
                                  nprobe=2)
    assert (approx.counts - cl.sizes).sum() == 3000 == (exact.counts - cl.sizes).sum()
    moved = np.abs((approx.counts - cl.sizes) - (exact.counts - cl.sizes)).sum() / 2  # records in another cluster
    assert 0 < moved <= 0.1 * 3000
    with pytest.raises(ConfigError, match="sample_per_centre must be ≥ 1, got 0"):
        public_kmeans(pub, gpub, 1, 10, seed=0, sample_per_centre=0)
