"""The small causal transformer: ``transformers``' GPT-2 classes with a configuration sized for the machine.

============  ========  ======  =======  ======  ==========  =========================================
size          layers    width   heads    vocab   positions   parameters (with the tied embedding)
============  ========  ======  =======  ======  ==========  =========================================
``tiny``      2         128     2        512     max_length  ~0.5 M (tests)
``small``     4         256     4        4096    max_length  ~4.3 M (the CPU default)
``base``      8         512     8        8192    max_length  ~30 M (the GPU default)
============  ========  ======  =======  ======  ==========  =========================================

``size: auto`` is ``base`` where CUDA is available and ``small`` otherwise; ``n_layer`` / ``n_embd`` / ``n_head``
/ ``vocab_size`` override a size's numbers. The input embedding and the output layer share their weights (GPT-2's
tying).

Per-sample gradients (DP-SGD with Opacus): the model holds only modules Opacus' ``GradSampleModule`` computes
per-sample gradients for — ``nn.Embedding``, ``nn.LayerNorm``, ``nn.Linear`` (the tied head) and GPT-2's
``Conv1D`` (no per-layer rule in Opacus; its functorch fallback handles it) — and no batch-coupling layer.
:func:`privtext.generate.lm.train.collate` passes ``position_ids`` of shape (batch, length) explicitly: GPT-2
otherwise builds them with batch size 1, and the position embedding's per-sample gradients would then be wrong.
``tests/test_generate_lm_opacus.py`` checks the per-sample gradients against one-record batches where Opacus is
installed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ...errors import ConfigError

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"n_layer": 2, "n_embd": 128, "n_head": 2, "vocab_size": 512},
    "small": {"n_layer": 4, "n_embd": 256, "n_head": 4, "vocab_size": 4096},
    "base": {"n_layer": 8, "n_embd": 512, "n_head": 8, "vocab_size": 8192},
}


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_embd: int
    n_head: int
    vocab_size: int
    n_positions: int
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        for k in ("n_layer", "n_embd", "n_head", "vocab_size", "n_positions"):
            if getattr(self, k) < 1:
                raise ConfigError(f"{k} must be >= 1, got {getattr(self, k)}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_size(size: str, *, cuda: bool) -> str:
    if size == "auto":
        return "base" if cuda else "small"
    if size not in SIZES:
        raise ConfigError(f"unknown model size {size!r}; known: auto, {', '.join(SIZES)}")
    return size


def model_shape(size: str, *, n_positions: int, cuda: bool = False, dropout: float = 0.0,
                **overrides: int | None) -> ModelShape:
    """The shape of ``size`` (``auto`` resolved with ``cuda``) with the non-None ``overrides`` applied."""
    base = dict(SIZES[resolve_size(size, cuda=cuda)])
    base.update({k: int(v) for k, v in overrides.items() if v is not None})
    return ModelShape(n_positions=n_positions, dropout=dropout, **base)


def build_model(shape: ModelShape, *, vocab_size: int, bos_id: int, eos_id: int, pad_id: int) -> Any:
    """A freshly initialised ``GPT2LMHeadModel`` (torch's global RNG draws the weights: seed it around the
    call) with ``vocab_size`` entries (the trained tokenizer's, which may be below ``shape.vocab_size``)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=vocab_size, n_positions=shape.n_positions, n_embd=shape.n_embd,
                     n_layer=shape.n_layer, n_head=shape.n_head, resid_pdrop=shape.dropout,
                     embd_pdrop=shape.dropout, attn_pdrop=shape.dropout, bos_token_id=bos_id, eos_token_id=eos_id,
                     pad_token_id=pad_id, tie_word_embeddings=True)
    return GPT2LMHeadModel(cfg)


def count_parameters(model: Any) -> int:
    """Distinct trainable parameters (the tied embedding counted once)."""
    seen: set[int] = set()
    n = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


__all__ = ["SIZES", "ModelShape", "build_model", "count_parameters", "model_shape", "resolve_size"]
