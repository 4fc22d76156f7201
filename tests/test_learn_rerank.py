"""``evolution.learn.kind: rerank`` (privtext.learn.rerank): a preference model fitted to the released pairs keeps
the best of k samples.

* the fit recovers a planted preference direction near the Bayes accuracy, and is antisymmetric (swapping every
  pair negates w);
* with ``rerank.labels``: the sparse label features equal a dense construction; per-column terms recover a
  preference that flips with the label (one w is at chance); best-of-k scores each sample for its call's label; the
  learner tags each pair with its own group's label and restores the tags;
* best-of-k keeps, for each text asked for, the highest-scoring of its k samples (checked against a brute force on
  the same generator draws) and passes every call through until a model is installed;
* the learner fits what the released votes prefer (on-topic public texts above filler when the votes put them on
  top, below when they do not) and a second learner restores it from the finished folder;
* in a run: the ledger and privacy.json's releases equal those of the same run without learning, the settings are
  stated as post-processing, and the generator writes k samples a text after the first step;
* planted faults: a private record where the pair builder reads, and an exact histogram, stop the run;
* resume: a run killed in a step (or in the next release) and resumed equals an uninterrupted one, draws no noise;
* WASP refuses the kind before a run folder exists.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privtext.atomicio import read_jsonl
from privtext.config import config_from_dict
from privtext.data import write_corpus
from privtext.errors import ConfigError, PrivacyError
from privtext.learn.options import RerankOptions
from privtext.learn.rerank import RerankingGenerator, fit_preference
from privtext.testing.tinyrun import toy_corpora

pytest.importorskip("sklearn")

FILLER = {"thing", "place", "stuff", "went", "there", "okay", "maybe", "again", "really", "time", "day", "way"}
RERANK = {"kind": "rerank", "rerank": {"min_pairs": 5}}


# ------------------------------------------------------------------ the preference model


def _unit_pairs(rng: np.random.Generator, n: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """n pairs (a, b) of random unit vectors in R^dim."""
    a = rng.normal(size=(n, dim))
    b = rng.normal(size=(n, dim))
    return a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)


def _pairs(rng: np.random.Generator, w_star: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n pairs of unit vectors; the first is chosen with probability σ(8 w*·(a − b)) (Bradley-Terry). Returns the
    differences chosen − rejected and the Bayes rule's accuracy on them."""
    a, b = _unit_pairs(rng, n, len(w_star))
    p = 1 / (1 + np.exp(-8 * (a - b) @ w_star))
    first = rng.random(n) < p
    d = np.where(first[:, None], a - b, b - a)
    return d, float(np.mean(np.maximum(p, 1 - p)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_fit_recovers_a_planted_preference_and_is_antisymmetric(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w_star = rng.normal(size=16)
    w_star /= np.linalg.norm(w_star)
    d, _ = _pairs(rng, w_star, 400)
    w, fit = fit_preference(d)
    assert fit["pairs_total"] == 400 and fit["C"] in RerankOptions().cs
    assert w @ w_star / np.linalg.norm(w) > 0.85  # the direction (a flipped label would give a negative cosine)
    held, bayes = _pairs(rng, w_star, 4000)
    acc = float(np.mean(held @ w > 0))
    assert acc > bayes - 0.04, (acc, bayes)  # 4 000 pairs: one s.e. of acc is below 0.008
    w_swapped, _ = fit_preference(-d)  # every pair the other way round
    np.testing.assert_allclose(w_swapped, -w, atol=1e-6)


def test_the_fit_refuses_too_few_or_broken_pairs() -> None:
    with pytest.raises(ConfigError, match="at least 5 pairs"):
        fit_preference(np.ones((4, 3)))
    bad = np.ones((6, 3))
    bad[2, 1] = np.nan
    with pytest.raises(ConfigError, match="non-finite"):
        fit_preference(bad)
    with pytest.raises(ValueError, match="cs must hold positive"):
        RerankOptions(cs=[1.0, -2.0])


# ------------------------------------------------------------------ the label a text is written for


def _labelled_pairs(rng: np.random.Generator, u: np.ndarray, n: int) -> tuple[np.ndarray, list[Any]]:
    """n pairs (as :func:`_pairs`) whose preferred direction depends on the label: +u for category A, −u for
    category B, whatever the stars (a preference one w cannot hold). Returns the differences and each pair's
    LabelInfo."""
    from privtext.data.labels import LabelInfo

    infos = [LabelInfo(("category", "stars"), (c, s)) for c in ("A", "B") for s in ("1", "5")]
    a, b = _unit_pairs(rng, n, len(u))
    lab = [infos[i] for i in rng.integers(0, 4, size=n)]
    sign = np.asarray([1.0 if x.values[0] == "A" else -1.0 for x in lab])
    first = rng.random(n) < 1 / (1 + np.exp(-8 * sign * ((a - b) @ u)))
    return np.where(first[:, None], a - b, b - a), lab


def test_label_tags_and_the_sparse_design_match_a_dense_construction() -> None:
    from privtext.data.labels import LabelInfo
    from privtext.learn.rerank import design, label_tags

    info = LabelInfo(("category", "stars"), ("Restaurants", "5.0"))
    assert label_tags(info, "none") == ()
    assert label_tags(info, "columns") == ("category=Restaurants", "stars=5.0")
    assert label_tags(info, "groups") == ("category=Restaurants & stars=5.0",)
    assert label_tags(None, "columns") == () and label_tags(LabelInfo((), ()), "groups") == ()
    with pytest.raises(ConfigError, match="none, columns or groups"):
        label_tags(info, "rows")
    rng = np.random.default_rng(0)
    d = rng.normal(size=(5, 3))
    tags = [("x",), ("y", "x"), (), ("z",), ("y",)]
    vocab = ("x", "y")  # z has no term: its pair sits in the shared block only
    dense = np.zeros((5, 9))
    for i, t in enumerate(tags):
        dense[i, :3] = d[i]
        for j, a in enumerate(vocab):
            if a in t:
                dense[i, 3 * (j + 1):3 * (j + 2)] = d[i]
    np.testing.assert_array_equal(design(d, tags, vocab).toarray(), dense)
    np.testing.assert_array_equal(design(d, tags, ()), d)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_column_terms_recover_a_preference_that_flips_with_the_label(seed: int) -> None:
    """A preference of +u for category A and −u for B: one w orders held-out pairs at chance, the per-column model
    near the Bayes rule, and the wrapper's direction for each label points along ±u."""
    from privtext.learn.rerank import design, label_tags

    rng = np.random.default_rng(seed)
    u = rng.normal(size=12)
    u /= np.linalg.norm(u)
    d, lab = _labelled_pairs(rng, u, 800)
    held, held_lab = _labelled_pairs(rng, u, 4000)
    w1, _ = fit_preference(d)
    assert abs(float(np.mean(held @ w1 > 0)) - 0.5) < 0.05  # one w: chance (4 000 pairs: s.e. 0.008)
    tags = [label_tags(x, "columns") for x in lab]
    vocab = tuple(sorted({a for t in tags for a in t}))
    w, _ = fit_preference(design(d, tags, vocab))
    wrapped = RerankingGenerator(_scripted(), _hashing(12), 2)
    wrapped.install(w, vocab, "columns")
    acc = float(np.mean([h @ wrapped.direction(x) > 0 for h, x in zip(held, held_lab, strict=True)]))
    assert acc > 0.75, acc  # the Bayes rule orders about 0.80 of them
    for x in {x.values: x for x in held_lab}.values():
        v = wrapped.direction(x)
        sign = 1 if x.values[0] == "A" else -1
        assert sign * (v @ u) / np.linalg.norm(v) > 0.8, (x.values, v @ u)
    np.testing.assert_allclose(wrapped.direction(None), w[:12])  # an unconditioned call: the shared term alone
    with pytest.raises(ConfigError, match="does not split"):
        wrapped.install(w[:-1], vocab, "columns")


def test_best_of_k_scores_each_sample_for_the_label_it_is_written_for() -> None:
    """Two labels whose terms point at opposite words: the same parents, asked for with each label, keep the
    samples that label's direction ranks first (a brute force on the same draws)."""
    from privtext.data.labels import LabelInfo
    from privtext.generate import VariationSpec

    emb = _hashing()
    parents = ["pizza pasta great", "room bed awful", "thing stuff okay", "went great pizza"]
    spec = VariationSpec(kind="paraphrase", mask_prob=0.5)
    food = np.asarray(emb.embed(["pizza pasta great"])[0], dtype=np.float64)
    hotel = np.asarray(emb.embed(["room bed awful"])[0], dtype=np.float64)
    wrapped = RerankingGenerator(_scripted(), emb, 3)
    wrapped.install(np.concatenate([np.zeros_like(food), food, hotel]), ("kind=food", "kind=hotel"), "columns")
    every = _scripted().variation(parents * 3, None, spec, rng=np.random.default_rng(7))
    e = np.asarray(emb.embed(every), dtype=np.float64)
    n = len(parents)
    for value, v in (("food", food), ("hotel", hotel)):
        kept = wrapped.variation(parents, LabelInfo(("kind",), (value,)), spec, rng=np.random.default_rng(7))
        s = e @ v
        assert kept == [every[int(np.argmax(s[[j * n + i for j in range(3)]])) * n + i] for i in range(n)]
    a = wrapped.variation(parents, LabelInfo(("kind",), ("food",)), spec, rng=np.random.default_rng(7))
    b = wrapped.variation(parents, LabelInfo(("kind",), ("hotel",)), spec, rng=np.random.default_rng(7))
    assert a != b  # the label changed what was kept


# ------------------------------------------------------------------ best of k


def _scripted() -> Any:
    from privtext.generate import GeneratorContext, build_generator

    words = ["pizza", "pasta", "room", "bed", "thing", "stuff", "went", "okay", "great", "awful"]
    return build_generator({"backend": "scripted", "vocabulary": words}, GeneratorContext())


def _hashing(dim: int = 32) -> Any:
    from privtext.embed import build_embedder

    return build_embedder({"backend": "hashing", "dim": dim, "cache": False})



@pytest.mark.parametrize("k", [2, 3])
def test_best_of_k_keeps_each_texts_highest_scoring_sample(k: int) -> None:
    from privtext.generate import VariationSpec

    emb = _hashing()
    parents = ["pizza pasta great", "room bed awful", "thing stuff okay", "went great pizza"]
    spec = VariationSpec(kind="paraphrase", mask_prob=0.5)
    wrapped = RerankingGenerator(_scripted(), emb, k)
    plain = wrapped.variation(parents, None, spec, rng=np.random.default_rng(7))  # nothing installed: passed through
    assert plain == _scripted().variation(parents, None, spec, rng=np.random.default_rng(7))
    w = np.asarray(emb.embed(["pizza pasta room bed"])[0], dtype=np.float64)
    wrapped.install(w)
    before = wrapped.inner.stats.texts
    kept = wrapped.variation(parents, None, spec, rng=np.random.default_rng(7))
    assert wrapped.inner.stats.texts - before == k * len(parents)  # k samples a text, one call
    every = _scripted().variation(parents * k, None, spec, rng=np.random.default_rng(7))  # the same draws
    s = np.asarray(emb.embed(every), dtype=np.float64) @ w
    n = len(parents)
    for i in range(n):
        mine = [every[j * n + i] for j in range(k)]  # the k samples of parent i
        assert kept[i] == mine[int(np.argmax(s[[j * n + i for j in range(k)]]))]
    assert np.mean(np.asarray(emb.embed(kept)) @ w) >= np.mean(s)
    drawn = wrapped.random(None, 5, rng=np.random.default_rng(3))
    pool = _scripted().random(None, 5 * k, rng=np.random.default_rng(3))
    sp = np.asarray(emb.embed(pool), dtype=np.float64) @ w
    assert drawn == [pool[int(np.argmax(sp[[j * 5 + i for j in range(k)]])) * 5 + i] for i in range(5)]
    assert wrapped.backend == "scripted"  # every other attribute is the generator's
    with pytest.raises(ConfigError, match="at least 2"):
        RerankingGenerator(_scripted(), emb, 1)


# ------------------------------------------------------------------ in a run


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    priv, pool, _ = toy_corpora(rng=np.random.default_rng(0), n_private=80)
    d = tmp_path_factory.mktemp("rerank-data")
    write_corpus(priv, d / "private.csv")
    write_corpus(pool, d / "public.csv")
    return {"private": str(d / "private.csv"), "public": str(d / "public.csv"), "pool": pool, "priv": priv}


def _raw(c: dict[str, Any], out: Path, *, learn: dict[str, Any] | None = None, method: str = "augpe"
         ) -> dict[str, Any]:
    words = sorted({w.strip(".,").lower() for t in c["pool"].texts for w in t.split()} - {""})
    evo: dict[str, Any] = {"iterations": 3, "variations": 3}
    if learn is not None:
        evo["learn"] = learn
    return {"method": method, "seed": 3,
            "data": {"private": c["private"], "public": c["public"], "label_columns": ["category", "mood"]},
            "generator": {"backend": "scripted", "vocabulary": words},
            "embedder": {"backend": "hashing", "dim": 64, "cache": False},
            "privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True},
            "synthesis": {"num_samples": 30}, "evolution": evo, "output": str(out)}


def _run(raw: dict[str, Any]) -> Path:
    from privtext.runner import run_config

    return run_config(config_from_dict(raw))


def _ledger(run: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "time"} for r in read_jsonl(run / "private" / "ledger.jsonl")]


def _statement(run: Path) -> dict[str, Any]:
    return json.loads((run / "privacy.json").read_text(encoding="utf-8"))


def _weights(run: Path) -> dict[int, np.ndarray]:
    out = {}
    for t in range(3):
        f = run / "private" / "checkpoints" / f"iter_{t:03d}" / "learn" / "rerank.npz"
        if f.exists():
            with np.load(f) as z:
                out[t] = np.asarray(z["w"])
    return out


@pytest.fixture(scope="module")
def plain(corpora: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(_raw(corpora, tmp_path_factory.mktemp("plain") / "run"))


@pytest.fixture(scope="module")
def reranked(corpora: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(_raw(corpora, tmp_path_factory.mktemp("rerank") / "run", learn=RERANK))


def test_a_rerank_run_adds_no_release_and_writes_k_samples_a_text(plain: Path, reranked: Path) -> None:
    assert _ledger(reranked) == _ledger(plain)
    a, b = _statement(plain), _statement(reranked)
    assert b["releases"] == a["releases"] and b["guarantee"] == a["guarantee"]
    assert {k: v for k, v in b["parameters"].items() if k not in ("learn", "final")} == a["parameters"]
    learn = b["parameters"]["learn"]
    assert learn["kind"] == "rerank" and learn["rerank"]["candidates"] == 2 and "dpo" not in learn
    assert "post-processing" in learn["privacy"]
    ck = reranked / "private" / "checkpoints"
    done = [json.loads((ck / f"iter_{t:03d}" / "learn" / "learn.json").read_text()) for t in (0, 1)]
    assert all(d["kind"] == "rerank" and d["trained"]["fitted"] for d in done)
    # the default gives each value of each label column (category, mood) a term of its own
    assert all(d["trained"]["labels"] == "columns" and d["trained"]["label_terms"] >= 2 for d in done)
    with np.load(ck / "iter_001" / "learn" / "rerank.npz") as z:
        terms = done[1]["trained"]["label_terms"]
        assert len(z["w"]) == 64 * (1 + terms) and len(z["tags"]) == done[1]["pairs"]
        assert all(str(t).count("category=") == 1 and str(t).count("mood=") == 1 for t in z["tags"])
    assert done[1]["trained"]["pairs_total"] == done[0]["pairs"] + done[1]["pairs"]  # refitted on every pair so far
    assert not (ck / "iter_002" / "learn").exists()
    # iteration 0 is written before any vote; iterations 1 and 2 ask for twice the variations
    ops = [json.loads(line)["operation"] for line in (plain / "prompts.jsonl").read_text().splitlines()]
    ops_rr = [json.loads(line)["operation"] for line in (reranked / "prompts.jsonl").read_text().splitlines()]
    assert ops_rr.count("random") == ops.count("random") > 0
    assert ops_rr.count("variation") == 2 * ops.count("variation") > 0
    assert (plain / "synthetic.jsonl").read_bytes() != (reranked / "synthetic.jsonl").read_bytes()


def _voted_siblings(corpora: dict[str, Any], tmp_path: Path, good: list[np.ndarray], seed: int) -> tuple[Any, ...]:
    """Ten parents, each with three on-topic and three filler variations, once in each label group g (one entry of
    ``good`` a group); group g's released votes are 5·good[g] + N(0, 1) noise. Returns the on-topic and filler
    public texts, the population and the kept votes."""
    from privtext.data.population import Population
    from privtext.learn.pairs import ReleasedVotes

    from .test_learn_pairs import _keeper, _release

    texts = corpora["pool"].texts
    off = [t for t in texts if FILLER & set(t.lower().strip(".").split())]
    on = [t for t in texts if t not in off]
    one = [t for g in range(10) for t in on[3 * g:3 * g + 3] + off[3 * g:3 * g + 3]]
    cand, n = one * len(good), len(one) * len(good)
    pop = Population([f"t1-{i}" for i in range(n)], cand, np.repeat(np.arange(len(good)), len(one)).astype(np.int64),
                     ["variation"] * n, [f"p{i // 6}" for i in range(n)], ["scripted"] * n)
    rng = np.random.default_rng(seed)
    keeper = _keeper(tmp_path)
    _release(keeper, "votes/iter_001", noisy=5 * np.concatenate(good) + rng.normal(0, 1, n))
    return on, off, pop, ReleasedVotes.kept(keeper, "votes/iter_001", "noisy")


def _learner(learn: dict[str, Any], emb: Any, label_info: Any) -> Any:
    from privtext.learn.factory import build_learner

    out = build_learner(learn, RerankingGenerator(_scripted(), emb, 2), label_info=label_info, seed=1,
                        name="scripted", embedder=emb)
    assert out is not None
    return out


ON_TOP, FILLER_ON_TOP = np.tile([1.0, 1, 1, 0, 0, 0], 10), np.tile([0.0, 0, 0, 1, 1, 1], 10)


@pytest.mark.parametrize("on_top", [True, False])
def test_the_learner_fits_what_the_released_votes_prefer_and_restores_it(
        corpora: dict[str, Any], tmp_path: Path, on_top: bool) -> None:
    """Ten parents, each with three on-topic and three filler variations; the released votes put the on-topic ones
    on top (or, the control, the filler ones). The model fitted to the pairs must score on-topic public texts above
    filler ones (below, for the control): chosen and rejected swapped anywhere in the learner fails one of the
    two. A second learner given the finished folder restores the same w without fitting."""
    from privtext.learn.rerank import NPZ

    on, off, pop, votes = _voted_siblings(corpora, tmp_path, [ON_TOP if on_top else FILLER_ON_TOP], 4)
    emb = _hashing(64)
    learn = {"kind": "rerank", "rerank": {"min_pairs": 5}, "pairs": {"reject_rank": 4, "pairs_per_group": 3}}

    def learner() -> Any:
        return _learner(learn, emb, lambda g: None)

    first = learner()
    rec = first.step(1, pop, votes, folder=tmp_path / "learn")
    assert rec.pairs == 30 and rec.trained["fitted"] and not rec.resumed
    w = first.generator.w
    s_on, s_off = np.asarray(emb.embed(on)) @ w, np.asarray(emb.embed(off)) @ w
    auc = float(np.mean(s_on[:, None] > s_off[None, :]))
    assert (auc > 0.9) if on_top else (auc < 0.1), auc
    again = learner()
    rec2 = again.step(1, pop, votes, folder=tmp_path / "learn")
    assert rec2.resumed and rec2.pairs == 30
    np.testing.assert_array_equal(again.generator.w, w)
    np.testing.assert_array_equal(again.history, first.history)
    assert (tmp_path / "learn" / NPZ).exists()


def test_the_learner_tags_each_pair_with_its_own_groups_label(corpora: dict[str, Any], tmp_path: Path) -> None:
    """The same ten parents' siblings in two label groups, whose released votes disagree: group 0 puts on-topic
    texts on top, group 1 filler. One w cannot hold both; the fitted model must rank on-topic first for group 0's
    label and last for group 1's. A pair tagged with another group's label fails it; a second learner restores
    the same model (tags included) from the folder."""
    from privtext.data.labels import LabelInfo

    on, off, pop, votes = _voted_siblings(corpora, tmp_path, [ON_TOP, FILLER_ON_TOP], 5)
    emb = _hashing(64)
    labels = [LabelInfo(("kind", "stars"), ("food", "5")), LabelInfo(("kind", "stars"), ("hotel", "5"))]
    learn = {"kind": "rerank", "rerank": {"min_pairs": 5, "labels": "columns"},
             "pairs": {"reject_rank": 4, "pairs_per_group": 3}}

    def learner() -> Any:
        return _learner(learn, emb, lambda g: labels[g])

    first = learner()
    rec = first.step(1, pop, votes, folder=tmp_path / "learn")
    assert rec.pairs == 60 and rec.trained["label_terms"] == 3  # kind=food, kind=hotel, stars=5
    gen = first.generator
    e_on, e_off = np.asarray(emb.embed(on)), np.asarray(emb.embed(off))
    for info, on_top in zip(labels, (True, False), strict=True):
        v = gen.direction(info)
        auc = float(np.mean((e_on @ v)[:, None] > (e_off @ v)[None, :]))
        assert (auc > 0.9) if on_top else (auc < 0.1), (info.values, auc)
    again = learner()
    assert again.step(1, pop, votes, folder=tmp_path / "learn").resumed
    assert again.tags == first.tags and again.generator.vocab == gen.vocab
    np.testing.assert_array_equal(again.generator.w, gen.w)


def test_a_private_record_where_the_rerank_pair_builder_reads_stops_the_run(
        corpora: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.engine import learning as mod

    record = corpora["priv"].texts[5]
    real = mod.EngineLearning.step

    def planted(self: Any, t: int, pop: Any, histogram: np.ndarray, state: Any, folder: Path) -> None:
        pop.texts[int(np.argmax(histogram))] = record
        return real(self, t, pop, histogram, state, folder)

    monkeypatch.setattr(mod.EngineLearning, "step", planted)
    with pytest.raises(PrivacyError, match="preference pair"):
        _run(_raw(corpora, tmp_path / "run", learn=RERANK))
    assert not (tmp_path / "run" / "privacy.json").exists()


def test_an_exact_histogram_handed_to_the_rerank_step_stops_the_run(
        corpora: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privtext.engine import learning as mod

    real = mod.EngineLearning.step

    def exact(self: Any, t: int, pop: Any, histogram: np.ndarray, state: Any, folder: Path) -> None:
        return real(self, t, pop, np.asarray(histogram) + 1.0, state, folder)

    monkeypatch.setattr(mod.EngineLearning, "step", exact)
    with pytest.raises(PrivacyError, match="not the value kept"):
        _run(_raw(corpora, tmp_path / "run", learn=RERANK))


@pytest.mark.parametrize("fault", ["learn:iter_001", "after_record:votes/iter_002"])
def test_kill_and_resume_equals_an_uninterrupted_rerank_run(
        corpora: dict[str, Any], tmp_path: Path, reranked: Path, fault: str) -> None:
    run = tmp_path / "run"
    cfg = tmp_path / "run.yaml"
    raw = _raw(corpora, run, learn=RERANK)
    cfg.write_text(yaml.safe_dump(raw), encoding="utf-8")
    env = {**os.environ, "PRIVTEXT_QUIET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "PRIVTEXT_FAULT": fault}
    r = subprocess.run([sys.executable, "-m", "privtext", "run", str(cfg)], capture_output=True, text=True, env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    ck = run / "private" / "checkpoints"
    if fault.startswith("learn"):
        assert (ck / "iter_001" / "COMPLETE").exists() and not (ck / "iter_001" / "learn" / "learn.json").exists()
    before = {t: (ck / f"iter_{t:03d}" / "histogram.npy").read_bytes() for t in (0, 1)}
    del env["PRIVTEXT_FAULT"]
    r = subprocess.run([sys.executable, "-m", "privtext", "resume", str(run)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (run / "synthetic.jsonl").read_bytes() == (reranked / "synthetic.jsonl").read_bytes()
    assert _ledger(run) == _ledger(reranked)
    assert {t: (ck / f"iter_{t:03d}" / "histogram.npy").read_bytes() for t in (0, 1)} == before
    mine, ref = _weights(run), _weights(reranked)
    assert mine.keys() == ref.keys() == {0, 1}
    for t in mine:
        np.testing.assert_array_equal(mine[t], ref[t])


def test_wasp_refuses_rerank_before_a_run_folder(corpora: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "run"
    raw = _raw(corpora, out, learn=RERANK, method="wasp")
    with pytest.raises(ConfigError, match="rerank") as e:
        _run(raw)
    assert "WASP" in str(e.value) and not out.exists()


def test_final_model_releases_best_of_k_samples_from_the_public_prompts(
        corpora: dict[str, Any], tmp_path: Path, plain: Path) -> None:
    """``final: model`` with ``kind: rerank``: the step also runs after the last iteration, and the release is
    written from the public prompts (RANDOM_API), k samples for each released text; same ledger."""
    raw = _raw(corpora, tmp_path / "run", learn=RERANK)
    raw["evolution"]["final"] = "model"
    run = _run(raw)
    ck = run / "private" / "checkpoints"
    assert json.loads((ck / "iter_002" / "learn" / "learn.json").read_text())["trained"]["fitted"]
    n = sum(1 for line in (run / "synthetic.jsonl").read_text().splitlines() if line.strip())
    ops = [json.loads(line)["operation"] for line in (plain / "prompts.jsonl").read_text().splitlines()]
    mine = [json.loads(line)["operation"] for line in (run / "prompts.jsonl").read_text().splitlines()]
    assert n == 30 and mine.count("random") == ops.count("random") + 2 * n
    assert _ledger(run) == _ledger(plain) and _statement(run)["parameters"]["final"] == "model"
