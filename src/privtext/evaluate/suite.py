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

The OnlyPrivate baseline reads the private corpus: evaluation is outside the run's privacy guarantee, and
``evaluation.json`` (like the report) holds only aggregate numbers, never private or real text.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..atomicio import atomic_write_json
from ..data.corpus import Corpus
from ..data.io import load_corpus
from ..errors import DataError, PrivtextError
from ..progress import say, steps
from ..rng import derive
from ._threads import single_blas
from .downstream import downstream_accuracy
from .embedding import resolve_embedder
from .fid import fid, mauve_score, precision_recall
from .lengths import length_distribution
from .nextword import next_word_accuracy
from .runinfo import RunView
from .runstats import runtime_split, secret_exposure, vote_distribution

EVALUATION = "evaluation.json"
DEFAULT_CLASSIFIERS = ("embedding-logreg", "tfidf-logreg")


def corpus_fingerprint(corpus: Corpus) -> str:
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


def evaluate_run(
    run_dir: str | os.PathLike[str],
    *,
    real: Corpus | str | os.PathLike[str],
    embedder: Any = None,
    max_real: int | None = None,
    classifiers: Sequence[str] = DEFAULT_CLASSIFIERS,
    classifier_options: Mapping[str, Mapping[str, Any]] | None = None,
    baselines: bool = True,
    private: Corpus | str | None = None,
    per_iteration: bool = True,
    knn_k: int = 3,
    mauve: bool = False,
    next_word: bool | None = None,
    next_word_options: Mapping[str, Any] | None = None,
    secrets: Sequence[str] | None = None,
    seed: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    write: bool = True,
    quiet: bool | None = None,
) -> dict[str, Any]:
    """Evaluate one run; returns the evaluation dict and (``write``) saves it as ``RUN/evaluation.json``.

    ``embedder``: object, spec string or config section (default: the run's own embedder section, else MiniLM).
    ``next_word``: ``None`` runs it only when the real corpus has no labels. ``seed`` (default: the run's)
    drives every sample and classifier through :func:`privtext.rng.derive`.
    """
    t0 = time.perf_counter()
    view = RunView(run_dir)
    seed = view.seed if seed is None else seed
    real_corpus, real_path = load_real(real, text_column=view.text_column, label_columns=view.label_columns,
                                       max_real=max_real, rng=derive(seed, "eval", "real"))
    syn = view.synthetic()
    labels = [c for c in view.label_columns if c in real_corpus.labels and c in syn.labels]
    do_next = (not labels) if next_word is None else bool(next_word)
    its = view.iterations() if per_iteration else []
    emb = resolve_embedder(embedder if embedder is not None else view.embedder_config,
                           cache_dir=cache_dir if cache_dir is not None else view.dir.embed_cache)
    classifier_options = dict(classifier_options or {})

    n_steps = 5 + len(its) + (2 if baselines else 0) + (1 if do_next else 0)
    result: dict[str, Any] = {
        "version": 1,
        "run": str(view.root),
        "name": view.name,
        "method": view.method,
        "guarantee": privacy_facts(view.privacy)[1],
        "guarantee_text": guarantee_text(view.privacy),
        "statement": privacy_facts(view.privacy)[0],
        "noise_multiplier": view.privacy.get("noise_multiplier"),
        "iterations": view.privacy.get("iterations", len(view.iterations())),
        "real": {"path": real_path, "n": len(real_corpus), "fingerprint": corpus_fingerprint(real_corpus),
                 "text_column": view.text_column, "label_columns": labels},
        "synthetic": {"n": len(syn), "source": "synthetic.jsonl" if view.dir.synthetic.exists() else "checkpoint"},
        "seed": seed,
    }
    with steps(n_steps, title="evaluate", quiet=quiet) as prog, single_blas():
        prog.note(f"embedding {len(real_corpus)} real texts")
        real_emb = emb.embed(list(real_corpus.texts))
        prog.step(f"embedding {len(syn)} synthetic texts")
        syn_emb = emb.embed(list(syn.texts))
        result["embedder"] = {"name": emb.name, "dim": int(real_emb.shape[1])}
        prog.step("FID and precision/recall")
        result["fid"] = fid(syn_emb, real_emb).to_dict()
        k = min(knn_k, len(real_corpus) - 1, len(syn) - 1)
        result["precision_recall"] = precision_recall(real_emb, syn_emb, k=k).to_dict() if k >= 1 else None
        result["mauve"] = (
            mauve_score(real_emb, syn_emb, rng=derive(seed, "eval", "mauve")).to_dict() if mauve else None
        )
        result["lengths"] = length_distribution(list(syn.texts), list(real_corpus.texts)).to_dict()

        # ---- downstream / next word, with baselines
        prog.step("baselines")
        train_sets: dict[str, Corpus] = {"synthetic": syn}
        notes: list[str] = []
        if baselines:
            try:
                priv = _private_baseline(view, private, len(syn), derive(seed, "eval", "only-private"))
            except PrivtextError as e:
                priv = None
                notes.append(f"OnlyPrivate baseline skipped: {e}")
            if priv is not None:
                train_sets["only_private"] = priv
            else:
                notes.append("OnlyPrivate baseline skipped: private corpus not available")
            zs = view.zero_shot(len(syn), rng=derive(seed, "eval", "zero-shot"))
            if zs is not None:
                train_sets["zero_shot"] = zs
            else:
                notes.append("zero-shot baseline skipped: no origin == 'random' rows in iteration 0")
        overlap = _overlap(real_corpus, train_sets.get("only_private"), view)
        if overlap:
            msg = (f"the evaluation set shares {overlap} texts with the private corpus: evaluating on private data "
                   "inflates the OnlyPrivate baseline and makes this evaluation a private diagnostic")
            notes.append(msg)
            say(f"[yellow]warning:[/] {msg}")
        result["train_sets"] = {k: len(v) for k, v in train_sets.items()}
        result["notes"] = notes
        if "zero_shot" in train_sets:
            zs = train_sets["zero_shot"]
            zs_emb = emb.embed(list(zs.texts))
            result["fid_zero_shot"] = fid(zs_emb, real_emb).to_dict()
            result["lengths_zero_shot"] = length_distribution(list(zs.texts), list(real_corpus.texts)).to_dict()

        downstream: dict[str, Any] | None = None
        if labels:
            downstream = {"classifiers": list(classifiers), "primary": classifiers[0] if classifiers else None,
                          "results": {}}
            for ci, cname in enumerate(classifiers):
                per_set: dict[str, Any] = {}
                for sname, tset in train_sets.items():
                    prog.note(f"downstream {cname} on {sname}")
                    cols = [c for c in labels if c in tset.labels]
                    if not cols:
                        continue
                    res = downstream_accuracy(
                        tset, real_corpus, label_columns=cols, classifier=cname, embedder=emb,
                        classifier_options=classifier_options.get(cname), rng=derive(seed, "eval", "clf", ci, sname),
                    )
                    per_set[sname] = {c: r.to_dict() for c, r in res.items()}
                downstream["results"][cname] = per_set
                prog.step(f"downstream {cname}")
        result["downstream"] = downstream

        nw: dict[str, Any] | None = None
        if do_next:
            nw = {}
            for sname, tset in train_sets.items():
                prog.note(f"next-word model on {sname}")
                nw[sname] = next_word_accuracy(
                    list(tset.texts), list(real_corpus.texts), rng=derive(seed, "eval", "next-word", sname),
                    **dict(next_word_options or {}),
                ).to_dict()
            prog.step("next-word")
        result["next_word"] = nw

        # ---- per iteration
        per_it: list[dict[str, Any]] = []
        primary = classifiers[0] if classifiers else None
        for t in its:
            prog.note(f"iteration {t}")
            sel = view.selected(t)
            row: dict[str, Any] = {"iteration": t, "n_selected": len(sel)}
            if len(sel) >= 2:
                row["fid"] = fid(emb.embed(list(sel.texts)), real_emb).fid
                if labels and primary is not None:
                    cols = [c for c in labels if c in sel.labels]
                    if cols:
                        res = downstream_accuracy(
                            sel, real_corpus, label_columns=cols, classifier=primary, embedder=emb,
                            classifier_options=classifier_options.get(primary), rng=derive(seed, "eval", "it", t),
                        )
                        row["accuracy"] = {c: r.accuracy for c, r in res.items()}
            st = view.state(t)
            for key in ("sigma", "n_candidates"):
                if key in st:
                    row[key] = st[key]
            per_it.append(row)
            prog.step(f"iteration {t} done")
        result["per_iteration"] = per_it

        # ---- votes, runtime, secrets
        prog.note("votes and runtime")
        votes: dict[str, Any] = {}
        all_its = view.iterations()
        for t in all_its:
            df = view.candidates(t)
            if "votes" not in df.columns:
                continue
            dist = vote_distribution(df, label_columns=view.label_columns, max_points=300)
            if t != all_its[-1]:
                for v in dist.values():
                    v.pop("sorted_votes", None)
            votes[str(t)] = dist
        result["votes"] = votes
        result["runtime"] = runtime_split(view.metrics)
        if secrets:
            zs = train_sets.get("zero_shot")
            result["secrets"] = secret_exposure(
                list(syn.texts), secrets, baseline=list(zs.texts) if zs is not None else None
            ).to_dict()
        else:
            result["secrets"] = None
        prog.step("done")
    result["seconds"] = time.perf_counter() - t0
    result["created"] = _dt.datetime.now().isoformat(timespec="seconds")
    if write:
        atomic_write_json(view.evaluation_path, result)
    return result


def headline(evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """The figures a table row shows: FID, accuracy per label (primary classifier, synthetic), next-word."""
    row: dict[str, Any] = {"fid": (evaluation.get("fid") or {}).get("fid")}
    ds = evaluation.get("downstream") or {}
    prim = ds.get("primary")
    syn = ((ds.get("results") or {}).get(prim) or {}).get("synthetic") or {}
    for c, r in syn.items():
        row[f"acc:{c}"] = r.get("accuracy")
    nw = (evaluation.get("next_word") or {}).get("synthetic")
    if nw:
        row["next_word"] = nw.get("accuracy")
    return row


__all__ = ["DEFAULT_CLASSIFIERS", "EVALUATION", "corpus_fingerprint", "evaluate_run", "guarantee_text", "headline",
           "load_real", "privacy_facts"]
