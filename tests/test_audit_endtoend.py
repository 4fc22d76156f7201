"""End-to-end attacks on the shared outputs (privtext.audit.endtoend).

Default suite: the pieces — the attacker reads only shareable files, its guesses never look at the inclusion bits,
the reconstruction attacker and the candidate sets. ``pytest -m audit``: whole runs on demo-like corpora (the
n-gram generator, the hashing embedder) — each correct method stays below its claim, and each broken fixture
(private text in prompts; noise removed on a small corpus with distinctive canaries; SecPE with a detector that
misses the canary secret in some holders) exceeds it; and ``privtext audit --end-to-end`` exits 1 on a fault. Aug-PE
learning from its released votes (issue 38: the n-gram's re-estimated counts; DPO on the lm generator, also
``slow``) stays below its claim."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.audit.endtoend import (
    Canary,
    SharedOutputs,
    guessing_rules,
    membership_bound,
    ngram_scores,
    rare_public_words,
    rare_suffix,
    read_shared,
    reconstruct,
    released_numbers,
    secret_candidates,
)


def test_read_shared_never_reads_the_private_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "private").mkdir(parents=True)
    (run / "private" / "diagnostics.json").write_text(json.dumps({"x": "SECRETWORD"}))
    (run / "synthetic.jsonl").write_text(json.dumps({"id": "s", "text": "hello world"}) + "\n")
    (run / "prompts.jsonl").write_text(json.dumps({"prompt": [{"role": "user", "content": "write kind text"}]}) + "\n")
    (run / "privacy.json").write_text(json.dumps({"released": {"dp_vocabulary": {"Zorvaxil": 2.5}}}))
    (run / "report.html").write_text("<html><style>.a{}</style><body><p>Report &amp; words</p></body></html>")
    shared = read_shared(run)
    text = " ".join(shared.all_text)
    assert "SECRETWORD" not in text and "hello world" in text and "write kind text" in text
    assert "Report & words" in text and ".a{}" not in text
    assert released_numbers(json.loads((run / "privacy.json").read_text())) == {"zorvaxil": 2.5}


def test_guesses_depend_on_the_scores_only() -> None:
    """The same scores give the same guesses whatever the inclusion bits (ties aside, broken by OS entropy), so
    the bound is valid; a perfect score separates the canaries and the bound reaches the closed form."""
    m = 64
    inc = np.array([i % 2 == 0 for i in range(m)])
    cans = [Canary(index=i, text=f"t{i}", labels={}, included=bool(inc[i]), suffix="a b") for i in range(m)]
    scores = {"ngram": inc.astype(float), "embedding": np.arange(m, dtype=float),
              "perplexity": -np.arange(m, dtype=float)}
    rng = secrets.SystemRandom()
    rules = guessing_rules(scores, rng)
    flipped = guessing_rules(scores, rng)
    assert [r[2].tolist() for r in rules] == [r[2].tolist() for r in flipped]
    lb, results = membership_bound(cans, scores, delta=0.0, confidence=0.95, rng=rng)
    best = max(results, key=lambda r: r.lower_bound)
    assert best.score == "ngram" and best.correct == best.guesses == m and lb > 2.0


def test_ngram_score_needs_the_suffix_not_a_word_of_it() -> None:
    rng = secrets.SystemRandom()
    suffix = rare_suffix(rng)
    c = Canary(index=0, text=f"prefix {suffix}.", labels={}, included=True, suffix=suffix)
    one = suffix.split()[0]
    assert ngram_scores([c], SharedOutputs([f"text with {one} only"], [], [])) < 0.5
    assert ngram_scores([c], SharedOutputs([], [f"copied: prefix {suffix}."], [])) == 1.0


def test_rare_public_words_are_public_and_absent_from_private() -> None:
    from privtext.data.corpus import Corpus

    pub = Corpus.from_texts(["alpha zorvaxil beta"] * 3 + ["alpha beta gamma"] * 30 + ["quenmol once"])
    priv = Corpus.from_texts(["alpha beta", "gamma delta"])
    assert rare_public_words(pub, priv) == ["zorvaxil"]


def test_reconstruction_attacker() -> None:
    """It guesses the candidate it finds for each slot (by its own exchange and line, however the number is
    written), and guesses at random — right with probability p — where it finds none."""
    size = 1000
    cands = [secret_candidates(j, size) for j in range(3)]
    assert len(set(cands[0])) == size and not set(cands[0]) & set(cands[1])
    cs = [Canary(index=j, text="", labels={}, included=True, secret=cands[j][7 * j + 1], candidates=cands[j])
          for j in range(3)]
    shown = f"call {cands[0][1]} now; or on {cands[1][8][6:].replace('-', ' - ')} later"
    got = reconstruct(cs, SharedOutputs([shown], [], []), secrets.SystemRandom())
    assert got[0] and got[1]
    rng = secrets.SystemRandom()
    hits = sum(reconstruct(cs[2:], SharedOutputs([], [], []), rng)[0] for _ in range(200))
    assert hits <= 5  # p = 0.001 per guess


# ---------------------------------------------------------------------------------------- whole runs (audit)


def _demo(folder: Path, method: str, *, n_private: int = 60, rare: int = 0, **over: Any) -> dict[str, Any]:
    from privtext.demo import demo_config, make_demo_corpora, write_demo_files
    from privtext.testing.audit_faults import with_rare_terms

    folder.mkdir(parents=True, exist_ok=True)
    private, public, patients = make_demo_corpora(n_private=n_private, n_patients=max(3, n_private // 8))
    if rare:
        public = with_rare_terms(public, rare)
    write_demo_files(folder, private, public, patients)
    raw = demo_config(folder, "secpe" if method == "secpe" else "augpe")
    raw["method"] = method
    raw["embedder"] = {"backend": "hashing", "dim": 256, "cache": False}
    raw["synthesis"]["num_samples"] = 40
    raw["evolution"]["iterations"] = 2
    raw["evolution"]["variation"]["mask_prob_schedule"] = [0.5, 0.3]
    for k, v in over.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and isinstance(raw.get(k), dict) else v
    return raw


@pytest.mark.audit
def test_augpe_stays_below_its_claim_and_private_text_in_prompts_exceeds_it(tmp_path: Path) -> None:
    from privtext.audit.endtoend import audit_end_to_end
    from privtext.testing.audit_faults import PrivateTextInPrompts, private_texts_of

    raw = _demo(tmp_path / "c", "augpe", privacy={"epsilon": 2.0, "delta": 1e-5})
    ok = audit_end_to_end(raw, workdir=tmp_path / "ok")
    assert ok.passed and ok.lower_bound <= ok.claim == pytest.approx(2.0, rel=1e-3), ok.lines()
    assert ok.details["best_possible"] > ok.claim  # enough canaries that a perfect attack would have exceeded it
    fault = PrivateTextInPrompts()
    with fault.active():
        bad = audit_end_to_end(raw, workdir=tmp_path / "bad",
                               on_canaries=lambda cs: fault.prime(private_texts_of(cs, [])))
    assert not bad.passed and bad.lower_bound > bad.claim, bad.lines()


def _learned(res: Any) -> list[dict[str, Any]]:
    """The learning steps of the audited run (its private/checkpoints/iter_NNN/learn/learn.json)."""
    ck = Path(res.run_dir) / "private" / "checkpoints"
    return [json.loads(f.read_text()) for f in sorted(ck.glob("iter_*/learn/learn.json"))]


@pytest.mark.audit
def test_augpe_learning_from_its_votes_stays_below_its_claim(tmp_path: Path) -> None:
    """Issue 38: the end-to-end audit of a learning run (the 4-gram's counts re-estimated from the released votes
    after iteration 0; iteration 1 is written by the re-estimated model) stays below the claim, with enough
    canaries that a perfect attack would exceed it; the result names the learning kind."""
    from privtext.audit.endtoend import audit_end_to_end

    raw = _demo(tmp_path / "c", "augpe", privacy={"epsilon": 2.0, "delta": 1e-5})
    raw["evolution"]["learn"] = {"kind": "ngram_counts"}
    res = audit_end_to_end(raw, workdir=tmp_path / "w")
    assert res.passed and res.lower_bound <= res.claim == pytest.approx(2.0, rel=1e-3), res.lines()
    assert res.details["best_possible"] > res.claim and res.details["learn"] == "ngram_counts"
    assert "learning from its votes (ngram_counts)" in res.lines()[0]
    steps = _learned(res)
    assert [d["iteration"] for d in steps] == [0] and steps[0]["trained"]["texts"] > 0  # it did learn


@pytest.mark.audit
def test_augpe_rerank_learning_stays_below_its_claim(tmp_path: Path) -> None:
    """``kind: rerank``: iterations 1 and 2 keep the best of 2 samples under a preference model fitted to the
    released pairs; the audit stays below the claim, with enough canaries that a perfect attack would exceed it."""
    from privtext.audit.endtoend import audit_end_to_end

    raw = _demo(tmp_path / "c", "augpe", privacy={"epsilon": 2.0, "delta": 1e-5})
    raw["evolution"]["learn"] = {"kind": "rerank"}
    res = audit_end_to_end(raw, workdir=tmp_path / "w")
    assert res.passed and res.lower_bound <= res.claim == pytest.approx(2.0, rel=1e-3), res.lines()
    assert res.details["best_possible"] > res.claim and res.details["learn"] == "rerank"
    steps = _learned(res)
    assert steps and all(d["kind"] == "rerank" for d in steps) and steps[-1]["trained"]["fitted"]  # it did learn


@pytest.mark.audit
@pytest.mark.slow
def test_augpe_dpo_learning_stays_below_its_claim(tmp_path: Path) -> None:
    """The same with DPO on LoRA adapters of the (tiny) lm generator, trained on the demo's public notes."""
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from privtext.audit.endtoend import audit_end_to_end

    raw = _demo(tmp_path / "c", "augpe", privacy={"epsilon": 2.0, "delta": 1e-5})
    raw["generator"] = {"backend": "lm", "size": "tiny", "max_length": 64, "torch_threads": 1,
                        "cache_dir": str(tmp_path / "lm-cache")}
    raw["evolution"]["learn"] = {"kind": "dpo", "pairs": {"reject_rank": 2}, "dpo": {"threads": 1}}
    res = audit_end_to_end(raw, workdir=tmp_path / "w")
    assert res.passed and res.lower_bound <= res.claim, res.lines()
    assert res.details["best_possible"] > res.claim and res.details["learn"] == "dpo"
    steps = _learned(res)
    assert [d["iteration"] for d in steps] == [0] and steps[0]["pairs"] > 0 and steps[0]["trained"]["steps"] >= 1


@pytest.mark.audit
def test_dpkps_stays_below_and_noise_removed_on_a_small_corpus_exceeds(tmp_path: Path) -> None:
    """A small private corpus, a public vocabulary with rare terms (so each canary carries terms no other record
    brings), DP-KPS counting each document's highest-idf terms: with the noise removed, the released vocabulary
    names exactly the included canaries."""
    from privtext.audit.endtoend import audit_end_to_end
    from privtext.testing.audit_faults import scaled_noise

    raw = _demo(tmp_path / "c", "dpkps", n_private=10, rare=200, privacy={"epsilon": 1.0},
                dpkps={"vocab_size": 400, "length": 6, "vocab_selection": "idf"})
    raw["synthesis"], raw["evolution"] = {"num_samples": 40}, {}
    ok = audit_end_to_end(raw, workdir=tmp_path / "ok", canaries=64)
    assert ok.passed, ok.lines()
    with scaled_noise(0.0):
        bad = audit_end_to_end(raw, workdir=tmp_path / "bad", canaries=64)
    assert not bad.passed and bad.lower_bound > 1.0, bad.lines()
    assert bad.details["statement_private"]  # the run still claims its guarantee: only the audit sees the fault


@pytest.mark.audit
def test_secpe_reconstruction_stays_below_r_and_a_detector_that_misses_holders_exceeds_it(tmp_path: Path) -> None:
    from privtext.audit.endtoend import audit_end_to_end
    from privtext.testing.audit_faults import DetectorMisses

    raw = _demo(tmp_path / "c", "secpe", n_private=120)
    raw["synthesis"]["num_samples"] = 80
    raw["evolution"]["iterations"] = 4
    raw["evolution"]["variation"]["mask_prob_schedule"] = [0.5, 0.35, 0.25, 0.2]
    ok = audit_end_to_end(raw, workdir=tmp_path / "ok", holders=5)
    assert ok.passed and ok.details["successes"] <= 1, ok.lines()
    fault = DetectorMisses()
    with fault.active():
        bad = audit_end_to_end(raw, workdir=tmp_path / "bad", holders=5, on_canaries=fault.prime)
    assert not bad.passed and bad.lower_bound > bad.claim, bad.lines()


@pytest.mark.audit
def test_cli_end_to_end_prints_the_bound_beside_the_claim(tmp_path: Path) -> None:
    import yaml
    from typer.testing import CliRunner

    from privtext import cli
    from privtext.cli.app import app
    from privtext.testing.audit_faults import PrivateTextInPrompts

    cli._mount()
    raw = _demo(tmp_path / "c", "wasp", privacy={"epsilon": 2.0, "delta": 1e-5})
    cfg = tmp_path / "wasp.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["audit", "--end-to-end", str(cfg), "--workdir", str(tmp_path / "w"),
                                   "--no-report"])
    assert res.exit_code == 0, res.output
    assert "ε lower bound" in res.output and "(2, 1e-05)-DP" in res.output and "pass" in res.output
    fault = PrivateTextInPrompts(texts=["x"], per_prompt=4)  # primed below with the corpus the audit writes

    def prime_from_disk() -> None:
        texts = [json.loads(x)["text"] for f in (tmp_path / "w2" / "private").glob("corpus-*.jsonl")
                 for x in f.read_text().splitlines()]
        fault.prime(texts)

    (tmp_path / "w2").mkdir()
    import privtext.audit.endtoend as e2e

    original = e2e._write_private

    def write_then_prime(*a: Any, **k: Any) -> None:
        original(*a, **k)
        prime_from_disk()

    e2e._write_private = write_then_prime  # type: ignore[assignment]
    try:
        with fault.active():
            res = CliRunner().invoke(app, ["audit", "--end-to-end", str(cfg), "--workdir", str(tmp_path / "w2"),
                                           "--json", "--no-report"])
    finally:
        e2e._write_private = original  # type: ignore[assignment]
    assert res.exit_code == 1, res.output
    out = json.loads(res.output)
    assert out["passed"] is False and out["lower_bound"] > out["claim"]
