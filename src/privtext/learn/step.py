"""The learning step the engine (:mod:`privtext.engine.learning`) and WASP call after each vote release
(docs/learn.md, "In a run"):

* one :class:`Learner` per generator from :func:`~.factory.build_learner` (``evolution.learn``, a
  :class:`~privtext.learn.options.LearnOptions`; ``kind: none`` gives None and nothing changes);
* after iteration t's vote release and checkpoint (engine/loop.py after ``store.finish``; WASP after its round's
  ``store.finish``), :meth:`Learner.step` with the iteration's candidates, the released votes
  (:class:`~privtext.learn.pairs.ReleasedVotes` from the keeper), the iteration's checkpoint folder, the run's guard
  and the prompt log's line count, before the next generation. Every text it trains on passes the prompt audit's
  rules first (:func:`~privtext.learn.pairs.check_generated_text`);
* on resume, for every iteration found complete, :meth:`Learner.step` again with the same arguments: a finished
  step is restored from its folder (the adapter reloaded, nothing trained, no pair rebuilt), an unfinished one runs
  (from the checkpointed candidates and the kept votes: no noise is drawn).

A step's folder (``<iteration checkpoint>/learn/``, under ``private/``) holds ``pairs.jsonl`` (the pairs: generated
text and released values), the adapter (:mod:`.adapter`) and, written last, ``learn.json`` (what the step did:
pairs, trainer figures, seconds). Its presence is the step's COMPLETE marker.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_path, atomic_write_json, dumps
from ..data.population import Population
from ..errors import ConfigError
from ..rng import derive, spawn_seed
from .options import LearnOptions
from .pairs import (
    PreferencePair,
    ReleasedVotes,
    check_generated_text,
    check_pair_texts,
    pair_records,
    preference_pairs,
    wasp_pairs,
)

DONE = "learn.json"
PAIRS = "pairs.jsonl"


@dataclass
class StepRecord:
    """What one learning step did (public: counts, trainer figures, seconds; exact noisy values stay in the
    folder's pairs.jsonl under private/)."""

    iteration: int
    kind: str
    generator: str
    pairs: int = 0
    resumed: bool = False
    seconds: float = 0.0
    trained: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Learner:
    """One generator's learner (see :func:`~.factory.build_learner`)."""

    kind = "none"

    def __init__(self, generator: Any, options: LearnOptions, *, label_info: Callable[[int], Any],
                 seed: int | None, secure: bool = False, name: str | None = None):
        self.generator = generator
        self.options = options
        self.label_info = label_info
        self.seed = seed
        self.secure = secure
        self.name = name if name is not None else str(getattr(generator, "name", "generator"))

    def _rng(self, *keys: object) -> np.random.Generator:
        return derive(self.seed, "learn", self.name, *keys, secure=self.secure)

    def pairs(self, iteration: int, candidates: Population, votes: ReleasedVotes,
              furthest: ReleasedVotes | None = None) -> list[PreferencePair]:
        """This generator's pairs: :func:`~.pairs.preference_pairs` (the evolution loop), or
        :func:`~.pairs.wasp_pairs` when WASP's furthest histogram is given."""
        rng = self._rng("pairs", iteration)
        o = self.options.pairs
        out = (wasp_pairs(candidates, votes, furthest, o, rng=rng) if furthest is not None
               else preference_pairs(candidates, votes, o, rng=rng))
        return [p for p in out if p.generator == self.name] if self._filter(candidates) else out

    def _filter(self, candidates: Population) -> bool:
        return len(set(candidates.generator)) > 1

    def step(self, iteration: int, candidates: Population, votes: ReleasedVotes, *, folder: str | Path,
             guard: Any = None, lines: int = 0, furthest: ReleasedVotes | None = None) -> StepRecord:
        raise NotImplementedError

    # ------------------------------------------------------------------ the folder
    @staticmethod
    def done(folder: str | Path) -> dict[str, Any] | None:
        p = Path(folder) / DONE
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None

    @staticmethod
    def _write_pairs(folder: Path, pairs: list[PreferencePair]) -> None:
        with atomic_path(folder / PAIRS) as tmp:
            tmp.write_text("".join(dumps(p.to_dict()) + "\n" for p in pairs), encoding="utf-8")


class DPOLearner(Learner):
    """DPO on LoRA adapters of the ``lm`` generator or a ``transformers`` generator (docs/learn.md)."""

    kind = "dpo"

    def __init__(self, generator: Any, options: LearnOptions, **kw: Any):
        super().__init__(generator, options, **kw)
        from .dpo import attach_lora
        from .encode import HFPairEncoder, LMPairEncoder

        o = options.dpo
        lm = getattr(generator, "lm", None)
        if lm is not None and hasattr(lm, "encoder") and hasattr(lm, "model"):  # the small lm generator
            self.backend = "lm"
            self.model = attach_lora(lm.model, o, rng=self._rng("lora"))  # adapters injected into lm.model itself
            self.encoder: Any = LMPairEncoder(lm.encoder, label_info=self.label_info,
                                              max_length=o.max_length or lm.n_positions)
            self.trainer = "native" if o.trainer == "auto" else o.trainer
            if self.trainer == "trl":
                raise ConfigError("learn.dpo.trainer: trl does not fit the lm generator (it is conditioned on control-"
                                  "code ids, which trl would re-tokenise as text); use native (the default)")
            threads = getattr(getattr(generator, "options", None), "torch_threads", None)
            self.threads = o.threads or threads
        elif getattr(generator, "model", None) is not None and getattr(generator, "tokenizer", None) is not None \
                and hasattr(generator, "render"):  # a transformers generator
            self.backend = "transformers"
            self.model = attach_lora(generator.model, o, rng=self._rng("lora"))
            cfg = generator.model.config
            positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 1024
            self.encoder = HFPairEncoder(generator.tokenizer, prompt_text=self.prompt_text,
                                         max_length=o.max_length or int(positions),
                                         add_special_tokens=not getattr(generator, "use_chat", False))
            self.trainer = "trl" if o.trainer == "auto" else o.trainer
            if self.trainer == "trl":
                from .trl_backend import require_trl

                require_trl()
            self.threads = o.threads
        else:
            raise ConfigError(f"learn.kind: dpo trains the lm or transformers generator's weights; "
                              f"{type(generator).__name__} has none here")

    def prompt_text(self, group: int) -> str:
        """The transformers generator's RANDOM_API prompt for ``group``, rendered as it renders it."""
        g = self.generator
        return str(g.render(g.family.random_prompt(self.label_info(group), None))[0])

    def step(self, iteration: int, candidates: Population, votes: ReleasedVotes, *, folder: str | Path,
             guard: Any = None, lines: int = 0, furthest: ReleasedVotes | None = None) -> StepRecord:
        """One learning step (module docstring); restored, not retrained, when ``folder`` holds a finished one
        (:meth:`restore_step`). The adapter is saved (:meth:`save_step`) before ``learn.json`` marks the step
        done, and put to use (:meth:`use_step`) after it."""
        folder = Path(folder)
        done = self.done(folder)
        if done is not None:
            self.restore_step(folder, iteration)
            return StepRecord(**{**done, "resumed": True})
        t0 = time.perf_counter()
        pairs = self.pairs(iteration, candidates, votes, furthest)
        if guard is not None:
            check_pair_texts(pairs, guard, lines=lines)
        folder.mkdir(parents=True, exist_ok=True)
        self._write_pairs(folder, pairs)
        result = self.train(iteration, pairs, folder=folder)
        _fault(f"learn:iter_{iteration:03d}")
        rec = StepRecord(iteration=iteration, kind=self.kind, generator=self.name, pairs=len(pairs),
                         seconds=time.perf_counter() - t0, trained=result)
        self.save_step(folder, iteration, len(pairs))
        atomic_write_json(folder / DONE, {k: _finite(v) for k, v in rec.to_dict().items()})
        self.use_step(folder, iteration)
        return rec

    def restore_step(self, folder: Path, iteration: int) -> None:
        """A finished step's adapter, loaded into the generator's model instead of training it again."""
        from .adapter import load_adapter

        load_adapter(self.model, folder)

    def save_step(self, folder: Path, iteration: int, pairs: int) -> None:
        """The trained adapter, checkpointed in the step's folder (before the step is marked done)."""
        from .adapter import save_adapter

        save_adapter(self.model, folder, meta={"iteration": iteration, "pairs": pairs})

    def use_step(self, folder: Path, iteration: int) -> None:
        """Put the step's adapter to use for the next generation: the model trained in place already is."""

    def train(self, iteration: int, pairs: list[PreferencePair], folder: Path | None = None) -> dict[str, Any]:
        from ..backends.hardware import torch_threads

        if not pairs:
            return {"steps": 0}
        o = self.options.dpo
        if o.devices > 1 and folder is not None:  # K GPUs: accelerate launch of privtext.learn.worker (.launch)
            from .launch import train_launched

            return train_launched(self, iteration, pairs, folder)
        rng = self._rng("train", iteration)
        with torch_threads(self.threads):
            if self.trainer == "trl":
                from .trl_backend import train_dpo_trl

                records = pair_records(pairs, lambda p: self.prompt_text(p.group))
                res = train_dpo_trl(self.model, self.generator.tokenizer, records, o, seed=spawn_seed(rng),
                                    description=f"iter {iteration}: learning (DPO, trl)")
            else:
                from .dpo import train_dpo

                tokens = self.encoder.encode_all(pairs)
                res = train_dpo(self.model, tokens, o, pad_id=self.encoder.pad_id, rng=rng,
                                description=f"iter {iteration}: learning (DPO)")
        return res.to_dict()


class NgramLearner(Learner):
    """The vote-weighted re-estimate of the n-gram generator's counts (:mod:`.ngram`). It trains nothing and draws
    nothing: a resumed run rebuilds it from the checkpointed candidates and kept votes, so a step always runs."""

    kind = "ngram_counts"

    def __init__(self, generator: Any, options: LearnOptions, **kw: Any):
        super().__init__(generator, options, **kw)
        from .ngram import NgramReweighter

        self.reweighter = NgramReweighter(generator, options.ngram)

    def step(self, iteration: int, candidates: Population, votes: ReleasedVotes, *, folder: str | Path,
             guard: Any = None, lines: int = 0, furthest: ReleasedVotes | None = None) -> StepRecord:
        t0 = time.perf_counter()
        mine = candidates
        if self._filter(candidates):  # WASP: this generator's candidates and votes only
            idx = np.asarray([i for i, g in enumerate(candidates.generator) if g == self.name], dtype=np.int64)
            mine = candidates.take(idx)
            votes = votes.take(idx)
        if guard is not None:  # the prompt audit's rules, as for the DPO pairs (generated text is explained)
            for j, text in enumerate(mine.texts):
                check_generated_text(text, guard, lines=lines, what=f"n-gram re-estimate text {j}")
        changed = self.reweighter.apply(mine, votes, label_info=self.label_info)
        rec = StepRecord(iteration=iteration, kind=self.kind, generator=self.name, pairs=0,
                         seconds=time.perf_counter() - t0, trained=changed)
        Path(folder).mkdir(parents=True, exist_ok=True)
        atomic_write_json(Path(folder) / DONE, rec.to_dict())
        return rec


def _fault(point: str) -> None:
    """Test hook: ``PRIVTEXT_FAULT=learn:iter_001`` kills the process (SIGKILL) after step 1 trained, before its
    adapter and COMPLETE marker are written (tests/test_learn_engine.py: resume trains it again, to the same
    adapter, and draws no noise)."""
    import os
    import signal

    if os.environ.get("PRIVTEXT_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    return v


def final_counts(counts: Any, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """``evolution.final``: per label group, how many samples come from the evolved population and how many the
    trained generator writes from the public prompts (``both``: the population gets the larger half)."""
    c = np.asarray(counts, dtype=np.int64)
    if mode == "population":
        return c.copy(), np.zeros_like(c)
    if mode == "model":
        return np.zeros_like(c), c.copy()
    if mode == "both":
        model = c // 2
        return c - model, model
    raise ConfigError(f"evolution.final must be population, model or both, got {mode!r}")


__all__ = ["DPOLearner", "Learner", "NgramLearner", "StepRecord", "final_counts"]
