"""``embedder: {runtime: auto}`` — the fastest embedding path this machine has, with votes equal to fp32's.

On a CPU with AVX512_BF16 or AMX and OpenVINO installed: a :class:`~privtext.embed.tiers.TieredEmbedder` whose
fast tier is OpenVINO bf16 (the model's own ONNX export, :mod:`privtext.embed.st_export`) and whose reference is
torch fp32, one text per pass; the voting layer re-decides near-ties with reference vectors
(:mod:`privtext.mechanisms.exact_votes`). Elsewhere — no bf16 in the CPU, no OpenVINO, a GPU (where torch is fast
already), or distributed embedding — plain torch fp32, today's path. The choice and its reason are said once per
process (stderr, and the ``privtext.embed`` logger) and kept on the embedder (``runtime_choice``).

Measured (``benchmarks/embed_exact.py``, docs/backends.md): see there for the throughput against torch fp32 at
batch 16 and the vote agreement.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..backends.hardware import cpu_summary, has_fast_bf16
from ..errors import ConfigError

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
    """("tiered" or "torch", why) for a sentence-transformers ``options`` with ``runtime: auto``. The keyword
    arguments stand in for this machine (tests)."""
    if options.precision != "fp32":
        raise ConfigError("embedder runtime 'auto' chooses the precision itself (a fast tier re-decided in fp32); "
                          f"remove precision {options.precision!r}")
    if options.device not in ("auto", "cpu"):
        return "torch", f"device {options.device!r}: torch fp32 there"
    if cuda is None:
        import torch

        cuda = bool(torch.cuda.is_available())
    if options.device == "auto" and cuda:
        return "torch", "a CUDA GPU: torch fp32 on it"
    if not has_fast_bf16(cpuinfo):
        return "torch", f"this CPU has no AVX512_BF16 or AMX ({cpu_summary(cpuinfo)}): torch fp32"
    if not (_openvino_installed() if openvino is None else openvino):
        return "torch", ("OpenVINO is not installed (pip install 'privtext[openvino]'): torch fp32, although this CPU "
                         "has bf16")
    return "tiered", (f"{cpu_summary(cpuinfo)}: OpenVINO bf16 embeddings, votes within their error bound "
                      "re-decided with fp32 vectors")


def say_once(message: str) -> None:
    if message in _SAID:
        return
    _SAID.add(message)
    log.info(message)
    from ..progress import say

    say(f"[dim]{message}[/]")


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

    fast = SentenceTransformerEmbedder(**{**common, "device": "cpu"}, runtime="openvino", precision="bf16")
    emb = TieredEmbedder([fast, reference_embedder(options)], cache_dir=cache_dir,
                         description="OpenVINO bf16 → torch fp32 (one text per pass)")
    emb.runtime_choice = {"runtime": "tiered", "why": why, "tiers": [t.name for t in emb.raw]}
    return emb


__all__ = ["build_auto", "choose_runtime", "say_once"]
