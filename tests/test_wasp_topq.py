"""WASP's Top-Q voting (privtext.mechanisms.topq): known values, the exact sensitivity as a property over many
random instances (bounded AND attained, Q = 1…8), the noise level of each histogram, the event, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privtext.errors import ConfigError
from privtext.mechanisms.topq import (
    dp_topq_histograms,
    paper_sensitivity,
    topq_event,
    topq_histograms,
    topq_sensitivity,
    topq_weights,
)
from privtext.privacy.events import event_key, gaussian_event

P_TAIL = 1e-4


def test_weights_and_sensitivity_known_values() -> None:
    assert list(topq_weights(4)) == [1.0, 0.5, 0.25, 0.125]
    assert topq_sensitivity(1) == pytest.approx(math.sqrt(2), abs=1e-15)
    assert topq_sensitivity(2) == pytest.approx(math.sqrt(2.5), abs=1e-15)
    # Q = 3 and Q = 4: where the public code's `2 - 1/(2^(Q-1))` (XOR) divides by zero / gives 1
    assert topq_sensitivity(3) == pytest.approx(math.sqrt(2 * (1 + 1 / 4 + 1 / 16)), abs=1e-15)
    assert topq_sensitivity(4) == pytest.approx(math.sqrt(2 * (1 + 1 / 4 + 1 / 16 + 1 / 64)), abs=1e-15)
    for q in range(1, 65):
        assert topq_sensitivity(q) == pytest.approx(math.sqrt(8 / 3 * (1 - 4.0**-q)), rel=1e-14)
        assert topq_sensitivity(q) <= math.sqrt(8 / 3) < paper_sensitivity(q) == 4.0


def test_histograms_known_values() -> None:
    # 1-D: private at 0; candidates at 1, 2, 3, 10 (group 0) and 0.5 (group 1)
    c = np.array([[1.0], [2.0], [3.0], [10.0], [0.5]])
    p = np.array([[0.0]])
    hn, hf = topq_histograms(p, c, q=2, private_groups=[0], candidate_groups=[0, 0, 0, 0, 1])
    assert list(hn) == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert list(hf) == [0.0, 0.0, 0.5, 1.0, 0.0]
    # a second sample at 11: nearest 10 then 3, furthest 1 then 2
    hn, hf = topq_histograms(np.array([[0.0], [11.0]]), c, q=2, private_groups=[0, 0],
                             candidate_groups=[0, 0, 0, 0, 1])
    assert list(hn) == [1.0, 0.5, 0.5, 1.0, 0.0]
    assert list(hf) == [1.0, 0.5, 0.5, 1.0, 0.0]


def test_fewer_candidates_than_q_and_empty_groups() -> None:
    c = np.array([[1.0], [2.0]])
    hn, hf = topq_histograms(np.array([[0.0]]), c, q=4)
    assert list(hn) == [1.0, 0.5] and list(hf) == [0.5, 1.0]
    # a sample whose label has no candidate casts no vote
    hn, hf = topq_histograms(np.array([[0.0]]), c, q=4, private_groups=[3], candidate_groups=[0, 0])
    assert not hn.any() and not hf.any()


def _pair(p: np.ndarray, pg: np.ndarray, c: np.ndarray, cg: np.ndarray, q: int) -> np.ndarray:
    hn, hf = topq_histograms(p, c, q=q, private_groups=pg, candidate_groups=cg)
    return np.concatenate([hn, hf])


@pytest.mark.parametrize("q", range(1, 9))
def test_add_remove_one_sample_moves_the_pair_by_at_most_delta_and_attains_it(q: int) -> None:
    """Property over 40 random instances per Q: removing any one private sample changes (Hⁿ, Hᶠ) by ≤ Δ_Q in
    L2; exactly Δ_Q when its label group holds ≥ Q candidates; √(2Σ_{j<m}4^−j) when it holds m < Q."""
    rng = np.random.default_rng(1000 + q)
    delta = topq_sensitivity(q)
    attained = 0
    for _ in range(40):
        d = int(rng.integers(1, 6))
        n_groups = int(rng.integers(1, 4))
        n_c = int(rng.integers(1, 3 * q + 4))
        c = rng.normal(size=(n_c, d))
        if rng.random() < 0.3:  # duplicate candidates: ties in distance
            c[rng.integers(n_c)] = c[0]
        cg = rng.integers(0, n_groups, size=n_c)
        n_p = int(rng.integers(1, 12))
        p = rng.normal(size=(n_p, d))
        pg = rng.integers(0, n_groups + 1, size=n_p)  # group n_groups has no candidate
        full = _pair(p, pg, c, cg, q)
        for i in range(n_p):
            keep = np.arange(n_p) != i
            change = float(np.linalg.norm(full - _pair(p[keep], pg[keep], c, cg, q)))
            m = int((cg == pg[i]).sum())
            expect = math.sqrt(2 * sum(4.0**-j for j in range(min(q, m))))
            assert change <= delta + 1e-12
            assert change == pytest.approx(expect, abs=1e-12)
            attained += m >= q
    assert attained > 0  # the bound is reached, not only respected


def _chi2_ok(z: np.ndarray) -> tuple[bool, float]:
    n = z.size
    s = float((z**2).sum())
    lo, hi = stats.chi2.ppf([P_TAIL / 2, 1 - P_TAIL / 2], n)
    return bool(lo <= s <= hi), s / n


@pytest.mark.parametrize("q", [1, 3, 8])
def test_zero_signal_noise_level_per_histogram(q: int) -> None:
    """released − exact, divided by the stated std, is N(0, 1) in EACH histogram (two-sided χ² at 1e-4 over
    n = 20000 bins: any seed passes with probability 1 − 1e-4; 0.9× or 1.1× the std is rejected), and the two
    histograms' noises are uncorrelated (|r| < 4.5/√n)."""
    rng = np.random.default_rng(q)
    n_c = 20_000
    c = rng.normal(size=(n_c, 4))
    p = rng.normal(size=(30, 4))
    z = 1.7
    rel, ev = dp_topq_histograms(p, c, q=q, noise_multiplier=z, rng=np.random.default_rng())
    hn, hf = topq_histograms(p, c, q=q)
    std = z * topq_sensitivity(q)
    assert rel.noise_std == pytest.approx(std, rel=1e-15)
    for res in (rel.nearest - hn, rel.furthest - hf):
        ok, ratio = _chi2_ok(res / std)
        assert ok, f"variance ratio {ratio:.4f}"
        assert not _chi2_ok(res / (0.9 * std))[0] and not _chi2_ok(res / (1.1 * std))[0]
    r = np.corrcoef(rel.nearest - hn, rel.furthest - hf)[0, 1]
    assert abs(r) < 4.5 / math.sqrt(n_c)
    assert event_key(ev) == event_key(gaussian_event(z)) == event_key(topq_event(z))


def test_larger_sensitivity_scales_the_noise_and_smaller_is_refused() -> None:
    rng = np.random.default_rng(0)
    c, p = rng.normal(size=(50, 3)), rng.normal(size=(5, 3))
    rel, _ = dp_topq_histograms(p, c, q=2, noise_multiplier=1.0, sensitivity=3 * topq_sensitivity(2), rng=rng)
    assert rel.noise_std == pytest.approx(3 * topq_sensitivity(2))
    with pytest.raises(ConfigError, match="below the exact Top-2 sensitivity"):
        dp_topq_histograms(p, c, q=2, noise_multiplier=1.0, sensitivity=1.0, rng=rng)


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, True, "3"])
def test_bad_q_is_a_typed_error_naming_it(bad: object) -> None:
    with pytest.raises(ConfigError, match=repr(bad).replace("(", r"\(").replace(")", r"\)")):
        topq_sensitivity(bad)  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="noise_multiplier"):
        dp_topq_histograms(np.zeros((1, 2)), np.zeros((2, 2)), q=1, noise_multiplier=-1, rng=rng)
    with pytest.raises(ConfigError, match="one width"):
        topq_histograms(np.zeros((1, 2)), np.zeros((2, 3)), q=1)
    with pytest.raises(ConfigError, match="3 private group ids for 1"):
        topq_histograms(np.zeros((1, 2)), np.zeros((2, 2)), q=1, private_groups=[0, 0, 0])
    with pytest.raises(ConfigError, match="'manhattan'"):
        topq_histograms(np.zeros((1, 2)), np.zeros((2, 2)), q=1, metric="manhattan")  # type: ignore[arg-type]
