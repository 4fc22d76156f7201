"""The on-disk embedding cache (SQLite, no pickle): persistence, isolation by model id, corruption and
kill-safety; and build_embedder's config handling."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import privtext.embed.cache as cache_mod
from privtext.embed import CachedEmbedder, EmbeddingStore, build_embedder
from privtext.embed.cache import FILENAME
from privtext.embed.hashing import HashingEmbedder
from privtext.errors import ConfigError, DataError, UnknownNameError


class Counting(HashingEmbedder):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: list[str] = []

    def embed(self, texts, *, show_progress: bool = False):
        self.seen.extend(texts)
        return super().embed(texts, show_progress=show_progress)


def test_storage_is_sqlite_not_pickle(tmp_path: Path) -> None:
    c = CachedEmbedder(HashingEmbedder(dim=8), tmp_path)
    c.embed(["hello", "world"])
    raw = (tmp_path / FILENAME).read_bytes()
    assert raw.startswith(b"SQLite format 3\x00")
    assert not re.search(r"^\s*(import|from)\s+(c?pickle|joblib|dill)", Path(cache_mod.__file__).read_text(), re.M)
    db = sqlite3.connect(tmp_path / FILENAME)
    rows = db.execute("SELECT model, key, dim, vec FROM emb ORDER BY key").fetchall()
    assert len(rows) == 2 and all(r[0] == c.name and r[2] == 8 and len(r[3]) == 32 for r in rows)
    assert {r[1] for r in rows} == {c.store.key("hello"), c.store.key("world")}


def test_duplicates_in_one_call_are_embedded_once(tmp_path: Path) -> None:
    inner = Counting(dim=16)
    c = CachedEmbedder(inner, tmp_path)
    x = c.embed(["a", "b", "a", "a"])
    assert inner.seen == ["a", "b"]
    assert np.array_equal(x[0], x[2]) and np.array_equal(x[0], x[3])
    assert c.misses == 2 and c.hits == 0  # in-call duplicates are not cache hits
    c.embed(["b", "a", "a", "b"])
    assert inner.seen == ["a", "b"] and c.hits == 4


def test_models_do_not_share_vectors(tmp_path: Path) -> None:
    a = CachedEmbedder(Counting(dim=16, seed=1), tmp_path)
    b_inner = Counting(dim=16, seed=2)
    b = CachedEmbedder(b_inner, tmp_path)
    assert a.name != b.name
    xa = a.embed(["same text"])
    xb = b.embed(["same text"])
    assert b_inner.seen == ["same text"] and not np.allclose(xa, xb)
    assert a.store.count(a.name) == 1 and a.store.count() == 2


def test_a_corrupt_row_is_recomputed(tmp_path: Path) -> None:
    inner = Counting(dim=16)
    c = CachedEmbedder(inner, tmp_path)
    good = c.embed(["x", "y"])
    db = sqlite3.connect(tmp_path / FILENAME)
    db.execute("UPDATE emb SET vec = ? WHERE key = ?", (b"\x00" * 7, c.store.key("x")))
    db.commit()
    db.close()
    inner.seen.clear()
    again = c.embed(["x", "y"])
    assert inner.seen == ["x"] and np.array_equal(again, good)


def test_chunks_are_committed_as_they_are_computed(tmp_path: Path) -> None:
    class Failing(Counting):
        def embed(self, texts, *, show_progress: bool = False):
            if len(self.seen) >= 4:
                raise RuntimeError("model crashed")
            return super().embed(texts, show_progress=show_progress)

    inner = Failing(dim=8)
    c = CachedEmbedder(inner, tmp_path, chunk_size=2)
    texts = [f"t{i}" for i in range(6)]
    with pytest.raises(RuntimeError):
        c.embed(texts)
    assert c.store.count() == 4  # the two finished chunks survived
    inner2 = Counting(dim=8)
    CachedEmbedder(inner2, tmp_path, chunk_size=2).embed(texts)
    assert inner2.seen == ["t4", "t5"]


_WRITER = textwrap.dedent("""
    import sys, time
    from privtext.embed import CachedEmbedder
    from privtext.embed.hashing import HashingEmbedder
    c = CachedEmbedder(HashingEmbedder(dim=64), sys.argv[1], chunk_size=50)
    i = 0
    while True:
        c.embed([f"text {i} {j}" for j in range(500)])
        i += 1
        print(i, flush=True)
""")


def test_killed_mid_write_leaves_a_consistent_cache(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # at least one full call written
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    db = sqlite3.connect(tmp_path / FILENAME)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = db.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
    bad = db.execute("SELECT COUNT(*) FROM emb WHERE length(vec) != 4 * dim").fetchone()[0]
    db.close()
    assert n >= 500 and n % 50 == 0 and bad == 0  # whole chunks only
    # every stored vector is the one the model gives
    ref = HashingEmbedder(dim=64)
    store = EmbeddingStore(tmp_path)
    texts = [f"text 0 {j}" for j in range(500)]
    got = store.get_many(ref.name, [store.key(t) for t in texts], 64)
    assert len(got) == 500
    assert np.array_equal(np.stack([got[store.key(t)] for t in texts]), ref.embed(texts))


def test_build_embedder_wraps_with_the_cache(tmp_path: Path) -> None:
    e = build_embedder({"backend": "hashing", "dim": 32}, cache_dir=tmp_path)
    assert isinstance(e, CachedEmbedder) and e.dim == 32
    assert not isinstance(build_embedder({"backend": "hashing", "cache": False}, cache_dir=tmp_path), CachedEmbedder)
    assert not isinstance(build_embedder({"backend": "hashing"}), CachedEmbedder)


def test_build_embedder_config_errors() -> None:
    with pytest.raises(UnknownNameError, match="hashing"):
        build_embedder({"backend": "word2vec"})
    with pytest.raises(ConfigError, match=r"unknown option 'dimm' \(did you mean 'dim'\?\)"):
        build_embedder({"backend": "hashing", "dimm": 3})
    with pytest.raises(ConfigError, match="dim"):
        build_embedder({"backend": "hashing", "dim": 1})
    with pytest.raises(ConfigError, match="takes no 'model'"):
        build_embedder({"backend": "hashing", "model": "all-MiniLM-L6-v2"})
    with pytest.raises(ConfigError, match="batch_size"):
        build_embedder({"backend": "sentence-transformers", "batch_size": 0})
    with pytest.raises(ConfigError, match="embedder"):
        build_embedder(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_hashing_embedder_properties() -> None:
    h = HashingEmbedder(dim=128)
    x = h.embed(["the cheap pizza was great", "the pizza was cheap and great", "quantum chromodynamics"])
    assert x[0] @ x[1] > 0.6 > x[0] @ x[2]
    assert np.allclose(np.linalg.norm(h.embed(["", "!!!"]), axis=1), 1.0)
    with pytest.raises(DataError):
        h.embed("text")


def test_embedder_cache_survives_another_process(tmp_path: Path) -> None:
    """A resumed run (another process) reads the vectors written by the first one."""
    code = ("import sys; from privtext.embed import build_embedder; "
            "build_embedder({'backend': 'hashing', 'dim': 16}, cache_dir=sys.argv[1]).embed(['alpha', 'beta'])")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    inner = Counting(dim=16)
    x = CachedEmbedder(inner, tmp_path).embed(["alpha", "beta"])
    assert inner.seen == [] and np.array_equal(x, HashingEmbedder(dim=16).embed(["alpha", "beta"]))


def test_keys_are_salted_per_cache_and_files_are_private(tmp_path: Path) -> None:
    """An unsalted hash would let whoever holds the cache test whether a text was private: the same text gets a
    different key in two caches, the plain hash finds nothing, and the files are readable by the owner only."""
    import hashlib
    import os
    import stat

    a = CachedEmbedder(HashingEmbedder(dim=8), tmp_path / "a")
    b = CachedEmbedder(HashingEmbedder(dim=8), tmp_path / "b")
    a.embed(["a private note"])
    b.embed(["a private note"])
    assert a.store.key("a private note") != b.store.key("a private note")
    plain = hashlib.blake2b(b"a private note", digest_size=16).digest()
    assert a.store.get_many(a.name, [plain], 8) == {}
    assert len(a.store.get_many(a.name, [a.store.key("a private note")], 8)) == 1
    for p in (tmp_path / "a" / "salt", tmp_path / "a" / FILENAME):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    for suffix in ("-wal", "-shm"):
        f = tmp_path / "a" / f"{FILENAME}{suffix}"
        if f.exists():
            assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
    # reopening reads the vectors back with the same salt
    again = CachedEmbedder(Counting(dim=8), tmp_path / "a")
    again.embed(["a private note"])
    assert again.inner.seen == [] and again.hits == 1


def test_a_cache_without_its_salt_is_refused(tmp_path: Path) -> None:
    from privtext.errors import BackendError

    CachedEmbedder(HashingEmbedder(dim=8), tmp_path).embed(["x"])
    (tmp_path / "salt").unlink()
    with pytest.raises(BackendError, match="no salt file"):
        CachedEmbedder(HashingEmbedder(dim=8), tmp_path)


def test_two_processes_agree_on_the_salt(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from privtext.embed.cache import load_or_create_salt; from pathlib import Path; "
            "sys.stdout.write(load_or_create_salt(Path(sys.argv[1])).hex())")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    salts = {p.communicate()[0] for p in procs}
    assert len(salts) == 1 and len(next(iter(salts))) == 64
