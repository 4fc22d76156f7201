"""The lm generator's model and training pieces under Opacus' per-sample gradients (what DP fine-tuning needs).

Skipped where Opacus is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
opacus = pytest.importorskip("opacus")

from privtext.generate.lm import PAD, build_model, collate, model_shape, sequence_losses  # noqa: E402

SEQ_LENGTHS = (5, 12, 9, 3)


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    shape = model_shape("tiny", n_positions=32, vocab_size=300)
    return build_model(shape, vocab_size=300, bos_id=0, eos_id=1, pad_id=PAD)


def records() -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [[int(x) for x in rng.integers(10, 300, n)] for n in SEQ_LENGTHS]


def test_per_sample_gradients_equal_one_record_gradients() -> None:
    """GradSampleModule over the GPT-2 (Embedding, LayerNorm, Conv1D through functorch, the tied head) gives, for
    each record of a padded batch, the gradient of that record's own loss computed alone."""
    model = tiny_model()
    seqs = records()
    gs = opacus.GradSampleModule(model, loss_reduction="mean")
    sequence_losses(gs, collate(seqs, pad_id=PAD)).mean().backward()
    per = {n: p.grad_sample.detach().clone() for n, p in model.named_parameters()}
    assert all(g.shape[0] == len(seqs) for g in per.values())
    for i, s in enumerate(seqs):
        model.zero_grad(set_to_none=True)
        for p in model.parameters():
            p.grad_sample = None
        sequence_losses(model, collate([s], pad_id=PAD)).mean().backward()
        for n, p in model.named_parameters():
            scale = float(p.grad.abs().max()) + 1e-12
            assert float((per[n][i] - p.grad).abs().max()) / scale < 1e-4, (i, n)


def test_without_explicit_position_ids_the_position_gradients_are_not_per_sample() -> None:
    """Why :func:`collate` passes ``position_ids``: GPT-2 builds them with batch size 1 otherwise, and Opacus then
    has no per-sample gradient of the position embedding (the planted fault)."""
    model = tiny_model()
    seqs = records()
    gs = opacus.GradSampleModule(model, loss_reduction="mean")
    batch = collate(seqs, pad_id=PAD)
    out = gs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    logits, target = out.logits[:, :-1], batch["labels"][:, 1:]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                            ignore_index=-100, reduction="none").view(target.shape)
    keep = target != -100
    ((nll * keep).sum(1) / keep.sum(1)).mean().backward()
    assert model.transformer.wpe.weight.grad_sample.shape[0] != len(seqs)
