"""The contract every Generator backend passes: ngram, scripted, transformers (tiny GPT-2), openai (local server),
lm (a tiny GPT-2 trained here on the public corpus)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privtext.atomicio import PromptLog
from privtext.data import Corpus
from privtext.errors import BackendError, ConfigError, DataError
from privtext.generate import Generator, GeneratorContext, LabelInfo, VariationSpec, build_generator
from privtext.testing import OpenAIServer

BACKENDS = ["ngram", "scripted", "transformers", "openai", "lm"]
LABEL = LabelInfo(("label1", "label2"), ("Category: Food", "Stars: 5.0"))
TEXTS = ["the soup was hot and the bread was fresh .", "our room was clean but the bed was small .",
         "great coffee , friendly staff , will come back !"]


def public_corpus() -> Corpus:
    food = ["soup", "bread", "pasta", "coffee", "pizza", "salad"]
    hotel = ["room", "bed", "lobby", "pool", "shower", "view"]
    adjs = ["great", "cold", "fresh", "small", "clean", "noisy", "friendly", "slow"]
    texts, l1, l2 = [], [], []
    for i, (w, a, b) in enumerate(itertools.product(food + hotel, adjs, adjs[::-1])):
        cat = "Category: Food" if w in food else "Category: Hotel"
        texts.append(f"The {w} was {a} and the staff were {b}. We would come back for the {w}.")
        l1.append(cat)
        l2.append(f"Stars: {1 + i % 5}.0")
    return Corpus.from_texts(texts, {"label1": l1, "label2": l2}, name="contract-public")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("transformers")
    from privtext.testing import make_tiny_gpt2

    return str(make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2")))


@pytest.fixture(scope="module")
def lm_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    return str(tmp_path_factory.mktemp("lm-cache"))


@pytest.fixture(scope="module")
def server() -> OpenAIServer:
    with OpenAIServer(api_key="sk-contract-key") as srv:
        yield srv


@pytest.fixture(scope="module")
def public() -> Corpus:
    return public_corpus()


@pytest.fixture(params=BACKENDS)
def make(request: pytest.FixtureRequest, public: Corpus, monkeypatch: pytest.MonkeyPatch):
    """A factory: make(prompt_log) -> a fresh generator of the parametrised backend."""
    backend = request.param
    if backend == "ngram":
        cfg = {"backend": "ngram", "order": 3}
    elif backend == "scripted":
        cfg = {"backend": "scripted"}
    elif backend == "transformers":
        path = request.getfixturevalue("tiny_model")
        cfg = {"backend": "transformers", "model": path, "max_new_tokens": 6, "batch_size": 4,
               "torch_threads": 1}
    elif backend == "lm":  # trained once per module (the first make), then a cache hit
        cfg = {"backend": "lm", "size": "tiny", "max_length": 64, "epochs": 2.0, "train_tokens": None,
               "validation": 0, "precision": "fp32", "torch_threads": 1, "max_new_tokens": 24,
               "cache_dir": request.getfixturevalue("lm_cache")}
    else:
        srv = request.getfixturevalue("server")
        monkeypatch.setenv("PRIVTEXT_TEST_KEY", "sk-contract-key")
        cfg = {"backend": "openai", "model": "test-model", "base_url": srv.url, "api_key_env": "PRIVTEXT_TEST_KEY",
               "backoff_base": 0.01, "timeout": 10}
    made = []

    def factory(log: PromptLog | None = None) -> Generator:
        ctx = GeneratorContext(public=public, label_columns=("label1", "label2"), prompt_log=log)
        g = build_generator(cfg, ctx)
        made.append(g)
        return g

    factory.backend = backend  # type: ignore[attr-defined]
    yield factory
    for g in made:
        g.close()


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_is_a_generator_with_name_and_stats(make) -> None:
    g = make()
    assert isinstance(g, Generator)
    assert isinstance(g.name, str) and g.name
    assert g.stats.texts == 0 and g.stats.prompts == 0


def test_random_count_types_and_stats(make, any_seed: int) -> None:
    log = PromptLog(None)
    g = make(log)
    out = g.random(None, 5, rng=_rng(any_seed))
    assert isinstance(out, list) and len(out) == 5
    assert all(isinstance(t, str) and t.strip() for t in out)
    assert g.stats.texts == 5 and g.stats.prompts == 5
    assert log.count == 5 and all(r["operation"] == "random" for r in log.memory)


def test_zero_and_empty_requests_send_nothing(make) -> None:
    log = PromptLog(None)
    g = make(log)
    assert g.random(LABEL, 0, rng=_rng(0)) == []
    assert g.variation([], LABEL, VariationSpec(), rng=_rng(0)) == []
    assert g.seeded([], "review", rng=_rng(0)) == []
    assert g.contrastive(["a good one"], [], None, 0, rng=_rng(0)) == []
    assert log.count == 0 and g.stats.prompts == 0


@pytest.mark.parametrize("bad_n", [-1, 1.5, True, "3", None])
def test_bad_n_is_a_config_error(make, bad_n) -> None:
    g = make()
    with pytest.raises(ConfigError, match="n must be a non-negative integer"):
        g.random(None, bad_n, rng=_rng(0))
    with pytest.raises(ConfigError, match="n must be"):
        g.contrastive(["good"], ["bad"], None, bad_n, rng=_rng(0))


def test_bad_inputs_are_typed_errors(make) -> None:
    g = make()
    with pytest.raises(ConfigError, match="rng"):
        g.random(None, 1, rng=0)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="single str"):
        g.variation("one text, not a list", None, VariationSpec(), rng=_rng(0))
    with pytest.raises(DataError, match=r"texts\[1\]"):
        g.variation(["ok", 3], None, VariationSpec(), rng=_rng(0))  # type: ignore[list-item]
    with pytest.raises(DataError, match="keyphrases"):
        g.seeded(["not", "nested"], "review", rng=_rng(0))
    with pytest.raises(DataError, match="non-empty"):
        g.seeded([["fine", "  "]], "review", rng=_rng(0))
    with pytest.raises(ConfigError, match="doc_type"):
        g.seeded([["a"]], "", rng=_rng(0))
    with pytest.raises(DataError, match="good example"):
        g.contrastive([], ["bad"], None, 2, rng=_rng(0))
    with pytest.raises(ConfigError, match="label"):
        g.random(("label1", "x"), 1, rng=_rng(0))  # type: ignore[arg-type]
    assert g.stats.prompts == 0


@pytest.mark.parametrize("mask_prob", [-0.1, 1.5, float("nan"), "0.5"])
def test_mask_prob_out_of_range(make, mask_prob) -> None:
    with pytest.raises(ConfigError, match="mask_prob"):
        VariationSpec(kind="blank", mask_prob=mask_prob)
    with pytest.raises(ConfigError, match="mask_prob"):
        make().variation(TEXTS, None, {"kind": "blank", "mask_prob": mask_prob}, rng=_rng(0))


def test_unknown_variation_kind() -> None:
    with pytest.raises(ConfigError, match="kind"):
        VariationSpec(kind="rewrite")  # type: ignore[arg-type]


def test_label_passes_through_to_every_prompt(make) -> None:
    log = PromptLog(None)
    g = make(log)
    out = g.random(LABEL, 3, rng=_rng(3))
    assert len(out) == 3
    g.variation(TEXTS, LABEL, VariationSpec(kind="paraphrase"), rng=_rng(4))
    g.contrastive(TEXTS[:2], TEXTS[2:], LABEL, 2, rng=_rng(5))
    assert log.count == 3 + 3 + 2
    for rec in log.memory:
        text = rec["prompt"] if isinstance(rec["prompt"], str) else " ".join(m["content"] for m in rec["prompt"])
        assert "Category: Food" in text and "Stars: 5.0" in text
        assert rec["meta"]["label"] == {"label1": "Category: Food", "label2": "Stars: 5.0"}


def test_unlabeled_prompts_carry_no_label(make) -> None:
    log = PromptLog(None)
    g = make(log)
    g.random(None, 2, rng=_rng(0))
    g.seeded([["fresh bread"], ["clean room", "quiet"]], "business review", rng=_rng(0))
    for rec in log.memory:
        assert "label" not in rec.get("meta", {})
        text = rec["prompt"] if isinstance(rec["prompt"], str) else " ".join(m["content"] for m in rec["prompt"])
        assert "Category" not in text


def test_deterministic_under_a_seeded_rng(make, any_seed: int) -> None:
    g = make()
    a = g.random(LABEL, 4, rng=_rng(any_seed))
    b = g.random(LABEL, 4, rng=_rng(any_seed))
    assert a == b
    va = g.variation(TEXTS, LABEL, VariationSpec(kind="blank", mask_prob=0.5), rng=_rng(any_seed))
    vb = g.variation(TEXTS, LABEL, VariationSpec(kind="blank", mask_prob=0.5), rng=_rng(any_seed))
    assert va == vb
    # a second instance of the same backend agrees too
    assert make().random(LABEL, 4, rng=_rng(any_seed)) == a


def test_different_seeds_differ(make) -> None:
    g = make()
    outs = {tuple(g.random(None, 4, rng=_rng(s))) for s in range(3)}
    assert len(outs) >= 2


def test_rng_is_the_only_source_of_randomness(make) -> None:
    """Global numpy / stdlib RNG state is neither used nor changed."""
    import random

    g = make()
    np_state = np.random.get_state()[1].copy()  # noqa: NPY002 - the point: global state is untouched
    py_state = random.getstate()
    g.random(LABEL, 2, rng=_rng(1))
    g.variation(TEXTS, None, VariationSpec(), rng=_rng(1))
    assert np.array_equal(np.random.get_state()[1], np_state)  # noqa: NPY002
    assert random.getstate() == py_state


@pytest.mark.parametrize("kind", ["blank", "paraphrase"])
def test_variation_one_output_per_input(make, kind: str) -> None:
    log = PromptLog(None)
    g = make(log)
    texts = TEXTS * 2
    out = g.variation(texts, LABEL, VariationSpec(kind=kind, mask_prob=0.4), rng=_rng(9))
    assert len(out) == len(texts) and all(isinstance(t, str) for t in out)
    assert log.count == len(texts) and {r["operation"] for r in log.memory} == {"variation"}
    assert g.stats.texts == len(texts)


def test_variation_accepts_a_mapping_spec_and_empty_text(make) -> None:
    g = make()
    out = g.variation(["", "one two three"], None, {"kind": "blank", "mask_prob": 0.5}, rng=_rng(0))
    assert len(out) == 2


def test_blank_prompt_shows_masks_and_target_length(make) -> None:
    log = PromptLog(None)
    g = make(log)
    g.variation([TEXTS[0]], None, VariationSpec(kind="blank", mask_prob=0.9), rng=_rng(3))
    meta = log.memory[0]["meta"]
    assert "_" in meta["masked"] and meta["target_words"] > 0


def test_seeded_one_doc_per_keyphrase_list(make) -> None:
    log = PromptLog(None)
    g = make(log)
    kps = [["fresh bread", "friendly"], ["quiet room"], ["coffee"]]
    out = g.seeded(kps, "business review", rng=_rng(6))
    assert len(out) == 3 and all(isinstance(t, str) and t for t in out)
    assert [r["meta"]["keyphrases"] for r in log.memory] == kps
    for rec in log.memory:
        text = rec["prompt"] if isinstance(rec["prompt"], str) else " ".join(m["content"] for m in rec["prompt"])
        assert "business review" in text


def test_seeded_few_shot_examples_are_in_each_prompt(make) -> None:
    """DP-KPS few-shot (App B.2.5): every backend shows each prompt's own public examples (and only those)."""
    log = PromptLog(None)
    g = make(log)
    kps = [["fresh bread"], ["quiet room", "pool"]]
    ex = [[TEXTS[0]], [TEXTS[1], TEXTS[2]]]
    out = g.seeded(kps, "business review", rng=_rng(7), examples=ex)
    assert len(out) == 2 and all(isinstance(t, str) and t for t in out)
    assert [r["meta"]["examples"] for r in log.memory] == [1, 2]
    texts = [r["prompt"] if isinstance(r["prompt"], str) else " ".join(m["content"] for m in r["prompt"])
             for r in log.memory]
    assert TEXTS[0] in texts[0] and TEXTS[1] not in texts[0] and TEXTS[1] in texts[1] and TEXTS[2] in texts[1]
    with pytest.raises(DataError, match="1 example lists for 2 keyphrase lists"):
        g.seeded(kps, "business review", rng=_rng(7), examples=[[TEXTS[0]]])
    with pytest.raises(DataError, match=r"examples\[0\]"):
        g.seeded(kps, "business review", rng=_rng(7), examples=[TEXTS[0], TEXTS[1]])


def test_contrastive_counts_and_examples(make) -> None:
    log = PromptLog(None)
    g = make(log)
    good = ["the soup was fresh and hot .", "the bread was warm ."]
    bad = ["the room was noisy .", "the bed was small ."]
    out = g.contrastive(good, bad, LABEL, 3, rng=_rng(7))
    assert len(out) == 3 and all(isinstance(t, str) and t for t in out)
    for rec in log.memory:
        text = rec["prompt"] if isinstance(rec["prompt"], str) else " ".join(m["content"] for m in rec["prompt"])
        assert any(x in text for x in good) and any(x in text for x in bad)
        assert text.index("worse") < text.index("better")
    # without bad examples the few-shot ("w/o contrastive") form is used
    log2 = PromptLog(None)
    g2 = make(log2)
    assert len(g2.contrastive(good, [], None, 2, rng=_rng(8))) == 2
    text = str(log2.memory[0]["prompt"])
    assert "worse" not in text and ("the soup was fresh" in text or "the bread was warm" in text)


def test_closed_generator_refuses(make) -> None:
    g = make()
    g.close()
    with pytest.raises(BackendError, match="closed"):
        g.random(None, 1, rng=_rng(0))
