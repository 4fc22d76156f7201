"""``hf``: a Hugging Face token-classification (NER / PII) model (``pip install 'privtext[hf]'``).

The model is loaded by name or local path with ``AutoModelForTokenClassification`` and a *fast* tokenizer (character
offsets are needed to place spans), and run through ``transformers.pipeline("token-classification")`` with an
aggregation strategy (``"simple"`` by default; ``"first"``, ``"average"``, ``"max"`` also work), so one entity is one
span of the text.

Entity types come from the model's labels (``config.id2label``): the BIO/BIOES prefix is removed (``B-PER`` →
``PER``) and common names are mapped to ours (``PER`` → ``PERSON``, ``LOC`` → ``LOCATION``, ``ORG`` →
``ORGANIZATION``, ``EMAIL`` → ``EMAIL``, ``PHONENUMBER``/``TELEPHONENUM`` → ``PHONE``, ``SSN``/``SOCIALNUM`` →
``US_SSN``, ``CREDITCARDNUMBER`` → ``CREDIT_CARD``, ``IPV4``/``IPV6`` → ``IP_ADDRESS``, ``DOB`` →
``DATE_OF_BIRTH`` …); other labels keep their upper-cased name. ``label_map`` overrides or extends the mapping.

Texts longer than the tokenizer's ``model_max_length`` are processed whole in overlapping windows (``stride``
tokens of overlap, default a quarter of the window): a truncated text would silently leave its tail's secrets
undetected.

Options: ``model`` (required), ``tokenizer`` (default: same as model), ``aggregation``, ``score_threshold``
(default 0.5), ``entities`` (keep only these of our types), ``label_map``, ``batch_size``, ``device``
(``"cpu"``, ``"cuda"``, ``"cuda:1"`` or an index), ``stride``, ``revision``, ``local_files_only``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BackendError, ConfigError, MissingDependencyError
from .canonical import canonicalize
from .holders import HoldersFromValues
from .matrix import SecretMatrix, as_texts, from_mentions

DEFAULT_LABEL_MAP: dict[str, str] = {
    "PER": "PERSON", "PERSON": "PERSON", "NAME": "PERSON", "FIRSTNAME": "PERSON", "LASTNAME": "PERSON",
    "MIDDLENAME": "PERSON", "GIVENNAME": "PERSON", "SURNAME": "PERSON", "FULLNAME": "PERSON", "USERNAME": "USERNAME",
    "LOC": "LOCATION", "LOCATION": "LOCATION", "GPE": "LOCATION", "CITY": "LOCATION", "STATE": "LOCATION",
    "COUNTRY": "LOCATION", "ORG": "ORGANIZATION", "ORGANIZATION": "ORGANIZATION", "COMPANYNAME": "ORGANIZATION",
    "EMAIL": "EMAIL", "EMAIL_ADDRESS": "EMAIL", "PHONE": "PHONE", "PHONENUMBER": "PHONE", "PHONE_NUMBER": "PHONE",
    "TELEPHONENUM": "PHONE", "SSN": "US_SSN", "SOCIALNUM": "US_SSN", "US_SSN": "US_SSN",
    "CREDITCARDNUMBER": "CREDIT_CARD", "CREDITCARD": "CREDIT_CARD", "CREDIT_CARD": "CREDIT_CARD",
    "IBAN": "IBAN", "IBAN_CODE": "IBAN", "IP": "IP_ADDRESS", "IPV4": "IP_ADDRESS", "IPV6": "IP_ADDRESS",
    "IP_ADDRESS": "IP_ADDRESS", "URL": "URL", "DOB": "DATE_OF_BIRTH", "DATEOFBIRTH": "DATE_OF_BIRTH",
    "DATE_OF_BIRTH": "DATE_OF_BIRTH", "DATE": "DATE", "DATE_TIME": "DATE",
}
_PREFIX = re.compile(r"^(?:[BIESLU])[-_]")
_AGGREGATIONS = ("simple", "first", "average", "max")


def base_label(label: str) -> str:
    """``B-PER`` → ``PER``; ``I-EMAIL`` → ``EMAIL``; ``O`` stays ``O``."""
    return _PREFIX.sub("", str(label)).upper()


class HFDetector(HoldersFromValues):
    """Secrets are the entities a token-classification model finds (see the module docstring)."""

    name = "hf"

    def __init__(
        self,
        *,
        model: str,
        tokenizer: str | None = None,
        aggregation: str = "simple",
        score_threshold: float = 0.5,
        entities: Sequence[str] | None = None,
        label_map: Mapping[str, str] | None = None,
        batch_size: int = 16,
        device: str | int = "cpu",
        stride: int | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
    ):
        if not isinstance(model, str) or not model:
            raise ConfigError(f"hf secret detector 'model' must be a model name or path, got {model!r}")
        if aggregation not in _AGGREGATIONS:
            raise ConfigError(f"hf 'aggregation' must be one of {', '.join(_AGGREGATIONS)}, got {aggregation!r}")
        if isinstance(score_threshold, bool) or not isinstance(score_threshold, (int, float)) or not (
            0 <= score_threshold <= 1
        ):
            raise ConfigError(f"hf 'score_threshold' must be a number in [0, 1], got {score_threshold!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"hf 'batch_size' must be a positive integer, got {batch_size!r}")
        if label_map is not None and not isinstance(label_map, Mapping):
            raise ConfigError(f"hf 'label_map' must be a mapping of model label to entity type, got {label_map!r}")
        if entities is not None and (isinstance(entities, str) or not isinstance(entities, Sequence)):
            raise ConfigError(f"hf 'entities' must be a list of entity types, got {entities!r}")
        try:
            import transformers
            from transformers import AutoModelForTokenClassification, AutoTokenizer
        except ImportError:
            raise MissingDependencyError("transformers", "hf", "the 'hf' secret detector") from None

        self.model_name = model
        self.score_threshold = float(score_threshold)
        self.batch_size = batch_size
        self.aggregation = aggregation
        self._label_map = {**DEFAULT_LABEL_MAP, **{base_label(k): str(v) for k, v in (label_map or {}).items()}}
        try:
            tok = AutoTokenizer.from_pretrained(
                tokenizer or model, revision=revision, local_files_only=local_files_only, use_fast=True
            )
            mdl = AutoModelForTokenClassification.from_pretrained(
                model, revision=revision, local_files_only=local_files_only
            )
        except OSError as e:
            raise BackendError(f"hf secret detector: cannot load model/tokenizer {model!r}: {e}") from None
        if not getattr(tok, "is_fast", False):
            raise ConfigError(
                f"hf secret detector needs a fast tokenizer (character offsets) for {tokenizer or model!r}; "
                "got a slow one"
            )
        mdl.eval()
        labels = sorted({base_label(lab) for lab in mdl.config.id2label.values()} - {"O"})
        self.model_labels = tuple(labels)
        self.types = tuple(sorted({self._type_of(lab) for lab in labels}))
        if entities is None:
            self.entities: tuple[str, ...] | None = None
        else:
            wanted = [str(e).upper() for e in entities]
            bad = [e for e in wanted if e not in self.types]
            if bad:
                raise ConfigError(
                    f"hf model {model!r} cannot produce entity type(s) {bad}; its types: {', '.join(self.types)}"
                )
            self.entities = tuple(wanted)
        max_len = getattr(tok, "model_max_length", None)
        max_pos = getattr(mdl.config, "max_position_embeddings", None)
        if not isinstance(max_len, int) or max_len > 1_000_000:
            max_len = max_pos if isinstance(max_pos, int) else None
            if max_len is not None:
                tok.model_max_length = max_len
        if stride is None and max_len is not None:
            stride = max(1, max_len // 4)
        if stride is not None and (
            isinstance(stride, bool) or not isinstance(stride, int) or stride < 0
            or (max_len is not None and stride >= max_len - 2)
        ):
            raise ConfigError(f"hf 'stride' must be an integer in [0, model_max_length − 2), got {stride!r}")
        self.stride = stride
        self._pipe = transformers.pipeline(
            "token-classification", model=mdl, tokenizer=tok, aggregation_strategy=aggregation, device=device
        )

    def structure(self) -> list[str]:
        """What this configuration accepts, in words."""
        ents = ", ".join(self.entities if self.entities is not None else self.types)
        return [f"the entities ({ents}) that the token-classification model {self.model_name} labels with score ≥ "
                f"{self.score_threshold:g} ({self.aggregation} aggregation)."]

    def _type_of(self, label: str) -> str:
        b = base_label(label)
        return self._label_map.get(b, b)

    def _run(self, texts: list[str]) -> list[list[dict[str, Any]]]:
        kwargs: dict[str, Any] = {"batch_size": self.batch_size}
        if self.stride is not None:
            kwargs["stride"] = self.stride
        out = self._pipe(texts, **kwargs)
        if texts and isinstance(out, list) and out and isinstance(out[0], dict):
            out = [out]  # a single text comes back unnested
        return list(out)

    def find_all(self, texts: Sequence[str]) -> list[list[tuple[int, int, str, str]]]:
        """Per text, ``(start, end, type, canonical value)`` for each entity scoring ≥ ``score_threshold``."""
        texts = list(texts)
        found: list[list[tuple[int, int, str, str]]] = [[] for _ in texts]
        idx = [i for i, t in enumerate(texts) if t.strip()]
        if not idx:
            return found
        results = self._run([texts[i] for i in idx])
        for i, ents in zip(idx, results, strict=True):
            found[i] = entities_to_mentions(
                texts[i], ents, type_of=self._type_of, score_threshold=self.score_threshold, entities=self.entities
            )
        return found

    def detect_raw(self, texts: Sequence[str]) -> SecretMatrix:
        """What this detector itself finds (:meth:`detect` adds every other record holding a found value)."""
        texts = as_texts(texts)
        return from_mentions(self.find_all(texts), len(texts))


def entities_to_mentions(
    text: str,
    ents: Sequence[Mapping[str, Any]],
    *,
    type_of: Any = None,
    score_threshold: float = 0.0,
    entities: Sequence[str] | None = None,
) -> list[tuple[int, int, str, str]]:
    """Aggregated pipeline entities (``entity_group``, ``score``, ``start``, ``end``) → sorted
    ``(start, end, type, canonical value)``; spans are trimmed of surrounding whitespace."""
    type_of = type_of or (lambda lab: DEFAULT_LABEL_MAP.get(base_label(lab), base_label(lab)))
    out = []
    for ent in ents:
        if float(ent.get("score", 0.0)) < score_threshold:
            continue
        start, end = ent.get("start"), ent.get("end")
        if start is None or end is None:
            raise BackendError("hf token-classification pipeline returned entities without character offsets")
        start, end = int(start), int(end)
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start >= end:
            continue
        typ = type_of(str(ent.get("entity_group", ent.get("entity", ""))))
        if entities is not None and typ not in entities:
            continue
        out.append((start, end, typ, canonicalize(typ, text[start:end])))
    out.sort()
    return out
