"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, vLLM, Ollama, TEI...).

Same connection options, retries and key handling as the ``openai`` generator
(:mod:`privtext.backends.openai_client`); texts go in batches of ``batch_size``, ``max_concurrency`` batches at a
time; vectors are L2-normalised here (not every server normalises).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from pydantic import Field

from ..backends.openai_client import ClientOptions, MalformedReply, OpenAIClient
from ..progress import advance
from .base import check_texts, l2_normalize


class OpenAIEmbedderOptions(ClientOptions):
    model: str = "text-embedding-3-small"
    batch_size: int = Field(default=256, ge=1, le=2048)
    dimensions: int | None = Field(default=None, ge=1, description="ask the server for shorter vectors")


def _decode(vec: Any) -> list[float]:
    if isinstance(vec, str):  # encoding_format=base64
        raw = base64.b64decode(vec)
        return np.frombuffer(raw, dtype="<f4").astype(np.float64).tolist()
    if isinstance(vec, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vec):
        return vec
    raise MalformedReply("an embedding is neither a list of numbers nor base64")


class OpenAIEmbedder:
    Options = OpenAIEmbedderOptions

    def __init__(self, *, options: OpenAIEmbedderOptions):
        self.options = options
        self.client = OpenAIClient(options, what=f"embedder 'openai:{options.model}'")
        self.name = f"openai:{self.client.endpoint_id}/{options.model}" + (
            f"@{options.dimensions}" if options.dimensions else "")
        self._dim: int | None = options.dimensions
        self._pool: ThreadPoolExecutor | None = None
        self.calls = 0

    @classmethod
    def from_options(cls, options: OpenAIEmbedderOptions) -> OpenAIEmbedder:
        return cls(options=options)

    @property
    def dim(self) -> int:
        if self._dim is None:  # one probe request with a fixed public string
            self._dim = int(self._batch(["dimension probe"]).shape[1])
        return self._dim

    @property
    def retries(self) -> int:
        return self.client.retries

    def _batch(self, texts: list[str]) -> np.ndarray:
        payload: dict[str, Any] = {"model": self.options.model, "input": texts, "encoding_format": "float"}
        if self.options.dimensions:
            payload["dimensions"] = self.options.dimensions
        n = len(texts)

        def parse(data: dict[str, Any]) -> np.ndarray:
            items = data.get("data")
            if not isinstance(items, list) or len(items) != n:
                got = len(items) if isinstance(items, list) else "no"
                raise MalformedReply(f"{got} embeddings for {n} inputs")
            rows: list[list[float] | None] = [None] * n
            for pos, it in enumerate(items):
                if not isinstance(it, dict):
                    raise MalformedReply("an item of 'data' is not an object")
                idx = it.get("index", pos)
                if not isinstance(idx, int) or not 0 <= idx < n or rows[idx] is not None:
                    raise MalformedReply(f"bad embedding index {idx!r}")
                rows[idx] = _decode(it.get("embedding"))
            dims = {len(r) for r in rows if r is not None}
            if len(dims) != 1 or 0 in dims:
                raise MalformedReply(f"embeddings of differing or zero length {sorted(dims)}")
            arr = np.asarray(rows, dtype=np.float64)
            if not np.all(np.isfinite(arr)) or np.any(np.linalg.norm(arr, axis=1) == 0):
                raise MalformedReply("non-finite or zero embedding vectors")
            return arr

        arr = self.client.request("embeddings", payload, parse)
        self.calls += 1
        if self._dim is not None and arr.shape[1] != self._dim:
            from ..errors import BackendError

            raise BackendError(f"{self.name}: server returned {arr.shape[1]}-d vectors, expected {self._dim}")
        self._dim = int(arr.shape[1])
        return l2_normalize(arr, what=self.name)

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        bs = self.options.batch_size
        batches = [texts[i:i + bs] for i in range(0, len(texts), bs)]

        def one(batch: list[str]) -> np.ndarray:  # each finished request moves the run's progress bar
            vecs = self._batch(batch)
            advance(len(batch))
            return vecs

        if len(batches) == 1 or self.options.max_concurrency == 1:
            parts = [one(b) for b in batches]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.options.max_concurrency,
                                                thread_name_prefix="privtext-embed")
            parts = list(self._pool.map(one, batches))
        return np.concatenate(parts, axis=0)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.client.close()
