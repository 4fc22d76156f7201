"""Why is a labelled-private / unlabelled-public run's downstream accuracy low?  Figures for one or more run
directories (Yelp business categories, the dpkps_compare.py set-up).

For each run: the synthetic label shares against the private ones, the distribution of the classifier's
predictions on the test slice, per-class recall, and a nearest-centroid check in MiniLM space — the share of
synthetic texts of class c whose nearest *private* class centroid is c (chance: 1/C; "lift" = that share
against the share expected from the centroid assignment of all synthetic texts). The same check on the real test
reviews gives the ceiling of the centroid test. Diagnostics only: reads private labels, never part of a run.

    PYTHONPATH=src python benchmarks/dpkps_diagnose.py RUN_DIR [RUN_DIR ...] [--private CSV]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from harness import ROOT, SHARED, read_rows

DATA = SHARED / "yelp"



def class_centroids(emb: Any, priv_texts: list[str], priv_y: list[str], classes: list[str]) -> tuple[Any, Any]:
    """(the private mean, the unit private class centroids after centring on it): centring removes the shared
    review direction, which dominates the raw centroids."""
    import numpy as np

    xp = emb.embed(priv_texts)
    mu = xp.mean(0)
    cent = np.stack([xp[[i for i, v in enumerate(priv_y) if v == c]].mean(0) for c in classes]) - mu
    return mu, cent / np.linalg.norm(cent, axis=1, keepdims=True)


def nearest_class(emb: Any, centroids: tuple[Any, Any], texts: list[str], classes: list[str]) -> Any:
    """Each text's nearest private class centroid (cosine after centring, :func:`class_centroids`)."""
    import numpy as np

    mu, cent = centroids
    return np.asarray(classes)[np.argmax((emb.embed(texts) - mu) @ cent.T, axis=1)]


def centroid_check(emb: Any, priv_texts: list[str], priv_y: list[str], texts: list[str], y: list[str],
                   classes: list[str]) -> dict[str, Any]:
    """Share of ``texts`` whose nearest private class centroid (cosine, MiniLM) is their own class."""
    import numpy as np

    near = nearest_class(emb, class_centroids(emb, priv_texts, priv_y, classes), texts, classes)
    yy = np.asarray(y)
    per = {c: float((near[yy == c] == c).mean()) if (yy == c).any() else float("nan") for c in classes}
    base = {c: float((near == c).mean()) for c in classes}
    return {"match": float((near == yy).mean()), "per_class": per, "assigned_share": base,
            "mean_per_class": float(np.nanmean(list(per.values())))}


def vote_check(emb: Any, run: Path, priv_t: list[str], priv_y: list[str], classes: list[str]) -> dict[str, Any]:
    """Aug-PE / SecPE-style runs: per label group, the released vote mass, the share of its candidates with a
    positive (released, thresholded) vote, and whether the vote moves the selection towards the class: the share of
    the group's selected candidates whose nearest private centroid is the group's class, against that share in the
    group's whole candidate pool."""
    import numpy as np

    from privtext.evaluate.runinfo import RunView

    view = RunView(run)
    its = view.iterations()
    if not its:
        return {}
    df = view.candidates(its[-1])
    if "votes" not in df.columns or "label1" not in df.columns:
        return {}
    xp = emb.embed(priv_t)
    cent = np.stack([xp[[i for i, v in enumerate(priv_y) if v == c]].mean(0) for c in classes]) - xp.mean(0)
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    near = np.asarray(classes)[np.argmax((emb.embed(list(df["text"])) - xp.mean(0)) @ cent.T, axis=1)]
    out = {}
    for c in classes:
        m = (df["label1"] == c).to_numpy()
        if not m.any():
            continue
        v = df["votes"].to_numpy()[m]
        sel = df["selected"].to_numpy()[m].astype(bool)
        pool_share = float((near[m] == c).mean())
        sel_share = float((near[m][sel] == c).mean()) if sel.any() else float("nan")
        out[c] = {"candidates": int(m.sum()), "selected": int(sel.sum()), "votes": float(v.sum()),
                  "with_votes": float((v > 0).mean()), "pool_nearest_is_class": pool_share,
                  "selected_nearest_is_class": sel_share}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--private", type=Path, default=None, help="private csv (default: RUN/../private.csv)")
    ap.add_argument("--cache", type=Path, default=ROOT / "artifacts" / "embed-cache")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np

    from privtext.data import load_corpus
    from privtext.evaluate.downstream import EmbeddingLogReg
    from privtext.evaluate.embedding import resolve_embedder
    from privtext.rng import derive

    emb = resolve_embedder(None, cache_dir=a.cache)
    test = read_rows(DATA / "test.csv")[4000:5000]
    test_t, test_y = [r["text"] for r in test], [r["label1"] for r in test]
    priv = read_rows(a.private or a.runs[0].parent / "private.csv")
    priv_t, priv_y = [r["text"] for r in priv], [r["label1"] for r in priv]
    classes = sorted(set(priv_y) | set(test_y))
    short = {c: c.replace("Business Category: ", "")[:10] for c in classes}
    pshare = Counter(priv_y)
    out: dict[str, Any] = {"test_labels_match_private": sorted(set(test_y)) == sorted(set(priv_y)),
                           "test_majority": max(Counter(test_y).values()) / len(test_y)}
    ceiling = centroid_check(emb, priv_t, priv_y, test_t, test_y, classes)
    out["real_test_centroid"] = ceiling
    print(f"test: {len(test_y)} reviews, labels ⊆ private labels: {set(test_y) <= set(priv_y)}, majority "
          f"{100 * out['test_majority']:.1f}%; centroid check on REAL test reviews: match "
          f"{100 * ceiling['match']:.1f}%, mean per-class {100 * ceiling['mean_per_class']:.1f}%")
    for run in a.runs:
        syn = load_corpus(run / "synthetic.jsonl", label_columns=["label1"])
        st, sy = list(syn.texts), list(syn.labels["label1"])
        sshare = Counter(sy)
        clf = EmbeddingLogReg(embedder=emb).fit(st, sy, rng=derive(0, "diag"))
        pred = np.asarray(clf.predict(test_t))
        ty = np.asarray(test_y)
        recall = {c: float((pred[ty == c] == c).mean()) for c in classes}
        pshare_pred = Counter(pred.tolist())
        cc = centroid_check(emb, priv_t, priv_y, st, sy, classes)
        print(f"\n== {run.name}: {len(st)} synthetic; logreg acc {100 * (pred == ty).mean():.1f}%, "
              f"balanced {100 * np.mean(list(recall.values())):.1f}%; centroid match {100 * cc['match']:.1f}% "
              f"(chance 10%), mean per-class {100 * cc['mean_per_class']:.1f}%")
        print(f"{'class':11} {'priv%':>6} {'syn%':>6} {'pred%':>6} {'recall':>7} {'centroid':>9} {'assigned':>9}")
        for c in classes:
            print(f"{short[c]:11} {100 * pshare[c] / len(priv_y):6.1f} {100 * sshare[c] / len(sy):6.1f} "
                  f"{100 * pshare_pred[c] / len(pred):6.1f} {100 * recall[c]:7.1f} {100 * cc['per_class'][c]:9.1f} "
                  f"{100 * cc['assigned_share'][c]:9.1f}")
        votes = vote_check(emb, run, priv_t, priv_y, classes)
        if votes:
            print(f"{'votes':11} {'cands':>6} {'sel':>5} {'Σvotes':>8} {'>0 %':>6} {'pool→c %':>9} {'sel→c %':>8}")
            for c, v in votes.items():
                print(f"{short[c]:11} {v['candidates']:6d} {v['selected']:5d} {v['votes']:8.1f} "
                      f"{100 * v['with_votes']:6.1f} {100 * v['pool_nearest_is_class']:9.1f} "
                      f"{100 * v['selected_nearest_is_class']:8.1f}")
        out[run.name] = {"votes": votes, "n": len(st), "acc": float((pred == ty).mean()), "recall": recall,
                         "syn_share": {c: sshare[c] / len(sy) for c in classes},
                         "pred_share": {c: pshare_pred[c] / len(pred) for c in classes}, "centroid": cc}
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "dpkps-diagnose.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
