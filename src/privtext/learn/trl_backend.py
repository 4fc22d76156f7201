"""One round of DPO through trl's ``DPOTrainer`` (``dpo.trainer: trl``), for Hugging Face causal LMs.

trl (pinned in the ``learn`` extra) takes the pairs as text, ``{"prompt", "chosen", "rejected"}``
(:func:`privtext.learn.pairs.pair_records`, the prompt rendered as the generator renders it), tokenises them with
the model's tokenizer and trains the LoRA adapters already attached (:func:`privtext.learn.dpo.attach_lora`): given a
``PeftModel`` and no ``ref_model``, trl 1.16 would copy the current adapter into a frozen ``ref`` adapter and use
the previous round's model as the reference; :func:`_base_reference` deletes that copy, so trl computes the
reference with the adapters switched off — the original base model, every round, as in the native loop and in
POPri's code (``tests/test_learn_dpo.py`` checks trl's loss against the native Eq 7 with the base as reference). The settings mirror the native trainer's: β,
epochs, learning rate (constant), batch size, weight decay, gradient clipping; no dropout (trl disables it), no
gradient checkpointing, fp32 on the CPU.

Why it is not the default for the ``lm`` generator: trl re-tokenises ``prompt + completion`` strings, while the
small LM is conditioned on control-code id sequences its :class:`~privtext.generate.lm.codes.ControlEncoder` builds
word by word; the native loop trains on exactly those ids (:mod:`privtext.learn.encode`). trl's multi-GPU path is
the reason to use it: run the same script under ``accelerate launch --num_processes K`` (docs/learn.md).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, MissingDependencyError
from ..progress import progress
from .dpo import DPOResult, is_lora_model, optimiser_steps
from .options import DPOOptions


def require_trl() -> Any:
    """trl's module, or :class:`MissingDependencyError` with the install line of the ``learn`` extra."""
    try:
        import trl
    except ImportError:
        raise MissingDependencyError("trl", "learn", "DPO with trl's DPOTrainer (dpo.trainer: trl)") from None
    return trl


def train_dpo_trl(model: Any, tokenizer: Any, records: Sequence[dict[str, str]], options: DPOOptions, *,
                  seed: int, description: str = "learning: DPO (trl)", device: str | None = None) -> DPOResult:
    """One round of DPO on ``model``'s adapters with trl (module docstring). ``records``: trl's preference format.
    ``device``: ``cpu`` or ``cuda`` (default: where the model is; under ``accelerate launch`` pass ``cuda`` and every
    process trains on its own GPU)."""
    trl = require_trl()
    try:
        import torch
        from datasets import Dataset
        from datasets.utils import logging as datasets_logging
        from transformers import PrinterCallback, TrainerCallback
    except ImportError:
        raise MissingDependencyError("datasets", "learn", "DPO with trl's DPOTrainer") from None
    if not is_lora_model(model):
        raise ConfigError("trl's DPO here trains LoRA adapters: wrap the model with attach_lora first")
    o = options
    n = len(records)
    if n == 0:
        return DPOResult(0, 0, 0.0, math.nan, math.nan, math.nan, math.nan, trainer="trl")
    if tokenizer.pad_token is None:  # GPT-2 has none: pad with the end token (masked out by trl)
        tokenizer.pad_token = tokenizer.eos_token
    total = optimiser_steps(n, o, processes=_processes())
    losses: list[float] = []
    steps = 0
    accuracy: list[float] = []
    t0 = time.perf_counter()
    was_training = model.training

    with progress(description, total) as bar, tempfile.TemporaryDirectory(prefix="privtext-dpo-") as out:

        class _Progress(TrainerCallback):  # type: ignore[misc]
            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                bar.advance(1)

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
                if logs and "loss" in logs:
                    losses.append(float(logs["loss"]))
                    bar.note(f"loss {losses[-1]:.4f}")
                key = next((k for k in (logs or {}) if k.endswith("rewards/accuracies")), None)
                if key is not None:
                    accuracy.append(float(logs[key]))

        where = device or next(model.parameters()).device.type
        cuda = where.startswith("cuda") and torch.cuda.is_available()
        args = trl.DPOConfig(
            output_dir=out, beta=o.beta, loss_type=[o.loss] + (["sft"] if o.sft_weight else []),
            loss_weights=[1.0, o.sft_weight] if o.sft_weight else None, num_train_epochs=o.epochs,
            per_device_train_batch_size=o.batch_size,
            learning_rate=o.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=o.weight_decay,
            max_grad_norm=o.max_grad_norm if o.max_grad_norm is not None else 0.0, max_length=o.max_length,
            logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, seed=int(seed) % (2**31),
            data_seed=int(seed) % (2**31), bf16=False, fp16=False, gradient_checkpointing=False,
            use_cpu=not cuda, dataloader_num_workers=0, remove_unused_columns=False)
        bars = datasets_logging.is_progress_bar_enabled()
        datasets_logging.disable_progress_bar()  # its "Tokenizing" bars: privtext's display shows the round
        try:
            trainer = trl.DPOTrainer(model=model, ref_model=None, args=args, processing_class=tokenizer,
                                     train_dataset=Dataset.from_list([dict(r) for r in records]),
                                     callbacks=[_Progress()])
            trainer.remove_callback(PrinterCallback)  # it prints every log line to stdout
            _base_reference(trainer.model)
            trainer.train()
            steps = int(trainer.state.global_step)  # trl's own count: K processes take K times fewer
        finally:
            if bars:
                datasets_logging.enable_progress_bar()
    model.train(was_training)
    if not was_training:
        model.eval()
    return DPOResult(pairs=n, steps=steps, seconds=time.perf_counter() - t0,
                     loss_first=losses[0] if losses else math.nan,
                     loss_mean=float(sum(losses) / len(losses)) if losses else math.nan,
                     loss_last=losses[-1] if losses else math.nan,
                     reward_accuracy=float(sum(accuracy) / len(accuracy)) if accuracy else math.nan, trainer="trl")


def _processes() -> int:
    """How many processes train this round: ``WORLD_SIZE``, which ``accelerate launch`` (torchrun) sets for every
    process it starts; 1 in a run's own process. (Read from the environment: creating accelerate's state here would
    fix its device before trl's Trainer chooses one.)"""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _base_reference(model: Any) -> None:
    """Make trl's reference the original base model. Given a ``PeftModel`` whose adapter was already trained, trl
    1.16 copies that adapter into a frozen ``ref`` adapter and uses it as the reference, i.e. the previous round's
    model; POPri's reference (and issue 38's) is the original model. Without a ``ref`` adapter trl computes the
    reference with every adapter switched off (``use_adapter(model, None)`` → ``disable_adapter()``), which is the
    base model: so the copy is deleted."""
    base = getattr(model, "module", model)  # unwrapped (accelerate may wrap it)
    if "ref" in getattr(base, "peft_config", {}):
        base.delete_adapter("ref")
        base.set_adapter("default")


__all__ = ["require_trl", "train_dpo_trl"]
