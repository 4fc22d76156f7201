"""The noise and the private sampling, tested where users run them: every kind of draw is collected from the
function a run calls (a method's scorer, the release builders with the run's relation, the DP-SGD optimiser step,
``poisson_batches``, SecPE's Bernoulli samples) and its distribution is tested against the scale or rate the
ledger claims, derived here from first principles (not read back from the code under test).

Why: the tracer of :mod:`privtext.privacy.noise` records the scale a draw was *given*, so a draw at half the
Laplace scale, a Poisson sample at 2q or DP-SGD noise on only one tensor passed every other test (issue 36).

Tolerances. Each check is a test at a false-alarm rate of ``ALPHA`` = 1e-7 (two-sided), so the file passes for
any seed (the ``any_seed`` fixture runs several); the sample sizes make the planted faults of
``benchmarks/mutants.py`` (scale ×½ or ×1/10, a wrong Δ, rate 2q, one shared sample, noise on one tensor) fail by
tens of standard deviations:

* Gaussian draws z = x/s: Σz² ~ χ²_n (two-sided), and a Kolmogorov–Smirnov test of z against N(0, 1);
* Laplace draws z = x/b: mean |z| = 1 with sd 1/√n (normal approximation, n ≥ 1000), and KS against Laplace(1);
* sampling: the count of kept draws against Binomial(n, q) (exact binomial test), the per-step counts'
  dispersion (χ²) and per-record inclusion counts (χ²), so fixed-size, repeated or non-uniform samples fail too.
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privtext.privacy import noise as noise_mod
from privtext.privacy.relation import NeighbouringRelation
from privtext.privacy.release import DirectReleases, gaussian_release
from privtext.rng import noise_rng

ALPHA = 1e-7  # per check, two-sided

RELATIONS = {
    "add_remove": NeighbouringRelation.add_remove(),
    "replace_one": NeighbouringRelation.replace_one(),
    "secret_group_3": NeighbouringRelation.secret_group(3),
    "user_cap_5": NeighbouringRelation.user(5),
}
#: Δ of one non-negative L2 vote (one vote for one bin) under each relation (privacy/relation.py's docstring)
VOTE_DELTA = {"add_remove": 1.0, "replace_one": math.sqrt(2.0), "secret_group_3": 3.0, "user_cap_5": 5.0}
#: Δ₁ of one L1 count under each relation
COUNT_DELTA1 = {"add_remove": 1.0, "replace_one": 2.0, "secret_group_3": 3.0, "user_cap_5": 5.0}


# ------------------------------------------------------------------------------------------------ the tests' tests


def assert_gaussian(x: Any, std: Any, what: str) -> None:
    """``x`` are draws of N(0, std²) (``std`` broadcast against ``x``): Σz² and KS, each at ``ALPHA``."""
    x = np.asarray(x, dtype=np.float64)
    z = (x / np.broadcast_to(np.asarray(std, dtype=np.float64), x.shape)).ravel()
    n = z.size
    assert n >= 500, f"{what}: only {n} draws"
    q = float(np.sum(z * z))
    p = 2 * min(stats.chi2.cdf(q, n), stats.chi2.sf(q, n))
    assert p > ALPHA, (f"{what}: Σz² = {q:.1f} over {n} draws (expected {n} ± {math.sqrt(2 * n):.0f}): the draws' "
                       f"std is {math.sqrt(q / n):.4g} times the claimed one (p = {p:.2g})")
    ks = stats.kstest(z, "norm")
    assert ks.pvalue > ALPHA, f"{what}: the draws are not N(0, std²): KS D = {ks.statistic:.4f} (p = {ks.pvalue:.2g})"


def assert_laplace(x: Any, b: float, what: str) -> None:
    """``x`` are draws of Laplace(0, b): mean |x|/b = 1 (sd 1/√n) and KS, each at ``ALPHA``."""
    z = (np.asarray(x, dtype=np.float64) / float(b)).ravel()
    n = z.size
    assert n >= 1000, f"{what}: only {n} draws"
    m = float(np.mean(np.abs(z)))
    zs = (m - 1.0) * math.sqrt(n)
    p = 2 * stats.norm.sf(abs(zs))
    assert p > ALPHA, (f"{what}: mean |x| is {m:.4g}·b over {n} draws (expected 1 ± {1 / math.sqrt(n):.3f}): the "
                       f"draws' scale is not the claimed b = {b:.4g} (p = {p:.2g})")
    ks = stats.kstest(z, "laplace")
    assert ks.pvalue > ALPHA, f"{what}: the draws are not Laplace(b): KS D = {ks.statistic:.4f} (p = {ks.pvalue:.2g})"


def assert_binomial(k: int, n: int, q: float, what: str) -> None:
    p = stats.binomtest(int(k), int(n), float(q)).pvalue
    assert p > ALPHA, f"{what}: {k} of {n} kept, expected {n * q:.1f} ± {math.sqrt(n * q * (1 - q)):.1f} (q = {q:g})"


def assert_dispersion(counts: Any, trials: int, q: float, what: str) -> None:
    """``counts`` are independent Binomial(trials, q) counts: Σ(k − tq)²/(tq(1−q)) ~ χ²_m, two-sided (a sample of
    fixed size, or the same records every time, fails one side)."""
    k = np.asarray(counts, dtype=np.float64)
    m = k.size
    s = float(np.sum((k - trials * q) ** 2) / (trials * q * (1 - q)))
    p = 2 * min(stats.chi2.cdf(s, m), stats.chi2.sf(s, m))
    assert p > ALPHA, f"{what}: dispersion {s:.1f} over {m} counts (expected {m} ± {math.sqrt(2 * m):.0f}; p = {p:.2g})"


def test_the_checks_catch_a_wrong_scale_and_pass_the_right_one(any_seed: int) -> None:
    """The helpers themselves: right scale passes, half (or double) the scale fails, at these sample sizes."""
    rng = np.random.default_rng(any_seed)
    g, lap = rng.normal(0, 2.0, 4000), rng.laplace(0, 2.0, 4000)
    assert_gaussian(g, 2.0, "gaussian")
    assert_laplace(lap, 2.0, "laplace")
    for wrong in (1.0, 4.0, 1.8):
        with pytest.raises(AssertionError):
            assert_gaussian(g, wrong, "gaussian")
        with pytest.raises(AssertionError):
            assert_laplace(lap, wrong, "laplace")
    with pytest.raises(AssertionError):  # the shape: a Gaussian of the Laplace's variance
        assert_laplace(g * math.sqrt(2.0), 2.0, "a Gaussian of std √2·b")
    assert_binomial(int((rng.random(100_000) < 0.01).sum()), 100_000, 0.01, "bernoulli")
    with pytest.raises(AssertionError):
        assert_binomial(int((rng.random(100_000) < 0.02).sum()), 100_000, 0.01, "bernoulli at 2q")


class Recording(DirectReleases):
    """The library keeper (record first, check the spent event), keeping each release's values for the test."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[tuple[Any, dict[str, np.ndarray]]] = []

    def release(self, release: Any, compute: Any) -> dict[str, np.ndarray]:
        vals = super().release(release, compute)
        self.values.append((release, vals))
        return vals


def _noise(seed: int) -> Any:
    """A run's ``noise_rng(key)``, seeded (reproducible) so that the test is one of ``any_seed``'s seeds; a
    counter makes repeated keys draw fresh noise."""
    counter = itertools.count()
    return lambda key: noise_rng(seed, key, next(counter), reproducible=True)


# ------------------------------------------------------------------------------------------------ the primitives


def test_add_gaussian_draws_the_stated_std_with_and_without_factors(any_seed: int) -> None:
    rng = noise_rng(any_seed, "prim", reproducible=True)
    v = np.arange(6000, dtype=np.float64)
    assert_gaussian(noise_mod.add_gaussian(v, 0.7, rng) - v, 0.7, "add_gaussian")
    factor = np.repeat([0.5, 1.0, 4.0], 2000)
    assert_gaussian(noise_mod.add_gaussian(v, 0.7, rng, factor=factor) - v, 0.7 * factor, "add_gaussian(factor)")


def test_add_laplace_draws_the_stated_scale(any_seed: int) -> None:
    rng = noise_rng(any_seed, "prim", reproducible=True)
    v = np.linspace(-5, 5, 8000)
    assert_laplace(noise_mod.add_laplace(v, 1.3, rng) - v, 1.3, "add_laplace")


def test_add_gaussian_torch_draws_the_stated_std(any_seed: int) -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(any_seed)
    v = torch.arange(8000, dtype=torch.float64)
    assert_gaussian((noise_mod.add_gaussian_torch(v, 0.4, g) - v).numpy(), 0.4, "add_gaussian_torch")


# ------------------------------------------------------------------------------------------------ Gaussian releases


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("relation", list(RELATIONS))
def test_augpe_vote_noise_is_sigma_times_the_relations_delta(relation: str, any_seed: int) -> None:
    """Aug-PE's scorer (``DPVoteScorer.score``, as an iteration calls it): raw noisy votes minus the exact votes
    are N(0, (σΔ)²) with Δ of one vote under the run's relation."""
    from privtext.config import VotingConfig
    from privtext.data.population import Population
    from privtext.mechanisms.voting import nearest_votes
    from privtext.methods.augpe.scorers import DPVoteScorer

    rng = np.random.default_rng(1000 + any_seed)
    priv, cand = _unit(rng, 200, 16), _unit(rng, 3000, 16)
    keeper = Recording()
    sigma = 1.7
    scorer = DPVoteScorer(private_emb=priv, private_groups=np.zeros(200, dtype=np.int64), sigma=sigma,
                          voting=VotingConfig(), threshold=0.0, relation=RELATIONS[relation], keeper=keeper,
                          noise_rng=_noise(any_seed))
    pop = Population(ids=[str(i) for i in range(3000)], texts=[""] * 3000, group=np.zeros(3000, dtype=np.int64),
                     origin=["random"] * 3000, parent=[None] * 3000, generator=["g"] * 3000, emb=cand)
    scorer.score(iteration=0, population=pop, vote_emb=cand)
    ((release, vals),) = keeper.values
    exact, _ = nearest_votes(priv, cand, center=cand.mean(axis=0))  # the default voting.center: candidates
    std = sigma * VOTE_DELTA[relation]
    assert release.noise_std == pytest.approx(std)
    assert_gaussian(vals["raw_noisy"] - exact, std, f"Aug-PE votes under {relation}")


def _label_ctx(relation: NeighbouringRelation, seed: int, n_groups: int = 400) -> tuple[Any, Recording, np.ndarray]:
    """A run's context for ``RunContext.label_counts`` (the DP label histogram, as Aug-PE, DP-KPS and dpft call it)."""
    from privtext.data.labels import LabelSpace
    from privtext.methods.base import RunContext

    groups = np.random.default_rng(seed).integers(0, n_groups, 3000)
    config = SimpleNamespace(synthesis=SimpleNamespace(num_samples=n_groups * 2,
                                                       label_distribution=SimpleNamespace(kind="dp")))
    method = SimpleNamespace(name="test", config=config, noise_rng=_noise(seed), released={})
    space = LabelSpace(("label",), tuple((f"v{g}",) for g in range(n_groups)))
    keeper = Recording()
    ctx = RunContext(method=method, inputs=None, space=space, private_groups=groups,  # type: ignore[arg-type]
                     relation=relation, ledger=None, keeper=keeper, guard=None, prompt_log=None,  # type: ignore
                     generators=[], built_embedder=None)
    return ctx, keeper, np.bincount(groups, minlength=n_groups).astype(np.float64)


@pytest.mark.parametrize("relation", ["add_remove", "replace_one", "secret_group_3"])
def test_gaussian_label_histogram_noise(relation: str, any_seed: int) -> None:
    from privtext.methods.base import LabelNoise

    ctx, keeper, exact = _label_ctx(RELATIONS[relation], any_seed)
    for _ in range(8):
        ctx.label_counts(LabelNoise("gaussian", sigma=2.5))
    std = 2.5 * VOTE_DELTA[relation]
    assert all(r.noise_std == pytest.approx(std) for r, _ in keeper.values)
    assert_gaussian(np.stack([v["noisy"] - exact for _, v in keeper.values]), std,
                    f"Gaussian label histogram under {relation}")


@pytest.mark.parametrize("relation", ["add_remove", "replace_one", "secret_group_3"])
def test_laplace_label_histogram_noise(relation: str, any_seed: int) -> None:
    """DP-KPS's label shares: Laplace(Δ₁/ε) per bin, Δ₁ of one count under the relation."""
    from privtext.methods.base import LabelNoise

    ctx, keeper, exact = _label_ctx(RELATIONS[relation], any_seed)
    for _ in range(8):
        ctx.label_counts(LabelNoise("laplace", epsilon=0.8))
    b = COUNT_DELTA1[relation] / 0.8
    for r, _ in keeper.values:  # what the ledger states: the scale and the std √2·b of the noise drawn
        assert r.meta["laplace_scale"] == pytest.approx(b) and r.noise_std == pytest.approx(math.sqrt(2) * b)
    assert_laplace(np.stack([v["noisy"] - exact for _, v in keeper.values]), b,
                   f"Laplace label histogram under {relation}")


@pytest.mark.parametrize("q", [1, 3])
@pytest.mark.parametrize("relation", ["add_remove", "replace_one", "user_cap_5"])
def test_wasp_topq_noise(q: int, relation: str, any_seed: int) -> None:
    """WASP's release (``topq_contribution`` through the run's relation, ``dp_topq_histograms`` at the release's
    Δ, as ``WASP._vote`` does): both histograms carry N(0, (zΔ)²), Δ_Q = √(2·Σ_{j<q} 4^−j) per sample."""
    from privtext.mechanisms.topq import dp_topq_histograms, topq_contribution, topq_histograms

    rng = np.random.default_rng(2000 + any_seed)
    priv, cand = _unit(rng, 100, 8), _unit(rng, 2000, 8)
    rel = RELATIONS[relation]
    keeper = Recording()
    z = 0.9
    release = gaussian_release("votes/round_000", mechanism="topq_vote_histograms", noise_multiplier=z,
                               contribution=topq_contribution(q), relation=rel, iteration=0)
    noise = _noise(any_seed)

    def compute() -> Any:
        r, ev = dp_topq_histograms(priv, cand, q=q, noise_multiplier=z, sensitivity=release.sensitivity,
                                   rng=noise(release.key))
        return {"nearest": r.nearest, "furthest": r.furthest}, ev

    vals = keeper.release(release, compute)
    hn, hf = topq_histograms(priv, cand, q=q)
    delta_q = math.sqrt(2 * sum(4.0 ** -j for j in range(q)))
    per = {"add_remove": 1.0, "replace_one": math.sqrt(2.0), "user_cap_5": 5.0}[relation]
    std = z * delta_q * per
    assert_gaussian(np.concatenate([vals["nearest"] - hn, vals["furthest"] - hf]), std,
                    f"WASP Top-{q} votes under {relation}")


def test_federated_party_noise_sums_to_sigma_over_the_honest_parties(any_seed: int) -> None:
    """Each party adds N(0, σ²/(t − c)) (``plain_sum``, each party's draw from its ``party_rng`` as the SecAgg+
    path does), so t − c honest parties' shares sum to N(0, σ²) and all L parties' to N(0, Lσ²/(t − c))."""
    from privtext.federated.noise import plain_sum, plan_quantisation

    L, t, c, sigma, d = 5, 4, 1, 3.0, 3000
    plan = plan_quantisation(n_parties=L, dim=d, sigma=sigma, value_bound=50.0, min_survivors=t, collusion=c)
    zeros = [None] * L
    one = plain_sum(zeros, lambda _: np.zeros(d), plan, seed=any_seed, key="k", reproducible=True, survivors=[2])
    assert_gaussian(one, sigma / math.sqrt(t - c), "one party's share")
    honest = plain_sum(zeros, lambda _: np.zeros(d), plan, seed=any_seed, key="k", reproducible=True,
                       survivors=list(range(t - c)))
    assert_gaussian(honest, sigma, "t − c honest parties' sum")
    full = plain_sum(zeros, lambda _: np.zeros(d), plan, seed=any_seed, key="k", reproducible=True)
    assert_gaussian(full, sigma * math.sqrt(L / (t - c)), "all parties' sum")


def test_dp_length_histogram_noise(any_seed: int) -> None:
    from privtext.mechanisms.lengths import dp_length_histogram, length_bin_edges

    texts = ["a b c"] * 10 + ["word " * 40] * 5
    edges = length_bin_edges(256, bins=16)
    exact, _ = dp_length_histogram(texts, edges=edges, rng=np.random.default_rng(0), noise_multiplier=0.0)
    rng = noise_rng(any_seed, "len", reproducible=True)
    g = np.stack([dp_length_histogram(texts, edges=edges, rng=rng, noise_multiplier=1.5, sensitivity=2.0)[0] - exact
                  for _ in range(200)])
    assert_gaussian(g, 3.0, "Gaussian length histogram")
    lap = np.stack([dp_length_histogram(texts, edges=edges, rng=rng, epsilon=0.5)[0] - exact for _ in range(200)])
    assert_laplace(lap, 2.0, "Laplace length histogram")


# ------------------------------------------------------------------------------------------------ DP-KPS (Laplace)


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace_one"])
def test_dpkps_vocabulary_and_term_histogram_noise(neighbouring: str, any_seed: int) -> None:
    """``dpkps_sequences`` (DP-KPS steps 1–4) with the run's keeper: the vocabulary histogram carries
    Laplace(Δ₁/ε_vocab) with Δ₁ = r (2r replacing a document) on every public term, the term histogram
    Laplace(Δ₁/ε_kde) with Δ₁ = 1 (2) on every (class, term) bin. Every private text holds the same two terms,
    so the exact counts are known."""
    from privtext.data.vocabulary import PublicVocabulary
    from privtext.embed.hashing import HashingEmbedder
    from privtext.methods.dpkps.core import DPKPSOptions, dpkps_sequences

    words = [f"term{chr(97 + i // 676)}{chr(97 + i // 26 % 26)}{chr(97 + i % 26)}" for i in range(1200)]
    vocab = PublicVocabulary(tuple(words), source="test")
    texts = [f"{words[0]} and {words[1]}"] * 60
    labels = ["x"] * 30 + ["y"] * 30
    r = 4
    params = DPKPSOptions(epsilon_vocab=0.5, epsilon_kde=0.7, r=r, vocab_size=len(words), length=3,
                          neighbouring=neighbouring, sketch="histogram", sequence="independent", threshold=0.0)
    keeper = Recording()
    dpkps_sequences(texts, labels, classes=["x", "y"], public_vocabulary=vocab, embedder=HashingEmbedder(dim=32),
                    params=params, n_per_class=2, rng=np.random.default_rng(any_seed), keeper=keeper,
                    noise_rng=_noise(any_seed))
    (_rv, vv), (_rh, vh) = keeper.values
    mult = 1.0 if neighbouring == "add_remove" else 2.0
    h = np.zeros(len(words))
    h[:2] = len(texts)
    idx = np.asarray(vv["indices"])
    assert sorted(idx.tolist()) == list(range(len(words)))
    assert_laplace(vv["noisy_counts"] - h[idx], mult * r / 0.5, f"DP-KPS vocabulary under {neighbouring}")
    exact = np.zeros((2, len(words)))
    pos = {int(t): j for j, t in enumerate(idx)}  # Ṽ is the released order
    for c in range(2):
        exact[c, pos[0]] = exact[c, pos[1]] = 30 * 0.5  # weighting mean: ½ per term per document
    assert_laplace(vh["noisy"] - exact, mult * 1.0 / 0.7, f"DP-KPS term histogram under {neighbouring}")


# ------------------------------------------------------------------------------------------------ SecPE


def _secpe_set_up(k: int = 300) -> tuple[Any, np.ndarray, np.ndarray]:
    """k public clusters in k dimensions (centre j = 0.5·e_j, n_j = 4) and one private record per cluster at
    0.9·e_j (its nearest centre is its own), so each record's membership in both samples can be read off the
    released counts and centres."""
    from privtext.mechanisms.clustering import PublicClusters

    centres = 0.5 * np.eye(k, dtype=np.float32)
    clusters = PublicClusters(centres, np.full(k, 4, dtype=np.int64), np.zeros(k, dtype=np.int64))
    return clusters, 0.9 * np.eye(k, dtype=np.float32), np.zeros(k, dtype=np.int64)


def _secpe_samples(sample: str, rho: np.ndarray, seed: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept by the counts' sample, kept by the centres' sample), reps × k, from ``secret_clustering`` at σ = 0
    through the release keeper."""
    from privtext.mechanisms.clustering import clustering_release, secret_clustering

    clusters, priv, groups = _secpe_set_up(len(rho))
    keeper = Recording()
    noise = _noise(seed)
    counts, centres = [], []
    events = SimpleNamespace(secret_events=lambda sigma, per_release: {})
    for t in range(reps):
        release = clustering_release(f"clusters/iter_{t:03d}", sigma=0.0, sample=sample, noise=events,
                                     clusters=len(rho), radius=1.0, relation=NeighbouringRelation.secret_holders(),
                                     iteration=t)

        def compute(key: str = release.key) -> Any:
            out, ev = secret_clustering(priv, groups, clusters, rho=rho, sigma=0.0, rng=noise(key), sample=sample)
            return {"centres": out.centres, "counts": out.counts, "sampled": np.asarray([out.sampled])}, ev

        vals = keeper.release(release, compute)
        c = vals["counts"] - 4.0
        assert set(np.unique(c)) <= {0.0, 1.0}
        e = np.diag(vals["centres"])  # (4·0.5 + s·0.9)/(4 + s): 0.5 or 0.58
        s = np.isclose(e, (2.0 + 0.9) / 5.0)
        assert (s | np.isclose(e, 0.5)).all() and s.sum() == int(vals["sampled"][0])
        counts.append(c.astype(bool))
        centres.append(s)
    return np.asarray(counts), np.asarray(centres)


@pytest.mark.parametrize("sample", ["independent", "shared"])
def test_secpe_samples_each_record_at_its_rho(sample: str, any_seed: int) -> None:
    """Both Bernoulli(ρ) samples of Eq 7 keep each record at its ρ (binomial per ρ level; dispersion per record);
    ``independent``: the two samples agree as independent draws do (ρ² + (1−ρ)²); ``shared``: always."""
    levels = np.array([0.05, 0.3, 0.5, 0.9])
    rho = np.repeat(levels, 75)
    reps = 40
    kc, ke = _secpe_samples(sample, rho, any_seed, reps)
    for lv in levels:
        cols = rho == lv
        for name, kept in (("counts", kc), ("centres", ke)):
            assert_binomial(int(kept[:, cols].sum()), reps * int(cols.sum()), lv, f"SecPE {name} sample at ρ={lv}")
            assert_dispersion(kept[:, cols].sum(0), reps, lv, f"SecPE {name} sample per record at ρ={lv}")
    agree = kc == ke
    if sample == "shared":
        assert agree.all()
    else:
        for lv in levels:
            cols = rho == lv
            assert_binomial(int(agree[:, cols].sum()), reps * int(cols.sum()), lv ** 2 + (1 - lv) ** 2,
                            f"SecPE's two samples agree at ρ={lv}")


def test_secpe_cluster_noise_is_sigma_on_counts_and_2r_over_n_on_centres(any_seed: int) -> None:
    """Eq 7: ñ_k = n_k + m_k + N(0, σ²), ẽ_k = mean + (2R/n_k)·N(0, σ² I); with ρ = 0 nothing private enters, so
    the released values minus the public n_k and e_k are the noise."""
    from privtext.mechanisms.clustering import PublicClusters, clustering_release, secret_clustering

    rng = np.random.default_rng(any_seed)
    k, d, radius, sigma = 120, 24, 0.8, 1.9
    sizes = rng.integers(3, 40, k)
    centres = (_unit(rng, k, d) * 0.5).astype(np.float32)
    clusters = PublicClusters(centres, sizes.astype(np.int64), np.zeros(k, dtype=np.int64))
    priv = _unit(rng, 50, d)
    release = clustering_release("clusters/iter_000", sigma=sigma, sample="independent",
                                 noise=SimpleNamespace(secret_events=lambda s, per_release: {}), clusters=k,
                                 radius=radius, relation=NeighbouringRelation.secret_holders(), iteration=0)
    assert release.noise_std == sigma
    keeper = Recording()
    noise = _noise(any_seed)

    def compute() -> Any:
        out, ev = secret_clustering(priv, np.zeros(50, dtype=np.int64), clusters, rho=np.zeros(50), sigma=sigma,
                                    rng=noise(release.key), radius=radius)
        return {"centres": out.centres, "counts": out.counts}, ev

    for _ in range(10):
        keeper.release(release, compute)
    cnt = np.stack([v["counts"] - sizes for _, v in keeper.values])
    cen = np.stack([v["centres"] - centres.astype(np.float64) for _, v in keeper.values])
    assert_gaussian(cnt, sigma, "SecPE noisy counts")
    assert_gaussian(cen, (2 * radius / sizes)[None, :, None] * sigma, "SecPE noisy centres")


# ------------------------------------------------------------------------------------------------ DP-SGD


def _poisson_total(n: int, q: float, steps: int, seed: int) -> list[np.ndarray]:
    from privtext.mechanisms.dpsgd import poisson_batches

    return poisson_batches(n, q, steps, noise_rng(seed, "poisson", reproducible=True))


@pytest.mark.parametrize("q", [0.003, 0.05, 0.4])
def test_poisson_batches_keep_each_record_at_q_independently(q: float, any_seed: int) -> None:
    n, steps = 2000, 200
    batches = _poisson_total(n, q, steps, any_seed)
    assert len(batches) == steps
    sizes = np.array([len(b) for b in batches])
    assert_binomial(int(sizes.sum()), n * steps, q, "records over all steps")
    assert_dispersion(sizes, n, q, "batch sizes")
    per = np.bincount(np.concatenate(batches), minlength=n)
    assert_dispersion(per, steps, q, "steps each record was in")
    for b in batches:
        assert np.all(np.diff(b) > 0) and (len(b) == 0 or (b[0] >= 0 and b[-1] < n))


def _linear(seed: int, d: int = 3) -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("opacus")
    torch.manual_seed(seed)
    return torch, torch.nn.Sequential(torch.nn.Linear(d, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def test_dpsgd_steps_sample_at_the_rate_the_event_states(any_seed: int) -> None:
    """``dpsgd_steps`` (the loop a dpft epoch runs): the records it trains on are Poisson samples at the q of the
    event it returns (StepStats.records against Binomial(n·T, q), batch sizes' dispersion)."""
    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private

    torch, model = _linear(any_seed)
    n, q, steps = 1500, 0.02, 60
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(any_seed))
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=0.01), max_grad_norm=1.0,
                           normaliser=n * q)
    sizes: list[int] = []

    def loss_of(idx: np.ndarray) -> Any:
        sizes.append(len(idx))
        return (gs(x[torch.as_tensor(idx)]) ** 2).mean()

    st, event = dpsgd_steps(gs, opt, n_records=n, loss_of=loss_of, steps=steps, sampling_rate=q, noise_std=0.5,
                            sensitivity=1.0, rng=noise_rng(any_seed, "sgd", reproducible=True),
                            physical_batch_size=10_000)
    from privtext.privacy.events import dpsgd_event, event_key

    assert event_key(event) == event_key(dpsgd_event(0.5, q, steps))
    assert st.steps == steps and sum(sizes) == st.records
    assert_binomial(st.records, n * steps, q, "records DP-SGD trained on")
    assert_dispersion(np.array(sizes + [0] * st.empty_batches), n, q, "DP-SGD batch sizes")


def _tiny_gpt(seed: int) -> tuple[Any, Any, list[list[int]]]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("opacus")
    from privtext.generate.lm import PAD, build_model, model_shape

    torch.manual_seed(seed)
    model = build_model(model_shape("tiny", n_positions=16, vocab_size=300), vocab_size=300, bos_id=0, eos_id=1,
                        pad_id=PAD)
    seqs = [[int(v) for v in np.random.default_rng(seed + i).integers(10, 300, 8)] for i in range(6)]
    return torch, model, seqs


def _one_step(seed: int, *, clip: float, noise_std: float, source: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """One DP-SGD step at q = 1 with plain SGD, lr = 1, B = 1: θ₀ − θ₁ = Σᵢ clip(gᵢ, C) + z. Returns θ₀, θ₁ (per
    trainable tensor, float64 numpy) and the (model, seqs) for recomputing the clipped sum."""
    from privtext.generate.lm import PAD, collate, sequence_losses
    from privtext.mechanisms.dpsgd import dpsgd_steps, make_private

    torch, model, seqs = _tiny_gpt(seed)
    before = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters() if p.requires_grad}
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0), max_grad_norm=clip, normaliser=1)
    dpsgd_steps(gs, opt, n_records=len(seqs), steps=1, sampling_rate=1.0, noise_std=noise_std, sensitivity=clip,
                loss_of=lambda idx: sequence_losses(gs, collate([seqs[int(i)] for i in idx], pad_id=PAD)).mean(),
                rng=noise_rng(seed, "dpsgd", reproducible=True), noise_source=source)
    after = {n: p.detach().double().numpy().copy() for n, p in gs._module.named_parameters() if p.requires_grad}
    return before, after, (model, seqs)


@pytest.mark.parametrize("source", ["csprng", "torch"])
def test_dpsgd_noise_is_sigma_c_on_every_trainable_tensor(source: str, any_seed: int) -> None:
    """The optimiser step of a dpft epoch: with C = 1e-9 the clipped sum is ≤ 6e-9, so θ₀ − θ₁ is the noise; every
    trainable tensor on its own must be N(0, (σC)²) (a χ² per tensor), and all of them together (χ², KS)."""
    before, after, _ = _one_step(any_seed, clip=1e-9, noise_std=0.3, source=source)
    diffs = {n: before[n] - after[n] for n in before}
    assert len(diffs) > 5
    for n, r in diffs.items():
        q = float(np.sum(r * r)) / 0.09
        p = 2 * min(stats.chi2.cdf(q, r.size), stats.chi2.sf(q, r.size))
        assert p > ALPHA, f"tensor {n} ({r.size} values): update std {math.sqrt(q / r.size) * 0.3:.4g}, noise 0.3"
    assert_gaussian(np.concatenate([r.ravel() for r in diffs.values()]), 0.3, f"DP-SGD noise ({source})")


def test_dpsgd_clips_each_records_whole_gradient_to_c(any_seed: int) -> None:
    """σ = 0: the step is exactly Σᵢ clip(gᵢ, C), each record's gradient over all trainable tensors scaled to
    norm ≤ C, recomputed here record by record without Opacus."""
    from privtext.generate.lm import PAD, collate, sequence_losses

    clip = 0.05
    before, after, (_model, seqs) = _one_step(any_seed, clip=clip, noise_std=0.0, source="csprng")
    _torch, fresh, _ = _tiny_gpt(any_seed)  # the same θ₀
    names = list(before)
    total = {n: np.zeros_like(v) for n, v in before.items()}
    norms = []
    for s in seqs:
        fresh.zero_grad(set_to_none=True)
        sequence_losses(fresh, collate([s], pad_id=PAD)).mean().backward()
        g = {n: p.grad.detach().double().numpy() for n, p in fresh.named_parameters() if p.requires_grad}
        norm = math.sqrt(sum(float((v ** 2).sum()) for v in g.values()))
        norms.append(norm)
        for n in names:
            total[n] += g[n] * min(1.0, clip / (norm + 1e-6))
    assert min(norms) > 10 * clip  # every record is clipped: a missing or looser clip changes the step
    for n in names:
        np.testing.assert_allclose(before[n] - after[n], total[n], atol=1e-6, rtol=1e-3, err_msg=n)


def _flat(model: Any) -> np.ndarray:
    return np.concatenate([p.detach().double().numpy().ravel() for p in model.parameters() if p.requires_grad])


def _sgd_updates(model: Any, gs: Any, opt: Any, *, n: int, steps: int, **kw: Any) -> tuple[np.ndarray, Any]:
    """Run ``dpsgd_steps`` with plain SGD (lr 1, B 1) and return every step's update θ_{t} − θ_{t+1}."""
    from privtext.mechanisms.dpsgd import dpsgd_steps

    torch = pytest.importorskip("torch")
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(7))
    snaps = [_flat(model)]
    st, event = dpsgd_steps(gs, opt, n_records=n, steps=steps, on_step=lambda t, s: snaps.append(_flat(model)),
                            loss_of=lambda idx: (gs(x[torch.as_tensor(idx)]) ** 2).mean(), **kw)
    return -np.diff(np.stack(snaps), axis=0), (st, event)


def test_dpsgd_release_noise_is_sigma_times_the_clipping_norm(any_seed: int) -> None:
    """A dpft epoch as ``DPFT.fine_tune`` runs it: ``dpsgd_release`` with the clipping norm's contribution under
    add/remove one record (Δ = C, noise std σC, the event of T Poisson-sampled Gaussian steps), the optimiser
    clipping at C, and ``dpsgd_steps`` at the release's noise std and Δ: every step's update is N(0, (σC)²) per
    coordinate (σC = 200 drowns the clipped sum of 3 records, ≤ 1.5)."""
    from privtext.mechanisms.dpsgd import dpsgd_contribution, make_private
    from privtext.privacy.events import dpsgd_event, event_key
    from privtext.privacy.release import dpsgd_release

    torch, model = _linear(any_seed)
    C, sigma, steps = 0.5, 400.0, 250
    release = dpsgd_release("dpsgd/epoch_000", noise_multiplier=sigma, sampling_rate=1.0, steps=steps,
                            contribution=dpsgd_contribution(C), relation=NeighbouringRelation.add_remove(),
                            iteration=0)
    assert release.sensitivity == C and release.noise_std == pytest.approx(sigma * C)
    assert event_key(release.event) == event_key(dpsgd_event(sigma, 1.0, steps))
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0), max_grad_norm=C, normaliser=1)
    keeper, out = Recording(), {}

    def compute() -> Any:
        upd, (_, event) = _sgd_updates(model, gs, opt, n=3, steps=steps, sampling_rate=1.0,
                                       noise_std=release.noise_std, sensitivity=release.sensitivity,
                                       rng=noise_rng(any_seed, release.key, reproducible=True))
        out["updates"] = upd
        return {}, event

    keeper.release(release, compute)
    assert_gaussian(out["updates"], sigma * C, "DP-SGD updates of a dpft epoch")


def test_dpsgd_empty_batch_releases_noise(any_seed: int) -> None:
    """A step whose Poisson batch is empty still adds N(0, (σC)²) to every coordinate (the accounting assumes every
    step is taken): at q = 1e-9 every batch of one record is empty, and each update is the noise alone."""
    from privtext.mechanisms.dpsgd import make_private

    torch, model = _linear(any_seed)
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0), max_grad_norm=1.0, normaliser=1)
    upd, (st, _) = _sgd_updates(model, gs, opt, n=1, steps=200, sampling_rate=1e-9, noise_std=0.7, sensitivity=1.0,
                                rng=noise_rng(any_seed, "empty", reproducible=True))
    assert st.empty_batches == 200 and st.records == 0
    assert_gaussian(upd, 0.7, "DP-SGD updates of empty batches")
