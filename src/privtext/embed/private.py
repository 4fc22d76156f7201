"""Private embeddings, computed once: a per-user cache of the private corpus's vectors, reused across runs.

Iterating on a configuration runs the same private file again and again; its embeddings do not change (same
text, same model, same settings), so :func:`embed_private` keeps them in a cache that belongs to the user, not to
a run. A second run on the same private file embeds none of it.

Where: ``$PRIVTEXT_CACHE_HOME/private``, else ``$XDG_CACHE_HOME/privtext/private``, else
``~/.cache/privtext/private`` (:func:`private_cache_dir`) — never inside a run directory, so nothing in a run's
shareable part ever holds it. The folder is mode 0700, its files 0600; it is an
:class:`~privtext.embed.cache.EmbeddingStore`: rows keyed by (model id, keyed BLAKE2b hash of the text) under a
32-byte secret salt created with the cache and kept beside it (``salt``, 0600). The model id carries the model and
every setting that changes a vector (``@max_seq_length=…``, ``@openvino-bf16``, …), so two settings never share a
row. Whoever holds the folder holds embeddings of private texts: it is as private as the data (a leaked database
without its salt cannot be tested for a guessed text). ``privtext cache clear`` deletes it
(:func:`clear_private_cache`); ``embedder: {private_cache: false}`` turns it off for a run.

**Released values do not change.** A cached row holds the float32 bytes the same embedder returned for the same
text on an earlier run; a run that reads them gets those bytes, so a run on a private file whose vectors are all
cached releases exactly what the run that wrote them released (with the same seed and noise stream;
``tests/test_embed_private.py``). (A vector computed afresh in a different batch can differ from a cached one in
its last bits — the attention over padded positions rounds differently — which is float rounding of the same
model, ≤ 2e-7 per coordinate, measured.)
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import user_cache_dir
from ..errors import BackendError
from .base import Embedder, check_texts
from .cache import FILENAME, SALT, EmbeddingStore, embed_through


def private_cache_dir() -> Path:
    """The user's private embedding cache folder (see the module docstring); not created here."""
    return user_cache_dir("private")


def private_store(embedder: Any) -> EmbeddingStore | None:
    """The private cache for ``embedder`` (None when its ``private_cache`` attribute is false), opened once and
    kept on the embedder."""
    if not getattr(embedder, "private_cache", True):
        return None
    store = getattr(embedder, "_private_store", None)
    if store is None:
        store = EmbeddingStore(private_cache_dir())
        try:
            embedder._private_store = store
        except AttributeError:  # pragma: no cover - an embedder with __slots__: open it per call
            pass
    return store  # type: ignore[no-any-return]


def embed_private(embedder: Embedder, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
    """The embeddings of the private corpus ``texts`` (float32, one unit row per text, in order), read from the
    user's private cache where it holds them; only texts it lacks reach ``embedder``.

    What it returns is what ``embedder.embed(texts)`` returns for the same texts (the same model id, the same
    bytes once cached), so a method can call this wherever it embeds its private records. An embedder with exact
    votes (:class:`~privtext.embed.tiers.TieredEmbedder`) gets the private store for its other tiers too, so a
    record's fp32 vector, once computed for a re-decided vote, is not computed again on a later run. Counts what
    it did on ``embedder.private_stats`` (texts, cached, embedded, seconds)."""
    texts = check_texts(list(texts))
    t0 = time.perf_counter()
    store = private_store(embedder)
    own = getattr(embedder, "embed_private", None)
    if callable(own):  # a TieredEmbedder: its fast tier through the store, and a source that knows it is private
        vecs, hits, misses = own(texts, store, show_progress=show_progress)
    elif store is None:
        vecs, hits, misses = np.asarray(embedder.embed(texts, show_progress=show_progress), dtype=np.float32), 0, len(texts)
    else:
        vecs, hits, misses = embed_through(store, embedder.name, embedder.dim, texts,
                                           lambda chunk: embedder.embed(chunk, show_progress=show_progress))
    if vecs.shape != (len(texts), embedder.dim):
        raise BackendError(f"{embedder.name}: {vecs.shape} private embeddings for {len(texts)} texts")
    stats = getattr(embedder, "private_stats", None)
    if not isinstance(stats, dict):
        stats = {"texts": 0, "cached": 0, "embedded": 0, "seconds": 0.0}
    stats["texts"] += len(texts)
    stats["cached"] += hits
    stats["embedded"] += misses
    stats["seconds"] += time.perf_counter() - t0
    try:
        embedder.private_stats = stats  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover
        pass
    return vecs


def private_cache_info(cache_dir: Path | None = None) -> dict[str, Any]:
    """Where the cache is, its size on disk, and its rows per model id (no text, no vector)."""
    d = cache_dir or private_cache_dir()
    info: dict[str, Any] = {"path": str(d), "exists": d.is_dir(), "bytes": 0, "models": {}}
    if not d.is_dir():
        return info
    info["bytes"] = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    if (d / FILENAME).exists() and (d / SALT).exists():
        store = EmbeddingStore(d)
        try:
            with store._lock:
                rows = store._db.execute("SELECT model, COUNT(*) FROM emb GROUP BY model ORDER BY model").fetchall()
            info["models"] = {str(m): int(n) for m, n in rows}
        finally:
            store.close()
    return info


def clear_private_cache(cache_dir: Path | None = None) -> dict[str, Any]:
    """Delete the private cache folder (vectors, salt and all). Returns :func:`private_cache_info` from before."""
    d = cache_dir or private_cache_dir()
    info = private_cache_info(d)
    if d.is_dir():
        shutil.rmtree(d)
    return info


__all__ = ["clear_private_cache", "embed_private", "private_cache_dir", "private_cache_info", "private_store"]
