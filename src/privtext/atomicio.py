"""Crash-safe file writing, the bottom of the stack (any layer may use it).

All whole-file writes are atomic: a temporary file in the same folder (created by ``mkstemp``, so mode 0600),
fsync, ``os.replace``, fsync of the folder — an interrupted process never leaves a half-written file under a final
name. JSON Lines appends are fsync'd when asked; a torn last line (a crash mid-append) is ignored on reading.
:class:`PromptLog` is the JSONL log every generator writes each prompt to before sending it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import RunError


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


def jsonable(x: Any) -> Any:
    """``x`` as plain JSON values, for files other programs read (the ledger, privacy.json): mappings with string
    keys, lists for tuples, Python scalars for numpy ones (anything with ``item()``), and non-finite floats as the
    strings ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON has no infinity)."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    if hasattr(x, "item") and callable(x.item):
        return jsonable(x.item())
    return x


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


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


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; on success it replaces ``path`` (a folder written whole or not
    at all: a reader never sees half of it). On an error the temporary folder is removed and ``path`` is left as
    it was."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if p.exists():
        shutil.rmtree(p)
    os.replace(tmp, p)
    _fsync_dir(p.parent)


def user_cache_dir(*parts: str) -> Path:
    """The user's privtext cache folder for ``parts``: ``$PRIVTEXT_CACHE_HOME/<parts>``, else
    ``$XDG_CACHE_HOME/privtext/<parts>``, else ``~/.cache/privtext/<parts>`` (the convention of the ONNX export
    cache, ``privtext.embed.st_export``). Nothing is created here."""
    if os.environ.get("PRIVTEXT_CACHE_HOME"):
        return Path(os.environ["PRIVTEXT_CACHE_HOME"]).expanduser().joinpath(*parts)
    base = Path(os.environ["XDG_CACHE_HOME"]).expanduser() if os.environ.get("XDG_CACHE_HOME") else (
        Path.home() / ".cache")
    return base.joinpath("privtext", *parts)


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

    A record: ``{"backend": ..., "operation": random|variation|seeded|contrastive, "prompt": text or chat
    messages, "meta": {...}}``, in the order sent.

    ``observer(texts, lines)``, when set, is told of every generator output, with the number of lines the log held
    when it came back (prompts logged before it, counting the lines an earlier process of a resumed run wrote): the
    run's :class:`~privtext.guard.PrivateGuard` uses it to tell text a generator wrote before a prompt was sent from
    text that reached the prompt from elsewhere (:meth:`privtext.guard.PrivateGuard.note_generated`). ``prompts.jsonl`` is part of the release, so a record carries no
    time stamp: when each prompt was sent is a timing of the private work. Generators call :meth:`log` once per
    prompt, before sending it. ``PromptLog(None)`` keeps prompts in memory only (tests, library use without a run directory).
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, fsync: bool = False):
        self.path = Path(path) if path is not None else None
        self.fsync = fsync
        self._lock = threading.Lock()
        self.count = 0
        self.memory: list[dict[str, Any]] | None = [] if path is None else None
        self._fh = open(self.path, "a", encoding="utf-8") if self.path is not None else None
        #: lines in the log (this process's and a resumed run's earlier ones)
        self.lines = _count_lines(self.path) if self.path is not None else 0
        self.observer: Callable[[Sequence[str], int], None] | None = None

    def log(self, *, backend: str, operation: str, prompt: Any, meta: Mapping[str, Any] | None = None) -> None:
        rec: dict[str, Any] = {"backend": backend, "operation": operation, "prompt": prompt}
        if meta:
            rec["meta"] = dict(meta)
        with self._lock:
            self.count += 1
            self.lines += 1
            if self._fh is not None:
                self._fh.write(dumps(rec) + "\n")
                if self.fsync:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
            elif self.memory is not None:
                self.memory.append(rec)

    def generated(self, texts: Sequence[str], *, public_model: bool = False) -> None:
        """A generator returned ``texts`` (after the prompts logged so far): tell the observer. ``public_model``:
        the generator is a model whose whole training text the run's guard checked public (the offline n-gram and
        lm generators), so its output is public by provenance whatever its length."""
        if self.observer is None:
            return
        with self._lock:  # the count when the output came back; the observer's hashing runs outside the lock
            lines = self.lines
        if public_model:
            self.observer(texts, lines, public_model=True)  # type: ignore[call-arg]
        else:
            self.observer(texts, lines)

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


def file_digest(path: str | os.PathLike[str]) -> str:
    """BLAKE2b-128 of a file's bytes, read in 1 MiB chunks (hex): what the model caches check their files by."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


__all__ = ["PromptLog", "append_jsonl", "atomic_path", "atomic_write_bytes", "atomic_write_json",
           "atomic_write_text", "dumps", "file_digest", "read_jsonl", "user_cache_dir"]
