"""The trained-model cache: one folder per (public corpus, training settings), written atomically.

Location: ``cache_dir`` when given, else ``$PRIVTEXT_CACHE_HOME/lm``, else ``$XDG_CACHE_HOME/privtext/lm``, else
``~/.cache/privtext/lm`` (the ONNX export cache's convention). Layout::

    <root>/<key[:24]>-v<FORMAT_VERSION>/
        tokenizer.json  config.json  model.safetensors  lm.json   (written into a temporary sibling folder)
        manifest.json                                             written last: size and BLAKE2b of each file

and the temporary folder is renamed into place, so a reader sees a whole entry or none. Training an entry holds
an OS file lock on ``<root>/.<entry>.lock`` (:func:`training_lock`): several runs started at once on the same
public corpus and settings (a sweep, seeds side by side) train the model once; the others wait, then load it.
``key`` is the BLAKE2b digest of the training settings and of every public text and public label value the model
is trained on (:func:`cache_key`). An entry whose ``manifest.json`` is missing or unreadable, or whose files do not
match it (a killed write, a truncated copy, a flipped byte), is *damaged*: the caller trains again and replaces it.
The entry holds a model of public text only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...atomicio import atomic_write_json, file_digest, user_cache_dir

FORMAT_VERSION = 1  # bump when the sequence formats, the files or their meaning change
MANIFEST = "manifest.json"


def default_cache_dir() -> Path:
    return user_cache_dir("lm")


def cache_key(texts: Sequence[str], labels: Mapping[str, Sequence[str]] | None, settings: Mapping[str, Any]) -> str:
    """BLAKE2b of the format version, the settings (canonical JSON) and the public texts and labels (each
    length-prefixed, so no two corpora share a byte stream)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"privtext-lm-v{FORMAT_VERSION}\0".encode())
    h.update(json.dumps(dict(settings), sort_keys=True, default=str).encode() + b"\0")

    def put(s: str) -> None:
        b = s.encode("utf-8")
        h.update(len(b).to_bytes(8, "little") + b)

    h.update(len(texts).to_bytes(8, "little"))
    for t in texts:
        put(t)
    for col in sorted(labels or {}):
        put(col)
        for v in (labels or {})[col]:
            put(str(v))
    return h.hexdigest()


def entry_dir(root: str | Path | None, key: str) -> Path:
    base = Path(root).expanduser() if root is not None else default_cache_dir()
    return base / f"{key[:24]}-v{FORMAT_VERSION}"


def read_entry(folder: Path) -> dict[str, Any] | None:
    """The manifest of a whole, undamaged entry, else None (missing, unreadable or not matching its files)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("format_version") != FORMAT_VERSION:
            return None
        for name, meta in manifest["files"].items():
            p = folder / name
            if p.stat().st_size != meta["size"] or file_digest(p) != meta["blake2b"]:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return dict(manifest)


@contextlib.contextmanager
def training_lock(folder: Path, *, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the exclusive lock of entry ``folder`` (``fcntl.flock`` on a sibling ``.<name>.lock``; released by the
    OS when the process dies, so a killed trainer never blocks the next run). ``on_wait`` is called once when
    another process holds it. Where ``fcntl`` is missing (Windows) the block runs unlocked: concurrent runs then
    train in parallel and the first whole entry written is kept (:func:`write_entry`)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder.parent / f".{folder.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_entry(folder: Path, write: Callable[[Path], Mapping[str, Any]]) -> dict[str, Any]:
    """Build an entry: ``write(tmp)`` writes the files into a temporary sibling folder and returns extra manifest
    fields; the manifest (sizes and digests of every file) is written last, then the folder is renamed into
    place, replacing a damaged entry. When another process published a whole entry first, that one is kept."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        extra = dict(write(tmp))
        files = {}
        for p in sorted(tmp.iterdir()):
            if p.is_file():
                with open(p, "rb+") as f:
                    os.fsync(f.fileno())
                files[p.name] = {"size": p.stat().st_size, "blake2b": file_digest(p)}
        manifest = {**extra, "format_version": FORMAT_VERSION, "files": files}
        atomic_write_json(tmp / MANIFEST, manifest)
        if folder.exists():
            if read_entry(folder) is not None:  # a concurrent writer won: keep its entry
                shutil.rmtree(tmp, ignore_errors=True)
                return read_entry(folder) or manifest
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(tmp, folder)
        except OSError:
            if read_entry(folder) is None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(OSError):
            fd = os.open(folder.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


__all__ = ["FORMAT_VERSION", "cache_key", "default_cache_dir", "entry_dir", "read_entry", "training_lock",
           "write_entry"]
