"""The WASP method (privtext.methods.wasp): Eq 2/8 known values, Eq 7 selection, and real tiny runs — the noise
of every release measured on the code path users run, nothing un-noised written anywhere in the run directory,
the ledger's events equal to the calibration (tight and the paper's), the FuseGen baseline releasing nothing.

Mutations checked by hand (each made a test here fail): ``std = noise_multiplier * delta`` → ``0.5 * …`` in
``dp_topq_histograms`` (noise test); ``sensitivity=delta`` dropped from the method's call with Δ replaced by 1
(noise test, event test); Eq 8 without the per-generator mean (known values)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privtext.data import Corpus
from privtext.errors import ConfigError, RunError
from privtext.mechanisms.topq import topq_histograms
from privtext.methods.wasp import (
    generator_counts,
    generator_weights,
    round_sizes,
    select_examples,
    wasp_noise_multiplier,
)
from privtext.rundir import RunDir
from privtext.testing.tinyrun import run_private_side, tiny_run, toy_corpora

P_TAIL = 1e-4


def test_round_sizes_and_generator_counts_known_values() -> None:
    assert list(round_sizes(300, 5)) == [60] * 5
    assert list(round_sizes(7, 3)) == [3, 2, 2]
    # 7·(0.5, 0.3, 0.2) = 3.5, 2.1, 1.4 → floors 3, 2, 1, one left for the largest remainder (0.5)
    assert list(generator_counts(np.array([0.5, 0.3, 0.2]), 7)) == [4, 2, 1]
    assert list(generator_counts(np.array([1.0, 0.0, 0.0]), 5)) == [5, 0, 0]
    assert list(generator_counts(np.array([1.0, 1.0, 1.0]), 60)) == [20, 20, 20]
    with pytest.raises(ConfigError, match=r"-0\.5"):
        generator_counts(np.array([-0.5, 1.0]), 3)


def test_generator_weights_eq8_known_values() -> None:
    # generator 0: bins 1, 3 (mean 2); generator 1: bin −2 (mean −2 → 0); generator 2: bin 0
    assert list(generator_weights(np.array([1.0, 3.0, -2.0, 0.0]), np.array([0, 0, 1, 2]), 3)) == [1.0, 0.0, 0.0]
    # the MEAN per sample, not the sum: 4 samples of 1 vs 1 sample of 2 → 1 : 2
    w = generator_weights(np.array([1.0, 1.0, 1.0, 1.0, 2.0]), np.array([0, 0, 0, 0, 1]), 2)
    assert w == pytest.approx([1 / 3, 2 / 3], abs=1e-15)
    # nothing positive → equal weights; a generator without samples gets 0
    assert list(generator_weights(np.array([-1.0, -3.0]), np.array([0, 1]), 2)) == [0.5, 0.5]
    assert list(generator_weights(np.array([2.0]), np.array([0]), 2)) == [1.0, 0.0]


def test_select_examples_eq7() -> None:
    hn = np.array([5.0, 1.0, 3.0, 0.0, 9.0, 2.0])
    hf = np.array([0.0, 4.0, 1.0, 6.0, 0.0, 7.0])
    groups = np.array([0, 0, 0, 0, 1, 1])
    ex = select_examples(hn, hf, groups, 3, 2, rng=np.random.default_rng(0))
    assert list(ex[0][0]) == [0, 2] and list(ex[0][1]) == [3, 1]
    assert list(ex[1][0]) == [4, 5] and list(ex[1][1]) == []  # 5 is better: not shown as worse too
    assert 2 not in ex  # no candidate of label 2
    ex = select_examples(hn, hf, groups, 3, 2, rng=np.random.default_rng(0), contrastive=False)
    assert list(ex[0][1]) == []


# ----------------------------------------------------------------------------------------------- real runs


def _corpora(seed: int = 0) -> tuple[Corpus, Corpus]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=60, n_pool=200,
                               topics=("food", "hotel", "shop"))
    return priv, pub


GENS = [{"backend": "scripted", "name": "topical", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
        {"backend": "scripted", "name": "filler", "vocabulary": ["thing", "stuff", "went", "okay"]}]


def _run(tmp: Path, name: str, **kw: Any) -> Path:
    priv, pub = _corpora()
    kw.setdefault("privacy", {"epsilon": 4.0, "delta": 1e-5})
    kw.setdefault("wasp", {"q": 3, "in_context": 4})
    return tiny_run(tmp / name, private=priv, public=pub, method="wasp", num_samples=90, iterations=4,
                    generators=GENS, **kw)


def _ledger(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in RunDir(run).ledger.read_text().splitlines() if x.strip()]


def _exact(run: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The exact (Hⁿ, Hᶠ) of every release, recomputed from the checkpoints and the private data."""
    rd, cfg, pe, pg = run_private_side(run)
    out = {}
    for rec in _ledger(run):
        pop, _ = rd.iteration(rec["iteration"]).load_population()
        out[rec["key"]] = topq_histograms(pe, pop.emb, q=cfg["wasp"]["q"], private_groups=pg,
                                          candidate_groups=pop.group)
    return out


def test_wasp_run_releases_carry_the_recorded_noise(tmp_path: Path) -> None:
    run = _run(tmp_path, "noise")
    rd = RunDir(run)
    exact = _exact(run)
    recs = _ledger(run)
    assert [r["key"] for r in recs] == ["votes/round_000", "votes/round_001", "votes/round_002"]  # T − 1
    z = []
    for rec in recs:
        hn, hf = exact[rec["key"]]
        with np.load(rd.release_path(rec["key"], rec["iteration"])) as v:
            z += [(v["nearest"] - hn) / rec["noise_std"], (v["furthest"] - hf) / rec["noise_std"]]
        assert rec["sensitivity"] == pytest.approx(math.sqrt(21 / 8), rel=1e-12)  # by hand: 2·(1 + ¼ + 1/16)
    zz = np.concatenate(z)
    lo, hi = stats.chi2.ppf([P_TAIL / 2, 1 - P_TAIL / 2], zz.size)
    assert lo <= float((zz**2).sum()) <= hi, f"variance ratio {(zz**2).mean():.3f} over {zz.size} bins"


def test_nothing_unnoised_is_written_in_the_run_directory(tmp_path: Path) -> None:
    """No file of the run (release or private/) holds an exact Top-Q histogram: the public code saves the clean
    per-party histograms to disk; privtext never does."""
    run = _run(tmp_path, "clean")
    exact = _exact(run)
    arrays: list[np.ndarray] = []
    for f in run.rglob("*"):
        if f.suffix == ".npz":
            with np.load(f) as z:
                arrays += [z[k] for k in z.files]
        elif f.suffix == ".npy":
            arrays.append(np.load(f))
        elif f.suffix == ".parquet":
            import pandas as pd

            df = pd.read_parquet(f)
            arrays += [df[c].to_numpy() for c in df.columns if df[c].dtype.kind == "f"]
        elif f.suffix == ".json":
            def nums(x: Any) -> list[float]:
                if isinstance(x, dict):
                    return [v for y in x.values() for v in nums(y)]
                if isinstance(x, list):
                    if x and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
                        return [np.asarray(x, dtype=float)]  # type: ignore[list-item]
                    return [v for y in x for v in nums(y)]
                return []
            arrays += nums(json.loads(f.read_text()))
    assert arrays
    for hn, hf in exact.values():
        for h in (hn, hf):
            for a in arrays:
                a = np.asarray(a)
                if a.shape == h.shape and a.dtype.kind in "fi":
                    assert not np.allclose(a, h, atol=1e-6), "an exact Top-Q histogram was written to disk"


def _exact_gaussian_multiplier(epsilon: float, delta: float, compositions: int) -> float:
    """z such that T Gaussian releases of multiplier z are exactly (ε, δ)-DP, by another route than the run's
    PLD calibration: T compositions of N(0, z²) with Δ = 1 are one Gaussian with μ = √T/z, whose exact δ(ε) is
    Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm 8); solved for μ by root finding."""
    from scipy.optimize import brentq

    def excess(mu: float) -> float:
        return float(stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)
                     - delta)

    return math.sqrt(compositions) / brentq(excess, 1e-3, 50.0, xtol=1e-14)


def test_ledger_events_equal_the_calibration(tmp_path: Path) -> None:
    """Expected values computed by hand / another route, not by the functions under test: the exact analytic
    Gaussian multiplier for T = 3 rounds (the PLD accountant is pessimistic, so the run's z may only be larger,
    by less than the calibration's relative tolerance 1e-4), and Δ_Q for Q = 3 from Top-Q's vote weights
    1, ½, ¼ in both histograms: Δ² = 2·(1 + ¼ + 1/16) = 21/8."""
    run = _run(tmp_path, "tight")
    recs = _ledger(run)
    z_exact = _exact_gaussian_multiplier(4.0, 1e-5, 3)
    delta_q = math.sqrt(21 / 8)
    z = recs[0]["event"]["noise_multiplier"]
    assert z_exact <= z <= z_exact * (1 + 1e-4)
    for rec in recs:
        assert rec["event"] == {"type": "GaussianDpEvent", "noise_multiplier": z}
        assert rec["noise_std"] == pytest.approx(z * delta_q, rel=1e-12)
    st = json.loads(RunDir(run).privacy.read_text())
    assert st["private"] is True
    assert st["guarantee"]["spent"]["epsilon"] <= 4.0
    assert st["parameters"]["topq_sensitivity"] == pytest.approx(delta_q, rel=1e-12)
    # the paper's calibration: s = 4·√(2 ln(1.25/δ))·√(T−1)/ε, accounted as z = s/Δ_Q
    run = _run(tmp_path, "paper", privacy={"epsilon": 4.0, "delta": 1e-5, "calibration": "paper"})
    s = 4 * math.sqrt(2 * math.log(1.25e5)) * math.sqrt(3) / 4  # by hand: Δ = 4, T − 1 = 3, ε = 4
    assert wasp_noise_multiplier(4.0, 1e-5, iterations=4, sensitivity=4.0) == pytest.approx(s, rel=1e-12)
    for rec in _ledger(run):
        assert rec["noise_std"] == pytest.approx(s, rel=1e-12)
        assert rec["event"]["noise_multiplier"] == pytest.approx(s / delta_q, rel=1e-12)
    assert s > 2 * z * delta_q  # the paper's calibration spends > 2× the noise


def test_weights_and_rounds_reach_the_statement_and_report(tmp_path: Path) -> None:
    run = _run(tmp_path, "report")
    st = json.loads(RunDir(run).privacy.read_text())
    w = st["released"]["wasp"]
    assert w["generators"] == ["topical", "filler"]
    assert [r["round"] for r in w["rounds"]] == [0, 1, 2, 3]
    assert w["rounds"][0]["weights_used"] == [0.5, 0.5]
    assert sum(r["n_per_generator"][0] + r["n_per_generator"][1] for r in w["rounds"]) == 90
    for r in w["rounds"][:-1]:
        assert sum(r["weights_next"]) == pytest.approx(1.0, abs=1e-3)
    syn = [json.loads(x) for x in RunDir(run).synthetic.read_text().splitlines()]
    assert len(syn) == 90
    from privtext.report.html import build_report

    html = build_report(run).read_text()
    assert "WASP generators" in html and "w topical" in html and "mean H̃ⁿ filler" in html


def test_fusegen_baseline_reads_no_private_data_and_releases_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, "fusegen", wasp={"feedback": "none"})
    assert _ledger(run) == []
    st = json.loads(RunDir(run).privacy.read_text())
    assert all(r["weights_used"] == [0.5, 0.5] for r in st["released"]["wasp"]["rounds"])
    prompts = [json.loads(x) for x in RunDir(run).prompts.read_text().splitlines() if x.strip()]
    assert prompts and all(p["operation"] == "random" for p in prompts)


def test_contrastive_prompts_after_round_zero_go_through_the_prompt_log(tmp_path: Path) -> None:
    run = _run(tmp_path, "prompts")
    prompts = [json.loads(x) for x in RunDir(run).prompts.read_text().splitlines() if x.strip()]
    ops = {p["operation"] for p in prompts}
    assert ops == {"random", "contrastive"}
    st = json.loads(RunDir(run).privacy.read_text())
    assert st["prompt_audit"]["passed"] is True


def test_bad_configs_are_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="label_distribution"):
        _run(tmp_path, "labels", evolution={"label_distribution": {"kind": "dp"}})
    with pytest.raises(ConfigError, match="calibration: paper"):
        _run(tmp_path, "paper-mu", privacy={"mu": 1.0, "calibration": "paper"})
    with pytest.raises(ConfigError, match="q"):
        _run(tmp_path, "q0", wasp={"q": 0})


def test_select_output_known_values() -> None:
    from privtext.methods.wasp import select_output

    hn = np.array([5.0, 1.0, 3.0, 0.0, 9.0, 2.0, 7.0])
    groups = np.array([0, 0, 0, 0, 1, 1, 2])
    # 5 over labels weighted 2:2:1 → 2, 2, 1; label 2 holds one candidate
    keep = select_output(hn, groups, np.array([0.4, 0.4, 0.2]), 5, rng=np.random.default_rng(0))
    assert list(keep) == [0, 2, 4, 5, 6]
    keep = select_output(hn, groups, np.array([0.5, 0.5, 0.0]), 2, rng=np.random.default_rng(0))
    assert list(keep) == [0, 4]


def test_zero_shot_mix_and_output_nearest(tmp_path: Path) -> None:
    """zero_shot_fraction 0.5: later rounds send zero-shot and contrastive prompts; output nearest: T releases
    (the final D is voted on too), 2N generated, N kept — those with the largest released H̃ⁿ per label."""
    run = _run(tmp_path, "mix", wasp={"q": 3, "in_context": 4, "zero_shot_fraction": 0.5, "output": "nearest",
                                      "oversample": 2.0})
    recs = _ledger(run)
    assert [r["key"] for r in recs] == [f"votes/round_{t:03d}" for t in range(4)]
    from privtext.privacy import Budget, gaussian_noise_multiplier

    z = gaussian_noise_multiplier(Budget.dp(4.0, 1e-5), compositions=4)
    assert all(r["event"]["noise_multiplier"] == pytest.approx(z, rel=1e-12) for r in recs)
    rd = RunDir(run)
    syn = [json.loads(x)["text"] for x in rd.synthetic.read_text().splitlines()]
    assert len(syn) == 90
    pop, _ = rd.iteration(3).load_population()
    assert len(pop) == 180
    with np.load(rd.release_path("votes/round_003", 3)) as v:
        hn = v["nearest"]
    from collections import Counter

    once = {t for t, c in Counter(pop.texts).items() if c == 1}  # a text written twice cannot be told apart
    kept = set(syn)
    for g in np.unique(pop.group):  # every kept sample outranks every dropped one of its label
        idx = [i for i in np.nonzero(pop.group == g)[0] if pop.texts[i] in once]
        k = [hn[i] for i in idx if pop.texts[i] in kept]
        d = [hn[i] for i in idx if pop.texts[i] not in kept]
        if k and d:
            assert min(k) >= max(d)
    prompts = [json.loads(x) for x in rd.prompts.read_text().splitlines() if x.strip()]
    later = [p["operation"] for p in prompts if p.get("operation") != "random"]
    assert later and {p["operation"] for p in prompts} == {"random", "contrastive"}
    n_random = sum(p["operation"] == "random" for p in prompts)
    assert n_random > 180 // 4  # round 0 (45) plus about half of rounds 1-3


# ---------------------------------------------------------------------- public text without labels (issue 35 item 2)


def test_shared_pool_arithmetic_known_values() -> None:
    from privtext.methods.wasp import assign_shared, copy_weights, shared_keys

    ids = ["r0-k0-p0@0", "r0-k0-p0@1", "r0-k0-p0@2", "r0-k0-p1@0", "r0-k0-p1@1", "r0-k0-p1@2", "r1-0", "r1-1"]
    origin = ["shared"] * 6 + ["contrastive", "random"]
    keys = shared_keys(ids, origin)
    assert keys == ["r0-k0-p0"] * 3 + ["r0-k0-p1"] * 3 + [None, None]
    assert list(copy_weights(keys)) == pytest.approx([1 / 3] * 6 + [1.0, 1.0], abs=1e-15)
    # p0 is nearest to label 2's private samples (3.5), p1 to label 0's (2.0, label 2's −4.0 noisy value below 0)
    hn = np.array([0.5, -1.0, 3.5, 2.0, 1.0, -4.0, 9.0, 0.0])
    assert list(assign_shared(keys, hn, rng=np.random.default_rng(0))) == [2, 3, 6, 7]
    # ties at random: each of the tied copies is kept in some draws, and exactly one copy every time
    tied = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    kept = {int(assign_shared(keys, tied, rng=np.random.default_rng(s))[0]) for s in range(40)}
    assert kept == {0, 1}
    # a pool text beyond the released histogram was never voted on: it cannot be labelled
    with pytest.raises(RunError, match="r0-k0-p1"):
        assign_shared(keys, hn[:4], rng=np.random.default_rng(0))
    # Eq 8 counts a pool text once: gen 0 holds the two pool texts (copies' votes 0.5−1+3.5+2+1−4 = 2 over 2
    # texts: mean 1), gen 1 the two others (9 + 0 over 2: mean 4.5) → 1 : 4.5; per copy it would be 1/3 : 4.5
    gi = np.array([0] * 6 + [1, 1])
    assert generator_weights(hn, gi, 2, copy_weights(keys)) == pytest.approx([1 / 5.5, 4.5 / 5.5], abs=1e-12)
    assert generator_weights(hn, gi, 2) == pytest.approx([(1 / 3) / (1 / 3 + 4.5), 4.5 / (1 / 3 + 4.5)], abs=1e-12)


WORDS = {"food": ["pizza", "pasta", "waiter", "dessert", "menu", "delicious", "chef", "sauce", "tasty", "dinner"],
         "hotel": ["room", "bed", "lobby", "checkin", "suite", "pool", "towels", "staff", "quiet", "breakfast"],
         "shop": ["store", "price", "cashier", "shelf", "bargain", "aisle", "brand", "receipt", "sale", "mall"]}


def _topic(text: str) -> str | None:
    """The toy topic a text's words name (None: no topic word, or a tie)."""
    toks = [w.strip(".,!?").lower() for w in text.split()]
    c = {k: sum(t in ws for t in toks) for k, ws in WORDS.items()}
    best = max(c, key=lambda k: c[k])
    return best if c[best] > 0 and list(c.values()).count(c[best]) == 1 else None


def _unlabelled_run(tmp: Path, name: str, seed: int = 0, **kw: Any) -> Path:
    """The support-ticket set-up in small: labelled private records of 3 topics, public text WITHOUT labels (half
    of it on one of the topics, half filler), data.label_values, the n-gram generator trained on that text."""
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=60, n_pool=200,
                               topics=("food", "hotel", "shop"))
    priv = Corpus.from_texts(list(priv.texts), {"category": list(priv.labels["category"])}, ids=list(priv.ids),
                             name="priv")
    pub = Corpus.from_texts(list(pub.texts), name="pool")
    kw.setdefault("wasp", {"q": 3, "in_context": 4})
    kw.setdefault("generators", [{"backend": "ngram", "name": "ngram"}])
    kw.setdefault("num_samples", 180)
    return tiny_run(tmp / name, private=priv, public=pub, method="wasp", iterations=4, seed=seed,
                    privacy={"epsilon": 4.0, "delta": 1e-5},
                    data={"label_values": {"category": ["food", "hotel", "shop"]}},
                    evolution={"label_distribution": {"kind": "uniform"}}, **kw)


def test_unlabelled_public_text_labels_follow_the_private_votes(tmp_path: Path, any_seed: int) -> None:
    """With public text that has no labels the n-gram model cannot condition on the label: before, every label's
    samples were the same kind of text and the labels were a coin toss (the support tickets: 10 % = chance).
    Now the zero-shot texts are one shared pool labelled by the released votes and the contrastive samples
    follow each label's voted examples, so a synthetic text's label names its topic far more often than chance:
    one-sided binomial test against p = 1/3 at 1e-4 over the texts that name one topic. (Checked: with the
    shared pool off and contrastive_boost 0 — the old code path — 25 of 90 agreed, at chance.)"""
    run = _unlabelled_run(tmp_path, "unlabelled", seed=any_seed)
    rd = RunDir(run)
    syn = [json.loads(x) for x in rd.synthetic.read_text().splitlines()]
    assert len(syn) == 180 and len({r["text"] for r in syn}) > 150  # N texts, each pool text once
    named = [(r, t) for r in syn if (t := _topic(r["text"])) is not None]
    hits = sum(r["category"] == t for r, t in named)
    p = stats.binomtest(hits, len(named), 1 / 3, alternative="greater").pvalue
    assert p < P_TAIL, f"{hits} of {len(named)} labels agree with the text's topic"
    st = json.loads(rd.privacy.read_text())
    assert st["parameters"]["shared_pool_generators"] == ["ngram"]
    assert "cannot condition on the label" in rd.log_path.read_text()


def test_shared_pool_votes_carry_the_recorded_noise_and_each_text_keeps_its_top_label(tmp_path: Path) -> None:
    """The shared pool's copies are candidates of their labels like any other: every release is the exact
    within-label Top-Q pair plus the recorded noise (χ² over every bin, Δ_Q unchanged), and each pool text's
    output label is the one with the largest released H̃ⁿ among its copies in the last release."""
    from privtext.methods.wasp import shared_keys

    run = _unlabelled_run(tmp_path, "pool-noise", num_samples=90)
    rd = RunDir(run)
    recs = _ledger(run)
    assert [r["key"] for r in recs] == ["votes/round_000", "votes/round_001", "votes/round_002"]
    # the exact pair of every release, recomputed from the checkpoints and the private data (labels: the declared
    # values, in order — run_private_side reads them from labelled public text)
    import yaml

    from privtext.data import load_corpus
    from privtext.embed import build_embedder

    cfg = yaml.safe_load(rd.resolved_config().read_text())
    private = load_corpus(cfg["data"]["private"], label_columns=["category"])
    pe = np.asarray(build_embedder(cfg["embedder"]).embed(list(private.texts)), dtype=np.float32)
    pg = np.array([["food", "hotel", "shop"].index(c) for c in private.labels["category"]])
    z = []
    for rec in recs:
        pop, _ = rd.iteration(rec["iteration"]).load_population()
        hn, hf = topq_histograms(pe, pop.emb, q=3, private_groups=pg, candidate_groups=pop.group)
        assert rec["sensitivity"] == pytest.approx(math.sqrt(21 / 8), rel=1e-12)
        with np.load(rd.release_path(rec["key"], rec["iteration"])) as v:
            z += [(v["nearest"] - hn) / rec["noise_std"], (v["furthest"] - hf) / rec["noise_std"]]
    zz = np.concatenate(z)
    lo, hi = stats.chi2.ppf([P_TAIL / 2, 1 - P_TAIL / 2], zz.size)
    assert lo <= float((zz**2).sum()) <= hi
    pop, _ = rd.iteration(2).load_population()
    keys = shared_keys(pop.ids, pop.origin)
    assert sum(k is not None for k in keys) == 3 * len({k for k in keys if k is not None})  # one copy per label
    with np.load(rd.release_path("votes/round_002", 2)) as v:
        hn = v["nearest"]
    label = {str(x["text"]): x["category"] for x in map(json.loads, rd.synthetic.read_text().splitlines())}
    values = ["food", "hotel", "shop"]
    checked = 0
    for k in {k for k in keys if k is not None}:
        idx = [i for i, kk in enumerate(keys) if kk == k]
        text = pop.texts[idx[0]]
        if sum(t == text for t in pop.texts) != len(idx):
            continue  # the same text written twice cannot be told apart in the output
        best = max(hn[i] for i in idx)
        assert hn[next(i for i in idx if values[pop.group[i]] == label[text])] == best
        checked += 1
    assert checked >= 20


def test_no_vote_to_label_an_unconditioned_generator_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FuseGen (no private data read) or a single round (no vote) with the n-gram model of unlabelled public text:
    nothing could tell the labels apart, so the run is refused, naming why, in the configuration checks — before
    a run directory is created (RunDir.create fails the test if reached) or a backend is built."""
    import privtext.runner

    def created(*a: Any, **k: Any) -> None:
        raise AssertionError("a run directory was created before the refusal")

    with monkeypatch.context() as m:
        m.setattr(privtext.runner.RunDir, "create", created)
        _check_refusals(tmp_path)
    # labelled public text: the same FuseGen run is fine (the n-gram model follows the label)
    run = tiny_run(tmp_path / "fusegen-labelled", private=_corpora()[0], public=_corpora()[1], method="wasp",
                   num_samples=30, iterations=2, generators=[{"backend": "ngram"}], wasp={"feedback": "none"})
    assert json.loads(RunDir(run).privacy.read_text())["parameters"]["shared_pool_generators"] == []


def _check_refusals(tmp_path: Path) -> None:
    for name, kw in [("fusegen", {"wasp": {"feedback": "none"}}), ("one-round", {"iterations": 1})]:
        iterations = kw.pop("iterations", 4)
        with pytest.raises(ConfigError, match=r"cannot condition on the label.*coin toss") as e:
            if iterations == 1:
                priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=30, n_pool=60)
                tiny_run(tmp_path / name, private=Corpus.from_texts(list(priv.texts), {"category": list(
                    priv.labels["category"])}, name="priv"), public=Corpus.from_texts(list(pub.texts), name="pool"),
                    method="wasp", iterations=1, privacy={"epsilon": 4.0, "delta": 1e-5},
                    generators=[{"backend": "ngram"}], data={"label_values": {"category": ["food", "hotel"]}},
                    evolution={"label_distribution": {"kind": "uniform"}})
            else:
                _unlabelled_run(tmp_path, name, **kw)
        assert "wasp.feedback: votes" in str(e.value)
        assert not (tmp_path / name).exists()


def test_ngram_contrastive_follows_the_examples_only_without_a_label_model() -> None:
    """The n-gram backend's contrastive operation (WASP's prompt): without a public label model the good
    examples are the only label signal, so a model of them joins the mixture (contrastive_boost default 0.5 →
    the measured default); with one it stays 0 (docs/wasp.md: copying them cost accuracy on Banking77)."""
    from privtext.data.labels import LabelInfo
    from privtext.generate import GeneratorContext, build_generator
    from privtext.generate.ngram import UNLABELLED_BOOST

    _, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=10, n_pool=300, topics=("food", "hotel"))
    label = LabelInfo(("category",), ("food",))
    plain = build_generator({"backend": "ngram"}, GeneratorContext(public=Corpus.from_texts(list(pub.texts))))
    labelled = build_generator({"backend": "ngram"}, GeneratorContext(public=pub, label_columns=["category"]))
    assert plain.contrastive_boost(label) == UNLABELLED_BOOST > 0.5
    assert labelled.contrastive_boost(label) == 0.0
    good = [t for t, c in zip(pub.texts, pub.labels["category"], strict=True) if c == "food" and _topic(t)][:8]
    out = plain.contrastive(good, [], label, 200, rng=np.random.default_rng(1))
    named = [_topic(t) for t in out if _topic(t) is not None]
    # the public text is half food, half hotel: without the examples' model about half the named texts are food
    p = stats.binomtest(sum(t == "food" for t in named), len(named), 0.5, alternative="greater").pvalue
    assert p < P_TAIL, f"{sum(t == 'food' for t in named)} of {len(named)}"


def test_shared_pool_with_the_zero_shot_mix_and_output_nearest(tmp_path: Path) -> None:
    """The levers with a shared pool: zero-shot shares of later rounds join the pool (none after the last vote,
    since nothing could label them), and ``output: nearest`` keeps N of the labelled texts — N records either
    way, each pool text at most once."""
    for name, w in [("mix-all", {"zero_shot_fraction": 0.5}),
                    ("mix-nearest", {"zero_shot_fraction": 0.5, "output": "nearest", "oversample": 2.0})]:
        run = _unlabelled_run(tmp_path, name, num_samples=60, wasp={"q": 3, "in_context": 4, **w})
        rd = RunDir(run)
        syn = [json.loads(x) for x in rd.synthetic.read_text().splitlines()]
        assert len(syn) == 60
        last, _ = rd.iteration(3).load_population()
        pool = {t for t, o in zip(last.texts, last.origin, strict=True) if o == "shared"}
        once = {t for t in pool if sum(x == t for x in last.texts) == 3}  # written once, copied to 3 labels
        assert sum(r["text"] in once for r in syn) == len({r["text"] for r in syn} & once)
        r3 = [i for i in last.ids if i.startswith("r3-")]
        if "output" not in w:  # round 3 follows the last vote: no pool text from it
            assert r3 and not any("-p" in i and "@" in i for i in r3)
        else:
            assert any("@" in i for i in r3)


def test_shared_pool_run_resumed_after_a_kill_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    """SIGKILL after the last vote's value reached disk (the pool's labels come from it), after an earlier one, and
    after the last round's checkpoint: ``privtext resume`` then writes the same synthetic set, labels included,
    as an uninterrupted run (reproducible noise, NOT private: for the comparison only)."""
    import os
    import signal
    import subprocess
    import sys

    import yaml

    from privtext.data import write_corpus

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=60, n_pool=200,
                               topics=("food", "hotel", "shop"))
    write_corpus(Corpus.from_texts(list(priv.texts), {"category": list(priv.labels["category"])}, name="priv"),
                 tmp_path / "private.csv")
    write_corpus(Corpus.from_texts(list(pub.texts), name="pool"), tmp_path / "public.csv")

    def cli(*args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PRIVTEXT_QUIET": "1", **({"PRIVTEXT_FAULT": fault} if fault else {})}
        return subprocess.run([sys.executable, "-m", "privtext", *args], capture_output=True, text=True, env=env)

    def config(name: str) -> str:
        cfg = {"method": "wasp", "seed": 3,
               "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                        "label_columns": ["category"], "label_values": {"category": ["food", "hotel", "shop"]}},
               "generator": {"backend": "ngram"}, "embedder": {"backend": "hashing", "dim": 64, "cache": False},
               "privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True},
               "evolution": {"num_samples": 60, "iterations": 4, "label_distribution": {"kind": "uniform"}},
               "wasp": {"q": 3, "in_context": 4}, "output": str(tmp_path / name)}
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        return str(p)

    r = cli("run", config("ref"))
    assert r.returncode == 0, r.stderr
    ref = RunDir(tmp_path / "ref").synthetic.read_bytes()
    for fault in ("after_save:votes/round_002", "after_save:votes/round_001"):
        name = "killed-" + fault.rsplit("_", 1)[-1]
        r = cli("run", config(name), fault=fault)
        assert r.returncode == -signal.SIGKILL, r.stderr
        assert not RunDir(tmp_path / name).synthetic.exists()
        r = cli("resume", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
        assert RunDir(tmp_path / name).synthetic.read_bytes() == ref
    # killed after the last round's checkpoint, before the output: every round is loaded, the pool's labels
    # come from the last voted round's kept histogram
    import shutil

    shutil.copytree(tmp_path / "ref", tmp_path / "late")
    late = RunDir(tmp_path / "late")
    late.synthetic.unlink()
    late.privacy.unlink()
    r = cli("resume", str(tmp_path / "late"))
    assert r.returncode == 0, r.stderr
    assert late.synthetic.read_bytes() == ref
