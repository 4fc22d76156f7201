"""The :class:`SecretDetector` protocol, the ``SECRET_DETECTORS`` registry and :func:`build_detector`.

A detector turns texts into a :class:`~privtext.secrets.matrix.SecretMatrix`. Detectors are built from a config
*spec*:

* a name: ``"regex"``;
* a list of specs: their union, ``["regex", {"name": "explicit", "file": "secrets.txt"}]``;
* a mapping ``{"name": NAME, **options}``: options are the detector's keyword-only constructor arguments, e.g.
  ``{"name": "random_words", "quantile": 0.2, "num_secrets": 50}``; ``{"name": "union", "detectors": [...]}`` is
  the explicit form of a list;
* an object that already implements :class:`SecretDetector` (a built-in is returned as is; any other object is
  wrapped in :class:`~privtext.secrets.holders.PropagatedDetector`, so that its ``detect`` too makes every record
  that contains a found value a holder).

Unknown names raise :class:`~privtext.errors.UnknownNameError` (listing the valid names); unknown options raise
:class:`~privtext.errors.ConfigError` naming the option and the valid ones.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..registry import Registry
from .holders import HoldersFromValues, PropagatedDetector, accepted_values
from .matrix import SecretMatrix, as_texts


@runtime_checkable
class SecretDetector(Protocol):
    """Finds declared secrets in texts."""

    name: str

    def detect(self, texts: Sequence[str]) -> SecretMatrix:
        """A ``len(texts) × n_secrets`` membership matrix (with spans where the detector has offsets). The
        built-ins, and any object :func:`build_detector` wraps, return it with every record that contains a found
        value made a holder (:mod:`privtext.secrets.values`)."""
        ...


SECRET_DETECTORS: Registry[Any] = Registry("secret detector")
SECRET_DETECTORS.register("regex", "privtext.secrets.pii_regex:RegexDetector", aliases=("pii", "pii_regex"))
SECRET_DETECTORS.register("explicit", "privtext.secrets.explicit:ExplicitDetector", aliases=("list",))
SECRET_DETECTORS.register(
    "random_words", "privtext.secrets.random_words:RandomWordsDetector", aliases=("random-words", "randomwords")
)
SECRET_DETECTORS.register("presidio", "privtext.secrets.presidio:PresidioDetector")
SECRET_DETECTORS.register("hf", "privtext.secrets.hf:HFDetector", aliases=("transformers", "huggingface"))
SECRET_DETECTORS.register("union", "privtext.secrets.base:UnionDetector")


def _options_of(factory: Any) -> tuple[list[str], list[str], bool]:
    """(accepted option names, required option names, accepts **kwargs) of a detector factory."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    sig = inspect.signature(target)
    names, required, var = [], [], False
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.VAR_KEYWORD:
            var = True
        elif p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
            if p.default is p.empty:
                required.append(p.name)
    return names, required, var


def detector_options(name: str) -> list[str]:
    """The option names a registered detector accepts."""
    return _options_of(SECRET_DETECTORS.get(name))[0]


def describe_detector(spec: Any) -> str:
    """The declared secret types of a detector spec in words (configuration only, never what was found):
    ``regex (EMAIL, PHONE, ...); explicit list PATIENT_NAME``."""
    if isinstance(spec, str):
        spec = {"name": spec}
    if isinstance(spec, Mapping):
        name = str(spec.get("name", "?"))
        if name == "regex":
            from .pii_regex import ENTITY_TYPES

            return f"regex patterns ({', '.join(spec.get('entities') or ENTITY_TYPES)})"
        if name == "explicit":
            return f"explicit list ({spec.get('type', 'SECRET')})"
        return name
    if isinstance(spec, Sequence) and not isinstance(spec, (bytes, bytearray)):
        return "; ".join(describe_detector(s) for s in spec)
    return str(getattr(spec, "name", spec))


def build_detector(spec: Any) -> SecretDetector:
    """Build a detector from a name, a list of specs (union), a ``{name: ..., **options}`` mapping, or an
    existing detector."""
    if isinstance(spec, str):
        return _build_named(spec, {})
    if isinstance(spec, Mapping):
        opts = dict(spec)
        if "name" not in opts:
            raise ConfigError(
                f"secret detector mapping needs a 'name' key (one of {', '.join(SECRET_DETECTORS.names())}); "
                f"got keys {sorted(map(str, opts))}"
            )
        name = opts.pop("name")
        return _build_named(name, opts)
    if isinstance(spec, Sequence) and not isinstance(spec, (bytes, bytearray)):
        return UnionDetector(detectors=list(spec))
    if isinstance(spec, HoldersFromValues):
        return spec  # type: ignore[return-value]
    if hasattr(spec, "detect") and hasattr(spec, "name"):
        return PropagatedDetector(spec)  # type: ignore[return-value]
    raise ConfigError(
        f"secret detector spec must be a name, a list or a mapping with 'name', got {type(spec).__name__} {spec!r}"
    )


def _build_named(name: Any, opts: dict[str, Any]) -> SecretDetector:
    if not isinstance(name, str):
        raise ConfigError(f"secret detector name must be a string, got {name!r}")
    key = SECRET_DETECTORS.canonical(name)
    factory = SECRET_DETECTORS.get(key)
    valid, required, var = _options_of(factory)
    if not var:
        unknown = [k for k in opts if k not in valid]
        if unknown:
            parts = []
            for k in unknown:
                hint = difflib.get_close_matches(str(k), valid, n=1)
                parts.append(f"{k!r}" + (f" (did you mean {hint[0]!r}?)" if hint else ""))
            raise ConfigError(
                f"unknown option(s) {', '.join(parts)} for secret detector {key!r}; "
                f"valid options: {', '.join(valid) or '(none)'}"
            )
    missing = [k for k in required if k not in opts]
    if missing:
        raise ConfigError(f"secret detector {key!r} needs option(s) {', '.join(map(repr, missing))}")
    return factory(**opts)  # type: ignore[no-any-return]


class UnionDetector(HoldersFromValues):
    """The union of several detectors: a record holds every secret any of them finds.

    Secrets found by two detectors with the same ``(type, canonical value)`` are one secret. Like every built-in
    detector, :meth:`detect` makes every record that contains a found value a holder of it (once, on the union).
    """

    def __init__(self, *, detectors: Sequence[Any]):
        if isinstance(detectors, (str, Mapping)) or not isinstance(detectors, Sequence):
            raise ConfigError(f"union 'detectors' must be a list of detector specs, got {detectors!r}")
        if not detectors:
            raise ConfigError("union of secret detectors needs at least one detector, got an empty list")
        self.detectors: list[SecretDetector] = [build_detector(s) for s in detectors]
        self.name = "union(" + ",".join(d.name for d in self.detectors) + ")"

    def structure(self) -> list[str]:
        """The acceptance rules of every detector of the union, in words."""
        return [s for d in self.detectors for s in accepted_values(d)]

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        """The union of what each detector itself finds."""
        texts = as_texts(texts)
        out: SecretMatrix | None = None
        for d in self.detectors:
            raw = getattr(d, "detect_raw", None)
            m = raw(texts) if callable(raw) else d.detect(texts)
            out = m if out is None else out.union(m)
        assert out is not None
        return out
