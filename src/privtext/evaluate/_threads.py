"""BLAS thread limits for small dense linear algebra.

On a shared 2-core machine OpenBLAS's threads spin against each other: a 384×384 ``eigh`` took 0.65 s with the
default thread count and 0.06 s with one thread. Evaluation's eigen-decompositions and the many small
logistic-regression fits therefore run with single-threaded BLAS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def single_blas() -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
