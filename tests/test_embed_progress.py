"""The embedders move the run's progress bar batch by batch (privtext.progress.advance), and a bar counts each text
once however it is served: embedded, read from a cache, or repeated. The torch path's per-batch calls make the
batches sentence-transformers' own encode makes, so the vectors are unchanged."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from privtext import progress as progress_mod
from privtext.embed import CachedEmbedder, build_embedder, l2_normalize
from privtext.embed.hashing import HashingEmbedder
from privtext.embed.private import embed_private
from privtext.embed.tiers import TieredEmbedder
from privtext.testing import OpenAIServer

# lengths with ties across batch boundaries (encode sorts by characters, so ties decide the batch members)
TEXTS = ["a short one", "another one", "the third text is a little longer than those", "x y z w v",
         "a short one, again", "quite a bit longer than the others, this text has many more words in it",
         "mid length text here", "mid length text there", "one", "two", "tre", "the last text of the set"]


@pytest.fixture
def advances(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """A bar is open (as the engine's embedding bar is) and records every advance it gets."""
    got: list[float] = []
    with progress_mod.progress("embedding", len(TEXTS)) as bar:
        monkeypatch.setattr(bar, "advance", lambda n=1: got.append(n))
        yield got


class Counting:
    """An embedder (the protocol, for tests) that advances the bar per call, as the real backends do per batch."""

    def __init__(self, name: str, dim: int = 32):
        self.name, self.dim, self.inner, self.texts = name, dim, HashingEmbedder(dim=dim), 0

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        self.texts += len(texts)
        progress_mod.advance(len(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def torch_minilm():  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")
    from privtext.embed.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(batch_size=4, torch_threads=1, runtime="torch")


def test_torch_batches_move_the_bar_and_give_encodes_own_vectors(torch_minilm, advances: list[float]) -> None:
    got = torch_minilm.embed(TEXTS)
    assert advances == [4, 4, 4]
    one_call = torch_minilm.model.encode(TEXTS, batch_size=4, convert_to_numpy=True, normalize_embeddings=True)
    # bit for bit what one encode call gives (and the embedder gave before it split the call): the same batches
    assert np.array_equal(got, l2_normalize(np.asarray(one_call), what="one call"))


def test_the_cache_advances_what_it_serves_and_the_embedder_the_rest(tmp_path: Path, advances: list[float]) -> None:
    inner = Counting("counting")
    emb = CachedEmbedder(inner, tmp_path / "cache")
    emb.embed(TEXTS[:5])
    advances.clear()
    emb.embed([*TEXTS, TEXTS[-1]])  # 5 cached, 7 new, one repeated
    assert sum(advances) == len(TEXTS) + 1 and inner.texts == 5 + 7


def test_the_private_cache_path_counts_each_text_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      advances: list[float]) -> None:
    monkeypatch.setenv("PRIVTEXT_CACHE_HOME", str(tmp_path / "home"))
    tiers = TieredEmbedder([Counting("fast"), Counting("ref")], cache_dir=tmp_path / "run")
    embed_private(tiers, TEXTS[:4])
    advances.clear()
    embed_private(tiers, TEXTS)
    assert sum(advances) == len(TEXTS)


def test_fp32_vectors_for_a_vote_get_a_bar_of_their_own(tmp_path: Path, advances: list[float]) -> None:
    """During a vote the innermost bar counts votes: the reference tier's texts are counted on their own bar."""
    ref = Counting("ref")
    tiers = TieredEmbedder([Counting("fast"), ref])
    tiers.tier_vectors(TEXTS, 1)
    assert ref.texts == len(TEXTS) and advances == []


def test_openai_requests_move_the_bar(advances: list[float]) -> None:
    with OpenAIServer(embedding_dim=24) as srv:
        emb = build_embedder({"backend": "openai", "model": "test-embedding", "base_url": srv.url,
                              "api_key_env": "PRIVTEXT_NO_KEY_HERE", "batch_size": 5, "backoff_base": 0.01,
                              "cache": False})
        emb.embed(TEXTS)
    assert sorted(advances) == [2, 5, 5]


@pytest.mark.parametrize("batch", [1, 5])
def test_openvino_requests_move_the_bar(batch: int, advances: list[float]) -> None:
    pytest.importorskip("openvino")
    from privtext.embed.st import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(batch_size=batch, runtime="openvino")
    emb.embed(TEXTS)
    assert sum(advances) == len(TEXTS) and len(advances) == (len(TEXTS) if batch == 1 else 3)
