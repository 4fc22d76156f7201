"""DP-KDE with random Fourier features (DP-KPS §2, App A.2): RFF accuracy vs the exact Gaussian KDE, Thm A.1's
zero-padding identity, noise level, sensitivity, events, ensembles and sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privtext.errors import ConfigError, DataError, InvalidPrivacyParameter
from privtext.mechanisms.kde import (
    BlockProjections,
    RandomFourierFeatures,
    TermRecords,
    dp_kde_sketch,
    dp_kde_sketch_terms,
    dp_term_histogram,
    ensemble_blocks,
    gaussian_kde,
    gaussian_kernel,
    histogram_sensitivity,
    kde_ensemble_event,
    kde_event,
    record_windows,
    rff_error_bound,
    rff_kde,
    sketch_sensitivity,
)
from privtext.methods.dpkps.sampling import (
    TermScorer,
    contrast_weights,
    draw_rows,
    sample_histogram_sequences,
    sample_sequences,
    score_noise_std,
    sketch_for_step,
)
from privtext.privacy.accounting import epsilon_for_delta
from privtext.privacy.pure import pure_epsilon

DELTA = 1e-6  # failure probability of every RFF bound below (over the draw of ω, β)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _clustered(rng: np.random.Generator, n: int, d: int, k: int = 5, spread: float = 0.35) -> np.ndarray:
    centres = rng.normal(size=(k, d))
    return _unit(centres[rng.integers(0, k, size=n)] + spread * rng.normal(size=(n, d)))


# ------------------------------------------------------------------------------------------- RFF accuracy


def test_rff_kernel_matches_the_papers_gaussian_kernel(any_seed: int) -> None:
    """E[z(x)z(y)] = exp(−‖x − y‖²/h²) (App A.2): at I = 2¹⁶ every pair is within the Hoeffding bound; the
    Rahimi–Recht convention exp(−‖x − y‖²/(2h²)) is outside it at some distance (the test can tell them apart)."""
    rng = np.random.default_rng(any_seed)
    h = 0.8
    f = RandomFourierFeatures.draw(4, 2**16, bandwidth=h, rng=rng)
    dists = np.array([0.0, 0.3, 0.6, 1.0, 1.5, 2.0])
    x = np.zeros((len(dists), 4))
    y = np.zeros((len(dists), 4))
    y[:, 0] = dists
    est = (f.transform(x) * f.transform(y)).sum(axis=1) / f.n_features
    eta = rff_error_bound(f.n_features, failure_prob=DELTA, n_queries=len(dists))
    assert np.abs(est - np.exp(-dists**2 / h**2)).max() < eta
    assert np.abs(est - np.exp(-dists**2 / (2 * h**2))).max() > eta
    assert np.allclose(np.diag(gaussian_kernel(x, y, bandwidth=h)), np.exp(-dists**2 / h**2))


@pytest.mark.parametrize("h", [0.5, 1.0])
def test_rff_kde_within_the_error_bound_for_its_feature_count(h: float, any_seed: int) -> None:
    """ε = ∞: the released sketch's estimate equals the plain RFF estimate and both lie within the Hoeffding
    bound and the sharper Bernstein bound (with the exact second moment) of the exact KDE, at every query."""
    rng = np.random.default_rng(any_seed)
    d, n_feat = 16, 4096
    data = _clustered(rng, 300, d)
    queries = np.concatenate([data[:40], _clustered(rng, 40, d)])
    f = RandomFourierFeatures.draw(d, n_feat, bandwidth=h, rng=rng)
    exact = gaussian_kde(data, queries, bandwidth=h)
    assert exact.max() - exact.min() > 0.1  # the KDE varies: a wrong kernel would show
    est = rff_kde(data, queries, f)
    sketch, _ = dp_kde_sketch([p[None] for p in data], np.zeros(len(data), dtype=int), n_classes=1, features=f,
                              epsilon=math.inf, rng=rng)
    assert np.allclose(sketch.estimate(queries)[0], est * len(data))  # sum sketch = n × mean estimate
    second = float(gaussian_kernel(data, data, bandwidth=h).mean())
    hoeffding = rff_error_bound(n_feat, failure_prob=DELTA, n_queries=len(queries))
    bernstein = rff_error_bound(n_feat, failure_prob=DELTA, n_queries=len(queries), second_moment=second)
    assert bernstein < hoeffding
    assert np.abs(est - exact).max() < bernstein


def test_theorem_a1_zero_padding_identity(any_seed: int) -> None:
    """A sketch over m-term windows scores i-term prefixes by zero padding; × e^{(m−i)/H²} it estimates the
    prefix KDE Σ_w (1/k_doc)·exp(−‖x_w[:i] − y‖²/H²) within the RFF bound times that factor, for every i ≤ m.
    Without the factor it is off for short prefixes (the identity is not vacuous)."""
    rng = np.random.default_rng(any_seed)
    d, m, V, h = 6, 4, 30, 0.7
    emb = _unit(rng.normal(size=(V, d)))
    docs = [list(rng.choice(V, size=int(rng.integers(2, 9)), replace=False)) for _ in range(150)]
    feats = RandomFourierFeatures.draw(m * d, 8192, bandwidth=h * math.sqrt(m), rng=rng)
    proj = BlockProjections(emb, feats, m)
    sketch, _ = dp_kde_sketch_terms(TermRecords(docs, np.zeros(len(docs), dtype=int), 1), projections=proj,
                                    epsilon=math.inf, rng=rng)
    ids, rec = record_windows(docs, m)
    w = 1.0 / np.bincount(rec)[rec]
    x = emb[ids].reshape(len(ids), -1)
    big_h = h * math.sqrt(m)
    wsum = w.sum()
    second = float(w @ gaussian_kernel(x, x, bandwidth=big_h) @ w) / wsum**2
    for i in range(1, m + 1):
        y = emb[rng.integers(0, V, size=(25, i))].reshape(25, -1)
        exact = w @ gaussian_kernel(x[:, : i * d], y, bandwidth=big_h)
        est = sketch.prefix_estimate(y)[0]
        corr = sketch.padding_correction(i)
        assert corr == pytest.approx(math.exp((m - i) / big_h**2))
        eta = rff_error_bound(8192, failure_prob=DELTA, n_queries=25 * m, weight_sum=wsum, second_moment=second)
        assert np.abs(est - exact).max() < corr * eta
        if i == 1:
            assert np.abs(est / corr - exact).max() > corr * eta  # the padding factor matters


def test_term_scorer_equals_explicit_concatenations(any_seed: int) -> None:
    """The fast scorer (cos-addition with block projections) = the sketch's estimate on explicit padded
    concatenations; the term-path sketch = the point-path sketch on explicit windows."""
    rng = np.random.default_rng(any_seed)
    d, m, V = 5, 3, 12
    emb = _unit(rng.normal(size=(V, d)))
    docs = [list(rng.choice(V, size=int(rng.integers(0, 7)), replace=False)) for _ in range(40)]
    cls = rng.integers(0, 2, size=40)
    feats = RandomFourierFeatures.draw(m * d, 256, bandwidth=1.0, rng=rng)
    proj = BlockProjections(emb, feats, m)
    a, _ = dp_kde_sketch_terms(TermRecords(docs, cls, 2), projections=proj, epsilon=math.inf, rng=rng)
    points = [emb[np.array(t, dtype=int)[np.arange(max(len(t) - m + 1, 0))[:, None] + np.arange(m)]].reshape(-1, m * d)
              for t in docs]
    b, _ = dp_kde_sketch(points, cls, n_classes=2, features=feats, blocks=m, epsilon=math.inf, rng=rng)
    assert np.allclose(a.noisy, b.noisy)
    scorer = TermScorer(a, proj)
    for j in range(m):
        prefixes = rng.integers(0, V, size=(4, j))
        got = scorer.scores(1, prefixes)
        q = np.concatenate([np.repeat(emb[prefixes].reshape(4, 1, j * d), V, axis=1),
                            np.broadcast_to(emb[None], (4, V, d))], axis=2).reshape(4 * V, (j + 1) * d)
        assert np.allclose(got, a.estimate(q)[1].reshape(4, V), atol=1e-9)


# ------------------------------------------------------------------------------------------- the release


@pytest.mark.parametrize(("noise", "rel", "factor"), [("sum", "add_remove", math.sqrt(2)),
                                                      ("sum", "replace_one", 2 * math.sqrt(2)),
                                                      ("paper", "add_remove", 2 * math.sqrt(2))])
def test_zero_signal_sketch_noise_is_laplace_with_the_stated_scale(noise: str, rel: str, factor: float,
                                                                  any_seed: int) -> None:
    """Records without points: the released sketch is pure noise. b = factor·I/ε; KS at α = 1e-6, second
    moment 2b² within 6 standard errors; the score noise std matches √2·b/√I."""
    rng = np.random.default_rng(any_seed)
    n_feat, eps = 512, 3.0
    f = RandomFourierFeatures.draw(8, n_feat, bandwidth=1.0, rng=rng)
    sketch, _ = dp_kde_sketch([np.zeros((0, 8))] * 5, [0, 1, 2, 3, 0], n_classes=4, features=f, epsilon=eps,
                              rng=rng, noise=noise, neighbouring=rel)  # type: ignore[arg-type]
    b = factor * n_feat / eps
    assert sketch.scale == pytest.approx(b) and sketch.sensitivity == pytest.approx(factor * n_feat)
    x = sketch.noisy.ravel()
    n = len(x)
    assert stats.kstest(x / b, stats.laplace.cdf).statistic < math.sqrt(-math.log(DELTA / 2) / (2 * n))
    assert abs(np.mean(x**2) - 2 * b * b) < 6 * math.sqrt(20 * b**4 / n)
    q = _unit(rng.normal(size=(400, 8)))
    scores = sketch.estimate(q).ravel()  # pure noise scores
    sd = score_noise_std(sketch)
    assert sd == pytest.approx(math.sqrt(2) * b / math.sqrt(n_feat))
    # the scores of one class are correlated across queries; use the 4 classes × queries loosely: within 30 %
    assert 0.7 * sd < scores.std() < 1.3 * sd


@pytest.mark.parametrize(("weighting", "max_points"), [("mean", None), ("sum", 3)])
def test_one_record_moves_the_sketch_by_at_most_its_sensitivity(weighting: str, max_points: int | None,
                                                                any_seed: int) -> None:
    """ε = ∞ (the exact sums): adding or removing one record changes ‖S‖₁ by ≤ √2·c_w·I; replacing one by
    ≤ 2√2·c_w·I; the paper's class means move by ≤ 2√2·I."""
    rng = np.random.default_rng(any_seed)
    n_feat = 64
    f = RandomFourierFeatures.draw(4, n_feat, bandwidth=0.3, rng=rng)

    def sums(records: list[np.ndarray], cls: list[int], noise: str = "sum") -> np.ndarray:
        s, _ = dp_kde_sketch(records, cls, n_classes=2, features=f, epsilon=math.inf, rng=rng, noise=noise,
                             weighting=weighting, max_points=max_points)  # type: ignore[arg-type]
        return s.noisy

    add = sketch_sensitivity(n_feat, weighting=weighting, max_points=max_points)  # type: ignore[arg-type]
    rep = sketch_sensitivity(n_feat, weighting=weighting, max_points=max_points,  # type: ignore[arg-type]
                             neighbouring="replace_one")
    worst = 0.0
    for _ in range(30):
        n = int(rng.integers(1, 8))
        recs = [rng.normal(size=(int(rng.integers(0, 6)), 4)) for _ in range(n)]
        cls = [int(c) for c in rng.integers(0, 2, size=n)]
        x, cx = rng.normal(size=(int(rng.integers(1, 6)), 4)), int(rng.integers(0, 2))
        base = sums(recs, cls)
        d_add = np.abs(sums([*recs, x], [*cls, cx]) - base).sum()
        d_rep = np.abs(sums([x, *recs[1:]], [cx, *cls[1:]]) - base).sum()
        assert d_add <= add + 1e-9 and d_rep <= rep + 1e-9
        worst = max(worst, d_add / add)
        if weighting == "mean":
            pm = np.abs(sums([x, *recs[1:]], [cx, *cls[1:]], "paper") - sums(recs, cls, "paper")).sum()
            assert pm <= sketch_sensitivity(n_feat, noise="paper") + 1e-9
    assert worst > 0.3  # the bound is not vacuous: single records come close to it


def test_events_equal_the_factories_and_compose_to_epsilon_kde() -> None:
    rng = np.random.default_rng(0)
    f = RandomFourierFeatures.draw(3, 16, bandwidth=1.0, rng=rng)
    _, ev = dp_kde_sketch([np.ones((1, 3))], [0], n_classes=1, features=f, epsilon=0.7, rng=rng)
    assert ev == kde_event(0.7)
    assert pure_epsilon(ev) == pytest.approx(0.7)
    for length, seq, ens, k in [(10, "iterative", "log", 4), (10, "iterative", "linear", 10), (10, "independent",
                                                                                                "log", 1)]:
        blocks = ensemble_blocks(length, sequence=seq, ensemble=ens)  # type: ignore[arg-type]
        assert len(blocks) == k
        ens_ev = kde_ensemble_event(5.0, k)
        assert pure_epsilon(ens_ev) == pytest.approx(5.0)
    # the PLD accountant agrees: ε(δ) → Σ ε_i as δ → 0, never above it (up to discretisation)
    ens_ev = kde_ensemble_event(2.0, 4)
    assert 1.9 < epsilon_for_delta(ens_ev, 1e-12) <= 2.0 + 4e-3


def test_ensemble_layout() -> None:
    assert ensemble_blocks(10, sequence="iterative", ensemble="log") == (2, 4, 8, 10)
    assert ensemble_blocks(8, sequence="iterative", ensemble="log") == (2, 4, 8)
    assert ensemble_blocks(5, sequence="iterative", ensemble="log") == (2, 4, 5)
    assert ensemble_blocks(2, sequence="iterative", ensemble="log") == (2,)
    assert ensemble_blocks(1, sequence="iterative", ensemble="log") == (1,)
    assert ensemble_blocks(3, sequence="iterative", ensemble="linear") == (1, 2, 3)
    assert ensemble_blocks(7, sequence="independent") == (1,)
    for length in range(1, 40):
        blocks = ensemble_blocks(length, sequence="iterative", ensemble="log")
        assert len(blocks) == max(1, math.ceil(math.log2(length)))
        for i in range(1, length + 1):
            m = blocks[sketch_for_step(i, blocks)]
            assert i <= m and (m - i) <= m / 2  # at most half of the query's blocks are padding
    with pytest.raises(ConfigError, match="sequence"):
        ensemble_blocks(3, sequence="random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ensemble"):
        ensemble_blocks(3, sequence="iterative", ensemble="cubic")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------- sampling


def test_draw_rows_frequencies_and_fallbacks(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    w = np.array([[0.0, 1.0, 3.0, 0.0, 6.0]])
    n = 20000
    draws = draw_rows(np.repeat(w, n, axis=0), rng)
    counts = np.bincount(draws, minlength=5)
    assert counts[0] == counts[3] == 0
    assert stats.chisquare(counts[[1, 2, 4]], n * np.array([0.1, 0.3, 0.6])).pvalue > 1e-6
    allowed = np.array([[True, False, False, True, False]])
    got = draw_rows(np.repeat(w, 2000, axis=0), rng, allowed=np.repeat(allowed, 2000, axis=0))
    assert set(got.tolist()) == {0, 3}  # all allowed weights are 0: uniform over the allowed terms
    with pytest.raises(ConfigError, match="no term left"):
        draw_rows(w, rng, allowed=np.zeros((1, 5), dtype=bool))


def _two_class_sketches(rng: np.random.Generator, eps: float, blocks: tuple[int, ...] = (1,), bandwidth: float = 0.3):
    """Orthonormal term embeddings; class 0 documents hold terms 0–2 (in that order), class 1 terms 5–7."""
    V = 16
    emb = np.eye(V)
    docs = [[0, 1, 2]] * 60 + [[5, 6, 7]] * 60
    cls = np.array([0] * 60 + [1] * 60)
    sketches, projs = [], []
    for m in blocks:
        f = RandomFourierFeatures.draw(m * V, 8192, bandwidth=bandwidth * math.sqrt(m), rng=rng)
        p = BlockProjections(emb, f, m)
        s, _ = dp_kde_sketch_terms(TermRecords(docs, cls, 2), projections=p, epsilon=eps / len(blocks), rng=rng)
        sketches.append(s)
        projs.append(p)
    return sketches, projs


def test_sequences_follow_their_class_at_large_epsilon(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    sk, pr = _two_class_sketches(rng, math.inf)
    seqs = sample_sequences(sk, pr, counts=[200, 150], length=3, sequence="independent", rng=rng)
    assert seqs[0].shape == (200, 3) and seqs[1].shape == (150, 3)
    assert all(len(set(r)) == 3 for s in seqs for r in s.tolist())  # no repeats by default
    assert np.isin(seqs[0], [0, 1, 2]).mean() > 0.9 and np.isin(seqs[1], [5, 6, 7]).mean() > 0.9
    # iterative, linear ensemble (no padding): step i scores prefix ⊕ v against the i-term windows
    sk, pr = _two_class_sketches(rng, math.inf, blocks=(1, 2, 3))
    it = sample_sequences(sk, pr, counts=[300, 300], length=3, sequence="iterative", rng=rng)
    assert np.isin(it[0][:, 0], [0, 1, 2]).mean() > 0.9 and np.isin(it[1][:, 0], [5, 6, 7]).mean() > 0.9
    for c, first in ((0, 0), (1, 5)):
        rows = it[c][:, 0] == first
        # the only 2-window starting with `first` continues with first + 1 (the RFF error of I = 8192 features
        # leaves ≈ 10 % of the mass on terms of exact score ≈ 0) ...
        assert rows.sum() > 50 and (it[c][rows, 1] == first + 1).mean() > 0.85
        rows &= it[c][:, 1] == first + 1  # ... and the only 3-window with that prefix with first + 2
        assert (it[c][rows, 2] == first + 2).mean() > 0.85
    # log ensemble (steps 1 and 3 zero-padded): the padding scales scores by e^{-(m-i)/H²} and leaves the
    # RFF error, so it needs a wider bandwidth; at h = 0.5 the exact first-step share of {0, 1} is 0.80, and
    # the draws stay far above the chance share 2/16
    sk, pr = _two_class_sketches(rng, math.inf, blocks=(2, 3), bandwidth=0.5)
    it = sample_sequences(sk, pr, counts=[300, 300], length=3, sequence="iterative", rng=rng)
    assert np.isin(it[0][:, 0], [0, 1]).mean() > 0.4 and np.isin(it[1][:, 0], [5, 6]).mean() > 0.4


def test_sequences_ignore_the_data_at_tiny_epsilon(any_seed: int) -> None:
    """With noise ≫ signal the sampled terms are (nearly) uniform over the vocabulary for both classes: the
    in-class share is near its chance value 3/16, far from the noiseless 1."""
    rng = np.random.default_rng(any_seed)
    sk, pr = _two_class_sketches(rng, 1e-4)
    seqs = sample_sequences(sk, pr, counts=[300, 300], length=3, sequence="independent", rng=rng)
    assert np.isin(seqs[0], [0, 1, 2]).mean() < 0.5 and np.isin(seqs[1], [5, 6, 7]).mean() < 0.5


def test_threshold_removes_the_noise_floor(any_seed: int) -> None:
    """At moderate noise a threshold κ = 3 leaves (almost) only the terms whose score rises above the noise."""
    rng = np.random.default_rng(any_seed)
    sk, pr = _two_class_sketches(rng, 40.0)
    plain = sample_sequences(sk, pr, counts=[300, 300], length=1, sequence="independent", rng=rng)
    thr = sample_sequences(sk, pr, counts=[300, 300], length=1, sequence="independent", rng=rng, threshold=3.0)
    assert np.isin(thr[0], [0, 1, 2]).mean() > np.isin(plain[0], [0, 1, 2]).mean()
    assert np.isin(thr[0], [0, 1, 2]).mean() > 0.9
    with pytest.raises(ConfigError, match="threshold"):
        sample_sequences(sk, pr, counts=[1, 1], length=1, sequence="independent", rng=rng, threshold=-1.0)


def test_contrast_weights_known_values() -> None:
    w = np.array([[4.0, 4.0, 0.0, 2.0]])
    bg = np.array([[8.0, 0.0, 4.0, 4.0]])
    # p_c = (.4, .4, 0, .2), p_all = (.5, 0, .25, .25), s = 1/4: lift = (.65/.75, .65/.25, .25/.5, .45/.5)
    assert contrast_weights(w, bg, 1.0) == pytest.approx(np.array([[4 * .65 / .75, 4 * 2.6, 0.0, 2 * 0.9]]))
    assert contrast_weights(w, bg, 2.0) == pytest.approx(np.array([[4 * (.65 / .75) ** 2, 4 * 2.6**2, 0.0,
                                                                    2 * 0.81]]))
    assert contrast_weights(w, bg, 0.0) is w or np.array_equal(contrast_weights(w, bg, 0.0), w)
    # an all-zero background is uniform (p_all = 1/4): lift = (p_c + s)/(1/2)
    assert contrast_weights(w, np.zeros((1, 4)), 1.0) == pytest.approx(np.array([[5.2, 5.2, 0.0, 1.8]]))


def _generic_and_specific(rng: np.random.Generator, eps: float, term_weights: np.ndarray | None = None):
    """Orthonormal embeddings of 12 terms. Every document holds the generic terms 0–1; class 0 (200 documents)
    adds 2–4, class 1 (20 documents) adds 6–8."""
    emb = np.eye(12)
    docs = [[0, 1, 2, 3, 4]] * 200 + [[0, 1, 6, 7, 8]] * 20
    cls = np.array([0] * 200 + [1] * 20)
    f = RandomFourierFeatures.draw(12, 4096, bandwidth=0.3, rng=rng)
    p = BlockProjections(emb, f, 1)
    s, _ = dp_kde_sketch_terms(TermRecords(docs, cls, 2, term_weights=term_weights), projections=p, epsilon=eps, rng=rng)
    return [s], [p]


def test_contrast_moves_a_small_class_to_its_own_terms(any_seed: int) -> None:
    """Class 1's own terms hold 3/5 of its mass, the generic ones 2/5 but those are what the big class uses too:
    with contrast α = 2 the small class draws its own terms far more often (exact: 0.60 → 0.92)."""
    rng = np.random.default_rng(any_seed)
    sk, pr = _generic_and_specific(rng, math.inf)
    plain = sample_sequences(sk, pr, counts=[0, 2000], length=1, sequence="independent", rng=rng, threshold=0.0)
    con = sample_sequences(sk, pr, counts=[0, 2000], length=1, sequence="independent", rng=rng, threshold=0.0,
                           contrast=2.0)
    own_plain, own_con = np.isin(plain[1], [6, 7, 8]).mean(), np.isin(con[1], [6, 7, 8]).mean()
    assert 0.5 < own_plain < 0.7 and own_con > 0.85, (own_plain, own_con)
    with pytest.raises(ConfigError, match="contrast"):
        sample_sequences(sk, pr, counts=[1, 1], length=1, sequence="independent", rng=rng, contrast=-0.5)


def test_public_term_weights_shift_mass_and_keep_the_sensitivity(any_seed: int) -> None:
    """Term weights (public, e.g. idf) move a record's unit of mass to its heavily weighted terms; one record
    still moves the exact sums by at most √2·I (a convex combination of feature vectors)."""
    rng = np.random.default_rng(any_seed)
    tw = np.array([0.1, 0.1] + [1.0] * 10)
    sk, pr = _generic_and_specific(rng, math.inf, term_weights=tw)
    est = TermScorer(sk[0], pr[0]).scores(1, np.zeros((1, 0), dtype=np.int64))[0]
    # class 1: per document 0.1/3.2 on each generic term, 1/3.2 on each own term; 20 documents
    assert est[6] == pytest.approx(20 / 3.2, abs=0.6) and est[0] == pytest.approx(2 / 3.2, abs=0.6)
    n_feat = 64
    f = RandomFourierFeatures.draw(12, n_feat, bandwidth=0.3, rng=rng)
    p = BlockProjections(np.eye(12), f, 1)
    tw = rng.uniform(0.01, 5.0, size=12)

    def sums(docs: list[list[int]], cls: list[int]) -> np.ndarray:
        s, _ = dp_kde_sketch_terms(TermRecords(docs, np.array(cls, dtype=np.int64), 2, term_weights=tw), projections=p,
                                   epsilon=math.inf, rng=rng)
        return s.noisy

    bound = sketch_sensitivity(n_feat)
    worst = 0.0
    for _ in range(30):
        n = int(rng.integers(1, 8))
        docs = [list(rng.choice(12, size=int(rng.integers(0, 6)), replace=False)) for _ in range(n)]
        cls = [int(c) for c in rng.integers(0, 2, size=n)]
        x = list(rng.choice(12, size=int(rng.integers(1, 6)), replace=False))
        d = np.abs(sums([*docs, x], [*cls, int(rng.integers(0, 2))]) - sums(docs, cls)).sum()
        assert d <= bound + 1e-9
        worst = max(worst, d / bound)
    assert worst > 0.3
    with pytest.raises(ConfigError, match="weighting='mean'"):
        dp_kde_sketch_terms(TermRecords([[0]], [0], 1, term_weights=tw, weighting="sum", max_points=2),
                            projections=p, epsilon=1.0, rng=rng)
    with pytest.raises(ConfigError, match="positive"):
        dp_kde_sketch_terms(TermRecords([[0]], [0], 1, term_weights=-tw), projections=p, epsilon=1.0, rng=rng)


# ------------------------------------------------------------------------------------- the term histogram


@pytest.mark.parametrize(("weighting", "max_points", "weights"), [("mean", None, False), ("mean", None, True),
                                                                  ("sum", 3, False)])
def test_term_histogram_moves_by_at_most_its_sensitivity(weighting: str, max_points: int | None, weights: bool,
                                                         any_seed: int) -> None:
    """ε = ∞: adding/removing one record changes the exact histogram by ≤ c_w in L1 (= c_w when it holds a term
    and, for "sum", ≥ max_points terms), replacing one by ≤ 2·c_w; with public term weights too."""
    rng = np.random.default_rng(any_seed)
    tw = rng.uniform(0.05, 4.0, size=12) if weights else None

    def h(docs: list[list[int]], cls: list[int]) -> np.ndarray:
        out, _ = dp_term_histogram(TermRecords(docs, np.array(cls, dtype=np.int64), 3, weighting=weighting,  # type: ignore[arg-type]
                                               max_points=max_points, term_weights=tw),
                                   n_terms=12, epsilon=math.inf, rng=rng)
        return out.noisy

    add = histogram_sensitivity(weighting=weighting, max_points=max_points)  # type: ignore[arg-type]
    rep = histogram_sensitivity(weighting=weighting, max_points=max_points,  # type: ignore[arg-type]
                                neighbouring="replace_one")
    assert rep == 2 * add == 2 * (max_points or 1)
    for _ in range(40):
        n = int(rng.integers(1, 8))
        docs = [list(rng.choice(12, size=int(rng.integers(0, 7)), replace=False)) for _ in range(n)]
        cls = [int(c) for c in rng.integers(0, 3, size=n)]
        x = list(rng.choice(12, size=int(rng.integers(1, 7)), replace=False))
        cx = int(rng.integers(0, 3))
        d_add = np.abs(h([*docs, x], [*cls, cx]) - h(docs, cls)).sum()
        assert d_add == pytest.approx(min(len(x), max_points or len(x)) if weighting == "sum" else 1.0)
        assert d_add <= add + 1e-9
        assert np.abs(h([x, *docs[1:]], [cx, *cls[1:]]) - h(docs, cls)).sum() <= rep + 1e-9


def test_term_histogram_noise_is_laplace_with_the_stated_scale(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    hist, ev = dp_term_histogram(TermRecords([[]] * 5, np.zeros(5, dtype=np.int64), 4), n_terms=500, epsilon=0.5,
                                 rng=rng)
    assert ev == kde_event(0.5) and hist.scale == 2.0 and hist.noise_std == pytest.approx(2 * math.sqrt(2))
    assert stats.kstest(hist.noisy.ravel(), stats.laplace(scale=2.0).cdf).pvalue > 1e-4
    rep, _ = dp_term_histogram(TermRecords([[0]], [0], 1), n_terms=3, epsilon=0.5, rng=rng, neighbouring="replace_one")
    assert rep.scale == 4.0


def test_histogram_sequences_follow_the_class_and_contrast_sharpens(any_seed: int) -> None:
    """Every document holds the generic terms 0–1; class 0 (200 documents) adds 2–4, class 1 (20) adds 6–8. At
    ε = 5 (noise √2/5 per bin against 4 per own term of class 1) class 1 draws its own terms ≈ 60 % of the time
    (exact 3·4/(3·4 + 2·4)), with contrast α = 2 ≈ 92 %; at ε = 10⁻⁴ its draws are near uniform."""
    rng = np.random.default_rng(any_seed)
    docs = [[0, 1, 2, 3, 4]] * 200 + [[0, 1, 6, 7, 8]] * 20
    cls = np.array([0] * 200 + [1] * 20)
    hist, _ = dp_term_histogram(TermRecords(docs, cls, 2), n_terms=12, epsilon=5.0, rng=rng)
    plain = sample_histogram_sequences(hist, counts=[100, 2000], length=1, rng=rng, threshold=2.0, contrast=0.0)
    con = sample_histogram_sequences(hist, counts=[100, 2000], length=1, rng=rng, threshold=2.0, contrast=2.0)
    assert np.isin(plain[0], [0, 1, 2, 3, 4]).mean() > 0.95
    assert 0.5 < np.isin(plain[1], [6, 7, 8]).mean() < 0.7 and np.isin(con[1], [6, 7, 8]).mean() > 0.85
    seqs = sample_histogram_sequences(hist, counts=[50, 50], length=5, rng=rng)
    assert all(len(set(r)) == 5 for s_ in seqs for r in s_.tolist())  # no repeats by default
    noisy, _ = dp_term_histogram(TermRecords(docs, cls, 2), n_terms=12, epsilon=1e-4, rng=rng)
    far = sample_histogram_sequences(noisy, counts=[0, 3000], length=1, rng=rng)
    assert np.isin(far[1], [6, 7, 8]).mean() < 0.5
    with pytest.raises(ConfigError, match="contrast"):
        sample_histogram_sequences(hist, counts=[1, 1], length=1, rng=rng, contrast=-1.0)
    with pytest.raises(ConfigError, match="3 sequence counts"):
        sample_histogram_sequences(hist, counts=[1, 1, 1], length=1, rng=rng)
    with pytest.raises(DataError, match="term ids"):
        dp_term_histogram(TermRecords([[12]], [0], 1), n_terms=12, epsilon=1.0, rng=rng)


def test_bad_input_names_the_value() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="bandwidth"):
        RandomFourierFeatures.draw(3, 8, bandwidth=0.0, rng=rng)
    with pytest.raises(ConfigError, match="n_features"):
        RandomFourierFeatures.draw(3, 0, bandwidth=1.0, rng=rng)
    f = RandomFourierFeatures.draw(3, 8, bandwidth=1.0, rng=rng)
    with pytest.raises(DataError, match="class ids"):
        dp_kde_sketch([np.ones((1, 3))], [2], n_classes=2, features=f, epsilon=1.0, rng=rng)
    with pytest.raises(ConfigError, match="max_points"):
        sketch_sensitivity(8, weighting="sum")
    with pytest.raises(ConfigError, match="weighting='mean'"):
        sketch_sensitivity(8, noise="paper", weighting="sum", max_points=2)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon_kde"):
        dp_kde_sketch([np.ones((1, 3))], [0], n_classes=1, features=f, epsilon=-2.0, rng=rng)
    with pytest.raises(DataError, match="shape"):
        f.transform(np.ones((2, 4)))
