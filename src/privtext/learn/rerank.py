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

The label a text is written for (``rerank.labels``). Both texts of a pair share a label group g (siblings of one
parent, or one group's random samples), and in Aug-PE and SecPE that group's private records cast its votes. So
the preference may depend on the label: with tags(g) a set of public label tags,

    P(chosen ≻ rejected | g) = σ((w + Σ_{a ∈ tags(g)} w_a) · (e(chosen) − e(rejected))),

which is the logistic regression above on the features [d, d·1{a₁ ∈ tags(g)}, d·1{a₂ ∈ tags(g)}, …] (one
regularisation for every block, so a label's term stays near zero until its pairs say otherwise). ``none``: no
tags (one w, as at first); ``columns`` (the default): one tag for each label column's value ("label1=Business
Category: Restaurants", "label2=Review Stars: 5.0"), so a group's term pools the pairs of every group with the
same category, or the same stars; ``groups``: one tag for the whole group. A text is scored with its own label's
tags; a tag no pair has carried yet adds nothing. Offline, on Yelp pairs of other seeds
(``benchmarks/learn_rerank_labels.py``), ``columns`` ordered 0.89 of held-out pairs against 0.78 for one w.

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
vote), and one extra embedding of the k·n samples. The label features are sparse: a pair holds d·(1 + |tags|)
non-zeros whatever the number of labels.
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
SEP = "\x1f"  # between a pair's tags in rerank.npz


def label_tags(info: Any, mode: str) -> tuple[str, ...]:
    """tags(g) of the module docstring for a label (a :class:`~privtext.data.labels.LabelInfo`, or None for an
    unconditioned call): none for ``none`` or an unlabelled corpus; "column=value" for each column (``columns``);
    one tag joining them (``groups``)."""
    if mode == "none" or info is None or not getattr(info, "columns", ()):
        return ()
    items = tuple(f"{c}={v}" for c, v in zip(info.columns, info.values, strict=True))
    if mode == "columns":
        return items
    if mode == "groups":
        return (" & ".join(items),)
    raise ConfigError(f"evolution.learn.rerank.labels must be none, columns or groups, got {mode!r}")


def design(diffs: np.ndarray, tags: Sequence[Sequence[str]], vocab: Sequence[str]) -> Any:
    """The features of the module docstring: [d, d·1{a₁ ∈ tags}, …] for the tags in ``vocab`` (in its order), a
    sparse matrix with one row a pair; ``diffs`` itself when ``vocab`` is empty."""
    d = np.asarray(diffs, dtype=np.float64)
    if not len(vocab):
        return d
    from scipy import sparse

    n, dim = d.shape
    index = {a: j + 1 for j, a in enumerate(vocab)}
    rows, blocks = [], []
    for i, t in enumerate(tags):
        for b in (0, *sorted(index[a] for a in t if a in index)):
            rows.append(i)
            blocks.append(b)
    r = np.repeat(np.asarray(rows), dim)
    c = (np.asarray(blocks)[:, None] * dim + np.arange(dim)[None, :]).ravel()
    return sparse.csr_matrix((d[r, np.tile(np.arange(dim), len(rows))], (r, c)), shape=(n, dim * (1 + len(vocab))))


def fit_preference(diffs: Any, options: RerankOptions | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """w of the module docstring from the pairs' embedding differences e(chosen) − e(rejected) (one row a pair;
    dense, or the sparse label features of :func:`design`), and what the fit did (C, pairs, training accuracy).
    Raises :class:`ConfigError` for fewer than 5 pairs (the folds) or a non-finite difference."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GroupKFold

    o = options or RerankOptions()
    d = diffs.tocsr().astype(np.float64) if sparse.issparse(diffs) else np.asarray(diffs, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] < 5:
        raise ConfigError(f"a preference model needs at least 5 pairs (the cross-validation folds), got {d.shape[0]}")
    if not np.all(np.isfinite(d.data if sparse.issparse(d) else d)):
        raise ConfigError("the pairs' embedding differences hold a non-finite value")
    x = sparse.vstack([d, -d]).tocsr() if sparse.issparse(d) else np.vstack([d, -d])
    n = d.shape[0]
    y = np.r_[np.ones(n), np.zeros(n)]
    pair = np.r_[np.arange(n), np.arange(n)]  # a pair and its mirror in the same fold
    folds = list(GroupKFold(n_splits=5).split(x, y, groups=pair))
    with warnings.catch_warnings():  # scikit-learn 1.8+ announces new defaults of arguments this fit does not use
        warnings.simplefilter("ignore", FutureWarning)
        model = LogisticRegressionCV(Cs=list(o.cs), cv=folds, fit_intercept=False, max_iter=5000).fit(x, y)
    w = np.asarray(model.coef_[0], dtype=np.float64)
    return w, {"C": float(model.C_[0]), "pairs_total": n, "train_accuracy": float(np.mean(d @ w > 0))}


class RerankingGenerator:
    """The generator the evolution loop calls when ``kind: rerank`` (module docstring): until a preference model is
    installed it passes every call through unchanged; afterwards ``variation`` and ``random`` ask the generator for
    ``k`` samples per requested text (one call each, k times the texts) and keep, for each, the one of its k that
    scores highest for the label the call writes for. Every other attribute is the generator's."""

    def __init__(self, generator: Any, embedder: Any, k: int):
        if k < 2:
            raise ConfigError(f"evolution.learn.rerank.candidates must be at least 2, got {k}")
        self.inner = generator
        self.embedder = embedder
        self.k = int(k)
        self.w: np.ndarray | None = None
        self.vocab: tuple[str, ...] = ()
        self.labels = "none"

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, pickle): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def install(self, w: np.ndarray | None, vocab: Sequence[str] = (), labels: str = "none") -> None:
        """A fitted model: w over the blocks [shared, vocab[0], vocab[1], …] (module docstring), or None."""
        self.w = None if w is None else np.asarray(w, dtype=np.float64)
        self.vocab, self.labels = tuple(vocab), labels
        if self.w is not None and len(self.w) % (1 + len(self.vocab)):
            raise ConfigError(f"a preference model of {len(self.w)} weights does not split into {1 + len(vocab)} "
                              "blocks")

    def direction(self, label: Any = None) -> np.ndarray:
        """w + Σ w_a over the label's tags that the model has a term for."""
        if self.w is None:
            raise ConfigError("no preference model is installed")
        dim = len(self.w) // (1 + len(self.vocab))
        blocks = self.w.reshape(1 + len(self.vocab), dim)
        index = {a: j + 1 for j, a in enumerate(self.vocab)}
        return blocks[[0, *(index[a] for a in label_tags(label, self.labels) if a in index)]].sum(axis=0)

    def scores(self, texts: Sequence[str], label: Any = None) -> np.ndarray:
        v = self.direction(label)
        e = np.asarray(self.embedder.embed(list(texts)), dtype=np.float64)
        return e @ v  # type: ignore[no-any-return]

    def best_of(self, outs: list[str], n: int, label: Any = None) -> list[str]:
        """``outs`` holds k blocks of n samples (block j: the j-th sample for each of the n texts); for each text the
        sample of its k with the highest score for ``label`` (the first on a tie)."""
        if len(outs) != self.k * n:
            raise ConfigError(f"best_of: {len(outs)} samples for {n} texts × k = {self.k}")
        s = self.scores(outs, label).reshape(self.k, n)
        j = np.argmax(s, axis=0)
        return [outs[int(j[i]) * n + i] for i in range(n)]

    def variation(self, texts: Sequence[str], label: Any, spec: Any, *, rng: np.random.Generator) -> list[str]:
        texts = list(texts)
        if self.w is None or not texts:
            return list(self.inner.variation(texts, label, spec, rng=rng))
        return self.best_of(list(self.inner.variation(texts * self.k, label, spec, rng=rng)), len(texts), label)

    def random(self, label: Any, n: int, *, rng: np.random.Generator) -> list[str]:
        if self.w is None or n == 0:
            return list(self.inner.random(label, n, rng=rng))
        return self.best_of(list(self.inner.random(label, n * self.k, rng=rng)), n, label)


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
        self.tags: list[tuple[str, ...]] = []  # each kept pair's label tags, in the order of history's rows

    def _append(self, diffs: np.ndarray, tags: Sequence[tuple[str, ...]]) -> None:
        if len(diffs) != len(tags):
            raise ResumeError(f"{len(diffs)} pair differences with {len(tags)} label tags")
        if len(diffs):
            self.history = diffs if self.history.size == 0 else np.vstack([self.history, diffs])
        self.tags += list(tags)

    def vocab(self) -> tuple[str, ...]:
        """Every tag a kept pair carries, sorted: a function of the history alone, so a resumed run has the same."""
        return tuple(sorted({a for t in self.tags for a in t}))

    def _install(self, w: np.ndarray) -> None:
        self.generator.install(w if w.size else None, self.vocab(), self.options.rerank.labels)

    def step(self, iteration: int, candidates: Population, votes: ReleasedVotes, *, folder: str | Path,
             guard: Any = None, lines: int = 0, furthest: ReleasedVotes | None = None) -> StepRecord:
        folder = Path(folder)
        done = self.done(folder)
        if done is not None:
            if not (folder / NPZ).exists():
                raise ResumeError(f"{folder}: learn.json without {NPZ}; the step's folder is damaged")
            with np.load(folder / NPZ) as z:
                diffs = np.asarray(z["diffs"], dtype=np.float64)
                tags = ([tuple(a for a in str(t).split(SEP) if a) for t in z["tags"]] if "tags" in z.files
                        else [()] * len(diffs))  # a folder written before rerank.labels: one w
                self._append(diffs, tags)
                w = np.asarray(z["w"], dtype=np.float64)
            self._install(w)
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
        else:
            diffs = np.zeros((0, self.history.shape[1] if self.history.size else 0))
        tags = [label_tags(self.label_info(p.group), o.labels) for p in pairs]
        self._append(diffs, tags)
        vocab = self.vocab()
        trained: dict[str, Any] = {"pairs_total": len(self.history), "fitted": False, "k": o.candidates,
                                   "labels": o.labels, "label_terms": len(vocab)}
        w = np.zeros(0)
        if len(self.history) >= o.min_pairs:
            w, fit = fit_preference(design(self.history, self.tags, vocab), o)
            trained.update(fit, fitted=True)
        _fault(f"learn:iter_{iteration:03d}")
        with atomic_path(folder / NPZ) as tmp, open(tmp, "wb") as f:
            np.savez(f, diffs=diffs, w=w, tags=np.asarray([SEP.join(t) for t in tags], dtype=np.str_))
        rec = StepRecord(iteration=iteration, kind=self.kind, generator=self.name, pairs=len(pairs),
                         seconds=time.perf_counter() - t0, trained=trained)
        atomic_write_json(folder / DONE, {k: _finite(v) for k, v in rec.to_dict().items()})
        self._install(w)
        return rec


__all__ = ["RerankLearner", "RerankingGenerator", "design", "fit_preference", "label_tags"]
