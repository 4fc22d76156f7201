"""DPO on LoRA adapters (issue 38): the loss's known values (Rafailov et al. Eq 7) and its agreement with trl's, a
round that raises the chosen-over-rejected margin while the reference (the base model) stays as it was, the
adapter's save/load round trip and a resumed round equal to an uninterrupted one, the lm generator writing what
the pairs preferred, and the missing-package errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("transformers")

from privtext.errors import ConfigError, MissingDependencyError, ResumeError  # noqa: E402
from privtext.learn.adapter import load_adapter, save_adapter  # noqa: E402
from privtext.learn.dpo import (  # noqa: E402
    attach_lora,
    dpo_loss,
    lora_parameters,
    pair_logps,
    preference_margins,
    train_dpo,
)
from privtext.learn.encode import HFPairEncoder  # noqa: E402
from privtext.learn.options import DPOOptions  # noqa: E402
from privtext.learn.pairs import PreferencePair, pair_records  # noqa: E402
from tests.conftest import toy_preference_pairs  # noqa: E402

PROMPT = "<|user|> write a review :"
#: chosen: the friendly / fresh versions; rejected: the same sentence, slow / cold
PAIRS = toy_preference_pairs(6)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_gpt2: Path) -> Path:
    return tiny_gpt2


def _model(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)


def _encoder(path: Path) -> HFPairEncoder:
    from transformers import AutoTokenizer

    return HFPairEncoder(AutoTokenizer.from_pretrained(path), prompt_text=lambda g: PROMPT, max_length=64)


OPTS = DPOOptions(beta=0.1, lr=5e-3, batch_size=4, epochs=3, lora_r=4, lora_alpha=8)


def test_dpo_loss_known_values() -> None:
    z = torch.zeros(3)
    assert torch.allclose(dpo_loss(z, z, z, z, 0.01), torch.full((3,), math.log(2.0)))
    # β = 0.5, chosen gained 2 nats over the reference, rejected lost 1: −log σ(0.5·3) = log(1 + e^−1.5)
    got = dpo_loss(torch.tensor([2.0]), torch.tensor([-1.0]), torch.tensor([0.0]), torch.tensor([0.0]), 0.5)
    assert float(got) == pytest.approx(math.log1p(math.exp(-1.5)), abs=1e-7)
    # only the differences to the reference count
    shifted = dpo_loss(torch.tensor([-8.0]), torch.tensor([-21.0]), torch.tensor([-10.0]), torch.tensor([-20.0]), 0.5)
    assert float(shifted) == pytest.approx(float(got), abs=1e-6)


def test_a_round_raises_the_margin_and_leaves_the_reference_untouched(tiny: Path) -> None:
    enc = _encoder(tiny)
    pairs = enc.encode_all(PAIRS)
    model = attach_lora(_model(tiny), OPTS, rng=np.random.default_rng(0))
    base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    ref_before = pair_logps(model, pairs, pad_id=enc.pad_id, reference=True)
    before = preference_margins(model, pairs, pad_id=enc.pad_id)
    # LoRA starts at B = 0: the adapted model equals the base, so its margins are the reference's
    np.testing.assert_allclose(before, ref_before[0] - ref_before[1], atol=1e-5)
    res = train_dpo(model, pairs, OPTS, pad_id=enc.pad_id, rng=np.random.default_rng(1))
    after = preference_margins(model, pairs, pad_id=enc.pad_id)
    assert res.steps == 9 and res.pairs == len(PAIRS)
    assert res.loss_first == pytest.approx(math.log(2.0), abs=1e-6)  # policy = reference at the first step
    assert res.loss_last < res.loss_first
    assert (after > before).all(), (before, after)
    assert float(np.mean(after - before)) > 0.3
    # the reference is the original model: its weights and its log-probabilities did not move
    for n, p in model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, base[n]), n
    ref_after = pair_logps(model, pairs, pad_id=enc.pad_id, reference=True)
    np.testing.assert_array_equal(ref_after[0], ref_before[0])
    np.testing.assert_array_equal(ref_after[1], ref_before[1])
    assert not model.training


def test_adapter_round_trip_and_a_resumed_round_equals_an_uninterrupted_one(tiny: Path, tmp_path: Path) -> None:
    enc = _encoder(tiny)
    pairs = enc.encode_all(PAIRS)
    r1, r2 = pairs[:6], pairs[6:]

    def fresh():
        return attach_lora(_model(tiny), OPTS, rng=np.random.default_rng(0))

    a = fresh()
    train_dpo(a, r1, OPTS, pad_id=enc.pad_id, rng=np.random.default_rng(11))
    save_adapter(a, tmp_path / "iter_000", meta={"iteration": 0, "pairs": len(r1)})
    b = fresh()
    assert not np.allclose(preference_margins(b, pairs, pad_id=enc.pad_id),
                           preference_margins(a, pairs, pad_id=enc.pad_id))
    assert load_adapter(b, tmp_path / "iter_000") == {"iteration": 0, "pairs": 6}
    np.testing.assert_allclose(preference_margins(b, pairs, pad_id=enc.pad_id),
                               preference_margins(a, pairs, pad_id=enc.pad_id), rtol=0, atol=1e-6)
    # round 2: uninterrupted (a) and resumed from the checkpoint (b) end in the same adapter
    train_dpo(a, r2, OPTS, pad_id=enc.pad_id, rng=np.random.default_rng(12))
    train_dpo(b, r2, OPTS, pad_id=enc.pad_id, rng=np.random.default_rng(12))
    for pa, pb in zip(lora_parameters(a), lora_parameters(b), strict=True):
        torch.testing.assert_close(pa, pb, rtol=0, atol=1e-6)


def test_a_damaged_or_mismatched_checkpoint_is_refused(tiny: Path, tmp_path: Path) -> None:
    model = attach_lora(_model(tiny), OPTS, rng=np.random.default_rng(0))
    folder = save_adapter(model, tmp_path / "ck")
    with pytest.raises(ConfigError, match="LoRA"):
        load_adapter(attach_lora(_model(tiny), OPTS.model_copy(update={"lora_r": 2}), rng=np.random.default_rng(0)),
                     folder)
    raw = bytearray((folder / "adapter.npz").read_bytes())
    raw[-20] ^= 0xFF
    (folder / "adapter.npz").write_bytes(bytes(raw))
    with pytest.raises(ResumeError, match="digest"):
        load_adapter(model, folder)
    (folder / "adapter.json").unlink()
    with pytest.raises(ResumeError, match="no whole adapter checkpoint"):
        load_adapter(model, folder)
    with pytest.raises(ConfigError, match="attach_lora"):
        train_dpo(_model(tiny), [], OPTS, pad_id=0, rng=np.random.default_rng(0))


def test_missing_trl_or_peft_gives_the_install_line(monkeypatch: pytest.MonkeyPatch, tiny: Path) -> None:
    from privtext.learn.trl_backend import require_trl

    monkeypatch.setitem(sys.modules, "trl", None)  # an import of trl now fails as if it were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'privtext\[learn\]' -c constraints.txt"):
        require_trl()
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(MissingDependencyError, match=r"'peft'.*privtext\[learn\]"):
        attach_lora(_model(tiny), OPTS, rng=np.random.default_rng(0))


def _moved(tiny: Path):
    """(tokenizer, encoder, encoded pairs, a model whose adapter was trained away from the reference)."""
    from transformers import AutoTokenizer

    enc = _encoder(tiny)
    pairs = enc.encode_all(PAIRS)
    model = attach_lora(_model(tiny), OPTS, rng=np.random.default_rng(0))
    train_dpo(model, pairs[:4], OPTS, pad_id=enc.pad_id, rng=np.random.default_rng(5))  # policy ≠ reference now
    return AutoTokenizer.from_pretrained(tiny), enc, pairs, model


def _trl_trainer(trl, model, tok, out: Path, beta: float, loss: str = "sigmoid", sft: float = 0.0):
    """trl's DPOTrainer on every toy pair in one batch (its reference: see _base_reference)."""
    from datasets import Dataset

    args = trl.DPOConfig(output_dir=str(out), beta=beta, loss_type=[loss] + (["sft"] if sft else []),
                         loss_weights=[1.0, sft] if sft else None, per_device_train_batch_size=len(PAIRS),
                         report_to=[], bf16=False, gradient_checkpointing=False, use_cpu=True, save_strategy="no",
                         disable_tqdm=True)
    return trl.DPOTrainer(model=model, ref_model=None, args=args, processing_class=tok,
                          train_dataset=Dataset.from_list(pair_records(PAIRS, lambda p: PROMPT + " ")))


def test_trl_computes_the_same_loss_and_moves_the_margin_the_same_way(tiny: Path) -> None:
    """Cross-check with trl's DPOTrainer: on a model whose adapter was moved away from the reference, trl's loss of
    the pairs equals the native Eq 7 (same sequences: trl tokenises prompt + completion, ours tokenises them apart);
    and a trl round raises the margins too."""
    trl = pytest.importorskip("trl")
    tok, enc, pairs, model = _moved(tiny)
    pc, pr = pair_logps(model, pairs, pad_id=enc.pad_id)
    rc, rr = pair_logps(model, pairs, pad_id=enc.pad_id, reference=True)
    native = float(dpo_loss(torch.tensor(pc), torch.tensor(pr), torch.tensor(rc), torch.tensor(rr), OPTS.beta).mean())
    records = pair_records(PAIRS, lambda p: PROMPT + " ")
    trainer = _trl_trainer(trl, model, tok, tiny / "trl-out", OPTS.beta)
    with torch.no_grad():
        copied = float(trainer.compute_loss(model.eval(), next(iter(trainer.get_train_dataloader()))))
    # trl's own reference here is a copy of the trained adapter (the previous round's model): loss log 2
    assert copied == pytest.approx(math.log(2.0), abs=1e-6)
    from privtext.learn.trl_backend import _base_reference

    _base_reference(trainer.model)  # what train_dpo_trl does: the reference becomes the base model
    batch = next(iter(trainer.get_train_dataloader()))
    model.eval()
    with torch.no_grad():
        theirs = float(trainer.compute_loss(model, batch))
    assert theirs == pytest.approx(native, abs=1e-5)
    assert native < math.log(2.0) - 1e-3  # the check is not at the trivial point

    from privtext.learn.trl_backend import train_dpo_trl

    fresh = attach_lora(_model(tiny), OPTS, rng=np.random.default_rng(0))
    before = preference_margins(fresh, pairs, pad_id=enc.pad_id)
    res = train_dpo_trl(fresh, tok, records, OPTS, seed=3)
    after = preference_margins(fresh, pairs, pad_id=enc.pad_id)
    assert res.trainer == "trl" and res.steps == 9 and res.loss_first == pytest.approx(math.log(2.0), abs=1e-4)
    assert float(np.mean(after - before)) > 0.5


def test_the_per_token_loss_divides_by_the_length_and_matches_trl(tiny: Path) -> None:
    """``loss: sigmoid_norm``: each completion's log-ratio divided by its token count (cross-checked against the
    sums and the pairs' lengths), trl's loss of the same name equal to the native one on a moved adapter, and a
    native round that raises the per-token margins."""
    trl = pytest.importorskip("trl")
    tok, enc, pairs, model = _moved(tiny)
    pc, pr = pair_logps(model, pairs, pad_id=enc.pad_id)
    nc, nr = pair_logps(model, pairs, pad_id=enc.pad_id, per_token=True)
    lc = np.array([len(p.chosen) for p in pairs])
    lr_ = np.array([len(p.rejected) for p in pairs])
    assert len(set(lc.tolist() + lr_.tolist())) > 1  # lengths differ: dividing is not a common factor
    np.testing.assert_allclose(nc * lc, pc, rtol=1e-5)
    np.testing.assert_allclose(nr * lr_, pr, rtol=1e-5)
    rc, rr = pair_logps(model, pairs, pad_id=enc.pad_id, reference=True, per_token=True)
    beta = 2.0
    native = float(dpo_loss(*(torch.tensor(x) for x in (nc, nr, rc, rr)), beta).mean())
    rcs, rrs = pair_logps(model, pairs, pad_id=enc.pad_id, reference=True)
    summed = float(dpo_loss(*(torch.tensor(x) for x in (pc, pr, rcs, rrs)), beta).mean())
    assert abs(native - summed) > 1e-3 and native < math.log(2.0) - 1e-4
    trainer = _trl_trainer(trl, model, tok, tiny / "trl-norm", beta, "sigmoid_norm")
    from privtext.learn.trl_backend import _base_reference

    _base_reference(trainer.model)
    model.eval()
    with torch.no_grad():
        theirs = float(trainer.compute_loss(model, next(iter(trainer.get_train_dataloader()))))
    assert theirs == pytest.approx(native, abs=1e-5)
    opts = OPTS.model_copy(update={"loss": "sigmoid_norm", "beta": beta})
    # the native round's first step (every pair in one batch) computes the same loss
    whole = opts.model_copy(update={"batch_size": len(pairs), "epochs": 1.0})
    assert train_dpo(model, pairs, whole, pad_id=enc.pad_id, rng=np.random.default_rng(2)).loss_first == \
        pytest.approx(native, abs=1e-5)

    fresh = attach_lora(_model(tiny), opts, rng=np.random.default_rng(0))
    before = np.subtract(*pair_logps(fresh, pairs, pad_id=enc.pad_id, per_token=True))
    res = train_dpo(fresh, pairs, opts, pad_id=enc.pad_id, rng=np.random.default_rng(1))
    after = np.subtract(*pair_logps(fresh, pairs, pad_id=enc.pad_id, per_token=True))
    assert res.loss_first == pytest.approx(math.log(2.0), abs=1e-6) and res.loss_last < res.loss_first
    assert (after > before).all(), (before, after)
    assert _recorded_trl_losses(trl, tok, opts, tiny) == [(["sigmoid_norm"], None)]  # trl is handed the same loss


def _recorded_trl_losses(trl, tok, opts: DPOOptions, tiny: Path) -> list:
    """(loss_type, loss_weights) of every DPOConfig that train_dpo_trl builds for ``opts``."""
    from privtext.learn import trl_backend

    seen: list = []

    class Recording(trl.DPOConfig):  # type: ignore[misc]
        def __post_init__(self) -> None:
            super().__post_init__()
            seen.append((list(self.loss_type), self.loss_weights))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trl, "DPOConfig", Recording)
        trl_backend.train_dpo_trl(attach_lora(_model(tiny), opts, rng=np.random.default_rng(0)), tok,
                                  pair_records(PAIRS, lambda p: PROMPT + " "), opts.model_copy(update={"epochs": 0.2}),
                                  seed=3)
    return seen


def test_rpo_adds_the_chosen_likelihood_matches_trl_and_holds_the_chosen_texts_up(tiny: Path) -> None:
    """``sft_weight`` α (RPO): the loss is Eq 7 + α·NLL per token of the chosen completions, equal to trl's
    [sigmoid, sft] with weights [1, α] and to the native round's first step; a round with it leaves the chosen texts
    more likely than the same round without it."""
    trl = pytest.importorskip("trl")
    tok, enc, pairs, model = _moved(tiny)
    alpha = 0.5
    pc, pr = pair_logps(model, pairs, pad_id=enc.pad_id)
    rc, rr = pair_logps(model, pairs, pad_id=enc.pad_id, reference=True)
    n_chosen = sum(len(p.chosen) for p in pairs)
    plain = float(dpo_loss(*(torch.tensor(x) for x in (pc, pr, rc, rr)), OPTS.beta).mean())
    native = plain - alpha * float(pc.sum()) / n_chosen
    assert native - plain > 1.0  # the NLL term is not negligible here
    trainer = _trl_trainer(trl, model, tok, tiny / "trl-rpo", OPTS.beta, sft=alpha)
    from privtext.learn.trl_backend import _base_reference

    _base_reference(trainer.model)
    model.eval()
    with torch.no_grad():
        theirs = float(trainer.compute_loss(model, next(iter(trainer.get_train_dataloader()))))
    assert theirs == pytest.approx(native, abs=1e-4)
    opts = OPTS.model_copy(update={"sft_weight": alpha})
    whole = opts.model_copy(update={"batch_size": len(pairs), "epochs": 1.0})
    assert train_dpo(model, pairs, whole, pad_id=enc.pad_id, rng=np.random.default_rng(2)).loss_first == \
        pytest.approx(native, abs=1e-4)
    chosen = {}
    for name, o in (("dpo", OPTS), ("rpo", opts)):
        fresh = attach_lora(_model(tiny), o, rng=np.random.default_rng(0))
        res = train_dpo(fresh, pairs, o, pad_id=enc.pad_id, rng=np.random.default_rng(1))
        assert res.steps == 9 and isinstance(res.steps, int)
        chosen[name] = pair_logps(fresh, pairs, pad_id=enc.pad_id)[0]
    assert (chosen["rpo"] > chosen["dpo"]).all(), chosen
    assert _recorded_trl_losses(trl, tok, opts, tiny) == [(["sigmoid", "sft"], [1.0, alpha])]


def test_the_lm_generator_writes_what_the_pairs_preferred(tmp_path: Path) -> None:
    """The small lm generator: DPO through its control codes (label Food) with 'soup' preferred over 'pizza' moves
    its own samples for that label towards soup (the adapters sit inside the generator's model)."""
    from privtext.generate.lm import LMSettings, build_public_lm
    from privtext.generate.lm.backend import LMGenerator, LMOptions
    from privtext.learn.encode import LMPairEncoder

    from .test_generate_lm import FOOD_L, TINY, make_corpus

    public = make_corpus(400)
    lm = build_public_lm(public.texts, public.labels, settings=LMSettings(**{**TINY, "epochs": 6.0}), cache=False)
    gen = LMGenerator(public=public.texts, labels=public.labels, options=LMOptions(**TINY), lm=lm)

    def share_soup(n: int = 300) -> tuple[int, int]:
        texts = gen.random(FOOD_L, n, rng=np.random.default_rng(9))
        return sum("soup" in t for t in texts), sum("pizza" in t for t in texts)

    soup0, pizza0 = share_soup()
    adjs = ["tasty", "spicy", "salty", "sweet", "fresh", "cold"]
    pairs = [PreferencePair(0, f"The soup was {a} and the {o} was {b}.", f"The pizza was {a} and the {o} was {b}.",
                            3.0, 0.0, "lm", "test")
             for a in adjs for b in adjs[:3] for o in ("bread", "cake")]
    enc = LMPairEncoder(lm.encoder, label_info=lambda g: FOOD_L, max_length=lm.n_positions)
    model = attach_lora(lm.model, DPOOptions(), rng=np.random.default_rng(0))
    opts = DPOOptions(beta=0.1, lr=3e-3, batch_size=8, epochs=2)
    res = train_dpo(model, enc.encode_all(pairs), opts, pad_id=enc.pad_id, rng=np.random.default_rng(1))
    assert res.loss_last < res.loss_first
    soup1, pizza1 = share_soup()
    # soup's share among soup-or-pizza texts rises; a two-proportion z-test at 1e-4 one-sided
    p0, p1 = soup0 / max(soup0 + pizza0, 1), soup1 / max(soup1 + pizza1, 1)
    n0, n1 = soup0 + pizza0, soup1 + pizza1
    pooled = (soup0 + soup1) / (n0 + n1)
    z = (p1 - p0) / math.sqrt(pooled * (1 - pooled) * (1 / n0 + 1 / n1))
    assert z > 3.72, (soup0, pizza0, soup1, pizza1)


@pytest.mark.gpu
def test_a_round_on_cuda_raises_the_margin(tiny: Path) -> None:
    """The native loop on a CUDA model (where a GPU is lent): the model's own device, the same signal."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    enc = _encoder(tiny)
    pairs = enc.encode_all(PAIRS)
    model = attach_lora(_model(tiny).to("cuda"), OPTS, rng=np.random.default_rng(0))
    before = preference_margins(model, pairs, pad_id=enc.pad_id)
    train_dpo(model, pairs, OPTS, pad_id=enc.pad_id, rng=np.random.default_rng(1))
    after = preference_margins(model, pairs, pad_id=enc.pad_id)
    assert all(p.device.type == "cuda" for p in lora_parameters(model))
    assert float(np.mean(after - before)) > 0.3
