"""Embedding at scale in bounded memory: texts from any iterator or a Parquet column, a chunk at a time.

Memory holds one chunk of texts and its vectors (``chunk_size`` × dim float32) plus what the caller keeps; within a
chunk the texts are sorted by length before batching (sentence-transformers does this inside ``encode``; for other
embedders :func:`embed_stream` does it), so batches carry little padding, and the vectors come back in input order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import numpy as np

from ..errors import BackendError, ConfigError, DataError
from .base import Embedder, check_texts


def _chunks(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(texts)
    while chunk := list(islice(it, size)):
        yield chunk


def embed_stream(embedder: Embedder, texts: Iterable[str], *, chunk_size: int = 8192,
                 sort_by_length: bool = True) -> Iterator[np.ndarray]:
    """Yield one (len(chunk), dim) float32 array per ``chunk_size`` texts, in input order."""
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be ≥ 1, got {chunk_size}")
    for chunk in _chunks(texts, chunk_size):
        chunk = check_texts(chunk)
        if not sort_by_length:
            yield embedder.embed(chunk)
            continue
        yield embed_by_length(embedder, chunk)


def embed_by_length(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embed ``texts`` shortest first (little padding per batch) and return the (n, dim) float32 vectors in input
    order."""
    order = np.argsort(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable")
    vecs = np.asarray(embedder.embed([texts[i] for i in order]), dtype=np.float32)
    if vecs.shape != (len(texts), embedder.dim):
        raise BackendError(f"{embedder.name}: returned shape {vecs.shape} for {len(texts)} texts "
                           f"(dim {embedder.dim})")
    out = np.empty_like(vecs)
    out[order] = vecs
    return out


def iter_parquet_texts(path: str | Path, column: str = "text", *, batch_rows: int = 8192) -> Iterator[str]:
    """The strings of one Parquet column, read ``batch_rows`` at a time (pyarrow), never the whole file."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(str(path))
    if column not in f.schema_arrow.names:
        raise DataError(f"{path}: no column {column!r} (columns: {', '.join(f.schema_arrow.names)})")
    for batch in f.iter_batches(batch_size=batch_rows, columns=[column]):
        for v in batch.column(0).to_pylist():
            if not isinstance(v, str):
                raise DataError(f"{path}: column {column!r} holds a non-string value {v!r}")
            yield v


def embed_parquet(embedder: Embedder, path: str | Path, column: str = "text", *, out: str | Path | None = None,
                  chunk_size: int = 8192) -> np.ndarray:
    """Embed a Parquet column in chunks. With ``out`` the vectors go to a ``.npy`` memory map (bounded memory
    for any row count) which is returned; without it, to an in-memory array."""
    import pyarrow.parquet as pq

    n = pq.ParquetFile(str(path)).metadata.num_rows
    dest = (np.lib.format.open_memmap(str(out), mode="w+", dtype=np.float32, shape=(n, embedder.dim))
            if out is not None else np.empty((n, embedder.dim), dtype=np.float32))
    i = 0
    for vecs in embed_stream(embedder, iter_parquet_texts(path, column, batch_rows=chunk_size),
                             chunk_size=chunk_size):
        dest[i:i + len(vecs)] = vecs
        i += len(vecs)
    if isinstance(dest, np.memmap):
        dest.flush()
    return dest
