"""Declared secrets: which records hold which secrets (SecPE's ``D_pri,j``), and the public/private split.

>>> from privtext.secrets import build_detector, split_public_private
>>> det = build_detector(["regex", {"name": "explicit", "secrets": ["Project Falcon"]}])
>>> m = det.detect(["mail me: Ann@Example.com", "nothing here", "Project Falcon ships"])
>>> m.private_mask().tolist()
[True, False, True]

Detectors (``SECRET_DETECTORS``): ``regex`` (PII by patterns and check digits), ``explicit`` (a list of strings),
``random_words`` (the paper's frequency-quantile words), ``presidio`` (Presidio, offline; extra ``presidio``),
``hf`` (a token-classification model; extra ``hf``), ``union``. See ``docs/secrets.md``.

Every detector's ``detect`` makes each record that contains a found value a holder of it, wherever the detector
itself missed it (``"Locker code 467 3395"`` holds the phone found in ``"call me on 467 3395"``;
:mod:`privtext.secrets.values`).
"""

from .base import (
    SECRET_DETECTORS,
    SecretDetector,
    UnionDetector,
    build_detector,
    describe_detector,
    detector_options,
)
from .holders import propagate_holders
from .matrix import MatrixBuilder, SecretMatrix, Span
from .split import detect_and_split, split_public_private
from .structure import guarantee_structure
from .values import SecretValueIndex

__all__ = [
    "SECRET_DETECTORS",
    "MatrixBuilder",
    "SecretDetector",
    "SecretMatrix",
    "SecretValueIndex",
    "Span",
    "UnionDetector",
    "build_detector",
    "describe_detector",
    "detect_and_split",
    "detector_options",
    "guarantee_structure",
    "propagate_holders",
    "split_public_private",
]
