"""The offline default generator: a word-level interpolated modified Kneser-Ney n-gram model of public text.

It needs no weights and no network, and it is trained on **public text only** (it refuses to build without a
public corpus, and calls the run's :class:`~privtext.guard.PrivateGuard` on its training corpus).

Model
-----
Interpolated Kneser-Ney with the three discounts of Chen & Goodman (D1, D2, D3+, estimated per order from
count-of-counts). The highest order uses raw counts, lower orders continuation counts (the number of distinct
words seen before an n-gram), and the unigram level is interpolated with a uniform distribution over the
vocabulary, so every word has non-zero probability::

    P_k(w | h) = max(c_k(h w) - D_k(c), 0) / c_k(h)  +  gamma_k(h) * P_{k-1}(w | h'),   gamma_k(h) = 1 - kept/c_k(h)

Storage is integer-encoded numpy: a context of length ``j`` is found by a chain of binary searches over sorted
int64 keys (``key_j = id(context_{j-1}) * V + word``, most recent word first, so every back-off context is a
by-product of the lookup of the longest one); each context's entries are a slice of a word array with
cumulative discounted counts.

Sampling is exact and costs O(order) array look-ups per word: draw ``u`` uniform; at the longest known context,
if ``u`` falls in the kept (discounted) share, pick the word by ``searchsorted`` on the cumulative counts, else
rescale ``u`` to the back-off share and recurse to the shorter context (the uniform distribution at the bottom).
``backoff_scale`` s (default 0.5) multiplies every back-off weight gamma(h) by s when *sampling* (the kept
counts are scaled up to compensate): s = 1 samples the Kneser-Ney model itself, smaller values give more fluent
text that stays closer to the public corpus. Perplexity is always that of the Kneser-Ney model (s = 1). Words
that may not be drawn at a step (``</s>`` before the target length, ``<unk>``) are rejected and redrawn; after a
few rejections the step draws from the exactly renormalised distribution instead.

Label conditioning: when the public corpus has the run's label columns, one model is trained per label value
(per column) and per label combination; generation for a label samples each word from the mixture
``(1 - label_weight) * P_global + label_weight * mean(P_label models)`` (component first, then word: exact).

Operations
----------
* ``random`` — free sampling to a length drawn from the public texts' word counts (per label when known) — or,
  when the generator has a length target (released, configured, or the prompt family's prior:
  :mod:`privtext.generate.length`), from that target — then to the end of the sentence; every operation stops at
  ``max_words`` and at the length target's cap;
* ``variation(blank)`` — every token is masked with probability ``mask_prob``; each run of masks is refilled with
  about as many words (± ``length_noise``) sampled from the left context; ``blank_candidates`` candidates are
  scored by the global model's probability of the (up to ``order - 1``) words that follow the blank and one is
  drawn in proportion to it (sampling-importance-resampling), so the fill agrees with its right context;
* ``variation(paraphrase)`` — the text's content words (outside the most frequent public words) are kept with
  probability ``paraphrase_keep`` as anchors and a new text of about the same length is written around them;
* ``seeded`` — the keyphrases are placed in order with sampled gaps between them (filled as above), then the
  text runs on to a sentence end: every keyphrase appears, in order. *Retrieval-boosted* (``seeded_retrieval``
  k > 0, the default): the k public training texts that hold the most (idf-weighted) of the prompt's keyphrases
  (:class:`KeyphraseRetriever`) give a small Kneser-Ney model that joins the mixture with weight
  ``retrieval_weight``, so the words around the terms come from texts on the terms' topic instead of from the
  whole public corpus (an LLM writes around the terms the same way). The query is the prompt's keyphrases and
  the texts are the generator's own public training corpus: nothing else is read;
* ``contrastive`` — words that would complete a bigram/trigram found only in the bad examples are rejected with
  probability ``1 - exp(-contrastive_penalty)``, and the length follows a good example's. With
  ``contrastive_boost`` > 0 a small Kneser-Ney model of the good examples shown also joins the mixture with that
  weight. Its default depends on the label: 0 when the label has a public label model, because WASP's prompt
  asks for a new sample "diverse in expression compared to the given good samples" (§4.6) and copying their
  trigrams does the opposite: on ``benchmarks/wasp_banking.py`` (3 seeds) WASP scored 0.883 ± 0.022 at 0.5, 0.904
  at 0.2 and 0.938 ± 0.002 at 0 (docs/wasp.md). 0.9 (``UNLABELLED_BOOST``) when it has none (public text without
  labels): the model cannot read the label in the prompt, so the examples, which that label's private votes
  chose, are the only thing that can make the sample belong to the label (support tickets, docs/wasp.md).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import Field

from ..backends import BackendOptions
from ..data.labels import LabelInfo
from ..errors import ConfigError, DataError
from .base import BaseGenerator, GeneratorContext, VariationSpec
from .length import cap_words

BOS, EOS, UNK = 0, 1, 2
SPECIALS = ("<s>", "</s>", "<unk>")
PARA = "\n\n"

_TOKEN = re.compile(r"\n[ \t\r\f\v]*\n\s*|\w+(?:['’]\w+)*|[^\w\s]", re.UNICODE)
_NO_SPACE_BEFORE = frozenset(".,!?;:%)]}'’”…-/")
_NO_SPACE_AFTER = frozenset("([{$#“-/")
_SENT_END = frozenset(".!?")


def tokenize(text: str) -> list[str]:
    """Words (with inner apostrophes), single punctuation marks, and paragraph breaks (``"\\n\\n"``)."""
    return [PARA if t[0] == "\n" else t for t in _TOKEN.findall(text)]


def detokenize(tokens: Sequence[str]) -> str:
    """Readable text: no space before closing punctuation, none after opening brackets; ``tokenize`` of the
    result gives the tokens back."""
    out: list[str] = []
    prev: str | None = None
    quote_open = False
    for t in tokens:
        if t == PARA:
            if out and prev != PARA:
                out.append(PARA)
            prev = PARA
            continue
        if t == '"':
            space = not quote_open and prev not in (None, PARA) and prev not in _NO_SPACE_AFTER
            quote_open = not quote_open
            out.append(' "' if space else '"')
            prev = t if quote_open else "."
            continue
        if prev is None or prev == PARA or t in _NO_SPACE_BEFORE or prev in _NO_SPACE_AFTER or prev == '"':
            out.append(t)
        else:
            out.append(" " + t)
        prev = t
    return "".join(out).strip()


def _is_word(tok: str) -> bool:
    return tok[:1].isalnum() or tok[:1] == "_"


# --------------------------------------------------------------------------------------------- vocabulary


class Vocabulary:
    """Token <-> id. Ids 0, 1, 2 are ``<s>``, ``</s>``, ``<unk>``."""

    def __init__(self, tokens: Sequence[str]):
        self.id2tok: list[str] = [*SPECIALS, *tokens]
        self.tok2id: dict[str, int] = {t: i for i, t in enumerate(self.id2tok)}
        self.is_word = np.array([False, False, False, *(_is_word(t) for t in tokens)])
        self.is_word_list: list[bool] = self.is_word.tolist()
        self.sent_end = frozenset(i for i, t in enumerate(self.id2tok) if t in _SENT_END)
        self.para = self.tok2id.get(PARA, -1)

    def __len__(self) -> int:
        return len(self.id2tok)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """The ids of ``tokens``; a token outside the vocabulary becomes ``<unk>`` (id 2)."""
        get = self.tok2id.get
        return [get(t, UNK) for t in tokens]


# ---------------------------------------------------------------------------------------------- KN model


def _discounts(counts: np.ndarray) -> tuple[float, float, float]:
    """Chen & Goodman's modified Kneser-Ney discounts from count-of-counts (clamped for tiny corpora)."""
    n = [int(np.count_nonzero(counts == k)) for k in (1, 2, 3, 4)]
    defaults = (0.5, 1.0, 1.5)
    if n[0] == 0 or n[1] == 0:
        return defaults
    y = n[0] / (n[0] + 2 * n[1])
    d1 = 1 - 2 * y * n[1] / n[0]
    d2 = 2 - 3 * y * n[2] / n[1] if n[1] else defaults[1]
    d3 = 3 - 4 * y * n[3] / n[2] if n[2] else defaults[2]
    return (min(max(d1, 0.05), 0.95), min(max(d2, 0.05), 1.95), min(max(d3, 0.05), 2.95))


class KNModel:
    """One interpolated modified Kneser-Ney model over a shared integer vocabulary."""

    def __init__(self, docs: Sequence[Sequence[int]], *, order: int, vocab_size: int, scale: float = 1.0):
        if not 0 < scale <= 1:
            raise ConfigError(f"backoff_scale must be in (0, 1], got {scale}")
        self.scale = float(scale)
        if order < 1:
            raise ConfigError(f"n-gram order must be >= 1, got {order}")
        self.order = order
        self.V = V = int(vocab_size)
        pad = order - 1
        lens = np.array([len(d) + 1 for d in docs], dtype=np.int64)  # + EOS
        if lens.size == 0:
            raise DataError("cannot train an n-gram model on zero texts")
        seq_parts = []
        for d in docs:
            seq_parts.append(np.full(pad, BOS, dtype=np.int64))
            seq_parts.append(np.asarray(d, dtype=np.int64))
            seq_parts.append(np.array([EOS], dtype=np.int64))
        seq = np.concatenate(seq_parts)
        starts = np.concatenate([[0], np.cumsum(lens + pad)[:-1]]) + pad  # first target of each doc
        pos = np.repeat(starts, lens) + (np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens))
        self.n_tokens = int(lens.sum())
        target = seq[pos]

        # reversed context chains: rid[j] identifies (w_{t-1}, ..., w_{t-j})
        self.ctx_keys: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        rids: list[np.ndarray] = [np.zeros(len(pos), dtype=np.int64)]
        for j in range(1, order):
            w = seq[pos - j]
            key = w if j == 1 else rids[j - 1] * V + w
            keys, inv = np.unique(key, return_inverse=True)
            self.ctx_keys.append(keys)
            rids.append(inv.astype(np.int64))

        # entries per order k (context length j = k - 1): raw counts at the top, continuation counts below
        self.offsets: list[np.ndarray] = [np.zeros(0)] * (order + 1)
        self.words: list[np.ndarray] = [np.zeros(0)] * (order + 1)
        self.cum: list[np.ndarray] = [np.zeros(0)] * (order + 1)
        self.total: list[np.ndarray] = [np.zeros(0)] * (order + 1)
        self.kept: list[np.ndarray] = [np.zeros(0)] * (order + 1)
        self.discounts: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * (order + 1)
        higher: np.ndarray | None = None  # unique entry keys of order k + 1
        for k in range(order, 0, -1):
            j = k - 1
            if k == order:
                ukeys, counts = np.unique(rids[j] * V + target, return_counts=True)
            else:
                assert higher is not None
                hctx = higher // V
                hw = higher % V
                parent = hctx * 0 if j == 0 else self.ctx_keys[j + 1][hctx] // V
                ukeys, counts = np.unique(parent * V + hw, return_counts=True)
            higher = ukeys
            ctx = ukeys // V
            c = counts.astype(np.float64)
            d1, d2, d3 = self.discounts[k] = _discounts(counts)
            disc = c - np.where(counts == 1, d1, np.where(counts == 2, d2, d3))
            n_ctx = len(self.ctx_keys[j])
            offsets = np.searchsorted(ctx, np.arange(n_ctx + 1))
            gc = np.cumsum(disc)
            base = np.concatenate([[0.0], gc])[offsets[:-1]]
            sizes = np.diff(offsets)
            self.offsets[k] = offsets
            self.words[k] = (ukeys % V).astype(np.int64)
            self.cum[k] = gc - np.repeat(base, sizes)
            self.total[k] = np.bincount(ctx, weights=c, minlength=n_ctx)
            self.kept[k] = np.concatenate([[0.0], gc])[offsets[1:]] - base
        self.n_entries = int(sum(len(self.words[k]) for k in range(1, order + 1)))
        # python-level views for the hot loop
        self._ck = self.ctx_keys
        self._nck = [len(x) for x in self.ctx_keys]

    # ------------------------------------------------------------------------------------------ look-ups
    def chain(self, hist: Sequence[int]) -> list[int]:
        """Context ids for the last ``order - 1`` words of ``hist`` (padded with ``<s>``): ``[0, rid1, ...]``
        up to the longest context seen in training."""
        rids = [0]
        rid = 0
        V = self.V
        ck = self._ck
        nck = self._nck
        for j in range(1, self.order):
            w = hist[-j]
            key = w if j == 1 else rid * V + w
            keys = ck[j]
            i = int(keys.searchsorted(key))
            if i >= nck[j] or keys[i] != key:
                break
            rid = i
            rids.append(rid)
        return rids

    def draw(self, rids: Sequence[int], u: float) -> int:
        """Exact draw from P_s(. | context) with one uniform ``u`` (recycled through the back-off levels).

        With ``scale == 1`` this is the Kneser-Ney distribution; with ``scale = s < 1`` the back-off mass
        ``gamma(h)`` of every level is multiplied by ``s`` (and the discounted counts scaled up to compensate):
        sharper, more fluent samples, closer to the public text."""
        s_ = self.scale
        for k in range(len(rids), 0, -1):
            rid = rids[k - 1]
            tot = self.total[k][rid]
            kept = self.kept[k][rid]
            g = s_ * (tot - kept) / tot
            if u >= g:
                x = (u - g) / (1.0 - g) * kept
                off = self.offsets[k]
                s = int(off[rid])
                e = int(off[rid + 1])
                i = int(self.cum[k][s:e].searchsorted(x, side="right"))
                return int(self.words[k][s + min(i, e - s - 1)])
            u = u / g
        return 1 + min(int(u * (self.V - 1)), self.V - 2)

    def prob(self, rids: Sequence[int], w: int, *, scale: float | None = None) -> float:
        """P_s(w | context) (``scale=None`` uses the model's sampling scale; 1.0 is Kneser-Ney)."""
        s_ = self.scale if scale is None else scale
        p = 1.0 / (self.V - 1)
        offsets, words_, cum_, total_, kept_ = self.offsets, self.words, self.cum, self.total, self.kept
        for k in range(1, len(rids) + 1):
            rid = rids[k - 1]
            off = offsets[k]
            s = int(off[rid])
            e = int(off[rid + 1])
            words = words_[k]
            i = s + int(words[s:e].searchsorted(w))
            tot = total_[k][rid]
            kept = kept_[k][rid]
            g = s_ * (tot - kept) / tot
            if i < e and words[i] == w:
                cum = cum_[k]
                c = cum[i] - cum[i - 1] if i > s else cum[i]
                p = float((1.0 - g) * c / kept + g * p)
            else:
                p = float(g * p)
        return p

    def dist(self, rids: Sequence[int]) -> np.ndarray:
        """The whole distribution P_s(. | context) as a vector over the vocabulary (O(V): used only when rejection
        sampling keeps hitting forbidden words)."""
        s_ = self.scale
        p = np.full(self.V, 1.0 / (self.V - 1))
        p[BOS] = 0.0
        for k in range(1, len(rids) + 1):
            rid = rids[k - 1]
            off = self.offsets[k]
            s = int(off[rid])
            e = int(off[rid + 1])
            tot = float(self.total[k][rid])
            kept = float(self.kept[k][rid])
            g = s_ * (tot - kept) / tot
            cum = self.cum[k][s:e]
            disc = np.diff(cum, prepend=0.0)
            p *= g
            p[self.words[k][s:e]] += (1.0 - g) * disc / kept
        return p

    def ngrams(self) -> int:
        """How many n-gram entries (orders 1 to n) the model stores: its size."""
        return self.n_entries


# -------------------------------------------------------------------------------------------- the full LM


class _Uniforms:
    """Uniform draws from ``rng`` in blocks (one numpy call per block, deterministic given ``rng``)."""

    def __init__(self, rng: np.random.Generator, block: int = 2048):
        self.rng, self.block = rng, block
        self.buf: list[float] = []
        self.i = 0

    def __call__(self) -> float:
        if self.i >= len(self.buf):
            self.buf = self.rng.random(self.block).tolist()
            self.i = 0
        v = self.buf[self.i]
        self.i += 1
        return v


class _Mixture:
    """Components and their cumulative weights; optional rejection of penalised n-grams."""

    def __init__(self, models: Sequence[KNModel], weights: Sequence[float], *,
                 penalised: set[tuple[int, ...]] | None = None, accept: float = 1.0):
        w = np.asarray(weights, dtype=np.float64)
        self.models = list(models)
        self.weights = (w / w.sum()).tolist()
        self.cw = np.cumsum(w / w.sum()).tolist()
        self.cw[-1] = 1.0
        self.accept = accept
        self.pen2: dict[int, set[int]] = {}
        self.pen3: dict[tuple[int, int], set[int]] = {}
        for g in penalised or ():
            if len(g) == 2:
                self.pen2.setdefault(g[0], set()).add(g[1])
            elif len(g) == 3:
                self.pen3.setdefault((g[0], g[1]), set()).add(g[2])
        self.penalises = bool(self.pen2 or self.pen3)

    def pick(self, u: float) -> KNModel:
        """The component a uniform draw ``u`` ∈ [0, 1) picks by the cumulative weights."""
        if len(self.models) == 1:
            return self.models[0]
        return self.models[min(bisect.bisect_right(self.cw, u), len(self.models) - 1)]

    def penalised(self, hist: Sequence[int], w: int) -> bool:
        """Whether word ``w`` after ``hist`` completes a penalised bigram or trigram."""
        return w in self.pen2.get(hist[-1], ()) or w in self.pen3.get((hist[-2], hist[-1]), ())

    def prob(self, hist: Sequence[int], w: int, *, scale: float | None = None) -> float:
        """P(w | hist) under the mixture: the weighted sum of the components' Kneser-Ney probabilities (back-off
        weights shrunk by ``scale`` when given); no penalty applied."""
        return sum(wt * m.prob(m.chain(hist), w, scale=scale)
                   for m, wt in zip(self.models, self.weights, strict=True))

    def dist(self, hist: Sequence[int]) -> np.ndarray:
        """The mixture's whole next-word distribution after ``hist`` (a vector over the vocabulary), penalised words
        multiplied by ``accept``; not renormalised."""
        p = sum(wt * m.dist(m.chain(hist)) for m, wt in zip(self.models, self.weights, strict=True))
        assert isinstance(p, np.ndarray)
        if self.penalises:
            for w in set(self.pen2.get(hist[-1], ())) | set(self.pen3.get((hist[-2], hist[-1]), ())):
                p[w] *= self.accept
        return p


class KeyphraseRetriever:
    """The public training texts that contain a list of keyphrases (case-insensitive word match).

    A text *holds* a phrase when it contains every word of the phrase (an approximation of the phrase match that
    needs one posting list per word). A text's score is Σ over the phrases it holds of idf(phrase) =
    ln(N/df(phrase)) (N texts, df = texts holding it): rare phrases count more, as in TF-IDF retrieval. ``top``
    returns the best ``k`` texts with a positive score, ties broken by index (deterministic; no randomness)."""

    def __init__(self, lm: NgramLM):
        lower: dict[int, str] = {}
        for i, t in enumerate(lm.vocab.id2tok):
            if lm.vocab.is_word_list[i]:
                lower[i] = t.lower().replace("’", "'")
        postings: dict[str, list[int]] = {}
        for d in range(lm.n_docs):
            for w in {lower[int(t)] for t in lm.doc(d) if int(t) in lower}:
                postings.setdefault(w, []).append(d)
        self.postings = {w: np.asarray(v, dtype=np.int64) for w, v in postings.items()}
        self.n_docs = lm.n_docs

    def holding(self, phrase: Sequence[str]) -> np.ndarray:
        """Indices of the texts holding every word of ``phrase`` (sorted)."""
        words = [w.lower().replace("’", "'") for w in phrase if _is_word(w)]
        if not words:
            return np.zeros(0, dtype=np.int64)
        out: np.ndarray | None = None
        for w in words:
            p = self.postings.get(w)
            if p is None:
                return np.zeros(0, dtype=np.int64)
            out = p if out is None else np.intersect1d(out, p, assume_unique=True)
        assert out is not None
        return out

    def top(self, phrases: Sequence[Sequence[str]], k: int) -> list[int]:
        """The indices of at most ``k`` training texts that hold at least one of ``phrases``, best first by the sum
        of log(N / texts holding the phrase) over the phrases they hold (ties by index)."""
        score = np.zeros(self.n_docs)
        for ph in phrases:
            h = self.holding(ph)
            if len(h):
                score[h] += math.log(self.n_docs / len(h))
        pos = np.flatnonzero(score > 0)
        if not len(pos):
            return []
        order = pos[np.lexsort((pos, -score[pos]))]
        return [int(i) for i in order[:k]]


class NgramLM:
    """A label-conditioned Kneser-Ney language model of public text, with a length model."""

    def __init__(self, texts: Sequence[str], labels: Mapping[str, Sequence[str]] | None = None, *,
                 order: int = 4, min_count: int = 1, label_weight: float = 0.5, label_order: int | None = None,
                 min_label_texts: int = 5, backoff_scale: float = 1.0):
        texts = list(texts)
        if not texts:
            raise DataError("the n-gram model needs at least one public text to train on")
        if not 0 <= label_weight <= 1:
            raise ConfigError(f"label_weight must be in [0, 1], got {label_weight}")
        self.order = order
        self.label_weight = label_weight
        toks = [tokenize(t) for t in texts]
        freq: Counter[str] = Counter()
        for ts in toks:
            freq.update(ts)
        kept = [t for t, c in freq.most_common() if c >= min_count]
        self.vocab = Vocabulary(kept)
        self.raw_freq = np.zeros(len(self.vocab), dtype=np.int64)
        for t, c in freq.items():
            i = self.vocab.tok2id.get(t)
            if i is not None:
                self.raw_freq[i] = c
        self.common = frozenset(range(3, min(len(self.vocab), 3 + 150)))  # vocabulary is frequency-ordered
        docs = [np.asarray(self.vocab.encode(ts), dtype=np.int64) for ts in toks]
        V = len(self.vocab)
        self.scale = backoff_scale
        self.global_model = KNModel(docs, order=order, vocab_size=V, scale=backoff_scale)
        # the training texts, kept (int32, concatenated) for keyphrase retrieval (`retriever`)
        self._doc_offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
        self._doc_ids = (np.concatenate(docs) if docs else np.zeros(0, dtype=np.int64)).astype(np.int32)
        self._retriever: KeyphraseRetriever | None = None
        wc = np.array([int(self.vocab.is_word[d].sum()) for d in docs], dtype=np.int64)
        self.lengths: dict[Any, np.ndarray] = {None: np.maximum(wc, 1)}
        self.label_models: dict[Any, KNModel] = {}
        #: the training texts (indices, as in :meth:`doc`) of each label model (privtext.learn.ngram re-weights them)
        self.label_docs: dict[Any, np.ndarray] = {}
        self.label_columns: tuple[str, ...] = tuple(labels or {})
        lorder = label_order or order
        if labels:
            cols = list(labels)
            for c in cols:
                if len(labels[c]) != len(texts):
                    raise DataError(f"label column {c!r} has {len(labels[c])} values for {len(texts)} texts")
            groups: dict[Any, list[int]] = {}
            for i in range(len(texts)):
                vals = tuple(str(labels[c][i]) for c in cols)
                for c, v in zip(cols, vals, strict=True):
                    groups.setdefault((c, v), []).append(i)
                if len(cols) > 1:
                    groups.setdefault(vals, []).append(i)
            for key, idx in groups.items():
                if len(idx) < min_label_texts:
                    continue
                self.label_models[key] = KNModel([docs[i] for i in idx], order=lorder, vocab_size=V,
                                                 scale=backoff_scale)
                self.lengths[key] = self.lengths[None][idx]
                self.label_docs[key] = np.asarray(idx, dtype=np.int64)

    def doc(self, i: int) -> np.ndarray:
        """The token ids of training text ``i``."""
        return self._doc_ids[self._doc_offsets[i]:self._doc_offsets[i + 1]].astype(np.int64)

    @property
    def n_docs(self) -> int:
        """The number of training texts."""
        return len(self._doc_offsets) - 1

    @property
    def retriever(self) -> KeyphraseRetriever:
        """The keyphrase index over the training texts (built on first use)."""
        if self._retriever is None:
            self._retriever = KeyphraseRetriever(self)
        return self._retriever

    def retrieval_model(self, phrases: Sequence[Sequence[str]], k: int, *, order: int) -> tuple[KNModel | None,
                                                                                              list[int]]:
        """A Kneser-Ney model of the ``k`` training texts that best match ``phrases`` (``None`` when no text
        holds any of them), and their indices."""
        idx = self.retriever.top(phrases, k)
        if not idx:
            return None, []
        return KNModel([self.doc(i) for i in idx], order=min(order, self.order), vocab_size=len(self.vocab),
                       scale=self.scale), idx

    # ------------------------------------------------------------------------------------------- mixture
    def label_keys(self, label: LabelInfo | None) -> list[Any]:
        """The label models that apply to ``label``: one per label column it names that has a model, then the joint
        model of all columns where there is one; empty for no label."""
        if not label:
            return []
        d = label.as_dict()
        keys: list[Any] = [(c, d[c]) for c in self.label_columns if c in d and (c, d[c]) in self.label_models]
        if len(self.label_columns) > 1 and all(c in d for c in self.label_columns):
            combo = tuple(d[c] for c in self.label_columns)
            if combo in self.label_models:
                keys.append(combo)
        return keys

    def mixture(self, label: LabelInfo | None = None, *, extra: Sequence[tuple[KNModel, float]] = (),
                penalised: set[tuple[int, ...]] | None = None, accept: float = 1.0) -> _Mixture:
        """The mixture to sample from: the global model (weight 1 − label_weight) and the label models of ``label``
        (label_weight shared equally), scaled down to make room for the ``extra`` (model, weight) pairs;
        ``penalised`` n-grams are accepted with probability ``accept``. Components of weight 0 are dropped."""
        keys = self.label_keys(label)
        models = [self.global_model]
        weights = [1.0 - (self.label_weight if keys else 0.0)]
        for k in keys:
            models.append(self.label_models[k])
            weights.append(self.label_weight / len(keys))
        if weights[0] <= 0 and len(models) == 1:
            weights[0] = 1.0
        if extra:
            scale = 1.0 - sum(w for _, w in extra)
            weights = [w * scale for w in weights]
            for m, w in extra:
                models.append(m)
                weights.append(w)
        keep = [i for i, w in enumerate(weights) if w > 0]
        return _Mixture([models[i] for i in keep], [weights[i] for i in keep], penalised=penalised, accept=accept)

    def sample_length(self, label: LabelInfo | None, rng_u: _Uniforms) -> int:
        """A length in words drawn from the public texts' lengths (of the most specific label model's texts when
        ``label`` has one)."""
        keys = self.label_keys(label)
        arr = self.lengths[keys[-1]] if keys else self.lengths[None]
        return int(arr[min(int(rng_u() * len(arr)), len(arr) - 1)])

    # -------------------------------------------------------------------------------------------- drawing
    def _next(self, mix: _Mixture, hist: list[int], u: _Uniforms, forbid: frozenset[int] | set[int]) -> int:
        """One word from the mixture given ``hist``, never a word in ``forbid`` (nor ``<s>``/``<unk>``), with
        penalised n-grams accepted with probability ``mix.accept``: rejection sampling, then (when the forbidden
        words hold most of the mass) an exact draw from the renormalised distribution."""
        pen = mix.penalises
        for _ in range(8):
            m = mix.pick(u())
            w = m.draw(m.chain(hist), u())
            if w in forbid or w == UNK or w == BOS:
                continue
            if pen and mix.penalised(hist, w) and u() >= mix.accept:
                continue
            return w
        p = mix.dist(hist)
        p[[UNK, BOS, *forbid]] = 0.0
        total = p.sum()
        if not total > 0:  # pragma: no cover - every allowed word has mass through the uniform base
            return 3
        c = np.cumsum(p)
        return min(int(np.searchsorted(c, u() * c[-1], side="right")), len(p) - 1)

    def _free(self, mix: _Mixture, hist: list[int], u: _Uniforms, min_words: int, max_words: int,
              out: list[int]) -> None:
        """Sample until ``min_words`` words, then to the next sentence end (or ``</s>``), at most ``max_words``."""
        is_word = self.vocab.is_word_list
        sent_end = self.vocab.sent_end
        para = self.vocab.para
        no_eos = frozenset({EOS, para})
        no_para = frozenset({para})
        words = 0
        while True:
            forbid = no_eos if words < min_words else no_para
            if hist[-1] == para or not out:
                forbid = no_eos
            w = self._next(mix, hist, u, forbid)
            if w == EOS:
                break
            out.append(w)
            hist.append(w)
            if is_word[w]:
                words += 1
            if words >= min_words and w in sent_end:
                break
            if words >= max_words:
                break

    def _span(self, mix: _Mixture, hist: list[int], u: _Uniforms, length: int, right: Sequence[int],
              candidates: int) -> list[int]:
        """``length`` tokens after ``hist``; ``candidates`` draws (from the mixture) are scored by the probability
        of the ``right`` tokens under the global model (the best-estimated judge of local fit) and one is drawn in
        proportion to it (sampling-importance-resampling)."""
        forbid = frozenset({EOS, self.vocab.para})
        scorer = self.global_model
        best: list[list[int]] = []
        scores: list[float] = []
        for _ in range(candidates if right else 1):
            h = list(hist)
            cand = []
            for _ in range(length):
                w = self._next(mix, h, u, forbid)
                cand.append(w)
                h.append(w)
            best.append(cand)
            if right:
                lp = 0.0
                for r in right:
                    lp += math.log(max(scorer.prob(scorer.chain(h), r), 1e-300))
                    h.append(r)
                scores.append(lp)
        if len(best) == 1:
            return best[0]
        s = np.asarray(scores)
        p = np.exp(s - s.max())
        c = np.cumsum(p / p.sum())
        return best[min(int(np.searchsorted(c, u(), side="right")), len(best) - 1)]

    def fill(self, items: Sequence[tuple[str, Any]], mix: _Mixture, u: _Uniforms, *, candidates: int,
             max_words: int) -> list[str]:
        """Fill a template: ``("fixed", [tokens])``, ``("gap", n_tokens)`` or ``("tail", min_words)`` items."""
        pad = self.order - 1
        hist = [BOS] * max(pad, 2)
        out: list[str] = []
        id2tok = self.vocab.id2tok
        for idx, (kind, val) in enumerate(items):
            if kind == "fixed":
                out.extend(val)
                hist.extend(self.vocab.encode(val))
            elif kind == "gap":
                if val <= 0:
                    continue
                nxt = items[idx + 1] if idx + 1 < len(items) else None
                right = self.vocab.encode(nxt[1][:pad]) if nxt and nxt[0] == "fixed" else ([EOS] if nxt is None
                                                                                            else [])
                span = self._span(mix, hist, u, int(val), right[:max(pad, 1)], candidates)
                out.extend(id2tok[w] for w in span)
                hist.extend(span)
            elif kind == "tail":
                ids: list[int] = []
                self._free(mix, hist, u, int(val), max(int(val) * 2 + 20, 20) if max_words <= 0 else
                           min(max_words, int(val) * 2 + 20), ids)
                out.extend(id2tok[w] for w in ids)
            else:  # pragma: no cover - internal
                raise ValueError(kind)
        return out

    def sample(self, u: _Uniforms, *, label: LabelInfo | None = None, length: int | None = None,
               max_words: int = 1000, mix: _Mixture | None = None, exact_length: bool = False) -> str:
        """One free text from the mixture (default: of ``label``), of ``length`` words (default: drawn by
        :meth:`sample_length`), at most ``max_words``; without ``exact_length`` it may run on to the end of a
        sentence, to min(max_words, 1.5·length + 20) words."""
        mix = mix or self.mixture(label)
        n = length if length is not None else self.sample_length(label, u)
        n = max(1, min(n, max_words))
        hist = [BOS] * max(self.order - 1, 2)
        ids: list[int] = []
        self._free(mix, hist, u, n, n if exact_length else min(max_words, int(n * 1.5) + 20), ids)
        return detokenize([self.vocab.id2tok[w] for w in ids])

    # ---------------------------------------------------------------------------------------- evaluation
    def log_prob(self, text: str, *, label: LabelInfo | None = None) -> tuple[float, int]:
        """Natural-log Kneser-Ney probability of ``text`` (with ``</s>``) and the number of predicted tokens."""
        mix = self.mixture(label)
        hist = [BOS] * max(self.order - 1, 2)
        total = 0.0
        ids = [*self.vocab.encode(tokenize(text)), EOS]
        for w in ids:
            total += math.log(max(mix.prob(hist, w, scale=1.0), 1e-300))
            hist.append(w)
        return total, len(ids)

    def perplexity(self, texts: Sequence[str], *, label: LabelInfo | None = None) -> float:
        """exp(−Σ log P / Σ predicted tokens) over ``texts`` (each text with ``</s>``; natural log; the label models
        of ``label`` mixed in): the model's perplexity on them."""
        lp, n = 0.0, 0
        for t in texts:
            a, b = self.log_prob(t, label=label)
            lp += a
            n += b
        return math.exp(-lp / max(n, 1))


def _bad_only_ngrams(lm: NgramLM, good: Sequence[str], bad: Sequence[str]) -> set[tuple[int, ...]]:
    def grams(texts: Sequence[str]) -> set[tuple[int, ...]]:
        out: set[tuple[int, ...]] = set()
        for t in texts:
            ids = [BOS, BOS, *lm.vocab.encode(tokenize(t))]
            for i in range(2, len(ids)):
                if ids[i] == UNK:
                    continue
                out.add((ids[i - 1], ids[i]))
                out.add((ids[i - 2], ids[i - 1], ids[i]))
        return out

    return grams(bad) - grams(good)


# --------------------------------------------------------------------------------------------- generator


#: the default ``contrastive_boost`` for a label without a public label model (measured on the support tickets
#: with unlabelled public text, docs/wasp.md)
UNLABELLED_BOOST = 0.9

#: public texts inside a length range needed to draw targets from their lengths (else uniform over the range)
MIN_IN_RANGE = 20


class NgramOptions(BackendOptions):
    """Options of the ``ngram`` generator: a label-conditioned Kneser-Ney model trained on the run's public text
    (see each field's description)."""

    order: int = Field(default=4, ge=1, le=8, description="n-gram order")
    min_count: int = Field(default=1, ge=1, description="words seen fewer times become <unk> (never emitted)")
    label_weight: float = Field(default=0.5, ge=0, le=1, description="weight of the label models in the mixture")
    label_order: int | None = Field(default=None, ge=1, le=8, description="order of the per-label models")
    min_label_texts: int = Field(default=5, ge=1, description="labels with fewer public texts use the global model")
    blank_candidates: int = Field(default=4, ge=1, le=64, description="candidate fills scored per blank")
    length_noise: float | None = Field(default=None, ge=0, le=2, description="relative noise on blank lengths")
    paraphrase_keep: float = Field(default=0.5, gt=0, le=1, description="share of content words kept as anchors")
    contrastive_boost: float | None = Field(
        default=None, ge=0, lt=1, description="mixture weight of a model of the good examples shown. Default: 0 "
        "when the label has a public label model (WASP asks for samples diverse from the examples; on Banking77 0 "
        "measured 0.938 ± 0.002 vs 0.883 ± 0.022 at 0.5, docs/wasp.md), 0.9 when it has none (public text without "
        "labels: the examples, chosen by that label's votes, are then the only thing that tells the labels apart; "
        "docs/wasp.md)")
    contrastive_penalty: float = Field(default=2.0, ge=0, description="log-penalty on bad-only n-grams")
    max_words: int = Field(default=1000, ge=1, description="hard cap on generated words")
    seeded_retrieval: int = Field(
        default=20, ge=0, description="seeded (DP-KPS): a Kneser-Ney model of this many public training texts that "
        "hold the prompt's keyphrases joins the mixture, so the text around the terms is on their topic (0: off)")
    retrieval_weight: float = Field(default=0.7, ge=0, lt=1, description="mixture weight of the retrieved texts' "
                                    "model in seeded")
    retrieval_order: int = Field(default=3, ge=1, le=8, description="order of the retrieved texts' model")
    backoff_scale: float = Field(default=0.5, gt=0, le=1, description="1 samples Kneser-Ney exactly; lower values "
                                 "shrink every back-off weight (more fluent text, closer to the public corpus)")
    train_texts: int | None = Field(default=None, ge=1, description="train on a random subset of this many public "
                                    "texts (seeded public randomness): a weaker generator, e.g. for WASP's mixes")


class NgramGenerator(BaseGenerator):
    """The offline default generator (see the module docstring)."""

    backend = "ngram"
    Options = NgramOptions

    def __init__(self, *, public: Sequence[str], labels: Mapping[str, Sequence[str]] | None = None,
                 options: NgramOptions | None = None, guard: Any = None, **kw: Any):
        super().__init__(**kw)
        self.options = opts = options or NgramOptions()
        public = list(public)
        if not public:
            raise ConfigError("the ngram generator is trained on public text only and needs a non-empty public "
                              "corpus (set data.public)")
        if guard is not None:
            guard.assert_public(public, what="ngram training corpus")
        #: the run's guard checked the whole training text (the public corpus) holds no private record, so every
        #: text this model writes is public by provenance, however long (guard.py, source 3)
        self.trained_on_checked_public = guard is not None
        self.lm = NgramLM(public, labels, order=opts.order, min_count=opts.min_count,
                          label_weight=opts.label_weight, label_order=opts.label_order,
                          min_label_texts=opts.min_label_texts, backoff_scale=opts.backoff_scale)
        self.noise = opts.length_noise if opts.length_noise is not None else self.family.blank_length_noise

    @property
    def label_conditioned(self) -> bool:
        """Whether ``random`` can follow a label: only with per-label models (labelled public text)."""
        return bool(self.lm.label_models)

    @classmethod
    def from_options(cls, options: NgramOptions, ctx: GeneratorContext, *, family: Any,
                     name: str | None) -> NgramGenerator:
        """The generator trained on the run's public corpus (never private text; a
        :class:`~privtext.errors.ConfigError` without one), on a seeded subset of ``train_texts`` texts when set,
        with the public label columns the run uses."""
        public, cols = ctx.training_corpus("ngram")
        if options.train_texts is not None and options.train_texts < len(public):
            from ..rng import derive

            idx = np.sort(derive(ctx.seed, "ngram-train-subset", options.train_texts, name or "")
                          .choice(len(public), options.train_texts, replace=False))
            public = public.subset(idx)
        labels = {c: public.labels[c] for c in cols} if cols else None
        return cls(public=public.texts, labels=labels, options=options, guard=ctx.guard, family=family,
                   prompt_log=ctx.prompt_log, name=name)

    # --------------------------------------------------------------------------------------------- ops
    def wants_prior(self, prior: Any) -> bool:
        """A family's length prior is a fallback for off-domain public text: declined when at least half of the
        public texts already fall inside its range (their own lengths are the better target)."""
        arr = self.lm.lengths[None]
        lo, hi = min(prior.low), max(prior.high)
        return bool(np.mean((arr >= lo) & (arr <= hi)) < 0.5)

    @property
    def cap(self) -> int:
        """The most words any output may have: ``max_words``, or the length target's cap when lower."""
        return min(self.options.max_words, self.length.max_words) if self.length is not None else \
            self.options.max_words

    def _target(self, label: LabelInfo | None, u: _Uniforms) -> int:
        """A target length. Without a length target: a public text's word count (per label when known). With a
        range (configured, or the family's prior): a public text's word count among those inside the range when
        at least ``MIN_IN_RANGE`` public texts fall inside it (in-domain public text keeps its own length
        profile), else uniform over the range. With a histogram (a DP release): drawn from it."""
        if self.length is None:
            return self.lm.sample_length(label, u)
        if len(self.length.low) == 1:
            keys = self.lm.label_keys(label)
            arr = self.lm.lengths[keys[-1]] if keys else self.lm.lengths[None]
            inside = arr[(arr >= self.length.low[0]) & (arr <= self.length.high[0])]
            if len(inside) >= MIN_IN_RANGE:
                return int(inside[min(int(u() * len(inside)), len(inside) - 1)])
        return self.length.sample(u(), u())

    def _ceiling(self, target: int) -> int:
        """Where a free draw stops when no sentence end came: with a length target, a third past it (at least 5
        words; long public sentences would otherwise carry a short target far beyond it), else the cap."""
        if self.length is None:
            return self.cap
        return min(self.cap, target + max(5, target // 3))

    def _meta(self, label: LabelInfo | None, **kw: Any) -> dict[str, Any]:
        return {"label_models": [list(k) if isinstance(k, tuple) else k for k in self.lm.label_keys(label)], **kw}

    def _random(self, label: LabelInfo | None, n: int, rng: np.random.Generator) -> list[str]:
        u = _Uniforms(rng)
        mix = self.lm.mixture(label)
        prompt = self.family.random_prompt(label, None)
        meta = {k: v for k, v in prompt.meta.items() if k != "persona"}  # the n-gram model has no persona
        out = []
        for _ in range(n):
            length = self._target(label, u)
            self._log("random", prompt.user, {**meta, "ngram": self._meta(label, target_words=length)})
            out.append(self.lm.sample(u, label=label, length=length, max_words=self._ceiling(length), mix=mix))
        self.stats.calls += 1
        self.stats.prompts += n
        self.stats.completion_tokens += sum(len(tokenize(t)) for t in out)
        return out

    def _variation(self, texts: list[str], label: LabelInfo | None, spec: VariationSpec,
                   rng: np.random.Generator) -> list[str]:
        u = _Uniforms(rng)
        mix = self.lm.mixture(label)
        out = []
        for text in texts:
            if spec.kind == "blank":
                out.append(self._blank_one(text, label, spec.mask_prob, mix, u))
            else:
                out.append(self._paraphrase_one(text, label, spec, mix, u))
        self.stats.calls += 1
        self.stats.prompts += len(texts)
        self.stats.completion_tokens += sum(len(tokenize(t)) for t in out)
        return out

    def _blank_items(self, toks: list[str], mask_prob: float, u: _Uniforms) -> tuple[list[tuple[str, Any]], str]:
        items: list[tuple[str, Any]] = []
        shown: list[str] = []
        run = 0
        for t in toks:
            if t != PARA and u() < mask_prob:
                run += 1
                continue
            if run:
                items.append(("gap", run))
                shown.append("_")
                run = 0
            if items and items[-1][0] == "fixed":
                items[-1][1].append(t)
            else:
                items.append(("fixed", [t]))
            shown.append(t)
        if run:
            items.append(("gap", run))
            shown.append("_")
        # target lengths: original ± noise
        out = []
        for kind, val in items:
            if kind == "gap":
                noisy = val * (1.0 + self.noise * _normal(u))
                val = max(1, round(noisy))
            out.append((kind, val))
        return out, detokenize(shown)

    def _blank_one(self, text: str, label: LabelInfo | None, mask_prob: float, mix: _Mixture,
                   u: _Uniforms) -> str:
        toks = tokenize(text)
        if not toks:
            prompt = self.family.blank_prompt("_", 0, label)
            self._log("variation", prompt.user, {**prompt.meta, "ngram": self._meta(label)})
            n = self._target(label, u)
            return self.lm.sample(u, label=label, length=n, max_words=self._ceiling(n), mix=mix)
        items, masked = self._blank_items(toks, mask_prob, u)
        n_words = sum(1 for t in toks if _is_word(t))
        prompt = self.family.blank_prompt(masked, min(n_words, self.cap), label)
        self._log("variation", prompt.user, {**prompt.meta, "ngram": self._meta(label, kind="blank")})
        filled = self.lm.fill(items, mix, u, candidates=self.options.blank_candidates, max_words=0)
        return cap_words(detokenize(filled), self.cap)

    def _paraphrase_one(self, text: str, label: LabelInfo | None, spec: VariationSpec, mix: _Mixture,
                        u: _Uniforms) -> str:
        toks = tokenize(text)
        anchors = []
        for t in toks:
            i = self.lm.vocab.tok2id.get(t, UNK)
            if _is_word(t) and i not in self.lm.common and u() < self.options.paraphrase_keep:
                anchors.append(t)
        n_words = max(1, sum(1 for t in toks if _is_word(t)))
        prompt = self.family.paraphrase_prompt(text, label, spec.style, None)
        self._log("variation", prompt.user, {**prompt.meta, "ngram": self._meta(label, kind="paraphrase",
                                                                                anchors=anchors)})
        target = min(max(1, round(n_words * (1.0 + self.noise * _normal(u)))), self.cap)
        items = self._anchored_items([[a] for a in anchors], target, u)
        return cap_words(detokenize(self.lm.fill(items, mix, u, candidates=self.options.blank_candidates,
                                                 max_words=self.cap)), self.cap)

    def _anchored_items(self, phrases: Sequence[Sequence[str]], target_words: int,
                        u: _Uniforms) -> list[tuple[str, Any]]:
        """``gap kp1 gap kp2 ... kpm tail``: gaps share what the phrases leave of the target length."""
        fixed = sum(len(p) for p in phrases)
        m = len(phrases)
        free = max(target_words - fixed, m + 1)
        # a uniform split of `free` over m + 1 slots (stick breaking with sorted uniforms)
        cuts = sorted(int(u() * (free + 1)) for _ in range(m))
        bounds = [0, *cuts, free]
        gaps = [bounds[i + 1] - bounds[i] for i in range(m + 1)]
        items: list[tuple[str, Any]] = []
        for g, p in zip(gaps[:-1], phrases, strict=True):
            items.append(("gap", g))
            items.append(("fixed", list(p)))
        items.append(("tail", gaps[-1]))
        return items

    def _seeded(self, keyphrases: list[list[str]], doc_type: str, rng: np.random.Generator,
                examples: list[list[str]]) -> list[str]:
        u = _Uniforms(rng)
        base = self.lm.mixture(None)  # DP-KPS: no class information
        opts = self.options
        out = []
        for kps, ex in zip(keyphrases, examples, strict=True):
            prompt = self.family.seeded_prompt(kps, doc_type, examples=ex)
            phrases = [tokenize(k) for k in kps]
            phrases = [p for p in phrases if p]
            mix, meta = base, dict(prompt.meta)
            if opts.seeded_retrieval and opts.retrieval_weight > 0 and phrases:
                # retrieval-boosted: the public training texts holding the terms (the prompt is the only query)
                model, idx = self.lm.retrieval_model(phrases, opts.seeded_retrieval, order=opts.retrieval_order)
                if model is not None:
                    mix = self.lm.mixture(None, extra=[(model, opts.retrieval_weight)])
                meta["ngram"] = {"retrieved_public_texts": len(idx)}
            self._log("seeded", prompt.user, meta)
            # few-shot examples: the n-gram model cannot read them; their mean length is the target length
            target = (max(1, round(float(np.mean([len(tokenize(t)) for t in ex])))) if ex
                      else self._target(None, u))
            items = self._anchored_items(phrases, min(target, self.cap), u)
            out.append(cap_words(detokenize(self.lm.fill(items, mix, u, candidates=self.options.blank_candidates,
                                                         max_words=self.cap)), self.cap))
        self.stats.calls += 1
        self.stats.prompts += len(keyphrases)
        self.stats.completion_tokens += sum(len(tokenize(t)) for t in out)
        return out

    def contrastive_boost(self, label: LabelInfo | None) -> float:
        """The weight of the good examples' model in ``contrastive``: the configured one, else 0 when ``label``
        has a public label model and ``UNLABELLED_BOOST`` when it has none — without one, the examples are the
        only label signal the n-gram model can follow (it cannot read the prompt's instruction)."""
        if self.options.contrastive_boost is not None:
            return self.options.contrastive_boost
        return 0.0 if self.lm.label_keys(label) else UNLABELLED_BOOST

    def _contrastive(self, good: list[str], bad: list[str], label: LabelInfo | None, n: int,
                     rng: np.random.Generator) -> list[str]:
        from .prompts import _subsample

        u = _Uniforms(rng)
        lm = self.lm
        frac = self.family.sample_fraction
        boost = self.contrastive_boost(label)
        out = []
        for _ in range(n):
            # each prompt shows a random `sample_fraction` of the better and of the worse examples (WASP §4.6),
            # as the prompted backends do; the model of this output is built from exactly what its prompt shows
            g = _subsample(good, frac, rng) if frac < 1 else good
            b = _subsample(bad, frac, rng) if frac < 1 else bad
            good_docs = [lm.vocab.encode(tokenize(t)) for t in g]
            extra = []
            if boost > 0:
                gm = KNModel(good_docs, order=min(lm.order, 3), vocab_size=len(lm.vocab), scale=lm.scale)
                extra.append((gm, boost))
            pen = _bad_only_ngrams(lm, g, b) if b and self.options.contrastive_penalty > 0 else None
            mix = lm.mixture(label, extra=extra, penalised=pen, accept=math.exp(-self.options.contrastive_penalty))
            lengths = [max(1, sum(1 for w in d if lm.vocab.is_word_list[w]) or len(d)) for d in good_docs]
            prompt = self.family.contrastive_prompt(g, b, label, None)
            self._log("contrastive", prompt.user, {**prompt.meta, "ngram": self._meta(label)})
            base = lengths[min(int(u() * len(lengths)), len(lengths) - 1)]
            target = min(max(1, round(base * (1.0 + 0.1 * _normal(u)))), self.cap)
            out.append(lm.sample(u, label=label, length=target, max_words=self._ceiling(target), mix=mix))
        self.stats.calls += 1
        self.stats.prompts += n
        self.stats.completion_tokens += sum(len(tokenize(t)) for t in out)
        return out

    def perplexity(self, texts: Sequence[str], *, label: LabelInfo | None = None) -> float:
        """The model's perplexity on ``texts`` (see :meth:`NgramLM.perplexity`)."""
        return self.lm.perplexity(texts, label=label)


def _normal(u: _Uniforms) -> float:
    """A standard normal from two uniforms (Box-Muller)."""
    u1 = max(u(), 1e-12)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2 * math.pi * u())
