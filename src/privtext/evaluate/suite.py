"""``evaluate_run``: every metric of one run against a real corpus, written to ``RUN/evaluation.json``.

What is compared with what:

* **FID, kNN precision/recall, MAUVE**: the final synthetic set vs the real corpus (embedded with the evaluation
  embedder); FID also for the selected samples of every complete iteration.
* **Downstream accuracy** (labelled corpora): classifiers trained on the synthetic set, tested on the real corpus,
  per label column; in the same table the baselines *OnlyPrivate* (a seeded sample of the private corpus of the
  same size as the synthetic set) and *zero-shot* (the same number of ``origin == "random"`` samples of iteration 0:
  generator output without private feedback). Per-iteration accuracy uses the first classifier.
* **Next-word prediction** (unlabelled corpora, or when asked): a small LM trained on each training set, scored
  on the real corpus.
* **Lengths**, **votes**, **runtime split**, **LLM calls/tokens** and, given a list of secrets, **secret exposure**
  against the zero-shot baseline.

What may be shared and what may not: ``RUN/evaluation.json`` is part of the release and holds only what the
public evaluation computes from released outputs and the real (public or held-out) corpus — every float rounded
as a released value is (:func:`privtext.privacy.statement.released_tree`), vote summaries computed from the
rounded noisy votes, the real corpus named by its file name only, no timings and no timestamps
(:func:`shareable_evaluation`). The OnlyPrivate baseline (a classifier trained on private records without noise),
the run's stage timings, secret exposure counts and notes that count private records are private diagnostics:
the whole evaluation goes to ``RUN/private/evaluation.json`` (:data:`PRIVATE_EVALUATION`), which only
``privtext report --diagnostics`` shows. Neither file holds a real or private text.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..atomicio import atomic_write_json
from ..data.corpus import Corpus
from ..data.io import load_corpus
from ..errors import ConfigError, DataError, PrivtextError
from ..progress import say, steps
from ..rng import derive
from ._threads import single_blas
from .downstream import downstream_accuracy
from .embedding import resolve_embedder
from .fid import fid, mauve_score, precision_recall
from .lengths import length_distribution
from .nextword import next_word_accuracy
from .runinfo import RunView
from .runstats import released_vote_distribution, runtime_split, secret_exposure

EVALUATION = "evaluation.json"
#: the whole evaluation, private diagnostics included (relative to the run directory)
PRIVATE_EVALUATION = "private/evaluation.json"
#: top-level keys that only the private evaluation holds (timings of private work, secret statistics, paths)
PRIVATE_KEYS = ("runtime", "secrets", "seconds", "created", "run", "private_notes")
#: training sets computed from private records without noise: private evaluation only
PRIVATE_TRAIN_SETS = ("only_private",)
DEFAULT_CLASSIFIERS = ("embedding-logreg", "tfidf-logreg")


def corpus_fingerprint(corpus: Corpus) -> str:
    """A 24-hex-digit BLAKE2b digest of the corpus's texts and labels in order (label columns sorted): equal for
    the same records, so two evaluations can be seen to use the same real set (evaluation.json's
    ``real.fingerprint``)."""
    h = hashlib.blake2b(digest_size=12)
    for i in range(len(corpus)):
        h.update(corpus.texts[i].encode("utf-8"))
        h.update(b"\x00")
        for c in sorted(corpus.labels):
            h.update(corpus.labels[c][i].encode("utf-8"))
            h.update(b"\x01")
    return h.hexdigest()


def privacy_facts(privacy: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(plain-words statement, guarantee numbers: kind and budget) from ``privacy.json``
    (:class:`privtext.privacy.statement.PrivacyStatement`)."""
    g = privacy.get("guarantee")
    statement = privacy.get("statement")
    if isinstance(g, str):  # a statement written before format 2
        return (str(statement or g) if (statement or g) else None), dict(privacy.get("budget") or {})
    g = dict(g) if isinstance(g, Mapping) else {}
    numbers = {"kind": g.get("kind"), **dict(g.get("budget") or {})} if g else {}
    return (str(statement) if statement else None), numbers


def guarantee_text(privacy: Mapping[str, Any]) -> str:
    """A short label for the guarantee in ``privacy.json`` (table cell): ``(ε=4, δ=1e-05)-DP`` etc."""
    from ..privacy.statement import short_label

    if isinstance(privacy.get("guarantee"), Mapping):
        return short_label(privacy)
    _, g = privacy_facts(privacy)
    return short_label({"guarantee": {"kind": g.get("kind"), "budget": g}}) if g else "(none recorded)"


def load_real(
    real: Corpus | str | os.PathLike[str], *, text_column: str, label_columns: Sequence[str],
    max_real: int | None, rng: np.random.Generator,
) -> tuple[Corpus, str]:
    """(corpus, its name or path): the real evaluation corpus, read from a path or taken as given, cut to a uniform
    sample of ``max_real`` records (order kept) drawn with ``rng``. Raises :class:`~privtext.errors.DataError` when
    ``max_real`` < 2."""
    if isinstance(real, Corpus):
        corpus, path = real, real.name or "(corpus)"
    else:
        path = str(real)
        corpus = load_corpus(path, text_column=text_column, label_columns=list(label_columns))
    if max_real is not None:
        if max_real < 2:
            raise DataError(f"--max-real must be at least 2, got {max_real}")
        if max_real < len(corpus):
            corpus = corpus.subset(np.sort(rng.choice(len(corpus), size=max_real, replace=False)))
    return corpus, path


def _private_baseline(view: RunView, private: Corpus | str | None, n: int, rng: np.random.Generator) -> Corpus | None:
    if private is None:
        p = view.data.get("private")
        if not p or str(p).startswith("hf:") or not Path(str(p)).exists():
            return None
        private = str(p)
    if isinstance(private, Corpus):
        corpus = private
    else:
        corpus = load_corpus(private, text_column=view.text_column, label_columns=view.label_columns,
                             id_column=view.data.get("id_column"))
    if n < len(corpus):
        corpus = corpus.subset(np.sort(rng.choice(len(corpus), size=n, replace=False)), name="only-private")
    return corpus


def _overlap(real: Corpus, private_sample: Corpus | None, view: RunView) -> int:
    """How many texts of the evaluation corpus also occur in the run's private corpus (0 when unknown)."""
    p = view.data.get("private")
    texts: set[str] = set()
    if p and not str(p).startswith("hf:") and Path(str(p)).is_file():
        try:
            texts = set(load_corpus(str(p), text_column=view.text_column).texts)
        except PrivtextError:
            texts = set()
    elif private_sample is not None:
        texts = set(private_sample.texts)
    return sum(1 for t in real.texts if t in texts)


@dataclass(frozen=True)
class EvaluationOptions:
    """What :func:`evaluate_run` computes (every field has the default the CLI uses).

    ``classifiers``: downstream classifiers (the first is used per iteration); ``classifier_options``: per
    classifier; ``baselines``: OnlyPrivate and zero-shot training sets; ``private``: the OnlyPrivate corpus
    (default: the run's private file); ``per_iteration``: FID and accuracy of each iteration's selection;
    ``knn_k``: k of kNN precision/recall; ``mauve``; ``next_word``: ``None`` runs it only when the real corpus has
    no labels; ``next_word_options``; ``secrets``: strings whose exposure is counted; ``seed`` (default: the
    run's) drives every sample and classifier; ``cache_dir``: the embedding cache (default: the run's)."""

    classifiers: Sequence[str] = DEFAULT_CLASSIFIERS
    classifier_options: Mapping[str, Mapping[str, Any]] | None = None
    baselines: bool = True
    private: Corpus | str | None = None
    per_iteration: bool = True
    knn_k: int = 3
    mauve: bool = False
    next_word: bool | None = None
    next_word_options: Mapping[str, Any] | None = None
    secrets: Sequence[str] | None = None
    seed: int | None = None
    cache_dir: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.classifiers, str):
            raise ConfigError(f"classifiers must be a list of names, got the string {self.classifiers!r}")
        if self.knn_k < 1:
            raise ConfigError(f"knn_k must be ≥ 1, got {self.knn_k}")

    @classmethod
    def from_kwargs(cls, base: EvaluationOptions | None, kwargs: Mapping[str, Any]) -> EvaluationOptions:
        """``base`` (default: the defaults) with the fields in ``kwargs`` replaced; raises
        :class:`~privtext.errors.ConfigError` naming any key that is not a field."""
        fields = set(cls.__dataclass_fields__)
        unknown = sorted(set(kwargs) - fields)
        if unknown:
            raise ConfigError(f"evaluate_run: unknown option(s) {unknown}; valid: {', '.join(sorted(fields))}")
        return replace(base or cls(), **dict(kwargs))


@dataclass
class EvaluationContext:
    """What the metrics share: the run, the embedder, the real and synthetic corpora with their embeddings, the
    training sets (synthetic plus the baselines, once :class:`Baselines` ran), notes and the progress display."""

    view: RunView
    options: EvaluationOptions
    seed: int
    emb: Any
    real: Corpus
    real_emb: np.ndarray
    syn: Corpus
    syn_emb: np.ndarray
    labels: list[str]
    progress: Any
    train_sets: dict[str, Corpus] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    private_notes: list[str] = field(default_factory=list)  # notes that state private facts (private file only)

    def rng(self, *keys: object) -> np.random.Generator:
        """The evaluation's generator for ``keys``: ``derive(seed, "eval", *keys)``, so every metric's draws are
        fixed by the seed and independent of the others'."""
        return derive(self.seed, "eval", *keys)


class Metric(Protocol):
    """One concern of an evaluation (the pe library's callbacks play the same role): ``compute`` returns the
    keys it adds to ``evaluation.json``; ``steps`` is its share of the progress bar. Pass your own objects as
    ``evaluate_run(..., metrics=[*DEFAULT_METRICS, Mine()])``."""

    name: str

    def steps(self, ctx: EvaluationContext) -> int: ...

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]: ...


class Distribution:
    """FID, kNN precision/recall, MAUVE and lengths of the final synthetic set against the real corpus."""

    name = "distribution"

    def steps(self, ctx: EvaluationContext) -> int:
        """One progress step."""
        return 1

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``fid``, ``precision_recall`` (k = min(knn_k, n − 1); ``None`` when k < 1), ``mauve`` (when asked) and
        ``lengths`` of the synthetic set against the real corpus."""
        ctx.progress.step("FID and precision/recall")
        k = min(ctx.options.knn_k, len(ctx.real) - 1, len(ctx.syn) - 1)
        return {
            "fid": fid(ctx.syn_emb, ctx.real_emb).to_dict(),
            "precision_recall": precision_recall(ctx.real_emb, ctx.syn_emb, k=k).to_dict() if k >= 1 else None,
            "mauve": mauve_score(ctx.real_emb, ctx.syn_emb, rng=ctx.rng("mauve")).to_dict()
            if ctx.options.mauve else None,
            "lengths": length_distribution(list(ctx.syn.texts), list(ctx.real.texts)).to_dict(),
        }


def _description(view: RunView) -> Any:
    """The run's method description (:func:`privtext.methods.describe`: privacy.json's, else the registry's)."""
    from ..methods import describe

    return describe(view.method, view.privacy)


class Baselines:
    """The training sets besides the synthetic one: OnlyPrivate (a sample of the private corpus of the synthetic
    set's size) and zero-shot (the generator's iteration-0 random samples), and their FID/lengths; warns when the
    evaluation corpus overlaps the private data."""

    name = "baselines"

    def steps(self, ctx: EvaluationContext) -> int:
        """Three progress steps with baselines, else one."""
        return 3 if ctx.options.baselines else 1

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """Sets ``ctx.train_sets`` (synthetic, and with baselines OnlyPrivate and zero-shot where available) and
        returns their sizes, the notes, and the zero-shot set's FID and lengths; a note (and a warning) when the
        real corpus overlaps the private one."""
        ctx.progress.step("baselines")
        ctx.train_sets = {"synthetic": ctx.syn}
        if ctx.options.baselines:
            try:
                priv = _private_baseline(ctx.view, ctx.options.private, len(ctx.syn), ctx.rng("only-private"))
            except PrivtextError as e:
                priv = None
                ctx.private_notes.append(f"OnlyPrivate baseline skipped: {e}")
            if priv is not None:
                ctx.train_sets["only_private"] = priv
            else:
                ctx.private_notes.append("OnlyPrivate baseline skipped: private corpus not available")
            desc = _description(ctx.view)
            zs = ctx.view.zero_shot(len(ctx.syn), rng=ctx.rng("zero-shot")) if desc.zero_shot else None
            if zs is not None:
                ctx.train_sets["zero_shot"] = zs
            elif not desc.zero_shot:  # the method's own words, and how to run its no-signal control
                control = (f"; its no-signal control is a run of its own, `{desc.control_command()}`: "
                           f"{desc.control_words}" if desc.control else "")
                ctx.notes.append(f"no zero-shot baseline: {desc.zero_shot_words or 'the run holds none'}{control}")
            else:
                ctx.notes.append("zero-shot baseline skipped: no origin == 'random' rows in iteration 0")
        overlap = _overlap(ctx.real, ctx.train_sets.get("only_private"), ctx.view)
        if overlap:
            msg = (f"the evaluation set shares {overlap} texts with the private corpus: evaluating on private data "
                   "inflates the OnlyPrivate baseline and makes this evaluation a private diagnostic")
            ctx.private_notes.append(msg)
            say(f"[yellow]warning:[/] {msg}")
        out: dict[str, Any] = {"train_sets": {k: len(v) for k, v in ctx.train_sets.items()}, "notes": ctx.notes,
                               "private_notes": ctx.private_notes}
        if "zero_shot" in ctx.train_sets:
            zs = ctx.train_sets["zero_shot"]
            out["fid_zero_shot"] = fid(ctx.emb.embed(list(zs.texts)), ctx.real_emb).to_dict()
            out["lengths_zero_shot"] = length_distribution(list(zs.texts), list(ctx.real.texts)).to_dict()
        return out


class Downstream:
    """Classifiers trained on each training set, tested on the real corpus, per label column."""

    name = "downstream"

    def steps(self, ctx: EvaluationContext) -> int:
        """One progress step per classifier; none on an unlabelled corpus."""
        return len(ctx.options.classifiers) if ctx.labels else 0

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``downstream``: each classifier's accuracy per training set and label column, trained on the set and
        tested on the real corpus (``None`` on an unlabelled corpus)."""
        if not ctx.labels:
            return {"downstream": None}
        clfs = list(ctx.options.classifiers)
        opts = dict(ctx.options.classifier_options or {})
        downstream: dict[str, Any] = {"classifiers": clfs, "primary": clfs[0] if clfs else None, "results": {}}
        for ci, cname in enumerate(clfs):
            per_set: dict[str, Any] = {}
            for sname, tset in ctx.train_sets.items():
                ctx.progress.note(f"downstream {cname} on {sname}")
                cols = [c for c in ctx.labels if c in tset.labels]
                if not cols:
                    continue
                res = downstream_accuracy(tset, ctx.real, label_columns=cols, classifier=cname, embedder=ctx.emb,
                                          classifier_options=opts.get(cname), rng=ctx.rng("clf", ci, sname))
                per_set[sname] = {c: r.to_dict() for c, r in res.items()}
            downstream["results"][cname] = per_set
            ctx.progress.step(f"downstream {cname}")
        return {"downstream": downstream}


class NextWord:
    """A small next-word model trained on each training set, scored on the real corpus (unlabelled corpora, or
    when asked)."""

    name = "next_word"

    def _on(self, ctx: EvaluationContext) -> bool:
        return (not ctx.labels) if ctx.options.next_word is None else bool(ctx.options.next_word)

    def steps(self, ctx: EvaluationContext) -> int:
        """One progress step when the next-word model runs, else none."""
        return 1 if self._on(ctx) else 0

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``next_word``: the next-word accuracy on the real corpus of a small model trained on each training set
        (``None`` when it does not run)."""
        if not self._on(ctx):
            return {"next_word": None}
        nw = {}
        for sname, tset in ctx.train_sets.items():
            ctx.progress.note(f"next-word model on {sname}")
            nw[sname] = next_word_accuracy(list(tset.texts), list(ctx.real.texts), rng=ctx.rng("next-word", sname),
                                           **dict(ctx.options.next_word_options or {})).to_dict()
        ctx.progress.step("next-word")
        return {"next_word": nw}


class PerIteration:
    """FID (and the first classifier's accuracy) of the samples each complete iteration selected."""

    name = "per_iteration"

    def _its(self, ctx: EvaluationContext) -> list[int]:
        return ctx.view.iterations() if ctx.options.per_iteration else []

    def steps(self, ctx: EvaluationContext) -> int:
        """One progress step per complete iteration (none when ``per_iteration`` is off)."""
        return len(self._its(ctx))

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``per_iteration``: per complete iteration, the number selected, their FID and the first classifier's
        accuracy (at least two selected), and the iteration's σ and candidate count where its state holds them."""
        per_it: list[dict[str, Any]] = []
        clfs = list(ctx.options.classifiers)
        primary = clfs[0] if clfs else None
        opts = dict(ctx.options.classifier_options or {})
        for t in self._its(ctx):
            ctx.progress.note(f"iteration {t}")
            sel = ctx.view.selected(t)
            row: dict[str, Any] = {"iteration": t, "n_selected": len(sel)}
            if len(sel) >= 2:
                row["fid"] = fid(ctx.emb.embed(list(sel.texts)), ctx.real_emb).fid
                cols = [c for c in ctx.labels if c in sel.labels]
                if ctx.labels and primary is not None and cols:
                    res = downstream_accuracy(sel, ctx.real, label_columns=cols, classifier=primary, embedder=ctx.emb,
                                              classifier_options=opts.get(primary), rng=ctx.rng("it", t))
                    row["accuracy"] = {c: r.accuracy for c, r in res.items()}
            st = ctx.view.state(t)
            for key in ("sigma", "n_candidates"):
                if key in st:
                    row[key] = st[key]
            per_it.append(row)
            ctx.progress.step(f"iteration {t} done")
        return {"per_iteration": per_it}


class Votes:
    """The released vote distribution per label of every iteration (sorted votes of the last one kept), from the
    noisy votes rounded as a release is (:func:`~privtext.evaluate.runstats.released_vote_distribution`)."""

    name = "votes"

    def steps(self, ctx: EvaluationContext) -> int:
        """No progress step of its own (it reads saved files)."""
        return 0

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``votes``: per iteration, the released vote distribution per label; the sorted votes are kept only for
        the last iteration that took a vote."""
        ctx.progress.note("votes and runtime")
        votes: dict[str, Any] = {}
        for t in ctx.view.iterations():
            df = ctx.view.candidates(t)
            if "votes" not in df.columns:
                continue
            votes[str(t)] = released_vote_distribution(df, label_columns=ctx.view.label_columns, max_points=300)
        # the sorted votes are kept for the last iteration that took a vote (WASP's last round takes none)
        voted = [t for t, d in votes.items() if any(v["total_votes"] or v["max_votes"] for v in d.values())]
        keep = voted[-1] if voted else (list(votes)[-1] if votes else None)
        for t, d in votes.items():
            if t != keep:
                for v in d.values():
                    v.pop("sorted_votes", None)
        return {"votes": votes}


class Runtime:
    """The run's time per stage group and LLM usage (from ``private/metrics.json``)."""

    name = "runtime"

    def steps(self, ctx: EvaluationContext) -> int:
        """No progress step of its own (it reads metrics.json)."""
        return 0

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``runtime``: the run's wall time per stage group and its LLM usage (private: timings of private work)."""
        return {"runtime": runtime_split(ctx.view.metrics)}


class SecretExposure:
    """How many of the given secret strings occur in the synthetic set (and in the zero-shot baseline)."""

    name = "secrets"

    def steps(self, ctx: EvaluationContext) -> int:
        """One progress step."""
        return 1

    def compute(self, ctx: EvaluationContext) -> dict[str, Any]:
        """``secrets``: how often each given secret occurs in the synthetic set and in the zero-shot baseline
        (``None`` when no secrets were given)."""
        secrets = ctx.options.secrets
        out = None
        if secrets:
            zs = ctx.train_sets.get("zero_shot")
            out = secret_exposure(list(ctx.syn.texts), secrets,
                                  baseline=list(zs.texts) if zs is not None else None).to_dict()
        ctx.progress.step("done")
        return {"secrets": out}


#: the metrics of a default evaluation, in order (Baselines before the metrics that use its training sets)
DEFAULT_METRICS: tuple[Metric, ...] = (Distribution(), Baselines(), Downstream(), NextWord(), PerIteration(),
                                       Votes(), Runtime(), SecretExposure())


def evaluate_run(
    run_dir: str | os.PathLike[str],
    *,
    real: Corpus | str | os.PathLike[str],
    embedder: Any = None,
    max_real: int | None = None,
    options: EvaluationOptions | None = None,
    metrics: Sequence[Metric] | None = None,
    write: bool = True,
    quiet: bool | None = None,
    **option_overrides: Any,
) -> dict[str, Any]:
    """Evaluate one run; returns the evaluation dict and (``write``) saves it as ``RUN/evaluation.json``.

    ``embedder``: object, spec string or config section (default: the run's own embedder section, else MiniLM).
    ``options``: an :class:`EvaluationOptions`; keyword overrides of its fields are accepted too
    (``evaluate_run(run, real=..., classifiers=("tfidf-logreg",), per_iteration=False)``). ``metrics``: the metric
    objects to run (default :data:`DEFAULT_METRICS`).
    """
    t0 = time.perf_counter()
    opts = EvaluationOptions.from_kwargs(options, option_overrides)
    view = RunView(run_dir)
    seed = view.seed if opts.seed is None else opts.seed
    real_corpus, real_path = load_real(real, text_column=view.text_column, label_columns=view.label_columns,
                                       max_real=max_real, rng=derive(seed, "eval", "real"))
    syn = view.synthetic()
    labels = [c for c in view.label_columns if c in real_corpus.labels and c in syn.labels]
    emb = resolve_embedder(embedder if embedder is not None else view.embedder_config,
                           cache_dir=opts.cache_dir if opts.cache_dir is not None else view.dir.embed_cache)
    ms = tuple(metrics) if metrics is not None else DEFAULT_METRICS
    params = (view.privacy.get("parameters") or {})
    desc = _description(view)
    result: dict[str, Any] = {
        "version": 1,
        "run": str(view.root),
        "name": view.name,
        "method": view.method,
        "guarantee": privacy_facts(view.privacy)[1],
        "guarantee_text": guarantee_text(view.privacy),
        "statement": privacy_facts(view.privacy)[0],
        "noise_multiplier": params.get("noise_multiplier"),
        # the method's units as planned (privacy.json's parameter), or the complete checkpoints of an unfinished run
        "iterations": params.get(desc.planned or "iterations", len(view.iterations())),
        "progress_unit": desc.unit,
        "real": {"path": real_path, "n": len(real_corpus), "fingerprint": corpus_fingerprint(real_corpus),
                 "text_column": view.text_column, "label_columns": labels},
        "synthetic": {"n": len(syn), "source": "synthetic.jsonl" if view.dir.synthetic.exists() else "checkpoint"},
        "seed": seed,
    }
    probe = EvaluationContext(view=view, options=opts, seed=seed, emb=emb, real=real_corpus,
                              real_emb=np.zeros((0, 0)), syn=syn, syn_emb=np.zeros((0, 0)), labels=labels,
                              progress=None)
    n_steps = 1 + sum(m.steps(probe) for m in ms)
    with steps(n_steps, title="evaluate", quiet=quiet) as prog, single_blas():
        prog.note(f"embedding {len(real_corpus)} real texts")
        real_emb = emb.embed(list(real_corpus.texts))
        prog.step(f"embedding {len(syn)} synthetic texts")
        syn_emb = emb.embed(list(syn.texts))
        result["embedder"] = {"name": emb.name, "dim": int(real_emb.shape[1])}
        ctx = EvaluationContext(view=view, options=opts, seed=seed, emb=emb, real=real_corpus, real_emb=real_emb,
                                syn=syn, syn_emb=syn_emb, labels=labels, progress=prog,
                                train_sets={"synthetic": syn})
        for m in ms:
            result.update(m.compute(ctx))
    result["seconds"] = time.perf_counter() - t0
    result["created"] = _dt.datetime.now().isoformat(timespec="seconds")
    if write:
        # the private file first: a shareable file never exists without the diagnostics it was cut from
        atomic_write_json(view.private_evaluation_path, {**result, "private": True, "notice": PRIVATE_NOTICE})
        atomic_write_json(view.evaluation_path, shareable_evaluation(result))
    return result


PRIVATE_NOTICE = ("PRIVATE DIAGNOSTICS: the OnlyPrivate baseline, run timings and secret statistics are computed "
                  "from private data without noise; do not share this file (evaluation.json is the shareable part)")


def _file_name(path: Any) -> Any:
    """A corpus path as a shareable file may name it: the file name only (an ``hf:`` spec stays as it is)."""
    if not isinstance(path, str) or path.startswith("hf:") or path.startswith("("):
        return path
    return Path(path).name


def shareable_evaluation(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an evaluation that may be shared (``evaluation.json``): no OnlyPrivate baseline, timings,
    timestamps, secret statistics or private notes; the real corpus by file name only; every float rounded as a
    released value is (:func:`privtext.privacy.statement.released_tree`)."""
    from ..privacy.statement import released_tree

    ev = {k: v for k, v in evaluation.items() if k not in PRIVATE_KEYS and k not in ("private", "notice")}
    if isinstance(ev.get("real"), Mapping):
        ev["real"] = {**ev["real"], "path": _file_name(ev["real"].get("path"))}
    if isinstance(ev.get("train_sets"), Mapping):
        ev["train_sets"] = {k: v for k, v in ev["train_sets"].items() if k not in PRIVATE_TRAIN_SETS}
    ds = ev.get("downstream")
    if isinstance(ds, Mapping) and isinstance(ds.get("results"), Mapping):
        ev["downstream"] = {**ds, "results": {c: {k: v for k, v in per.items() if k not in PRIVATE_TRAIN_SETS}
                                              for c, per in ds["results"].items()}}
    if isinstance(ev.get("next_word"), Mapping):
        ev["next_word"] = {k: v for k, v in ev["next_word"].items() if k not in PRIVATE_TRAIN_SETS}
    return released_tree(ev)


def headline(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """The figures a table row shows: FID, accuracy per label (primary classifier, synthetic), next-word, MAUVE
    (when computed)."""
    row: dict[str, Any] = {"fid": (evaluation.get("fid") or {}).get("fid")}
    ds = evaluation.get("downstream") or {}
    prim = ds.get("primary")
    syn = ((ds.get("results") or {}).get(prim) or {}).get("synthetic") or {}
    for c, r in syn.items():
        row[f"acc:{c}"] = r.get("accuracy")
    nw = (evaluation.get("next_word") or {}).get("synthetic")
    if nw:
        row["next_word"] = nw.get("accuracy")
    if evaluation.get("mauve"):
        row["mauve"] = evaluation["mauve"].get("mauve")
    return row


__all__ = ["DEFAULT_CLASSIFIERS", "DEFAULT_METRICS", "EVALUATION", "PRIVATE_EVALUATION", "EvaluationContext",
           "EvaluationOptions", "Metric", "corpus_fingerprint", "evaluate_run", "guarantee_text", "headline",
           "load_real", "privacy_facts", "shareable_evaluation"]
