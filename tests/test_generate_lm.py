"""The lm generator (generate/lm/): a tiny GPT-2 trained in the test on a corpus the test makes.

The corpus has two label values with disjoint vocabularies ("Food": soup, bread, ..., tasty, spicy, ...;
"Hotel": room, bed, ..., quiet, spacious, ...) in shared sentence frames, so whether the label code steers the
output is a count of nouns.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from privtext.atomicio import PromptLog  # noqa: E402
from privtext.data import Corpus  # noqa: E402
from privtext.errors import ConfigError, PrivacyError  # noqa: E402
from privtext.generate import GeneratorContext, LabelInfo, VariationSpec, build_generator  # noqa: E402
from privtext.generate.lm import (  # noqa: E402
    PAD,
    LMSettings,
    build_model,
    build_public_lm,
    collate,
    count_parameters,
    evaluate_loss,
    model_shape,
    sequence_losses,
)
from privtext.generate.lm import build as lm_build  # noqa: E402
from privtext.generate.lm.backend import LMGenerator, LMOptions  # noqa: E402
from privtext.generate.lm.cache import FORMAT_VERSION, read_entry  # noqa: E402
from privtext.guard import PrivateGuard  # noqa: E402

FOOD = ("soup", "bread", "pasta", "pizza", "salad", "coffee", "cake", "steak")
HOTEL = ("room", "bed", "lobby", "pool", "shower", "towel", "pillow", "balcony")
FOOD_ADJ = ("tasty", "spicy", "salty", "sweet", "fresh", "cold")
HOTEL_ADJ = ("quiet", "spacious", "tidy", "comfy", "noisy", "clean")
TEMPLATES = ("The {n1} was {a1} and the {n2} was {a2}.", "We loved the {n1}, but the {n2} was {a1}.",
             "The {n1} was {a1}. The {n2} was {a2} too.")
FOOD_L = LabelInfo(("label1",), ("Food",))
HOTEL_L = LabelInfo(("label1",), ("Hotel",))

# a tiny model that trains in a few seconds on one thread
TINY = {"size": "tiny", "max_length": 48, "epochs": 12.0, "train_tokens": None, "batch_size": 32, "lr": 3e-3,
        "warmup": 20, "validation": 40, "precision": "fp32"}


def make_corpus(n: int = 800, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        nouns, adjs = (FOOD, FOOD_ADJ) if rng.random() < 0.5 else (HOTEL, HOTEL_ADJ)
        n1, n2 = rng.choice(nouns, 2, replace=False)
        a1, a2 = rng.choice(adjs, 2)
        texts.append(TEMPLATES[int(rng.integers(len(TEMPLATES)))].format(n1=n1, n2=n2, a1=a1, a2=a2))
        labels.append("Food" if nouns is FOOD else "Hotel")
    return Corpus.from_texts(texts, {"label1": labels}, name="lm-test-public")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is fastest, and the machine is shared
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def public() -> Corpus:
    return make_corpus()


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lm-cache")


@pytest.fixture(scope="module")
def lm(public: Corpus, cache_root: Path):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build_public_lm(public.texts, public.labels, settings=LMSettings(**TINY), cache_dir=cache_root)
    finally:
        torch.set_num_threads(before)


def generator(lm, public: Corpus, log: PromptLog | None = None, **opts) -> LMGenerator:
    return LMGenerator(public=public.texts, labels=public.labels, options=LMOptions(**{**TINY, **opts}), lm=lm,
                       prompt_log=log)


def noun_counts(texts: list[str]) -> tuple[int, int]:
    words = [w.strip(".,").lower() for t in texts for w in t.split()]
    return sum(w in FOOD for w in words), sum(w in HOTEL for w in words)


# ------------------------------------------------------------------------------------------------ training


def test_training_lowers_the_loss_below_the_untrained_model(lm, public: Corpus) -> None:
    assert lm.info["cache"] == "miss" and lm.info["train"]["steps"] == lm.info["planned_steps"] > 0
    assert lm.info["validation_loss_after"] < 0.6 * lm.info["validation_loss_before"]
    # on fresh records of the same grammar, against a freshly initialised model of the same shape
    fresh = make_corpus(60, seed=99)
    labels = [{"label1": v} for v in fresh.labels["label1"]]
    trained = lm.loss(fresh.texts, labels)
    shape = model_shape("tiny", n_positions=48)
    torch.manual_seed(0)
    untrained = build_model(shape, vocab_size=lm.encoder.vocab_size, bos_id=0, eos_id=1, pad_id=PAD)
    seqs = [lm.encoder.record(t, lab) for t, lab in zip(fresh.texts, labels, strict=True)]
    before = evaluate_loss(untrained, seqs, pad_id=PAD)
    assert before > math.log(lm.encoder.vocab_size) * 0.9  # an untrained model is near uniform
    assert trained < 0.5 * before


def steering(g: LMGenerator) -> tuple[float, float]:
    """(share of food nouns in texts written for "Food", share of hotel nouns in texts written for "Hotel"),
    both drawn with the same seed."""
    food = noun_counts(g.random(FOOD_L, 40, rng=np.random.default_rng(1)))
    hotel = noun_counts(g.random(HOTEL_L, 40, rng=np.random.default_rng(1)))
    assert sum(food) >= 40 and sum(hotel) >= 40
    return food[0] / sum(food), hotel[1] / sum(hotel)


def test_label_codes_steer_the_nouns(lm, public: Corpus, monkeypatch) -> None:
    """Written for "Food", the texts hold mostly food nouns; for "Hotel", mostly hotel nouns (the corpus is half
    and half). A binomial share over >= 40 nouns has sd <= 0.08, so 0.8 is > 3 sd above the 0.5 of no steering."""
    g = generator(lm, public)
    food, hotel = steering(g)
    assert food > 0.8 and hotel > 0.8, (food, hotel)
    # the planted fault: label codes left out of the prompt. Both labels then get the same texts from the same
    # seed, the two shares sum to 1, and the check above fails
    monkeypatch.setattr(g.enc, "label_ids", lambda label: ([], []))
    food, hotel = steering(g)
    assert food + hotel == pytest.approx(1.0) and min(food, hotel) <= 0.5


def test_keyphrases_steer_the_text_around_them(lm, public: Corpus) -> None:
    """A keyphrase template (blank, phrase, blank) is filled on the phrase's topic: around "balcony" the other
    nouns are hotel nouns, around "steak" food nouns (no label codes: only the phrase carries the topic). The
    planted fault, the phrase dropped from the template, leaves both sets of texts the same."""
    g = generator(lm, public)

    def z_scores(pieces_of) -> tuple[float, float]:
        """z of the on-topic share of the other nouns against the 0.5 of no steering."""
        out = []
        for kp in ("balcony", "steak"):
            jobs = [g._infill_job([], pieces_of(kp)) for _ in range(80)]
            texts = g._run(jobs, np.random.default_rng(11))
            food, hotel = noun_counts([t.replace(kp, "") for t in texts])
            n = food + hotel
            assert n >= 50  # about one more noun per text
            out.append(((hotel if kp == "balcony" else food) / n - 0.5) / math.sqrt(0.25 / n))
        return out[0], out[1]

    hotel, food = z_scores(lambda kp: g.enc.anchored_pieces([kp]))
    assert hotel > 3 and food > 3, (hotel, food)
    hotel, food = z_scores(lambda kp: g.enc.anchored_pieces([]))  # the same texts both times
    assert not (hotel > 3 and food > 3), (hotel, food)


def test_seeded_holds_every_keyphrase_in_order(lm, public: Corpus) -> None:
    g = generator(lm, public)
    kps = [["fresh bread", "noisy"], ["pool"], ["cold", "slow", "pillow"]]
    out = g.seeded(kps, "business review", rng=np.random.default_rng(4))
    for text, phrases in zip(out, kps, strict=True):
        low, pos = text.lower(), 0
        for p in phrases:
            at = low.find(p, pos)
            assert at >= 0, (text, phrases)
            pos = at + len(p)
        assert len(text.split()) > sum(len(p.split()) for p in phrases)  # the blanks were filled


def test_blank_variation_keeps_every_unmasked_word(lm, public: Corpus) -> None:
    log = PromptLog(None)
    g = generator(lm, public, log)
    texts = list(public.texts[:12])
    out = g.variation(texts, FOOD_L, VariationSpec(kind="blank", mask_prob=0.5), rng=np.random.default_rng(5))
    changed = 0
    for text, rec in zip(out, log.memory, strict=True):
        kept = [w for w in rec["meta"]["masked"].split() if w != "_"]
        pos = 0
        for w in kept:  # the kept words appear, in order (a fill may start with punctuation: "soup" + ".")
            at = text.find(w, pos)
            assert at >= 0, (rec["meta"]["masked"], text)
            pos = at + len(w)
        changed += text != rec["meta"]["masked"]
    assert changed == len(texts)


def test_sampling_is_seeded_and_leaves_global_rng_alone(lm, public: Corpus) -> None:
    g = generator(lm, public)
    state = torch.random.get_rng_state()
    a = g.random(FOOD_L, 6, rng=np.random.default_rng(7))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a == g.random(FOOD_L, 6, rng=np.random.default_rng(7))
    assert a != g.random(FOOD_L, 6, rng=np.random.default_rng(8))


def test_draw_follows_temperature_top_p_and_bans() -> None:
    """The inverse-CDF draw against exact probabilities: 20 000 draws, each frequency within 4 binomial sd."""
    from privtext.generate.lm.sample import SamplingSettings, _draw

    logits = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.07, 0.03, 0.0]]))  # the last one is banned (-inf)
    n = 20000
    gen = torch.Generator().manual_seed(0)
    for s, expect in ((SamplingSettings(top_p=1.0), [0.5, 0.25, 0.15, 0.07, 0.03, 0]),
                      (SamplingSettings(top_p=0.8), [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0, 0, 0]),
                      (SamplingSettings(top_k=2), [2 / 3, 1 / 3, 0, 0, 0, 0])):
        draws = _draw(logits.expand(n, -1).clone(), s, gen)
        freq = np.bincount(draws.numpy(), minlength=6) / n
        sd = np.sqrt(np.array(expect) * (1 - np.array(expect)) / n)
        assert np.all(np.abs(freq - expect) <= 4 * sd + 1e-12), (s, freq)
    hot = _draw(logits.expand(n, -1).clone(), SamplingSettings(temperature=0.5, top_p=1.0), gen)
    p = np.array([0.5, 0.25, 0.15, 0.07, 0.03]) ** 2
    assert abs(float((hot == 0).float().mean()) - p[0] / p.sum()) < 0.02


def test_sequence_losses_do_not_depend_on_the_batch(lm) -> None:
    """A record's loss (and so its gradient, for DP-SGD) is the same alone and in a padded batch."""
    seqs = [lm.encoder.record("The soup was cold.", {"label1": "Food"}),
            lm.encoder.record("We loved the room, but the pool was slow and the towel was small.", None)]
    batch = sequence_losses(lm.model, collate(seqs, pad_id=PAD))
    alone = [float(sequence_losses(lm.model, collate([s], pad_id=PAD))[0].detach()) for s in seqs]
    assert np.allclose(batch.detach().numpy(), alone, atol=1e-5)
    padded = sequence_losses(lm.model, collate(seqs, pad_id=PAD, pad_to_multiple=16))
    assert np.allclose(padded.detach().numpy(), alone, atol=1e-5)
    assert collate(seqs, pad_id=PAD, pad_to_multiple=16)["input_ids"].shape[1] % 16 == 0
    b = collate(seqs, pad_id=PAD)
    assert b["position_ids"].shape == b["input_ids"].shape and int(b["attention_mask"].sum()) == sum(map(len, seqs))
    assert (b["labels"][b["attention_mask"] == 0] == -100).all()


def test_default_small_model_is_a_few_million_parameters() -> None:
    shape = model_shape("small", n_positions=320)
    model = build_model(shape, vocab_size=4096, bos_id=0, eos_id=1, pad_id=2)
    assert 3e6 < count_parameters(model) < 6e6
    assert model_shape("auto", n_positions=320, cuda=True).n_embd > shape.n_embd  # larger on a GPU
    with pytest.raises(ConfigError, match="multiple of n_head"):
        model_shape("small", n_positions=64, n_head=3)


# -------------------------------------------------------------------------------------------------- cache


def test_cache_hit_reuses_the_trained_model(lm, public: Corpus, cache_root: Path, monkeypatch) -> None:
    def no_training(*a, **k):
        raise AssertionError("a cache hit must not train")

    monkeypatch.setattr(lm_build, "_train", no_training)
    again = build_public_lm(public.texts, public.labels, settings=LMSettings(**TINY), cache_dir=cache_root)
    assert again.info["cache"] == "hit" and again.info["key"] == lm.info["key"]
    for (k, a), (_, b) in zip(lm.model.state_dict().items(), again.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert again.encoder.codebook == lm.encoder.codebook
    folder = Path(again.info["cache_dir"])
    assert folder.parent == cache_root and folder.name.endswith(f"-v{FORMAT_VERSION}")
    assert not [p for p in cache_root.iterdir() if ".tmp-" in p.name]  # no temporary folder left


def test_cache_key_follows_corpus_and_settings(public: Corpus, tmp_path: Path, monkeypatch) -> None:
    """The key build_public_lm trains under changes with the corpus, the labels, the settings and the reserved
    codes that add a code; reserving values the public labels already give keeps the key (and the entry)."""
    keys = {}

    def record(texts, labels, settings, shape, precision, tdev, key, folder, status, codebook=None):
        raise _Stop(key)

    monkeypatch.setattr(lm_build, "_train_new", record)
    for name, texts, labels, s, reserve in (
            ("base", public.texts, public.labels, TINY, None),
            ("lr", public.texts, public.labels, {**TINY, "lr": 1e-3}, None),
            ("one text", [*public.texts[:-1], "A different text."], public.labels, TINY, None),
            ("labels", public.texts, None, TINY, None),
            ("reserve adds a value", public.texts, public.labels, TINY, {"label1": ["Food", "Hotel", "Spa"]}),
            ("reserve adds a column", public.texts, public.labels, TINY, {"mood": ["good", "bad"]}),
            ("reserve adds nothing", public.texts, public.labels, TINY, {"label1": ["Hotel", "Food"]})):
        with pytest.raises(_Stop) as e:
            build_public_lm(texts, labels, settings=LMSettings(**s), cache_dir=tmp_path, reserve_codes=reserve)
        keys[name] = e.value.args[0]
    assert keys["reserve adds nothing"] == keys["base"]
    assert len(set(keys.values())) == 6


def test_reserved_codes_are_added_after_the_public_ones() -> None:
    """The declared schema's values the public corpus lacks get codes (ids after the public codes, so a corpus's
    own codes keep their ids); ``added_by`` names exactly those."""
    from privtext.generate.lm.codes import CodeBook

    labels = {"label1": ["Food"] * 6 + ["Hotel"] * 6 + ["Spa"] * 2}
    base = CodeBook.from_labels(labels, min_texts=5)
    assert base.columns == ("label1",) and base.values == (("Food", "Hotel"),)
    book = CodeBook.from_labels(labels, min_texts=5, reserve={"mood": ["good", "bad", "good"],
                                                               "label1": ["Spa", "Food"]})
    assert book.columns == ("label1", "mood")
    assert book.values == (("Food", "Hotel", "Spa"), ("bad", "good"))
    assert book.added_by(base) == ["<|label1=Spa|>", "<|mood=bad|>", "<|mood=good|>"]
    assert CodeBook.from_labels(labels, min_texts=5, reserve={"label1": ["Hotel"]}) == base
    assert CodeBook.from_labels(None, reserve={"mood": ["good"]}).label_tokens() == ["<|mood=good|>"]
    # a public column that is not a class label (too many values) is not turned into one by the reserve
    many = {"id": [str(i) for i in range(300)]}
    assert CodeBook.from_labels(many, reserve={"id": ["0"]}).columns == ()


class _Stop(Exception):
    pass


@pytest.mark.parametrize("damage", ["truncate", "flip", "manifest", "no-manifest"])
def test_damaged_entry_is_retrained(public: Corpus, tmp_path: Path, damage: str) -> None:
    small = make_corpus(120, seed=5)
    settings = LMSettings(**{**TINY, "epochs": 1.0, "validation": 0})
    first = build_public_lm(small.texts, small.labels, settings=settings, cache_dir=tmp_path)
    folder = Path(first.info["cache_dir"])
    assert read_entry(folder) is not None
    weights = folder / "model.safetensors"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "flip":
        raw = bytearray(weights.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        weights.write_bytes(bytes(raw))
    elif damage == "manifest":
        (folder / "manifest.json").write_text("{not json")
    else:
        (folder / "manifest.json").unlink()
    assert read_entry(folder) is None
    second = build_public_lm(small.texts, small.labels, settings=settings, cache_dir=tmp_path)
    assert second.info["cache"] == "damaged"
    assert read_entry(folder) is not None  # replaced by a whole entry
    third = build_public_lm(small.texts, small.labels, settings=settings, cache_dir=tmp_path)
    assert third.info["cache"] == "hit"


def test_failed_write_leaves_nothing(public: Corpus, tmp_path: Path, monkeypatch) -> None:
    small = make_corpus(60, seed=6)

    def broken(lm, folder):
        (folder / "tokenizer.json").write_text("partial")
        raise OSError("disk full")

    monkeypatch.setattr(lm_build, "_save", broken)
    with pytest.raises(OSError, match="disk full"):
        build_public_lm(small.texts, small.labels, settings=LMSettings(**{**TINY, "epochs": 0.5, "validation": 0}),
                        cache_dir=tmp_path)
    # nothing but the entry's (empty) training lock file
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []
    assert all(p.stat().st_size == 0 for p in tmp_path.iterdir())


def test_a_diverged_training_is_an_error_and_is_not_cached(tmp_path: Path, monkeypatch) -> None:
    """A NaN loss (seen: the base shape at lr 2e-3 on an H200) must stop the build with an error naming the
    learning rate, not cache a model that writes one replacement character per token."""
    from privtext.errors import BackendError
    from privtext.generate.lm import train as lm_train

    real_step, seen = lm_train.train_step, []

    def poisoned_step(model, batch, optimizer, **k):
        seen.append(1)
        if len(seen) == 3:  # the weights go non-finite, as a diverging step leaves them
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))
        return real_step(model, batch, optimizer, **k)

    monkeypatch.setattr(lm_train, "train_step", poisoned_step)
    small = make_corpus(60, seed=8)
    with pytest.raises(BackendError, match=r"diverged: the loss is nan at step 3 of .*lm\.lr, now 0\.003"):
        build_public_lm(small.texts, small.labels, settings=LMSettings(**{**TINY, "epochs": 2.0, "validation": 0}),
                        cache_dir=tmp_path)
    assert len(seen) == 3  # stopped at once
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []  # nothing cached


def test_default_learning_rate_follows_the_size_and_keeps_the_cache_keys() -> None:
    from privtext.generate.lm.build import DEFAULT_LR

    assert LMSettings().resolved_lr(cuda=False) == DEFAULT_LR["small"] == 2e-3
    assert LMSettings().resolved_lr(cuda=True) == DEFAULT_LR["base"] < DEFAULT_LR["small"]
    assert LMSettings(lr=1e-3).resolved_lr(cuda=True) == 1e-3
    # a small model cached before the per-size default (lr 2e-3 written out) keeps its key
    shape = model_shape("small", n_positions=320)
    implicit = LMSettings()
    implicit = type(implicit)(**{**implicit.__dict__, "lr": implicit.resolved_lr(cuda=False)})
    assert implicit.key_dict(shape, "bf16") == LMSettings(lr=2e-3).key_dict(shape, "bf16")
    assert LMSettings(lr=1e-3).key_dict(shape, "bf16") != LMSettings(lr=2e-3).key_dict(shape, "bf16")


def test_runs_started_together_train_the_model_once(tmp_path: Path, monkeypatch) -> None:
    """Seeds side by side on one public corpus: one trains, the other waits for the lock and loads its entry
    (found on a GPU machine, where eleven runs started at once each trained the same 30 M-parameter model)."""
    import threading
    import time as _time

    small = make_corpus(60, seed=7)
    settings = LMSettings(**{**TINY, "epochs": 0.5, "validation": 0})
    real_train, calls = lm_build._train, []

    def slow_train(*a, **k):
        calls.append(threading.get_ident())
        _time.sleep(1.0)  # the second run starts while the first is training
        return real_train(*a, **k)

    monkeypatch.setattr(lm_build, "_train", slow_train)
    out: dict[int, object] = {}

    def build(i: int) -> None:
        out[i] = build_public_lm(small.texts, small.labels, settings=settings, cache_dir=tmp_path)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert sorted(lm.info["cache"] for lm in out.values()) == ["hit", "hit", "miss"]  # type: ignore[attr-defined]
    a = out[0].model.state_dict()  # type: ignore[attr-defined]
    for i in (1, 2):
        for k, v in out[i].model.state_dict().items():  # type: ignore[attr-defined]
            assert torch.equal(a[k], v), k


def test_default_cache_location_follows_the_environment(monkeypatch, tmp_path: Path) -> None:
    from privtext.generate.lm.cache import default_cache_dir

    monkeypatch.setenv("PRIVTEXT_CACHE_HOME", str(tmp_path / "pt"))
    assert default_cache_dir() == tmp_path / "pt" / "lm"
    monkeypatch.delenv("PRIVTEXT_CACHE_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "privtext" / "lm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "privtext" / "lm"


# ------------------------------------------------------------------------------------------ privacy/logs


def test_every_conditioning_is_in_the_prompt_log(lm, public: Corpus) -> None:
    log = PromptLog(None)
    g = generator(lm, public, log)
    rng = np.random.default_rng(9)
    g.random(FOOD_L, 2, rng=rng)
    g.variation(public.texts[:2], HOTEL_L, VariationSpec(kind="blank", mask_prob=0.5), rng=rng)
    g.variation(public.texts[2:4], None, VariationSpec(kind="paraphrase"), rng=rng)
    g.seeded([["fresh bread"]], "business review", rng=rng)
    g.contrastive(["The soup was fresh and the cake was great."], ["The room was noisy."], FOOD_L, 2, rng=rng)
    assert log.count == 2 + 2 + 2 + 1 + 2 == g.stats.prompts
    for rec in log.memory:
        assert "[lm input] <|bos|>" in rec["prompt"]
    recs = log.memory
    assert "<|label1=Food|><|text|>" in recs[0]["prompt"]
    for rec in recs[2:4]:  # the masked text itself is the model's input
        model_input = rec["prompt"].split("[lm input]", 1)[1]
        assert "<|label1=Hotel|><|infill|>" in model_input
        masked = rec["meta"]["masked"].split()
        assert model_input.count("<|blank|>") == masked.count("_") == rec["meta"]["lm"]["blanks"]
        assert all(w in model_input for w in masked if w != "_")
    assert "<|blank|> fresh bread<|blank|>" in recs[6]["prompt"]
    kps = recs[7]["meta"]["lm"]["keyphrases"]
    assert kps and all(f"<|blank|> {k}<|blank|>" in recs[7]["prompt"] for k in kps)
    assert not any(k in ("room", "noisy") for k in kps)  # terms of the bad example are not chosen


def test_guard_sees_what_the_model_is_given(lm, public: Corpus) -> None:
    """The ``[lm input]`` part of each record alone (the model's exact conditioning) is what the end-of-run
    audit needs to flag a private record handed to the model by a faulty method."""
    private = "We loved the soup, but Zebediah said the cake was salty and the bread was cold."
    guard = PrivateGuard([private], public.texts)
    log = PromptLog(None)
    g = generator(lm, public, log)
    g.variation(["The soup was cold."], None, VariationSpec(kind="blank", mask_prob=0.0), rng=np.random.default_rng(0))
    g.variation([private], None, VariationSpec(kind="blank", mask_prob=0.0), rng=np.random.default_rng(0))
    g.seeded([["we loved the soup but zebediah said the"]], "review", rng=np.random.default_rng(0))
    model_inputs = [rec["prompt"].split("[lm input]", 1)[1] for rec in log.memory]
    res = guard.scan(model_inputs)
    assert res.ngram_hits == 2 and res.flagged == [2, 3]
    assert guard.scan(log.memory).flagged == [2, 3]


def test_guard_refuses_a_private_record_in_the_training_corpus(public: Corpus, tmp_path: Path) -> None:
    guard = PrivateGuard([public.texts[5]], [])
    with pytest.raises(PrivacyError, match="record 5"):
        build_public_lm(public.texts, public.labels, settings=LMSettings(**TINY), cache_dir=tmp_path, guard=guard)
    assert list(tmp_path.iterdir()) == []


# -------------------------------------------------------------------------------------- registry / config


def test_build_generator_with_backend_lm(public: Corpus, cache_root: Path, lm) -> None:
    log = PromptLog(None)
    ctx = GeneratorContext(public=public, label_columns=("label1",), prompt_log=log)
    g = build_generator({"backend": "lm", **TINY, "cache_dir": str(cache_root), "torch_threads": 1}, ctx)
    assert isinstance(g, LMGenerator) and g.info["cache"] == "hit" and g.label_conditioned
    assert len(g.random(FOOD_L, 3, rng=np.random.default_rng(0))) == 3 and log.count == 3
    alias = build_generator({"backend": "small-lm", **TINY, "cache_dir": str(cache_root)}, ctx)
    assert isinstance(alias, LMGenerator)
    # the label columns of the run decide the codes: none asked for, none made
    plain = build_generator({"backend": "lm", **TINY, "epochs": 0.5, "cache_dir": str(cache_root)},
                            GeneratorContext(public=public))
    assert not plain.label_conditioned and plain.enc.codebook.columns == ()
    assert json.loads((Path(plain.info["cache_dir"]) / "lm.json").read_text())["codebook"]["columns"] == []


@pytest.mark.parametrize(("opts", "match"), [
    ({"epoch": 3}, r"unknown option 'epoch' \(did you mean 'epochs'\?\)"),
    ({"top_p": 2.0}, "top_p"),
    ({"size": "huge"}, "size"),
    ({"precision": "fp8"}, "precision"),
    ({"free_share": 0, "blank_share": 0, "anchored_share": 0}, "free_share"),
    ({"n_head": 3, "size": "tiny"}, "n_head"),
])
def test_bad_options_are_config_errors_naming_them(public: Corpus, tmp_path: Path, opts: dict, match: str) -> None:
    ctx = GeneratorContext(public=public, label_columns=("label1",))
    with pytest.raises(ConfigError, match=match):
        build_generator({"backend": "lm", **TINY, "cache_dir": str(tmp_path), **opts}, ctx)
    assert list(tmp_path.iterdir()) == []


def test_no_public_corpus_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="public"):
        build_generator({"backend": "lm"}, GeneratorContext())
