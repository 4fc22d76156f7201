"""Span-level scoring of PII detectors against gold annotations (presidio-research format).

Definitions (used by ``benchmarks/secret_detection.py`` and the recall-floor test):

* Each predicted span has one of our entity types; :data:`PRIVTEXT_TO_GOLD` maps it to a gold label of
  presidio-research (``PHONE`` → ``PHONE_NUMBER``, ``URL`` → ``DOMAIN_NAME``, ``DATE_OF_BIRTH``/``DATE`` →
  ``DATE_TIME`` …). A type with no entry keeps its own name.
* **Recall** of gold label ``G``: the fraction of gold spans of label ``G`` that overlap (share at least one
  character with) at least one predicted span whose mapped label is ``G``.
* **Precision** of predicted type ``T``: the fraction of predicted spans of type ``T`` that overlap at least one
  gold span of the mapped label. Unannotated real PII in the data counts against precision.
* **Exact recall**: as recall, but the predicted span must equal the gold span (both stripped of surrounding
  whitespace).
* **Record level**, over a set of gold labels (``record_labels``; by default every label the detector's types map
  to): a record is truly private when it has a gold span of one of them, predicted private when the detector
  finds a secret of a type mapped to one of them.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError, DataFormatError
from .matrix import SecretMatrix

PRIVTEXT_TO_GOLD: dict[str, str] = {
    "EMAIL": "EMAIL_ADDRESS",
    "PHONE": "PHONE_NUMBER",
    "CREDIT_CARD": "CREDIT_CARD",
    "US_SSN": "US_SSN",
    "IP_ADDRESS": "IP_ADDRESS",
    "IBAN": "IBAN_CODE",
    "URL": "DOMAIN_NAME",
    "DATE_OF_BIRTH": "DATE_TIME",
    "DATE": "DATE_TIME",
    "PERSON": "PERSON",
    "LOCATION": "GPE",
    "ORGANIZATION": "ORGANIZATION",
    "NRP": "NRP",
    "US_DRIVER_LICENSE": "US_DRIVER_LICENSE",
}


@dataclass(frozen=True)
class GoldSpan:
    """One gold entity span of presidio-research: character offsets [start, end) into its text and its entity label."""

    start: int
    end: int
    label: str


def load_presidio_research(path: str | os.PathLike[str]) -> tuple[list[str], list[list[GoldSpan]]]:
    """Texts and gold spans of a presidio-research JSON file (``full_text``, ``spans[{entity_type,
    start_position, end_position}]``)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{p}:{e.lineno}: invalid JSON ({e.msg})") from None
    if not isinstance(data, list):
        raise DataFormatError(f"{p}: expected a JSON list of records")
    texts, gold = [], []
    for k, rec in enumerate(data):
        try:
            texts.append(str(rec["full_text"]))
            gold.append([
                GoldSpan(int(s["start_position"]), int(s["end_position"]), str(s["entity_type"]))
                for s in rec.get("spans") or []
            ])
        except (KeyError, TypeError, ValueError) as e:
            raise DataFormatError(f"{p}: record {k} is not in presidio-research format ({e})") from None
    return texts, gold


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


@dataclass
class TypeScore:
    """Span counts of one predicted type (``tp_pred`` of ``n_pred`` predicted spans overlap a gold span of the same
    label) or of one gold label (``tp_gold`` of ``n_gold`` gold spans are overlapped by a prediction of that label,
    ``exact_gold`` with the same offsets)."""

    tp_pred: int = 0
    n_pred: int = 0
    tp_gold: int = 0
    exact_gold: int = 0
    n_gold: int = 0

    @property
    def precision(self) -> float | None:
        """tp_pred / n_pred, or ``None`` when nothing of this type was predicted."""
        return self.tp_pred / self.n_pred if self.n_pred else None

    @property
    def recall(self) -> float | None:
        """tp_gold / n_gold (any overlap counts), or ``None`` when the gold set has no span of this label."""
        return self.tp_gold / self.n_gold if self.n_gold else None

    @property
    def exact_recall(self) -> float | None:
        """exact_gold / n_gold (same offsets after stripping white space), or ``None`` when the gold set has no span
        of this label."""
        return self.exact_gold / self.n_gold if self.n_gold else None


def score_spans(
    texts: Sequence[str],
    gold: Sequence[Sequence[GoldSpan]],
    predicted: Sequence[Iterable[tuple[int, int, str]]] | SecretMatrix,
    *,
    type_map: Mapping[str, str] = PRIVTEXT_TO_GOLD,
    record_labels: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Precision per predicted type, recall per gold label, and record-level scores (module docstring)."""
    if isinstance(predicted, SecretMatrix):
        if predicted.spans is None:
            raise DataError("score_spans needs a SecretMatrix with spans")
        pred_lists = [[(s.start, s.end, s.type) for s in rec] for rec in predicted.spans]
    else:
        pred_lists = [[(int(s[0]), int(s[1]), str(s[2])) for s in rec] for rec in predicted]
    if not len(texts) == len(gold) == len(pred_lists):
        raise DataError(f"{len(texts)} texts, {len(gold)} gold lists and {len(pred_lists)} prediction lists")
    by_pred: dict[str, TypeScore] = defaultdict(TypeScore)
    by_gold: dict[str, TypeScore] = defaultdict(TypeScore)
    if record_labels is None:
        covered = {type_map.get(t, t) for rec in pred_lists for (_, _, t) in rec}
    else:
        covered = set(record_labels)
    rec_tp = rec_fp = rec_fn = 0
    for text, g, p in zip(texts, gold, pred_lists, strict=True):
        gs = [(*_strip(text, x.start, x.end), x.label) for x in g]
        ps = [(*_strip(text, s, e), type_map.get(t, t), t) for (s, e, t) in p]
        for s, e, lab, t in ps:
            sc = by_pred[t]
            sc.n_pred += 1
            if any(gl == lab and gs_ < e and s < ge for gs_, ge, gl in gs):
                sc.tp_pred += 1
        for s, e, lab in gs:
            sc = by_gold[lab]
            sc.n_gold += 1
            if any(pl == lab and ps_ < e and s < pe for ps_, pe, pl, _ in ps):
                sc.tp_gold += 1
            if any(pl == lab and ps_ == s and pe == e for ps_, pe, pl, _ in ps):
                sc.exact_gold += 1
        truly = any(lab in covered for _, _, lab in gs)
        said = any(lab in covered for _, _, lab, _ in ps)
        rec_tp += truly and said
        rec_fp += said and not truly
        rec_fn += truly and not said
    return {
        "precision": {t: {"precision": s.precision, "tp": s.tp_pred, "predicted": s.n_pred}
                      for t, s in sorted(by_pred.items())},
        "recall": {lab: {"recall": s.recall, "exact_recall": s.exact_recall, "tp": s.tp_gold, "gold": s.n_gold}
                   for lab, s in sorted(by_gold.items())},
        "records": {
            "covered_labels": sorted(covered),
            "precision": rec_tp / (rec_tp + rec_fp) if rec_tp + rec_fp else None,
            "recall": rec_tp / (rec_tp + rec_fn) if rec_tp + rec_fn else None,
            "tp": rec_tp, "fp": rec_fp, "fn": rec_fn,
        },
    }
