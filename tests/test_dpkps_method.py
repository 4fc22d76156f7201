"""method: dpkps end to end (tiny runs): the ledger holds exactly the planned events, the prompts name no class,
a resume reloads the releases instead of redrawing them, and the Laplace noise is really in the released values.
Also the Aug-PE baseline with DP-vocabulary prompts (augpe.vocabulary_prompts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.data import Corpus
from privtext.data.vocabulary import vocabulary_from_corpus
from privtext.errors import ConfigError
from privtext.mechanisms.vocabulary import term_histogram
from privtext.methods.dpkps.core import DPKPSOptions, dpkps_event, dpkps_plan
from privtext.privacy.events import event_from_dict, event_key
from privtext.runner import resume_run
from privtext.testing.tinyrun import tiny_run, toy_corpora

SCHEMA = {"category": ["food", "hotel"], "mood": ["good", "bad"]}
OPTS = {"vocab_size": 20, "length": 4, "n_features": 32, "vocabulary_min_count": 3}


def _corpora(n: int = 60) -> tuple[Corpus, Corpus]:
    priv, pool, _ = toy_corpora(rng=np.random.default_rng(5), n_private=n, n_pool=150)
    return priv, Corpus(pool.ids, pool.texts, {}, name="pool")


def _run(tmp: Path, name: str = "r", *, epsilon: float = 6.0, priv: Corpus | None = None, ngram: bool = False,
         **dpkps: Any) -> Path:
    p, pub = _corpora()
    if ngram:  # the offline default generator (tiny_run's scripted one cannot be replaced, only merged into)
        from privtext.config import config_from_dict
        from privtext.data import write_corpus
        from privtext.runner import run_config

        write_corpus(priv or p, tmp / f"{name}.private.csv")
        write_corpus(pub, tmp / f"{name}.public.csv")
        return run_config(config_from_dict({
            "method": "dpkps", "seed": 0, "name": name, "output": str(tmp / name),
            "data": {"private": str(tmp / f"{name}.private.csv"), "public": str(tmp / f"{name}.public.csv"),
                     "label_columns": list(p.label_columns), "label_values": SCHEMA},
            "generator": {"backend": "ngram", "prompt_family": "yelp"},
            "embedder": {"backend": "hashing", "dim": 64, "cache": False},
            "privacy": {"epsilon": epsilon}, "dpkps": {**OPTS, **dpkps},
            "evolution": {"num_samples": 16, "label_distribution": {"kind": "uniform"}}}))
    return tiny_run(tmp / name, private=priv or p, public=pub, method="dpkps", num_samples=16,
                    privacy={"epsilon": epsilon}, data={"label_values": SCHEMA},
                    evolution={"label_distribution": {"kind": "uniform"}}, dpkps={**OPTS, **dpkps})


def _ledger(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "private" / "ledger.jsonl").read_text().splitlines()]


def test_ledger_holds_the_planned_events_and_the_statement_is_pure(tmp_path: Path) -> None:
    run = _run(tmp_path)
    params = DPKPSOptions(epsilon_vocab=1.0, epsilon_kde=5.0, vocab_size=20, length=4, n_features=32)
    led = _ledger(run)
    assert [e["key"] for e in led] == [p.key for p in dpkps_plan(params)]
    events = [event_from_dict(e["event"]) for e in led]
    assert [event_key(e) for e in events] == [event_key(p.event) for p in dpkps_plan(params)]
    import dp_accounting

    assert event_key(dp_accounting.ComposedDpEvent([events[0], dp_accounting.ComposedDpEvent(events[1:])])) == \
        event_key(dpkps_event(params))
    st = json.loads((run / "privacy.json").read_text())
    assert st["private"] is True and st["guarantee"]["kind"] == "pure"
    assert st["guarantee"]["epsilon_vocab"] == pytest.approx(1.0) and st["guarantee"]["epsilon_kde"] == pytest.approx(5)
    assert st["guarantee"]["spent"]["epsilon"] == pytest.approx(6.0)
    assert st["headline"].startswith("pure 6-differential privacy (ε_vocab = 1, ε_kde = 5")
    assert len(st["released"]["dp_vocabulary"]) == 20
    assert st["prompt_audit"]["passed"]
    prompts = [json.loads(line) for line in (run / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == 16 and {p["operation"] for p in prompts} == {"seeded"}  # one call per sequence
    for p in prompts:  # no class in the prompt: neither label metadata nor a label value
        assert "label" not in p.get("meta", {})
        text = json.dumps(p["prompt"])
        assert "hotel" not in text and "good" not in text.replace("goods", "")


def test_resume_reloads_the_releases_and_never_redraws(tmp_path: Path) -> None:
    run = _run(tmp_path)
    rel = sorted((run / "private" / "checkpoints" / "releases").glob("*.npz"))
    before = {p.name: p.read_bytes() for p in rel}
    n_ledger = len(_ledger(run))
    (run / "synthetic.jsonl").unlink()
    (run / "privacy.json").unlink()
    resume_run(run)
    assert {p.name: p.read_bytes() for p in rel} == before
    assert len(_ledger(run)) == n_ledger
    assert (run / "synthetic.jsonl").exists()


@pytest.mark.parametrize("sketch", ["rff", "histogram"])
def test_released_values_carry_the_laplace_noise(tmp_path: Path, sketch: str) -> None:
    """At ε_vocab = 0.05 (b = r/ε = 200) the released counts of the kept terms are far from the exact ones; at
    ε_kde = 0.05 the RFF sketch (exact entries ≤ √2·N) is dominated by noise of scale √2·I/ε, and at ε_kde =
    0.005 the term histogram (exact entries ≤ N = 60) by noise of scale 1/ε = 200. Without the noise in the
    method's path these checks fail (the released counts would be the exact values)."""
    priv, pub = _corpora()
    eps_kde = 0.05 if sketch == "rff" else 0.005
    run = _run(tmp_path, epsilon=0.05 + eps_kde, epsilon_vocab=0.05, epsilon_kde=eps_kde, priv=priv, sketch=sketch)
    rel = run / "private" / "checkpoints" / "releases"
    with np.load(rel / "dpkps_vocabulary.npz") as z:
        idx, noisy = z["indices"], z["noisy_counts"]
    vocab = vocabulary_from_corpus(list(pub.texts), min_count=3, max_terms=5000)
    exact = term_histogram(vocab.matcher().find_all(priv.texts, max_terms=10), len(vocab), 10)[idx]
    # |noisy − exact| for 20 Laplace(200) draws: the median of |X| is 200·ln 2 ≈ 139; P(mean < 20) < 1e-12
    assert np.mean(np.abs(noisy - exact)) > 20
    if sketch == "rff":
        with np.load(rel / "dpkps_kde_m_1.npz") as z:
            noisy_sketch = z["noisy"]
        assert np.abs(noisy_sketch).max() > 10 * np.sqrt(2) * len(priv)  # b = √2·32/0.05 ≈ 905 ≫ √2·60 ≈ 85
    else:
        with np.load(rel / "dpkps_histogram.npz") as z:
            hist = z["noisy"]
        assert hist.shape == (4, 20)  # the 4 label groups × |Ṽ|
        # exact entries are in [0, 60]; P(max of 80 |Laplace(200)| < 300) = (1 − e^{−1.5})^80 < 2e-9
        assert np.abs(hist).max() > 300


def test_budget_forms(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"exceeds privacy\.epsilon"):
        _run(tmp_path, "a", epsilon=5.0, epsilon_vocab=1.0, epsilon_kde=5.0)
    with pytest.raises(ConfigError, match="go together"):
        _run(tmp_path, "b", epsilon_vocab=1.0)
    p, pub = _corpora()
    with pytest.raises(ConfigError, match="pure ε-DP"):
        tiny_run(tmp_path / "c", private=p, public=pub, method="dpkps", privacy={"mu": 1.0},
                 data={"label_values": SCHEMA}, evolution={"label_distribution": {"kind": "uniform"}}, dpkps=OPTS)


def test_dp_label_shares_are_a_laplace_release(tmp_path: Path) -> None:
    p, pub = _corpora()
    run = tiny_run(tmp_path / "dp", private=p, public=pub, method="dpkps", num_samples=16,
                   privacy={"epsilon": 6.0}, data={"label_values": SCHEMA},
                   evolution={"label_distribution": {"kind": "dp", "budget_fraction": 0.1}}, dpkps=OPTS)
    led = _ledger(run)
    assert led[0]["key"] == "labels/histogram"
    assert led[0]["event"] == {"type": "LaplaceDpEvent", "noise_multiplier": pytest.approx(1 / 0.6)}
    st = json.loads((run / "privacy.json").read_text())
    assert st["guarantee"]["spent"]["epsilon"] == pytest.approx(6.0) and set(st["released"]["label_histogram"])


def test_augpe_vocabulary_prompts_baseline(tmp_path: Path) -> None:
    p, pub = _corpora()
    run = tiny_run(tmp_path / "aug", private=p, public=pub, method="augpe", num_samples=12, iterations=2,
                   privacy={"epsilon": 6.0, "delta": 1e-3}, data={"label_values": SCHEMA},
                   evolution={"label_distribution": {"kind": "uniform"}},
                   augpe={"vocabulary_prompts": True, "vocabulary_size": 20, "vocabulary_terms": 4})
    led = _ledger(run)
    assert led[0]["key"] == "vocabulary"
    assert led[0]["event"] == {"type": "LaplaceDpEvent", "noise_multiplier": pytest.approx(1.0)}
    assert [e["mechanism"] for e in led[1:]] == ["dp_nn_vote_histogram"] * 2
    st = json.loads((run / "privacy.json").read_text())
    assert st["guarantee"]["spent"]["epsilon"] <= 6.0 + 1e-9 and st["guarantee"]["spent"]["epsilon"] > 5.5
    terms = set(st["released"]["dp_vocabulary"])
    prompts = [json.loads(line) for line in (run / "prompts.jsonl").read_text().splitlines()]
    seeded = [x for x in prompts if x["operation"] == "seeded"]
    assert seeded and all(set(x["meta"]["keyphrases"]) <= terms and len(x["meta"]["keyphrases"]) == 4
                          for x in seeded)
    assert not any(x["operation"] == "random" for x in prompts)  # no class-topic prompt


def test_keyphrases_file_and_report_section(tmp_path: Path) -> None:
    """keyphrases.jsonl holds each synthetic record's sequence and class; the report shows the released DP
    vocabulary's top terms (by noisy count) and sampled sequences with their class."""
    from privtext.report import build_report

    run = _run(tmp_path)
    syn = [json.loads(x) for x in (run / "synthetic.jsonl").read_text().splitlines()]
    kp = [json.loads(x) for x in (run / "keyphrases.jsonl").read_text().splitlines()]
    prompts = [json.loads(x) for x in (run / "prompts.jsonl").read_text().splitlines()]
    assert [k["id"] for k in kp] == [s["id"] for s in syn]
    assert [(k["category"], k["mood"]) for k in kp] == [(s["category"], s["mood"]) for s in syn]
    assert [k["keyphrases"] for k in kp] == [p["meta"]["keyphrases"] for p in prompts]
    vocab = json.loads((run / "privacy.json").read_text())["released"]["dp_vocabulary"]
    html = build_report(run).read_text()
    assert "DP-KPS keyphrases" in html
    top = max(vocab, key=lambda t: vocab[t])
    bottom = min(vocab, key=lambda t: vocab[t])
    section = html.split("DP-KPS keyphrases", 1)[1]
    assert f"<td class=\"l\">{top}</td>" in section
    assert f"{len(vocab)} terms" in section
    shown = [k for k in kp if "; ".join(k["keyphrases"]) in section]
    assert shown and {(k["category"], k["mood"]) for k in shown} == {(k["category"], k["mood"]) for k in kp}
    assert vocab[top] > vocab[bottom]  # the ranking is by noisy count, not vocabulary order


def test_prompt_audit_catches_private_text_planted_in_a_dpkps_prompt(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The end-of-run audit must be able to fail: a private record copied into one keyphrase sequence (a bug that
    would leak it into a seeded prompt) is flagged in privacy.json; the clean run passes. With the n-gram
    generator and its retrieval (the offline default), whose index is the public corpus only."""
    import privtext.methods.dpkps.method as m

    priv, _pub = _corpora()
    secret = "zorblax quintessa marmaduke lives at 42 wobblestone lane near the old quarry gate"
    priv = Corpus(priv.ids, (secret, *priv.texts[1:]), priv.labels, name=priv.name)
    clean = _run(tmp_path, "clean", priv=priv, ngram=True)
    assert json.loads((clean / "privacy.json").read_text())["prompt_audit"]["passed"] is True
    # the generator retrieved public texts for the prompts (the default), and none of the secret reached the text
    prompts = [json.loads(line) for line in (clean / "prompts.jsonl").read_text().splitlines()]
    assert all("retrieved_public_texts" in p["meta"]["ngram"] for p in prompts)
    assert any(p["meta"]["ngram"]["retrieved_public_texts"] > 0 for p in prompts)
    assert "zorblax" not in (clean / "synthetic.jsonl").read_text()
    real = m.dpkps_sequences

    def leaky(texts: Any, *a: Any, **k: Any) -> Any:
        import dataclasses

        kp = real(texts, *a, **k)
        seqs = list(kp.sequences)
        seqs[0] = (*seqs[0], texts[0])
        return dataclasses.replace(kp, sequences=type(kp.sequences)(seqs) if isinstance(kp.sequences, tuple)
                                   else seqs)

    monkeypatch.setattr(m, "dpkps_sequences", leaky)
    leak = _run(tmp_path, "leak", priv=priv, ngram=True)
    st = json.loads((leak / "privacy.json").read_text())
    assert st["prompt_audit"]["passed"] is False
    assert secret in (leak / "prompts.jsonl").read_text()


def test_few_shot_prompts_show_public_examples(tmp_path: Path) -> None:
    """dpkps.few_shot: n public texts in every seeded prompt (App B.2.5); the audit still passes; the statement
    lists the examples as public."""
    p, pub = _corpora()
    run = _run(tmp_path, few_shot=2)
    prompts = [json.loads(x) for x in (run / "prompts.jsonl").read_text().splitlines()]
    assert len(prompts) == 16 and all(x["meta"]["examples"] == 2 for x in prompts)
    for x in prompts:
        text = json.dumps(x["prompt"])  # chat messages
        assert len([t for t in pub.texts if t in text]) >= 2 and "Example 2:" in text
        assert not any(t in text for t in p.texts)
    st = json.loads((run / "privacy.json").read_text())
    assert st["prompt_audit"]["passed"] and any("few-shot" in t for t in st["treated_as_public"])
