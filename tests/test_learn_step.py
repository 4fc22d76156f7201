"""The learning step the engine and WASP will call (issue 38's integration point, privtext.learn.step): a finished
step is restored on resume and never trained again, its folder is whole or absent, WASP's learners see their own
generator's pairs, the n-gram learner re-estimates, and ``evolution.final``'s split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("transformers")

from privtext.data.population import Population  # noqa: E402
from privtext.errors import ConfigError, PrivacyError  # noqa: E402
from privtext.generate import GeneratorContext, build_generator  # noqa: E402
from privtext.learn import dpo as dpo_mod  # noqa: E402
from privtext.learn.factory import build_learner  # noqa: E402
from privtext.learn.options import LearnOptions  # noqa: E402
from privtext.learn.pairs import ReleasedVotes  # noqa: E402
from privtext.learn.step import DONE, PAIRS, final_counts  # noqa: E402
from privtext.testing.tiny_lm import make_tiny_gpt2  # noqa: E402

from .test_learn_pairs import _keeper, _release  # noqa: E402

LEARN = {"kind": "dpo", "pairs": {"reject_rank": 2},
         "dpo": {"trainer": "native", "beta": 0.1, "lr": 5e-3, "batch_size": 2, "lora_r": 4, "lora_alpha": 8}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(make_tiny_gpt2(tmp_path_factory.mktemp("tiny-step")))


def _generator(tiny: str):
    return build_generator({"backend": "transformers", "model": tiny, "max_new_tokens": 6}, GeneratorContext())


def _candidates(gens: list[str] | None = None) -> Population:
    texts = ["the food was great today .", "the food was cold today .", "the food was slow today .",
             "our waiter was friendly again .", "our waiter was noisy again .", "our waiter was slow again ."]
    n = len(texts)
    return Population([f"t1-{i}" for i in range(n)], texts, np.zeros(n, dtype=np.int64), ["variation"] * n,
                      ["p0"] * 3 + ["p1"] * 3, gens or ["tiny"] * n)


def _votes(tmp_path: Path, values: list[float], **more: list[float]) -> ReleasedVotes:
    keeper = _keeper(tmp_path)
    _release(keeper, "votes/iter_001", noisy=np.asarray(values), **{k: np.asarray(v) for k, v in more.items()})
    return ReleasedVotes.kept(keeper, "votes/iter_001", "noisy")


def test_a_finished_step_is_restored_not_retrained(tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    votes = _votes(tmp_path, [5, 0, 1, 4, 1, 0])
    folder = tmp_path / "iter_001" / "learn"
    gen = _generator(tiny)
    learner = build_learner(LEARN, gen, label_info=lambda g: None, seed=3, name="tiny")
    assert learner is not None and learner.trainer == "native" and learner.backend == "transformers"
    rec = learner.step(1, _candidates(), votes, folder=folder)
    assert rec.pairs == 2 and not rec.resumed and rec.trained["steps"] == 1
    done = json.loads((folder / DONE).read_text())
    assert done["pairs"] == 2 and (folder / "adapter.npz").exists()
    pairs = [json.loads(line) for line in (folder / PAIRS).read_text().splitlines()]
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [
        ("the food was great today .", "the food was slow today ."),
        ("our waiter was friendly again .", "our waiter was noisy again .")]
    trained = [p.detach().clone() for p in dpo_mod.lora_parameters(learner.model)]

    # a resumed process: a fresh generator and learner; the step is restored from the folder, nothing trains
    def no_training(*a, **k):
        raise AssertionError("a finished learning step was trained again")

    monkeypatch.setattr(dpo_mod, "train_dpo", no_training)
    again = build_learner(LEARN, _generator(tiny), label_info=lambda g: None, seed=3, name="tiny")
    assert again is not None
    rec2 = again.step(1, _candidates(), votes, folder=folder)
    assert rec2.resumed and rec2.pairs == 2
    for a, b in zip(trained, dpo_mod.lora_parameters(again.model), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # the generator itself samples from the restored adapter: its model is the adapted one
    assert any("lora_" in n for n, _ in again.generator.model.named_parameters())


def test_a_step_killed_before_its_marker_runs_again(tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    votes = _votes(tmp_path, [5, 0, 1, 4, 1, 0])
    folder = tmp_path / "learn"
    learner = build_learner(LEARN, _generator(tiny), label_info=lambda g: None, seed=3, name="tiny")
    assert learner is not None
    import privtext.learn.adapter as adapter_mod

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(adapter_mod, "save_adapter", killed)
    with pytest.raises(KeyboardInterrupt):
        learner.step(1, _candidates(), votes, folder=folder)
    assert not (folder / DONE).exists()  # no marker: a resume trains this step
    monkeypatch.undo()
    fresh = build_learner(LEARN, _generator(tiny), label_info=lambda g: None, seed=3, name="tiny")
    assert fresh is not None
    assert not fresh.step(1, _candidates(), votes, folder=folder).resumed and (folder / DONE).exists()


def test_wasp_learners_train_on_their_own_generator_and_the_guard_runs(tiny: str, tmp_path: Path) -> None:
    keeper = _keeper(tmp_path)
    _release(keeper, "votes/round_001", nearest=np.asarray([4.0, 0.0, 1.0, 0.0, 3.0, 0.0]),
             furthest=np.asarray([0.0, 3.0, 0.0, 0.0, 0.0, 2.0]))
    hn = ReleasedVotes.kept(keeper, "votes/round_001", "nearest")
    hf = ReleasedVotes.kept(keeper, "votes/round_001", "furthest")
    cands = _candidates(["A", "A", "A", "B", "B", "B"])
    a = build_learner(LEARN, _generator(tiny), label_info=lambda g: None, seed=1, name="A")
    assert a is not None
    got = a.pairs(1, cands, hn, furthest=hf)
    assert [(p.generator, p.chosen, p.rejected) for p in got] == [
        ("A", "the food was great today .", "the food was cold today .")]

    class Guard:  # finds a private record no source explains in one text, as the run's guard would
        def hits(self, text, line):
            return "great" in text, False, False

    with pytest.raises(PrivacyError, match=r"preference pair 0 \(chosen\) holds private text \(a whole private"):
        a.step(1, cands, hn, folder=tmp_path / "A", furthest=hf, guard=Guard(), lines=10)
    assert not (tmp_path / "A" / DONE).exists()


def test_the_ngram_learner_and_the_options(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    public = [f"the {rng.choice(['soup', 'cake'])} was {rng.choice(['good', 'bad'])} ." for _ in range(50)]
    gen = build_generator({"backend": "ngram", "order": 3}, _ngram_ctx(public))
    learner = build_learner({"kind": "ngram_counts", "ngram": {"share": 0.2}}, gen, label_info=lambda g: None, seed=0)
    assert learner is not None
    base = gen.lm
    rec = learner.step(0, _candidates(["ngram"] * 6), _votes(tmp_path, [5, 0, 0, 0, 0, 0]), folder=tmp_path / "l")
    assert rec.trained == {"texts": 1, "copies": 10, "public_texts": 50} and gen.lm is not base
    assert build_learner({"kind": "none"}, gen, label_info=lambda g: None, seed=0) is None
    with pytest.raises(ConfigError, match="lm or transformers"):
        build_learner({"kind": "dpo"}, gen, label_info=lambda g: None, seed=0)
    with pytest.raises(ConfigError, match="ngram generator"):
        build_learner({"kind": "ngram_counts"}, object(), label_info=lambda g: None, seed=0)
    assert LearnOptions().kind == "none" and LearnOptions().dpo.beta == 0.01 and LearnOptions().dpo.epochs == 1


def _ngram_ctx(public: list[str]) -> GeneratorContext:
    from privtext.data.corpus import Corpus

    return GeneratorContext(public=Corpus.from_texts(public, {}, name="public"))


def test_final_counts_split() -> None:
    c = np.array([5, 4, 0])
    assert [x.tolist() for x in final_counts(c, "population")] == [[5, 4, 0], [0, 0, 0]]
    assert [x.tolist() for x in final_counts(c, "model")] == [[0, 0, 0], [5, 4, 0]]
    assert [x.tolist() for x in final_counts(c, "both")] == [[3, 2, 0], [2, 2, 0]]
    with pytest.raises(ConfigError, match="population, model or both"):
        final_counts(c, "all")
