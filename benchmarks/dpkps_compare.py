"""DP-KPS vs Aug-PE with DP-vocabulary prompts, as real runs (``privtext run``), on labelled private / unlabelled
public Yelp data, at an equal number of generator calls; each against its own no-signal control.

* private: the first ``--n-private`` rows of yelp dev.csv, label ``label1`` (business category, 10 classes),
  declared as ``data.label_values`` (the public schema); public: test.csv rows 0–2999 *without labels*;
  test: test.csv rows 4000–4999 (labelled, never seen by a run); CORAL target: rows 3000–3499 (unlabelled).
* DP-KPS: ``--n-syn`` × (1 + variations) sequences = generator calls; Aug-PE (``augpe.vocabulary_prompts``):
  N = ``--n-syn``, one iteration, initial multiplier 1, L = ``variations`` → N + N·L calls (counted from
  metrics.json). Both: uniform label shares, n-gram generator (no label conditioning: the votes/KDE decide),
  MiniLM embeddings.
* accuracy: logistic regression on MiniLM embeddings (privtext.evaluate.downstream, ``embedding-logreg``) and the
  Deep CORAL MLP (privtext.evaluate.coral, λ = 1 against the target slice).
* ε_total ∈ ``--eps``; no-signal control: ε = 1e-6 (DP-KPS) and σ from ε = 1e-6 (Aug-PE: votes and vocabulary
  carry nothing).
* PubMed has no labels (text only), so the labelled-private / unlabelled-public PubMed setting is not run.

    PYTHONPATH=src python benchmarks/dpkps_compare.py [--n-private 1000] [--n-syn 300] [--eps 6,10,15]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data")) / "yelp"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-private", type=int, default=1000)
    ap.add_argument("--n-syn", type=int, default=300)
    ap.add_argument("--variations", type=int, default=2)
    ap.add_argument("--eps", default="6,10,15")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "artifacts" / "dpkps-compare"))
    a = ap.parse_args(argv)
    if not (DATA / "dev.csv").exists():
        print(f"no data at {DATA}")
        return 0
    import numpy as np

    from privtext.config import config_from_dict
    from privtext.data import Corpus, load_corpus, write_corpus
    from privtext.evaluate.coral import CoralOptions, coral_downstream
    from privtext.evaluate.downstream import downstream_accuracy
    from privtext.evaluate.embedding import resolve_embedder
    from privtext.rng import derive
    from privtext.runner import run_config

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = ROOT / "artifacts" / "embed-cache"
    dev, test = _read(DATA / "dev.csv"), _read(DATA / "test.csv")
    priv = dev[: a.n_private]
    write_corpus(Corpus.from_texts([r["text"] for r in priv], {"label1": [r["label1"] for r in priv]}, name="priv"),
                 out / "private.csv")
    write_corpus(Corpus.from_texts([r["text"] for r in test[:3000]], {}, name="public"), out / "public.csv")
    classes = sorted({r["label1"] for r in dev})
    held = test[4000:5000]
    test_c = Corpus.from_texts([r["text"] for r in held], {"label1": [r["label1"] for r in held]}, name="test")
    target = [r["text"] for r in test[3000:3500]]
    emb = resolve_embedder(None, cache_dir=cache)
    base: dict[str, Any] = {
        "seed": a.seed,
        "data": {"private": str(out / "private.csv"), "public": str(out / "public.csv"),
                 "label_values": {"label1": classes}},
        "generator": {"backend": "ngram", "prompt_family": "yelp"},
        "embedder": {"backend": "sentence-transformers", "cache_dir": str(cache)},
        "evolution": {"label_distribution": {"kind": "uniform"}},
    }
    calls = a.n_syn * (1 + a.variations)
    rows = []

    def evaluate(run: Path) -> dict[str, float]:
        syn = load_corpus(run / "synthetic.jsonl", label_columns=["label1"])
        r = downstream_accuracy(syn, test_c, rng=derive(a.seed, "eval"), classifier="embedding-logreg", embedder=emb)
        res = r["label1"]
        c = coral_downstream(list(syn.texts), list(syn.labels["label1"]), list(test_c.texts),
                             list(test_c.labels["label1"]), embedder=emb, rng=derive(a.seed, "coral"),
                             target_texts=target, options=CoralOptions(coral_weight=1.0, epochs=40))
        m = json.loads((run / "private" / "metrics.json").read_text())
        return {"acc": res.accuracy, "coral_acc": c.accuracy, "coral_bal": c.balanced_accuracy,
                "calls": m["counters"].get("llm_prompts", 0), "n": len(syn)}

    for eps in [float(e) for e in a.eps.split(",")] + [1e-6]:
        tag = "control" if eps == 1e-6 else f"eps{eps:g}"
        for method in ("dpkps", "augpe"):
            t0 = time.perf_counter()
            cfg = {**base, "method": method, "output": str(out / f"{method}-{tag}")}
            if method == "dpkps":
                cfg["privacy"] = {"epsilon": eps}
                cfg["evolution"] = {**base["evolution"], "num_samples": calls}
                cfg["dpkps"] = {"vocab_size": 400, "length": 8, "n_features": 256, "bandwidth": 0.3, "threshold": 2.0}
            else:
                cfg["privacy"] = {"epsilon": eps, "delta": 1e-4}
                cfg["evolution"] = {**base["evolution"], "num_samples": a.n_syn, "iterations": 1,
                                    "variations": a.variations, "initial_multiplier": 1, "include_selected": False}
                cfg["augpe"] = {"vocabulary_prompts": True, "vocabulary_size": 400, "vocabulary_terms": 8}
            run = run_config(config_from_dict(cfg), force=True)
            r = {"method": method, "eps": tag, **evaluate(run), "seconds": round(time.perf_counter() - t0, 1)}
            rows.append(r)
            print(json.dumps(r), flush=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    print("| method | ε | calls | synthetic | acc (logreg) | acc (CORAL) |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['eps']} | {r['calls']} | {r['n']} | {100 * r['acc']:.1f} | "
              f"{100 * r['coral_acc']:.1f} |")
    maj = max(np.mean([r['label1'] == c for r in held]) for c in classes)
    print(f"majority class of the test set: {100 * maj:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
