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
stays here, on the driver. ``runtime: auto`` (sentence-transformers; the default) builds the fastest path of
this machine with votes equal to fp32's (:mod:`.auto`: OpenVINO fp32 tiers whose near-ties are re-decided with
torch fp32, :mod:`.tiers`; plain torch fp32 without OpenVINO, on a GPU or with ``cluster.embed``). The private corpus is embedded once per user (:func:`embed_private`, :mod:`.private`;
``private_cache: false`` turns that off).
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
from .private import embed_private, private_cache_dir
from .tiers import TieredEmbedder

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
        if getattr(options, "runtime", None) == "auto":
            from .auto import say_once

            say_once("embedder runtime auto with cluster.embed: torch fp32 on the Ray workers (no exact-vote tiers)")
    elif getattr(options, "runtime", None) == "auto":
        from .auto import build_auto

        emb = build_auto(options, cache_dir=cache_dir if cfg.cache else None)
    else:
        emb = cls.from_options(options)
    if cfg.cache and cache_dir is not None and not isinstance(emb, TieredEmbedder):  # tiers cache themselves
        emb = CachedEmbedder(emb, cache_dir, chunk_size=chunk)
    emb.private_cache = cfg.private_cache
    return emb  # type: ignore[no-any-return]


__all__ = ["EMBEDDERS", "CachedEmbedder", "Embedder", "EmbeddingStore", "TieredEmbedder", "build_embedder",
           "check_embedder", "embed_private", "l2_normalize", "private_cache_dir", "text_key"]
