"""Fast embeddings with exact votes: one model at several precisions ("tiers"), fastest first, fp32 last.

A :class:`TieredEmbedder` returns the vectors of its first, fastest tier (e.g. OpenVINO bf16) for every text, and
with them a *source*: which text each row is, and how to get that text's vector at any slower tier, down to the
last one — the **reference**, fp32 torch, one text per forward pass (:func:`reference_embedder`). The voting layer
(:mod:`privtext.search.exact_votes`) uses the source to re-decide, with reference vectors of just the records
and candidates involved, every vote whose margin is within the fast tier's error bound; the other votes need no
reference vector at all. Votes then equal the votes of the reference vectors.

The rows carry their source as a :class:`TieredVectors` array (a float32 ndarray with a ``source`` attribute).
Any array derived from one — a slice, a mean, a concatenation, ``np.asarray`` — is a plain array again, never a
stale source: only the array :meth:`TieredEmbedder.embed` returned, or one :func:`with_source` made, has one (the
engine re-attaches the candidates' source before a vote, :func:`attach_texts`).

Tier vectors are cached: public texts in the run's embedding cache (one model id per tier), private texts in the
user's private cache too (:mod:`privtext.embed.private`), so a record's reference vector is computed once.

**Canonical reference vectors.** A transformer's vector for a text depends, in its last bits, on the batch it ran
in (padding changes the kernels' blocking; ≤ 2e-7 per coordinate, measured). The reference tier embeds one text
per forward pass with one thread, so a text's reference vector is a function of that text alone — the property
that keeps a record's re-decided vote a function of its own record. Its model id is the model's with
``@single`` appended. (The same model at batch 16 gives these vectors to float rounding; so does OpenVINO fp32.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..progress import progress
from .base import Embedder, check_texts
from .cache import CachedEmbedder, EmbeddingStore, embed_through

SINGLE = "@single"


class TieredVectors(np.ndarray):
    """A float32 (n, dim) array of fast-tier vectors that knows where its rows came from (``source``). Arrays
    derived from it (views, slices, arithmetic) have ``source = None``: a source is only ever attached on purpose,
    to the rows it describes."""

    source: RowSource | None

    def __array_finalize__(self, obj: Any) -> None:
        self.source = None


@dataclass(frozen=True, eq=False)
class RowSource:
    """Row ``i`` of the array it is attached to is ``embedder``'s fast-tier vector of ``texts[i]``. ``private``:
    the texts are private records (their slower-tier vectors also go to the user's private cache)."""

    embedder: TieredEmbedder
    texts: tuple[str, ...]
    private: bool = False

    @property
    def n_tiers(self) -> int:
        return len(self.embedder.tiers)

    def vectors(self, rows: np.ndarray | Sequence[int], tier: int) -> np.ndarray:
        """float32 vectors of ``rows`` at ``tier`` (0: the fast one the array holds; ``n_tiers - 1``: reference)."""
        return self.embedder.tier_vectors([self.texts[int(i)] for i in rows], tier, private=self.private)


def with_source(vectors: np.ndarray, source: RowSource) -> TieredVectors:
    arr = np.ascontiguousarray(vectors, dtype=np.float32).view(TieredVectors)
    if len(arr) != len(source.texts):
        raise ConfigError(f"{len(arr)} vectors for {len(source.texts)} texts")
    arr.source = source
    return arr


def row_source(x: Any) -> RowSource | None:
    """The source of an array :meth:`TieredEmbedder.embed` (or :func:`with_source`) returned, else None."""
    return x.source if isinstance(x, TieredVectors) else None


def attach_texts(vectors: np.ndarray, embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """``vectors`` (row i = ``embedder``'s vector of ``texts[i]``) with a source when ``embedder`` is tiered (or
    wraps one), else unchanged."""
    tiered = embedder if isinstance(embedder, TieredEmbedder) else getattr(embedder, "tiered", None)
    if not isinstance(tiered, TieredEmbedder):
        return vectors
    return with_source(vectors, RowSource(tiered, tuple(texts)))


@dataclass
class TierCounters:
    """What the tiers computed: texts embedded per tier (cache misses), seconds per tier, and the votes'
    re-decision figures the voting layer adds (:mod:`privtext.search.exact_votes`)."""

    values: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, n: float) -> None:
        self.values[key] = self.values.get(key, 0.0) + float(n)

    def high(self, key: str, v: float) -> None:
        self.values[key] = max(self.values.get(key, float("-inf")), float(v))


class TieredEmbedder:
    """Embed with ``tiers[0]``; give the voting layer ``tiers[1:]`` (slower, more exact; the last one the
    reference) for the rows it must re-decide. Every tier is the same model; their model ids must differ (they are
    cache keys). ``cache_dir``: the run's embedding cache (each tier cached under its own id)."""

    def __init__(self, tiers: Sequence[Embedder], *, cache_dir: str | Path | None = None,
                 description: str = ""):
        if len(tiers) < 2:
            raise ConfigError("a tiered embedder needs a fast tier and a reference tier")
        names = [t.name for t in tiers]
        if len(set(names)) != len(names):
            raise ConfigError(f"tier model ids must differ (they are cache keys), got {names}")
        dims = {int(t.dim) for t in tiers}
        if len(dims) != 1:
            raise ConfigError(f"every tier must give vectors of one dimension, got {sorted(dims)}")
        self.raw = list(tiers)
        self.tiers: list[Any] = [CachedEmbedder(t, cache_dir) for t in tiers] if cache_dir is not None else list(tiers)
        self.name = names[0]
        self.dim = dims.pop()
        self.description = description or " → ".join(names)
        self.counters = TierCounters()
        self._memo: list[dict[str, np.ndarray]] = [{} for _ in tiers]
        self._private_store: EmbeddingStore | None = None
        self.calibration: dict[str, np.ndarray] = {}  # the votes' calibration texts (public) -> their fast vectors
        self.calibration_floor_governed = False

    @property
    def tiered(self) -> TieredEmbedder:
        return self

    @property
    def reference(self) -> Any:
        return self.tiers[-1]

    def tier_name(self, tier: int) -> str:
        return str(self.raw[tier].name)

    # ------------------------------------------------------------------ the Embedder interface
    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> TieredVectors:
        texts = check_texts(texts)
        t0 = time.perf_counter()
        vecs = np.asarray(self.tiers[0].embed(texts, show_progress=show_progress), dtype=np.float32)
        self.counters.add("tier0_seconds", time.perf_counter() - t0)
        self.counters.add("tier0_texts", len(texts))
        return with_source(vecs, RowSource(self, tuple(texts)))

    def embed_private(self, texts: list[str], store: EmbeddingStore | None, *,
                      show_progress: bool = False) -> tuple[TieredVectors, int, int]:
        """:func:`privtext.embed.private.embed_private` for this embedder: the fast tier read from / written to the
        private ``store``; the returned rows' source is marked private, so their slower tiers use the store too."""
        self._private_store = store
        t0 = time.perf_counter()
        if store is None:
            vecs, hits, misses = self.tiers[0].embed(texts, show_progress=show_progress), 0, len(texts)
        else:
            vecs, hits, misses = embed_through(store, self.tier_name(0), self.dim, texts,
                                               lambda chunk: self.tiers[0].embed(chunk, show_progress=show_progress))
        self.counters.add("tier0_seconds", time.perf_counter() - t0)
        self.counters.add("tier0_texts", misses)
        return with_source(np.asarray(vecs), RowSource(self, tuple(texts), private=True)), hits, misses

    # ------------------------------------------------------------------ slower tiers, on demand
    def tier_vectors(self, texts: Sequence[str], tier: int, *, private: bool = False) -> np.ndarray:
        """float32 vectors of ``texts`` at ``tier``, each computed at most once per process (and cached on disk:
        the run's cache; private texts the user's private cache as well)."""
        if not 0 <= tier < len(self.tiers):
            raise ConfigError(f"tier {tier} out of range (0..{len(self.tiers) - 1})")
        memo = self._memo[tier]
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            t0 = time.perf_counter()
            emb = self.tiers[tier]
            store = self._private_store if private else None
            what = "fp32 vectors" if tier == len(self.tiers) - 1 else f"tier {tier} vectors"
            # a bar of its own: the vote's bar, open meanwhile, counts votes, not texts
            with progress(f"exact votes: {what}", len(missing)):
                if store is not None:
                    vecs, _, n_new = embed_through(store, self.tier_name(tier), self.dim, missing, emb.embed)
                else:
                    vecs, n_new = np.asarray(emb.embed(missing), dtype=np.float32), len(missing)
            for t, v in zip(missing, vecs, strict=True):
                memo[t] = v
            self.counters.add(f"tier{tier}_seconds", time.perf_counter() - t0)
            self.counters.add(f"tier{tier}_texts", n_new)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([memo[t] for t in texts]).astype(np.float32, copy=False)

    def close(self) -> None:
        for t in self.tiers:
            close = getattr(t, "close", None)
            if callable(close):
                close()


def reference_embedder(options: Any) -> Any:
    """The reference tier for a sentence-transformers model: torch fp32, one text per forward pass (batch 1), one
    thread — so a text's vector depends on that text alone (module docstring). Model id: the model's + ``@single``."""
    from .st import SentenceTransformerEmbedder

    ref = SentenceTransformerEmbedder(model=options.model, device="cpu", batch_size=1,
                                      max_seq_length=options.max_seq_length, torch_threads=1)
    ref.name = ref.name + SINGLE
    return ref


__all__ = ["SINGLE", "RowSource", "TierCounters", "TieredEmbedder", "TieredVectors", "attach_texts",
           "reference_embedder", "row_source", "with_source"]
