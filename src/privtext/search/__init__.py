"""Nearest-neighbour search for voting: exact (chunked GEMM in numpy or torch, faiss) and approximate (IVF, HNSW).

All backends return, for each query row, the index of its nearest base row under the chosen metric:

* ``l2``      — argmin ‖q − b‖₂;
* ``cosine``  — argmax ⟨q/‖q‖, b/‖b‖⟩ (inputs are normalised here, so callers need not).

Exact backends agree with a float64 brute-force reference on every query, ties included (to the lowest index).
``numpy`` and ``torch`` (:func:`gemm_nearest`) compute one block of private rows × all candidates by a matrix
product — fp32, or bf16/fp16 with fp32 accumulation — take each row's maximum, and re-decide every row whose
winner is not proven by a rigorous rounding-error bound: its contenders are rescored in fp32 and, if still too
close, in float64. ``torch`` runs on ``device`` (``auto``: CUDA when available); ``precision='auto'`` is fp16 on
CUDA, bf16 on CPUs with AMX-BF16 or AVX-512-BF16 (:func:`cpu_has_fast_bf16`) and fp32 elsewhere.
``faiss`` is faiss's flat index plus the same float64 refinement.

Approximate backends (``ivf``, ``hnsw``) trade recall for speed; they still produce exactly one vote per private
record, so the *sensitivity of the vote histogram is unchanged by approximation* — the privacy analysis does not
depend on which candidate a record votes for, only on each record casting one vote.

Memory: the GEMM backends hold one ``chunk × N_base`` block of scores at a time — O(chunk · N_syn), never
O(N_priv · N_syn).

One backend per module:

==================  ==========================================================================================
``reference``       the float64 reference (:func:`brute_force_nn`), input preparation, :func:`center_rows`
``decide``          rounding-error bounds of fp32/bf16/fp16 scores; re-deciding near ties in float64
``gemm``            ``numpy``: :func:`gemm_nearest` (options, base preparation) and the numpy fp32 engine
``gemm_torch``      ``torch`` on CPU or CUDA, fp32/bf16/fp16
``gemm_bf16_cpu``   ``torch`` bf16 on a CPU with AMX/AVX-512-BF16 (contenders from the int16 view)
``faiss_flat``      ``faiss`` (exact flat index + float64 refinement)
``faiss_ann``       ``ivf``, ``ivf-sq8``, ``ivf-pq``, ``hnsw`` (faiss, approximate): :func:`ann_nearest`
``ivf_gemm``        ``ivf-gemm`` (k-means lists searched by matrix products, approximate)
``exact_votes``     exact votes from fast (bf16) embeddings re-decided with reference vectors of a tiered embedder
``dispatch``        :func:`nearest` and :func:`resolve_backend`: which backend runs
==================  ==========================================================================================

The package sits below ``mechanisms/`` (docs/architecture.md): it imports only :mod:`privtext.errors` and
:mod:`privtext.backends.hardware`, numpy, and — inside the backends that need them — torch, faiss, scipy.
"""

from __future__ import annotations

from .dispatch import APPROX, EXACT, Backend, nearest, resolve_backend, set_threads
from .exact_votes import exact_nearest, row_source, vote_space
from .faiss_ann import ANN_KINDS, ann_nearest
from .gemm import Device, Precision, cpu_has_fast_bf16, gemm_nearest, resolve_precision
from .ivf_gemm import ivf_sizes, kmeans_gemm
from .reference import Metric, brute_force_nn, center_rows

__all__ = ["ANN_KINDS", "APPROX", "EXACT", "Backend", "Device", "Metric", "Precision", "ann_nearest", "brute_force_nn",
           "center_rows", "cpu_has_fast_bf16", "exact_nearest", "gemm_nearest", "ivf_sizes", "kmeans_gemm",
           "nearest", "resolve_backend", "resolve_precision", "row_source", "set_threads", "vote_space"]
