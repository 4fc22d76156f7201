"""Any Hugging Face causal language model as a generator (``backend: transformers``).

``model`` is a hub name (read from the local cache: no network here) or a local folder. Prompts use the
tokenizer's chat template when it has one (``chat_template: auto``), the plain-text form otherwise; they are
batched with left padding. On a GPU (``torch.cuda.is_available()``) the model loads in fp16 with
``device_map="auto"``; on CPU in fp32. Sampling is seeded from the caller's ``rng`` (a seed drawn with
:func:`privtext.rng.spawn_seed` per batch) inside ``torch.random.fork_rng``, so torch's global generator is the
same after the call as before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from ..errors import BackendError, ConfigError, optional_import
from ..rng import spawn_seed
from .base import LocalModelOptions, PromptedGenerator, check_local_model
from .prompts import Prompt


class TransformersOptions(LocalModelOptions):
    """Options of the ``transformers`` generator (Hugging Face ``generate`` on this machine), besides
    :class:`~privtext.generate.base.LocalModelOptions`."""

    device: str = Field(default="auto", description="auto, cpu, cuda, cuda:1, mps")
    batch_size: int = Field(default=8, ge=1)
    max_new_tokens: int = Field(default=256, ge=1)
    min_new_tokens: int = Field(default=1, ge=0)
    no_repeat_ngram_size: int = Field(default=0, ge=0)
    max_prompt_tokens: int | None = Field(default=None, ge=1, description="truncate prompts from the left")
    empty_retries: int = Field(default=2, ge=0, description="re-generate replies that decode to empty text")
    torch_threads: int | None = Field(default=None, ge=1, description="CPU threads for generation (restored after "
                                      "each call); 1 is often fastest for small models on a busy machine")


class TransformersGenerator(PromptedGenerator):
    backend = "transformers"
    Options = TransformersOptions

    def __init__(self, *, options: TransformersOptions, **kw: Any):
        super().__init__(options=options, **kw)
        o = options
        torch = self._torch = optional_import("torch", "hf", "the transformers generator", package="transformers")
        transformers = optional_import("transformers", "hf", "the transformers generator")
        cuda = torch.cuda.is_available()
        device = o.device if o.device != "auto" else ("cuda" if cuda else "cpu")
        if device.startswith("cuda") and not cuda:
            raise ConfigError(f"generator device {o.device!r}: CUDA is not available on this machine")
        if o.dtype == "auto":
            dtype = torch.float16 if device.startswith("cuda") else torch.float32
        else:
            dtype = getattr(torch, o.dtype)
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                o.tokenizer or o.model, trust_remote_code=o.trust_remote_code)
            load_kw: dict[str, Any] = {"dtype": dtype, "trust_remote_code": o.trust_remote_code}
            if device == "cuda" and o.device == "auto":
                load_kw["device_map"] = "auto"
            self.model = transformers.AutoModelForCausalLM.from_pretrained(o.model, **load_kw)
        except (OSError, ValueError) as e:
            raise BackendError(f"cannot load model {o.model!r} with transformers: {e}") from None
        if "device_map" not in load_kw:
            self.model.to(device)
        self.model.eval()
        self.device = next(self.model.parameters()).device
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token is None:
            if tok.eos_token is not None:
                tok.pad_token = tok.eos_token
            else:
                tok.add_special_tokens({"pad_token": "<pad>"})
                self.model.resize_token_embeddings(len(tok))
        self.use_chat = self._choose_chat(o.chat_template, o.model)

    @classmethod
    def preflight(cls, options: TransformersOptions) -> None:
        """Before a run directory exists: the model (and tokenizer) can be loaded here, offline included."""
        check_local_model(options, "transformers")

    def generation_kwargs(self) -> dict[str, Any]:
        o = self.options
        kw: dict[str, Any] = {"do_sample": True, "temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k,
                              "max_new_tokens": o.max_new_tokens, "min_new_tokens": o.min_new_tokens,
                              "repetition_penalty": o.repetition_penalty,
                              "pad_token_id": self.tokenizer.pad_token_id}
        if o.no_repeat_ngram_size:
            kw["no_repeat_ngram_size"] = o.no_repeat_ngram_size
        if self.tokenizer.eos_token_id is not None:
            kw["eos_token_id"] = self.tokenizer.eos_token_id
        return kw

    # ------------------------------------------------------------------------------------------ sampling
    def _generate_texts(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        torch = self._torch
        o = self.options
        out: list[str] = []
        kw = self.generation_kwargs()
        devices = list(range(torch.cuda.device_count())) if self.device.type == "cuda" else []
        for start in range(0, len(texts), o.batch_size):
            batch = texts[start:start + o.batch_size]
            enc_kw: dict[str, Any] = {"return_tensors": "pt", "padding": True, "add_special_tokens": not self.use_chat}
            if o.max_prompt_tokens:
                self.tokenizer.truncation_side = "left"
                enc_kw.update(truncation=True, max_length=o.max_prompt_tokens)
            enc = self.tokenizer(batch, **enc_kw).to(self.device)
            seed = spawn_seed(rng)
            threads = torch.get_num_threads()
            try:
                if o.torch_threads:
                    torch.set_num_threads(o.torch_threads)
                with torch.random.fork_rng(devices=devices), torch.inference_mode():
                    torch.manual_seed(seed)
                    gen = self.model.generate(**enc, **kw)
            finally:
                if o.torch_threads:
                    torch.set_num_threads(threads)
            new = gen[:, enc["input_ids"].shape[1]:]
            self.stats.calls += 1
            self.stats.prompt_tokens += int(enc["attention_mask"].sum())
            self.stats.completion_tokens += self._count_new(new)
            out.extend(t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True))
        return out

    def _count_new(self, new: Any) -> int:
        """Generated tokens per row up to and including the first end-of-sequence token (what follows is padding)."""
        eos = self.tokenizer.eos_token_id
        n = int(new.shape[1])
        if eos is None or n == 0:
            return int(new.shape[0]) * n
        is_eos = (new == eos).int()
        first = is_eos.argmax(dim=1)  # the first maximum: the first EOS (0 when there is none)
        has = is_eos.sum(dim=1) > 0
        return int(((first + 1) * has + n * (~has)).sum())

    def _complete(self, operation: str, prompts: list[Prompt], rng: np.random.Generator) -> list[str]:
        rendered = []
        for p in prompts:
            text, logged = self.render(p)
            self._log(operation, logged, {**p.meta, "model": self.options.model})
            rendered.append(text)
        self.stats.prompts += len(rendered)
        out = self._generate_texts(rendered, rng)
        for _ in range(self.options.empty_retries):
            empty = [i for i, t in enumerate(out) if not t]
            if not empty:
                break
            self.stats.retries += len(empty)
            again = self._generate_texts([rendered[i] for i in empty], rng)
            for i, t in zip(empty, again, strict=True):
                out[i] = t
        return out

    def close(self) -> None:
        self.model = None
        super().close()
