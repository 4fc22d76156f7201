"""The :class:`Corpus`: ids, texts and zero or more label columns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError


@dataclass(frozen=True)
class Corpus:
    """An ordered collection of texts with ids and label columns.

    ``labels`` maps a column name to one string value per text. Label values are kept verbatim (Yelp's
    ``"Business Category: Restaurants"`` keeps its prefix), so prompts and evaluation see the same strings.
    """

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(str(i) for i in self.ids))
        object.__setattr__(self, "texts", tuple(self.texts))
        object.__setattr__(self, "labels", {str(k): tuple(str(x) for x in v) for k, v in self.labels.items()})
        n = len(self.texts)
        if len(self.ids) != n:
            raise DataError(f"corpus {self.name!r}: {len(self.ids)} ids for {n} texts")
        for col, vals in self.labels.items():
            if len(vals) != n:
                raise DataError(f"corpus {self.name!r}: label column {col!r} has {len(vals)} values for {n} texts")
        for i, t in enumerate(self.texts):
            if not isinstance(t, str):
                raise DataError(f"corpus {self.name!r}: text {i} is {type(t).__name__}, not str")
        if len(set(self.ids)) != n:
            dup = [k for k, c in Counter(self.ids).items() if c > 1][:5]
            raise DataError(f"corpus {self.name!r}: duplicate ids {dup}")

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        labels: Mapping[str, Sequence[Any]] | None = None,
        *,
        ids: Iterable[Any] | None = None,
        name: str = "",
    ) -> Corpus:
        """A corpus of ``texts`` with label columns ``labels`` (column → one value per text) and ``ids`` (default
        ``"0"``, ``"1"``, …); the constructor's checks apply (equal lengths, string texts, unique ids)."""
        texts = tuple(texts)
        ids_t = tuple(ids) if ids is not None else tuple(str(i) for i in range(len(texts)))
        return cls(ids=ids_t, texts=texts, labels=dict(labels or {}), name=name)

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def label_columns(self) -> list[str]:
        """The label column names, in order (empty for unlabelled text)."""
        return list(self.labels)

    def label_tuple(self, i: int, columns: Sequence[str] | None = None) -> tuple[str, ...]:
        """Record ``i``'s label values for ``columns`` (default: all), in that order."""
        cols = self.label_columns if columns is None else list(columns)
        return tuple(self.labels[c][i] for c in cols)

    def label_tuples(self, columns: Sequence[str] | None = None) -> list[tuple[str, ...]]:
        """Every record's label tuple for ``columns`` (default: all; an empty tuple each when there are none);
        raises :class:`~privtext.errors.DataError` naming a missing column."""
        cols = self.label_columns if columns is None else list(columns)
        for c in cols:
            if c not in self.labels:
                raise DataError(f"corpus {self.name!r} has no label column {c!r}; it has {self.label_columns}")
        return list(zip(*(self.labels[c] for c in cols), strict=True)) if cols else [()] * len(self)

    def subset(self, indices: Iterable[int] | np.ndarray, *, name: str | None = None) -> Corpus:
        """A new corpus of the records at ``indices`` (in that order; ids must stay unique), named ``name``
        (default: this one's name)."""
        idx = [int(i) for i in np.asarray(list(indices) if not isinstance(indices, np.ndarray) else indices)]
        return Corpus(
            ids=tuple(self.ids[i] for i in idx),
            texts=tuple(self.texts[i] for i in idx),
            labels={c: tuple(v[i] for i in idx) for c, v in self.labels.items()},
            name=self.name if name is None else name,
        )

    def select_labels(self, columns: Sequence[str]) -> Corpus:
        """The same records with only the label ``columns``; raises :class:`~privtext.errors.DataError` naming
        missing columns."""
        missing = [c for c in columns if c not in self.labels]
        if missing:
            raise DataError(f"corpus {self.name!r} lacks label column(s) {missing}; it has {self.label_columns}")
        return Corpus(self.ids, self.texts, {c: self.labels[c] for c in columns}, self.name)

    def records(self) -> list[dict[str, str]]:
        """The records as dicts: ``id``, ``text`` and one key per label column."""
        out = []
        for i in range(len(self)):
            r = {"id": self.ids[i], "text": self.texts[i]}
            for c, v in self.labels.items():
                r[c] = v[i]
            out.append(r)
        return out

    def to_frame(self) -> Any:
        """The corpus as a pandas DataFrame with columns ``id``, ``text`` and the label columns."""
        import pandas as pd

        d: dict[str, Any] = {"id": list(self.ids), "text": list(self.texts)}
        for c, v in self.labels.items():
            d[c] = list(v)
        return pd.DataFrame(d)

    def concat(self, other: Corpus, *, name: str | None = None) -> Corpus:
        """This corpus followed by ``other`` (the constructor refuses duplicate ids); raises
        :class:`~privtext.errors.DataError` when their label columns differ."""
        if set(self.labels) != set(other.labels):
            raise DataError(
                f"cannot concatenate corpora with label columns {self.label_columns} and {other.label_columns}"
            )
        return Corpus(
            self.ids + other.ids,
            self.texts + other.texts,
            {c: self.labels[c] + other.labels[c] for c in self.labels},
            name or self.name,
        )
