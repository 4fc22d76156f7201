"""``embedder: {runtime: auto}`` — the fastest embedding path this machine has, with votes equal to fp32's.

With OpenVINO installed, on the CPU: a :class:`~privtext.embed.tiers.TieredEmbedder` whose fast tier is OpenVINO
fp32 running the model's own ONNX export (:mod:`privtext.embed.st_export`) one text per request, several requests
in flight on OpenVINO's throughput streams, and whose reference is torch fp32, one text per pass; the voting layer
re-decides the votes within the fast tier's error bound with reference vectors (:mod:`privtext.search.exact_votes`).
The fast tier's vectors are torch's to float rounding (≤ 1.3e-6 in norm, measured), so its bound is tiny and
almost no vote is re-decided — and the centre a centred vote uses (the candidates' mean) is the fp32 one to
float rounding too, so centred votes are exact as well.

``runtime: auto, precision: bf16`` makes the fast tier OpenVINO bf16 (batch 16) on a CPU with AVX512_BF16 or AMX
(elsewhere it says so and keeps fp32): faster per text on long texts, but its vectors move by ≈ 5e-3, so 15-25 %
of the records are re-decided, and a centred vote centres on the bf16 mean (exact around that centre; the fp32
path's centre is 2.5e-3 away, which moved 1 vote in 600 PubMed abstracts). Elsewhere — no OpenVINO, a GPU (where
torch is fast already), or distributed embedding — plain torch fp32, today's path. The choice and its reason are
said once per process (stderr, and the ``privtext.embed`` logger) and kept on the embedder (``runtime_choice``).

Measured (``benchmarks/embed_exact.py``, docs/backends.md): see there for the throughput against torch fp32 at
batch 16 and the vote agreement.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..backends.hardware import cpu_summary, has_fast_bf16

log = logging.getLogger("privtext.embed")
_SAID: set[str] = set()


def _openvino_installed() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def choose_runtime(options: Any, *, cuda: bool | None = None, cpuinfo: str | None = None,
                   openvino: bool | None = None) -> tuple[str, str]:
    """("tiered-fp32", "tiered-bf16" or "torch", why) for sentence-transformers ``options`` with ``runtime: auto``.
    The keyword arguments stand in for this machine (tests)."""
    if options.device not in ("auto", "cpu"):
        return "torch", f"device {options.device!r}: torch fp32 there"
    if cuda is None:
        import torch

        cuda = bool(torch.cuda.is_available())
    if options.device == "auto" and cuda:
        return "torch", "a CUDA GPU: torch fp32 on it"
    if not (_openvino_installed() if openvino is None else openvino):
        return "torch", "OpenVINO is not installed (pip install 'privtext[openvino]'): torch fp32"
    if options.precision == "bf16":
        if has_fast_bf16(cpuinfo):
            return "tiered-bf16", (f"{cpu_summary(cpuinfo)}: OpenVINO bf16 embeddings, votes within their "
                                   "measured error bound re-decided with fp32 vectors")
        return "tiered-fp32", (f"precision bf16 asked, but this CPU has no AVX512_BF16 or AMX ({cpu_summary(cpuinfo)}): "
                               "OpenVINO fp32, one text per request, near-ties re-decided with torch fp32")
    return "tiered-fp32", ("OpenVINO fp32, one text per request on parallel streams; the rare votes within its "
                           "error bound (float rounding) re-decided with torch fp32")


def say_once(message: str) -> None:
    if message in _SAID:
        return
    _SAID.add(message)
    log.info(message)
    from rich.markup import escape

    from ..progress import say

    say(f"[dim]{escape(message)}[/]")  # the install hint's '[openvino]' is text, not markup


def build_auto(options: Any, *, cache_dir: Path | str | None) -> Any:
    """The embedder ``runtime: auto`` means here (module docstring). A tiered embedder caches its tiers itself in
    ``cache_dir``; a plain one is returned uncached (``build_embedder`` wraps it as usual)."""
    from .st import SentenceTransformerEmbedder

    kind, why = choose_runtime(options)
    say_once(f"embedder runtime auto: {why}")
    common = {k: v for k, v in options.model_dump().items() if k not in ("runtime", "precision")}
    if kind == "torch":
        emb = SentenceTransformerEmbedder(**common, runtime="torch")
        emb.runtime_choice = {"runtime": "torch", "why": why}
        return emb
    from .tiers import TieredEmbedder, reference_embedder

    if kind == "tiered-bf16":
        fast = SentenceTransformerEmbedder(**{**common, "device": "cpu"}, runtime="openvino", precision="bf16")
        what = "OpenVINO bf16"
    else:  # one text per request (no padding), as many in flight as OpenVINO's throughput streams take
        batch = common["batch_size"] if common.get("batch_size") is not None else 1
        fast = SentenceTransformerEmbedder(**{**common, "device": "cpu", "batch_size": batch}, runtime="openvino")
        what = "OpenVINO fp32"
    emb = TieredEmbedder([fast, reference_embedder(options)], cache_dir=cache_dir,
                         description=f"{what} → torch fp32 (one text per pass)")
    emb.runtime_choice = {"runtime": kind, "why": why, "tiers": [t.name for t in emb.raw]}
    return emb


__all__ = ["build_auto", "choose_runtime", "say_once"]
