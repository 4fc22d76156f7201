"""Trainable label codes for LoRA fine-tuning of the small public LM (``dpft.train_codes``).

LoRA trains adapters on the attention (or MLP) maps and freezes the token embeddings, so a label code's input
embedding stays where the public training (or, for a code the public corpus lacks, the words of its value) left
it: the fine-tuning can only learn to *read* the codes, never to move them. :class:`CodeDeltas` wraps the frozen
token embedding and adds a trainable vector to each code's row — ``k·d`` numbers for ``k`` codes, against the
``V·d`` of training the whole embedding (V ≈ 8 k, k = 15 on Yelp).

Privacy: the deltas are parameters like the adapters. Opacus computes their per-record gradients with its
``nn.Embedding`` grad sampler, the clipping bounds the norm of each record's gradient over *all* trainable
parameters together, deltas included, so the sensitivity of a step's sum stays C and nothing in the accounting
changes. There is no row for the other tokens: they look up a code's row and multiply it by 0, which adds
nothing to that row's gradient.

The output layer (tied to the input embedding in GPT-2) is not changed: the codes are given in every prompt and
never predicted when sampling.

This module imports torch at the top; it is imported only where a model is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


class CodeDeltas(torch.nn.Module):
    """``base(ids) + delta[slot(ids)]`` for the code ids (``slot`` maps them to ``0..k-1``), ``base(ids)`` for every
    other id. ``base`` stays frozen as it was given."""

    def __init__(self, base: torch.nn.Embedding, code_ids: Sequence[int]):
        super().__init__()
        ids = [int(i) for i in code_ids]
        if not ids or len(set(ids)) != len(ids):
            raise ValueError(f"code ids must be distinct and not empty, got {ids}")
        if min(ids) < 0 or max(ids) >= base.num_embeddings:
            raise ValueError(f"code ids {ids} outside the vocabulary of {base.num_embeddings}")
        self.base = base
        slot = torch.full((base.num_embeddings,), len(ids), dtype=torch.long, device=base.weight.device)
        slot[torch.as_tensor(ids, device=base.weight.device)] = torch.arange(len(ids), device=base.weight.device)
        self.register_buffer("slot", slot, persistent=False)
        self.delta = torch.nn.Embedding(len(ids), base.embedding_dim, device=base.weight.device,
                                        dtype=base.weight.dtype)
        torch.nn.init.zeros_(self.delta.weight)

    @property
    def weight(self) -> torch.Tensor:  # what code reading ``wte.weight`` expects: the frozen table
        return self.base.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        k = self.delta.num_embeddings
        s = self.slot[ids]
        on = (s < k).unsqueeze(-1).to(self.base.weight.dtype)
        return self.base(ids) + self.delta(s.clamp(max=k - 1)) * on


def attach_code_deltas(model: Any, code_ids: Sequence[int]) -> CodeDeltas:
    """Wrap a GPT-2-style ``model.transformer.wte`` in :class:`CodeDeltas` (in place) and return the wrapper."""
    wte = model.transformer.wte
    if isinstance(wte, CodeDeltas):
        raise ValueError("the model's token embedding already has code deltas")
    wrapped = CodeDeltas(wte, code_ids)
    model.transformer.wte = wrapped
    return wrapped


__all__ = ["CodeDeltas", "attach_code_deltas"]
