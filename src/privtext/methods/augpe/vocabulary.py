"""DP-KPS's Aug-PE baseline (dpkps.txt §3): initial candidates from prompts holding random DP-vocabulary terms."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConfigError


class VocabularyPrompts:
    """A generator whose RANDOM_API writes each candidate from a seeded prompt of ``terms_per_prompt`` random terms
    of the released DP vocabulary (``terms``) and the document type — no class (DP-KPS's Aug-PE baseline); every
    other operation is the wrapped generator's. The per-label DP votes decide which label a candidate serves."""

    label_conditioned = False  # the prompts hold no class

    def __init__(self, inner: Any, *, terms_per_prompt: int):
        self.inner = inner
        self.terms: list[str] | None = None
        self.k = int(terms_per_prompt)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def random(self, label: Any, n: int, *, rng: np.random.Generator) -> list[str]:
        if self.terms is None:
            raise ConfigError("the DP vocabulary was not released before the first prompt")
        k = min(self.k, len(self.terms))
        seqs = [[self.terms[int(i)] for i in rng.choice(len(self.terms), size=k, replace=False)] for _ in range(n)]
        doc_type = getattr(getattr(self.inner, "family", None), "doc_type", None) or "text"
        return self.inner.seeded(seqs, doc_type, rng=rng)


__all__ = ["VocabularyPrompts"]
