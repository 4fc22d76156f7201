"""``backend: lm`` — a small GPT-2 trained here on the public corpus, conditioned by control codes.

Every operation becomes control codes (:mod:`.codes`) and one sampling call (:mod:`.sample`):

==================  ===============================================================================================
``random``          *free*: the label's codes → a new text
``variation``       ``blank``: Aug-PE's masking (:func:`~privtext.generate.prompts.mask_words`: each word masked with
                    probability ``mask_prob``, runs merged); the masked text is the *infill* condition and the
                    model writes one fill per blank. ``paraphrase``: the text's ``paraphrase_keyphrases`` highest-idf
                    keyphrases, each kept with probability ``paraphrase_keep``, become the kept pieces of an
                    *infill* template (blank, phrase, blank, ..., blank) and a new text is written around them
                    (*free* with the label when none is kept)
``seeded``          DP-KPS: *infill* template blank, k1, blank, k2, ..., blank — every keyphrase appears, in order;
                    no label codes (DP-KPS's prompts carry no class); few-shot examples are logged, not read
``contrastive``     WASP: keyphrases of the good examples shown that occur in none of the bad ones shown (up to
                    ``contrastive_keyphrases``, drawn at random, in random order) as the kept pieces of an *infill*
                    template with the label's codes (*free* with the label when there are none)
==================  ===============================================================================================

Input texts (variation) longer than the training budget of the infill format are cut to their leading words.

The prompt log: each record's ``prompt`` is the prompt family's prompt for the operation (what a prompted LLM
would have been sent, as the n-gram backend logs it) followed by ``[lm input]`` and the exact token sequence the
model is conditioned on, control codes written out — so the end-of-run audit (:class:`~privtext.guard.PrivateGuard`)
scans everything the model is given. ``meta.lm`` lists the label codes used and any label column left
unconditioned (a value the public corpus has no code for).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from ...backends import BackendOptions
from ...data.labels import LabelInfo
from ..base import BaseGenerator, GeneratorContext, VariationSpec
from ..prompts import BLANK as MASK
from ..prompts import mask_words
from .build import LMSettings, PublicLM, build_public_lm
from .codes import FormatMix
from .sample import SamplingSettings
from .tokenizer import normalize


class LMOptions(BackendOptions):
    # ---- the model and its training (all part of the cache key)
    size: Literal["auto", "tiny", "small", "base"] = Field(
        default="auto", description="tiny (~0.5 M parameters), small (~4.3 M, the CPU default), base (~30 M, the "
        "GPU default); auto: base where CUDA is available, else small")
    n_layer: int | None = Field(default=None, ge=1, le=48)
    n_embd: int | None = Field(default=None, ge=8, le=4096)
    n_head: int | None = Field(default=None, ge=1, le=64)
    vocab_size: int | None = Field(default=None, ge=300, le=65536, description="BPE vocabulary size")
    max_length: int = Field(default=320, ge=32, le=4096, description="tokens per training sequence (= positions)")
    dropout: float = Field(default=0.0, ge=0, lt=1)
    # the training budget's defaults live in LMSettings (one place; the cache key is built from it)
    epochs: float = Field(default=LMSettings.epochs, gt=0, description="most passes over the public corpus "
                          "(the validation split may stop it sooner: patience)")
    train_tokens: int | None = Field(default=LMSettings.train_tokens, ge=1, description="cap on the tokens trained "
                                     "on (None: no cap): epochs = min(epochs, train_tokens / tokens per epoch). "
                                     "Binds on long texts (4,000 Yelp reviews: 9 passes, 16-18 min on 2 CPU "
                                     "cores); 4,000 short messages stop early after 12 epochs (404 s wall, "
                                     "325 CPU-s; docs/dpft.md)")
    patience: int = Field(default=LMSettings.patience, ge=0, description="stop after this many validation "
                          "evaluations in a row without an improvement of min_improvement (0: run the whole "
                          "budget); the best evaluation's weights are kept")
    eval_every: int | None = Field(default=None, ge=1, description="steps between validation evaluations "
                                   "(default: an epoch, or a tenth of the budget when sooner)")
    min_improvement: float = Field(default=LMSettings.min_improvement, ge=0, description="validation loss "
                                   "drop (nats/token) that counts as an improvement")
    checkpoint_seconds: float = Field(default=LMSettings.checkpoint_seconds, gt=0, description="a resumable "
                                      "checkpoint of the training at most this often (an interrupted training "
                                      "continues from it; Ctrl-C writes one too)")
    batch_size: int = Field(default=32, ge=1)
    lr: float | None = Field(default=None, gt=0, le=1, description="AdamW peak learning rate; default by size: "
                             "2e-3 for tiny and small, 6e-4 for base (2e-3 diverged on base)")
    weight_decay: float = Field(default=0.01, ge=0)
    warmup: int = Field(default=100, ge=0)
    precision: Literal["auto", "fp32", "bf16"] = Field(
        default="auto", description="bf16 autocast where the device has native bf16 (auto), else fp32")
    train_seed: int = Field(default=0, ge=0, description="seed of the tokenizer/model training (not the run's)")
    validation: int = Field(default=100, ge=0, description="public texts held out to measure the training loss")
    free_share: float = Field(default=0.4, ge=0, le=1, description="training sequences in the free format")
    blank_share: float = Field(default=0.35, ge=0, le=1, description="... in the infill format, random masks")
    anchored_share: float = Field(default=0.25, ge=0, le=1, description="... in the infill format, keyphrases kept")
    label_dropout: float = Field(default=0.1, ge=0, le=1, description="chance a label code is left out in training")
    max_keyphrases: int = Field(default=8, ge=1, le=64, description="most keyphrases kept per anchored training sequence")
    keyphrase_min_count: int = Field(default=3, ge=1, description="public texts a keyphrase term must occur in")
    label_min_texts: int = Field(default=5, ge=1, description="public texts a label value needs to get a code")
    cache: bool = Field(default=True, description="reuse / store the trained model in the user cache")
    cache_dir: str | None = Field(default=None, description="default $PRIVTEXT_CACHE_HOME/lm, else "
                                  "$XDG_CACHE_HOME/privtext/lm, else ~/.cache/privtext/lm")
    device: str = Field(default="auto", description="auto, cpu, cuda, cuda:1")
    torch_threads: int | None = Field(default=None, ge=1, description="CPU threads for training (default: the "
                                      "cores the load average leaves idle, at most torch's count; restored "
                                      "afterwards)")
    sample_threads: int | None = Field(default=1, ge=1, description="CPU threads for sampling (None: torch's). One "
                                       "by default: a token step's matmuls are too small to split, and on a shared "
                                       "2-core machine two threads measured 10x slower")
    # ---- sampling
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    top_k: int = Field(default=0, ge=0, description="0 disables top-k")
    max_new_tokens: int = Field(default=256, ge=1)
    min_new_tokens: int = Field(default=4, ge=0, description="free format: no end before this many tokens")
    sample_batch_size: int = Field(default=64, ge=1)
    empty_retries: int = Field(default=2, ge=0, description="re-sample outputs that decode to empty text")
    paraphrase_keyphrases: int = Field(default=8, ge=1, le=64)
    paraphrase_keep: float = Field(default=0.5, ge=0, le=1)
    contrastive_keyphrases: int = Field(default=4, ge=0, le=64)

    @model_validator(mode="after")
    def _shares(self) -> LMOptions:
        if self.free_share + self.blank_share + self.anchored_share <= 0:
            raise ValueError("free_share, blank_share and anchored_share must not all be 0")
        return self

    def settings(self) -> LMSettings:
        return LMSettings(
            size=self.size, n_layer=self.n_layer, n_embd=self.n_embd, n_head=self.n_head,
            vocab_size=self.vocab_size, max_length=self.max_length, dropout=self.dropout, epochs=self.epochs,
            train_tokens=self.train_tokens, patience=self.patience, eval_every=self.eval_every,
            min_improvement=self.min_improvement, batch_size=self.batch_size, lr=self.lr,
            weight_decay=self.weight_decay, warmup=self.warmup, precision=self.precision, seed=self.train_seed,
            validation=self.validation, keyphrase_min_count=self.keyphrase_min_count,
            label_min_texts=self.label_min_texts,
            mix=FormatMix(free=self.free_share, blank=self.blank_share, anchored=self.anchored_share,
                          label_dropout=self.label_dropout, max_keyphrases=self.max_keyphrases),
            threads=self.torch_threads, checkpoint_seconds=self.checkpoint_seconds)

    def sampling(self) -> SamplingSettings:
        return SamplingSettings(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                                max_new_tokens=self.max_new_tokens, min_new_tokens=self.min_new_tokens,
                                batch_size=self.sample_batch_size)


class _Job:
    """One output: its conditioning ids, blank count (0: free format) and kept pieces (infill)."""

    __slots__ = ("n_blanks", "pieces", "prompt")

    def __init__(self, prompt: list[int], n_blanks: int = 0, pieces: list[list[int] | None] | None = None):
        self.prompt, self.n_blanks, self.pieces = prompt, n_blanks, pieces


class LMGenerator(BaseGenerator):
    """The small public-corpus language model as a generator (see the module docstring)."""

    backend = "lm"
    Options = LMOptions

    def __init__(self, *, public: Sequence[str], labels: Mapping[str, Sequence[str]] | None = None,
                 options: LMOptions | None = None, guard: Any = None, lm: PublicLM | None = None, **kw: Any):
        super().__init__(**kw)
        self.options = o = options or LMOptions()
        self.sampling = o.sampling()
        with self._threads():
            self.lm = lm if lm is not None else build_public_lm(
                public, labels, settings=o.settings(), cache=o.cache, cache_dir=o.cache_dir, device=o.device,
                guard=guard)
        #: the run's guard checked the training text holds no private record (build_public_lm): every text this
        #: model writes is public by provenance, however long (guard.py, source 3)
        self.trained_on_checked_public = guard is not None and lm is None
        enc = self.lm.encoder
        self.enc = enc
        on_cpu = next(self.lm.model.parameters()).device.type == "cpu"
        self._sample_threads = (o.sample_threads or o.torch_threads) if on_cpu else None
        # the infill budget of training (codes.ExampleMaker): text tokens of the source of an infill sequence
        self._infill_budget = int(0.75 * (self.lm.n_positions - len(enc.codebook.columns) - 4))

    @property
    def label_conditioned(self) -> bool:
        """Whether ``random`` can follow a label: the public corpus had label values to make codes of."""
        return bool(self.enc.codebook.columns)

    @property
    def info(self) -> dict[str, Any]:
        return self.lm.info

    @classmethod
    def from_options(cls, options: LMOptions, ctx: GeneratorContext, *, family: Any,
                     name: str | None) -> LMGenerator:
        public, cols = ctx.training_corpus("lm")
        labels = {c: public.labels[c] for c in cols} if cols else None
        return cls(public=public.texts, labels=labels, options=options, guard=ctx.guard, family=family,
                   prompt_log=ctx.prompt_log, name=name)

    # ------------------------------------------------------------------------------------------- plumbing
    def _threads(self, n: int | None = None) -> contextlib.AbstractContextManager[None]:
        """Run with ``n`` torch CPU threads (default: ``torch_threads``), restoring the count afterwards."""
        from ...backends.hardware import torch_threads

        return torch_threads(n or self.options.torch_threads)

    def _labels(self, label: LabelInfo | None) -> tuple[list[int], dict[str, Any]]:
        ids, missing = self.enc.label_ids(label)
        meta: dict[str, Any] = {"label_codes": len(ids)}
        if missing:
            meta["unconditioned_columns"] = missing
        return ids, meta

    def _log_job(self, operation: str, prompt: Any, job: _Job, lm_meta: Mapping[str, Any]) -> None:
        text = f"{prompt.user}\n\n[lm input] {self.enc.render(job.prompt)}"
        self._log(operation, text, {**prompt.meta, "lm": dict(lm_meta)})

    def _infill_job(self, labels: list[int], pieces: list[list[int] | None]) -> _Job:
        return _Job(self.enc.infill(labels, pieces, None), sum(p is None for p in pieces), pieces)

    def _fits(self, job: _Job) -> bool:
        """Whether the prompt leaves room to write (an eighth of the positions, at least 8)."""
        return len(job.prompt) <= self.lm.n_positions - max(8, self.lm.n_positions // 8)

    def _anchored(self, labels: list[int], phrases: Sequence[str]) -> tuple[_Job, list[str]]:
        """The keyphrase template, and the trailing phrases dropped because the prompt would not fit."""
        phrases = list(phrases)
        dropped: list[str] = []
        job = self._infill_job(labels, self.enc.anchored_pieces(phrases))
        while phrases and not self._fits(job):
            dropped.insert(0, phrases.pop())
            job = self._infill_job(labels, self.enc.anchored_pieces(phrases))
        return job, dropped

    def _run(self, jobs: list[_Job], rng: np.random.Generator) -> list[str]:
        """Sample every job, assemble the texts; outputs that decode empty are drawn again (``empty_retries``)."""
        out = [""] * len(jobs)
        todo = [i for i, j in enumerate(jobs) if j.pieces is None or j.n_blanks > 0]
        for i, j in enumerate(jobs):
            if j.pieces is not None and j.n_blanks == 0:  # nothing masked: the text itself
                out[i] = self._assemble(j, [])
        stats: dict[str, int] = {}
        for attempt in range(self.options.empty_retries + 1):
            if not todo:
                break
            if attempt:
                self.stats.retries += len(todo)
            with self._threads(self._sample_threads):
                new = self.lm.sample([jobs[i].prompt for i in todo], rng,
                                     n_blanks=[jobs[i].n_blanks for i in todo], settings=self.sampling,
                                     stats=stats)
            for i, ids in zip(todo, new, strict=True):
                out[i] = self._assemble(jobs[i], ids)
            todo = [i for i in todo if not out[i]]
        self.stats.calls += stats.get("calls", 0)
        self.stats.prompt_tokens += stats.get("prompt_tokens", 0)
        self.stats.completion_tokens += stats.get("completion_tokens", 0)
        self.stats.prompts += len(jobs)
        return out

    def _assemble(self, job: _Job, new: list[int]) -> str:
        if job.pieces is None:
            return self.enc.decode(new)
        answers = self.enc.split_answers(new)
        ids: list[int] = []
        k = 0
        for p in job.pieces:
            if p is None:
                if k < len(answers):
                    ids.extend(answers[k])
                k += 1
            else:
                ids.extend(p)
        return self.enc.decode(ids)

    # ---------------------------------------------------------------------------------------- operations
    def _random(self, label: LabelInfo | None, n: int, rng: np.random.Generator) -> list[str]:
        labels, meta = self._labels(label)
        prompt = self.family.random_prompt(label, None)
        prompt = type(prompt)(user=prompt.user, system=prompt.system,
                              meta={k: v for k, v in prompt.meta.items() if k != "persona"})  # no persona here
        jobs = [_Job(self.enc.free(labels, None)) for _ in range(n)]
        for j in jobs:
            self._log_job("random", prompt, j, {**meta, "format": "free"})
        return self._run(jobs, rng)

    def _pieces(self, masked: str) -> list[list[int] | None]:
        """Infill pieces of an Aug-PE masked text (``_`` is a blank)."""
        pieces: list[list[int] | None] = []
        for w, ids in zip(masked.split(), self.enc.word_ids(masked.split()), strict=True):
            if w == MASK:
                pieces.append(None)
            elif pieces and pieces[-1] is not None:
                pieces[-1].extend(ids)
            else:
                pieces.append(list(ids))
        return pieces

    def _truncate(self, text: str) -> str:
        words = normalize(text).split()
        ids = self.enc.word_ids(words)
        total, keep = 0, 0
        for w in ids:
            if total + len(w) > self._infill_budget:
                break
            total += len(w)
            keep += 1
        return " ".join(words[:keep]) if keep < len(words) else " ".join(words)

    def _variation(self, texts: list[str], label: LabelInfo | None, spec: VariationSpec,
                   rng: np.random.Generator) -> list[str]:
        labels, meta = self._labels(label)
        jobs = []
        for text in texts:
            src = self._truncate(text)
            if spec.kind == "blank":
                masked, n_words = mask_words(src, spec.mask_prob, rng)
                job = self._infill_job(labels, self._pieces(masked))
                while not self._fits(job):  # a text of unusually many tokens per word: cut it further
                    kept = masked.split()
                    masked = " ".join(kept[:max(1, int(0.8 * len(kept)))])
                    job = self._infill_job(labels, self._pieces(masked))
                    src = ""  # marks the text as truncated
                prompt = self.family.blank_prompt(masked, n_words, label)
                self._log_job("variation", prompt, job, {**meta, "format": "infill", "blanks": job.n_blanks,
                                                         "truncated": src != normalize(text)})
            else:
                found = self.lm.extractor.extract(src, self.options.paraphrase_keyphrases)
                keep = rng.random(len(found)) < self.options.paraphrase_keep
                anchors = [k for k, kept in zip(found, keep, strict=True) if kept]
                job, dropped = self._anchored(labels, anchors) if anchors else (_Job(self.enc.free(labels, None)), [])
                prompt = self.family.paraphrase_prompt(text, label, spec.style, None)
                self._log_job("variation", prompt, job, {**meta, "format": "infill" if anchors else "free",
                                                         "anchors": anchors[:len(anchors) - len(dropped)]})
            jobs.append(job)
        return self._run(jobs, rng)

    def _seeded(self, keyphrases: list[list[str]], doc_type: str, rng: np.random.Generator,
                examples: list[list[str]]) -> list[str]:
        jobs = []
        for kps, ex in zip(keyphrases, examples, strict=True):
            phrases = [normalize(k) for k in kps if normalize(k)]
            job, dropped = self._anchored([], phrases)
            prompt = self.family.seeded_prompt(kps, doc_type, examples=ex)
            lm_meta: dict[str, Any] = {"format": "infill", "blanks": job.n_blanks}
            if dropped:
                lm_meta["dropped_keyphrases"] = dropped  # the prompt would not fit the model's positions
            self._log_job("seeded", prompt, job, lm_meta)
            jobs.append(job)
        return self._run(jobs, rng)

    def _contrastive(self, good: list[str], bad: list[str], label: LabelInfo | None, n: int,
                     rng: np.random.Generator) -> list[str]:
        from ..prompts import _subsample

        labels, meta = self._labels(label)
        frac = self.family.sample_fraction
        ex = self.lm.extractor
        jobs = []
        for _ in range(n):
            # each output's prompt shows a random `sample_fraction` of the good and the bad examples (WASP §4.6)
            g = _subsample(good, frac, rng) if frac < 1 else good
            b = _subsample(bad, frac, rng) if frac < 1 else bad
            bad_terms = frozenset(ex.vocabulary.terms[o.term] for t in b for o in ex.occurrences(t.split()))
            pool = list(dict.fromkeys(k for t in g for k in ex.extract(t, 8, exclude=bad_terms)))
            k = min(self.options.contrastive_keyphrases, len(pool))
            chosen = [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)] if k else []
            job = self._anchored(labels, chosen)[0] if chosen else _Job(self.enc.free(labels, None))
            prompt = self.family.contrastive_prompt(g, b, label, None)
            self._log_job("contrastive", prompt, job, {**meta, "format": "infill" if chosen else "free",
                                                       "keyphrases": chosen})
            jobs.append(job)
        return self._run(jobs, rng)

    def perplexity(self, texts: Sequence[str], *, label: LabelInfo | None = None) -> float:
        """exp(mean next-token loss) of ``texts`` (free format, with ``label``'s codes), per BPE token."""
        import math

        labels = None if label is None else [label.as_dict()] * len(texts)
        with self._threads(self._sample_threads):
            return math.exp(self.lm.loss(list(texts), labels))

    def close(self) -> None:
        super().close()


__all__ = ["LMGenerator", "LMOptions"]
