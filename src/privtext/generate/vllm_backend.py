"""vLLM's offline engine as a generator (``backend: vllm``; needs a CUDA GPU and ``pip install 'privtext[vllm]'``).

All prompts of a call go to one ``LLM.generate`` (vLLM batches them continuously), with prefix caching on by
default (every request of a run shares the prompt family's system message and template), and one
``SamplingParams`` per request, each carrying its own
``seed`` drawn from the caller's ``rng`` (so results do not depend on batching). Prompts use the tokenizer's chat
template when it has one (``chat_template: auto``). For a vLLM *server*, use ``backend: openai`` with its
``base_url``.
"""

from __future__ import annotations

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
        vllm = self._vllm = optional_import("vllm", "vllm", "the vllm generator (CUDA GPU only)")
        if llm is None:
            engine_kw: dict[str, Any] = {
                "model": o.model, "tokenizer": o.tokenizer or o.model, "dtype": o.dtype,
                "tensor_parallel_size": o.tensor_parallel_size, "gpu_memory_utilization": o.gpu_memory_utilization,
                "trust_remote_code": o.trust_remote_code, "enable_prefix_caching": o.enable_prefix_caching,
                **(o.engine_kwargs or {}),
            }
            if o.max_model_len:
                engine_kw["max_model_len"] = o.max_model_len
            try:
                llm = vllm.LLM(**engine_kw)
            except Exception as e:  # vLLM raises many kinds (no GPU, OOM, unknown model)
                raise BackendError(f"cannot start vLLM for {o.model!r}: {type(e).__name__}: {e}") from None
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.use_chat = self._choose_chat(o.chat_template, o.model)

    @classmethod
    def preflight(cls, options: Any) -> None:
        """Before a run directory exists: the model (and tokenizer) can be loaded here, offline included."""
        check_local_model(options, "vllm")

    def _complete(self, operation: str, prompts: list[Prompt], rng: np.random.Generator) -> list[str]:
        texts, params = [], []
        for p in prompts:
            text, logged = self.render(p)
            seed = spawn_seed(rng) % (2**31 - 1)
            self._log(operation, logged, {**p.meta, "model": self.options.model, "seed": seed})
            texts.append(text)
            params.append(sampling_params(self._vllm, self.options, seed))
        self.stats.prompts += len(texts)
        outputs = self.llm.generate(texts, params, use_tqdm=False)
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
