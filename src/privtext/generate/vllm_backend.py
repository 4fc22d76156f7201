"""vLLM's offline engine as a generator (``backend: vllm``; needs a CUDA GPU and ``pip install 'privtext[vllm]'``).

All prompts of a call go to one ``LLM.generate`` (vLLM batches them continuously), with prefix caching on by
default (every request of a run shares the prompt family's system message and template), and one
``SamplingParams`` per request, each carrying its own
``seed`` drawn from the caller's ``rng`` (so results do not depend on batching). Prompts use the tokenizer's chat
template when it has one (``chat_template: auto``). For a vLLM *server*, use ``backend: openai`` with its
``base_url``.

With learning (``evolution.learn: {kind: dpo}``, docs/learn.md "vLLM") the weights vLLM serves are trained between
iterations by :class:`privtext.learn.vllm.VLLMDPOLearner`, which hands the generator each round's adapter:

* ``enable_lora: true`` (the default way, ``learn.dpo.serve: lora``): the engine starts with vLLM's LoRA serving
  (``enable_lora``, ``max_lora_rank``, ``max_loras: 1``) and :meth:`VLLMGenerator.use_adapter` makes every later
  ``generate`` call carry a ``LoRARequest(name, id, path)`` for the adapter saved in peft's format — a new id per
  round, since vLLM caches an adapter by its id;
* ``learn.dpo.serve: merge`` (the fallback, for models vLLM cannot serve LoRA on): :meth:`VLLMGenerator.reload`
  restarts the engine on a checkpoint with the adapter merged into the weights — lazily, at the next generate
  call, so a resume that restores several finished rounds starts vLLM once;
* ``sleep_while_learning: true``: the engine starts with ``enable_sleep_mode`` and :meth:`VLLMGenerator.paused`
  puts it to sleep (level 1: weights to CPU memory, KV cache dropped) while the round trains on the same GPU.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from ..errors import BackendError, optional_import
from ..rng import spawn_seed
from .base import LocalModelOptions, PromptedGenerator, check_local_model
from .prompts import Prompt


class VLLMOptions(LocalModelOptions):
    """Options of the ``vllm`` generator (CUDA GPU only), besides :class:`~privtext.generate.base.LocalModelOptions`
    (whose temperature may be 0 here: greedy decoding)."""

    temperature: float = Field(default=1.0, ge=0, description="0: greedy decoding")
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1)
    max_tokens: int = Field(default=256, ge=1)
    min_tokens: int = Field(default=1, ge=0)
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)
    stop: list[str] | None = None
    enable_prefix_caching: bool = Field(default=True, description="reuse the KV cache of shared prompt prefixes (a "
                                        "prompt family's system message and template: every request shares them)")
    engine_kwargs: dict[str, Any] | None = Field(default=None, description="extra keyword arguments for vllm.LLM")
    enable_lora: bool = Field(default=False, description="start vLLM with LoRA serving, so that a learning run "
                              "(evolution.learn.kind: dpo, dpo.serve: lora) writes with each round's adapter")
    max_lora_rank: int = Field(default=16, ge=1, description="vLLM's max_lora_rank (≥ evolution.learn.dpo.lora_r)")
    sleep_while_learning: bool = Field(default=False, description="start vLLM with enable_sleep_mode and put it to "
                                       "sleep (weights to CPU memory) while a learning round trains on the GPU")


def sampling_params(vllm: Any, options: VLLMOptions, seed: int) -> Any:
    """Map the options to one ``vllm.SamplingParams`` (one per request, each with its own seed)."""
    kw: dict[str, Any] = {
        "n": 1,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "top_k": options.top_k if options.top_k > 0 else -1,  # vLLM: -1 disables top-k
        "max_tokens": options.max_tokens,
        "min_tokens": options.min_tokens,
        "repetition_penalty": options.repetition_penalty,
        "frequency_penalty": options.frequency_penalty,
        "presence_penalty": options.presence_penalty,
        "seed": int(seed),
    }
    if options.stop:
        kw["stop"] = list(options.stop)
    return vllm.SamplingParams(**kw)


class VLLMGenerator(PromptedGenerator):
    backend = "vllm"
    Options = VLLMOptions

    def __init__(self, *, options: VLLMOptions, llm: Any = None, **kw: Any):
        super().__init__(options=options, **kw)
        o = options
        self._vllm = optional_import("vllm", "vllm", "the vllm generator (CUDA GPU only)")
        #: the weights the engine serves: options.model, or a merged checkpoint after :meth:`reload`
        self.served_model = o.model
        self._pending_model: str | None = None
        #: the LoRARequest every generate call carries (:meth:`use_adapter`), None for the base weights
        self.lora_request: Any = None
        self.llm = llm if llm is not None else self._start(o.model)
        self.tokenizer = self.llm.get_tokenizer()
        self.use_chat = self._choose_chat(o.chat_template, o.model)

    def engine_kwargs(self, model: str) -> dict[str, Any]:
        """The keyword arguments of ``vllm.LLM`` for ``model`` (the tokenizer stays the configured one)."""
        o = self.options
        kw: dict[str, Any] = {
            "model": model, "tokenizer": o.tokenizer or o.model, "dtype": o.dtype,
            "tensor_parallel_size": o.tensor_parallel_size, "gpu_memory_utilization": o.gpu_memory_utilization,
            "trust_remote_code": o.trust_remote_code, "enable_prefix_caching": o.enable_prefix_caching,
        }
        if o.enable_lora:
            kw.update(enable_lora=True, max_lora_rank=o.max_lora_rank, max_loras=1)
        if o.sleep_while_learning:
            kw["enable_sleep_mode"] = True
        kw.update(o.engine_kwargs or {})
        if o.max_model_len:
            kw["max_model_len"] = o.max_model_len
        return kw

    def _start(self, model: str) -> Any:
        try:
            return self._vllm.LLM(**self.engine_kwargs(model))
        except Exception as e:  # vLLM raises many kinds (no GPU, OOM, unknown model)
            raise BackendError(f"cannot start vLLM for {model!r}: {type(e).__name__}: {e}") from None

    # ------------------------------------------------------------------ learning (privtext.learn.vllm)
    @property
    def lora_enabled(self) -> bool:
        return bool(self.options.enable_lora or (self.options.engine_kwargs or {}).get("enable_lora"))

    def use_adapter(self, path: str | Path, *, name: str, lora_id: int) -> Any:
        """Every later generate call carries ``LoRARequest(name, lora_id, path)``: the adapter saved in peft's
        format in ``path``. ``lora_id`` must be new for new weights (vLLM caches an adapter by its id)."""
        if not self.lora_enabled:
            raise BackendError("the vllm generator was started without LoRA serving: set generator.enable_lora: "
                               "true (or evolution.learn.dpo.serve: merge)")
        if not (Path(path) / "adapter_config.json").exists():
            raise BackendError(f"no adapter in peft's format in {path} (adapter_config.json is missing)")
        request = importlib.import_module("vllm.lora.request").LoRARequest
        self.lora_request = request(str(name), int(lora_id), str(path))
        return self.lora_request

    def reload(self, model: str | Path) -> None:
        """Serve the checkpoint in ``model`` (an adapter merged into the weights) from the next generate call on:
        the engine restarts then, once, however many times this is called before."""
        self._pending_model = str(model)
        self.lora_request = None

    def _apply_reload(self) -> None:
        model, self._pending_model = self._pending_model, None
        if model is None or model == self.served_model:
            return
        self.llm = None
        gc.collect()
        with contextlib.suppress(Exception):  # free the old engine's GPU memory before the new one takes it
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self.llm = self._start(model)
        self.served_model = model

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """With ``sleep_while_learning``: the engine sleeps (level 1) inside the block and wakes up after it."""
        asleep = bool(self.options.sleep_while_learning and self.llm is not None and self._pending_model is None)
        if asleep:
            self.llm.sleep(level=1)
        try:
            yield
        finally:
            if asleep:
                self.llm.wake_up()

    @classmethod
    def preflight(cls, options: Any) -> None:
        """Before a run directory exists: the model (and tokenizer) can be loaded here, offline included."""
        check_local_model(options, "vllm")

    def _complete(self, operation: str, prompts: list[Prompt], rng: np.random.Generator) -> list[str]:
        self._apply_reload()
        texts, params = [], []
        for p in prompts:
            text, logged = self.render(p)
            seed = spawn_seed(rng) % (2**31 - 1)
            meta = {**p.meta, "model": self.options.model, "seed": seed}
            if self.lora_request is not None:  # which round's adapter wrote it
                meta["adapter"] = str(getattr(self.lora_request, "lora_name", self.lora_request))
            elif self.served_model != self.options.model:
                meta["merged"] = self.served_model
            self._log(operation, logged, meta)
            texts.append(text)
            params.append(sampling_params(self._vllm, self.options, seed))
        self.stats.prompts += len(texts)
        kw: dict[str, Any] = {"lora_request": self.lora_request} if self.lora_request is not None else {}
        outputs = self.llm.generate(texts, params, use_tqdm=False, **kw)
        self.stats.calls += 1
        out = []
        for o in outputs:
            self.stats.prompt_tokens += len(getattr(o, "prompt_token_ids", None) or [])
            comp = o.outputs[0]
            self.stats.completion_tokens += len(getattr(comp, "token_ids", None) or [])
            out.append(comp.text.strip())
        return out

    def close(self) -> None:
        self.llm = None
        super().close()
