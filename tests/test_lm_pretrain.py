"""Pretraining the small public LM (generate/lm/build.py, checkpoint.py) and decoding what it writes.

* the budget follows the corpus: epochs capped by a token budget (known values), stopping on the public
  validation split with the best evaluation's weights kept;
* an interrupted pretraining continues mid-training: killed by SIGKILL after step N (``PRIVTEXT_FAULT=
  lm_pretrain:step_N``) or stopped by Ctrl-C, the next build continues at that step and ends on the weights of a
  training never interrupted, bit for bit; so does ``privtext resume`` of a dpft run killed while pretraining;
* no generated text holds U+FFFD or broken UTF-8: an untrained model writes random bytes, which the tokenizer's
  own decoder turns into replacement characters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

from privtext.data import Corpus  # noqa: E402
from privtext.generate.lm import LMSettings, build_public_lm  # noqa: E402
from privtext.generate.lm import build as lm_build  # noqa: E402
from privtext.generate.lm import checkpoint as lm_ckpt  # noqa: E402
from privtext.generate.lm.build import plan_budget  # noqa: E402
from privtext.generate.lm.codes import BOS, EOS, PAD, CodeBook, ControlEncoder  # noqa: E402
from privtext.generate.lm.model import build_model, model_shape  # noqa: E402
from privtext.generate.lm.tokenizer import decode_bytes, token_bytes, train_tokenizer  # noqa: E402

WORDS = ("card", "payment", "refund", "transfer", "account", "pending", "cash", "fee", "app", "top-up", "café",
         "naïve", "Zürich", "€", "😀", "日本")
FRAMES = ("Why is my {a} still {b}?", "How do I get a {a} for my {b}?", "The {a} was {b} and the {c} too.",
          "I paid a {a} fee in {b}.", "Can I {a} my {b} from the {c}?")

# a tiny model, one thread, fp32: a training of a few seconds whose result is exact on a CPU
TINY = {"size": "tiny", "max_length": 40, "epochs": 6.0, "train_tokens": None, "batch_size": 16, "lr": 3e-3,
        "warmup": 5, "validation": 30, "precision": "fp32", "threads": 1, "patience": 0}


def make_corpus(n: int = 300, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    texts = [FRAMES[int(rng.integers(len(FRAMES)))].format(a=rng.choice(WORDS), b=rng.choice(WORDS),
                                                            c=rng.choice(WORDS)) for _ in range(n)]
    return Corpus.from_texts(texts, None, name="pretrain-test-public")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def public() -> Corpus:
    return make_corpus()


def weights(lm) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in lm.model.state_dict().items()}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.fixture(scope="module")
def whole(public: Corpus, tmp_path_factory: pytest.TempPathFactory):
    """The uninterrupted training every resumed one must end on."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build_public_lm(public.texts, settings=LMSettings(**TINY),
                               cache_dir=tmp_path_factory.mktemp("whole"))
    finally:
        torch.set_num_threads(before)


# -------------------------------------------------------------------------------------------------- budget


def test_the_budget_is_epochs_capped_by_tokens() -> None:
    """4,000 short messages (13 tokens each) stop at the epoch cap; 4,000 reviews (150 tokens each) at the token
    cap; the evaluations come every epoch, or every tenth of the budget when that is sooner."""
    s = LMSettings()  # epochs 20, 6 M tokens, batch 32
    short = plan_budget(3900, 13.0, s)
    assert (short.steps_per_epoch, short.epochs, short.steps, short.eval_every) == (122, 20.0, 2440, 122)
    long = plan_budget(3900, 150.0, s)
    assert long.epochs == pytest.approx(6e6 / (3900 * 150 * 1.1))
    assert long.steps == int(np.ceil(long.epochs * 122)) and long.eval_every == int(np.ceil(long.steps / 10))
    assert plan_budget(3900, 13.0, LMSettings(eval_every=7)).eval_every == 7
    assert plan_budget(10, 13.0, s).steps == 20  # one step an epoch, 20 epochs


def test_training_stops_on_the_validation_split_and_keeps_its_best_weights(public: Corpus) -> None:
    """With a long budget the validation loss stops improving; the training stops before the budget, and the
    model kept is the best evaluation's (its loss is the history's minimum). The planted fault, patience 0,
    runs the whole budget."""
    s = LMSettings(**{**TINY, "epochs": 60.0, "patience": 2, "min_improvement": 0.0, "eval_every": 15})
    lm = build_public_lm(public.texts, settings=s, cache=False)
    info = lm.info
    assert info["stopped"] == "early" and info["train"]["steps"] < info["planned_steps"]
    assert info["best_step"] < info["train"]["steps"]  # two evaluations without improvement came after the best
    losses = [v for _, v in info["validation_history"]]
    assert [st for st, _ in info["validation_history"]] == list(range(15, info["train"]["steps"] + 1, 15))
    assert info["validation_loss_after"] == pytest.approx(min(losses), abs=1e-4)
    assert info["best_step"] == info["validation_history"][int(np.argmin(losses))][0]
    assert info["validation_loss_after"] < 0.5 * info["validation_loss_before"]
    full = build_public_lm(public.texts, settings=LMSettings(**{**TINY, "epochs": 60.0}), cache=False)
    assert full.info["stopped"] == "budget" and full.info["train"]["steps"] == full.info["planned_steps"]


def test_threads_default_to_the_idle_cores(monkeypatch) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.2, 1.0, 1.0))
    assert lm_build.training_threads(None) == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 1.0, 1.0))
    assert lm_build.training_threads(None) == 2
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 1.0, 1.0))
    assert lm_build.training_threads(None) == 1
    assert lm_build.training_threads(2) == 2


# -------------------------------------------------------------------------------------------------- resume


def _build_in_subprocess(public: Corpus, cache_dir: Path, settings: dict, fault: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import json, sys, torch
        torch.set_num_threads(1)
        from privtext.generate.lm import LMSettings, build_public_lm
        texts = json.loads(sys.stdin.read())
        build_public_lm(texts, settings=LMSettings(**{settings!r}), cache_dir={str(cache_dir)!r})
    """)
    env = {**os.environ, "PRIVTEXT_FAULT": fault, "PRIVTEXT_QUIET": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", script], input=json.dumps(public.texts), env=env,
                          capture_output=True, text=True, timeout=600)


def _checkpoints(cache_dir: Path) -> list[Path]:
    return sorted(p for root in cache_dir.glob(".*.partial") for p in root.iterdir())


def test_sigkill_mid_training_then_the_next_build_continues_at_that_step(public: Corpus, whole,
                                                                         tmp_path: Path) -> None:
    """Killed (SIGKILL) right after step 23's checkpoint, the next build loads it, trains steps 24.. and ends on
    the uninterrupted training's weights bit for bit; the checkpoint is removed once the entry is written.
    Had the optimiser state or the batch position not been restored, the weights would differ."""
    p = _build_in_subprocess(public, tmp_path, TINY, "lm_pretrain:step_23")
    assert p.returncode == -9, p.stderr[-2000:]
    (ck,) = _checkpoints(tmp_path)
    assert ck.name == "step_00000023" and lm_ckpt.latest(ck.parent) == (23, ck)
    assert not [e for e in tmp_path.iterdir() if e.is_dir() and not e.name.startswith(".")]  # no entry yet
    lm = build_public_lm(public.texts, settings=LMSettings(**TINY), cache_dir=tmp_path)
    assert lm.info["resumed_from_step"] == 23 and lm.info["cache"] == "miss"
    assert lm.info["train"]["steps"] == whole.info["train"]["steps"] == whole.info["planned_steps"]
    assert_same_weights(weights(lm), weights(whole))
    assert lm.info["validation_loss_before"] == whole.info["validation_loss_before"]
    assert _checkpoints(tmp_path) == [] and not list(tmp_path.glob(".*.partial"))


def test_ctrl_c_writes_a_checkpoint_and_the_next_build_continues(public: Corpus, whole, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """Ctrl-C (KeyboardInterrupt) during step 31 keeps the 30 steps done; the next build continues from step 30
    and ends on the uninterrupted weights."""
    from privtext.generate.lm import train as lm_train

    real_step, calls = lm_train.train_step, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 31:
            raise KeyboardInterrupt
        return real_step(*a, **k)

    monkeypatch.setattr(lm_train, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_public_lm(public.texts, settings=LMSettings(**TINY), cache_dir=tmp_path)
    monkeypatch.setattr(lm_train, "train_step", real_step)
    (ck,) = _checkpoints(tmp_path)
    assert ck.name == "step_00000030"
    lm = build_public_lm(public.texts, settings=LMSettings(**TINY), cache_dir=tmp_path)
    assert lm.info["resumed_from_step"] == 30
    assert_same_weights(weights(lm), weights(whole))


def test_a_damaged_checkpoint_is_trained_over(public: Corpus, whole, tmp_path: Path) -> None:
    """A checkpoint whose files do not match its manifest is not loaded: the training starts at step 0 (and
    still ends on the same weights)."""
    p = _build_in_subprocess(public, tmp_path, TINY, "lm_pretrain:step_12")
    assert p.returncode == -9, p.stderr[-2000:]
    (ck,) = _checkpoints(tmp_path)
    data = bytearray((ck / "optimizer.safetensors").read_bytes())
    data[-5] ^= 0xFF
    (ck / "optimizer.safetensors").write_bytes(bytes(data))
    lm = build_public_lm(public.texts, settings=LMSettings(**TINY), cache_dir=tmp_path)
    assert lm.info["resumed_from_step"] == 0
    assert_same_weights(weights(lm), weights(whole))


def test_early_stopping_state_survives_a_resume(public: Corpus, tmp_path: Path) -> None:
    """With early stopping on, the validation history, the plateau's learning-rate cut and the best weights
    come back from the checkpoint: the resumed training stops where and as the uninterrupted one does."""
    s = {**TINY, "epochs": 40.0, "patience": 2, "min_improvement": 0.02, "eval_every": 15}
    ref = build_public_lm(public.texts, settings=LMSettings(**s), cache=False)
    stop = ref.info["train"]["steps"]
    assert ref.info["stopped"] == "early"
    kill_at = ref.info["validation_history"][-2][0] + 3  # after the first evaluation without an improvement
    p = _build_in_subprocess(public, tmp_path, s, f"lm_pretrain:step_{kill_at}")
    assert p.returncode == -9, p.stderr[-2000:]
    lm = build_public_lm(public.texts, settings=LMSettings(**s), cache_dir=tmp_path)
    assert lm.info["resumed_from_step"] == kill_at and lm.info["train"]["steps"] == stop
    assert lm.info["validation_history"] == ref.info["validation_history"]
    assert_same_weights(weights(lm), weights(ref))


def test_ctrl_c_during_an_evaluation_resumes_with_that_evaluation(public: Corpus, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Ctrl-C while step 45's validation loss is computed: the checkpoint holds step 45 without its evaluation,
    and the resumed training evaluates it first, so the history, the plateau cuts and the weights are those of
    the uninterrupted training (without that evaluation the history would lack step 45)."""
    s = {**TINY, "epochs": 40.0, "patience": 2, "min_improvement": 0.02, "eval_every": 15}
    ref = build_public_lm(public.texts, settings=LMSettings(**s), cache=False)
    assert [st for st, _ in ref.info["validation_history"][:3]] == [15, 30, 45]
    real, calls = lm_build.evaluate_loss, []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 4:  # the loss before training, then steps 15, 30 and 45
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(lm_build, "evaluate_loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_public_lm(public.texts, settings=LMSettings(**s), cache_dir=tmp_path)
    monkeypatch.setattr(lm_build, "evaluate_loss", real)
    (ck,) = _checkpoints(tmp_path)
    assert ck.name == "step_00000045"
    lm = build_public_lm(public.texts, settings=LMSettings(**s), cache_dir=tmp_path)
    assert lm.info["resumed_from_step"] == 45
    assert lm.info["validation_history"] == ref.info["validation_history"]
    assert_same_weights(weights(lm), weights(ref))


# -------------------------------------------------------------------------------------------------- decoding


@pytest.fixture(scope="module")
def encoder(public: Corpus) -> ControlEncoder:
    book = CodeBook()
    return ControlEncoder(train_tokenizer(public.texts, vocab_size=400, special_tokens=book.special_tokens()), book)


def test_decoding_round_trips_text_and_drops_broken_bytes(encoder: ControlEncoder, public: Corpus) -> None:
    """Whole texts (accents, emoji, CJK) decode to themselves; a multi-byte character cut anywhere, a stray
    continuation byte or a U+FFFD in the text leaves no replacement character, and the rest of the text stays."""
    for t in public.texts[:50]:
        assert encoder.decode(encoder.text_ids(t)) == t
    ids = encoder.text_ids("pay 🚀 now")  # an emoji the corpus lacks: its four bytes are separate tokens
    table = token_bytes(encoder.tokenizer)
    assert b"".join(table[i] for i in ids) == " pay 🚀 now".encode()
    raw = [encoder.tokenizer.decode(ids[:k]) for k in range(1, len(ids) + 1)]
    ours = [encoder.decode(ids[:k]) for k in range(1, len(ids) + 1)]
    assert sum("\ufffd" in r for r in raw) >= 2  # the emoji cut after its first, second or third byte
    assert not any("\ufffd" in o for o in ours)
    assert all("pay 🚀 now".startswith(o) for o in ours) and ours[-1] == "pay 🚀 now", ours  # only the cut char goes
    assert decode_bytes("é".encode()[:1] + b" fee " + "😀".encode()[1:] + b" card") == "fee card"
    assert decode_bytes("a \ufffd b\x00c".encode()) == "a bc"


def test_an_untrained_model_writes_broken_bytes_and_no_record_shows_them(encoder: ControlEncoder, any_seed) -> None:
    """An untrained model samples tokens at random, so its outputs cut multi-byte characters (the corpus has
    accents, emoji and CJK): the tokenizer's decoder writes U+FFFD in some of 64, ``decode`` in none, and every
    output encodes to valid UTF-8 and back."""
    from privtext.generate.lm.sample import SamplingSettings, sample

    torch.manual_seed(any_seed)
    model = build_model(model_shape("tiny", n_positions=64), vocab_size=encoder.vocab_size, bos_id=BOS,
                        eos_id=EOS, pad_id=PAD)
    new = sample(model, [encoder.free([], None)] * 64, np.random.default_rng(any_seed), n_special=encoder.n_special,
                 settings=SamplingSettings(max_new_tokens=40, min_new_tokens=40, top_p=1.0))
    raw = [encoder.tokenizer.decode([i for i in ids if i >= encoder.n_special]) for ids in new]
    assert sum("\ufffd" in r for r in raw) >= 8  # the fault the decoder fixes is there to be fixed
    out = [encoder.decode(ids) for ids in new]
    assert not any("\ufffd" in o for o in out)
    assert all(o.encode("utf-8").decode("utf-8") == o and o == " ".join(o.split()) for o in out)


# -------------------------------------------------------------------------------------------------- dpft


def test_privtext_resume_continues_dpfts_pretraining_mid_training(tmp_path: Path) -> None:
    """The issue's path: a dpft run killed while its public model trains (after step 9), then ``privtext
    resume``: the model's training continues at step 9 (its cache entry says so) and the public model equals the
    one an uninterrupted run trains, byte for byte."""
    pytest.importorskip("opacus")
    import yaml

    from privtext.data import write_corpus
    from privtext.testing.tinyrun import toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=160)
    write_corpus(priv, tmp_path / "private.csv")
    write_corpus(pub, tmp_path / "public.csv")
    lm = {k: v for k, v in TINY.items() if k != "threads"}

    def config(name: str) -> Path:
        raw = {"method": "dpft", "seed": 3,
               "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                        "label_columns": ["category", "mood"]},
               "embedder": {"backend": "hashing", "dim": 64, "cache": False},
               "evolution": {"num_samples": 6},
               "privacy": {"epsilon": 4.0, "delta": 1e-5},
               "dpft": {"sampling_rate": 0.25, "epochs": 1, "max_length": 40, "max_new_tokens": 16, "torch_threads": 1,
                        "lm": {**lm, "cache_dir": str(tmp_path / f"lm-{name}")}},
               "output": str(tmp_path / name)}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    def privtext(*args: str, fault: str | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "PRIVTEXT_QUIET": "1", "OMP_NUM_THREADS": "1"}
        env.pop("PRIVTEXT_FAULT", None)
        if fault:
            env["PRIVTEXT_FAULT"] = fault
        return subprocess.run([sys.executable, "-m", "privtext", *args], env=env, capture_output=True, text=True,
                              timeout=900)

    def entry(name: str) -> Path:
        (folder,) = [p for p in (tmp_path / f"lm-{name}").iterdir() if p.is_dir() and not p.name.startswith(".")]
        return folder

    p = privtext("run", str(config("killed")), fault="lm_pretrain:step_9")
    assert p.returncode == -9, p.stderr[-2000:]
    assert [c.name for c in _checkpoints(tmp_path / "lm-killed")] == ["step_00000009"]
    r = privtext("resume", str(tmp_path / "killed"))
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads((entry("killed") / "lm.json").read_text())["info"]
    assert info["resumed_from_step"] == 9 and info["train"]["steps"] == info["planned_steps"] > 9
    w = privtext("run", str(config("whole")))
    assert w.returncode == 0, w.stderr[-2000:]
    assert (entry("killed") / "model.safetensors").read_bytes() == (entry("whole") / "model.safetensors").read_bytes()
    assert not _checkpoints(tmp_path / "lm-killed")


def test_a_hugging_face_models_cut_character_never_reaches_a_record(tmp_path: Path, monkeypatch) -> None:
    """dpft.model (a Hugging Face LM): a row cut inside a multi-byte character decodes to U+FFFD in the
    tokenizer; the sample drops it. The planted fault is made by the tokenizer here (a byte-level tokenizer
    would make it at random)."""
    from privtext.methods.dpft.models import HFCausalLM
    from privtext.testing.tiny_lm import make_tiny_gpt2

    path = make_tiny_gpt2(tmp_path / "m")
    m = HFCausalLM(str(path), device=torch.device("cpu"), max_length=32, lora=None, temperature=1.0, top_p=1.0,
                   top_k=0, max_new_tokens=6, min_new_tokens=6, batch_size=4)
    real = type(m.tokenizer).decode

    def cut(self, ids, **kw):
        return real(self, ids, **kw) + " caf\ufffd\x07"

    monkeypatch.setattr(type(m.tokenizer), "decode", cut)
    out = m.sample([m.prompt(None)] * 4, np.random.default_rng(0), {})
    assert len(out) == 4 and all(o.endswith(" caf") and "\ufffd" not in o and "\x07" not in o for o in out), out
