"""FID, kNN precision/recall and MAUVE: closed forms, monotonicity, sampling tolerances, errors."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

from privtext.errors import DataError, MissingDependencyError
from privtext.evaluate.fid import (
    fid,
    frechet_distance,
    knn_radii,
    mauve_score,
    precision_recall,
    trace_sqrt_product,
)


def _spd(rng: np.random.Generator, d: int, cond: float = 10.0) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    w = np.exp(rng.uniform(0, np.log(cond), size=d))
    return (q * w) @ q.T


def test_fid_of_a_set_with_itself_is_zero(rng: np.random.Generator) -> None:
    x = rng.normal(size=(400, 16)) * rng.uniform(0.1, 3, size=16)
    r = fid(x, x)
    assert r.fid == pytest.approx(0.0, abs=1e-9)
    assert r.mean_term == 0.0 and r.n_a == r.n_b == 400 and r.dim == 16
    assert not r.rank_deficient and r.ridge == 0.0


def test_fid_grows_monotonically_with_a_shift(rng: np.random.Generator) -> None:
    x = rng.normal(size=(300, 8))
    direction = rng.normal(size=8)
    direction /= np.linalg.norm(direction)
    shifts = [0.0, 0.05, 0.1, 0.3, 1.0, 2.0, 5.0]
    vals = [fid(x, x + s * direction).fid for s in shifts]
    assert all(b > a for a, b in itertools.pairwise(vals)), vals
    # same covariance: the distance is exactly the squared shift
    np.testing.assert_allclose(vals, np.square(shifts), atol=1e-8)


def test_fid_grows_with_a_scale_change(rng: np.random.Generator) -> None:
    x = rng.normal(size=(300, 6))
    vals = [fid(x, x * s).fid for s in (1.0, 1.2, 1.5, 2.0, 4.0)]
    assert vals[0] == pytest.approx(0.0, abs=1e-9)
    assert all(b > a for a, b in itertools.pairwise(vals)), vals


def test_frechet_distance_closed_forms(rng: np.random.Generator) -> None:
    # one dimension: (μ1-μ2)² + (σ1-σ2)²
    assert frechet_distance([1.0], [[4.0]], [3.0], [[9.0]]) == pytest.approx(4.0 + 1.0)
    # diagonal covariances: ‖Δμ‖² + Σ(√a − √b)²
    d = 7
    mu1, mu2 = rng.normal(size=d), rng.normal(size=d)
    a, b = rng.uniform(0.1, 4, size=d), rng.uniform(0.1, 4, size=d)
    want = float(np.sum((mu1 - mu2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2))
    assert frechet_distance(mu1, np.diag(a), mu2, np.diag(b)) == pytest.approx(want, rel=1e-10)
    # Σ2 = c²Σ1 (commuting): ‖Δμ‖² + (1−c)² Tr Σ1
    s1 = _spd(rng, d)
    c = 1.7
    assert frechet_distance(mu1, s1, mu2, c * c * s1) == pytest.approx(
        float(np.sum((mu1 - mu2) ** 2) + (1 - c) ** 2 * np.trace(s1)), rel=1e-9)


def test_trace_sqrt_matches_scipy_sqrtm_on_well_conditioned_matrices(rng: np.random.Generator) -> None:
    from scipy.linalg import sqrtm

    s1, s2 = _spd(rng, 12), _spd(rng, 12)
    ref = float(np.real(np.trace(sqrtm(s1 @ s2))))
    assert trace_sqrt_product(s1, s2) == pytest.approx(ref, rel=1e-8)


def test_sample_fid_matches_the_gaussian_closed_form(rng: np.random.Generator) -> None:
    d, n = 4, 20_000
    mu1, mu2 = np.zeros(d), np.array([1.0, 0.0, -0.5, 0.0])
    s1, s2 = np.diag([1.0, 2.0, 0.5, 1.0]), np.array([[1.5, 0.3, 0, 0], [0.3, 1.0, 0, 0], [0, 0, 1.0, 0.2],
                                                     [0, 0, 0.2, 0.8]])
    true = frechet_distance(mu1, s1, mu2, s2)
    x = rng.multivariate_normal(mu1, s1, size=n)
    y = rng.multivariate_normal(mu2, s2, size=n)
    # sampling error of the estimate is ~0.02 here (std of the mean term 2‖Δμ‖·sqrt(2/n)); 0.1 is 5 std
    assert fid(x, y).fid == pytest.approx(true, abs=0.1)


def test_fewer_samples_than_dimensions_uses_a_reported_ridge(rng: np.random.Generator) -> None:
    x, y = rng.normal(size=(20, 64)), rng.normal(size=(30, 64)) + 0.5
    r = fid(x, y)
    assert r.rank_deficient and r.ridge > 0 and np.isfinite(r.fid)
    assert fid(x, x).fid == pytest.approx(0.0, abs=1e-6)  # round-off on a trace of ~64
    assert fid(x, y, ridge=0.0).ridge == 0.0
    assert fid(x, y).fid > fid(x, x).fid


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (np.zeros((5, 3)), np.zeros((5, 4)), "different dimensions"),
        (np.zeros((1, 3)), np.zeros((5, 3)), "at least 2 rows"),
        (np.full((5, 3), np.nan), np.zeros((5, 3)), "NaN"),
        (np.zeros(5), np.zeros((5, 1)), "2-d"),
    ],
)
def test_fid_rejects_bad_input(a: np.ndarray, b: np.ndarray, match: str) -> None:
    with pytest.raises(DataError, match=match):
        fid(a, b)


def test_fid_rejects_negative_ridge() -> None:
    with pytest.raises(DataError, match="ridge"):
        fid(np.eye(4), np.eye(4), ridge=-1.0)


# ----------------------------------------------------------------------------------- precision / recall


def test_knn_radii_is_the_kth_neighbour_distance() -> None:
    x = np.array([[0.0], [1.0], [3.0], [7.0]])
    np.testing.assert_allclose(knn_radii(x, k=1), [1.0, 1.0, 4.0, 16.0])  # squared
    np.testing.assert_allclose(knn_radii(x, k=2), [9.0, 4.0, 9.0, 36.0])
    with pytest.raises(DataError, match="k must be"):
        knn_radii(x, k=4)


def test_precision_recall_identical_and_disjoint_sets(rng: np.random.Generator) -> None:
    x = rng.normal(size=(200, 5))
    same = precision_recall(x, x, k=3)
    assert same.precision == 1.0 and same.recall == 1.0
    far = precision_recall(x, x + 100.0, k=3)
    assert far.precision == 0.0 and far.recall == 0.0


def test_precision_recall_detect_mode_dropping(rng: np.random.Generator) -> None:
    # real: two well-separated modes; synthetic: only one of them
    n = 400
    real = np.concatenate([rng.normal(size=(n, 2)), rng.normal(size=(n, 2)) + 20.0])
    syn = rng.normal(size=(n, 2))
    r = precision_recall(real, syn, k=5)
    assert r.precision > 0.95  # every synthetic sample is realistic
    assert 0.4 < r.recall < 0.55  # but half of the real distribution is missed


def test_precision_recall_validates_k(rng: np.random.Generator) -> None:
    x = rng.normal(size=(10, 2))
    with pytest.raises(DataError, match="positive integer"):
        precision_recall(x, x, k=0)


# ---------------------------------------------------------------------------------------------- MAUVE


def test_mauve_missing_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mauve", None)
    with pytest.raises(MissingDependencyError, match=r"privtext\[mauve\]"):
        mauve_score(np.zeros((10, 2)), np.zeros((10, 2)), rng=np.random.default_rng(0))


@pytest.mark.slow  # importing mauve imports torch and transformers (~25 s on a busy 2-core machine)
def test_mauve_separates_same_from_different_distributions() -> None:
    pytest.importorskip("mauve")
    rng = np.random.default_rng(0)
    p = rng.normal(size=(400, 8))
    q_same = rng.normal(size=(400, 8))
    q_far = rng.normal(size=(400, 8)) + 4.0
    same = mauve_score(p, q_same, rng=rng, num_buckets=8)
    far = mauve_score(p, q_far, rng=rng, num_buckets=8)
    assert same.mauve > 0.8 > 0.2 > far.mauve
