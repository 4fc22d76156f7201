"""Fast downstream classifiers on real Yelp reviews: train on N real reviews (dev.csv), test on the test split.

This is the "OnlyPrivate" reference of the downstream table: how well the fast classifiers do when trained on
real data, per label column (business category: 10 classes; star rating: 5 classes), against the majority class
and uniform chance. MiniLM embeddings are cached under ``artifacts/embed-cache`` (SQLite, privtext.embed's cache),
so a rerun does not embed again; the first run embeds ~3000 reviews (~2 min at ~28 reviews/s on 2 cores).

    /work/venv/bin/python benchmarks/downstream_yelp.py [--n-train 2000] [--n-test 1000] [--seed 0]

Also reports the FID and kNN precision/recall between the training reviews and the test reviews (two real
samples: the floor a synthetic set can reach at these sizes), and with ``--pubmed`` the next-word prediction
accuracy of the default small LM trained on real PubMed abstracts (dev.csv) and scored on test abstracts.

Prints a table and writes ``artifacts/downstream_yelp.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from harness import ROOT, SHARED, missing

DATA = SHARED / "yelp"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-train", type=int, default=2000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", default="sentence-transformers", help="backend[:model] (default MiniLM)")
    ap.add_argument("--classifiers", default="tfidf-logreg,embedding-logreg")
    ap.add_argument("--pubmed", action="store_true", help="also measure next-word accuracy on PubMed")
    ap.add_argument("--pubmed-test", type=int, default=300, help="test abstracts for --pubmed")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "downstream_yelp.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if missing(DATA / "dev.csv", "Yelp data"):
        return 0

    from privtext.data import load_corpus, sample
    from privtext.evaluate import (
        downstream_accuracy,
        fid,
        next_word_accuracy,
        precision_recall,
        resolve_embedder,
    )
    from privtext.rng import derive

    cols = ["label1", "label2"]
    dev = load_corpus(DATA / "dev.csv", label_columns=cols)
    test = load_corpus(DATA / "test.csv", label_columns=cols)
    train = sample(dev, args.n_train, rng=derive(args.seed, "bench", "train"))
    held = sample(test, args.n_test, rng=derive(args.seed, "bench", "test"))
    emb = resolve_embedder(args.embedder, cache_dir=ROOT / "artifacts" / "embed-cache")
    t0 = time.perf_counter()
    emb.embed(list(train.texts) + list(held.texts), show_progress=True)
    embed_s = time.perf_counter() - t0
    print(f"embedded {len(train) + len(held)} reviews with {emb.name} in {embed_s:.1f}s (cached afterwards)")

    results: dict[str, dict[str, dict[str, float]]] = {}
    for i, cname in enumerate(c for c in args.classifiers.split(",") if c):
        t = time.perf_counter()
        res = downstream_accuracy(train, held, classifier=cname, embedder=emb, rng=derive(args.seed, "bench", i))
        secs = time.perf_counter() - t
        results[cname] = {c: {"accuracy": r.accuracy, "balanced_accuracy": r.balanced_accuracy,
                              "macro_f1": r.macro_f1, "majority_accuracy": r.majority_accuracy,
                              "chance": 1.0 / len(set(held.labels[c])), "seconds": secs} for c, r in res.items()}
    print(f"\ntrain on {len(train)} real dev reviews, test on {len(held)} test reviews (seed {args.seed})")
    print(f"{'classifier':18} {'label':7} {'accuracy':>9} {'balanced':>9} {'macro-F1':>9} {'majority':>9} "
          f"{'chance':>7} {'fit+pred s':>10}")
    for cname, per in results.items():
        for c, r in per.items():
            print(f"{cname:18} {c:7} {100 * r['accuracy']:8.2f}% {100 * r['balanced_accuracy']:8.2f}% "
                  f"{100 * r['macro_f1']:8.2f}% {100 * r['majority_accuracy']:8.2f}% {100 * r['chance']:6.1f}% "
                  f"{r['seconds']:10.1f}")
    a, b = emb.embed(list(train.texts)), emb.embed(list(held.texts))
    ref = {"fid": fid(a, b).fid, **{k: v for k, v in precision_recall(b, a, k=3).to_dict().items()
                                    if k in ("precision", "recall")}}
    print(f"\nreal vs real ({len(train)} dev vs {len(held)} test reviews): FID {ref['fid']:.4f}, "
          f"precision {100 * ref['precision']:.1f}%, recall {100 * ref['recall']:.1f}% (k=3)")
    nw = None
    pub = DATA.parent / "pubmed"
    if args.pubmed and (pub / "dev.csv").exists():
        ptrain = load_corpus(pub / "dev.csv")
        ptest = sample(load_corpus(pub / "test.csv"), args.pubmed_test, rng=derive(args.seed, "bench", "pubmed"))
        t = time.perf_counter()
        r = next_word_accuracy(list(ptrain.texts), list(ptest.texts), rng=derive(args.seed, "bench", "nw"))
        nw = {**r.to_dict(), "seconds": time.perf_counter() - t, "n_train": len(ptrain), "n_test": len(ptest)}
        print(f"\nPubMed next-word ({r.model}, {r.steps} steps, vocab {r.vocab_size}): trained on {len(ptrain)} real "
              f"abstracts, tested on {len(ptest)}: accuracy {100 * r.accuracy:.2f}% (in-vocabulary "
              f"{100 * r.accuracy_in_vocab:.2f}%, OOV {100 * r.oov_rate:.1f}%, most-frequent-word "
              f"{100 * r.unigram_accuracy:.2f}%) in {nw['seconds']:.0f}s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"n_train": len(train), "n_test": len(held), "seed": args.seed,
                                    "embedder": emb.name, "embed_seconds": embed_s, "results": results,
                                    "real_vs_real": ref, "pubmed_next_word": nw}, indent=2) + "\n",
                        encoding="utf-8")
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
