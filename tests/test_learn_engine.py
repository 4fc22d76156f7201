"""Learning wired into the evolution loop (issue 38): real runs with the small lm generator (trained on the toy
public text) and the hashing embedder, reproducible noise so that runs can be compared byte for byte.

* the configuration check refuses combinations that cannot work before a run folder exists, naming the key;
* post-processing: a learning run's ledger and privacy.json releases equal those of the same run without
  learning; only the learning settings are added to the parameters; the steps did train;
* resume: a run killed inside a learning step (or in the next iteration's release) and resumed writes the same
  synthetic set, ledger and adapters as an uninterrupted one, trains no finished step again, draws no new noise;
* planted faults: a private record placed where the pair builder reads candidates stops the run (PrivacyError),
  and so does an exact (unreleased) histogram handed to the learning step;
* ``evolution.final: model | both``: the output is written by the trained generator from the public prompts.
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

pytest.importorskip("torch")
pytest.importorskip("peft")

from privtext.atomicio import read_jsonl
from privtext.config import config_from_dict
from privtext.data import Corpus, write_corpus
from privtext.errors import ConfigError, PrivacyError

WORDS = ("the card was declined again at checkout please help my account login fails after reset the app "
         "crashes when i open settings refund for a double charge on my bill thanks").split()

LEARN = {"kind": "dpo", "pairs": {"reject_rank": 2},
         "dpo": {"beta": 0.1, "lr": 5e-3, "batch_size": 4, "lora_r": 4, "lora_alpha": 8, "threads": 1}}


def _corpus(n: int, tag: str, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        g = int(rng.integers(2))
        words = [WORDS[int(j)] for j in rng.integers(0, 16 + 14 * g, size=int(rng.integers(6, 12)))]
        texts.append(f"{' '.join(words)} {tag}{i}")
        labels.append("billing" if g else "access")
    return Corpus.from_texts(texts, {"topic": labels})


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("learn-data")
    write_corpus(_corpus(60, "priv", 1), d / "private.csv")
    write_corpus(_corpus(200, "pub", 2), d / "public.csv")
    return {"private": str(d / "private.csv"), "public": str(d / "public.csv"), "lm_cache": str(d / "lm-cache")}


def _raw(data: dict[str, str], out: Path, *, learn: dict[str, Any] | None = None, final: str = "population",
         generator: dict[str, Any] | None = None, method: str = "augpe", iterations: int = 3) -> dict[str, Any]:
    gen = generator or {"backend": "lm", "size": "tiny", "max_length": 48, "epochs": 2.0, "train_tokens": None,
                        "validation": 0, "precision": "fp32", "torch_threads": 1, "max_new_tokens": 16,
                        "cache_dir": data["lm_cache"]}
    evo: dict[str, Any] = {"num_samples": 8, "iterations": iterations, "variations": 3, "selection": "rank"}
    if learn is not None:
        evo["learn"] = learn
    if final != "population":
        evo["final"] = final
    return {"method": method, "seed": 5,
            "data": {"private": data["private"], "public": data["public"], "label_columns": ["topic"]},
            "generator": gen, "embedder": {"backend": "hashing", "dim": 64, "cache": False},
            "privacy": {"epsilon": 4.0, "delta": 1e-4, "reproducible_noise": True},
            "evolution": evo, "output": str(out)}


def _run(raw: dict[str, Any]) -> Path:
    from privtext.runner import run_config

    return run_config(config_from_dict(raw))


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PRIVTEXT_QUIET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
         **(env or {})}
    return subprocess.run([sys.executable, "-m", "privtext", *args], capture_output=True, text=True, env=e)


def _plant_top_voted(monkeypatch: pytest.MonkeyPatch, record: str) -> None:
    """Planted fault: ``record`` put in place of the top-voted candidate of every learning step, where the pair
    builder takes its chosen texts."""
    from privtext.engine import learning as mod

    real = mod.EngineLearning.step

    def planted(self: Any, t: int, pop: Any, histogram: np.ndarray, state: Any, folder: Path) -> None:
        pop.texts[int(np.argmax(histogram))] = record
        return real(self, t, pop, histogram, state, folder)

    monkeypatch.setattr(mod.EngineLearning, "step", planted)


def _ledger(run: Path) -> list[dict[str, Any]]:
    """The ledger's records without their wall-clock time."""
    return [{k: v for k, v in r.items() if k != "time"} for r in read_jsonl(run / "private" / "ledger.jsonl")]


def _statement(run: Path) -> dict[str, Any]:
    return json.loads((run / "privacy.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def plain(data: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(_raw(data, tmp_path_factory.mktemp("plain") / "run"))


@pytest.fixture(scope="module")
def learning(data: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(_raw(data, tmp_path_factory.mktemp("learning") / "run", learn=LEARN))


# ------------------------------------------------------------------ the configuration check


@pytest.mark.parametrize("learn,generator,method,final,words", [
    ({"kind": "dpo"}, {"backend": "ngram"}, "augpe", "population", ["evolution.learn.kind", "generator.backend"]),
    ({"kind": "ngram_counts"}, None, "augpe", "population", ["evolution.learn.kind", "generator.backend", "'lm'"]),
    ({"kind": "dpo"}, None, "wasp", "model", ["evolution.final", "WASP"]),
    ({"kind": "dpo"}, None, "dpkps", "population", ["evolution.learn.kind", "dpkps", "no votes"]),
    ({"kind": "dpo"}, None, "dpft", "population", ["evolution.learn.kind", "dpft", "no votes"]),
    ({"kind": "none"}, None, "augpe", "model", ["evolution.final", "evolution.learn.kind"]),
    ({"kind": "dpo", "pairs": {"rejct_rank": 3}}, None, "augpe", "population", ["evolution.learn", "rejct_rank"]),
])
def test_the_config_check_refuses_what_cannot_work_before_a_run_folder(
        data: dict[str, str], tmp_path: Path, learn: dict[str, Any], generator: dict[str, Any] | None, method: str,
        final: str, words: list[str]) -> None:
    out = tmp_path / "run"
    raw = _raw(data, out, learn=learn, generator=generator, method=method, final=final)
    with pytest.raises(ConfigError) as e:
        _run(raw)
    for w in words:
        assert w in str(e.value)
    assert not out.exists()


# ------------------------------------------------------------------ post-processing


def test_learning_adds_no_release_and_states_its_settings(plain: Path, learning: Path) -> None:
    assert _ledger(learning) == _ledger(plain)
    assert [r["key"] for r in read_jsonl(learning / "private" / "ledger.jsonl")] == \
        ["votes/iter_000", "votes/iter_001", "votes/iter_002"]
    a, b = _statement(plain), _statement(learning)
    assert b["releases"] == a["releases"]
    assert b["guarantee"] == a["guarantee"]
    assert {k: v for k, v in b["parameters"].items() if k not in ("learn", "final")} == a["parameters"]
    assert "learn" not in a["parameters"] and b["parameters"]["learn"]["kind"] == "dpo"
    assert "post-processing" in b["parameters"]["learn"]["privacy"] and b["parameters"]["final"] == "population"
    # the steps trained (iterations 0 and 1; none after the last iteration with final: population) ...
    ck = learning / "private" / "checkpoints"
    done = [json.loads((ck / f"iter_{t:03d}" / "learn" / "learn.json").read_text()) for t in (0, 1)]
    assert all(d["pairs"] > 0 and d["trained"]["steps"] >= 1 for d in done)
    assert not (ck / "iter_002" / "learn").exists()
    # ... and moved the generator: iteration 1's variations are written by the model step 0 trained
    assert (plain / "synthetic.jsonl").read_bytes() != (learning / "synthetic.jsonl").read_bytes()
    metrics = json.loads((learning / "private" / "metrics.json").read_text())
    assert metrics["stages"]["learning"]["calls"] == 2


def test_an_exact_histogram_handed_to_the_learning_step_stops_the_run(
        data: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted fault: the engine hands the learning step a histogram that is not the kept release (the exact
    counts would differ the same way): ReleasedVotes.checked refuses it."""
    from privtext.engine import learning as mod

    real = mod.EngineLearning.step

    def exact(self: Any, t: int, pop: Any, histogram: np.ndarray, state: Any, folder: Path) -> None:
        return real(self, t, pop, np.asarray(histogram) + 1.0, state, folder)

    monkeypatch.setattr(mod.EngineLearning, "step", exact)
    with pytest.raises(PrivacyError, match="not the value kept"):
        _run(_raw(data, tmp_path / "run", learn=LEARN, iterations=2))


def test_a_private_record_where_the_pair_builder_reads_stops_the_run(
        data: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted fault: a private record put in place of the top-voted candidate of iteration 0, where the pair
    builder takes its chosen texts: the guard check stops the step before a trainer sees it."""
    from privtext.data import load_corpus

    _plant_top_voted(monkeypatch, load_corpus(data["private"], label_columns=["topic"]).texts[7])
    with pytest.raises(PrivacyError, match="preference pair"):
        _run(_raw(data, tmp_path / "run", learn=LEARN, iterations=2))
    assert not (tmp_path / "run" / "privacy.json").exists()


def test_privtext_run_exits_3_when_a_privacy_check_stops_it(
        data: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same planted record through ``privtext run``: exit 3 (AUDIT_FAILED, the code of a failed prompt or
    output audit; it was the generic 2) with a one-line message that names the failed check; no synthetic data
    and no privacy.json are written."""
    from typer.testing import CliRunner

    from privtext import cli
    from privtext.cli.app import AUDIT_FAILED, app
    from privtext.data import load_corpus

    record = load_corpus(data["private"], label_columns=["topic"]).texts[7]
    _plant_top_voted(monkeypatch, record)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(_raw(data, tmp_path / "run", learn=LEARN, iterations=2)), encoding="utf-8")
    cli._mount()
    res = CliRunner().invoke(app, ["run", str(cfg)])
    assert res.exit_code == AUDIT_FAILED == 3, res.output
    lines = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "privacy check failed" in lines[0] and "preference pair" in lines[0], res.output
    assert record not in res.output and "Traceback" not in res.output
    assert not (tmp_path / "run" / "privacy.json").exists() and not (tmp_path / "run" / "synthetic.jsonl").exists()


# ------------------------------------------------------------------ resume


def _adapters(run: Path) -> dict[str, bytes]:
    ck = run / "private" / "checkpoints"
    return {str(p.relative_to(ck)): p.read_bytes() for p in sorted(ck.glob("iter_*/learn/**/adapter.npz"))}


@pytest.mark.parametrize("fault", ["learn:iter_001", "after_record:votes/iter_002"])
def test_kill_and_resume_equals_an_uninterrupted_learning_run(
        data: dict[str, str], tmp_path: Path, learning: Path, fault: str) -> None:
    run = tmp_path / "run"
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(_raw(data, run, learn=LEARN)), encoding="utf-8")
    r = _cli("run", str(cfg), env={"PRIVTEXT_FAULT": fault})
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    ck = run / "private" / "checkpoints"
    assert (ck / "iter_000" / "learn" / "learn.json").exists()
    if fault.startswith("learn"):
        assert (ck / "iter_001" / "COMPLETE").exists() and not (ck / "iter_001" / "learn" / "learn.json").exists()
    before = {t: (ck / f"iter_{t:03d}" / "histogram.npy").read_bytes() for t in (0, 1)}
    r = _cli("resume", str(run))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (run / "synthetic.jsonl").read_bytes() == (learning / "synthetic.jsonl").read_bytes()
    assert _ledger(run) == _ledger(learning)
    assert [rec["key"] for rec in read_jsonl(run / "private" / "ledger.jsonl")] == \
        ["votes/iter_000", "votes/iter_001", "votes/iter_002"]
    assert {t: (ck / f"iter_{t:03d}" / "histogram.npy").read_bytes() for t in (0, 1)} == before
    assert _adapters(run) == _adapters(learning)


def test_secpe_learns_from_its_post_processed_centre_votes(data: dict[str, str], tmp_path: Path) -> None:
    """SecPE: pairs from the histogram its kept clustering release votes (ReleasedVotes.post_processed); same
    ledger and releases as without learning."""
    from privtext.data import load_corpus

    priv = load_corpus(data["private"], label_columns=["topic"])
    texts = [f"{t} mail me at user{i}@example.com" if i % 3 == 0 else t for i, t in enumerate(priv.texts)]
    path = tmp_path / "private.csv"
    write_corpus(Corpus.from_texts(texts, {"topic": list(priv.labels["topic"])}), path)
    runs = {}
    for name, learn in (("plain", None), ("learning", LEARN)):
        raw = _raw({**data, "private": str(path)}, tmp_path / name, learn=learn, method="secpe", iterations=2)
        raw["privacy"] = {"secret": {"p": 1e-3, "r": 2e-2}, "reproducible_noise": True}
        runs[name] = _run(raw)
    assert _ledger(runs["plain"]) == _ledger(runs["learning"])
    assert _statement(runs["plain"])["releases"] == _statement(runs["learning"])["releases"]
    done = json.loads((runs["learning"] / "private" / "checkpoints" / "iter_000" / "learn" / "learn.json").read_text())
    assert done["kind"] == "dpo" and done["pairs"] > 0
    assert _statement(runs["learning"])["parameters"]["learn"]["kind"] == "dpo"


@pytest.fixture(scope="module")
def wasp_runs(data: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wasp")
    return {name: _run(_raw(data, root / name, learn=learn, method="wasp"))
            for name, learn in (("plain", None), ("learning", LEARN))}


def test_wasp_learns_from_its_nearest_and_furthest_releases(wasp_runs: dict[str, Path]) -> None:
    """WASP: pairs from the kept Top-Q nearest/furthest histograms of each voted round but the last, one learner per
    generator; the same ledger and releases as without learning; the next round is written by the trained model."""
    runs = wasp_runs
    assert _ledger(runs["plain"]) == _ledger(runs["learning"])
    assert [r["key"] for r in read_jsonl(runs["learning"] / "private" / "ledger.jsonl")] == \
        ["votes/round_000", "votes/round_001"]
    a, b = _statement(runs["plain"]), _statement(runs["learning"])
    assert a["releases"] == b["releases"]
    assert {k: v for k, v in b["parameters"].items() if k not in ("learn", "final")} == a["parameters"]
    ck = runs["learning"] / "private" / "checkpoints"
    done = [json.loads((ck / f"iter_{t:03d}" / "learn" / "gen_0" / "learn.json").read_text()) for t in (0, 1)]
    assert all(d["pairs"] > 0 and d["trained"]["steps"] >= 1 for d in done)
    assert not (ck / "iter_002" / "learn").exists()
    assert (runs["plain"] / "synthetic.jsonl").read_bytes() != (runs["learning"] / "synthetic.jsonl").read_bytes()


def test_wasp_kill_in_a_learning_step_and_resume(data: dict[str, str], tmp_path: Path,
                                                 wasp_runs: dict[str, Path]) -> None:
    run = tmp_path / "run"
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(_raw(data, run, learn=LEARN, method="wasp")), encoding="utf-8")
    r = _cli("run", str(cfg), env={"PRIVTEXT_FAULT": "learn:iter_001"})
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert not (run / "private" / "checkpoints" / "iter_001" / "learn" / "gen_0" / "learn.json").exists()
    r = _cli("resume", str(run))
    assert r.returncode == 0, r.stderr[-2000:]
    ref = wasp_runs["learning"]
    assert (run / "synthetic.jsonl").read_bytes() == (ref / "synthetic.jsonl").read_bytes()
    assert _ledger(run) == _ledger(ref)
    assert _adapters(run) == _adapters(ref) and len(_adapters(ref)) == 2


def _mixed(data: dict[str, str], out: Path, learn: dict[str, Any] | None) -> dict[str, Any]:
    """WASP with two generators it weights: the tiny lm (named lm) and a 3-gram (named 3g)."""
    raw = _raw(data, out, learn=learn, method="wasp")
    raw["generators"] = [{**raw.pop("generator"), "name": "lm"}, {"backend": "ngram", "order": 3, "name": "3g"}]
    del raw["evolution"]["num_samples"]
    raw["synthesis"] = {"num_samples": 32}  # 16 a round: Top-Q pairs for the lm in each round
    return raw


@pytest.mark.parametrize("learn,words", [
    ({"kind": "dpo"}, ["generators[1].backend", "'ngram'", "evolution.learn.generators", "['lm']"]),
    ({"kind": "dpo", "generators": ["lm", "4g"]}, ["evolution.learn.generators", "'4g'", "lm, 3g"]),
    ({"kind": "dpo", "generators": ["3g"]}, ["generators[1].backend", "'ngram'"]),
    ({"kind": "dpo", "generators": []}, ["evolution.learn", "generators"]),
])
def test_a_mixed_wasp_names_the_generators_that_learn(data: dict[str, str], tmp_path: Path,
                                                      learn: dict[str, Any], words: list[str]) -> None:
    """kind: dpo cannot train the 3-gram: the check says so and points to evolution.learn.generators; a name that
    is not a generator of the run, or an empty list, is refused naming it; nothing is written."""
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as e:
        _run(_mixed(data, out, learn))
    for w in words:
        assert w in str(e.value), str(e.value)
    assert not out.exists()


def test_evolution_learn_generators_needs_several_generators(data: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"evolution.learn.generators.*one \(generator:\)"):
        _run(_raw(data, out, learn={**LEARN, "generators": ["lm"]}))
    assert not out.exists()


def test_a_mixed_wasp_trains_the_named_generator_and_leaves_the_other(data: dict[str, str], tmp_path: Path) -> None:
    """generators: [lm] beside a 3-gram: the lm learns from the Top-Q pairs of its own samples (gen_0), the 3-gram
    has no learner (no gen_1), the ledger is that of the same run without learning, and privacy.json states the
    learning generators among the post-processing settings."""
    plain = _run(_mixed(data, tmp_path / "plain", None))
    run = _run(_mixed(data, tmp_path / "learning", {**LEARN, "generators": ["lm"]}))
    assert _ledger(plain) == _ledger(run)
    ck = run / "private" / "checkpoints"
    done = [json.loads((ck / f"iter_{t:03d}" / "learn" / "gen_0" / "learn.json").read_text()) for t in (0, 1)]
    assert sum(d["pairs"] for d in done) > 0 and all((d["pairs"] > 0) == (d["trained"]["steps"] >= 1) for d in done)
    assert not list(ck.glob("iter_*/learn/gen_1"))
    st = _statement(run)
    assert st["parameters"]["learn"]["generators"] == ["lm"]
    assert st["releases"] == _statement(plain)["releases"]
    assert (plain / "synthetic.jsonl").read_bytes() != (run / "synthetic.jsonl").read_bytes()


# ------------------------------------------------------------------ the n-gram analogue and final: model


def test_ngram_counts_run_states_the_same_releases(data: dict[str, str], tmp_path: Path) -> None:
    gen = {"backend": "ngram", "order": 3}
    a = _run(_raw(data, tmp_path / "a", generator=gen, iterations=2))
    b = _run(_raw(data, tmp_path / "b", generator=gen, iterations=2, learn={"kind": "ngram_counts"}))
    assert _ledger(a) == _ledger(b) and _statement(a)["releases"] == _statement(b)["releases"]
    done = json.loads((b / "private" / "checkpoints" / "iter_000" / "learn" / "learn.json").read_text())
    assert done["kind"] == "ngram_counts" and done["trained"]
    assert (a / "synthetic.jsonl").read_bytes() != (b / "synthetic.jsonl").read_bytes()


@pytest.mark.parametrize("final", ["model", "both"])
def test_final_model_writes_the_output_from_the_trained_generator(
        data: dict[str, str], tmp_path: Path, learning: Path, final: str) -> None:
    from privtext.data import load_corpus

    run = _run(_raw(data, tmp_path / "run", learn=LEARN, final=final))
    ck = run / "private" / "checkpoints"
    assert (ck / "iter_002" / "learn" / "learn.json").exists()  # the last iteration's step runs: the model writes
    out = load_corpus(run / "synthetic.jsonl", label_columns=["topic"])
    ref = load_corpus(learning / "synthetic.jsonl", label_columns=["topic"])
    assert len(out) == len(ref) and sorted(out.labels["topic"]) == sorted(ref.labels["topic"])
    shared = set(out.texts) & set(ref.texts)
    if final == "model":
        assert len(shared) < len(out) // 2
    else:
        assert len(shared) >= len(out) // 2
    assert _ledger(run) == _ledger(learning)
    assert _statement(run)["parameters"]["final"] == final
