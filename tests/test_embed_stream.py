"""Embedding at scale: streaming in bounded chunks (order kept, length-sorted batches), Parquet input, bf16."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privtext.embed.hashing import HashingEmbedder
from privtext.embed.stream import embed_parquet, embed_stream, iter_parquet_texts
from privtext.errors import ConfigError, DataError


class Recording(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=32)
        self.seen: list[list[str]] = []

    def embed(self, texts, *, show_progress: bool = False):  # type: ignore[no-untyped-def]
        self.seen.append(list(texts))
        return super().embed(texts)


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(f"w{rng.integers(0, 50)}" for _ in range(int(rng.integers(1, 30)))) + f" #{i}" for i in range(n)]


def test_stream_equals_one_call_in_input_order_with_bounded_sorted_chunks() -> None:
    texts = _texts(250)
    emb = Recording()
    whole = HashingEmbedder(dim=32).embed(texts)
    parts = list(embed_stream(emb, iter(texts), chunk_size=64))  # a generator: never a list of all texts
    assert [len(p) for p in parts] == [64, 64, 64, 58]
    assert np.array_equal(np.concatenate(parts), whole)
    assert all(len(c) <= 64 for c in emb.seen)
    assert all([len(t) for t in c] == sorted(len(t) for t in c) for c in emb.seen)
    with pytest.raises(ConfigError, match="chunk_size"):
        list(embed_stream(emb, texts, chunk_size=0))


def test_parquet_is_read_in_batches_and_written_to_a_memory_map(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    texts = _texts(300)
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": texts, "label": list(range(300))}), path, row_group_size=50)
    assert list(iter_parquet_texts(path, batch_rows=40)) == texts
    out = embed_parquet(HashingEmbedder(dim=32), path, out=tmp_path / "v.npy", chunk_size=70)
    assert np.array_equal(np.load(tmp_path / "v.npy"), HashingEmbedder(dim=32).embed(texts))
    assert out.shape == (300, 32)
    with pytest.raises(DataError, match="'body'"):
        list(iter_parquet_texts(path, "body"))
    with pytest.raises(DataError, match="non-string"):
        list(iter_parquet_texts(path, "label"))


def test_bf16_minilm_keeps_the_vectors_and_has_its_own_model_id() -> None:
    pytest.importorskip("sentence_transformers")
    from privtext.embed.st import SentenceTransformerEmbedder

    texts = ["The pasta was cold and the waiter rude.", "Great coffee, friendly staff!", "Parking is a nightmare.",
             "I would come back for the dumplings alone, they were perfect."] * 3
    fp32 = SentenceTransformerEmbedder(batch_size=8, torch_threads=1)
    bf16 = SentenceTransformerEmbedder(batch_size=8, torch_threads=1, precision="bf16")
    a, b = fp32.embed(texts), bf16.embed(texts)
    assert b.dtype == np.float32 and np.allclose(np.linalg.norm(b, axis=1), 1, atol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() >= 0.999 and cos.max() < 1 - 1e-7  # close, and really computed differently
    assert bf16.name == fp32.name + "@bf16"
    with pytest.raises(ConfigError, match="'fp8'"):
        SentenceTransformerEmbedder(precision="fp8")
