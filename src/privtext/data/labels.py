"""Public label information: what a label is (:class:`LabelInfo`, what generators condition on) and the run's
label groups (:class:`LabelSpace`, group index ↔ label tuple). Both hold public information only: label names and
values from the public corpus or from the configuration, never counts of private records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

_NAMED_VALUE = re.compile(r"^[^:\n]{1,60}:\s+\S")


@dataclass(frozen=True)
class LabelInfo:
    """Public label information used to condition generation.

    ``columns=("label1", "label2"), values=("Business Category: Restaurants", "Review Stars: 5.0")``.
    """

    columns: tuple[str, ...]
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        cols = (self.columns,) if isinstance(self.columns, str) else tuple(self.columns)
        vals = (self.values,) if isinstance(self.values, str) else tuple(self.values)
        object.__setattr__(self, "columns", tuple(str(c) for c in cols))
        object.__setattr__(self, "values", tuple(str(v) for v in vals))
        if len(self.columns) != len(self.values):
            raise ConfigError(
                f"LabelInfo has {len(self.columns)} column(s) {self.columns} but {len(self.values)} value(s) "
                f"{self.values}"
            )

    @classmethod
    def from_mapping(cls, labels: Mapping[str, str]) -> LabelInfo:
        return cls(tuple(labels), tuple(labels.values()))

    def as_dict(self) -> dict[str, str]:
        return dict(zip(self.columns, self.values, strict=True))

    def parts(self) -> list[str]:
        """One ``"Name: value"`` string per column (values already carrying a name are kept as they are)."""
        return [v if _NAMED_VALUE.match(v) else f"{c}: {v}" for c, v in zip(self.columns, self.values, strict=True)]

    def render(self) -> str:
        """Text for prompts: ``"Business Category: Restaurants, Review Stars: 5.0"``."""
        return ", ".join(self.parts())

    def __bool__(self) -> bool:
        return bool(self.columns)


@dataclass(frozen=True)
class LabelSpace:
    """The public label groups: group index ↔ label tuple (one group ``()`` when there are no labels)."""

    columns: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ConfigError("the label space is empty: the public corpus has no label combinations")
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(self.values)})

    @classmethod
    def unlabeled(cls) -> LabelSpace:
        return cls((), ((),))

    def __len__(self) -> int:
        return len(self.values)

    def index(self, value: tuple[str, ...]) -> int:
        return self._index.get(tuple(value), -1)  # type: ignore[attr-defined]

    def groups_of(self, tuples: Sequence[tuple[str, ...]]) -> np.ndarray:
        return np.array([self.index(t) for t in tuples], dtype=np.int64)

    def info(self, g: int) -> Any:
        if not self.columns:
            return None
        return LabelInfo(columns=self.columns, values=tuple(self.values[g]))

    def key(self, g: int) -> str:
        return " | ".join(self.values[g]) if self.columns else "(all)"


__all__ = ["LabelInfo", "LabelSpace"]
