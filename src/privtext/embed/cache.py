"""An on-disk embedding cache keyed by (model id, salted text hash): a text is embedded once per run, and a
resumed run reads its vectors back instead of recomputing them.

Storage is one SQLite file, ``<cache_dir>/embeddings.sqlite`` (no pickle): a table of
``(model TEXT, key BLOB, dim INTEGER, vec BLOB)`` where ``key`` is the 16-byte **keyed** BLAKE2b hash of the
UTF-8 text and ``vec`` the float32 little-endian bytes. Every batch of new vectors is written in one transaction
(WAL journal), so a process killed mid-write leaves the file as it was before that batch or after it, never
half-written; a row whose length does not match its ``dim`` is treated as missing and recomputed. Several
processes may share a cache (SQLite's locking, with a generous busy timeout).

**Why salted.** The cache holds embeddings of private texts. With an unsalted hash, whoever holds the cache file
could test whether a given text was private (hash it, look it up). The key of this cache is a 32-byte random
salt, created with the cache (``<cache_dir>/salt``, written once with ``O_EXCL`` so concurrent processes agree,
mode 0600) and kept beside the data: the cache folder is mode 0700 and its files 0600. This protects a cache
file that leaks alone; it does not protect against whoever has both the salt and the cache — the cache is as
private as the data, and lives under the run's ``private/`` folder by default. A cache whose rows exist but whose
salt is missing cannot be read (its keys are unusable): it is refused with a clear error instead of silently
mixing keys.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendError
from ..progress import advance
from .base import Embedder, check_texts

FILENAME = "embeddings.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS emb (
    model TEXT NOT NULL,
    key   BLOB NOT NULL,
    dim   INTEGER NOT NULL,
    vec   BLOB NOT NULL,
    PRIMARY KEY (model, key)
) WITHOUT ROWID
"""


SALT = "salt"
_SALT_BYTES = 32


def text_key(text: str, salt: bytes) -> bytes:
    """The cache key of ``text``: keyed BLAKE2b (``salt`` is the cache's secret salt)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=salt, digest_size=16).digest()


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def load_or_create_salt(cache_dir: Path) -> bytes:
    """The cache's salt: read it, or create it race-free (``O_EXCL``: the first process wins, the others read)."""
    p = cache_dir / SALT
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # the winner may still be writing its 32 bytes
            data = p.read_bytes()
            if len(data) == _SALT_BYTES:
                return data
            time.sleep(0.02)
        raise BackendError(f"embedding cache salt {p} is damaged ({len(data)} bytes); delete the cache to rebuild") from None
    salt = secrets.token_bytes(_SALT_BYTES)
    with os.fdopen(fd, "wb") as f:
        f.write(salt)
        f.flush()
        os.fsync(f.fileno())
    return salt


class EmbeddingStore:
    """The SQLite file behind :class:`CachedEmbedder` (thread-safe)."""

    def __init__(self, cache_dir: str | Path):
        self.dir = Path(cache_dir)
        _private_dir(self.dir)
        self.path = self.dir / FILENAME
        if self.path.exists() and not (self.dir / SALT).exists():
            raise BackendError(f"embedding cache {self.path} has no salt file ({self.dir / SALT}): its keys cannot be "
                               "read; delete the cache folder to rebuild it")
        self.salt = load_or_create_salt(self.dir)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise BackendError(f"embedding cache {self.path} cannot be opened ({e}); delete it to rebuild") from None
        self._restrict()

    def _restrict(self) -> None:
        """The database and its WAL/SHM files: mode 0600 (they hold embeddings of private texts)."""
        for suffix in ("", "-wal", "-shm"):
            f = Path(f"{self.path}{suffix}")
            if f.exists():
                os.chmod(f, 0o600)

    def key(self, text: str) -> bytes:
        return text_key(text, self.salt)

    def get_many(self, model: str, keys: Sequence[bytes], dim: int) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = list(keys[i:i + 500])
                q = f"SELECT key, dim, vec FROM emb WHERE model = ? AND key IN ({','.join('?' * len(chunk))})"
                for key, d, blob in self._db.execute(q, [model, *chunk]):
                    if d == dim and len(blob) == 4 * dim:
                        out[bytes(key)] = np.frombuffer(blob, dtype="<f4")
        return out

    def put_many(self, model: str, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        rows = [(model, k, int(v.shape[0]), np.ascontiguousarray(v, dtype="<f4").tobytes()) for k, v in items]
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR REPLACE INTO emb (model, key, dim, vec) VALUES (?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._restrict()

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return int(self._db.execute("SELECT COUNT(*) FROM emb").fetchone()[0])
            return int(self._db.execute("SELECT COUNT(*) FROM emb WHERE model = ?", (model,)).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def embed_through(store: EmbeddingStore, name: str, dim: int, texts: list[str],
                  embed: Callable[[list[str]], np.ndarray], *, chunk_size: int = 2048,
                  ) -> tuple[np.ndarray, int, int]:
    """The vectors of ``texts`` under model id ``name``: read from ``store`` where it holds them, the others
    computed by ``embed`` ``chunk_size`` distinct texts at a time, each chunk committed before the next starts.
    Duplicate texts are embedded once. Returns (float32 vectors in input order, cache hits, texts embedded).
    The innermost progress bar (:func:`privtext.progress.advance`) is advanced by the texts read from the store
    (and repeated ones) at once; ``embed``'s batches advance it by the texts they embed."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32), 0, 0
    keys = [store.key(t) for t in texts]
    unique = list(dict.fromkeys(keys))
    found = store.get_many(name, unique, dim)
    missing_keys = [k for k in unique if k not in found]
    missing_set = set(missing_keys)
    hits = sum(1 for k in keys if k not in missing_set)
    first_text: dict[bytes, str] = {}
    for k, t in zip(keys, texts, strict=True):
        first_text.setdefault(k, t)
    advance(len(texts) - len(missing_keys))  # the texts embedding will not reach (the embedder advances the rest)
    for i in range(0, len(missing_keys), chunk_size):
        chunk = missing_keys[i:i + chunk_size]
        vecs = np.asarray(embed([first_text[k] for k in chunk]), dtype=np.float32)
        if vecs.shape != (len(chunk), dim):
            raise BackendError(f"{name}: inner embedder returned shape {vecs.shape}, expected {(len(chunk), dim)}")
        store.put_many(name, zip(chunk, vecs, strict=True))
        for k, v in zip(chunk, vecs, strict=True):
            found[k] = v
    return np.stack([found[k] for k in keys]).astype(np.float32, copy=False), hits, len(missing_keys)


class CachedEmbedder:
    """Wraps an embedder: vectors already in the cache are read, only new texts reach ``inner``.

    New texts are embedded ``chunk_size`` at a time and each chunk is committed before the next starts, so an
    interrupted run keeps what it had computed. Duplicate texts within a call are embedded once.
    """

    def __init__(self, inner: Embedder, cache_dir: str | Path, *, chunk_size: int = 2048):
        self.inner = inner
        self.store = EmbeddingStore(cache_dir)
        self.chunk_size = chunk_size
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        vecs, hits, misses = embed_through(self.store, self.name, self.dim, check_texts(texts),
                                           lambda chunk: self.inner.embed(chunk, show_progress=show_progress),
                                           chunk_size=self.chunk_size)
        self.hits += hits
        self.misses += misses
        return vecs

    def close(self) -> None:
        self.store.close()
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __getattr__(self, item: str) -> Any:  # expose the inner embedder's extras (calls, retries, ...)
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)
