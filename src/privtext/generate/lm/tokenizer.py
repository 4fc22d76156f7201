"""A byte-level BPE tokenizer trained on the public text (Hugging Face ``tokenizers``).

GPT-2's scheme: the text is split by GPT-2's pre-tokenisation pattern into pieces carrying their leading space,
mapped to bytes (so every string is encodable, nothing is ever unknown), and BPE merges are learnt on the public
texts up to ``vocab_size`` entries. The control codes (:mod:`.codes`) are *special* tokens with ids of their own:
they are never produced by encoding text, so a text cannot forge a control code.

Texts are whitespace-normalised (one space between words, no line breaks) before training and encoding: the
generator writes single-paragraph text, and encoding word by word (``" " + word``) gives exactly the ids of
encoding the normalised text at once, which lets the training formats be assembled from per-word ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError


def normalize(text: str) -> str:
    """One space between words, no leading/trailing space, no line breaks."""
    return " ".join(text.split())


def train_tokenizer(texts: Iterable[str], *, vocab_size: int, special_tokens: Sequence[str],
                    min_frequency: int = 2) -> Any:
    """A ``tokenizers.Tokenizer`` (byte-level BPE) trained on ``texts``; ``special_tokens`` get ids 0, 1, ...
    in the order given."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(special_tokens) + 1:
        raise ConfigError(f"vocab_size {vocab_size} is too small: byte-level BPE needs the {len(alphabet)} bytes "
                          f"and {len(special_tokens)} control codes (at least "
                          f"{len(alphabet) + len(special_tokens) + 1})")
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(special_tokens), initial_alphabet=alphabet,
                                  show_progress=False)
    tk.train_from_iterator((" " + normalize(t) for t in texts), trainer)
    for i, s in enumerate(special_tokens):
        if tk.token_to_id(s) != i:  # the trainer puts the special tokens first, in order
            raise ConfigError(f"tokenizer: control code {s!r} got id {tk.token_to_id(s)}, expected {i}")
    return tk


def load_tokenizer(path: str | Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def hf_tokenizer(tk: Any, *, bos: str, eos: str, pad: str) -> Any:
    """The ``transformers`` view of the tokenizer (for ``model.generate`` users and ``save_pretrained``)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=bos, eos_token=eos, pad_token=pad,
                                   unk_token=None)


__all__ = ["hf_tokenizer", "load_tokenizer", "normalize", "train_tokenizer"]
