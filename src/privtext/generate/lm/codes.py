"""Control codes: how a record (text + public labels + keyphrases) becomes a token sequence, and back.

Two sequence formats share one vocabulary of control codes (special tokens, :data:`SPECIALS`, plus one token
per public label value, ``<|label1=Business Category: Bars|>``)::

    free    <|bos|> LABELS <|text|> text <|eos|>
    infill  <|bos|> LABELS <|infill|> piece <|blank|> piece ... <|sep|> fill <|answer|> fill <|answer|> ... <|eos|>

``LABELS`` is one code per label column in the code book's column order (a column may be absent: the model is
trained with each code dropped at random, so it also writes without it). *free* writes a text for the labels.
*infill* is Donahue et al.'s infilling by language modelling (ILM, ACL 2020): the masked text with one
``<|blank|>`` per run of masked words, then the fill of every blank in order, each closed by ``<|answer|>``. With
random masks it is Aug-PE's fill-in-the-blanks variation; with *keyphrases* as the only kept pieces
(``<|blank|> k1 <|blank|> k2 <|blank|>``) it writes "a review for Bars containing these keyphrases", every
keyphrase present, in order, by construction (DP-KPS's prompt).

Training (:class:`ExampleMaker`) draws, per public text and epoch, one format: *free*, *blank* (each word masked
with a probability drawn from [0.15, 0.85], runs merged as Aug-PE's masking does, at least one blank) or
*anchored* (a random ordered subset of 1..``max_keyphrases`` of the text's keyphrases — :mod:`.keyphrases` —
kept, everything else blanked). :meth:`ControlEncoder.record` is the plain record encoding (labels + text,
*free* format) that DP fine-tuning on private records reuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...data.labels import LabelInfo
from ...errors import ConfigError
from .keyphrases import KeyphraseExtractor, Occurrence
from .tokenizer import decode_bytes, normalize, token_bytes

SPECIALS = ("<|bos|>", "<|eos|>", "<|pad|>", "<|text|>", "<|infill|>", "<|blank|>", "<|sep|>", "<|answer|>")
BOS, EOS, PAD, TEXT, INFILL, BLANK, SEP, ANSWER = range(len(SPECIALS))


@dataclass(frozen=True)
class CodeBook:
    """The public label values that get a control code, per label column (ids follow :data:`SPECIALS`)."""

    columns: tuple[str, ...] = ()
    values: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        if len(self.columns) != len(self.values):
            raise ConfigError(f"code book: {len(self.columns)} columns but {len(self.values)} value lists")

    @classmethod
    def from_labels(cls, labels: Mapping[str, Sequence[str]] | None, *, min_texts: int = 1,
                    max_values: int = 256, reserve: Mapping[str, Sequence[str]] | None = None) -> CodeBook:
        """Codes for the values of each public label column seen in at least ``min_texts`` texts; a column with
        more than ``max_values`` such values is not a class label and gets none.

        ``reserve`` (label column → values, e.g. the declared schema ``data.label_values``) adds a code for every
        listed value the public texts do not already give one: its token exists but pretraining never feeds it
        (its output logit is only pushed down, so all such rows drift the same way: ``method: dpft`` sets them from
        their values' words before fine-tuning), and the codes are learnt by DP fine-tuning on the private records. Columns of ``labels`` come first, in their order, then the reserved
        columns the public corpus does not label, in ``reserve``'s order."""
        cols: list[str] = []
        vals: list[tuple[str, ...]] = []
        for col, column in (labels or {}).items():
            counts: dict[str, int] = {}
            for v in column:
                counts[str(v)] = counts.get(str(v), 0) + 1
            kept = sorted(v for v, c in counts.items() if c >= min_texts)
            if kept and len(kept) <= max_values:
                cols.append(str(col))
                vals.append(tuple(kept))
        for col, values in (reserve or {}).items():
            extra = sorted({str(v) for v in values})
            if str(col) in cols:
                i = cols.index(str(col))
                merged = tuple(sorted(set(vals[i]) | set(extra)))
                if len(merged) <= max_values:
                    vals[i] = merged
            elif str(col) not in (labels or {}) and extra and len(extra) <= max_values:
                cols.append(str(col))
                vals.append(tuple(extra))
        return cls(tuple(cols), tuple(vals))

    def added_by(self, base: CodeBook) -> list[str]:
        """The label tokens of this code book that ``base`` lacks (the reserved, untrained codes)."""
        have = set(base.label_tokens())
        return [t for t in self.label_tokens() if t not in have]

    @staticmethod
    def label_token(column: str, value: str) -> str:
        return f"<|{column}={value}|>"

    def label_tokens(self) -> list[str]:
        return [self.label_token(c, v) for c, vs in zip(self.columns, self.values, strict=True) for v in vs]

    def special_tokens(self) -> list[str]:
        return [*SPECIALS, *self.label_tokens()]

    def to_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "values": [list(v) for v in self.values]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CodeBook:
        return cls(tuple(d["columns"]), tuple(tuple(v) for v in d["values"]))


class ControlEncoder:
    """Turns labels, keyphrases and words into ids of the :mod:`.tokenizer` (a ``tokenizers.Tokenizer``)."""

    def __init__(self, tokenizer: Any, codebook: CodeBook):
        self.tokenizer = tokenizer
        self.codebook = codebook
        specials = codebook.special_tokens()
        for i, s in enumerate(specials):
            if tokenizer.token_to_id(s) != i:
                raise ConfigError(f"the tokenizer does not hold control code {s!r} at id {i}: tokenizer and code "
                                  "book do not belong together")
        self.label_id: dict[tuple[str, str], int] = {}
        i = len(SPECIALS)
        for c, vs in zip(codebook.columns, codebook.values, strict=True):
            for v in vs:
                self.label_id[(c, v)] = i
                i += 1
        self.n_special = i
        self._words: dict[str, list[int]] = {}
        self._bytes: list[bytes] | None = None

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    # ---------------------------------------------------------------------------------------------- words
    def word_ids(self, words: Sequence[str]) -> list[list[int]]:
        """The ids of ``" " + word`` for each whitespace word (memoised)."""
        new = list(dict.fromkeys(w for w in words if w not in self._words))
        if new:
            for w, enc in zip(new, self.tokenizer.encode_batch([" " + w for w in new], add_special_tokens=False),
                              strict=True):
                self._words[w] = list(enc.ids)
        return [self._words[w] for w in words]

    def text_ids(self, text: str) -> list[int]:
        return [i for ids in self.word_ids(normalize(text).split()) for i in ids]

    def label_ids(self, label: LabelInfo | Mapping[str, str] | None) -> tuple[list[int], list[str]]:
        """The label codes of ``label`` in code-book order, and the label columns that got none (a column the
        code book does not know, or a value without a code: generation is then not conditioned on it)."""
        if label is None:
            return [], []
        d = label.as_dict() if isinstance(label, LabelInfo) else dict(label)
        ids = [self.label_id[(c, d[c])] for c in self.codebook.columns if (c, d.get(c)) in self.label_id]
        missing = [c for c in d if (c, d[c]) not in self.label_id]
        return ids, missing

    # -------------------------------------------------------------------------------------------- formats
    @staticmethod
    def free(labels: Sequence[int], text: Sequence[int] | None) -> list[int]:
        """*free* format; ``text=None`` gives the prompt (ending with ``<|text|>``)."""
        head = [BOS, *labels, TEXT]
        return head if text is None else [*head, *text, EOS]

    @staticmethod
    def infill(labels: Sequence[int], pieces: Sequence[Sequence[int] | None],
               answers: Sequence[Sequence[int]] | None) -> list[int]:
        """*infill* format: ``pieces`` are kept ids or ``None`` for a blank; ``answers=None`` gives the prompt
        (ending with ``<|sep|>``)."""
        out = [BOS, *labels, INFILL]
        for p in pieces:
            if p is None:
                out.append(BLANK)
            else:
                out.extend(p)
        out.append(SEP)
        if answers is None:
            return out
        for a in answers:
            out.extend(a)
            out.append(ANSWER)
        out.append(EOS)
        return out

    def record(self, text: str, label: LabelInfo | Mapping[str, str] | None = None) -> list[int]:
        """The training sequence of one record: its label codes and its text (*free* format)."""
        return self.free(self.label_ids(label)[0], self.text_ids(text))

    def anchored_pieces(self, keyphrases: Sequence[str]) -> list[list[int] | None]:
        """The infill pieces ``blank k1 blank k2 ... blank`` of a keyphrase list."""
        pieces: list[list[int] | None] = [None]
        for kp in keyphrases:
            pieces += [self.text_ids(kp), None]
        return pieces

    # ------------------------------------------------------------------------------------------- decoding
    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` without control codes: the bytes of the whole sequence decoded at once, invalid UTF-8
        dropped (:func:`.tokenizer.decode_bytes`), so no U+FFFD ever reaches a record."""
        if self._bytes is None:
            self._bytes = token_bytes(self.tokenizer)
        table = self._bytes
        return decode_bytes(b"".join(table[int(i)] for i in ids if self.n_special <= int(i) < len(table)))

    def render(self, ids: Sequence[int]) -> str:
        """``ids`` as text with the control codes written out (what the prompt log records)."""
        return str(self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)).strip()

    @staticmethod
    def split_answers(ids: Sequence[int]) -> list[list[int]]:
        """Generated infill ids → one id list per ``<|answer|>`` (ids after ``<|eos|>`` are dropped; an unclosed
        last answer counts)."""
        out: list[list[int]] = []
        cur: list[int] = []
        for i in ids:
            i = int(i)
            if i == EOS or i == PAD:
                break
            if i == ANSWER:
                out.append(cur)
                cur = []
            else:
                cur.append(i)
        if cur:
            out.append(cur)
        return out


# --------------------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class FormatMix:
    """Shares of the training formats and how conditions are drawn (see the module docstring)."""

    free: float = 0.4
    blank: float = 0.35
    anchored: float = 0.25
    label_dropout: float = 0.1
    max_keyphrases: int = 8
    mask_low: float = 0.15
    mask_high: float = 0.85

    def __post_init__(self) -> None:
        shares = (self.free, self.blank, self.anchored)
        if min(shares) < 0 or sum(shares) <= 0:
            raise ConfigError(f"format shares must be >= 0 with a positive sum, got {shares}")
        if not 0 <= self.mask_low <= self.mask_high < 1:
            raise ConfigError(f"mask range must satisfy 0 <= low <= high < 1, got ({self.mask_low}, {self.mask_high})")

    def probabilities(self) -> np.ndarray:
        p = np.array([self.free, self.blank, self.anchored], dtype=np.float64)
        return p / p.sum()


@dataclass
class _Doc:
    words: list[str]
    ids: list[list[int]]
    cum: np.ndarray  # cum[k] = tokens of the first k words
    labels: list[tuple[int, int]]  # (column index, label code id)
    occ: list[Occurrence] = field(default_factory=list)


class ExampleMaker:
    """Training sequences from public texts: one per text and epoch, its format drawn from the :class:`FormatMix`."""

    def __init__(self, encoder: ControlEncoder, extractor: KeyphraseExtractor, texts: Sequence[str],
                 labels: Mapping[str, Sequence[str]] | None, *, max_length: int, mix: FormatMix | None = None):
        self.enc = encoder
        self.extractor = extractor
        self.max_length = int(max_length)
        self.mix = mix or FormatMix()
        self.docs: list[_Doc] = []
        cols = encoder.codebook.columns
        for i, text in enumerate(texts):
            words = normalize(text).split()
            ids = encoder.word_ids(words)
            cum = np.concatenate([[0], np.cumsum([len(x) for x in ids])]).astype(np.int64)
            lab = []
            if labels:
                for j, c in enumerate(cols):
                    code = encoder.label_id.get((c, str(labels[c][i]))) if c in labels else None
                    if code is not None:
                        lab.append((j, code))
            self.docs.append(_Doc(words, ids, cum, lab, extractor.occurrences(words)))

    def __len__(self) -> int:
        return len(self.docs)

    @property
    def tokens(self) -> int:
        """Text tokens of the corpus (before truncation and control codes)."""
        return int(sum(int(d.cum[-1]) for d in self.docs))

    def epoch(self, rng: np.random.Generator) -> list[list[int]]:
        """One training sequence per public text, in corpus order."""
        return [self.example(i, rng) for i in range(len(self.docs))]

    def _fit(self, doc: _Doc, budget: int) -> int:
        """How many leading words fit in ``budget`` tokens."""
        return int(np.searchsorted(doc.cum, max(budget, 0), side="right") - 1)

    def example(self, i: int, rng: np.random.Generator) -> list[int]:
        doc = self.docs[i]
        m = self.mix
        labels = [code for _, code in doc.labels if rng.random() >= m.label_dropout]
        kind = int(rng.choice(3, p=m.probabilities()))
        if kind == 2 and not doc.occ:
            kind = 1
        if kind == 0:
            n = self._fit(doc, self.max_length - len(labels) - 3)
            seq = self.enc.free(labels, [t for w in doc.ids[:n] for t in w])
        else:
            n = self._fit(doc, int(0.75 * (self.max_length - len(labels) - 4)))
            if kind == 1:
                p = rng.uniform(m.mask_low, m.mask_high)
                keep = rng.random(n) >= p
                if n and keep.all():
                    keep[int(rng.integers(n))] = False
            else:
                keep = np.zeros(n, dtype=bool)
                for o in self._subset([o for o in doc.occ if o.end <= n] or doc.occ[:1], rng):
                    keep[o.start:min(o.end, n)] = True
            pieces, answers = self._mask(doc.ids[:n], keep)
            seq = self.enc.infill(labels, pieces, answers)
        return seq[:self.max_length]

    def _subset(self, occ: list[Occurrence], rng: np.random.Generator) -> list[Occurrence]:
        k = int(rng.integers(1, min(self.mix.max_keyphrases, len(occ)) + 1))
        idx = np.sort(rng.choice(len(occ), size=k, replace=False))
        return [occ[int(j)] for j in idx]

    @staticmethod
    def _mask(ids: Sequence[list[int]], keep: np.ndarray) -> tuple[list[list[int] | None], list[list[int]]]:
        pieces: list[list[int] | None] = []
        answers: list[list[int]] = []
        for w, k in zip(ids, keep, strict=True):
            if k:
                if pieces and pieces[-1] is not None:
                    pieces[-1].extend(w)
                else:
                    pieces.append(list(w))
            elif pieces and pieces[-1] is None:
                answers[-1].extend(w)
            else:
                pieces.append(None)
                answers.append(list(w))
        return pieces, answers


__all__ = ["ANSWER", "BLANK", "BOS", "EOS", "INFILL", "PAD", "SEP", "SPECIALS", "TEXT", "CodeBook",
           "ControlEncoder", "ExampleMaker", "FormatMix"]
