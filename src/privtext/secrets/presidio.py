"""``presidio``: Microsoft Presidio's analyzer, run offline (``pip install 'privtext[presidio]'``).

No spaCy model is downloaded. The NLP engine is, by ``nlp``:

* ``"blank"`` (default): ``spacy.blank(language)`` plus a component that sets each token's lemma to its lower
  case, so Presidio's context words ("phone", "ssn", "card" …) near a match can raise its score;
* ``"none"``: Presidio's ``NoOpNlpEngine`` (no tokens; context words in the text are not used);
* the name or path of an *installed* spaCy pipeline (e.g. ``"en_core_web_lg"``): its NER adds PERSON,
  LOCATION, NRP … . A name that is not installed is refused (Presidio would try to download it).

Presidio's e-mail recognizer validates domains with ``tldextract``, whose default extractor fetches the public
suffix list on first use; it is replaced by one built as ``TLDExtract(suffix_list_urls=(), cache_dir=None)``
(the suffix list bundled with tldextract), so nothing touches the network.

Options: ``entities`` (Presidio names such as ``EMAIL_ADDRESS`` or ours such as ``EMAIL``; default every entity
the engine supports), ``score_threshold`` (drop results scoring below it; default ``None`` keeps Presidio's own
thresholds, i.e. every result with a score above 0), ``language``, ``nlp``, ``countries`` (limit
country-specific recognizers, e.g. ``["us", "uk"]``; default all).

Types are renamed to ours (``EMAIL_ADDRESS`` → ``EMAIL``, ``PHONE_NUMBER`` → ``PHONE``, ``IBAN_CODE`` → ``IBAN``,
``DATE_TIME`` → ``DATE``; others keep Presidio's name) and values are canonicalised like the ``regex``
detector's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, optional_import
from .canonical import canonicalize
from .holders import HoldersFromValues
from .matrix import SecretMatrix, as_texts, from_mentions

PRESIDIO_TO_PRIVTEXT = {
    "EMAIL_ADDRESS": "EMAIL",
    "PHONE_NUMBER": "PHONE",
    "IBAN_CODE": "IBAN",
    "DATE_TIME": "DATE",
}
PRIVTEXT_TO_PRESIDIO = {v: k for k, v in PRESIDIO_TO_PRIVTEXT.items()}


def _import_presidio() -> Any:
    return optional_import("presidio_analyzer", "presidio", "the 'presidio' secret detector",
                           package="presidio-analyzer")


def offline_tld_extractor() -> Any:
    """A ``tldextract.TLDExtract`` that never fetches: the bundled public suffix list, no cache directory."""
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _offline_email_recognizer(language: str) -> Any:
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    class OfflineEmailRecognizer(EmailRecognizer):  # type: ignore[misc,valid-type]
        """Presidio's EmailRecognizer with an offline tldextract (no suffix-list download)."""

        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            self._tld = offline_tld_extractor()

        def validate_result(self, pattern_text: str) -> bool:
            return bool(self._tld(pattern_text).fqdn != "")

    return OfflineEmailRecognizer(supported_language=language)


def _blank_engine(language: str) -> Any:
    import spacy
    from presidio_analyzer.nlp_engine import SpacyNlpEngine
    from spacy.language import Language

    if not Language.has_factory("privtext_lower_lemma"):

        @Language.component("privtext_lower_lemma")
        def _lower_lemma(doc: Any) -> Any:
            for tok in doc:
                tok.lemma_ = tok.lower_
            return doc

    nlp = spacy.blank(language)
    nlp.add_pipe("privtext_lower_lemma")
    engine = SpacyNlpEngine(models=[{"lang_code": language, "model_name": f"blank:{language}"}])
    engine.nlp = {language: nlp}  # type: ignore[assignment]  # loaded: AnalyzerEngine will not call load() (which could download)
    return engine


def _model_engine(language: str, model: str) -> Any:
    import spacy
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    if not (spacy.util.is_package(model) or Path(model).exists()):
        raise ConfigError(
            f"presidio 'nlp' names spaCy pipeline {model!r}, which is not installed here; install it, or use "
            f"nlp: blank / nlp: none (privtext never downloads models)"
        )
    engine = SpacyNlpEngine(models=[{"lang_code": language, "model_name": model}])
    engine.nlp = {language: spacy.load(model)}  # type: ignore[assignment]
    return engine


class PresidioDetector(HoldersFromValues):
    """PII by Presidio's recognizers, offline (see the module docstring)."""

    name = "presidio"

    def __init__(
        self,
        *,
        entities: Sequence[str] | None = None,
        score_threshold: float | None = None,
        language: str = "en",
        nlp: str = "blank",
        countries: Sequence[str] | None = None,
    ):
        if score_threshold is not None and (
            isinstance(score_threshold, bool) or not isinstance(score_threshold, (int, float))
            or not 0 <= score_threshold <= 1
        ):
            raise ConfigError(f"presidio 'score_threshold' must be a number in [0, 1] or null, got {score_threshold!r}")
        if entities is not None and (isinstance(entities, str) or not isinstance(entities, Sequence)):
            raise ConfigError(f"presidio 'entities' must be a list of entity names, got {entities!r}")
        if not isinstance(nlp, str) or not nlp:
            raise ConfigError(f"presidio 'nlp' must be 'blank', 'none' or an installed spaCy pipeline, got {nlp!r}")
        _import_presidio()
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import NoOpNlpEngine

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
        if nlp == "none":
            engine = NoOpNlpEngine(models=[{"lang_code": language, "model_name": "noop"}])
            engine.load()
        elif nlp == "blank":
            engine = _blank_engine(language)
        else:
            engine = _model_engine(language, nlp)
        registry = RecognizerRegistry(supported_languages=[language])
        registry.load_predefined_recognizers(
            languages=[language], nlp_engine=engine, countries=None if countries is None else list(countries)
        )
        if nlp in ("blank", "none"):  # no NER model: the spaCy NER recognizer could only ever return nothing
            registry.remove_recognizer("SpacyRecognizer")
        if any(getattr(r, "name", None) == "EmailRecognizer" for r in registry.recognizers):
            registry.remove_recognizer("EmailRecognizer")
            registry.add_recognizer(_offline_email_recognizer(language))
        self._analyzer = AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=[language])
        supported = sorted(self._analyzer.get_supported_entities(language))
        if entities is None:
            wanted = supported
        else:
            wanted = [PRIVTEXT_TO_PRESIDIO.get(str(e).upper(), str(e).upper()) for e in entities]
            bad = [e for e, w in zip(entities, wanted, strict=True) if w not in supported]
            if bad:
                raise ConfigError(
                    f"presidio cannot detect {bad} offline with nlp={nlp!r}; supported: {', '.join(supported)}"
                )
        self.entities = tuple(wanted)
        self.score_threshold = None if score_threshold is None else float(score_threshold)
        self.language = language
        self.nlp = nlp

    def structure(self) -> list[str]:
        """What this configuration accepts, in words."""
        thr = "Presidio's own thresholds" if self.score_threshold is None else f"score ≥ {self.score_threshold:g}"
        return [f"Presidio recognizers (nlp: {self.nlp}, language {self.language}) for {', '.join(self.entities)}: "
                f"each recognizer's patterns, check digits and context words, {thr}."]

    def find(self, text: str) -> list[tuple[int, int, str, str]]:
        """``(start, end, type, canonical value)`` per Presidio result, by position."""
        results = self._analyzer.analyze(
            text=text, language=self.language, entities=list(self.entities), score_threshold=self.score_threshold
        )
        return results_to_mentions(text, results)

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        """What this detector itself finds (:meth:`detect` adds every other record holding a found value)."""
        texts = as_texts(texts)
        return from_mentions((self.find(t) for t in texts), len(texts))


def results_to_mentions(text: str, results: Sequence[Any]) -> list[tuple[int, int, str, str]]:
    """Presidio ``RecognizerResult``-like objects (``entity_type``, ``start``, ``end``) → our mentions."""
    out = []
    for r in sorted(results, key=lambda r: (r.start, r.end)):
        typ = PRESIDIO_TO_PRIVTEXT.get(r.entity_type, r.entity_type)
        raw = text[r.start:r.end]
        if not raw.strip():
            continue
        out.append((int(r.start), int(r.end), typ, canonicalize(typ, raw)))
    return out
