"""A fast, deterministic feature-hashing embedder (a real implementation of the protocol, for tests).

Features: lower-cased words and the character n-grams of ``<word>`` (``char_ngrams``, default 3..4), weighted
``1 + log(tf)``; each feature is hashed (CRC-32 with the ``seed`` as starting value: the same in every process)
to one of ``dim`` signed buckets. Texts sharing words land close together, so nearest-neighbour tests behave
like they do with a neural embedder, only without meaning. A text without features gets the vector of the
feature ``<empty>``.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import Field, model_validator

from ..backends import BackendOptions
from .base import check_texts, l2_normalize

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingOptions(BackendOptions):
    dim: int = Field(default=256, ge=2, le=1 << 16)
    char_min: int = Field(default=3, ge=0, description="0 disables character n-grams")
    char_max: int = Field(default=4, ge=0)
    char_weight: float = Field(default=0.5, ge=0)
    seed: int = Field(default=0, ge=0, lt=2**32)

    @model_validator(mode="after")
    def _range(self) -> HashingOptions:
        if self.char_min and self.char_max < self.char_min:
            raise ValueError(f"char_max={self.char_max} must be >= char_min={self.char_min}")
        return self


class HashingEmbedder:
    Options = HashingOptions

    def __init__(self, *, dim: int = 256, char_min: int = 3, char_max: int = 4, char_weight: float = 0.5,
                 seed: int = 0):
        o = HashingOptions(dim=dim, char_min=char_min, char_max=char_max, char_weight=char_weight, seed=seed)
        self.dim = o.dim
        self.char_min, self.char_max, self.char_weight, self.seed = o.char_min, o.char_max, o.char_weight, o.seed
        self.name = f"hashing:d{self.dim}:c{self.char_min}-{self.char_max}:w{self.char_weight:g}:s{self.seed}"
        self.calls = 0

    @classmethod
    def from_options(cls, options: HashingOptions) -> HashingEmbedder:
        return cls(**options.model_dump())

    def _features(self, text: str) -> Counter[str]:
        words = _WORD.findall(text.lower())
        feats: Counter[str] = Counter("w:" + w for w in words)
        if self.char_min:
            for w in words:
                s = f"<{w}>"
                for n in range(self.char_min, self.char_max + 1):
                    for i in range(len(s) - n + 1):
                        feats["c:" + s[i:i + n]] += 1
        return feats

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = check_texts(texts)
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for r, t in enumerate(texts):
            feats = self._features(t) or Counter({"<empty>": 1})
            row = out[r]
            for f, tf in feats.items():
                h = zlib.crc32(f.encode("utf-8"), self.seed)
                weight = (1.0 + math.log(tf)) * (self.char_weight if f.startswith("c:") else 1.0)
                row[h % self.dim] += weight if (h >> 16) & 1 else -weight
            if not row.any():  # all features cancelled out (or zero weights): fall back to one bucket
                row[zlib.crc32(b"<empty>", self.seed) % self.dim] = 1.0
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalize(out, what=self.name)
