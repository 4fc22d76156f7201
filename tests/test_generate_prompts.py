"""Prompt families (data files), family detection, label rendering, Aug-PE masking, build_generator's config
handling, and the scripted generator's own behaviour."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from privtext.atomicio import PromptLog
from privtext.config import GeneratorConfig
from privtext.data import Corpus
from privtext.errors import ConfigError, UnknownNameError
from privtext.generate import (
    GENERATORS,
    GenerationStats,
    GeneratorContext,
    LabelInfo,
    VariationSpec,
    build_generator,
    detect_family,
    family_names,
    load_family,
    mask_words,
)
from privtext.generate.prompts import PromptFamily, render

YELP_LABEL = LabelInfo(("label1", "label2"), ("Business Category: Restaurants", "Review Stars: 5.0"))


def test_shipped_families_load_and_render() -> None:
    assert family_names() == ["clinical_note", "generic", "openreview", "pubmed", "yelp"]
    rng = np.random.default_rng(0)
    for name in family_names():
        f = load_family(name)
        assert f.name == name and f.styles and f.personas
        p = f.random_prompt(YELP_LABEL, rng)
        assert "Business Category: Restaurants, Review Stars: 5.0" in p.user and p.system
        assert "{" not in p.user
        assert f.random_prompt(None, rng).user
        assert "_" in f.blank_variation_prompt("one two three four five six", 0.9, None, rng).user
        seeded = f.seeded_prompt(["heart failure", "aspirin"], "medical record")
        assert "heart failure; aspirin" in seeded.user and "medical record" in seeded.user


def test_label_rendering() -> None:
    assert YELP_LABEL.render() == "Business Category: Restaurants, Review Stars: 5.0"
    assert LabelInfo(("topic", "stars"), ("sports", "4")).render() == "topic: sports, stars: 4"
    assert LabelInfo.from_mapping({"a": "x"}).as_dict() == {"a": "x"}
    assert LabelInfo("topic", "sports").columns == ("topic",)
    with pytest.raises(ConfigError, match="column"):
        LabelInfo(("a", "b"), ("x",))


@pytest.mark.parametrize("columns,values,name,expected", [
    (["label1", "label2"], ["Business Category: Bars", "Review Stars: 1.0"], "", "yelp"),
    (["label1", "label2"], ["Area: Optimization", "Recommendation: 8: accept, good paper"], "", "openreview"),
    ([], [], "pubmed", "pubmed"),
    (["department", "visit"], ["Department: Cardiology", "Visit: follow-up"], "", "clinical_note"),
    (["topic"], ["sports"], "news", "generic"),
    ([], [], "", "generic"),
])
def test_family_detection(columns, values, name, expected) -> None:
    labels = {c: [v] for c, v in zip(columns, values, strict=True)}
    public = Corpus.from_texts(["some text"], labels, name=name)
    assert detect_family(columns, public) == expected


def test_family_choice_in_build_generator() -> None:
    yelp_public = Corpus.from_texts(["Nice bar.", "Bad food."], {
        "label1": ["Business Category: Bars", "Business Category: Restaurants"],
        "label2": ["Review Stars: 4.0", "Review Stars: 1.0"]})
    ctx = GeneratorContext(public=yelp_public, label_columns=["label1", "label2"])
    assert build_generator({"backend": "scripted"}, ctx).family.name == "yelp"
    assert build_generator({"backend": "scripted", "prompt_family": "pubmed"}, ctx).family.name == "pubmed"
    ctx.family = "openreview"
    assert build_generator({"backend": "scripted"}, ctx).family.name == "openreview"
    with pytest.raises(UnknownNameError, match="generic, openreview, pubmed, yelp"):
        build_generator({"backend": "scripted", "prompt_family": "twitter"}, ctx)


def test_custom_family_file(tmp_path) -> None:
    text = resources.files("privtext.generate").joinpath("prompts", "generic.yaml").read_text()
    custom = tmp_path / "mine.yaml"
    custom.write_text(text.replace("name: generic", "name: mine").replace("doc_type: text", "doc_type: tweet"))
    g = build_generator({"backend": "scripted", "prompt_family": str(custom)}, GeneratorContext())
    assert g.family.name == "mine" and g.family.doc_type == "tweet"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("{masked}", "{maskd}"))
    with pytest.raises(ConfigError, match=r"unknown placeholder\(s\) \['maskd'\]"):
        load_family(str(bad))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_family(str(broken))


def test_family_from_dict_requires_sections() -> None:
    with pytest.raises(ConfigError, match=r"missing key 'random\.labeled'"):
        PromptFamily.from_dict({"name": "x", "doc_type": "y"})


def test_mask_words_merges_runs_and_counts(any_seed: int) -> None:
    text = "one two three four five six seven eight nine ten"
    masked, n = mask_words(text, 0.5, np.random.default_rng(any_seed))
    assert n == 10 and "_ _" not in masked
    kept = [w for w in masked.split() if w != "_"]
    words = text.split()
    it = iter(words)
    assert all(w in it for w in kept)  # kept words appear in order
    assert mask_words(text, 0.0, np.random.default_rng(0)) == (text, 10)
    assert mask_words(text, 1.0, np.random.default_rng(0)) == ("_", 10)
    assert mask_words("", 0.5, np.random.default_rng(0)) == ("_", 0)
    # about mask_prob of the words go
    rng = np.random.default_rng(any_seed)
    lost = [10 - len([w for w in mask_words(text, 0.3, rng)[0].split() if w != "_"]) for _ in range(400)]
    assert abs(np.mean(lost) - 3.0) < 0.4


def test_contrastive_prompt_samples_half_and_puts_bad_first() -> None:
    f = load_family("yelp")
    good = [f"good review {i}" for i in range(10)]
    bad = [f"bad review {i}" for i in range(10)]
    p = f.contrastive_prompt(good, bad, YELP_LABEL, np.random.default_rng(0))
    assert p.meta["good"] == 5 and p.meta["bad"] == 5
    assert sum(g in p.user for g in good) == 5 and sum(b in p.user for b in bad) == 5
    assert p.user.rindex("bad review") < p.user.index("good review")
    assert "Business Category: Restaurants" in p.user
    allp = f.contrastive_prompt(good, bad, None, None)
    assert all(x in allp.user for x in good + bad)


def test_user_text_is_inserted_verbatim() -> None:
    f = load_family("generic")
    text = "Odd {braces} , spacing ;\n\nand a second paragraph"
    p = f.paraphrase_prompt(text, None, "in a formal tone", None)
    assert text in p.user and "in a formal tone" in p.user
    assert render("A {text} B.", text="x  , y") == "A x  , y B."


def test_build_generator_config_errors() -> None:
    with pytest.raises(UnknownNameError, match="local, ngram, openai, scripted, transformers, vllm"):
        build_generator({"backend": "gpt5"}, GeneratorContext())
    with pytest.raises(ConfigError, match=r"unknown option 'min_word' \(did you mean 'min_words'\?\)"):
        build_generator({"backend": "scripted", "min_word": 3}, GeneratorContext())
    with pytest.raises(ConfigError, match="max_words"):
        build_generator({"backend": "scripted", "min_words": 9, "max_words": 3}, GeneratorContext())
    with pytest.raises(ConfigError, match="missing required option 'model'"):
        build_generator({"backend": "transformers"}, GeneratorContext())
    with pytest.raises(ConfigError):
        build_generator("scripted", GeneratorContext())  # type: ignore[arg-type]
    g = build_generator(GeneratorConfig(backend="fake", name="my-gen"), GeneratorContext())
    assert g.name == "my-gen" and GENERATORS.canonical("fake") == "scripted"


def test_scripted_generator_records_and_respects_its_inputs() -> None:
    log = PromptLog(None)
    g = build_generator({"backend": "scripted"}, GeneratorContext(prompt_log=log))
    rng = np.random.default_rng(0)
    out = g.random(YELP_LABEL, 2, rng=rng)
    assert all(o.startswith("Business Category: Restaurants Review Stars: 5.0 ") for o in out)
    src = "alpha beta gamma delta epsilon zeta"
    v = g.variation([src], None, VariationSpec(kind="blank", mask_prob=0.5), rng=rng)[0]
    masked = log.memory[-1]["meta"]["masked"].split()
    it = iter(v.split())
    assert all(w in it for w in masked if w != "_")
    s = g.seeded([["red apple", "green"]], "note", rng=rng)[0]
    assert s.index("red apple") < s.index("green")
    c = g.contrastive(["sun moon"], ["rain cloud"], None, 3, rng=rng)
    assert all("rain" not in x and "cloud" not in x for x in c)
    assert [call["operation"] for call in g.calls] == ["random", "variation", "seeded", "contrastive"]
    replies = build_generator({"backend": "scripted", "replies": ["only this"], "echo_label": False},
                              GeneratorContext())
    assert replies.random(YELP_LABEL, 2, rng=rng) == ["only this", "only this"]


def test_generation_stats() -> None:
    a = GenerationStats(calls=1, prompts=2, texts=2, seconds=0.5)
    a.merge(GenerationStats(calls=2, prompts=3, retries=1))
    assert a.to_dict() == {"calls": 3, "prompts": 5, "prompt_tokens": 0, "completion_tokens": 0, "texts": 2,
                           "retries": 1, "seconds": 0.5}
