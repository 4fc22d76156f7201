"""One learner per generator, as ``evolution.learn`` asks (the engine and WASP call :func:`build_learner`).

Apart from :mod:`.step` because the vLLM learner (:mod:`.vllm`) extends :class:`~.step.DPOLearner`: the factory
imports both, and neither imports the factory (no import cycle in ``learn/``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .options import LearnOptions
from .step import DPOLearner, Learner, NgramLearner
from .vllm import VLLMDPOLearner


def build_learner(options: LearnOptions | dict[str, Any] | None, generator: Any, *, label_info: Callable[[int], Any],
                  seed: int | None, secure: bool = False, name: str | None = None,
                  embedder: Any = None) -> Learner | None:
    """The learner ``evolution.learn`` asks for, for ``generator`` (None for ``kind: none``). ``label_info`` maps a
    label group to its public label (``LabelSpace.info``); ``name`` is the generator's name in the population
    (WASP: one learner per generator); ``embedder`` the run's, for ``kind: rerank`` (whose ``generator`` is the
    :class:`~.rerank.RerankingGenerator` the engine wraps its generator in)."""
    o = options if isinstance(options, LearnOptions) else LearnOptions.model_validate(options or {})
    if o.kind == "none":
        return None
    if o.kind == "rerank":
        from .rerank import RerankLearner

        return RerankLearner(generator, o, embedder=embedder, label_info=label_info, seed=seed, secure=secure,
                             name=name)
    cls: type[Learner] = {"dpo": DPOLearner, "ngram_counts": NgramLearner}[o.kind]
    if o.kind == "dpo" and getattr(generator, "backend", None) == "vllm":  # trains HF weights, vLLM serves them
        cls = VLLMDPOLearner
    return cls(generator, o, label_info=label_info, seed=seed, secure=secure, name=name)


__all__ = ["build_learner"]
