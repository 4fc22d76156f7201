"""Does a label-aware preference probe pick sibling candidates that teach a classifier more? (issue 38)

Stop 44 left one reason for ``kind: rerank`` not raising accuracy unmeasured: its probe has one w for every label,
so it may favour texts typical of the corpus rather than of their label. This offline check measures it before
any run. Three probes are fitted (:func:`privtext.learn.rerank.fit_preference`) to the kept pairs
(``pairs.jsonl``: generated texts, released counts, the pair's label group) of the ``--train`` runs:

* ``none``: one w (``rerank.labels: none``; the score of x is w·e(x));
* ``groups``: w plus one w_g for each label group g (the features of a pair are [d, d ⊗ onehot(g)], one
  regularisation for both blocks; the score of x in group g is (w + w_g)·e(x));
* ``columns``: w plus one w_a for each value a of each label column (category and stars apart), so that a group's
  term shares pairs with every group of the same category or stars.

The features and scores are the learner's own (:func:`privtext.learn.rerank.design`, ``label_tags`` and
:meth:`~privtext.learn.rerank.RerankingGenerator.direction`).

For the last iteration of each ``--score`` run (runs without learning, other seeds) the candidates of every
parent are split into random sibling pairs, ``--splits`` times over; each probe keeps one of each pair, and a
coin does too. Each half is scored by FID against the real set, and by the accuracy on the real set of a
logistic regression (``embedding-logreg``'s C = 3) trained on the half's embeddings and labels, for each label
column. A probe that helps accuracy gives its half a higher accuracy than the coin's and than ``none``'s.
The held-out pair accuracy of each probe (train on all but one ``--train`` run, test on it) is printed first.
Generated text only.

    PYTHONPATH=src python benchmarks/learn_rerank_labels.py \\
        --train artifacts/learn_yelp/runs/augpe-dpo-t4-combined-s{0,1,2,3} \\
        --score artifacts/learn_yelp/runs/augpe-none-t4-s{5,6,7} --real artifacts/compare/data/yelp-real.csv
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

COLUMNS = ("label1", "label2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="+", type=Path, required=True)
    ap.add_argument("--score", nargs="+", type=Path, required=True)
    ap.add_argument("--real", type=Path, required=True)
    ap.add_argument("--splits", type=int, default=10)
    args = ap.parse_args()
    from harness import offline, read_rows, use_src
    from learn_rerank_gate import parents_of, sibling_pairs

    use_src()
    offline()
    import pyarrow.parquet as pq
    from sklearn.linear_model import LogisticRegression

    from privtext.data.labels import LabelInfo
    from privtext.evaluate.embedding import resolve_embedder
    from privtext.evaluate.fid import fid
    from privtext.learn.rerank import RerankingGenerator, design, fit_preference, label_tags

    emb = resolve_embedder(None)
    modes = ("none", "groups", "columns")
    pairs, run_of = [], []
    for r, run in enumerate(args.train):
        ckpt = run / "private" / "checkpoints"
        for f in sorted(ckpt.glob("iter_*/learn/pairs.jsonl")):
            t = pq.read_table(f.parent.parent / "candidates.parquet", columns=["group", *COLUMNS]).to_pydict()
            labels = {g: LabelInfo(COLUMNS, (a, b)) for g, a, b in zip(t["group"], t["label1"], t["label2"],
                                                                        strict=True)}
            for line in f.read_text(encoding="utf-8").splitlines():
                p = json.loads(line)
                p["info"] = labels[p["group"]]
                pairs.append(p)
                run_of.append(r)
    e = np.asarray(emb.embed([p["chosen"] for p in pairs] + [p["rejected"] for p in pairs]), dtype=np.float64)
    d = e[:len(pairs)] - e[len(pairs):]
    run_of_a = np.asarray(run_of)
    tags = {m: [label_tags(p["info"], m) for p in pairs] for m in modes}
    print(f"{len(pairs)} pairs from {len(args.train)} runs; {len({p['info'] for p in pairs})} label groups")
    print("\n| labels | held-out pair accuracy (leave one run out) |\n|---|---|")
    for m in modes:
        accs = []
        for r in range(len(args.train)):
            tr = np.flatnonzero(run_of_a != r)
            t_tr = [tags[m][i] for i in tr]
            vocab = tuple(sorted({a for t in t_tr for a in t}))
            w, _ = fit_preference(design(d[tr], t_tr, vocab))
            gen = RerankingGenerator(None, emb, 2)
            gen.install(w, vocab, m)
            te = np.flatnonzero(run_of_a == r)
            accs.append(float(np.mean([d[i] @ gen.direction(pairs[i]["info"]) > 0 for i in te])))
        print(f"| {m} | {np.mean(accs):.3f} ({', '.join(f'{a:.3f}' for a in accs)}) |", flush=True)
    probes = {}
    for m in modes:
        vocab = tuple(sorted({a for t in tags[m] for a in t}))
        w, info = fit_preference(design(d, tags[m], vocab))
        probes[m] = RerankingGenerator(None, emb, 2)
        probes[m].install(w, vocab, m)
        print(f"{m}: C {info['C']:.3g}, {len(w)} weights")

    rows = read_rows(args.real)
    real = np.asarray(emb.embed([r["text"] for r in rows]), dtype=np.float64)
    truth = {c: np.asarray([r[c] for r in rows]) for c in COLUMNS}
    rng = np.random.default_rng(0)
    names = [*probes, "coin"]
    total: dict[str, dict[str, list[float]]] = {n: {"fid": [], **{c: [] for c in COLUMNS}} for n in names}
    print("\n| run | candidates | half | FID | " + " | ".join(f"{c} %" for c in COLUMNS) + " |")
    print("|---|---|---|---|" + "---|" * len(COLUMNS))
    for run in args.score:
        it = sorted((run / "private" / "checkpoints").glob("iter_*"))[-1]
        t = pq.read_table(it / "candidates.parquet").to_pydict()
        c = np.load(it / "embeddings.npy").astype(np.float64)
        lab = {col: np.asarray(t[col]) for col in COLUMNS}
        infos = [LabelInfo(COLUMNS, (a, b)) for a, b in zip(t["label1"], t["label2"], strict=True)]
        scores = {m: np.asarray([c[i] @ g.direction(infos[i]) for i in range(len(c))]) for m, g in probes.items()}
        parents = parents_of(t)
        res: dict[str, dict[str, list[float]]] = {n: {"fid": [], **{col: [] for col in COLUMNS}} for n in names}
        for _ in range(args.splits):
            pick: dict[str, list[int]] = {n: [] for n in names}
            for a, b in sibling_pairs(parents, rng):
                for m, s in scores.items():
                    pick[m].append(a if s[a] >= s[b] else b)
                pick["coin"].append(a if rng.random() < 0.5 else b)
            for n in names:
                sel = np.asarray(pick[n])
                res[n]["fid"].append(fid(c[sel], real).fid)
                for col in COLUMNS:
                    clf = LogisticRegression(C=3.0, max_iter=3000).fit(c[sel], lab[col][sel])
                    res[n][col].append(100 * float(np.mean(clf.predict(real) == truth[col])))
        for n in names:
            for k, v in res[n].items():
                total[n][k] += v
            cells = " | ".join(f"{np.mean(v):.4f}" if k == "fid" else f"{np.mean(v):.1f} ± {np.std(v):.1f}"
                               for k, v in res[n].items())
            print(f"| {run.name} | {len(c)} | {n} | {cells} |", flush=True)
    print("\n| half (every run) | FID | " + " | ".join(f"{c} %" for c in COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for n in names:
        cells = " | ".join(f"{np.mean(v):.4f}" if k == "fid" else f"{np.mean(v):.2f}" for k, v in total[n].items())
        print(f"| {n} | {cells} |")


if __name__ == "__main__":
    main()
