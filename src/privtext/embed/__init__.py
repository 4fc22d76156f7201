"""Embedders: texts -> unit vectors, behind one small interface (:class:`Embedder`).

Backends (``embedder.backend`` in the config):

=========================  ===========================================================================
``sentence-transformers``  the default; ``all-MiniLM-L6-v2`` loads offline from the bundled package
``openai``                 any OpenAI-compatible ``/embeddings`` endpoint
``hashing``                a fast deterministic fake for tests (feature hashing of words and char n-grams)
=========================  ===========================================================================

``build_embedder(cfg, cache_dir=...)`` wraps the backend in :class:`CachedEmbedder` when ``cfg.cache`` is true and
a cache folder is given (a run passes ``RunDir.embed_cache``). With ``cluster=`` a ``cluster: {backend: ray,
embed: true}`` section, the texts are embedded on that Ray cluster with Ray Data (:mod:`.distributed`); the cache
stays here, on the driver.
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


def _backend(cfg: EmbedderConfig) -> tuple[Any, Any]:
    """The backend class and its validated options (ConfigError naming a bad key or value)."""
    cls = EMBEDDERS.get(cfg.backend)
    where = f"embedder (backend {EMBEDDERS.canonical(cfg.backend)!r})"
    raw = cfg.options()
    if "model" in cls.Options.model_fields:
        if cfg.model is not None:
            raw["model"] = cfg.model
    elif cfg.model is not None:
        raise ConfigError(f"{where}: this backend takes no 'model' (it is not a neural model); remove the key")
    return cls, parse_options(cls.Options, raw, where=where)


def check_embedder(cfg: EmbedderConfig | Mapping[str, Any]) -> None:
    """Before a run directory exists: the embedder's options, and (backends with a ``preflight``) its model."""
    cls, options = _backend(_as_config(cfg))
    check = getattr(cls, "preflight", None)
    if check is not None:
        check(options)


def build_embedder(cfg: EmbedderConfig | Mapping[str, Any], *, cache_dir: Path | str | None = None,
                   cluster: Any = None) -> Embedder:
    """Build the backend named by ``cfg.backend``; cache it on disk when ``cfg.cache`` and ``cache_dir``.

    ``cluster``: a ``cluster:`` section; with ``backend: ray`` and ``embed: true`` the texts are embedded on that
    Ray cluster (:class:`privtext.embed.distributed.RayDataEmbedder`, each worker building this backend), and the
    cache, when on, stays here on the driver: only texts it does not hold are sent to the workers."""
    cfg = _as_config(cfg)
    cls, options = _backend(cfg)  # checked here, before any cluster starts
    emb: Any
    chunk = 2048
    if cluster is not None and getattr(cluster, "backend", "local") == "ray" and getattr(cluster, "embed", False):
        from .distributed import build_ray_embedder

        emb = build_ray_embedder(cfg, cluster)
        chunk = emb.preferred_chunk
    else:
        emb = cls.from_options(options)
    if cfg.cache and cache_dir is not None:
        return CachedEmbedder(emb, cache_dir, chunk_size=chunk)  # type: ignore[return-value]
    return emb  # type: ignore[no-any-return]


__all__ = ["EMBEDDERS", "CachedEmbedder", "Embedder", "EmbeddingStore", "build_embedder", "check_embedder",
           "l2_normalize", "text_key"]
