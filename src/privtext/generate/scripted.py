"""A scripted generator: a real, deterministic implementation of the protocol for tests.

Outputs depend only on the inputs and the ``rng`` stream; every call is recorded in :attr:`ScriptedGenerator.calls`
and every prompt (rendered from the prompt family, exactly as a model backend would) goes to the prompt log.

* ``random`` — ``"<label values> w1 w2 ..."`` with words drawn from ``vocabulary`` (or from ``replies`` when given);
* ``variation(blank)`` — Aug-PE's masking of the input, every blank filled with drawn words (the other words kept);
* ``variation(paraphrase)`` — each word replaced by a drawn word with probability ``paraphrase_rate``;
* ``seeded`` — the keyphrases in order, separated by drawn words;
* ``contrastive`` — words drawn from the good examples (and the vocabulary), never a word only the bad ones use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from ..backends import BackendOptions
from ..data.labels import LabelInfo
from .base import BaseGenerator, VariationSpec
from .prompts import BLANK, mask_words

DEFAULT_VOCABULARY = (
    "the a good great service food place staff friendly time order price quality visit again really nice "
    "clean fast slow love recommend study results patients method data analysis model paper review new"
).split()


class ScriptedOptions(BackendOptions):
    vocabulary: list[str] = Field(default_factory=lambda: list(DEFAULT_VOCABULARY), min_length=1)
    replies: list[str] | None = Field(default=None, description="random() draws whole replies from this list")
    min_words: int = Field(default=6, ge=1)
    max_words: int = Field(default=16, ge=1)
    echo_label: bool = Field(default=True, description="random() texts start with the label values")
    paraphrase_rate: float = Field(default=0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _range(self) -> ScriptedOptions:
        if self.max_words < self.min_words:
            raise ValueError(f"max_words={self.max_words} must be >= min_words={self.min_words}")
        return self


class ScriptedGenerator(BaseGenerator):
    backend = "scripted"
    Options = ScriptedOptions

    def __init__(self, *, options: ScriptedOptions | None = None, **kw: Any):
        super().__init__(**kw)
        self.options = options or ScriptedOptions()
        self.calls: list[dict[str, Any]] = []

    def _words(self, rng: np.random.Generator, k: int | None = None) -> list[str]:
        o = self.options
        if k is None:
            k = int(rng.integers(o.min_words, o.max_words + 1))
        idx = rng.integers(0, len(o.vocabulary), size=k)
        return [o.vocabulary[int(i)] for i in idx]

    def _send(self, operation: str, prompt: Any) -> None:
        self._log(operation, prompt.messages(), dict(prompt.meta))
        self.stats.prompts += 1
        self.stats.prompt_tokens += len(prompt.user.split())

    def _done(self, out: list[str]) -> list[str]:
        self.stats.calls += 1
        self.stats.completion_tokens += sum(len(t.split()) for t in out)
        return out

    def _random(self, label: LabelInfo | None, n: int, rng: np.random.Generator) -> list[str]:
        self.calls.append({"operation": "random", "n": n, "label": label})
        out = []
        for _ in range(n):
            self._send("random", self.family.random_prompt(label, rng))
            if self.options.replies:
                body = self.options.replies[int(rng.integers(len(self.options.replies)))]
            else:
                body = " ".join(self._words(rng))
            prefix = " ".join(label.values) + " " if (label and self.options.echo_label) else ""
            out.append(prefix + body)
        return self._done(out)

    def _variation(self, texts: list[str], label: LabelInfo | None, spec: VariationSpec,
                   rng: np.random.Generator) -> list[str]:
        self.calls.append({"operation": "variation", "n": len(texts), "label": label, "spec": spec,
                           "texts": list(texts)})
        out = []
        for text in texts:
            if spec.kind == "blank":
                masked, _ = mask_words(text, spec.mask_prob, rng)
                self._send("variation", self.family.blank_prompt(masked, len(text.split()), label))
                words = []
                for w in masked.split(" "):
                    words.extend(self._words(rng, int(rng.integers(1, 3))) if w == BLANK else [w])
                out.append(" ".join(words))
            else:
                self._send("variation", self.family.paraphrase_prompt(text, label, spec.style, rng))
                words = text.split() or self._words(rng, 1)
                swap = rng.random(len(words)) < self.options.paraphrase_rate
                repl = self._words(rng, len(words))
                out.append(" ".join(r if s else w for w, r, s in zip(words, repl, swap, strict=True)))
        return self._done(out)

    def _seeded(self, keyphrases: list[list[str]], doc_type: str, rng: np.random.Generator,
                examples: list[list[str]]) -> list[str]:
        self.calls.append({"operation": "seeded", "n": len(keyphrases), "doc_type": doc_type,
                           "examples": sum(len(e) for e in examples)})
        out = []
        for kps, ex in zip(keyphrases, examples, strict=True):
            self._send("seeded", self.family.seeded_prompt(kps, doc_type, examples=ex))
            parts: list[str] = []
            for kp in kps:
                parts.extend(self._words(rng, int(rng.integers(0, 4))))
                parts.append(kp)
            parts.extend(self._words(rng, int(rng.integers(1, 4))))
            out.append(" ".join(parts))
        return self._done(out)

    def _contrastive(self, good: list[str], bad: list[str], label: LabelInfo | None, n: int,
                     rng: np.random.Generator) -> list[str]:
        self.calls.append({"operation": "contrastive", "n": n, "label": label, "good": len(good), "bad": len(bad)})
        good_words = [w for t in good for w in t.split()]
        bad_only = {w for t in bad for w in t.split()} - set(good_words)
        pool = good_words + [w for w in self.options.vocabulary if w not in bad_only]
        pool = pool or good_words or list(self.options.vocabulary)
        out = []
        for _ in range(n):
            self._send("contrastive", self.family.contrastive_prompt(good, bad, label, rng))
            k = int(rng.integers(self.options.min_words, self.options.max_words + 1))
            out.append(" ".join(pool[int(i)] for i in rng.integers(0, len(pool), size=k)))
        return self._done(out)


def scripted_texts(n: int, *, rng: np.random.Generator, vocabulary: Sequence[str] = DEFAULT_VOCABULARY,
                   words: int = 10) -> list[str]:
    """``n`` texts of ``words`` drawn words (handy test corpora)."""
    idx = rng.integers(0, len(vocabulary), size=(n, words))
    return [" ".join(vocabulary[int(i)] for i in row) for row in idx]
