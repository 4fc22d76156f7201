"""The run directory: the contract every later tool reads. This module is its only owner (file names live here).

A run's outputs are of two kinds (docs/privacy.md, "What a run releases"):

::

    RUN/                       the RELEASE: may be shared
      config.yaml              resolved configuration (written once at start)
      synthetic.jsonl          final records: text plus labels
      privacy.json             the guarantee in words and numbers (parameters, released values, assumptions)
      prompts.jsonl            every prompt sent to any generator (public text and released values only)
      heldout.jsonl            public records held out for evaluation (when data.public_holdout)
      report.html              the report (no private diagnostics unless asked for)
      private/                 PRIVATE DIAGNOSTICS, mode 0700: computed from private data, never shared
        ledger.jsonl           one privacy event per line, appended and fsync'd before the noisy value is used
        checkpoints/           iter_000/, ... plain Parquet + JSON, no pickle, raw noisy draws included; a folder
                               is complete when its COMPLETE marker exists (written last, atomically)
        diagnostics.json       exact statistics of the private data (counts, secrets, audit hits)
        metrics.json           counts and wall time per stage
        log.txt                human-readable log (holds exact private counts)
        cache/embeddings/      embedding cache keyed by a salted hash of each text

All whole-file writes are atomic (temporary file in the same folder, fsync, ``os.replace``, fsync of the folder),
so an interrupted run never leaves a half-written file under a final name.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import RunError

CONFIG = "config.yaml"
PRIVACY = "privacy.json"
PROMPTS = "prompts.jsonl"
SYNTHETIC = "synthetic.jsonl"
HELDOUT = "heldout.jsonl"
REPORT = "report.html"
EVALUATION = "evaluation.json"
PRIVATE = "private"
LEDGER = f"{PRIVATE}/ledger.jsonl"
CHECKPOINTS = f"{PRIVATE}/checkpoints"
METRICS = f"{PRIVATE}/metrics.json"
LOG = f"{PRIVATE}/log.txt"
DIAGNOSTICS = f"{PRIVATE}/diagnostics.json"
CACHE = f"{PRIVATE}/cache"
EMBED_CACHE = f"{CACHE}/embeddings"

#: files every finished run holds (relative to the run directory)
RUN_FILES = (CONFIG, PRIVACY, PROMPTS, SYNTHETIC, LEDGER, CHECKPOINTS, METRICS, LOG, DIAGNOSTICS)
#: the shareable part of a run
RELEASE_FILES = (CONFIG, SYNTHETIC, PRIVACY, PROMPTS, HELDOUT, REPORT, EVALUATION)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any, *, indent: int | None = None) -> str:
    return json.dumps(obj, ensure_ascii=False, default=_json_default, indent=indent, allow_nan=True)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(p.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, dumps(obj, indent=2) + "\n")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` atomically."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(p.parent)


def append_jsonl(path: str | os.PathLike[str], record: Mapping[str, Any], *, fsync: bool = True) -> None:
    """Append one JSON line; with ``fsync`` the line is on disk when this returns."""
    line = dumps(dict(record)) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSONL file. A torn last line (crash mid-append without fsync) is ignored; a torn line elsewhere
    is an error."""
    p = Path(path)
    if not p.exists():
        return []
    out: list[dict[str, Any]] = []
    lines = p.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i >= len(lines) - 2:  # last non-empty line may be torn
                break
            raise RunError(f"{p}:{i + 1}: corrupt JSON line ({e.msg})") from e
    return out


class PromptLog:
    """Appends every prompt sent to a generator to ``prompts.jsonl`` (thread-safe).

    A record: ``{"t": unix time, "backend": ..., "operation": random|variation|seeded|contrastive,
    "prompt": text or chat messages, "meta": {...}}``. Generators call :meth:`log` once per prompt, before
    sending it. ``PromptLog(None)`` keeps prompts in memory only (tests, library use without a run directory).
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, fsync: bool = False):
        self.path = Path(path) if path is not None else None
        self.fsync = fsync
        self._lock = threading.Lock()
        self.count = 0
        self.memory: list[dict[str, Any]] | None = [] if path is None else None
        self._fh = open(self.path, "a", encoding="utf-8") if self.path is not None else None

    def log(self, *, backend: str, operation: str, prompt: Any, meta: Mapping[str, Any] | None = None) -> None:
        rec = {"t": round(time.time(), 3), "backend": backend, "operation": operation, "prompt": prompt}
        if meta:
            rec["meta"] = dict(meta)
        with self._lock:
            self.count += 1
            if self._fh is not None:
                self._fh.write(dumps(rec) + "\n")
                if self.fsync:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
            elif self.memory is not None:
                self.memory.append(rec)

    def flush(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()
                self._fh = None

    def __enter__(self) -> PromptLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class StageMetrics:
    """Wall time and counts per stage (generation, embedding, voting, selection, ...).

    ``with metrics.stage("embedding", iteration=1) as s: ...; s.count("texts", 500)``.
    """

    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    per_iteration: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)

    class _Stage:
        def __init__(self, parent: StageMetrics, name: str, iteration: int | None):
            self.parent, self.name, self.iteration = parent, name, iteration
            self.counts: dict[str, float] = {}

        def count(self, key: str, n: float) -> None:
            self.counts[key] = self.counts.get(key, 0) + n

    @contextlib.contextmanager
    def stage(self, name: str, *, iteration: int | None = None) -> Iterator[StageMetrics._Stage]:
        st = StageMetrics._Stage(self, name, iteration)
        t0 = time.perf_counter()
        try:
            yield st
        finally:
            dt = time.perf_counter() - t0
            self.add(name, dt, iteration=iteration, **st.counts)

    def add(self, name: str, seconds: float, *, iteration: int | None = None, **counts: float) -> None:
        agg = self.stages.setdefault(name, {"seconds": 0.0, "calls": 0})
        agg["seconds"] += seconds
        agg["calls"] += 1
        for k, v in counts.items():
            agg[k] = agg.get(k, 0) + v
        if iteration is not None:
            it = self.per_iteration.setdefault(str(iteration), {}).setdefault(name, {"seconds": 0.0})
            it["seconds"] += seconds
            for k, v in counts.items():
                it[k] = it.get(k, 0) + v

    def bump(self, key: str, n: float = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return {"stages": self.stages, "per_iteration": self.per_iteration, "counters": self.counters}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StageMetrics:
        return cls(
            stages={k: dict(v) for k, v in d.get("stages", {}).items()},
            per_iteration={k: {s: dict(x) for s, x in v.items()} for k, v in d.get("per_iteration", {}).items()},
            counters=dict(d.get("counters", {})),
        )


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    # paths
    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

    @property
    def privacy(self) -> Path:
        return self.root / PRIVACY

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    @property
    def prompts(self) -> Path:
        return self.root / PROMPTS

    @property
    def synthetic(self) -> Path:
        return self.root / SYNTHETIC

    @property
    def metrics(self) -> Path:
        return self.root / METRICS

    @property
    def log_path(self) -> Path:
        return self.root / LOG

    @property
    def embed_cache(self) -> Path:
        return self.root / EMBED_CACHE

    @property
    def cache(self) -> Path:
        return self.root / CACHE

    @property
    def private(self) -> Path:
        return self.root / PRIVATE

    @property
    def diagnostics(self) -> Path:
        return self.root / DIAGNOSTICS

    @property
    def heldout(self) -> Path:
        return self.root / HELDOUT

    @property
    def report(self) -> Path:
        return self.root / REPORT

    @property
    def diagnostic_report(self) -> Path:
        return self.private / REPORT

    @property
    def evaluation(self) -> Path:
        return self.root / EVALUATION

    def checkpoint(self, iteration: int) -> Path:
        return self.checkpoints / f"iter_{iteration:03d}"

    def create(self, *, exist_ok: bool = False) -> RunDir:
        if self.root.exists() and any(self.root.iterdir()) and not exist_ok:
            raise RunError(
                f"run directory {self.root} already exists and is not empty; "
                f"use `privtext resume {self.root}` or choose another output"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self.private.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.private, 0o700)  # mkdir's mode is filtered by the umask
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        for name in (LEDGER, PROMPTS, LOG):
            (self.root / name).touch(mode=0o600, exist_ok=True)
        return self

    def require(self) -> RunDir:
        if not self.config.exists():
            raise RunError(f"{self.root} is not a privtext run directory (no {CONFIG})")
        return self

    def log(self, message: str) -> None:
        stamp = _dt.datetime.now().isoformat(timespec="seconds")
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"{stamp} {message}\n")

    def complete_iterations(self) -> list[int]:
        """Iterations whose checkpoint folder carries its COMPLETE marker, in order."""
        out = []
        if not self.checkpoints.exists():
            return out
        for p in sorted(self.checkpoints.glob("iter_*")):
            if (p / "COMPLETE").exists():
                out.append(int(p.name.split("_")[1]))
        return out
