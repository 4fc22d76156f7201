"""Preference pairs as token ids, exactly as the generator is conditioned when it writes for a label.

A pair's prompt is the generator's RANDOM_API condition for the pair's label group (POPri trains prompt →
completion; the pairs compare texts of one group, so what differs between chosen and rejected is the text):

* the ``lm`` generator: the *free* format's control codes ``<|bos|> LABELS <|text|>``
  (:meth:`~privtext.generate.lm.codes.ControlEncoder.free`), the completion the text's ids and ``<|eos|>`` —
  the sequence :meth:`ControlEncoder.record` builds and pretraining used, so DPO moves the same distribution
  ``random`` samples from;
* a ``transformers`` generator: the prompt family's RANDOM_API prompt for the label, rendered as the generator
  renders it (chat template or plain text, :meth:`~privtext.generate.base.PromptedGenerator.render`), then the
  text's tokens and the end-of-sequence token.

Sequences longer than ``max_length`` lose the end of their completion (no end token then).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .pairs import PreferencePair


@dataclass(frozen=True)
class TokenPair:
    """Prompt ids and the two completions' ids (each to be appended to the prompt)."""

    prompt: tuple[int, ...]
    chosen: tuple[int, ...]
    rejected: tuple[int, ...]


def _fit(prompt: list[int], completion: list[int], max_length: int) -> tuple[int, ...]:
    room = max_length - len(prompt)
    if room < 1:
        raise ConfigError(f"a DPO prompt of {len(prompt)} tokens leaves no room for a completion within "
                          f"{max_length} positions")
    return tuple(completion[:room])


class _PairEncoding:
    """What both encoders share: a pair is its prompt's ids and each completion's ids after them, cut to
    ``max_length`` (:func:`_fit`). A subclass gives ``prompt_ids(group)``, ``completion_ids(text)`` and
    ``max_length``."""

    max_length: int

    def prompt_ids(self, group: int) -> list[int]:
        raise NotImplementedError

    def completion_ids(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode(self, pair: PreferencePair) -> TokenPair:
        """The pair's token ids: the prompt, and prompt + chosen / prompt + rejected completion, each cut to fit."""
        p = self.prompt_ids(pair.group)
        return TokenPair(tuple(p), _fit(p, self.completion_ids(pair.chosen), self.max_length),
                         _fit(p, self.completion_ids(pair.rejected), self.max_length))

    def encode_all(self, pairs: Sequence[PreferencePair]) -> list[TokenPair]:
        """:meth:`encode` of every pair, in order."""
        return [self.encode(p) for p in pairs]


class LMPairEncoder(_PairEncoding):
    """Pairs → ids for the small ``lm`` generator (its :class:`~privtext.generate.lm.codes.ControlEncoder`)."""

    def __init__(self, encoder: Any, *, label_info: Callable[[int], Any], max_length: int):
        self.enc = encoder
        self.label_info = label_info
        self.max_length = int(max_length)

    @property
    def pad_id(self) -> int:
        from ..generate.lm.codes import PAD

        return PAD

    def prompt_ids(self, group: int) -> list[int]:
        labels, _ = self.enc.label_ids(self.label_info(group))
        return self.enc.free(labels, None)

    def completion_ids(self, text: str) -> list[int]:
        from ..generate.lm.codes import EOS

        return [*self.enc.text_ids(text), EOS]



class HFPairEncoder(_PairEncoding):
    """Pairs → ids for a Hugging Face causal LM: ``prompt_text(group)`` tokenised as the generator tokenises its
    prompts (``add_special_tokens`` off under a chat template, whose text carries them), the completion without
    special tokens plus the end-of-sequence token."""

    def __init__(self, tokenizer: Any, *, prompt_text: Callable[[int], str], max_length: int,
                 add_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.prompt_text = prompt_text
        self.max_length = int(max_length)
        self.add_special_tokens = add_special_tokens
        if tokenizer.eos_token_id is None:
            raise ConfigError("DPO needs a tokenizer with an end-of-sequence token")

    @property
    def pad_id(self) -> int:
        t = self.tokenizer
        return int(t.pad_token_id if t.pad_token_id is not None else t.eos_token_id)

    def prompt_ids(self, group: int) -> list[int]:
        return list(self.tokenizer(self.prompt_text(group), add_special_tokens=self.add_special_tokens)["input_ids"])

    def completion_ids(self, text: str) -> list[int]:
        return [*self.tokenizer(text, add_special_tokens=False)["input_ids"], int(self.tokenizer.eos_token_id)]



__all__ = ["HFPairEncoder", "LMPairEncoder", "TokenPair"]
