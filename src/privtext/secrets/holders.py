"""Every record that contains a detected secret's value is a holder of it: the mixin every built-in detector's
``detect`` goes through, and the wrapper for a detector from outside privtext.

Finding values is :mod:`privtext.secrets.values` (canonical matching); adding the records that contain them to a
matrix is :meth:`SecretMatrix.with_all_holders <privtext.secrets.matrix.SecretMatrix.with_all_holders>`. This
module sits above both (``values`` knows no matrix, ``matrix`` uses ``values``), so no two of them import each
other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .matrix import SecretMatrix


def propagate_holders(matrix: SecretMatrix, texts: Sequence[str]) -> SecretMatrix:
    """``matrix`` with every record of ``texts`` that contains a detected value made a holder of it
    (:meth:`SecretMatrix.with_all_holders <privtext.secrets.matrix.SecretMatrix.with_all_holders>`)."""
    return matrix.with_all_holders(texts)


def accepted_values(detector: object) -> list[str]:
    """A detector's acceptance rules in words (its ``structure()``), or a sentence saying it states none."""
    fn = getattr(detector, "structure", None)
    if callable(fn):
        return [str(x) for x in fn()]
    name = getattr(detector, "name", type(detector).__name__)
    return [f"{name}: a user-supplied detector; its acceptance rules are whatever its code finds (not stated by "
            "privtext)."]


class HoldersFromValues:
    """Mixed into every built-in detector: :meth:`detect_raw` is what the detector itself finds, :meth:`detect`
    the secret matrix a method uses — the raw one with every record that contains a found value made a holder
    (:func:`propagate_holders`)."""

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def detect(self, texts: Sequence[str]) -> SecretMatrix:
        """The ``len(texts) × n_secrets`` membership matrix: what :meth:`detect_raw` finds, plus every record
        that contains a found value (canonical matching, :mod:`privtext.secrets.values`)."""
        if not isinstance(texts, str):  # a single string: detect_raw refuses it by name
            texts = list(getattr(texts, "texts", texts))
        return self.detect_raw(texts).with_all_holders(texts)


class PropagatedDetector(HoldersFromValues):
    """A detector object from outside privtext (anything with ``name`` and ``detect``), with its matrix
    propagated like the built-ins' (:func:`privtext.secrets.build_detector` wraps such objects in it)."""

    def __init__(self, inner: object):
        self.inner = inner
        self.name = str(getattr(inner, "name", type(inner).__name__))

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        raw = getattr(self.inner, "detect_raw", None)
        return raw(texts) if callable(raw) else self.inner.detect(texts)  # type: ignore[attr-defined,no-any-return]

    def structure(self) -> list[str]:
        return accepted_values(self.inner)

    def __getattr__(self, attr: str) -> object:
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)


__all__ = ["HoldersFromValues", "PropagatedDetector", "accepted_values", "propagate_holders"]
