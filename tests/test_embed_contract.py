"""The contract every Embedder passes (hashing, sentence-transformers MiniLM offline, OpenAI-compatible on a local
server), bare and wrapped in the on-disk cache."""

from __future__ import annotations

import numpy as np
import pytest

from privtext.embed import CachedEmbedder, Embedder, build_embedder
from privtext.errors import DataError
from privtext.testing import OpenAIServer

TEXTS = ["A man is eating food.", "A man is eating a meal.", "The stock market fell sharply today.",
         "Le chat dort.", "", "the soup was cold"]
BACKENDS = ["hashing", "sentence-transformers", "openai"]


class Counting:
    """Wraps an embedder and records what reaches it."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.seen: list[list[str]] = []

    def embed(self, texts, *, show_progress: bool = False) -> np.ndarray:
        self.seen.append(list(texts))
        return self.inner.embed(texts, show_progress=show_progress)


@pytest.fixture(scope="module")
def server():
    with OpenAIServer(embedding_dim=24) as srv:
        yield srv


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    pytest.importorskip("sentence_transformers")
    return build_embedder({"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "batch_size": 8,
                            "torch_threads": 1})


@pytest.fixture(params=BACKENDS)
def embedder(request: pytest.FixtureRequest) -> Embedder:
    if request.param == "hashing":
        return build_embedder({"backend": "hashing", "dim": 64})
    if request.param == "sentence-transformers":
        return request.getfixturevalue("minilm")
    srv = request.getfixturevalue("server")
    return build_embedder({"backend": "openai", "model": "test-embedding", "base_url": srv.url,
                           "api_key_env": "PRIVTEXT_NO_KEY_HERE", "batch_size": 4, "backoff_base": 0.01})


@pytest.fixture(params=["bare", "cached"])
def emb(request: pytest.FixtureRequest, embedder: Embedder, tmp_path) -> Embedder:
    return embedder if request.param == "bare" else CachedEmbedder(embedder, tmp_path / "cache")


def test_shape_dtype_and_unit_norm(emb: Embedder) -> None:
    assert isinstance(emb, Embedder)
    assert isinstance(emb.name, str) and emb.name and isinstance(emb.dim, int) and emb.dim > 0
    x = emb.embed(TEXTS)
    assert x.dtype == np.float32 and x.shape == (len(TEXTS), emb.dim)
    assert np.all(np.isfinite(x))
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


def test_empty_input(emb: Embedder) -> None:
    x = emb.embed([])
    assert x.shape == (0, emb.dim) and x.dtype == np.float32


def test_deterministic_and_order_independent(emb: Embedder) -> None:
    a = emb.embed(TEXTS[:4])
    b = emb.embed(TEXTS[:4])
    assert np.allclose(a, b, atol=1e-6)
    c = emb.embed(TEXTS[:4][::-1])
    assert np.allclose(a, c[::-1], atol=1e-5)
    one = emb.embed([TEXTS[2]])
    assert np.allclose(one[0], a[2], atol=1e-5)


def test_different_texts_differ(emb: Embedder) -> None:
    x = emb.embed(TEXTS[:3])
    assert not np.allclose(x[0], x[2], atol=1e-3)


def test_bad_input_is_a_data_error(emb: Embedder) -> None:
    with pytest.raises(DataError):
        emb.embed("a single string")
    with pytest.raises(DataError, match=r"texts\[1\]"):
        emb.embed(["ok", None])


def test_cache_hit_is_identical_and_skips_the_model(embedder: Embedder, tmp_path) -> None:
    counting = Counting(embedder)
    cached = CachedEmbedder(counting, tmp_path / "c")
    first = cached.embed(TEXTS)
    assert len(counting.seen) == 1 and sorted(counting.seen[0]) == sorted(set(TEXTS))
    again = cached.embed(TEXTS[::-1])
    assert np.array_equal(again, first[::-1])
    assert len(counting.seen) == 1  # no second call to the model
    mixed = cached.embed([TEXTS[0], "a brand new sentence", TEXTS[0]])
    assert counting.seen[-1] == ["a brand new sentence"]
    assert np.array_equal(mixed[0], first[0]) and np.array_equal(mixed[2], first[0])
    # a resumed run (a new process: a new wrapper on the same folder) reads the vectors back
    counting2 = Counting(embedder)
    resumed = CachedEmbedder(counting2, tmp_path / "c").embed(TEXTS)
    assert np.array_equal(resumed, first) and counting2.seen == []


def test_minilm_is_the_offline_default(minilm: Embedder) -> None:
    assert minilm.dim == 384 and minilm.name == "sentence-transformers/all-MiniLM-L6-v2"
    x = minilm.embed(TEXTS[:3])
    assert x[0] @ x[1] > 0.7 > x[0] @ x[2]
    assert build_embedder({"torch_threads": 1}).name == minilm.name


def test_the_default_batch_depends_on_the_device_and_never_changes_the_vectors() -> None:
    """batch_size unset: 16 on the CPU, 256 on a GPU (benchmarks/embed_batch.py); set: kept. The batch changes only
    padding, which the mask and mean pooling ignore, so a text's vector is the same (to float rounding) in a batch
    of 1, 3 or 16 texts of other lengths."""
    pytest.importorskip("sentence_transformers")
    from privtext.embed.st import SentenceTransformerEmbedder, STOptions, default_batch_size

    assert default_batch_size("cpu") == 16 and default_batch_size("cuda") == default_batch_size("cuda:1") == 256
    assert STOptions().batch_size is None and STOptions(batch_size=5).batch_size == 5
    e = SentenceTransformerEmbedder(device="cpu", torch_threads=1)
    assert e.batch_size == 16 and SentenceTransformerEmbedder(device="cpu", batch_size=3).batch_size == 3
    texts = [t * k for k in (1, 7, 30) for t in TEXTS if t]
    whole = e.embed(texts)
    for bs in (1, 3):
        e.batch_size = bs
        np.testing.assert_allclose(e.embed(texts), whole, atol=2e-6)
