"""Embedding on the data holder's Ray cluster with Ray Data ``map_batches``.

Two entry points:

* :class:`RayDataEmbedder` — an :class:`~privtext.embed.base.Embedder` whose ``embed(texts)`` ships the texts to
  the cluster in blocks, embeds them there with ``map_batches`` and returns the vectors in input order. A run uses
  it for the private and the candidate texts when its config says ``cluster: {backend: ray, embed: true}``;
  :func:`privtext.embed.build_embedder` wraps it in the driver-side :class:`~privtext.embed.cache.CachedEmbedder`,
  so only texts missing from the run's embedding cache travel to the workers.
* :func:`embed_parquet_distributed` — a column of one or more Parquet shards embedded where it lies: the driver
  reads only the files' metadata, every Ray task reads one row group itself and returns its vectors; the driver
  writes them, by row number, into an array or a ``.npy`` memory map (bounded memory for any row count).

Every Ray worker builds the embedder from the (public) embedder *config* — the backend name and its options,
never data — once per worker process (kept in a process-wide table, so later ``embed`` calls on the same worker
reuse the loaded model). The packaged MiniLM loads offline on every worker; privtext must be installed on them.

Order is exact by construction, not by Ray's scheduling: every row carries its position (``row``) through
``map_batches`` and the driver places each returned vector at that position, checking that every position comes
back exactly once. With a deterministic embedder (the hashing embedder) the vectors equal a single process's bit
for bit; a neural one gives the same vectors up to float rounding of its batch composition (cosine ≥ 0.9999).

Trust boundary: the texts go to the worker processes and the object store of the cluster named by
``cluster.address`` (or a local one this process starts) — that cluster must belong to the data holder, as for
distributed voting (:mod:`privtext.mechanisms.distributed`). Nothing here writes texts or vectors to disk except
the ``out`` memory map you ask for (configure Ray's object spilling to a private disk, or disable it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.ray_cluster import cluster_cpus, connect, ray_data_module
from ..config import EmbedderConfig, section_config
from ..errors import BackendError, ConfigError, DataError, PrivtextError
from .base import Embedder, check_texts
from .stream import embed_by_length

PURPOSE = "distributed embedding (cluster.embed: true)"

# ------------------------------------------------------------------------------------------- worker side

_WORKER_EMBEDDERS: dict[str, Embedder] = {}
_WORKER_LOCK = threading.Lock()


def _public_config(cfg: EmbedderConfig | Mapping[str, Any]) -> str:
    """The embedder config as workers receive it: JSON, with the cache turned off (the driver caches; workers
    write nothing). Its backend and options are checked here, on the driver (ConfigError naming the key)."""
    from . import _backend

    c = section_config(EmbedderConfig, cfg, source="embedder")
    _backend(c)
    d = c.model_dump(mode="json")
    d["cache"], d["cache_dir"] = False, None
    return json.dumps(d, sort_keys=True)


def _worker_embedder(cfg_json: str) -> Embedder:
    """This worker process's embedder for ``cfg_json`` (built on first use, then reused)."""
    with _WORKER_LOCK:
        emb = _WORKER_EMBEDDERS.get(cfg_json)
        if emb is None:
            from . import build_embedder

            emb = build_embedder(json.loads(cfg_json))
            _WORKER_EMBEDDERS[cfg_json] = emb
        return emb


def _describe(cfg_json: str) -> tuple[str, int]:
    emb = _worker_embedder(cfg_json)
    return emb.name, int(emb.dim)


def _embed_batch(batch: dict[str, np.ndarray], cfg_json: str) -> dict[str, np.ndarray]:
    """``map_batches`` UDF: {row, text} -> {row, vec}."""
    texts = [str(t) for t in batch["text"]]
    vecs = embed_by_length(_worker_embedder(cfg_json), texts)
    return {"row": np.asarray(batch["row"], dtype=np.int64), "vec": vecs}


def _embed_row_groups(batch: dict[str, np.ndarray], cfg_json: str, column: str, id_column: str | None,
                      read_rows: int) -> Iterator[dict[str, np.ndarray]]:
    """``map_batches`` UDF over row-group descriptors {path, group, start}: read each row group here, on the
    worker, ``read_rows`` rows at a time, and yield {row, vec[, id]} per slice (bounded memory per task)."""
    import pyarrow.parquet as pq

    emb = _worker_embedder(cfg_json)
    for path, group, start in zip(batch["path"], batch["group"], batch["start"], strict=True):
        f = pq.ParquetFile(str(path))
        cols = [column] if id_column is None else [column, id_column]
        row = int(start)
        for rb in f.iter_batches(batch_size=read_rows, row_groups=[int(group)], columns=cols):
            texts = rb.column(column).to_pylist()
            bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
            if bad is not None:
                raise DataError(f"{path}: column {column!r} holds a non-string value {texts[bad]!r} "
                                f"(row {row + bad} of the input)")
            out = {"row": np.arange(row, row + len(texts), dtype=np.int64), "vec": embed_by_length(emb, texts)}
            if id_column is not None:
                out["id"] = np.asarray([str(v) for v in rb.column(id_column).to_pylist()], dtype=object)
            row += len(texts)
            yield out


# ------------------------------------------------------------------------------------------- driver side


class _Placer:
    """Puts returned vectors at their rows and checks that every row comes back exactly once."""

    def __init__(self, dest: np.ndarray):
        self.dest = dest
        self.seen = np.zeros(len(dest), dtype=bool)

    def put(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        vecs = np.asarray(vecs, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(rows), self.dest.shape[1]):
            raise BackendError(f"distributed embedding: a worker returned vectors of shape {vecs.shape} for "
                               f"{len(rows)} rows of dim {self.dest.shape[1]}")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(self.seen) or self.seen[rows].any()
                          or len(np.unique(rows)) != len(rows)):
            raise BackendError("distributed embedding: a worker returned a row twice or out of range")
        self.seen[rows] = True
        self.dest[rows] = vecs

    def check(self) -> None:
        if not self.seen.all():
            missing = np.flatnonzero(~self.seen)
            raise BackendError(f"distributed embedding: {len(missing)} row(s) never came back "
                               f"(first: {missing[:5].tolist()})")


def _worker_error(e: BaseException) -> PrivtextError:
    """The privtext error a Ray worker raised (Ray wraps it with the worker's whole traceback), or a BackendError
    naming what went wrong there."""
    seen: BaseException | None = e
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, PrivtextError) and not type(seen).__module__.startswith("ray"):
            return seen
        seen = getattr(seen, "cause", None) or seen.__cause__
    first = (str(e).strip().splitlines() or [type(e).__name__])[-1]
    return BackendError(f"distributed embedding failed on a Ray worker: {first[:500]}")


def _collect(ds: Any, placer: _Placer, ids: np.ndarray | None = None) -> None:
    """Stream the job's output batches into ``placer`` (and ``ids``); worker errors come out as privtext's."""
    try:
        for b in ds.iter_batches(batch_size=None, batch_format="numpy"):
            placer.put(b["row"], b["vec"])
            if ids is not None:
                ids[np.asarray(b["row"], dtype=np.int64)] = b["id"]
    except PrivtextError as e:
        if not type(e).__module__.startswith("ray"):
            raise
        err = _worker_error(e)
    except Exception as e:
        err = _worker_error(e)
    else:
        placer.check()
        return
    raise err


def _positive(name: str, v: Any, *, none_ok: bool = True) -> int | None:
    if v is None and none_ok:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


class RayDataEmbedder:
    """Embed on a Ray cluster with Ray Data (see the module docstring).

    ``embedder``: the embedder config (a section or a dict: ``{"backend": "hashing", "dim": 64}``) that every
    worker builds; ``address``/``num_cpus``: the cluster to join, or the size of a local one to start (as
    ``cluster:``); ``batch_size``: texts per ``map_batches`` call; ``concurrency``: embedding tasks at once
    (default: the cluster's CPUs). ``name`` and ``dim`` are the workers' embedder's, asked of one worker."""

    #: texts per ``embed`` call a driver-side cache should hand over at once (one Ray Data job per call)
    preferred_chunk = 65536

    def __init__(self, embedder: EmbedderConfig | Mapping[str, Any], *, address: str | None = None,
                 num_cpus: int | None = None, batch_size: int = 256, concurrency: int | None = None,
                 worker_threads: int | None = 1):
        self.cfg_json = _public_config(embedder)
        _positive("cluster.embed_batch_size", batch_size, none_ok=False)
        self.batch_size = int(batch_size)
        self.concurrency = _positive("cluster.embed_concurrency", concurrency)
        _positive("cluster.num_cpus", num_cpus)
        self.address, self.num_cpus, self.worker_threads = address, num_cpus, worker_threads
        self._started = False
        self._meta: tuple[str, int] | None = None
        self.calls = 0
        self.rows = 0

    def _connect(self) -> tuple[Any, Any]:
        ray, started = connect(address=self.address, num_cpus=self.num_cpus, worker_threads=self.worker_threads,
                               purpose=PURPOSE)
        self._started = self._started or started
        return ray, ray_data_module(PURPOSE)

    def _describe(self) -> tuple[str, int]:
        if self._meta is None:
            ray, _ = self._connect()
            name, dim = ray.get(ray.remote(_describe).remote(self.cfg_json))
            self._meta = (str(name), int(dim))
        return self._meta

    @property
    def name(self) -> str:
        return self._describe()[0]

    @property
    def dim(self) -> int:
        return self._describe()[1]

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = check_texts(texts)
        dim = self.dim
        out = np.empty((len(texts), dim), dtype=np.float32)
        if not texts:
            return out
        import pyarrow as pa

        ray, rd = self._connect()
        block = max(self.batch_size, -(-len(texts) // (4 * cluster_cpus(ray))))  # ≥ 4 blocks per CPU
        block = min(block, 16 * self.batch_size)
        tables = [pa.table({"row": pa.array(np.arange(a, min(a + block, len(texts)), dtype=np.int64)),
                            "text": pa.array(texts[a:a + block], type=pa.string())})
                  for a in range(0, len(texts), block)]
        ds = rd.from_arrow(tables).map_batches(_embed_batch, fn_args=(self.cfg_json,), batch_size=self.batch_size,
                                               batch_format="numpy", concurrency=self.concurrency)
        _collect(ds, _Placer(out))
        self.calls += 1
        self.rows += len(texts)
        return out

    def close(self) -> None:
        """Shut down a local cluster this embedder started (a joined cluster is left alone)."""
        if self._started:
            self._connect()[0].shutdown()
            self._started = False


@dataclass
class ParquetEmbedding:
    """Vectors of a Parquet column, in file then row order; ``ids`` when an id column was asked for."""

    vectors: np.ndarray
    ids: list[str] | None
    rows_per_file: list[int]


def _row_groups(paths: Sequence[Path], column: str, id_column: str | None) -> tuple[list[dict[str, Any]],
                                                                                     list[int]]:
    """One descriptor per non-empty row group, with its first row's position in the concatenated input (reads
    metadata only)."""
    import pyarrow.parquet as pq

    items: list[dict[str, Any]] = []
    per_file: list[int] = []
    start = 0
    for p in paths:
        if not p.is_file():
            raise DataError(f"{p}: no such Parquet file")
        try:
            f = pq.ParquetFile(str(p))
        except Exception as e:  # pyarrow raises ArrowInvalid / OSError for non-Parquet files
            raise DataError(f"{p}: not a readable Parquet file ({e})") from None
        names = f.schema_arrow.names
        for c in (column, id_column):
            if c is not None and c not in names:
                raise DataError(f"{p}: no column {c!r} (columns: {', '.join(names)})")
        md = f.metadata
        for g in range(md.num_row_groups):
            n = md.row_group(g).num_rows
            if n:
                items.append({"path": str(p), "group": g, "start": start})
                start += n
        per_file.append(md.num_rows)
    return items, per_file


def embed_parquet_distributed(paths: str | Path | Sequence[str | Path], column: str = "text", *,
                              embedder: EmbedderConfig | Mapping[str, Any], id_column: str | None = None,
                              out: str | Path | None = None, address: str | None = None,
                              num_cpus: int | None = None, read_rows: int = 4096,
                              concurrency: int | None = None) -> ParquetEmbedding:
    """Embed ``column`` of the Parquet shards ``paths`` on a Ray cluster, one task per row group.

    The vectors come back in the order of ``paths`` and, within a file, of its rows. ``out``: a ``.npy`` file
    written as a memory map (the returned ``vectors`` is that map), else an in-memory array. ``id_column``: also
    return that column as strings, in the same order. ``read_rows``: rows a task reads and embeds at a time.
    The embedding cache is not used here: the driver never reads the texts (use :class:`RayDataEmbedder` through
    ``build_embedder`` for cached embedding of texts in memory)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files = [Path(p) for p in paths]
    if not files:
        raise ConfigError("embed_parquet_distributed: no Parquet paths given")
    if not isinstance(column, str) or not column:
        raise ConfigError(f"column must be a column name, got {column!r}")
    _positive("read_rows", read_rows, none_ok=False)
    conc = _positive("concurrency", concurrency)
    emb = RayDataEmbedder(embedder, address=address, num_cpus=num_cpus, concurrency=conc)
    items, per_file = _row_groups(files, column, id_column)
    n = sum(per_file)
    dim = emb.dim
    dest = (np.lib.format.open_memmap(str(out), mode="w+", dtype=np.float32, shape=(n, dim))
            if out is not None else np.empty((n, dim), dtype=np.float32))
    ids: np.ndarray | None = np.empty(n, dtype=object) if id_column is not None else None
    if items:
        _, rd = emb._connect()
        ds = rd.from_items(items, override_num_blocks=len(items)).map_batches(
            _embed_row_groups, fn_args=(emb.cfg_json, column, id_column, int(read_rows)), batch_size=1,
            batch_format="numpy", concurrency=conc)
        _collect(ds, _Placer(dest), ids)
    if isinstance(dest, np.memmap):
        dest.flush()
    return ParquetEmbedding(vectors=dest, ids=None if ids is None else [str(v) for v in ids],
                            rows_per_file=per_file)


def build_ray_embedder(cfg: EmbedderConfig | Mapping[str, Any], cluster: Any) -> RayDataEmbedder | None:
    """The Ray Data embedder a ``cluster:`` section asks for (``backend: ray`` and ``embed: true``), else None."""
    if cluster is None or getattr(cluster, "backend", "local") != "ray" or not getattr(cluster, "embed", False):
        return None
    return RayDataEmbedder(cfg, address=cluster.address, num_cpus=cluster.num_cpus,
                           batch_size=cluster.embed_batch_size, concurrency=cluster.embed_concurrency)


__all__ = ["ParquetEmbedding", "RayDataEmbedder", "build_ray_embedder", "embed_parquet_distributed"]
