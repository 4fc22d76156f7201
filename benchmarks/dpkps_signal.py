"""Where does DP-KPS's class signal get lost?  One lever at a time, on the library pipeline (no run directory),
in the dpkps_compare.py acceptance set-up: Yelp business category (10 classes), private = the first
``--n-private`` rows of dev.csv (labelled), public = test.csv rows 0–2999 (unlabelled: vocabulary and n-gram
generator), test = rows 4000–4999, ``--calls`` sequences with the true private label shares (treated as public,
as ``--labels given`` does), ε_total = ``--eps`` split 1/6 vocabulary, 5/6 sketches.

Measures per setting (all in %, balanced chance 10 %):

* ``seq_nb`` — the sampler's signal before any generator: a naive-Bayes classifier of the *private* per-class
  Ṽ-term counts (diagnostics only: it reads private labels) labels each sampled sequence; mean per-class recall;
* ``seq_centroid`` — the joined sequence's MiniLM embedding nearest its own class's private centroid;
* ``centroid`` — the same for the generated text (dpkps_diagnose.centroid_check);
* ``logreg_bal`` / ``wlogreg_bal`` — balanced accuracy of (class-weighted) logistic regression on MiniLM
  embeddings of the synthetic texts, on the test slice.

``--settings`` is a JSON list of {"name": ..., "params": {DPKPSOptions overrides}, "ngram": {NgramOptions
overrides}, "eps": ε (optional)}; ``--control`` adds each setting at ε = 10⁻⁶.

    PYTHONPATH=src python benchmarks/dpkps_signal.py --seeds 0,1 --settings '[{"name": "default"}]'
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dpkps_diagnose import class_centroids, nearest_class
from harness import ROOT, SHARED, missing, offline, read_rows

DATA = SHARED / "yelp"
METRICS = ("seq_nb", "seq_centroid", "centroid", "logreg_bal", "wlogreg_bal", "wlogreg_acc", "logreg_acc")


class Setup:
    def __init__(self, n_private: int, calls: int) -> None:
        import numpy as np

        from privtext.data.vocabulary import vocabulary_from_corpus
        from privtext.evaluate.embedding import resolve_embedder
        from privtext.mechanisms.labels import allocate

        dev, test = read_rows(DATA / "dev.csv"), read_rows(DATA / "test.csv")
        priv = dev[:n_private]
        self.priv_t = [r["text"] for r in priv]
        self.priv_y = [r["label1"] for r in priv]
        self.public = [r["text"] for r in test[:3000]]
        held = test[4000:5000]
        self.test_t, self.test_y = [r["text"] for r in held], [r["label1"] for r in held]
        self.classes = sorted({r["label1"] for r in dev})
        shares = Counter(self.priv_y)
        counts = allocate(np.array([shares[c] for c in self.classes], dtype=float), calls, min_each=1)
        self.counts = {c: int(n) for c, n in zip(self.classes, counts, strict=True)}
        self.vocab = vocabulary_from_corpus(self.public, min_count=3, max_terms=5000)
        self.emb = resolve_embedder(None, cache_dir=ROOT / "artifacts" / "embed-cache")
        self.centroids = class_centroids(self.emb, self.priv_t, self.priv_y, self.classes)
        self._gens: dict[str, Any] = {}

    def generator(self, opts: dict[str, Any]) -> Any:
        from privtext.generate.ngram import NgramGenerator, NgramOptions
        from privtext.generate.prompts import load_family

        key = json.dumps(opts, sort_keys=True)
        if key not in self._gens:
            self._gens[key] = NgramGenerator(public=self.public, options=NgramOptions(**opts),
                                             family=load_family("yelp"))
        return self._gens[key]

    def centroid(self, texts: list[str], y: list[str]) -> float:
        import numpy as np

        near = nearest_class(self.emb, self.centroids, texts, self.classes)
        yy = np.asarray(y)
        return float(np.mean([(near[yy == c] == c).mean() for c in self.classes if (yy == c).any()]))

    def seq_nb(self, terms: tuple[str, ...], seqs: list[tuple[str, ...]], y: list[str]) -> float:
        """Naive Bayes of the private class-term counts (diagnostics) on the sampled sequences."""
        import numpy as np

        from privtext.data.vocabulary import PublicVocabulary

        v = PublicVocabulary(tuple(terms))
        found = v.matcher().find_all(self.priv_t, max_terms=64)
        cnt = np.ones((len(self.classes), len(terms)))
        ci = {c: i for i, c in enumerate(self.classes)}
        for ids, lab in zip(found, self.priv_y, strict=True):
            cnt[ci[lab], ids] += 1
        logp = np.log(cnt / cnt.sum(1, keepdims=True))
        tid = {t: i for i, t in enumerate(terms)}
        pred = [self.classes[int(np.argmax(logp[:, [tid[t] for t in s]].sum(1)))] for s in seqs]
        yy, pp = np.asarray(y), np.asarray(pred)
        return float(np.mean([(pp[yy == c] == c).mean() for c in self.classes if (yy == c).any()]))


def run_setting(s: Setup, setting: dict[str, Any], eps: float, seed: int, seq_only: bool = False) -> dict[str, Any]:
    import numpy as np

    from privtext.data import Corpus
    from privtext.evaluate.downstream import downstream_accuracy
    from privtext.methods.dpkps.core import DPKPSOptions, dpkps_sequences
    from privtext.rng import derive, noise_rng

    kw = {"vocab_size": 400, "length": 8, "n_features": 256, "bandwidth": 0.3, "threshold": 2.0,
          **setting.get("params", {})}
    params = DPKPSOptions.from_total(eps, **kw)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    kp = dpkps_sequences(s.priv_t, s.priv_y, classes=s.classes, public_vocabulary=s.vocab, embedder=s.emb,
                         params=params, n_per_class=s.counts, rng=rng,
                         noise_rng=lambda key: noise_rng(seed, key, reproducible=True))  # a benchmark: seeded
    t1 = time.perf_counter()
    y = list(kp.labels)
    if seq_only:
        return {"seq_nb": s.seq_nb(kp.terms, list(kp.sequences), y), "t_seq": round(t1 - t0, 1)}
    gen = s.generator(setting.get("ngram", {}))
    texts = gen.seeded([list(q) for q in kp.sequences], "review", rng=derive(seed, "gen"))
    t2 = time.perf_counter()
    y = list(kp.labels)
    row: dict[str, Any] = {"seq_nb": s.seq_nb(kp.terms, list(kp.sequences), y),
                           "seq_centroid": s.centroid(["; ".join(q) for q in kp.sequences], y),
                           "centroid": s.centroid(texts, y)}
    syn = Corpus.from_texts(texts, {"label1": y}, name="syn")
    test = Corpus.from_texts(s.test_t, {"label1": s.test_y}, name="test")
    r = downstream_accuracy(syn, test, rng=derive(seed, "eval"), classifier="embedding-logreg",
                            embedder=s.emb)["label1"]
    w = downstream_accuracy(syn, test, rng=derive(seed, "eval"), classifier="embedding-logreg", embedder=s.emb,
                            classifier_options={"class_weight": "balanced"})["label1"]
    row.update(logreg_bal=r.balanced_accuracy, logreg_acc=r.accuracy, wlogreg_bal=w.balanced_accuracy,
               wlogreg_acc=w.accuracy, t_seq=round(t1 - t0, 1), t_gen=round(t2 - t1, 1))
    per_class: dict[str, list[str]] = {}
    for q, lab in zip(kp.sequences, y, strict=True):
        per_class.setdefault(lab, []).extend(q)
    row["top_terms"] = {c.replace("Business Category: ", "")[:12]: [t for t, _ in Counter(v).most_common(6)]
                        for c, v in per_class.items()}
    row["example"] = texts[-1][:300]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-private", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=450)
    ap.add_argument("--eps", type=float, default=10.0)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--settings", default='[{"name": "default"}]')
    ap.add_argument("--control", action="store_true", help="also run every setting at ε = 1e-6")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--seq-only", action="store_true", help="only the sequences' naive-Bayes check (no generator)")
    ap.add_argument("--out", default=str(ROOT / "artifacts" / "dpkps-signal.json"))
    a = ap.parse_args(argv)
    offline()
    if missing(DATA / "dev.csv", "Yelp data"):
        return 0
    settings = json.loads(a.settings)
    s = Setup(a.n_private, a.calls)
    rows = []
    for setting in settings:
        for eps in [setting.get("eps", a.eps)] + ([1e-6] if a.control else []):
            for seed in [int(x) for x in a.seeds.split(",")]:
                r = {"name": setting["name"], "eps": eps, "seed": seed,
                     **run_setting(s, setting, eps, seed, a.seq_only)}
                rows.append(r)
                show = {k: (round(100 * v, 1) if k in METRICS else v) for k, v in r.items()
                        if a.verbose or k not in ("top_terms", "example")}
                print(json.dumps(show, ensure_ascii=False), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(rows, indent=1))
    print("\n| setting | ε | seeds | " + " | ".join(METRICS) + " |")
    print("|" + "---|" * (3 + len(METRICS)))
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["name"], r["eps"]), []).append(r)
    for (name, eps), rs in groups.items():
        cells = []
        for k in METRICS:
            v = [100 * r[k] for r in rs if k in r]
            if not v:
                cells.append("–")
                continue
            cells.append(f"{statistics.fmean(v):.1f}" + (f" ± {statistics.stdev(v):.1f}" if len(v) > 1 else ""))
        print(f"| {name} | {eps:g} | {len(rs)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
