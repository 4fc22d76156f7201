"""Plumbing shared by every backend kind (generators, embedders, detectors): options models with clear errors,
input checks, and the OpenAI-compatible HTTP client (:mod:`.openai_client`). Nothing here knows about privacy or
runs."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, DataError


class BackendOptions(BaseModel):
    """Base of every backend's options model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def parse_options(model: type[BaseModel], raw: Mapping[str, Any], *, where: str) -> Any:
    """Validate ``raw`` against ``model``; errors become :class:`ConfigError` naming the key (with a suggestion)."""
    try:
        return model.model_validate(dict(raw))
    except ValidationError as err:
        valid = list(model.model_fields)
        msgs = []
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"]) or "(options)"
            if e["type"] == "extra_forbidden":
                key = str(e["loc"][-1])
                hint = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
                msg = f"unknown option {key!r}"
                msg += f" (did you mean {hint[0]!r}?)" if hint else f" (valid options: {', '.join(valid)})"
                msgs.append(msg)
            elif e["type"] == "missing":
                msgs.append(f"missing required option {loc!r}")
            else:
                text = e["msg"].removeprefix("Value error, ")
                msgs.append(f"{loc}: {text} (got {e.get('input')!r})")
        raise ConfigError(f"{where}: " + "; ".join(msgs)) from None


def check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ConfigError(f"n must be a non-negative integer, got {n!r}")
    return int(n)


def check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(
            f"rng must be a numpy.random.Generator (privtext.rng.make_rng / derive), got {type(rng).__name__}"
        )
    return rng


def check_texts(texts: Any, *, what: str = "texts") -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise DataError(f"{what} must be a sequence of strings, got a single {type(texts).__name__}")
    try:
        out = list(texts)
    except TypeError:
        raise DataError(f"{what} must be a sequence of strings, got {type(texts).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise DataError(f"{what}[{i}] is {type(t).__name__}, not str")
    return out


__all__ = ["BackendOptions", "check_n", "check_rng", "check_texts", "parse_options"]
