"""benchmarks/embed_speed.py's ``ov-mixed-K`` variant: OpenVINO with the first layers in bf16 and the last K layers
and the pooling in fp32 (two compiled models). Benchmark only, so these tests check what its figures rest on: the
layers said to be fp32 run in fp32 and the others in bf16, and its vectors sit between bf16's and fp32's."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from privtext.embed.st import SentenceTransformerEmbedder
from privtext.errors import ConfigError

from .conftest import needs_bf16
from .test_embed_onnx import TEXTS

pytest.importorskip("sentence_transformers")
pytest.importorskip("openvino")


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "embed_speed.py"
    spec = importlib.util.spec_from_file_location("embed_speed", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ov_fp32(tmp_path_factory: pytest.TempPathFactory) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(batch_size=4, torch_threads=1, runtime="openvino",
                                       export_dir=str(tmp_path_factory.mktemp("onnx-export")))


def _mixed(emb: SentenceTransformerEmbedder, fp32_layers: int):  # type: ignore[no-untyped-def]
    return _bench().MixedSession(emb, fp32_layers, threads=1)


def _fully_connected(compiled) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Name -> precision it ran in, for every FullyConnected node of a compiled model's runtime graph."""
    out = {}
    for node in compiled.get_runtime_model().get_ordered_ops():
        info = node.get_rt_info()
        if info["layerType"].astype(str) == "FullyConnected":
            out[node.get_friendly_name()] = info["runtimePrecision"].astype(str)
    return out


@needs_bf16
def test_the_last_layers_run_in_fp32_and_the_others_in_bf16(ov_fp32: SentenceTransformerEmbedder) -> None:
    session = _mixed(ov_fp32, 2)
    first, second = (_fully_connected(c) for c in session.parts)
    layers = lambda fcs: sorted({n.split("/layer.")[1].split("/")[0] for n in fcs})  # noqa: E731
    assert layers(first) == ["0", "1", "2", "3"] and layers(second) == ["4", "5"]
    assert len(first) == 4 * 6 and len(second) == 2 * 6  # q, k, v, attention output, intermediate, output
    assert set(first.values()) == {"bf16"} and set(second.values()) == {"f32"}


@needs_bf16
def test_mixed_vectors_are_closer_to_fp32_than_bf16s(ov_fp32: SentenceTransformerEmbedder) -> None:
    ref = ov_fp32.embed(TEXTS)  # OpenVINO fp32 = torch fp32 to float rounding (test_embed_onnx)
    bf16 = SentenceTransformerEmbedder(batch_size=4, torch_threads=1, runtime="openvino", precision="bf16",
                                       export_dir=str(ov_fp32.onnx_path.parent.parent))
    errors = {}
    fp32_session = ov_fp32.session
    for name, session in [("bf16", bf16.session), ("mixed-1", _mixed(ov_fp32, 1)), ("mixed-3", _mixed(ov_fp32, 3))]:
        ov_fp32.session = session  # as the benchmark does: the same tokenizer, batching and normalisation
        try:
            v = ov_fp32.embed(TEXTS)
        finally:
            ov_fp32.session = fp32_session
        assert v.shape == ref.shape and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
        errors[name] = 1 - (v * ref).sum(1)
    assert errors["bf16"].max() < 1e-3 and errors["bf16"].min() > 1e-7  # bf16 really ran
    # more layers in fp32, less error: the first part's bf16 rounding is all that is left
    assert errors["mixed-3"].mean() < errors["mixed-1"].mean() < errors["bf16"].mean()
    assert errors["mixed-3"].max() < errors["bf16"].max()


@pytest.mark.parametrize("fp32_layers", [0, 6])
def test_a_cut_outside_the_model_is_refused(fp32_layers: int, ov_fp32: SentenceTransformerEmbedder) -> None:
    with pytest.raises(ConfigError, match=f"ov-mixed-{fp32_layers}: the model has 6 layers"):
        _bench().MixedSession(ov_fp32, fp32_layers, threads=1)
