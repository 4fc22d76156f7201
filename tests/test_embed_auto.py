"""``embedder: {runtime: auto}``: the fast tiers where the CPU has bf16 and OpenVINO is installed, torch fp32
elsewhere, said once; and the CPU feature detection every bf16 test and choice relies on."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from privtext.backends.hardware import cpu_flags, cpu_summary, has_fast_bf16
from privtext.embed import auto
from privtext.embed.st import STOptions
from privtext.errors import ConfigError

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n" \
       "bugs\t\t: sysret_ss_attrs amx_bf16\n"
OLD = "model name\t: Intel Xeon E5-2690\nflags\t\t: fpu sse4_2 avx avx2\n"
SPR = "model name\t: Intel Xeon Platinum 8480\nflags\t\t: avx2 avx512f amx_bf16 amx_tile avx512_bf16\n"


def test_features_are_read_from_the_flags_lines_only() -> None:
    assert has_fast_bf16(EPYC) and has_fast_bf16(SPR) and not has_fast_bf16(OLD)
    assert "amx_bf16" not in cpu_flags(EPYC)  # a word on another line is not a feature
    assert not has_fast_bf16("flags\t\t: fpu avx512_bf16x\n")
    assert cpu_summary(OLD) == "Intel Xeon E5-2690: avx2 (no amx_bf16, avx512_bf16)"
    assert cpu_summary(EPYC).startswith("AMD EPYC 9R14: avx2 avx512f avx512_vnni avx512_bf16 (no amx_bf16)")
    assert not has_fast_bf16("")  # off Linux: nothing read, nothing assumed


@pytest.mark.parametrize(("precision", "kw", "kind", "why"), [
    ("fp32", {"cpuinfo": EPYC, "openvino": True, "cuda": False}, "tiered-fp32", "OpenVINO fp32"),
    ("fp32", {"cpuinfo": OLD, "openvino": True, "cuda": False}, "tiered-fp32", "OpenVINO fp32"),
    ("bf16", {"cpuinfo": EPYC, "openvino": True, "cuda": False}, "tiered-bf16", "OpenVINO bf16"),
    ("bf16", {"cpuinfo": SPR, "openvino": True, "cuda": False}, "tiered-bf16", "amx_bf16"),
    ("bf16", {"cpuinfo": OLD, "openvino": True, "cuda": False}, "tiered-fp32", "no AVX512_BF16 or AMX"),
    ("fp32", {"cpuinfo": EPYC, "openvino": False, "cuda": False}, "torch", "OpenVINO is not installed"),
    ("fp32", {"cpuinfo": EPYC, "openvino": True, "cuda": True}, "torch", "CUDA GPU"),
])
def test_auto_chooses_by_the_machine_and_says_why(precision: str, kw: dict[str, object], kind: str,
                                                   why: str) -> None:
    got, reason = auto.choose_runtime(STOptions(runtime="auto", precision=precision), **kw)  # type: ignore[arg-type]
    assert got == kind and why in reason


def test_auto_respects_an_explicit_device() -> None:
    assert auto.choose_runtime(STOptions(runtime="auto", device="cuda"), cpuinfo=EPYC, openvino=True)[0] == "torch"


def test_the_choice_is_said_once(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "_SAID", set())
    with caplog.at_level(logging.INFO, logger="privtext.embed"):
        auto.say_once("embedder runtime auto: x")
        auto.say_once("embedder runtime auto: x")
    assert caplog.text.count("embedder runtime auto: x") == 1


def test_auto_without_openvino_builds_plain_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sentence_transformers")
    from privtext.embed import CachedEmbedder, build_embedder
    from privtext.embed.st import SentenceTransformerEmbedder

    monkeypatch.setattr(auto, "_openvino_installed", lambda: False)
    emb = build_embedder({"runtime": "auto", "cache": False})
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.runtime == "torch"
    assert emb.runtime_choice["runtime"] == "torch" and emb.name == "sentence-transformers/all-MiniLM-L6-v2"
    with pytest.raises(ConfigError, match=r"resolved by privtext\.embed\.build_embedder"):
        SentenceTransformerEmbedder(runtime="auto")
    assert not isinstance(emb, CachedEmbedder)


def test_auto_builds_openvino_fp32_tiers_with_torch_vectors(tmp_path: object) -> None:
    """The fast tier is OpenVINO fp32, one text per request: torch's vectors to float rounding, under the same
    model id (caches are shared with the torch path); the reference tier is torch one text per pass."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("openvino")
    from privtext.embed import build_embedder
    from privtext.embed.st import SentenceTransformerEmbedder
    from privtext.embed.tiers import TieredEmbedder, row_source

    emb = build_embedder({"runtime": "auto", "cache": False, "export_dir": str(tmp_path)})
    assert isinstance(emb, TieredEmbedder) and emb.runtime_choice["runtime"] == "tiered-fp32"
    assert [t.name for t in emb.raw] == ["sentence-transformers/all-MiniLM-L6-v2",
                                         "sentence-transformers/all-MiniLM-L6-v2@single"]
    texts = ["The pasta was cold and the waiter rude.", "Great coffee, friendly staff!", "Parking is a nightmare.",
             "I would come back for the dumplings alone, they were perfect. " * 8]
    fast = emb.embed(texts)
    torch16 = SentenceTransformerEmbedder(torch_threads=1).embed(texts)
    ref = emb.tier_vectors(texts, 1)
    assert row_source(fast) is not None and np.abs(fast - torch16).max() < 1e-5 and np.abs(ref - torch16).max() < 1e-5
    assert np.abs(fast - ref).max() > 0  # a different runtime: equal only to float rounding
