"""Hybrid SecPE: secret-free private records vote directly and exactly (public under secret protection), secret
holders through the noisy clusters; and the automatic number of clusters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privtext.data.population import Population
from privtext.mechanisms.clustering import public_kmeans
from privtext.methods.secpe import ClusterScorer, SecPEOptions, _NoSecrets, auto_clusters
from privtext.privacy import Budget, Ledger, ReleaseKeeper
from privtext.privacy.relation import NeighbouringRelation
from privtext.rng import derive
from privtext.search import brute_force_nn


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _scorer(tmp_path: Path, seed: int, *, sigma: float, holders: int, voting: str) -> tuple:
    rng = np.random.default_rng(seed)
    d = 16
    free = _unit(rng.normal(size=(120, d)))
    free_g = rng.integers(0, 2, 120)
    cl = public_kmeans(free, free_g, 2, 6, seed=seed)
    priv = _unit(rng.normal(size=(holders, d)))
    cands = _unit(rng.normal(size=(40, d)))
    pop = Population([str(i) for i in range(40)], ["x"] * 40, rng.integers(0, 2, 40), ["random"] * 40,
                     [None] * 40, ["g"] * 40, cands)
    led = Ledger(tmp_path / f"l{seed}{voting}.jsonl", Budget.noise())
    keeper = ReleaseKeeper(led, lambda r: tmp_path / f"v{seed}{voting}" / f"{r.key.replace('/', '_')}.npz")
    opts = SecPEOptions(voting=voting)
    sc = ClusterScorer(clusters=cl, private_emb=priv, private_groups=rng.integers(0, 2, holders),
                       rho=np.zeros(holders), sigma=sigma, noise=_NoSecrets(), options=opts, metric="l2",
                       center="none", threshold=0.0, relation=NeighbouringRelation.secret_holders(), keeper=keeper, noise_rng=lambda k: derive(seed, "noise", k),
                       direct_emb=free if voting == "hybrid" else None,
                       direct_groups=free_g if voting == "hybrid" else None)
    return sc, pop, free, free_g, cl


def test_hybrid_votes_are_the_exact_votes_of_secret_free_records_plus_the_holders_clusters(tmp_path: Path,
                                                                                          any_seed: int) -> None:
    """No holder sampled and no noise: the clusters carry nothing (ñ_k − n_k = 0), so the released histogram is
    exactly the secret-free records' nearest-candidate votes, within their label group."""
    sc, pop, free, free_g, _ = _scorer(tmp_path, any_seed, sigma=0.0, holders=10, voting="hybrid")
    hist = sc.score(iteration=0, population=pop, vote_emb=pop.emb).histogram
    want = np.zeros(len(pop))
    for g in (0, 1):
        ci = np.flatnonzero(pop.group == g)
        qi = np.flatnonzero(free_g == g)
        np.add.at(want, ci[brute_force_nn(free[qi], pop.emb[ci])], 1)
    np.testing.assert_array_equal(hist, want)
    assert hist.sum() == len(free)


def test_alg3_votes_are_the_cluster_counts_alone(tmp_path: Path, any_seed: int) -> None:
    """voting: clusters (Alg 3 as written): each centre gives its count n_k + m_k to one candidate."""
    sc, pop, _, _, cl = _scorer(tmp_path, any_seed, sigma=0.0, holders=10, voting="clusters")
    hist = sc.score(iteration=0, population=pop, vote_emb=pop.emb).histogram
    assert hist.sum() == pytest.approx(cl.sizes.sum()) and (hist > 0).sum() <= len(cl)


def test_auto_clusters_rule() -> None:
    # noise norm (2R/n_k)σ√d ≤ 0.25: σ = 2, d = 384 → n_k ≥ 313.5; 5000 public records → K = 15
    assert auto_clusters(n_public=5000, n_groups=4, num_samples=500, sigma=2.0, dim=384) == 15
    assert auto_clusters(n_public=5000, n_groups=50, num_samples=500, sigma=2.0, dim=384) == 50  # ≥ one per group
    assert auto_clusters(n_public=5000, n_groups=1, num_samples=8, sigma=0.0, dim=384) == 8  # ≤ N_syn
    assert auto_clusters(n_public=30, n_groups=1, num_samples=100, sigma=0.0, dim=384) == 3  # ≥ 10 per cluster

