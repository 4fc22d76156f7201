"""Public/private split by secrets (SecPE §3.2.2: "predefined secrets allow us to first detect and cluster using only
public data").

A record that holds no declared secret is **public**: SecPE may use it freely (k-means centres, counts). A record
that holds at least one secret is **private**: it only enters through the SecretNoise-weighted, noised update.
Which records are public therefore depends on the detector: a detector that misses a secret turns a private
record public with no protection at all, so prefer high-recall detectors (``regex`` ∪ ``explicit``, …).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data.corpus import Corpus
from ..errors import DataError
from .matrix import SecretMatrix


def split_public_private(corpus: Corpus, matrix: SecretMatrix) -> tuple[Corpus, Corpus, SecretMatrix]:
    """``(public_corpus, private_corpus, private_matrix)``.

    Record order and ids are kept within each part; ``private_matrix`` has one row per private record (in
    ``private_corpus`` order) and the same secret columns as ``matrix``.
    """
    if not isinstance(corpus, Corpus):
        raise DataError(f"split_public_private needs a Corpus, got {type(corpus).__name__}")
    if not isinstance(matrix, SecretMatrix):
        raise DataError(f"split_public_private needs a SecretMatrix, got {type(matrix).__name__}")
    if matrix.n_records != len(corpus):
        raise DataError(
            f"secret matrix has {matrix.n_records} records but corpus {corpus.name!r} has {len(corpus)}"
        )
    mask = matrix.private_mask()
    priv_idx = np.flatnonzero(mask)
    pub_idx = np.flatnonzero(~mask)
    public = corpus.subset(pub_idx, name=f"{corpus.name}-public" if corpus.name else "public")
    private = corpus.subset(priv_idx, name=f"{corpus.name}-private" if corpus.name else "private")
    return public, private, matrix.subset_records(priv_idx)


def detect_and_split(corpus: Corpus, detector: Any) -> tuple[Corpus, Corpus, SecretMatrix]:
    """Run ``detector`` (a :class:`~privtext.secrets.base.SecretDetector` or a spec for
    :func:`~privtext.secrets.base.build_detector`) on ``corpus`` and split it."""
    from .base import build_detector

    det = build_detector(detector)
    return split_public_private(corpus, det.detect(corpus.texts))
