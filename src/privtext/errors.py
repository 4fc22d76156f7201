"""Typed errors.

Every error privtext raises on purpose derives from :class:`PrivtextError`, names the bad value, and where it
matters states the privacy reason. The CLI turns them into a one-line message and a non-zero exit code.
"""

from __future__ import annotations

from typing import Any


class PrivtextError(Exception):
    """Base class of every error privtext raises on purpose."""


class ConfigError(PrivtextError, ValueError):
    """A configuration value is missing, unknown or invalid."""


class UnknownNameError(ConfigError, KeyError):
    """A name does not resolve in a registry. The message lists the valid names."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, valid
        super().__init__(f"unknown {kind} {name!r}; valid names: {', '.join(sorted(valid)) or '(none)'}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


class DataError(PrivtextError, ValueError):
    """Input data cannot be used as given."""


class MissingColumnError(DataError):
    def __init__(self, path: str, missing: list[str], available: list[str], *, hint: str = ""):
        self.path, self.missing, self.available, self.hint = path, missing, available, hint
        super().__init__(
            f"{path}: missing column(s) {', '.join(map(repr, missing))}; "
            f"available: {', '.join(map(repr, available)) or '(none)'}" + (f"; {hint}" if hint else "")
        )


class EmptyTextError(DataError):
    """``rows``: where the empty texts are, as ``unit`` counts them (``line``: 1-based lines of the file, as an
    editor shows them; ``record``: 1-based records of a table without lines)."""

    def __init__(self, path: str, rows: list[int], column: str, *, unit: str = "row"):
        self.path, self.rows, self.column, self.unit = path, rows, column, unit
        shown = ", ".join(str(r) for r in rows[:10]) + (" ..." if len(rows) > 10 else "")
        super().__init__(f"{path}: empty or missing text in column {column!r} at {unit}(s) {shown} "
                         f"({len(rows)} in all)")


class DataEncodingError(DataError):
    def __init__(self, path: str, line: int, detail: str):
        self.path, self.line, self.detail = path, line, detail
        super().__init__(f"{path}:{line}: not valid UTF-8 ({detail})")


class DataFormatError(DataError):
    """The file cannot be parsed in its format (empty file, broken JSON line, unknown extension)."""


class PrivacyError(PrivtextError):
    """A privacy parameter or accounting request is invalid."""


class InvalidPrivacyParameter(PrivacyError, ValueError):
    """A privacy parameter is out of range; the message says why it matters."""


class BudgetExceededError(PrivacyError):
    """A release would exceed the run's privacy budget. Raised before any data is touched."""


class PrivacyCheckError(PrivacyError):
    """A privacy check found private data where only public text, generated text or released values may go: a
    generator's training text or prompt, the preference pairs or vote values a learning step would train on. The
    run stops at once; ``privtext run`` / ``resume`` exit 3, as for a finished run whose prompt or output audit
    failed (an invalid parameter or an exceeded budget stays a :class:`PrivacyError` with exit 2)."""


class BackendError(PrivtextError):
    """A generator or embedder backend failed."""


class MissingDependencyError(BackendError, ImportError):
    """An optional dependency is not installed. The message gives the install command."""

    def __init__(self, package: str, extra: str, purpose: str):
        self.package, self.extra = package, extra
        super().__init__(
            f"{purpose} needs the optional package {package!r}: install it with "
            f"`pip install 'privtext[{extra}]' -c constraints.txt`"
        )


def optional_import(module: str, extra: str, purpose: str, *, package: str | None = None) -> Any:
    """``import module`` (a dotted name gives the submodule), or a :class:`MissingDependencyError` naming
    ``package`` (default: the module's top-level name), the ``extra`` that installs it and ``purpose`` when it is
    not installed. The one way privtext imports an optional dependency."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package or module.split(".")[0], extra, purpose) from None


class RunError(PrivtextError):
    """A run directory is missing, incomplete or inconsistent."""


class ResumeError(RunError):
    """A run cannot be resumed as asked."""


class AggregationError(PrivtextError):
    """A secure aggregation round did not complete (too few parties survived, a party failed, a timeout)."""
