"""A local model on the best engine this machine has (``backend: local``): vLLM's offline engine where a CUDA
GPU and vLLM are present (continuous batching, prefix caching), else Hugging Face transformers.

One set of options describes the model and its sampling; each engine gets them under its own names
(``max_new_tokens`` → vLLM's ``max_tokens``), plus engine-only options under ``vllm:`` / ``transformers:``.
``engine: vllm`` or ``engine: transformers`` forces one. The choice and its reason are logged and kept on the
generator (``engine_choice``); the prompts, the prompt log and the private guard are those of the chosen
backend, so nothing about privacy depends on the engine.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

from pydantic import Field

from ..backends import parse_options
from ..errors import ConfigError
from .base import GeneratorContext, LocalModelOptions, check_local_model


class LocalOptions(LocalModelOptions):
    """Options of the ``local`` generator: the engine, the options both engines take
    (:class:`~privtext.generate.base.LocalModelOptions` and the token limits), and per-engine extras."""

    engine: Literal["auto", "vllm", "transformers"] = Field(
        default="auto", description="auto: vLLM when CUDA and vllm are available, else transformers")
    max_new_tokens: int = Field(default=256, ge=1)
    min_new_tokens: int = Field(default=1, ge=0)
    vllm: dict[str, Any] | None = Field(default=None, description="vLLM-only options (privtext.generate."
                                        "vllm_backend.VLLMOptions), e.g. gpu_memory_utilization")
    transformers: dict[str, Any] | None = Field(default=None, description="transformers-only options "
                                                "(privtext.generate.hf.TransformersOptions), e.g. batch_size")


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return False
    return bool(torch.cuda.is_available())


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def choose_engine(engine: str) -> tuple[str, str]:
    """(engine, why): the forced engine, or vLLM when CUDA and vllm are both present, else transformers."""
    if engine in ("vllm", "transformers"):
        return engine, f"engine: {engine} (configured)"
    if engine != "auto":
        raise ConfigError(f"generator.engine must be auto, vllm or transformers, got {engine!r}")
    cuda = cuda_available()
    has_vllm = vllm_installed()
    if cuda and has_vllm:
        return "vllm", "a CUDA GPU and vllm are available"
    if cuda:
        return "transformers", "a CUDA GPU but no vllm (pip install -c constraints.txt -e '.[vllm]' for vLLM)"
    return "transformers", "no CUDA GPU"


class LocalGenerator:
    """Not instantiated: :meth:`from_options` returns the chosen engine's generator."""

    backend = "local"
    Options = LocalOptions

    @classmethod
    def preflight(cls, options: Any) -> None:
        """Before a run directory exists: the model (and tokenizer) can be loaded here, offline included."""
        check_local_model(options, "local")

    @classmethod
    def from_options(cls, options: LocalOptions, ctx: GeneratorContext, *, family: Any, name: str | None) -> Any:
        engine, why = choose_engine(options.engine)
        o = options
        shared: dict[str, Any] = {k: getattr(o, k) for k in LocalModelOptions.model_fields}
        if engine == "vllm":
            from .vllm_backend import VLLMGenerator, VLLMOptions

            opts = parse_options(VLLMOptions, {**shared, "max_tokens": o.max_new_tokens,
                                               "min_tokens": o.min_new_tokens, **(o.vllm or {})},
                                 where="generator (backend 'local', engine vllm)")
            gen: Any = VLLMGenerator.from_options(opts, ctx, family=family, name=name)
        else:
            from .hf import TransformersGenerator, TransformersOptions

            opts = parse_options(TransformersOptions, {**shared, "max_new_tokens": o.max_new_tokens,
                                                       "min_new_tokens": o.min_new_tokens, **(o.transformers or {})},
                                 where="generator (backend 'local', engine transformers)")
            gen = TransformersGenerator.from_options(opts, ctx, family=family, name=name)
        gen.engine_choice = {"engine": engine, "why": why}
        return gen


__all__ = ["LocalGenerator", "LocalOptions", "choose_engine", "cuda_available", "vllm_installed"]
