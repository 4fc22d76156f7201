"""``evolution.learn.kind: rerank`` — a preference model fitted to the released pairs picks the best of k samples.

Why (docs/compare.md, "Learner or pairs?"): on Yelp, a DPO-trained adapter of the small ``lm`` generator orders
0.60-0.66 of held-out preference pairs the way the released votes did, while a logistic regression on the two
texts' sentence embeddings, fitted to the same pairs, orders 0.82. The pairs carry the private preference; the
small lm cannot take it in. This learner keeps the generator's weights as they are and puts that preference where
it can act: the generator writes k samples for each one asked for, and the preference model keeps the one it
scores highest (best-of-k sampling with a learned reward, as reward-model reranking in RLHF).

The preference model (Bradley-Terry on embeddings). With e(x) the run's embedding of text x (unit norm, the space
the votes were cast in) and w ∈ R^d,

    P(chosen ≻ rejected) = σ(w · (e(chosen) − e(rejected))),

fitted by L2-regularised logistic regression on every pair kept so far, in both orders (the difference with label
1 and its negation with label 0), without an intercept (the rule is symmetric: swapping the texts flips the
probability). The strength C is chosen from ``cs`` by 5-fold cross-validation, the folds split by pair so that a
pair and its mirror never sit on both sides. The score of a text is s(x) = w · e(x); best-of-k keeps argmax s.

Why this is post-processing: w is a function of the pairs alone, and the pairs are built by the same pair builder
as DPO's (:func:`privtext.learn.pairs.preference_pairs`: the keeper's released values and generated texts, each
text checked against the run's guard first). Scoring embeds only generated text. The k samples are ordinary
generator calls (logged in the prompt log like every other); the vote still sees exactly as many candidates as
without learning, so the ledger and privacy.json do not change.

Each step refits on the pairs of this step and every earlier one. A step's folder (``<checkpoint>/learn/``) holds
``pairs.jsonl``, ``rerank.npz`` (this step's pair differences and the fitted w) and, last, ``learn.json``. Resume
restores a finished step from its folder (w loaded, the differences appended to the history, nothing refitted,
nothing embedded); an unfinished one runs from the checkpointed candidates and kept votes. No noise is drawn.

Cost: k times the generator calls for every generation after the first step (iteration 0 is written before any
vote), and one extra embedding of the k·n samples.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_path, atomic_write_json
from ..data.population import Population
from ..errors import ConfigError, ResumeError
from .options import LearnOptions, RerankOptions
from .pairs import ReleasedVotes, check_pair_texts
from .step import DONE, Learner, StepRecord, _fault, _finite

NPZ = "rerank.npz"


def fit_preference(diffs: np.ndarray, options: RerankOptions | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """w of the module docstring from the pairs' embedding differences e(chosen) − e(rejected) (one row a pair),
    and what the fit did (C, pairs, training accuracy). Raises :class:`ConfigError` for fewer than 5 pairs (the
    folds) or a non-finite difference."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GroupKFold

    o = options or RerankOptions()
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 2 or len(d) < 5:
        raise ConfigError(f"a preference model needs at least 5 pairs (the cross-validation folds), got {len(d)}")
    if not np.all(np.isfinite(d)):
        raise ConfigError("the pairs' embedding differences hold a non-finite value")
    x = np.vstack([d, -d])
    y = np.r_[np.ones(len(d)), np.zeros(len(d))]
    pair = np.r_[np.arange(len(d)), np.arange(len(d))]  # a pair and its mirror in the same fold
    folds = list(GroupKFold(n_splits=5).split(x, y, groups=pair))
    with warnings.catch_warnings():  # scikit-learn 1.8+ announces new defaults of arguments this fit does not use
        warnings.simplefilter("ignore", FutureWarning)
        model = LogisticRegressionCV(Cs=list(o.cs), cv=folds, fit_intercept=False, max_iter=5000).fit(x, y)
    w = np.asarray(model.coef_[0], dtype=np.float64)
    return w, {"C": float(model.C_[0]), "pairs_total": len(d), "train_accuracy": float(np.mean(d @ w > 0))}


class RerankingGenerator:
    """The generator the evolution loop calls when ``kind: rerank`` (module docstring): until a preference model is
    installed it passes every call through unchanged; afterwards ``variation`` and ``random`` ask the generator for
    ``k`` samples per requested text (one call each, k times the texts) and keep, for each, the one of its k that
    scores highest. Every other attribute is the generator's."""

    def __init__(self, generator: Any, embedder: Any, k: int):
        if k < 2:
            raise ConfigError(f"evolution.learn.rerank.candidates must be at least 2, got {k}")
        self.inner = generator
        self.embedder = embedder
        self.k = int(k)
        self.w: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, pickle): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def install(self, w: np.ndarray | None) -> None:
        self.w = None if w is None else np.asarray(w, dtype=np.float64)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        if self.w is None:
            raise ConfigError("no preference model is installed")
        e = np.asarray(self.embedder.embed(list(texts)), dtype=np.float64)
        return e @ self.w  # type: ignore[no-any-return]

    def best_of(self, outs: list[str], n: int) -> list[str]:
        """``outs`` holds k blocks of n samples (block j: the j-th sample for each of the n texts); for each text the
        sample of its k with the highest score (the first on a tie)."""
        if len(outs) != self.k * n:
            raise ConfigError(f"best_of: {len(outs)} samples for {n} texts × k = {self.k}")
        s = self.scores(outs).reshape(self.k, n)
        j = np.argmax(s, axis=0)
        return [outs[int(j[i]) * n + i] for i in range(n)]

    def variation(self, texts: Sequence[str], label: Any, spec: Any, *, rng: np.random.Generator) -> list[str]:
        texts = list(texts)
        if self.w is None or not texts:
            return list(self.inner.variation(texts, label, spec, rng=rng))
        return self.best_of(list(self.inner.variation(texts * self.k, label, spec, rng=rng)), len(texts))

    def random(self, label: Any, n: int, *, rng: np.random.Generator) -> list[str]:
        if self.w is None or n == 0:
            return list(self.inner.random(label, n, rng=rng))
        return self.best_of(list(self.inner.random(label, n * self.k, rng=rng)), n)


class RerankLearner(Learner):
    """Fits the preference model after each release and installs it in :class:`RerankingGenerator` (module
    docstring). ``generator`` must be that wrapper (the engine builds it: ``EngineLearning.generator``)."""

    kind = "rerank"

    def __init__(self, generator: Any, options: LearnOptions, *, embedder: Any = None, **kw: Any):
        super().__init__(generator, options, **kw)
        if not isinstance(generator, RerankingGenerator):
            raise ConfigError("evolution.learn.kind: rerank reranks the evolution loop's samples (Aug-PE, SecPE); "
                              "this generator is not wrapped for it (use kind: dpo)")
        self.embedder = embedder if embedder is not None else generator.embedder
        self.history = np.zeros((0, 0), dtype=np.float64)

    def _append(self, diffs: np.ndarray) -> None:
        self.history = diffs if self.history.size == 0 else np.vstack([self.history, diffs])

    def step(self, iteration: int, candidates: Population, votes: ReleasedVotes, *, folder: str | Path,
             guard: Any = None, lines: int = 0, furthest: ReleasedVotes | None = None) -> StepRecord:
        folder = Path(folder)
        done = self.done(folder)
        if done is not None:
            if not (folder / NPZ).exists():
                raise ResumeError(f"{folder}: learn.json without {NPZ}; the step's folder is damaged")
            with np.load(folder / NPZ) as z:
                self._append(np.asarray(z["diffs"], dtype=np.float64))
                w = np.asarray(z["w"], dtype=np.float64)
            self.generator.install(w if w.size else None)
            return StepRecord(**{**done, "resumed": True})
        t0 = time.perf_counter()
        o = self.options.rerank
        pairs = self.pairs(iteration, candidates, votes, furthest)
        if guard is not None:
            check_pair_texts(pairs, guard, lines=lines)
        folder.mkdir(parents=True, exist_ok=True)
        self._write_pairs(folder, pairs)
        if pairs:  # embedded as the wrapper scores (the run's embedder; its cache has these texts already)
            e = np.asarray(self.embedder.embed([p.chosen for p in pairs] + [p.rejected for p in pairs]),
                           dtype=np.float64)
            diffs = e[:len(pairs)] - e[len(pairs):]
            self._append(diffs)
        else:
            diffs = np.zeros((0, self.history.shape[1] if self.history.size else 0))
        trained: dict[str, Any] = {"pairs_total": len(self.history), "fitted": False, "k": o.candidates}
        w = np.zeros(0)
        if len(self.history) >= o.min_pairs:
            w, fit = fit_preference(self.history, o)
            trained.update(fit, fitted=True)
        _fault(f"learn:iter_{iteration:03d}")
        with atomic_path(folder / NPZ) as tmp, open(tmp, "wb") as f:
            np.savez(f, diffs=diffs, w=w)
        rec = StepRecord(iteration=iteration, kind=self.kind, generator=self.name, pairs=len(pairs),
                         seconds=time.perf_counter() - t0, trained=trained)
        atomic_write_json(folder / DONE, {k: _finite(v) for k, v in rec.to_dict().items()})
        self.generator.install(w if w.size else None)
        return rec


__all__ = ["RerankLearner", "RerankingGenerator", "fit_preference"]
