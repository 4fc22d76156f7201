"""Learning from the released votes inside the evolution loop (issue 38, docs/learn.md).

After iteration t's vote is released (through the method's ReleaseKeeper) and the iteration is checkpointed, and
before iteration t + 1 is generated, :class:`EngineLearning` forms preference pairs from the released histogram and
trains the generator one round (:mod:`privtext.learn.step`: DPO on LoRA adapters for the lm / transformers
generator, the vote-weighted re-estimate of the n-gram generator's counts).

Why this is post-processing: the engine never sees the keeper or a private value. The method hands it
:class:`LearnHooks` — the run's guard and prompt log, and its scorer's ``released_votes``, which vouches for the
histogram the engine holds with the keeper's kept value (Aug-PE: :meth:`ReleasedVotes.checked`, equal to the value
kept for ``votes/iter_NNN``; SecPE: :meth:`ReleasedVotes.post_processed` of its kept clustering release). The pair
texts pass the guard (:func:`privtext.learn.pairs.check_pair_texts`) before a trainer sees them. No release is
added: the ledger is the same with and without learning (tests/test_learn_engine.py).

Resume: a step's folder is ``<iteration checkpoint>/learn/``; for an iteration found complete, the step is called
again with the checkpointed candidates and the kept votes: a finished step is restored (its adapter loaded, nothing
trained), an unfinished one runs. No noise is drawn either way.

Lookahead (``evolution.lookahead > 0``): the variations iteration t + 1 reuses were written during iteration t, by
the model before step t.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class LearnHooks:
    """What a vote method gives the engine for learning (set as ``scorer.learn_hooks`` by the method's ``scorer``):
    the run's guard and prompt log, and ``released_votes(histogram, state)`` → the histogram as a
    :class:`~privtext.learn.pairs.ReleasedVotes` vouched for by the keeper (``state`` holds the scorer's meta, with
    the release's ledger key under ``release``)."""

    guard: Any
    prompt_log: Any
    released_votes: Callable[[np.ndarray, Mapping[str, Any]], Any]


def with_learn_hooks(scorer: Any, ctx: Any) -> Any:
    """``scorer`` with :class:`LearnHooks` from the run context ``ctx`` (its guard and prompt log) and the scorer's
    own ``released_votes``; returns ``scorer``."""
    scorer.learn_hooks = LearnHooks(guard=ctx.guard, prompt_log=ctx.prompt_log, released_votes=scorer.released_votes)
    return scorer


def learn_parameters(evolution: Any) -> dict[str, Any]:
    """The learning settings for ``privacy.json``'s parameters, stated as post-processing; empty for ``kind: none``
    with ``final: population`` (a run without learning states exactly what it stated before)."""
    from ..learn.options import LearnOptions

    o = LearnOptions.model_validate(evolution.learn or {})
    if o.kind == "none" and evolution.final == "population":
        return {}
    d = o.model_dump(mode="json")
    d = {"kind": o.kind, "pairs": d["pairs"], **({"dpo": d["dpo"]} if o.kind == "dpo" else {}),
         **({"ngram": d["ngram"]} if o.kind == "ngram_counts" else {}),
         **({"rerank": d["rerank"]} if o.kind == "rerank" else {}),
         **({"generators": d["generators"]} if o.generators is not None else {})}
    return {"learn": {**d, "privacy": "post-processing: trained only on released vote values and generated text; "
                                      "no release added"},
            "final": evolution.final}


class EngineLearning:
    """One learner for the engine's generator, called after each iteration's release (module docstring)."""

    def __init__(self, *, evolution: Any, generator: Any, labels: Any, scorer: Any, seed: int | None, secure: bool,
                 name: str, metrics: Any, log: Callable[[str], None], embedder: Any = None):
        from ..backends import parse_options
        from ..learn.options import LearnOptions

        self.options = parse_options(LearnOptions, evolution.learn or {}, where="evolution.learn")
        self.final = evolution.final
        self.iterations = evolution.iterations
        self.hooks: LearnHooks | None = getattr(scorer, "learn_hooks", None)
        if self.hooks is None:
            raise ConfigError(f"evolution.learn.kind: {self.options.kind}: the scorer {getattr(scorer, 'name', '?')} "
                              "gives no released votes to learn from (use kind: none)")
        from ..learn.factory import build_learner

        self.generator = generator
        if self.options.kind == "rerank":  # the loop calls the wrapper; the learner installs what it fits
            from ..learn.rerank import RerankingGenerator

            if embedder is None:
                raise ConfigError("evolution.learn.kind: rerank scores samples with the run's embedder; none given")
            self.generator = RerankingGenerator(generator, embedder, self.options.rerank.candidates)
        self.learner = build_learner(self.options, self.generator, label_info=labels.info, seed=seed,
                                     secure=secure, name=name, embedder=embedder)
        self.metrics = metrics
        self.log = log

    @staticmethod
    def wanted(evolution: Any) -> bool:
        return str((evolution.learn or {}).get("kind", "none")) != "none"

    def step(self, t: int, pop: Any, histogram: np.ndarray, state: Mapping[str, Any], folder: Path) -> None:
        """Learn from iteration t's released votes (restored when its folder holds a finished step). The step after
        the last iteration runs only when the model writes the output (``evolution.final`` model or both)."""
        if self.learner is None or (t >= self.iterations - 1 and self.final == "population"):
            return
        hooks = self.hooks
        assert hooks is not None
        votes = hooks.released_votes(histogram, state)
        with self.metrics.stage("learning", iteration=t) as st:
            rec = self.learner.step(t, pop, votes, folder=folder, guard=hooks.guard,
                                    lines=int(getattr(hooks.prompt_log, "lines", 0)))
            st.count("pairs", rec.pairs)
        how = "restored from its checkpoint" if rec.resumed else f"{rec.seconds:.1f} s"
        what = (f"{rec.trained.get('texts', 0)} voted texts" if rec.kind == "ngram_counts" else f"{rec.pairs} pairs")
        if rec.kind == "rerank":
            fit = rec.trained
            terms = f", {fit['label_terms']} label terms" if fit.get("label_terms") else ""
            what += (f" (preference model on {fit.get('pairs_total')} pairs, C {fit.get('C', 0):.3g}{terms}: best "
                     f"of {fit.get('k')} from now on)" if fit.get("fitted") else
                     f" ({fit.get('pairs_total')} pairs so far, fewer than min_pairs: no reranking yet)")
        self.log(f"iteration {t}: learning ({rec.kind}) from {what}, {how}")


__all__ = ["EngineLearning", "LearnHooks", "learn_parameters", "with_learn_hooks"]
