"""What the measurement results of :mod:`privtext.evaluate` share."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


class AsDict:
    """Mixed into the result dataclasses (FID, precision/recall, MAUVE, lengths, downstream, next word, secret
    exposure): :meth:`to_dict` gives their fields as plain dicts and lists, as ``evaluation.json`` holds them."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]


__all__ = ["AsDict"]
