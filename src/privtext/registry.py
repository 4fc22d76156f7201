"""Name registries for pluggable kinds (Generator, Embedder, SecretDetector, Method, voting backends).

A registry maps a config string to a factory. Entries may be registered lazily as ``"module:attr"`` strings so
that a heavy backend's module (and its optional dependency) is imported only when that name is used.
An unknown name raises :class:`~privtext.errors.UnknownNameError` listing the valid names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from .errors import ConfigError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T | str] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, obj: T | str | None = None, *, aliases: tuple[str, ...] = ()) -> Any:
        """Register ``obj`` under ``name`` (use as a decorator when ``obj`` is omitted).

        ``obj`` may be a ``"package.module:attr"`` string, resolved on first :meth:`get`.
        """

        def _do(o: T | str) -> T | str:
            key = name.lower()
            if key in self._entries or key in self._aliases:
                raise ConfigError(f"{self.kind} {name!r} is already registered")
            self._entries[key] = o
            for a in aliases:
                self._aliases[a.lower()] = key
            return o

        if obj is None:
            return _do
        return _do(obj)

    def canonical(self, name: str) -> str:
        if not isinstance(name, str):
            raise ConfigError(f"{self.kind} name must be a string, got {name!r}")
        key = name.lower()
        key = self._aliases.get(key, key)
        if key not in self._entries:
            raise UnknownNameError(self.kind, name, list(self._entries))
        return key

    def get(self, name: str) -> T:
        key = self.canonical(name)
        obj = self._entries[key]
        if isinstance(obj, str):
            module, _, attr = obj.partition(":")
            resolved = getattr(importlib.import_module(module), attr)
            self._entries[key] = resolved
            return resolved  # type: ignore[no-any-return]
        return obj

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        key = name.lower()
        return key in self._entries or key in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def build(registry: Registry[Callable[..., T]], name: str, /, **kwargs: Any) -> T:
    """Look ``name`` up and call the factory with keyword arguments."""
    return registry.get(name)(**kwargs)
