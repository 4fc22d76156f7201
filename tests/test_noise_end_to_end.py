"""The noise of every release, measured on the code path users run.

Each test makes a real run (``privtext.testing.tinyrun``: the runner, the scripted generator, the hashing
embedder), recomputes the exact value of every release from the run's own checkpoints and the private data, and
χ²-tests ``released − exact`` against the noise std the ledger recorded (two-sided, at 1e-4: a correct run fails
with probability 2e-4). Removing or scaling the noise anywhere on that path — in the mechanism, in the method's
call, in the sensitivity it passes — fails these tests. Mutations checked by hand (each made the named test fail):

* ``dp_vote_histogram``: ``std = noise_multiplier * sensitivity`` → ``0.5 * ...`` or ``0``  (votes, group);
* ``methods/augpe.py``: ``sensitivity=sens`` → ``sensitivity=1.0`` in the scorer  (group);
* ``dp_label_histogram``: noise dropped  (labels);
* ``secret_clustering``: the centres' scale ``2 * radius / n`` → ``radius / n``; the counts' noise dropped  (SecPE).

Also: the event a mechanism returns must equal the recorded one (a mechanism spending another event is refused),
secure mode, ``calibration: paper``, fixed noise-multiplier budgets, and the refusals of bad parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privtext.data import Corpus, load_corpus
from privtext.data.labels import LabelSpace
from privtext.embed import build_embedder
from privtext.errors import ConfigError, InvalidPrivacyParameter, PrivacyError
from privtext.mechanisms.voting import nearest_votes
from privtext.rundir import RunDir
from privtext.testing.tinyrun import tiny_run, toy_corpora

P_TAIL = 1e-4


def chi2_ok(residuals: np.ndarray, std: float | np.ndarray) -> tuple[bool, float]:
    """Two-sided χ² test of ``residuals ~ N(0, std²)``; returns (passes, variance ratio)."""
    z = np.asarray(residuals, dtype=np.float64).ravel() / np.asarray(std, dtype=np.float64).ravel()
    n = z.size
    s = float((z**2).sum())
    lo, hi = stats.chi2.ppf([P_TAIL / 2, 1 - P_TAIL / 2], n)
    return bool(lo <= s <= hi), s / n


def _corpora(seed: int = 0, n_private: int = 60, emails: int = 0) -> tuple[Corpus, Corpus]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=n_private, n_pool=200,
                               topics=("food", "hotel", "shop"))
    if emails:
        texts = list(priv.texts)
        for i in range(emails):  # the same address in `emails` records: a secret group of that size
            texts[i] += " write to anna.k@example.org"
        priv = Corpus(priv.ids, tuple(texts), priv.labels, name=priv.name)
    return priv, pub


def _run(tmp: Path, name: str, priv: Corpus, pub: Corpus, **kw: Any) -> Path:
    kw.setdefault("evolution", {"num_samples": 48, "iterations": 3, "variations": 4})
    return tiny_run(tmp / name, private=priv, public=pub, **kw)


def _ledger(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in RunDir(run).ledger.read_text().splitlines() if x.strip()]


def _vote_residuals(run: Path, priv: Corpus) -> tuple[np.ndarray, np.ndarray]:
    """released − exact for every vote release of an Aug-PE run, and the ledger's std for each bin."""
    rd = RunDir(run)
    cfg = json.loads(json.dumps(__import__("yaml").safe_load(rd.resolved_config().read_text())))
    emb = build_embedder(cfg["embedder"])
    cols = cfg["data"]["label_columns"]
    space = LabelSpace(tuple(cols), tuple(sorted(set(load_corpus(cfg["data"]["public"], label_columns=cols)
                                                     .label_tuples(cols)))))
    private = load_corpus(cfg["data"]["private"], label_columns=cols)
    pe = emb.embed(list(private.texts))
    pg = space.groups_of(private.label_tuples(cols))
    res, sd = [], []
    for rec in _ledger(run):
        if rec["mechanism"] != "dp_nn_vote_histogram":
            continue
        store = rd.iteration(rec["iteration"])
        pop, vote_emb = store.load_population()
        ve = vote_emb if vote_emb is not None else pop.emb
        exact, _ = nearest_votes(pe, ve, private_groups=pg, candidate_groups=pop.group, center=ve.mean(axis=0))
        with np.load(rd.release_path(rec["key"], rec["iteration"])) as z:
            released = z["raw_noisy"]
        res.append(released - exact)
        sd.append(np.full(len(exact), rec["noise_std"]))
    return np.concatenate(res), np.concatenate(sd)


def test_augpe_votes_carry_the_recorded_noise(tmp_path: Path) -> None:
    priv, pub = _corpora()
    run = _run(tmp_path, "votes", priv, pub, privacy={"mu": 1.0})
    r, sd = _vote_residuals(run, priv)
    assert sd[0] == pytest.approx(np.sqrt(3) / 1.0, rel=1e-3)  # σ = √T/μ, Δ = 1
    ok, ratio = chi2_ok(r, sd)
    assert ok, f"released − exact has {ratio:.3f}× the recorded variance over {r.size} bins"


def test_group_sensitivity_noise_is_k_times(tmp_path: Path) -> None:
    priv, pub = _corpora(emails=3)
    run = _run(tmp_path, "group", priv, pub, privacy={"mu": 1.0},
               augpe={"sensitivity": "secret_group", "detector": "regex"})
    recs = _ledger(run)
    assert all(x["sensitivity"] == 3.0 for x in recs)  # k found independently: 3 records share one address
    r, sd = _vote_residuals(run, priv)
    assert sd[0] == pytest.approx(3 * np.sqrt(3), rel=1e-3)
    ok, ratio = chi2_ok(r, sd)
    assert ok, f"released − exact has {ratio:.3f}× the recorded variance (σ·k) over {r.size} bins"


def test_dp_label_histogram_carries_the_recorded_noise(tmp_path: Path) -> None:
    """The DP label histogram (one release of 6 bins per run): pooled over 10 runs."""
    res, sd = [], []
    for i in range(10):
        priv, pub = _corpora(seed=i)
        run = _run(tmp_path, f"labels{i}", priv, pub, privacy={"epsilon": 3.0, "delta": 1e-5},
                   evolution={"num_samples": 12, "iterations": 1, "variations": 2,
                              "label_distribution": {"kind": "dp", "budget_fraction": 0.3}})
        (rec,) = [x for x in _ledger(run) if x["mechanism"] == "dp_label_histogram"]
        cols = ["category", "mood"]
        space = LabelSpace(tuple(cols), tuple(sorted(set(pub.label_tuples(cols)))))
        exact = np.bincount(space.groups_of(priv.label_tuples(cols)), minlength=len(space))
        with np.load(RunDir(run).release_path(rec["key"], None)) as z:
            res.append(z["noisy"] - exact)
        sd.append(np.full(len(exact), rec["noise_std"]))
    ok, ratio = chi2_ok(np.concatenate(res), np.concatenate(sd))
    assert ok, f"label histogram: {ratio:.3f}× the recorded variance"


def test_secpe_counts_and_centres_carry_the_recorded_noise(tmp_path: Path) -> None:
    """ρ = 1 (one holder per secret and η ≥ 1, sampling 'max'), so the exact statistics are known: recompute the
    public clusters as the method does and the holders' assignment, then test both noises."""
    from privtext.mechanisms.clustering import clip_rows, public_kmeans
    from privtext.search import brute_force_nn
    from privtext.secrets import build_detector

    priv, pub = _corpora(seed=3, n_private=90)
    texts = list(priv.texts)
    for i in range(0, 30, 3):  # ten records, each with its own address: ten secrets of one holder each
        texts[i] += f" mail person{i}@example.org"
    priv = Corpus(priv.ids, tuple(texts), priv.labels, name="private")
    run = _run(tmp_path, "secpe", priv, pub, method="secpe", privacy={"secret": {"p": 1e-3, "r": 2e-2}},
               secpe={"detector": "regex", "clusters": 6, "sampling": "max"})
    rd = RunDir(run)
    mask = np.asarray(build_detector("regex").detect(list(priv.texts)).private_mask(), dtype=bool)
    cols = ["category", "mood"]
    free, hold = priv.subset(np.flatnonzero(~mask)), priv.subset(np.flatnonzero(mask))
    emb = build_embedder({"backend": "hashing", "dim": 64, "cache": False})
    space = LabelSpace(tuple(cols), tuple(sorted(set(pub.label_tuples(cols)))))
    fg, hg = space.groups_of(free.label_tuples(cols)), space.groups_of(hold.label_tuples(cols))
    cl = public_kmeans(emb.embed(list(free.texts)), fg, len(space), 6, seed=0, radius=1.0)
    he = clip_rows(emb.embed(list(hold.texts)), 1.0)
    sums = cl.centres.astype(np.float64) * cl.sizes[:, None]
    m = np.zeros(len(cl))
    for g in np.unique(hg):
        ki = np.flatnonzero(cl.group == g)
        qi = np.flatnonzero(hg == g)
        for i, k in zip(qi, ki[brute_force_nn(he[qi], cl.centres[ki])], strict=True):
            sums[k] += he[i]
            m[k] += 1
    exact_counts = cl.sizes + m
    exact_centres = sums / exact_counts[:, None]
    rc, sc, re_, se_ = [], [], [], []
    for rec in _ledger(run):
        assert rec["mechanism"] == "secret_clustering"
        with np.load(rd.release_path(rec["key"], rec["iteration"])) as z:
            rc.append(z["counts"] - exact_counts)
            re_.append(z["centres"] - exact_centres)
        sigma = rec["noise_std"]
        sc.append(np.full(len(cl), sigma))
        se_.append(np.repeat((2.0 / cl.sizes * sigma)[:, None], exact_centres.shape[1], axis=1))
    ok_c, ratio_c = chi2_ok(np.concatenate(rc), np.concatenate(sc))
    ok_e, ratio_e = chi2_ok(np.concatenate(re_), np.concatenate(se_))
    assert ok_e, f"centres: {ratio_e:.3f}× the recorded variance"
    # counts: 6 bins × 3 clusterings is few; the χ² test still catches a missing or halved noise
    assert ok_c, f"counts: {ratio_c:.3f}× the recorded variance"


def test_a_mechanism_that_spends_another_event_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import privtext.methods.augpe.scorers as augpe
    from privtext.privacy.events import gaussian_event

    real = augpe.dp_vote_histogram

    def lying(*a: Any, **k: Any) -> Any:
        rel, _ = real(*a, **k)
        return rel, gaussian_event(k["noise_multiplier"] * 2)  # claims twice the noise it drew

    monkeypatch.setattr(augpe, "dp_vote_histogram", lying)
    priv, pub = _corpora()
    with pytest.raises(PrivacyError, match="the value is discarded"):
        _run(tmp_path, "lying", priv, pub, privacy={"mu": 1.0})
    rd = RunDir(tmp_path / "lying")
    assert [x["key"] for x in _ledger(rd.root)] == ["votes/iter_000"]
    assert not rd.release_path("votes/iter_000", 0).exists()


def test_secure_mode_draws_noise(tmp_path: Path) -> None:
    priv, pub = _corpora()
    run = tiny_run(tmp_path / "secure", private=priv, public=pub, privacy={"mu": 1.0, "secure": True}, seed=None,
                   evolution={"num_samples": 48, "iterations": 3, "variations": 4})
    r, sd = _vote_residuals(run, priv)
    ok, ratio = chi2_ok(r, sd)
    assert ok, ratio
    assert json.loads(RunDir(run).privacy.read_text())["private"] is True


def test_paper_calibration_and_fixed_noise_budgets(tmp_path: Path) -> None:
    from privtext.methods.augpe import label_sigma_ratio
    from privtext.privacy import Budget, gaussian_noise_multiplier

    priv, pub = _corpora()
    run = _run(tmp_path, "paper", priv, pub, privacy={"epsilon": 4.0, "delta": 1e-5, "calibration": "paper"})
    want = gaussian_noise_multiplier(Budget.dp(4.0, 1e-5), compositions=3, method="paper")
    assert all(x["noise_std"] == pytest.approx(want, rel=1e-9) for x in _ledger(run))
    r, sd = _vote_residuals(run, priv)
    assert chi2_ok(r, sd)[0]
    fixed = _run(tmp_path, "fixed", priv, pub, privacy={"noise_multiplier": 2.5},
                 evolution={"num_samples": 48, "iterations": 3, "variations": 4,
                            "label_distribution": {"kind": "dp", "budget_fraction": 0.2}})
    recs = {x["mechanism"]: x for x in _ledger(fixed)}
    assert recs["dp_nn_vote_histogram"]["noise_std"] == 2.5
    assert recs["dp_label_histogram"]["noise_std"] == pytest.approx(2.5 * label_sigma_ratio(0.2, 3))


def test_refusals_of_bad_parameters() -> None:
    from privtext.mechanisms.clustering import PublicClusters, secret_clustering
    from privtext.mechanisms.labels import dp_label_histogram
    from privtext.mechanisms.voting import dp_vote_histogram
    from privtext.privacy import Release, poisson_binomial_pmf
    from privtext.privacy.events import gaussian_event

    x = np.eye(3, dtype=np.float32)
    g = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="-1"):
        dp_vote_histogram(x, x, noise_multiplier=-1.0, rng=g)
    with pytest.raises(ConfigError, match="sensitivity"):
        dp_vote_histogram(x, x, noise_multiplier=1.0, sensitivity=0.0, rng=g)
    with pytest.raises(ConfigError, match="sensitivity"):
        dp_label_histogram(np.zeros(3, dtype=int), 2, noise_multiplier=1.0, sensitivity=-2.0, rng=g)
    with pytest.raises(ConfigError):
        dp_label_histogram(np.zeros(3, dtype=int), 2, noise_multiplier=-0.5, rng=g)
    cl = PublicClusters(centres=x[:1], sizes=np.array([5]), group=np.zeros(1, dtype=np.int64))
    with pytest.raises(ConfigError, match=r"1\.5"):
        secret_clustering(x, np.zeros(3, dtype=int), cl, rho=np.array([0.2, 1.5, 0.1]), sigma=1.0, rng=g)
    with pytest.raises(ConfigError, match="σ"):
        secret_clustering(x, np.zeros(3, dtype=int), cl, rho=np.zeros(3), sigma=-1.0, rng=g)
    with pytest.raises(InvalidPrivacyParameter):
        poisson_binomial_pmf([0.5, -0.1])
    with pytest.raises(PrivacyError, match="sensitivity must be positive"):
        Release(key="k", mechanism="m", event=gaussian_event(1.0), noise_std=1.0, sensitivity=0.0).validate()
    with pytest.raises(ConfigError, match="noise_multiplier"):
        from privtext.config import config_from_dict

        config_from_dict({"data": {"private": "x.csv"}, "privacy": {"noise_multiplier": -1}})
