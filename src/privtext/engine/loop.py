"""The Private Evolution engine: generate → embed → vote → select → vary, checkpointed.

The engine knows nothing about privacy: the *scorer* (Aug-PE's DP nearest-neighbour votes, SecPE's noisy cluster
centres, later WASP's Top-Q votes) turns the candidates into a released histogram, recording its events in the
ledger through the :class:`~privtext.engine.state.ReleaseKeeper`. The engine only sees released values, public
label information and the texts the generator wrote; it never hands private text to a generator.

One iteration t (0 ≤ t < T):

1. **candidates** — t = 0: RANDOM_API, ``n_g · initial_multiplier`` per label group g (``initial_pool: shared``: one
   unconditioned pool of Σ n_g · initial_multiplier that every group votes over); t > 0: the samples
   selected at t−1 (survivors keep their embeddings) plus L−1 VARIATION_API outputs each (or L, without
   survivors);
2. **embedding** — only texts without an embedding; optional lookahead: k variations per candidate, whose mean
   embedding (with or without the candidate's own) is what the vote sees — the variations are reused as that
   candidate's children when it is selected;
3. **vote** — the scorer releases a histogram over candidates (saved before use, never redrawn on resume);
4. **selection** — per label group, ``n_g`` candidates by ``rank`` (top noisy counts, random tie-break) or by
   ``sample`` (with replacement, probabilities ∝ the thresholded non-negative histogram, uniform when it is
   all zero — never the raw noisy counts);
5. **checkpoint** — candidates, votes, selection, state; then the COMPLETE marker;
6. **learning** (``evolution.learn``, off by default) — the released votes teach the generator before iteration
   t + 1 is generated (:mod:`privtext.engine.learning`; post-processing, no release added).

The output is the selected samples of the last iteration (not their variations); with ``evolution.final: model``
(or ``both``: half of each label) samples the trained generator writes from the public prompts (POPri).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..config import EvolutionConfig
from ..data.labels import LabelSpace
from ..data.population import Population
from ..embed.base import Embedder
from ..embed.tiers import attach_texts, row_source
from ..errors import ConfigError, PrivtextError
from ..generate.base import Generator
from ..progress import progress
from ..rng import derive
from ..rundir import RunDir, StageMetrics
from .learning import EngineLearning


@dataclass(frozen=True)
class IterationResult:
    """What a callback sees after each iteration (all public: generated texts and released votes)."""

    iteration: int
    state: dict[str, Any]  # the iteration summary written to the checkpoint
    selected: Population  # the selected candidates (texts, label groups, embeddings)
    histogram: np.ndarray  # the released (post-processed) histogram over the candidates


@dataclass
class ScoreResult:
    histogram: np.ndarray  # released (post-processed) histogram over candidates; selection uses it
    meta: dict[str, Any] = field(default_factory=dict)


class Scorer(Protocol):
    """Turns candidates into a released histogram — the only step that touches private data.

    A scorer receives what it uses when it is built (its options, the release keeper, a generator of privacy
    randomness per release key) and releases every noisy value through the keeper; the engine hands it only the
    public candidates and the embeddings the vote should see."""

    name: str

    def score(self, *, iteration: int, population: Population, vote_emb: np.ndarray) -> ScoreResult: ...


def select(
    histogram: np.ndarray,
    groups: np.ndarray,
    counts: np.ndarray,
    *,
    mode: str,
    rng: np.random.Generator,
) -> np.ndarray:
    """Indices of the selected candidates: ``counts[g]`` from each group g.

    ``rank``: the top counts (ties broken at random, no repeats; if a group has fewer candidates than asked,
    all are taken). ``sample``: with replacement, probabilities ∝ max(histogram, 0) within the group (the
    histogram given is already thresholded; negative noisy values are never used as probabilities), uniform when
    the group's histogram has no positive entry.
    """
    h = np.asarray(histogram, dtype=np.float64)
    out: list[np.ndarray] = []
    for g, n in enumerate(counts):
        if n <= 0:
            continue
        idx = np.nonzero(groups == g)[0]
        if len(idx) == 0:
            continue
        if mode == "rank":
            jitter = rng.random(len(idx))
            order = np.lexsort((jitter, -h[idx]))
            out.append(idx[order[: min(n, len(idx))]])
        elif mode == "sample":
            w = np.clip(h[idx], 0, None)
            p = w / w.sum() if w.sum() > 0 else np.full(len(idx), 1 / len(idx))
            out.append(rng.choice(idx, size=int(n), replace=True, p=p))
        else:
            raise ConfigError(f"selection must be 'rank' or 'sample', got {mode!r}")
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class Engine:
    def __init__(
        self,
        *,
        run: RunDir,
        evolution: EvolutionConfig,
        generator: Generator,
        embedder: Embedder,
        scorer: Scorer,
        labels: LabelSpace,
        counts: np.ndarray,
        metrics: StageMetrics,
        seed: int | None,
        secure: bool = False,
        log: Callable[[str], None] | None = None,
        batch_size: int = 256,
        callbacks: Sequence[Callable[[IterationResult], None]] = (),
    ):
        self.run_dir = run
        self.evo = evolution
        self.generator = generator
        self.embedder = embedder
        self.scorer = scorer
        self.labels = labels
        self.counts = np.asarray(counts, dtype=np.int64)
        if len(self.counts) != len(labels):
            raise ConfigError(f"{len(self.counts)} sample counts for {len(labels)} label groups")
        self.metrics = metrics
        self.seed = seed
        self.secure = secure
        self.log = log or (lambda m: None)
        self.callbacks = tuple(callbacks)
        self.batch_size = batch_size
        self.gen_name = getattr(generator, "name", "generator")
        self.learning = None
        if EngineLearning.wanted(evolution):
            self.learning = EngineLearning(evolution=evolution, generator=generator, labels=labels, scorer=scorer,
                                           seed=seed, secure=secure, name=self.gen_name, metrics=metrics,
                                           log=self.log, embedder=embedder)
            self.generator = self.learning.generator  # kind: rerank wraps it (privtext.learn.rerank)
        self.L = evolution.variations
        self.n_children = self.L - 1 if evolution.include_selected else self.L
        if evolution.include_selected and self.L < 2 and evolution.iterations > 1:
            self.log("variations=1 with include_selected: no new candidates are made after iteration 0")
        if (evolution.iterations == 1 and evolution.selection == "rank"
                and (evolution.initial_multiplier or self.L) == 1):
            self.log("WARNING: one iteration with initial_multiplier 1 and rank selection selects every candidate: "
                     "the votes do not change the output (raise evolution.initial_multiplier)")

    # ------------------------------------------------------------------ helpers
    def _rng(self, *keys: object) -> np.random.Generator:
        return derive(self.seed, *keys, secure=self.secure)

    def _variation_spec(self, t: int) -> Any:
        from ..generate import VariationSpec

        v = self.evo.variation
        mp = v.mask_prob
        if v.mask_prob_schedule:
            sched = v.mask_prob_schedule
            mp = sched[min(t - 1, len(sched) - 1)] if t > 0 else sched[0]
            if not 0 < mp < 1:
                raise ConfigError(f"evolution.variation.mask_prob_schedule holds {mp}; values must be in (0, 1)")
        return VariationSpec(kind=v.kind, mask_prob=mp)

    def _generate(self, t: int, what: str, jobs: list[tuple[int, list[str], int]], spec: Any) -> list[list[str]]:
        """Run generator calls per group in batches. ``jobs``: (group, parent texts or [], n for random)."""
        total = sum(len(txt) if txt else n for _, txt, n in jobs)
        outs: list[list[str]] = []
        with self.metrics.stage("generation", iteration=t) as st, progress(f"iter {t}: {what}", total) as bar:
            for g, texts, n in jobs:
                rng = self._rng("generate", what, t, g)
                info = self.labels.info(g)
                res: list[str] = []
                if texts:
                    for s in range(0, len(texts), self.batch_size):
                        chunk = texts[s:s + self.batch_size]
                        res.extend(self.generator.variation(chunk, info, spec, rng=rng))
                        bar.advance(len(chunk))
                else:
                    for s in range(0, n, self.batch_size):
                        k = min(self.batch_size, n - s)
                        res.extend(self.generator.random(info, k, rng=rng))
                        bar.advance(k)
                outs.append(res)
            st.count("texts", sum(len(r) for r in outs))
        return outs

    @contextlib.contextmanager
    def _counted(self, st: Any) -> Iterator[None]:
        """Add to stage ``st`` what the embedder's counters (a tiered embedder's: texts per tier, re-decided votes)
        gained meanwhile."""
        counters = getattr(getattr(self.embedder, "counters", None), "values", None)
        before = dict(counters) if isinstance(counters, dict) else None
        try:
            yield
        finally:
            if before is not None and isinstance(counters, dict):
                for k, v in counters.items():
                    if k.startswith("exact_max") or k == "exact_window":  # maxima: run-wide counters
                        self.metrics.counters[k] = max(float(self.metrics.counters.get(k, v)), v)
                    elif v != before.get(k, 0.0):
                        st.count(k, v - before.get(k, 0.0))

    def _warn_lookahead(self) -> None:
        if not getattr(self, "_lookahead_warned", False):
            self._lookahead_warned = True
            self.log("exact votes: lookahead votes see mean embeddings, which are not re-decided in fp32 (their "
                     "votes are the fast vectors' votes)")

    def _embed(self, t: int, texts: list[str]) -> np.ndarray:
        with self.metrics.stage("embedding", iteration=t) as st, self._counted(st), \
                progress(f"iter {t}: embedding", len(texts)) as bar:
            emb = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), dtype=np.float32)
            bar.update(completed=len(texts))
            st.count("texts", len(texts))
        return np.asarray(emb, dtype=np.float32)

    def _new_pop(self, t: int, texts: list[str], group: int, origin: str, parents: list[str | None],
                 start: int) -> Population:
        return Population(
            ids=[f"t{t}-{start + i}" for i in range(len(texts))],
            texts=list(texts),
            group=np.full(len(texts), group, dtype=np.int64),
            origin=[origin] * len(texts),
            parent=list(parents),
            generator=[self.gen_name] * len(texts),
        )

    # ------------------------------------------------------------------ candidate building
    def _initial(self) -> Population:
        mult = self.evo.initial_multiplier or self.L
        if self.initial_pool() == "shared":
            return self._initial_shared(mult)
        jobs = [(g, [], int(n) * mult) for g, n in enumerate(self.counts) if n > 0]
        outs = self._generate(0, "random", jobs, None)
        parts, k = [], 0
        for (g, _, _), texts in zip(jobs, outs, strict=True):
            parts.append(self._new_pop(0, texts, g, "random", [None] * len(texts), k))
            k += len(texts)
        pop = Population.concat(parts)
        pop.emb = self._embed(0, pop.texts)
        return pop

    def initial_pool(self) -> str:
        """``evolution.initial_pool`` resolved: ``auto`` is ``shared`` when several label groups get samples and the
        generator says it cannot condition on a label (``label_conditioned`` False), else ``per_label``."""
        mode = self.evo.initial_pool
        if mode != "auto":
            return mode
        groups = int(np.count_nonzero(np.asarray(self.counts) > 0))
        return "shared" if groups > 1 and getattr(self.generator, "label_conditioned", True) is False else "per_label"

    def _initial_shared(self, mult: int) -> Population:
        """One pool of Σ n_g·m unconditioned candidates (RANDOM_API without a label), offered to every label group
        with n_g > 0: group g's private records vote over its own copy and it selects n_g of the whole pool (a
        candidate may serve several labels). Generator calls and embeddings: once per pool text."""
        groups = [g for g, n in enumerate(self.counts) if n > 0]
        total = sum(int(self.counts[g]) * mult for g in groups)
        self.log(f"iteration 0: one shared pool of {total} unconditioned candidates for {len(groups)} label groups")
        texts: list[str] = []
        with self.metrics.stage("generation", iteration=0) as st, progress("iter 0: random (shared)", total) as bar:
            rng = self._rng("generate", "random", 0, "shared")
            for s in range(0, total, self.batch_size):
                k = min(self.batch_size, total - s)
                texts.extend(self.generator.random(None, k, rng=rng))
                bar.advance(k)
            st.count("texts", len(texts))
        emb = self._embed(0, texts)
        parts = []
        for j, g in enumerate(groups):
            p = self._new_pop(0, texts, g, "random", [None] * len(texts), j * len(texts))
            p.emb = emb
            parts.append(p)
        return Population.concat(parts)

    def _children(self, t: int, prev: Population, selected: np.ndarray,
                  reuse: dict[str, tuple[list[str], np.ndarray]]) -> Population:
        survivors = prev.take(selected)
        surv_parts: list[Population] = []
        if self.evo.include_selected:
            survivors.ids = [f"t{t}-s{i}" for i in range(len(survivors))]
            survivors.parent = [prev.ids[i] for i in selected]
            survivors.origin = ["survivor"] * len(survivors)
            surv_parts.append(survivors)
        spec = self._variation_spec(t)
        # reuse lookahead variations (first occurrence of each parent), generate the rest
        seen: set[str] = set()
        child_texts: list[list[str]] = [[] for _ in range(len(selected))]
        child_emb: list[list[np.ndarray]] = [[] for _ in range(len(selected))]
        for j, i in enumerate(selected):
            pid = prev.ids[i]
            if pid in reuse and pid not in seen:
                texts, embs = reuse[pid]
                take = min(self.n_children, len(texts))
                child_texts[j] = list(texts[:take])
                child_emb[j] = list(embs[:take])
            seen.add(pid)
        jobs: list[tuple[int, list[str], int]] = []
        slots: list[tuple[int, int]] = []  # (selected position, how many) per job text
        by_group: dict[int, list[tuple[int, int]]] = {}
        for j, i in enumerate(selected):
            missing = self.n_children - len(child_texts[j])
            if missing > 0:
                by_group.setdefault(int(prev.group[i]), []).append((j, missing))
        for g in sorted(by_group):
            texts = [prev.texts[selected[j]] for j, m in by_group[g] for _ in range(m)]
            jobs.append((g, texts, 0))
            slots.extend((j, 1) for j, m in by_group[g] for _ in range(m))
        outs = self._generate(t, "variation", jobs, spec) if jobs else []
        flat = [x for o in outs for x in o]
        new_emb = self._embed(t, flat)
        # rows of flat/new_emb are in slot order (grouped by label); give each text and its own embedding to
        # the selected sample it was made from
        for row, ((j, _), text) in enumerate(zip(slots, flat, strict=True)):
            child_texts[j].append(text)
            child_emb[j].append(new_emb[row])
        child_parts: list[Population] = []
        k = 0
        for j, i in enumerate(selected):
            texts = child_texts[j]
            embs = child_emb[j]
            if not texts:
                continue
            p = self._new_pop(t, texts, int(prev.group[i]), "variation", [prev.ids[i]] * len(texts), k)
            p.emb = np.stack(embs).astype(np.float32)
            k += len(texts)
            child_parts.append(p)
        return Population.concat(surv_parts + child_parts)

    def _lookahead(self, t: int, pop: Population) -> tuple[np.ndarray, dict[str, tuple[list[str], np.ndarray]]]:
        k = self.evo.lookahead
        assert pop.emb is not None
        if k <= 0:
            return pop.emb, {}
        spec = self._variation_spec(t + 1)
        jobs = [(int(g), [pop.texts[i] for i in np.nonzero(pop.group == g)[0] for _ in range(k)], 0)
                for g in np.unique(pop.group)]
        outs = self._generate(t, "lookahead", jobs, spec)
        texts = [x for o in outs for x in o]
        emb = self._embed(t, texts)
        order = [i for g, _, _ in jobs for i in np.nonzero(pop.group == g)[0] for _ in range(k)]
        vote = np.zeros_like(pop.emb, dtype=np.float64)
        reuse: dict[str, tuple[list[str], list[np.ndarray]]] = {}
        for row, i in enumerate(order):
            vote[i] += emb[row]
            reuse.setdefault(pop.ids[i], ([], []))
            reuse[pop.ids[i]][0].append(texts[row])
            reuse[pop.ids[i]][1].append(emb[row])
        if self.evo.lookahead_include_self:
            vote = (vote + pop.emb) / (k + 1)
        else:
            vote = vote / k
        return vote.astype(np.float32), {p: (tx, np.stack(e)) for p, (tx, e) in reuse.items()}

    # ------------------------------------------------------------------ main loop
    def run(self) -> tuple[Population, list[dict[str, Any]]]:
        T = self.evo.iterations
        prev: Population | None = None
        prev_sel: np.ndarray | None = None
        reuse: dict[str, tuple[list[str], np.ndarray]] = {}
        summaries: list[dict[str, Any]] = []
        with progress("iterations", T) as iterations:
            for t in range(T):
                prev, prev_sel, reuse = self._iteration(t, prev, prev_sel, reuse, summaries)
                iterations.advance(1)
        assert prev is not None and prev_sel is not None
        final = prev.take(prev_sel)
        if self.evo.final != "population":
            final = self._final_from_model(final)
        return final, summaries

    def _final_from_model(self, selected: Population) -> Population:
        """``evolution.final``: model — every label's samples written by the trained generator from the public
        prompts (RANDOM_API, as POPri samples its release); both — the first half of each label's selection kept, the
        rest written by the model (:func:`privtext.learn.step.final_counts`). Public randomness, derived from the
        seed; a resumed run writes the same texts."""
        from ..learn.step import final_counts

        T = self.evo.iterations
        keep, write = final_counts(self.counts, self.evo.final)
        jobs = [(g, [], int(n)) for g, n in enumerate(write) if n > 0]
        outs = self._generate(T, "final", jobs, None) if jobs else []
        parts = []
        for g, n in enumerate(keep):
            idx = np.nonzero(selected.group == g)[0][: int(n)]
            if len(idx):
                parts.append(selected.take(idx))
        k = 0
        for (g, _, _), texts in zip(jobs, outs, strict=True):
            parts.append(self._new_pop(T, texts, g, "model", [None] * len(texts), k))
            k += len(texts)
        for p in parts:
            p.emb = None
        self.log(f"final: {int(keep.sum())} samples from the population, {int(write.sum())} from the trained model")
        return Population.concat(parts)

    def _iteration(self, t: int, prev: Population | None, prev_sel: np.ndarray | None,
                   reuse: dict[str, tuple[list[str], np.ndarray]], summaries: list[dict[str, Any]]
                   ) -> tuple[Population, np.ndarray, dict[str, tuple[list[str], np.ndarray]]]:
        """One iteration (module docstring): candidates, embedding, the vote, selection, the checkpoint."""
        store = self.run_dir.iteration(t, self.labels)
        if store.is_complete():
            prev, hist, prev_sel, state = store.load_complete()
            summaries.append(state)
            self.log(f"iteration {t}: complete in checkpoint, reused")
            if self.learning is not None:  # a finished step is restored; an unfinished one runs on the kept votes
                self.learning.step(t, prev, hist, state, store.folder / "learn")
            return prev, prev_sel, store.load_lookahead()
        t0 = time.perf_counter()
        if store.has_population():
            pop, vote_emb = store.load_population()
            reuse_next = store.load_lookahead()
            self.log(f"iteration {t}: candidates reloaded from checkpoint ({len(pop)})")
        else:
            if t == 0:
                pop = self._initial()
            else:
                assert prev is not None and prev_sel is not None
                pop = self._children(t, prev, prev_sel, reuse)
            vote_emb, reuse_next = self._lookahead(t, pop)
            store.save_lookahead(reuse_next)
            store.save_population(pop, vote_emb if self.evo.lookahead > 0 else None)
            self.log(f"iteration {t}: {len(pop)} candidates generated and embedded")
        if vote_emb is None or self.evo.lookahead <= 0:
            # the candidates' own vectors: a tiered embedder's votes are re-decided in fp32 (their texts known)
            vote_emb = attach_texts(pop.emb, self.embedder, pop.texts)
        elif row_source(vote_emb) is None and getattr(self.embedder, "tiered", None) is not None:
            self._warn_lookahead()
        with self.metrics.stage("voting", iteration=t) as st, self._counted(st), \
                progress(f"iter {t}: voting", 1) as bar:
            result = self.scorer.score(iteration=t, population=pop, vote_emb=vote_emb)
            bar.advance(1)
            st.count("candidates", len(pop))
        hist = np.asarray(result.histogram, dtype=np.float64)
        if hist.shape != (len(pop),):
            raise PrivtextError(f"scorer {self.scorer.name} returned {hist.shape} votes for {len(pop)} candidates")
        with self.metrics.stage("selection", iteration=t):
            sel = select(hist, pop.group, self.counts, mode=self.evo.selection, rng=self._rng("select", t))
        state = {
            "iteration": t,
            "n_candidates": len(pop),
            "n_selected": len(sel),
            "n_unique_selected": len(np.unique(sel)),
            "selection": self.evo.selection,
            "votes_total": float(hist.sum()),
            "votes_nonzero": int((hist > 0).sum()),
            "seconds": round(time.perf_counter() - t0, 3),
            **result.meta,
        }
        store.finish(pop, hist, sel, state)
        summaries.append(state)
        if self.callbacks:
            done = IterationResult(iteration=t, state=dict(state), selected=pop.take(sel), histogram=hist)
            for cb in self.callbacks:
                cb(done)
        self.log(f"iteration {t}: selected {len(sel)} ({state['n_unique_selected']} distinct)")
        if self.learning is not None:
            self.learning.step(t, pop, hist, state, store.folder / "learn")
        return pop, sel, reuse_next
