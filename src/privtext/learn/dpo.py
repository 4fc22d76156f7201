"""Direct preference optimisation on LoRA adapters, in plain torch (the ``native`` trainer).

The loss (Rafailov et al. 2023, "Direct Preference Optimization", Eq 7)::

    L(θ) = −E_(x, y_w, y_l) log σ( β·[ log πθ(y_w|x) − log π_ref(y_w|x) ] − β·[ log πθ(y_l|x) − log π_ref(y_l|x) ] )

with log π(y|x) the summed log-probability of the completion's tokens given the prompt, y_w the chosen and y_l the
rejected text. β (default 0.01, POPri's) scales the implicit reward; a smaller β lets the policy move further
from the reference.

``loss: sigmoid_norm`` (trl's name for it; the length normalisation of SimPO, Meng et al. 2024, Eq 4, kept with
DPO's reference) divides each log-ratio by its completion's token count |y|::

    L(θ) = −E log σ( β·[ log πθ(y_w|x) − log π_ref(y_w|x) ] / |y_w| − β·[ log πθ(y_l|x) − log π_ref(y_l|x) ] / |y_l| )

The summed reward of Eq 7 can be raised by a drift that moves every token's log-probability the same way, which
favours the shorter text of a pair whatever it says; the per-token reward cannot (docs/learn.md, "On Yelp"). The
per-token log-ratios are about |y| times smaller than the sums, so β must be about |y| times larger for the same
step (≈ 0.5–2 for completions of 50–100 tokens, against 0.01).

``sft_weight`` α > 0 adds the chosen completions' negative log-likelihood per token (RPO, Pang et al. 2024,
"Iterative Reasoning Preference Optimization", Eq 3; trl's ``loss_type: [sigmoid, sft]`` with ``loss_weights:
[1, α]``)::

    L_RPO(θ) = L(θ) − α · Σ_batch log πθ(y_w|x) / Σ_batch |y_w|

DPO can widen the gap between chosen and rejected while lowering both, moving the model away from every text it
was shown (on Yelp both fell by about a nat per token: docs/compare.md); the added term holds the chosen texts up.

**The reference is always the original base model.** The policy is the base model with LoRA adapters
(Hu et al. 2021; :func:`attach_lora`, through peft) and the adapters are the only trainable weights, so the base
model with its adapters switched off (``model.disable_adapter()``) *is* the original model, in every round: the
adapters carry over from round to round (POPri continues training one adapter) while the reference never moves.
The reference log-probabilities of a round's pairs are computed once, before its first step.

One round (:func:`train_dpo`): ``epochs`` passes (default one) over the round's pairs in a random order (the
``rng`` given: public randomness), ``batch_size`` pairs per AdamW step at a constant learning rate, gradients
clipped to ``max_grad_norm``. A new optimiser is made every round, so what a round does depends only on the
adapter it starts from, its pairs and its ``rng``: a resumed run that reloads the adapter of the last finished
round (:mod:`privtext.learn.adapter`) trains the next round exactly as an uninterrupted one would. The model runs
in eval mode (no dropout): the policy and the reference see the same network. The round shows a progress bar with
its ETA (:func:`privtext.progress.progress`) and the running loss.

Devices: the model's own device (CPU here; a CUDA model trains on its GPU). Several GPUs: the ``trl`` trainer under
``accelerate launch`` (docs/learn.md); this loop is one process.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, MissingDependencyError
from ..progress import progress
from ..rng import spawn_seed
from .encode import TokenPair
from .options import DPOOptions


def _peft() -> Any:
    try:
        import peft
    except ImportError:
        raise MissingDependencyError("peft", "learn", "DPO on LoRA adapters") from None
    return peft


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "learn", "DPO on LoRA adapters") from None
    return torch


def is_lora_model(model: Any) -> bool:
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


def attach_lora(model: Any, options: DPOOptions, *, rng: np.random.Generator) -> Any:
    """``model`` with LoRA adapters (peft's ``PeftModel``; a model that already has them is returned as it is).
    peft injects the adapter layers into ``model``'s own modules, so a generator holding ``model`` samples from
    the adapted model from then on. The adapters' initial weights (A random, B zero: the adapted model starts equal
    to the base) are drawn from a torch generator seeded from ``rng``; torch's global state is restored."""
    if is_lora_model(model):
        return model
    peft = _peft()
    torch = _torch()
    o = options
    cfg = peft.LoraConfig(r=o.lora_r, lora_alpha=o.lora_alpha, lora_dropout=0.0, bias="none",
                          target_modules=o.target_modules, task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spawn_seed(rng))
        wrapped = peft.get_peft_model(model, cfg)
    wrapped.eval()
    return wrapped


def lora_parameters(model: Any) -> list[Any]:
    return [p for n, p in model.named_parameters() if p.requires_grad and "lora_" in n]


# ------------------------------------------------------------------ log-probabilities and the loss


def collate_pairs(pairs: Sequence[TokenPair], *, pad_id: int, device: Any) -> dict[str, Any]:
    """One right-padded batch of 2B sequences: the B chosen (prompt + chosen), then the B rejected; ``mask`` marks
    the completion tokens (the positions whose log-probability counts)."""
    torch = _torch()
    seqs = [list(p.prompt) + list(p.chosen) for p in pairs] + [list(p.prompt) + list(p.rejected) for p in pairs]
    comp = [(len(p.prompt), len(p.chosen)) for p in pairs] + [(len(p.prompt), len(p.rejected)) for p in pairs]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for r, (s, (start, n)) in enumerate(zip(seqs, comp, strict=True)):
        ids[r, :len(s)] = torch.as_tensor(s, dtype=torch.long)
        att[r, :len(s)] = 1
        mask[r, start:start + n] = True
    pos = torch.arange(width, dtype=torch.long).unsqueeze(0).expand(len(seqs), width).contiguous()
    return {"input_ids": ids.to(device), "attention_mask": att.to(device), "position_ids": pos.to(device),
            "mask": mask.to(device)}


def completion_tokens(batch: dict[str, Any]) -> Any:
    """Each sequence's number of scored completion tokens (at least 1): the |y| of ``loss: sigmoid_norm`` and RPO."""
    return batch["mask"][:, 1:].sum(dim=1).clamp(min=1)


def sequence_logps(model: Any, batch: dict[str, Any], *, per_token: bool = False) -> Any:
    """Σ log p(token | everything before it) over each sequence's completion tokens: a (2B,) tensor (``per_token``:
    divided by the number of those tokens, ``loss: sigmoid_norm``)."""
    torch = _torch()
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                position_ids=batch["position_ids"])
    logits = out.logits[:, :-1].float()
    target = batch["input_ids"][:, 1:]
    keep = batch["mask"][:, 1:]
    tok = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    total = (tok * keep).sum(dim=1)
    return total / completion_tokens(batch) if per_token else total


def dpo_loss(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any, ref_rejected: Any, beta: float) -> Any:
    """Eq 7 per pair: −log σ(β·((πc − rc) − (πr − rr))), on summed completion log-probabilities (a (B,) tensor)."""
    torch = _torch()
    logits = beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected))
    return -torch.nn.functional.logsigmoid(logits)


def _batches(n: int, size: int) -> list[slice]:
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


def pair_logps(model: Any, pairs: Sequence[TokenPair], *, pad_id: int, batch_size: int = 16,
               reference: bool = False, per_token: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(chosen, rejected) summed completion log-probabilities of every pair under ``model`` (``reference``: with
    its LoRA adapters switched off, i.e. under the original base model; ``per_token``: each divided by its
    completion's token count), without gradients."""
    torch = _torch()
    device = next(model.parameters()).device
    ch, rj = [], []
    ctx = model.disable_adapter() if reference else contextlib.nullcontext()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), ctx:
            for sl in _batches(len(pairs), batch_size):
                chunk = pairs[sl]
                lp = sequence_logps(model, collate_pairs(chunk, pad_id=pad_id, device=device), per_token=per_token)
                ch.append(lp[:len(chunk)].double().cpu().numpy())
                rj.append(lp[len(chunk):].double().cpu().numpy())
    finally:
        model.train(was_training)
    if not ch:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(ch), np.concatenate(rj)


def preference_margins(model: Any, pairs: Sequence[TokenPair], *, pad_id: int, batch_size: int = 16
                       ) -> np.ndarray:
    """log π(chosen|x) − log π(rejected|x) per pair under ``model`` as it is (adapters on)."""
    c, r = pair_logps(model, pairs, pad_id=pad_id, batch_size=batch_size)
    return c - r


# ------------------------------------------------------------------ one round


@dataclass
class DPOResult:
    """What one round of DPO did (public: counts, timings, losses of released-value-derived pairs)."""

    pairs: int
    steps: int
    seconds: float
    loss_first: float  # mean loss of the round's first step (log 2 ≈ 0.693 when the policy equals the reference)
    loss_mean: float
    loss_last: float
    reward_accuracy: float  # share of the round's pairs whose implicit reward already favoured chosen, per step
    trainer: str = "native"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def optimiser_steps(pairs: int, options: DPOOptions, *, processes: int = 1) -> int:
    """The optimiser steps of one round: ``epochs × ⌈pairs / (processes × batch_size)⌉``. ``batch_size`` is per
    process (trl's ``per_device_train_batch_size``): under ``accelerate launch`` with K processes each step averages
    the gradients of K batches, one per process, so a round takes K times fewer steps than in one process (accelerate
    pads the last step's batches with pairs from the start of the epoch: ``even_batches``)."""
    per_epoch = math.ceil(pairs / (max(1, int(processes)) * options.batch_size))
    return max(1, math.ceil(options.epochs * per_epoch))


def train_dpo(model: Any, pairs: Sequence[TokenPair], options: DPOOptions, *, pad_id: int,
              rng: np.random.Generator, description: str = "learning: DPO") -> DPOResult:
    """One round of DPO on ``model``'s LoRA adapters (the module docstring). ``model`` must carry adapters
    (:func:`attach_lora`); its mode (eval/train) is restored afterwards."""
    torch = _torch()
    if not is_lora_model(model):
        raise ConfigError("train_dpo trains LoRA adapters: wrap the model with attach_lora first")
    o = options
    t0 = time.perf_counter()
    n = len(pairs)
    if n == 0:
        return DPOResult(0, 0, 0.0, math.nan, math.nan, math.nan, math.nan)
    from ..backends.hardware import torch_threads

    params = lora_parameters(model)
    if not params:
        raise ConfigError("the model's LoRA adapters have no trainable weight")
    device = next(model.parameters()).device
    was_training = model.training
    total = optimiser_steps(n, o)
    losses: list[float] = []
    right: list[float] = []
    norm = o.loss == "sigmoid_norm"
    with torch_threads(o.threads), progress(description, total) as bar:
        ref_c, ref_r = pair_logps(model, pairs, pad_id=pad_id, batch_size=max(o.batch_size, 16), reference=True,
                                  per_token=norm)
        opt = torch.optim.AdamW(params, lr=o.lr, weight_decay=o.weight_decay)
        model.eval()
        try:
            order: list[int] = []
            for _ in range(total):
                if not order:
                    order = rng.permutation(n).tolist()
                take, order = order[:o.batch_size], order[o.batch_size:]
                chunk = [pairs[i] for i in take]
                batch = collate_pairs(chunk, pad_id=pad_id, device=device)
                summed = sequence_logps(model, batch)
                tokens = completion_tokens(batch)
                lp = summed / tokens if norm else summed
                rc = torch.as_tensor(ref_c[take], dtype=lp.dtype, device=device)
                rr = torch.as_tensor(ref_r[take], dtype=lp.dtype, device=device)
                per = dpo_loss(lp[:len(chunk)], lp[len(chunk):], rc, rr, o.beta)
                loss = per.mean()
                if o.sft_weight:  # RPO: + α · the chosen completions' negative log-likelihood per token
                    loss = loss - o.sft_weight * summed[:len(chunk)].sum() / tokens[:len(chunk)].sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if o.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(params, o.max_grad_norm)
                opt.step()
                losses.append(float(loss.detach()))
                right.append(float((per.detach() < math.log(2)).float().mean()))
                bar.advance(1)
                bar.note(f"loss {np.mean(losses[-10:]):.4f}")
        finally:
            model.train(was_training)
    return DPOResult(pairs=n, steps=total, seconds=time.perf_counter() - t0, loss_first=losses[0],
                     loss_mean=float(np.mean(losses)), loss_last=losses[-1], reward_accuracy=float(np.mean(right)))


__all__ = ["DPOResult", "attach_lora", "collate_pairs", "dpo_loss", "is_lora_model", "lora_parameters",
           "optimiser_steps", "pair_logps", "preference_margins", "sequence_logps", "train_dpo"]
