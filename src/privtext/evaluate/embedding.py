"""Embedders for evaluation: the :mod:`privtext.embed` backends, plus an in-memory memo.

:func:`resolve_embedder` accepts an embedder object, an :class:`~privtext.config.EmbedderConfig` (or its dict), a
spec string (``"hashing"``, ``"sentence-transformers"``, ``"sentence-transformers:/path/to/model"``,
``"openai:text-embedding-3-small"``) or ``None`` (the default: MiniLM, offline). With a ``cache_dir`` the
backend's on-disk cache is used (a run's ``cache/embeddings``), so texts the run embedded are not embedded again.

Every embedder returned is wrapped in :class:`MemoEmbedder`, which remembers vectors by text for the duration of an
evaluation: FID, kNN precision/recall, the embedding classifier and per-iteration FID embed each distinct text
once, and :func:`~privtext.evaluate.compare.compare_runs` embeds the shared real corpus once for all runs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class MemoEmbedder:
    """Remembers the vector of every text it has embedded (in memory, keyed by a text hash)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = str(getattr(inner, "name", type(inner).__name__))
        self.dim = int(getattr(inner, "dim", 0) or 0)
        self._memo: dict[bytes, np.ndarray] = {}

    @staticmethod
    def _key(t: str) -> bytes:
        return hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest()

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        keys = [self._key(t) for t in texts]
        todo: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in self._memo and k not in todo:
                todo[k] = t
        if todo:
            try:
                vecs = self.inner.embed(list(todo.values()), show_progress=show_progress)
            except TypeError:  # an embedder without the show_progress keyword
                vecs = self.inner.embed(list(todo.values()))
            vecs = np.asarray(vecs, dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != len(todo):
                raise ConfigError(
                    f"embedder {self.name!r} returned shape {vecs.shape} for {len(todo)} texts; expected (n, d)"
                )
            for k, v in zip(todo, vecs, strict=True):
                self._memo[k] = v
            self.dim = int(vecs.shape[1])
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[k] for k in keys]).astype(np.float32, copy=False)


def parse_embedder_spec(spec: str) -> dict[str, Any]:
    """``"backend"`` or ``"backend:model"`` → an embedder config dict."""
    backend, sep, model = spec.partition(":")
    backend = backend.strip()
    if not backend:
        raise ConfigError(f"embedder spec {spec!r} is empty; use e.g. 'sentence-transformers' or 'hashing'")
    out: dict[str, Any] = {"backend": backend}
    if sep and model.strip():
        out["model"] = model.strip()
    return out


def resolve_embedder(
    spec: Any = None, *, cache_dir: str | os.PathLike[str] | None = None, memo: bool = True
) -> Any:
    """An embedder for evaluation from an object, a config section, a spec string or ``None`` (MiniLM)."""
    if isinstance(spec, MemoEmbedder):
        return spec
    if spec is not None and not isinstance(spec, (str, Mapping)) and hasattr(spec, "embed"):
        emb: Any = spec
    else:
        from ..config import EmbedderConfig
        from ..embed import build_embedder

        if spec is None:
            cfg: Any = EmbedderConfig()
        elif isinstance(spec, str):
            cfg = parse_embedder_spec(spec)
        elif isinstance(spec, (EmbedderConfig, Mapping)):
            cfg = spec
        else:
            raise ConfigError(f"cannot make an embedder from {spec!r}")
        emb = build_embedder(cfg, cache_dir=Path(cache_dir) if cache_dir is not None else None)
    return MemoEmbedder(emb) if memo else emb


__all__ = ["Embedder", "MemoEmbedder", "parse_embedder_spec", "resolve_embedder"]
