"""Foundation-model backends behind one narrow interface (:class:`Generator`).

Backends (``generator.backend`` in the config):

==============  =================================================================================================
``ngram``       the offline default: Kneser-Ney n-gram model of the *public* corpus (no weights, no network)
``lm``          a small GPT-2 trained here on the *public* corpus with control codes (labels, keyphrases, blanks)
``transformers`` any Hugging Face causal LM by name or path (chat template when the tokenizer has one)
``vllm``        vLLM's offline engine (GPU)
``openai``      any OpenAI-compatible endpoint: OpenAI, Azure, a vLLM server, Ollama, ...
``scripted``    a deterministic fake for tests (a real implementation of the protocol)
==============  =================================================================================================

``build_generator(cfg, ctx)`` validates the backend's options (unknown keys are errors naming the key), chooses
the prompt family (``prompt_family: auto`` looks at the label columns and values) and builds the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..backends import parse_options
from ..config import GeneratorConfig, section_config
from ..data.labels import LabelInfo
from ..registry import Registry
from .base import (
    BaseGenerator,
    GenerationStats,
    Generator,
    GeneratorContext,
    VariationSpec,
)
from .length import LengthTarget, cap_words
from .prompts import (
    Prompt,
    PromptFamily,
    detect_family,
    family_names,
    load_family,
    mask_words,
    resolve_family,
)

GENERATORS: Registry = Registry("generator backend")
GENERATORS.register("ngram", "privtext.generate.ngram:NgramGenerator", aliases=("n-gram", "kneser-ney"))
GENERATORS.register("lm", "privtext.generate.lm.backend:LMGenerator", aliases=("small-lm",))
GENERATORS.register("transformers", "privtext.generate.hf:TransformersGenerator", aliases=("hf", "huggingface"))
GENERATORS.register("vllm", "privtext.generate.vllm_backend:VLLMGenerator")
GENERATORS.register("local", "privtext.generate.local:LocalGenerator")
GENERATORS.register("openai", "privtext.generate.openai_backend:OpenAIGenerator", aliases=("openai-compatible",))
GENERATORS.register("scripted", "privtext.generate.scripted:ScriptedGenerator", aliases=("fake",))


def _as_config(cfg: GeneratorConfig | Mapping[str, Any]) -> GeneratorConfig:
    return section_config(GeneratorConfig, cfg, source="generator")


def check_generator(cfg: GeneratorConfig | Mapping[str, Any]) -> None:
    """What can be checked of a generator before a run directory exists: its options, and (backends with a
    ``preflight``) that its model loads here — offline, a model missing from the cache fails at once."""
    cfg = _as_config(cfg)
    cls = GENERATORS.get(cfg.backend)
    options = parse_options(cls.Options, cfg.options(), where=f"generator (backend {GENERATORS.canonical(cfg.backend)!r})")
    check = getattr(cls, "preflight", None)
    if check is not None:
        check(options)


def build_generator(cfg: GeneratorConfig | Mapping[str, Any], ctx: GeneratorContext | None = None) -> Generator:
    """Build the backend named by ``cfg.backend`` with its options (the config section's other keys)."""
    cfg = _as_config(cfg)
    ctx = ctx if ctx is not None else GeneratorContext()
    cls = GENERATORS.get(cfg.backend)
    where = f"generator (backend {GENERATORS.canonical(cfg.backend)!r})"
    options = parse_options(cls.Options, cfg.options(), where=where)
    requested = cfg.prompt_family if cfg.prompt_family != "auto" else ctx.family
    family = resolve_family(requested or "auto", label_columns=ctx.label_columns, public=ctx.public)
    gen = cls.from_options(options, ctx, family=family, name=cfg.name)
    # target lengths: released (ctx.length) > configured (generator.target_words) > the family's public prior
    # (a fallback for generators that lack length knowledge: see BaseGenerator.wants_prior)
    if ctx.length is not None:
        gen.length = ctx.length
    elif cfg.target_words is not None:
        gen.length = LengthTarget.parse(cfg.target_words, source="configured (generator.target_words)")
    elif family.length is not None and gen.wants_prior(family.length):
        gen.length = family.length
    return gen  # type: ignore[no-any-return]


__all__ = [
    "GENERATORS",
    "BaseGenerator",
    "GenerationStats",
    "Generator",
    "GeneratorContext",
    "LabelInfo",
    "LengthTarget",
    "Prompt",
    "PromptFamily",
    "VariationSpec",
    "build_generator",
    "cap_words",
    "check_generator",
    "detect_family",
    "family_names",
    "load_family",
    "mask_words",
    "parse_options",
    "resolve_family",
]
