"""Embedders: texts -> unit vectors, behind one small interface (:class:`Embedder`).

Backends (``embedder.backend`` in the config):

=========================  ===========================================================================
``sentence-transformers``  the default; ``all-MiniLM-L6-v2`` loads offline from the bundled package
``openai``                 any OpenAI-compatible ``/embeddings`` endpoint
``hashing``                a fast deterministic fake for tests (feature hashing of words and char n-grams)
=========================  ===========================================================================

``build_embedder(cfg, cache_dir=...)`` wraps the backend in :class:`CachedEmbedder` when ``cfg.cache`` is true and
a cache folder is given (a run passes ``RunDir.embed_cache``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..backends import parse_options
from ..config import EmbedderConfig, section_config
from ..errors import ConfigError
from ..registry import Registry
from .base import Embedder, l2_normalize
from .cache import CachedEmbedder, EmbeddingStore, text_key

EMBEDDERS: Registry = Registry("embedder backend")
EMBEDDERS.register("sentence-transformers", "privtext.embed.st:SentenceTransformerEmbedder",
                   aliases=("sentence_transformers", "st", "sbert"))
EMBEDDERS.register("openai", "privtext.embed.openai_backend:OpenAIEmbedder", aliases=("openai-compatible",))
EMBEDDERS.register("hashing", "privtext.embed.hashing:HashingEmbedder", aliases=("hash", "fake"))


def _as_config(cfg: EmbedderConfig | Mapping[str, Any]) -> EmbedderConfig:
    return section_config(EmbedderConfig, cfg, source="embedder")


def build_embedder(cfg: EmbedderConfig | Mapping[str, Any], *, cache_dir: Path | str | None = None) -> Embedder:
    """Build the backend named by ``cfg.backend``; cache it on disk when ``cfg.cache`` and ``cache_dir``."""
    cfg = _as_config(cfg)
    cls = EMBEDDERS.get(cfg.backend)
    where = f"embedder (backend {EMBEDDERS.canonical(cfg.backend)!r})"
    raw = cfg.options()
    if "model" in cls.Options.model_fields:
        if cfg.model is not None:
            raw["model"] = cfg.model
    elif cfg.model is not None:
        raise ConfigError(f"{where}: this backend takes no 'model' (it is not a neural model); remove the key")
    options = parse_options(cls.Options, raw, where=where)
    emb = cls.from_options(options)
    if cfg.cache and cache_dir is not None:
        return CachedEmbedder(emb, cache_dir)  # type: ignore[return-value]
    return emb  # type: ignore[no-any-return]


__all__ = ["EMBEDDERS", "CachedEmbedder", "Embedder", "EmbeddingStore", "build_embedder", "l2_normalize",
           "text_key"]
