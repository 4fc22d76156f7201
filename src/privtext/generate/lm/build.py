"""Tokenizer + model from a public corpus, trained or loaded from the cache: :func:`build_public_lm`.

Steps on a cache miss (all seeded by ``settings.seed``; torch's global RNG is forked and restored):

1. a byte-level BPE tokenizer on the public texts (:mod:`.tokenizer`), with the control codes of the public
   label values (:mod:`.codes`) as special tokens;
2. the keyphrase vocabulary of the public texts (:mod:`.keyphrases`);
3. a GPT-2 of the configured size (:mod:`.model`);
4. training (:mod:`.train`): AdamW, linear warm-up then cosine decay, gradient-norm clipping at 1, token-weighted
   loss; every epoch each public text gives one sequence in a format drawn from the :class:`~.codes.FormatMix`.
   The budget is ``min(epochs, train_tokens / tokens per epoch)`` epochs (:func:`plan_budget`); ``validation``
   public texts (a seeded slice) are held out and evaluated every epoch (or every tenth of the budget when
   sooner): an evaluation that does not improve by ``min_improvement`` cuts the learning rate by
   ``plateau_decay``, ``patience`` of them in a row stop the training, and the best evaluation's weights are
   kept (``PublicLM.info``: ``stopped``, ``best_step``, ``validation_history``). Torch threads: ``threads``, else
   the idle cores (:func:`training_threads`). When the model is cached, checkpoints (:mod:`.checkpoint`) let an
   interrupted training continue where it stopped;
5. the files are written to the cache (:mod:`.cache`), and the checkpoints removed.

bf16 autocast (``precision: auto`` where the CPU has native bf16 — AVX512-BF16 or AMX — or the GPU supports it)
roughly halves the CPU time of a step on such CPUs; the weights stay fp32.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...errors import BackendError, ConfigError, DataError, MissingDependencyError
from ...rng import derive
from . import cache as lm_cache
from .codes import BOS, EOS, PAD, CodeBook, ControlEncoder, ExampleMaker, FormatMix
from .keyphrases import KeyphraseExtractor
from .model import ModelShape, build_model, count_parameters, model_shape, resolve_size
from .sample import SamplingSettings, sample
from .tokenizer import load_tokenizer, normalize, train_tokenizer
from .train import (
    PAD_MULTIPLE,
    TrainingDiverged,
    TrainResult,
    collate,
    evaluate_loss,
    length_batches,
    train_loop,
    warmup_cosine,
)

#: AdamW peak learning rate per model size when ``lm.lr`` is not set. 2e-3 trains the tiny and small shapes on
#: a CPU (docs/dpft.md); on the base shape (8 × 512, 30 M parameters, the default on a GPU) it diverged: the loss
#: became NaN within the 550 steps of the Yelp public split on an H200 (bf16), and the NaN model wrote one
#: replacement character per token. 6e-4 (1e-3 too) trained it there: validation loss 9.09 → 4.90 (5.00 at 1e-3).
DEFAULT_LR: dict[str, float] = {"tiny": 2e-3, "small": 2e-3, "base": 6e-4}


@dataclass(frozen=True)
class LMSettings:
    """Everything that shapes the trained model (the cache key holds all of it)."""

    size: str = "auto"
    n_layer: int | None = None
    n_embd: int | None = None
    n_head: int | None = None
    vocab_size: int | None = None
    max_length: int = 320
    dropout: float = 0.0
    epochs: float = 20.0
    train_tokens: int | None = 6_000_000
    patience: int = 2
    eval_every: int | None = None
    min_improvement: float = 0.01
    plateau_decay: float = 0.3
    batch_size: int = 32
    lr: float | None = None  # None: DEFAULT_LR of the resolved size (resolved_lr)
    weight_decay: float = 0.01
    warmup: int = 100
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    seed: int = 0
    validation: int = 100
    keyphrase_min_count: int = 3
    label_min_texts: int = 5
    mix: FormatMix = field(default_factory=FormatMix)
    # how the training runs, not what it makes (left out of the cache key)
    threads: int | None = None  # torch CPU threads while training; None: the idle cores (training_threads)
    checkpoint_seconds: float = 60.0  # a resumable checkpoint at most this often (checkpoint.py)

    def resolved(self, *, cuda: bool, bf16: bool) -> tuple[ModelShape, str]:
        shape = model_shape(self.size, n_positions=self.max_length, cuda=cuda, dropout=self.dropout,
                            n_layer=self.n_layer, n_embd=self.n_embd, n_head=self.n_head,
                            vocab_size=self.vocab_size)
        precision = self.precision if self.precision != "auto" else ("bf16" if bf16 else "fp32")
        return shape, precision

    def resolved_lr(self, *, cuda: bool) -> float:
        """The AdamW peak learning rate: ``lr`` when set, else :data:`DEFAULT_LR` of the size ``size`` resolves
        to (``auto``: base on a GPU, small on a CPU)."""
        return float(self.lr) if self.lr is not None else DEFAULT_LR[resolve_size(self.size, cuda=cuda)]

    def key_dict(self, shape: ModelShape, precision: str) -> dict[str, Any]:
        d = asdict(self)
        d.update(shape=shape.to_dict(), precision=precision)
        for k in ("size", "n_layer", "n_embd", "n_head", "vocab_size", "threads", "checkpoint_seconds"):
            d.pop(k)
        return d


def torch_env(device: str) -> tuple[Any, bool, bool]:
    """(torch device, cuda available, native bf16 on that device)."""
    try:
        import tokenizers  # noqa: F401
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise MissingDependencyError("transformers", "lm", "the lm generator") from None
    cuda = torch.cuda.is_available()
    dev = device if device != "auto" else ("cuda" if cuda else "cpu")
    if dev.startswith("cuda") and not cuda:
        raise ConfigError(f"generator device {device!r}: CUDA is not available on this machine")
    tdev = torch.device(dev)
    if tdev.type == "cuda":
        bf16 = bool(torch.cuda.is_bf16_supported())
    else:
        try:
            bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            bf16 = False
    return tdev, cuda, bf16


@dataclass
class PublicLM:
    """A tokenizer, code book, keyphrase extractor and model trained on public text, and how they were made."""

    tokenizer: Any  # tokenizers.Tokenizer
    encoder: ControlEncoder
    extractor: KeyphraseExtractor
    model: Any  # transformers.GPT2LMHeadModel
    settings: LMSettings
    info: dict[str, Any]

    @property
    def codebook(self) -> CodeBook:
        return self.encoder.codebook

    @property
    def n_positions(self) -> int:
        return int(self.model.config.n_positions)

    def sample(self, prompts: Sequence[Sequence[int]], rng: np.random.Generator, *,
               n_blanks: Sequence[int] | None = None, settings: SamplingSettings | None = None,
               stats: dict[str, int] | None = None) -> list[list[int]]:
        """New ids per prompt (see :func:`.sample.sample`)."""
        return sample(self.model, prompts, rng, n_special=self.encoder.n_special, n_blanks=n_blanks,
                      settings=settings, stats=stats)

    def loss(self, texts: Sequence[str], labels: Sequence[Mapping[str, str] | None] | None = None) -> float:
        """Mean next-token loss (nats per token) of the records (free format, with their label codes)."""
        seqs = [self.encoder.record(t, None if labels is None else labels[i])[:self.n_positions]
                for i, t in enumerate(texts)]
        return evaluate_loss(self.model, seqs, pad_id=PAD)


def _epoch_batches(maker: ExampleMaker, idx: np.ndarray, settings: LMSettings, epoch: int) -> list[list[list[int]]]:
    """The batches (token sequences) of epoch ``epoch``: a function of the seed and the epoch alone."""
    rng = derive(settings.seed, "lm-epoch", epoch)
    seqs = [maker.example(int(i), rng) for i in idx]
    return [[seqs[int(i)] for i in b] for b in length_batches([len(x) for x in seqs], settings.batch_size, rng)]


def _batches(maker: ExampleMaker, idx: np.ndarray, settings: LMSettings, pad_id: int, device: Any,
             start: int = 0) -> Iterator[dict[str, Any]]:
    """The training batches from step ``start`` on (a resumed training skips the steps it did)."""
    e, skip = 0, start
    while True:
        epoch = _epoch_batches(maker, idx, settings, e)
        for b in epoch[skip:]:
            yield collate(b, pad_id=pad_id, device=device, pad_to_multiple=PAD_MULTIPLE)
        skip = max(0, skip - len(epoch))
        e += 1


def training_threads(requested: int | None) -> int:
    """Torch CPU threads for a training: ``requested``, else the cores the 1-minute load average leaves idle
    (at least 1, at most torch's count). On the shared 2-core machine at load 7-10, one step of the small model
    on 32 short messages took 5.5 s wall (1.8 CPU-s) on two threads and 0.55 s (0.24 CPU-s) on one: two
    threads that do not get both cores wait on each other; idle, two threads are ~1.8× one (docs/dpft.md)."""
    import torch

    if requested:
        return int(requested)
    n = torch.get_num_threads()
    try:
        idle = (os.cpu_count() or 1) - int(os.getloadavg()[0] + 0.5)
    except (AttributeError, OSError):  # no load average (Windows)
        return n
    return max(1, min(n, idle))


@dataclass
class _Budget:
    """How long a pretraining lasts (:func:`plan_budget`)."""

    steps_per_epoch: int
    epochs: float  # the most passes: min(settings.epochs, train_tokens / tokens per epoch)
    steps: int  # the most steps
    eval_every: int  # steps between validation evaluations (early stopping)
    tokens_per_epoch: float


def plan_budget(n_train: int, tokens_per_text: float, settings: LMSettings) -> _Budget:
    """The step budget: ``min(epochs, train_tokens / tokens per epoch)`` passes over the ``n_train`` training
    texts (an epoch's tokens estimated as its text tokens + 10 % for the control codes), and a validation
    evaluation every epoch, or every tenth of the budget when that is sooner (at least 10 chances to stop)."""
    per_epoch = n_train * tokens_per_text * 1.1
    spe = max(1, math.ceil(n_train / settings.batch_size))
    epochs = settings.epochs if settings.train_tokens is None else min(settings.epochs,
                                                                        settings.train_tokens / max(per_epoch, 1.0))
    steps = max(1, math.ceil(epochs * spe))
    every = settings.eval_every or max(1, min(spe, math.ceil(steps / 10)))
    return _Budget(spe, epochs, steps, int(every), per_epoch)


def _read_checkpoint(root: Path, key: str | None) -> dict[str, Any] | None:
    """The newest whole checkpoint of this training (its files loaded), else None: none there, another key's,
    or unreadable (the training then starts over, and its first checkpoint replaces it)."""
    from safetensors.torch import load_file

    from . import checkpoint as ckpt

    found = ckpt.latest(root)
    if found is None:
        return None
    folder = found[1]
    try:
        saved = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        if saved.get("key") != key:
            return None
        saved.update(folder=str(folder), tokenizer=load_tokenizer(folder / "tokenizer.json"),
                     model=load_file(str(folder / "model.safetensors")),
                     optimizer=load_file(str(folder / "optimizer.safetensors")),
                     optimizer_meta=saved["optimizer"],
                     best=load_file(str(folder / "best.safetensors")) if (folder / "best.safetensors").exists()
                     else None)
    except Exception:  # a checkpoint is an optimisation: any damage means starting over
        return None
    return dict(saved)


class _State:
    """What a pretraining carries from step to step (and a checkpoint holds): the validation history, the best
    loss and its weights, and the evaluations since the last improvement."""

    def __init__(self) -> None:
        self.history: list[list[float]] = []  # [step, validation loss]
        self.best_loss = math.inf
        self.best_step = 0
        self.best: dict[str, Any] | None = None  # parameters at the best validation loss (CPU copies)
        self.bad = 0
        self.lr_scale = 1.0  # × plateau_decay at each evaluation without an improvement
        self.stopped = "budget"
        self.resumed_from = 0

    def to_dict(self) -> dict[str, Any]:
        return {"history": self.history, "best_loss": self.best_loss if math.isfinite(self.best_loss) else None,
                "best_step": self.best_step, "bad": self.bad, "lr_scale": self.lr_scale, "stopped": self.stopped}

    def load(self, d: dict[str, Any]) -> None:
        self.history = [list(x) for x in d["history"]]
        self.best_loss = math.inf if d["best_loss"] is None else float(d["best_loss"])
        self.best_step, self.bad, self.stopped = int(d["best_step"]), int(d["bad"]), str(d["stopped"])
        self.lr_scale = float(d["lr_scale"])


class _Pretraining:
    """One pretraining's moving parts after setup — the model, optimiser, schedule, validation state and tallies —
    and what happens after each step: the validation evaluation (a plateau cuts the LR, then stops early) and the
    checkpoints (:mod:`.checkpoint`) an interrupted or killed training continues from."""

    def __init__(self, *, model: Any, opt: Any, sched: Any, state: _State, result: TrainResult, val: list[Any],
                 budget: Any, settings: LMSettings, autocast: Any, tokenizer: Any, checkpoints: Path | None,
                 key: str | None, before: float | None):
        self.model, self.opt, self.sched, self.state, self.result = model, opt, sched, state, result
        self.val, self.budget, self.steps, self.settings, self.autocast = val, budget, budget.steps, settings, autocast
        self.tokenizer, self.checkpoints, self.key, self.before = tokenizer, checkpoints, key, before
        self.last_save = time.perf_counter()

    def save(self, step_done: int) -> None:
        """A whole checkpoint after step ``step_done`` (nothing without a checkpoint folder)."""
        if self.checkpoints is None:
            return
        import torch
        from safetensors.torch import save_file

        from . import checkpoint as ckpt

        def write(tmp: Path) -> dict[str, Any]:
            self.tokenizer.save(str(tmp / "tokenizer.json"))
            save_file(ckpt.named_parameters(self.model), str(tmp / "model.safetensors"))
            if self.state.best is not None:
                save_file(self.state.best, str(tmp / "best.safetensors"))
            tensors, meta = ckpt.optimizer_tensors(self.opt)
            save_file(tensors, str(tmp / "optimizer.safetensors"))
            sd = self.sched.state_dict()  # lr_lambdas: [None] (a plain function is not saved)
            r = self.result
            ckpt.write_json(tmp / "state.json", {
                "key": self.key, "step": step_done, "planned_steps": self.steps, "optimizer": meta, "scheduler": sd,
                "torch_rng": torch.get_rng_state().tolist(), "state": self.state.to_dict(),
                "validation_loss_before": self.before,
                "result": {"steps": r.steps, "tokens": r.tokens, "seconds": r.seconds,
                           "cpu_seconds": r.cpu_seconds, "losses": r.losses}})
            return {"step": step_done}

        ckpt.save(self.checkpoints, step_done, write)
        self.last_save = time.perf_counter()

    def evaluate(self, done: int) -> bool:
        """The validation evaluation after step ``done``, where one is due; True: stop (early)."""
        from . import checkpoint as ckpt

        st, settings = self.state, self.settings
        if not (self.val and settings.patience > 0 and (done % self.budget.eval_every == 0 or done == self.steps)):
            return False
        v = evaluate_loss(self.model, self.val, pad_id=PAD, autocast_dtype=self.autocast)
        st.history.append([done, round(v, 5)])
        if v < st.best_loss - settings.min_improvement:
            st.best_loss, st.best_step, st.bad = v, done, 0
            st.best = ckpt.named_parameters(self.model)
            return False
        if v < st.best_loss:  # better, by less than min_improvement: keep these weights
            st.best_loss, st.best_step = v, done
            st.best = ckpt.named_parameters(self.model)
        st.bad += 1
        st.lr_scale *= settings.plateau_decay
        if st.bad >= settings.patience and done < self.steps:
            st.stopped = "early"
            return True
        return False

    def on_step(self, step: int, loss: float) -> bool:
        """After each training step: evaluate where due, checkpoint (and the fault hook); True: stop."""
        from . import checkpoint as ckpt

        done = step + 1
        stop = self.evaluate(done)
        if ckpt.fault(done):
            self.save(done)
            ckpt.kill()
        if (not stop and done < self.steps
                and time.perf_counter() - self.last_save >= self.settings.checkpoint_seconds):
            self.save(done)
        return stop


def _restore(saved: dict[str, Any], model: Any, opt: Any, sched: Any, state: _State) -> TrainResult:
    """A checkpoint's model, optimiser, schedule, torch RNG and validation state put back; its tallies."""
    import torch

    from . import checkpoint as ckpt

    ckpt.load_parameters(model, saved["model"])
    ckpt.load_optimizer(opt, saved["optimizer"], saved["optimizer_meta"])
    sched.load_state_dict(saved["scheduler"])
    torch.set_rng_state(torch.tensor(saved["torch_rng"], dtype=torch.uint8))
    state.load(saved["state"])
    state.best = saved["best"]
    r = saved["result"]
    return TrainResult(steps=int(r["steps"]), tokens=int(r["tokens"]), seconds=float(r["seconds"]),
                       cpu_seconds=float(r["cpu_seconds"]), losses=[float(x) for x in r["losses"]])


def _train(texts: list[str], labels: dict[str, list[str]] | None, settings: LMSettings, shape: ModelShape,
           precision: str, device: Any, describe: str, codebook: CodeBook | None = None,
           checkpoints: Path | None = None, key: str | None = None) -> PublicLM:
    """Train a new model (module docstring). ``checkpoints``: the folder of this training's checkpoints
    (:mod:`.checkpoint`); a whole checkpoint there is continued from, and new ones are written as it goes."""
    import torch

    from . import checkpoint as ckpt

    base = CodeBook.from_labels(labels, min_texts=settings.label_min_texts)
    codebook = codebook or base
    saved = _read_checkpoint(checkpoints, key) if checkpoints is not None else None
    tk = saved["tokenizer"] if saved is not None else train_tokenizer(
        texts, vocab_size=shape.vocab_size, special_tokens=codebook.special_tokens())
    encoder = ControlEncoder(tk, codebook)
    extractor = KeyphraseExtractor.from_public(texts, min_count=settings.keyphrase_min_count)
    maker = ExampleMaker(encoder, extractor, texts, labels, max_length=shape.n_positions, mix=settings.mix)
    order = derive(settings.seed, "lm-validation").permutation(len(texts))
    n_val = min(settings.validation, len(texts) // 10)
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    val_rng = derive(settings.seed, "lm-validation-formats")
    val = [maker.example(int(i), val_rng) for i in val_idx]
    budget = plan_budget(len(train_idx), maker.tokens / max(len(maker), 1), settings)
    steps = budget.steps
    autocast = {"bf16": torch.bfloat16, "fp32": None}[precision]
    state = _State()
    result = TrainResult()
    devices = list(range(torch.cuda.device_count())) if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(derive(settings.seed, "lm-init").integers(2**62)))
        model = build_model(shape, vocab_size=encoder.vocab_size, bos_id=BOS, eos_id=EOS, pad_id=PAD).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay,
                                betas=(0.9, 0.98))
        sched = warmup_cosine(opt, steps=steps, warmup=min(settings.warmup, max(1, steps // 10)),
                              scale=lambda: state.lr_scale)
        if saved is not None:
            result = _restore(saved, model, opt, sched, state)
            before = saved["validation_loss_before"]
            state.resumed_from = result.steps
            from ...progress import say

            say(f"lm generator: continuing the interrupted training at step {result.steps} of {steps} "
                f"({saved['folder']})")
        else:
            before = evaluate_loss(model, val, pad_id=PAD, autocast_dtype=autocast) if val else None
        start = result.steps
        run = _Pretraining(model=model, opt=opt, sched=sched, state=state, result=result, val=val, budget=budget,
                           settings=settings, autocast=autocast, tokenizer=tk, checkpoints=checkpoints, key=key,
                           before=before)
        stopped = False
        if start and not (state.history and state.history[-1][0] == start):
            stopped = run.evaluate(start)  # Ctrl-C came during this step's evaluation: it was not done
        try:
            if not stopped:
                result = train_loop(model, opt, _batches(maker, train_idx, settings, PAD, device, start),
                                    steps=steps, scheduler=sched, max_grad_norm=1.0, autocast_dtype=autocast,
                                    reduction="token", description=describe, on_step=run.on_step, start=start,
                                    result=result)
        except KeyboardInterrupt:
            if result.steps > start:  # Ctrl-C: keep what was trained, then stop as asked
                run.save(result.steps)
            raise
        if state.best is not None and state.best_step != result.steps:
            ckpt.load_parameters(model, state.best)  # early stopping keeps the best validation loss's weights
        model.eval()
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise TrainingDiverged(f"training diverged: the weights are no longer finite after {result.steps} "
                                   "steps; lower the learning rate")
        after = evaluate_loss(model, val, pad_id=PAD, autocast_dtype=autocast) if val else None
    info = {"parameters": count_parameters(model), "shape": shape.to_dict(), "precision": precision, "lr": settings.lr,
            "device": str(device), "threads": torch.get_num_threads(), "public_texts": len(texts),
            "train_texts": len(train_idx), "validation_texts": int(n_val),
            "epochs": round(result.steps / budget.steps_per_epoch, 3),
            "planned_steps": steps, "planned_epochs": round(budget.epochs, 3), "eval_every": budget.eval_every,
            "stopped": state.stopped, "best_step": state.best_step if state.best is not None else result.steps,
            "resumed_from_step": state.resumed_from, "validation_history": state.history,
            "train": result.to_dict(), "validation_loss_before": before,
            "validation_loss_after": after, "label_columns": list(codebook.columns),
            "untrained_codes": codebook.added_by(base),
            "keyphrase_terms": len(extractor.vocabulary)}
    return PublicLM(tk, encoder, extractor, model, settings, info)


def _save(lm: PublicLM, folder: Path) -> dict[str, Any]:
    lm.tokenizer.save(str(folder / "tokenizer.json"))
    lm.model.save_pretrained(folder, safe_serialization=True)
    for extra in ("generation_config.json",):  # not needed to load; keep the entry to what the manifest checks
        (folder / extra).unlink(missing_ok=True)
    meta = {"codebook": lm.codebook.to_dict(), "keyphrases": lm.extractor.to_dict(), "info": lm.info}
    (folder / "lm.json").write_text(json.dumps(meta, ensure_ascii=False, default=float), encoding="utf-8")
    return {"info": lm.info}


def _load(folder: Path, settings: LMSettings, device: Any) -> PublicLM:
    from transformers import GPT2LMHeadModel

    meta = json.loads((folder / "lm.json").read_text(encoding="utf-8"))
    tk = load_tokenizer(folder / "tokenizer.json")
    encoder = ControlEncoder(tk, CodeBook.from_dict(meta["codebook"]))
    extractor = KeyphraseExtractor.from_dict(meta["keyphrases"])
    model = GPT2LMHeadModel.from_pretrained(folder).to(device)
    model.eval()
    return PublicLM(tk, encoder, extractor, model, settings, dict(meta["info"]))


def build_public_lm(texts: Sequence[str], labels: Mapping[str, Sequence[str]] | None = None, *,
                    settings: LMSettings | None = None, cache: bool = True, cache_dir: str | Path | None = None,
                    device: str = "auto", guard: Any = None,
                    reserve_codes: Mapping[str, Sequence[str]] | None = None) -> PublicLM:
    """The tokenizer + model of this public corpus and settings: from the cache when a whole entry is there,
    else trained (and cached). ``labels``: public label columns → one value per text (the control codes).
    ``reserve_codes``: label column → values (the declared schema) that get a code even where no public text
    carries it (:meth:`CodeBook.from_labels`): untrained until DP fine-tuning learns them; they are part of the
    cache key only when they add a code, so a corpus whose labels cover the schema keeps its entry.
    ``guard`` (a :class:`privtext.guard.PrivateGuard`) refuses a corpus holding a private record.
    ``info["cache"]`` is ``hit``, ``miss``, ``damaged`` (an entry was there but broken: retrained) or ``off``."""
    settings = settings or LMSettings()
    texts = [normalize(t) for t in texts]
    if not texts or not any(texts):
        raise ConfigError("the lm generator is trained on public text only and needs a non-empty public corpus "
                          "(set data.public)")
    labels = {c: [str(v) for v in vs] for c, vs in (labels or {}).items()} or None
    for c, vs in (labels or {}).items():
        if len(vs) != len(texts):
            raise DataError(f"label column {c!r} has {len(vs)} values for {len(texts)} public texts")
    if guard is not None:
        guard.assert_public(texts, what="lm generator training corpus")
    tdev, cuda, bf16 = torch_env(device)
    shape, precision = settings.resolved(cuda=cuda, bf16=bf16)
    settings = replace(settings, lr=settings.resolved_lr(cuda=cuda))  # the key holds the lr that trains
    if precision == "bf16" and not bf16:
        raise ConfigError(f"precision 'bf16': {tdev.type} here has no native bf16; use 'fp32' or 'auto'")
    codebook = CodeBook.from_labels(labels, min_texts=settings.label_min_texts, reserve=reserve_codes)
    added = codebook.added_by(CodeBook.from_labels(labels, min_texts=settings.label_min_texts))
    key_settings = settings.key_dict(shape, precision)
    if added:
        key_settings = {**key_settings, "codebook": codebook.to_dict()}
    key = lm_cache.cache_key(texts, labels, key_settings)
    folder = lm_cache.entry_dir(cache_dir, key)
    if not cache:
        return _train_new(texts, labels, settings, shape, precision, tdev, key, None, "off", codebook)
    from ...progress import say

    lm = _cached(folder, settings, tdev, key)
    if lm is not None:
        return lm
    # one trainer per entry: a run that finds another training the same model waits, then loads its entry
    with lm_cache.training_lock(folder, on_wait=lambda: say(
            f"another process is training this lm generator ({folder}); waiting for it")):
        lm = _cached(folder, settings, tdev, key)
        if lm is not None:
            return lm
        status = "damaged" if folder.exists() else "miss"
        return _train_new(texts, labels, settings, shape, precision, tdev, key, folder, status, codebook)


def _cached(folder: Path, settings: LMSettings, tdev: Any, key: str) -> PublicLM | None:
    """The whole entry at ``folder`` loaded, else None (absent, damaged, or unloadable: the caller retrains)."""
    if not folder.exists() or lm_cache.read_entry(folder) is None:
        return None
    try:
        lm = _load(folder, settings, tdev)
    except Exception:  # a readable manifest over unloadable files: retrain
        return None
    lm.info.update(cache="hit", cache_dir=str(folder), key=key)
    return lm


def _train_new(texts: list[str], labels: dict[str, list[str]] | None, settings: LMSettings, shape: Any,
               precision: str, tdev: Any, key: str, folder: Path | None, status: str,
               codebook: CodeBook | None = None) -> PublicLM:
    from ...backends.hardware import torch_threads
    from ...progress import say
    from . import checkpoint as ckpt

    threads = training_threads(settings.threads) if tdev.type == "cpu" else None
    say(f"training the lm generator on {len(texts)} public texts ({shape.n_layer} layers × {shape.n_embd}, "
        f"{precision}, {tdev}" + (f", {threads} thread(s)" if threads else "") + ")"
        + (f"; cached in {folder}" if folder is not None else ""))
    t0 = time.perf_counter()
    checkpoints = ckpt.checkpoint_root(folder) if folder is not None else None
    try:
        with torch_threads(threads):
            lm = _train(texts, labels, settings, shape, precision, tdev, "lm generator: training", codebook,
                        checkpoints=checkpoints, key=key)
    except TrainingDiverged as e:
        if checkpoints is not None:  # its checkpoints lead to the same divergence
            ckpt.clear(checkpoints)
        raise BackendError(f"training the lm generator failed: {e} (lm.lr, now {settings.lr:g}); nothing was "
                           "cached") from e
    except (ValueError, RuntimeError) as e:
        raise BackendError(f"training the lm generator failed: {type(e).__name__}: {e}") from e
    lm.info.update(cache=status, key=key, total_seconds=round(time.perf_counter() - t0, 2))
    if folder is not None:
        lm.info["cache_dir"] = str(folder)
        lm_cache.write_entry(folder, lambda tmp: _save(lm, tmp))
        if checkpoints is not None:
            ckpt.clear(checkpoints)
    return lm


__all__ = ["LMSettings", "PublicLM", "build_public_lm", "torch_env"]
