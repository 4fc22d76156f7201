"""The Embedder interface: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..backends import check_texts as _check
from ..errors import BackendError, MissingDependencyError


@runtime_checkable
class Embedder(Protocol):
    name: str  # a stable model id, used in cache keys: two embedders with the same name give the same vectors
    dim: int

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """float32 array of shape (len(texts), dim), every row of unit L2 norm; no texts give (0, dim)."""
        ...


def check_texts(texts: Any) -> list[str]:
    """A list of strings, or a DataError naming what was passed (shared with the generators)."""
    return _check(texts, what="texts")


def l2_normalize(x: np.ndarray, *, what: str = "embedder") -> np.ndarray:
    """Rows scaled to unit norm (float32). A zero row is an error: it has no direction to compare."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise BackendError(f"{what}: expected a 2-d array of vectors, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise BackendError(f"{what}: non-finite values in embeddings")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        bad = np.flatnonzero(norms[:, 0] == 0)[:5].tolist()
        raise BackendError(f"{what}: zero vector(s) for text(s) {bad}")
    return (x / norms).astype(np.float32)


class CoreDependencyMissing(MissingDependencyError):
    """A core dependency (installed with privtext itself) cannot be imported: the install is broken."""

    def __init__(self, package: str, purpose: str):
        self.package, self.extra = package, ""
        BackendError.__init__(
            self,
            f"{purpose} needs the package {package!r}, a core dependency of privtext: reinstall it with "
            f"`pip install {package} -c constraints.txt`",
        )
