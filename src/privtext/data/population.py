"""The candidate set of one Private Evolution iteration: texts the generator wrote (public), their label group,
where each came from, and their embeddings. Nothing in it is private."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Population:
    ids: list[str]
    texts: list[str]
    group: np.ndarray  # int64 label-group index per candidate
    origin: list[str]  # random | variation | survivor | lookahead
    parent: list[str | None]
    generator: list[str]
    emb: np.ndarray | None = None  # float32 (n, d)

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def empty(cls, dim: int | None = None) -> Population:
        return cls([], [], np.zeros(0, dtype=np.int64), [], [], [],
                   None if dim is None else np.zeros((0, dim), dtype=np.float32))

    def take(self, idx: Sequence[int] | np.ndarray) -> Population:
        idx = np.asarray(idx, dtype=np.int64)
        return Population(
            ids=[self.ids[i] for i in idx],
            texts=[self.texts[i] for i in idx],
            group=self.group[idx].copy(),
            origin=[self.origin[i] for i in idx],
            parent=[self.parent[i] for i in idx],
            generator=[self.generator[i] for i in idx],
            emb=None if self.emb is None else self.emb[idx].copy(),
        )

    @staticmethod
    def concat(parts: Sequence[Population]) -> Population:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Population.empty()
        embs = [p.emb for p in parts]
        return Population(
            ids=[x for p in parts for x in p.ids],
            texts=[x for p in parts for x in p.texts],
            group=np.concatenate([p.group for p in parts]),
            origin=[x for p in parts for x in p.origin],
            parent=[x for p in parts for x in p.parent],
            generator=[x for p in parts for x in p.generator],
            emb=None if any(e is None for e in embs) else np.concatenate(embs),  # type: ignore[arg-type]
        )

    def frame(self, label_values: Sequence[tuple[str, ...]], label_columns: Sequence[str]) -> Any:
        import pandas as pd

        d: dict[str, Any] = {"id": self.ids, "text": self.texts}
        for j, c in enumerate(label_columns):
            d[c] = [label_values[g][j] for g in self.group]
        d["group"] = self.group.astype(np.int64)
        d["origin"] = self.origin
        d["parent"] = self.parent
        d["generator"] = self.generator
        return pd.DataFrame(d)

    @classmethod
    def from_frame(cls, df: Any, emb: np.ndarray | None) -> Population:
        return cls(
            ids=[str(x) for x in df["id"]],
            texts=[str(x) for x in df["text"]],
            group=df["group"].to_numpy(dtype=np.int64),
            origin=[str(x) for x in df["origin"]],
            parent=[None if x is None or (isinstance(x, float) and np.isnan(x)) else str(x) for x in df["parent"]],
            generator=[str(x) for x in df["generator"]],
            emb=emb,
        )


__all__ = ["Population"]
