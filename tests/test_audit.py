"""Empirical audits of single mechanisms at fixed trial counts: the fixed mechanisms pass, and the two canaries of
the first review are caught — halved noise (on the vote histogram, the label histogram and SecPE's clustering) and
the shared-sample bug (one Bernoulli draw for counts and centres, accounted as two independent releases). The
audits at real noise levels, with derived trial counts and group canaries, are tests/test_audit_runs.py.

Default suite: a short form at confidence 1 − 1e-3 (so a correct mechanism fails with probability < 1e-3 per
audit, whatever the seed). ``pytest -m audit``: more settings and trials."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privtext.audit import (
    audit_label_histogram,
    audit_secret_clustering,
    audit_vote_histogram,
    clopper_pearson,
)
from privtext.privacy import secret_noise

ALPHA = 1e-3


def _sigma(rho: float, sample: str) -> float:
    m = sp.csr_matrix(np.ones((1, 1)))
    if sample == "independent":
        return secret_noise(m, p=1e-4, r=1e-3, compositions=2, sampling=f"scaled:{rho}").sigma
    return secret_noise(m, p=1e-4, r=1e-3, compositions=1, sampling=f"scaled:{rho}",
                        release_sensitivity=math.sqrt(2)).sigma


def test_clopper_pearson_known_values() -> None:
    lo, hi = clopper_pearson(5, 10, 0.05)
    assert lo == pytest.approx(0.187086, abs=1e-6) and hi == pytest.approx(0.812914, abs=1e-6)
    assert clopper_pearson(0, 20, 0.05) == (0.0, pytest.approx(0.168433, abs=1e-6))


def test_vote_and_label_histograms_pass_and_halved_noise_is_caught() -> None:
    rng = np.random.default_rng(7)
    for audit in (audit_vote_histogram, audit_label_histogram):
        ok = audit(1.0, trials=3000, rng=rng, alpha=ALPHA)
        assert ok.passed, ok.line()
        broken = audit(1.0, trials=3000, rng=rng, alpha=ALPHA, actual_noise_scale=0.5)
        assert not broken.passed, broken.line()


def test_group_sensitivity_dropped_to_one_is_caught() -> None:
    rng = np.random.default_rng(8)
    """The vote histogram recorded with Δ = k = 3 but noised as if Δ = 1 (std σ instead of 3σ)."""
    ok = audit_vote_histogram(1.0, sensitivity=3, trials=3000, rng=rng, alpha=ALPHA)
    broken = audit_vote_histogram(1.0, sensitivity=3, trials=3000, rng=rng, alpha=ALPHA, actual_noise_scale=1 / 3)
    assert ok.passed and not broken.passed, (ok.line(), broken.line())


def test_secret_clustering_passes_and_the_shared_sample_bug_is_caught() -> None:
    rng = np.random.default_rng(2026)  # one seed here (each audit passes for any seed with prob > 1 - 1e-3)
    rho = 0.1
    s_ind = _sigma(rho, "independent")
    ok = audit_secret_clustering(rho=rho, sigma=s_ind, sample="independent", trials=30000, rng=rng, alpha=ALPHA)
    assert ok.passed, ok.line()
    bug = audit_secret_clustering(rho=rho, sigma=s_ind, sample="shared", claim_sample="independent",
                                  trials=30000, rng=rng, alpha=ALPHA)
    assert not bug.passed, bug.line()


def test_secret_clustering_halved_noise_is_caught() -> None:
    rng = np.random.default_rng(9)
    s = _sigma(0.1, "independent")
    broken = audit_secret_clustering(rho=0.1, sigma=s, trials=20000, rng=rng, alpha=ALPHA, actual_noise_scale=0.5)
    assert not broken.passed, broken.line()


@pytest.mark.audit
def test_shared_sample_bug_long() -> None:
    """The shared-sample bug at ρ = 0.05, the hardest of the first review's settings (the default suite covers
    ρ = 0.1; benchmarks/audit.py the rest)."""
    rng = np.random.default_rng(0)
    s_ind = _sigma(0.05, "independent")
    bug = audit_secret_clustering(rho=0.05, sigma=s_ind, sample="shared", claim_sample="independent",
                                  trials=60000, rng=rng, alpha=ALPHA)
    assert not bug.passed, bug.line()


@pytest.mark.audit
@pytest.mark.parametrize(("rho", "sample", "trials"), [(0.05, "shared", 40000), (0.5, "independent", 15000)])
def test_secret_clustering_long(rho: float, sample: str, trials: int) -> None:
    rng = np.random.default_rng(int(rho * 100))
    s = _sigma(rho, sample)
    ok = audit_secret_clustering(rho=rho, sigma=s, sample=sample, trials=trials, rng=rng, alpha=ALPHA)
    assert ok.passed, ok.line()


def test_audit_of_a_run_reads_its_ledger(tmp_path) -> None:
    from privtext.audit import audit_run
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=30, n_pool=100)
    run = tiny_run(tmp_path / "r", private=priv, public=pub, iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5},
                   evolution={"label_distribution": {"kind": "dp"}})
    results = audit_run(run, trials=1500, rng=np.random.default_rng(0), alpha=ALPHA)
    kinds = sorted(r.mechanism.split(" ")[0] for r in results if r.check == "attack")
    assert kinds == ["dp_label_histogram", "dp_vote_histogram"] and all(r.passed for r in results)
    assert sorted(r.mechanism.split(" ")[0] for r in results if r.check == "derivation") == ["labels_gaussian",
                                                                                              "votes"]


def test_topq_histograms_pass_and_the_public_codes_xor_sensitivity_is_caught() -> None:
    """WASP's Top-Q pair at its exact Δ_Q passes for Q = 1, 4, 8; noising it with the public WASP code's
    ``2 - 1/(2^(Q-1))`` (XOR: 1 at Q = 4, where Δ_4 = 1.63) is caught."""
    from privtext.audit import _public_code_topq_sensitivity, audit_topq_histograms
    from privtext.mechanisms.topq import topq_sensitivity

    rng = np.random.default_rng(11)
    for q in (1, 4, 8):
        ok = audit_topq_histograms(1.0, q=q, trials=3000, rng=rng, alpha=ALPHA)
        assert ok.passed and ok.details["sensitivity"] == pytest.approx(topq_sensitivity(q)), ok.line()
    assert _public_code_topq_sensitivity(4) == 1.0
    with pytest.raises(Exception, match="divides by zero"):
        _public_code_topq_sensitivity(3)
    scale = _public_code_topq_sensitivity(4) / topq_sensitivity(4)
    broken = audit_topq_histograms(1.0, q=4, trials=3000, rng=rng, alpha=ALPHA, actual_noise_scale=scale)
    assert not broken.passed, broken.line()


def test_laplace_releases_pass_and_halved_noise_is_caught() -> None:
    """DP-KPS's DP vocabulary (Δ₁ = r) and the pure-DP label histogram: the attack on the event where every
    canary bin is ≥ base + 1 reaches the true ε; at the claimed noise it stays below ε, at half the noise
    (true ε doubled) it exceeds the claim."""
    from privtext.audit import audit_dp_vocabulary, audit_laplace_label_histogram

    rng = np.random.default_rng(12)
    from privtext.audit import audit_dp_term_histogram

    for audit in (lambda **k: audit_dp_vocabulary(1.0, r=2, **k), lambda **k: audit_laplace_label_histogram(1.0, **k),
                  lambda **k: audit_dp_term_histogram(1.0, **k)):
        ok = audit(trials=5000, rng=rng, alpha=ALPHA)
        assert ok.passed and ok.quantity == "epsilon", ok.line()
        assert ok.details["epsilon_point"] == pytest.approx(1.0, abs=0.3)  # the attack is tight at ε
        broken = audit(trials=5000, rng=rng, alpha=ALPHA, actual_noise_scale=0.5)
        assert not broken.passed, broken.line()


def test_audit_of_wasp_and_dpkps_runs(tmp_path) -> None:
    from privtext.audit import audit_run
    from privtext.data.corpus import Corpus
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=60, n_pool=200)
    gens = [{"backend": "scripted", "name": "a", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
            {"backend": "scripted", "name": "b", "vocabulary": ["thing", "stuff", "went", "okay"]}]
    wasp = tiny_run(tmp_path / "wasp", private=priv, public=pub, method="wasp", num_samples=60, iterations=3,
                    generators=gens, privacy={"epsilon": 4.0, "delta": 1e-5}, wasp={"q": 3, "in_context": 4})
    res = [r for r in audit_run(wasp, trials=1500, rng=np.random.default_rng(1), alpha=ALPHA) if r.check == "attack"]
    assert [r.mechanism.split(" ")[0] for r in res] == ["dp_topq_histograms"] and res[0].passed, res

    p2, pool, _ = toy_corpora(rng=np.random.default_rng(5), n_private=60, n_pool=150)
    dp = tiny_run(tmp_path / "dpkps", private=p2, public=Corpus(pool.ids, pool.texts, {}, name="pool"),
                  method="dpkps", num_samples=16, privacy={"epsilon": 6.0},
                  data={"label_values": {"category": ["food", "hotel"], "mood": ["good", "bad"]}},
                  evolution={"label_distribution": {"kind": "dp", "budget_fraction": 0.1}},
                  dpkps={"vocab_size": 20, "length": 4, "n_features": 32, "vocabulary_min_count": 3})
    res = audit_run(dp, trials=1500, rng=np.random.default_rng(2), alpha=ALPHA)
    kinds = sorted(r.mechanism.split(" ")[0] for r in res if r.check == "attack")
    assert kinds == ["dp_term_histogram", "dp_vocabulary", "laplace_label_histogram"] and all(
        r.passed for r in res), res
