"""Learning from the released votes with the ``vllm`` generator (docs/learn.md, "vLLM").

vLLM serves the weights; it does not train them. So each DPO round trains a LoRA adapter on the Hugging Face weights
of the *same* model (``generator.model``), loaded with transformers in :mod:`privtext.learn.worker` — a subprocess
started by :mod:`privtext.learn.launch` (``accelerate launch --num_processes K``, ``K = learn.dpo.devices``; K = 1
included, so the training copy of the weights leaves the GPU when the round ends, and vLLM, which keeps its memory,
never shares a process with the trainer). The worker writes the round's adapter into the step folder three ways:

* ``adapter.npz`` + ``adapter.json`` (:mod:`.adapter`): the checkpoint the next round continues and a resume reads;
* ``peft/`` (``PeftModel.save_pretrained``: ``adapter_config.json`` + ``adapter_model.safetensors``): what vLLM's
  LoRA serving loads;
* ``merged/`` (only with ``learn.dpo.serve: merge``): the adapter merged into a copy of the weights
  (``merge_and_unload``), in the base checkpoint's dtype, with its tokenizer.

**Which way the generator uses it.** ``serve: lora`` (the default) — the engine was started with
``enable_lora: true`` and every generate call from then on carries ``LoRARequest("privtext-iter-NNN", NNN + 1,
step/peft)`` (a new id per round: vLLM caches an adapter by its id). Chosen because the base weights stay loaded:
switching adapters costs a few megabytes of reading, not a restart of the engine (minutes, and vLLM does not
reliably hand the old engine's GPU memory back inside one process), and the checkpoint per round is the adapter,
not a full copy of the model. ``serve: merge`` is the fallback for models vLLM has no LoRA support for: the engine
restarts on ``step/merged`` (lazily, at the next generate call), at the cost of one full checkpoint per round on
disk.

**Resume.** A step whose ``learn.json`` exists is restored: the generator is pointed at its ``peft/`` (or
``merged/``, re-merged from ``peft/`` when that folder was deleted) and nothing is trained; the next round continues
from its ``adapter.npz``. Like the other learners' steps, a round depends only on the adapter it starts from, its
pairs and its seeded order, so a step interrupted before ``learn.json`` is trained again to the same adapter.

Post-processing: the worker's inputs are ``pair_records`` of pairs built from released values and guard-checked
generated text (:meth:`~privtext.learn.step.DPOLearner.step`), so the adapter (in any of its three forms) holds
nothing private.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ..atomicio import atomic_dir
from ..errors import ConfigError
from .devices import visible_cuda_devices
from .pairs import PreferencePair
from .step import DPOLearner, Learner

PEFT = "peft"
MERGED = "merged"


def export_peft(model: Any, out: str | Path) -> Path:
    """``model``'s adapter in peft's own format (``adapter_config.json`` + ``adapter_model.safetensors``), the
    folder vLLM's ``LoRARequest`` loads."""
    out = Path(out)
    with atomic_dir(out) as tmp:
        model.save_pretrained(str(tmp))
    return out


def merge_adapter(model: Any, out: str | Path, *, tokenizer: Any = None, dtype: Any = None) -> Path:
    """Merge ``model``'s adapter into its weights (peft ``merge_and_unload``: W + (α/r)·B·A, the model is consumed)
    and save the result as a plain Hugging Face checkpoint in ``out`` (with ``tokenizer``; cast to ``dtype``, the
    base checkpoint's, when given)."""
    merged = model.merge_and_unload()
    if dtype is not None:
        merged = merged.to(dtype)
    out = Path(out)
    with atomic_dir(out) as tmp:
        merged.save_pretrained(str(tmp))
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
    return out


def base_dtype(model: Any) -> Any:
    """The dtype the base checkpoint was saved in (its config's), or None."""
    import torch

    cfg = getattr(model, "config", None)
    d = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None)
    if isinstance(d, str):
        d = getattr(torch, d, None)
    return d if isinstance(d, torch.dtype) else None


def merge_from_folder(base: str, peft_dir: str | Path, out: str | Path) -> Path:
    """Rebuild ``out`` (a merged checkpoint) from the base model ``base`` and the adapter in ``peft_dir``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    plain = AutoModelForCausalLM.from_pretrained(base)
    dtype = base_dtype(plain)
    model = PeftModel.from_pretrained(plain, str(peft_dir))
    return merge_adapter(model, out, tokenizer=AutoTokenizer.from_pretrained(base), dtype=dtype)


class VLLMDPOLearner(DPOLearner):
    """DPO for the ``vllm`` generator (module docstring): every round in :mod:`privtext.learn.worker` through
    :mod:`privtext.learn.launch`, the result served by the generator's LoRA support or merged and reloaded."""

    kind = "dpo"

    def __init__(self, generator: Any, options: Any, **kw: Any):
        Learner.__init__(self, generator, options, **kw)
        o = options.dpo
        if o.trainer == "native":
            raise ConfigError("evolution.learn.dpo.trainer: native trains a model in this process; the vllm "
                              "generator's weights train through trl in privtext.learn.worker (use trainer: auto)")
        self.backend = "vllm"
        self.trainer = "trl"
        self.serve = o.serve
        if self.serve == "lora" and not generator.lora_enabled:
            raise ConfigError("evolution.learn.dpo.serve: lora needs the vllm generator started with LoRA serving: "
                              "set generator.enable_lora: true (or evolution.learn.dpo.serve: merge)")
        from .trl_backend import require_trl

        require_trl()
        self.model = None  # no training copy of the weights in this process
        self.threads = o.threads
        #: the last step folder with an adapter: the next round continues it
        self.last: Path | None = None

    @property
    def base_model(self) -> str:
        return str(self.generator.options.model)

    def restore_step(self, folder: Path, iteration: int) -> None:
        """A finished step (``learn.json``) is served again, never retrained."""
        self.serve_step(folder, iteration)

    def save_step(self, folder: Path, iteration: int, pairs: int) -> None:
        """Nothing to do: the worker wrote the adapter (and ``peft/``, ``merged/``) into the step folder."""

    def use_step(self, folder: Path, iteration: int) -> None:
        """vLLM generates with the step's adapter from now on (:meth:`serve_step`)."""
        self.serve_step(folder, iteration)

    def train(self, iteration: int, pairs: list[PreferencePair], folder: Path | None = None) -> dict[str, Any]:
        """The round in the worker: continues the last step's adapter (a fresh one, seeded, for the first),
        writes ``adapter.npz``, ``peft/`` (and ``merged/``) into ``folder``. No pairs: nothing trained, the
        generator keeps the adapter it has."""
        from .adapter import adapter_meta
        from .launch import LAUNCH, launch_round, round_result

        if not pairs:
            return {"steps": 0}
        if folder is None:
            raise ConfigError("the vllm learner trains into a step folder")
        o = self.options.dpo
        cpu = o.device == "cpu" or (o.device == "auto" and visible_cuda_devices() == 0)
        pause = getattr(self.generator, "paused", None)
        with pause() if pause is not None else contextlib.nullcontext():
            launch_round(self, iteration, pairs, folder / LAUNCH, model=self.base_model, adapter_out=folder,
                         adapter_in=self.last, processes=o.devices, cpu=cpu, peft_out=folder / PEFT,
                         merged_out=folder / MERGED if self.serve == "merge" else None)
        return round_result(adapter_meta(folder) or {}, o.devices)

    def serve_step(self, folder: Path, iteration: int) -> None:
        """Point the generator at the adapter of the step in ``folder`` (none trained there: nothing changes)."""
        peft_dir = folder / PEFT
        if not (peft_dir / "adapter_config.json").exists():
            return
        self.last = folder
        if self.serve == "lora":
            self.generator.use_adapter(peft_dir, name=f"privtext-iter-{iteration:03d}", lora_id=iteration + 1)
        else:
            merged = folder / MERGED
            if not (merged / "config.json").exists():
                merge_from_folder(self.base_model, peft_dir, merged)
            self.generator.reload(merged)


__all__ = ["MERGED", "PEFT", "VLLMDPOLearner", "base_dtype", "export_peft", "merge_adapter", "merge_from_folder"]
