"""DP-KPS on PubMed abstracts as a one-class corpus (no labels: ``shared/data/pubmed`` holds text only), against
its no-signal control (ε = 10⁻⁶), as runs (``method: dpkps``).

* private: pubmed dev.csv (1435 abstracts, no label column: one class);
* public, unlabelled: test.csv rows 0–1999 (the vocabulary and the n-gram generator);
* real reference for the metrics: test.csv rows 2000–2999 (never seen by a run);
* metrics: FID of MiniLM embeddings (synthetic vs the reference), and next-word accuracy of a small LSTM trained
  on the synthetic texts and tested on the reference (privtext.evaluate.nextword); the same for the public
  texts themselves (what the generator was trained on) as a ceiling of this set-up.

    PYTHONPATH=src python benchmarks/dpkps_pubmed.py [--calls 300] [--eps 10] [--seeds 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT, SHARED, missing, offline, read_texts

DATA = SHARED / "pubmed"



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--eps", default="10")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--steps", type=int, default=300, help="next-word LSTM training steps")
    ap.add_argument("--out", default=str(ROOT / "artifacts" / "dpkps-pubmed"))
    a = ap.parse_args(argv)
    offline()
    if missing(DATA / "dev.csv", "PubMed"):
        return 0
    from privtext.config import config_from_dict
    from privtext.data import Corpus, load_corpus, write_corpus
    from privtext.evaluate.embedding import resolve_embedder
    from privtext.evaluate.fid import fid
    from privtext.evaluate.nextword import next_word_accuracy
    from privtext.rng import derive
    from privtext.runner import run_config

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = ROOT / "artifacts" / "embed-cache"
    dev, test = read_texts(DATA / "dev.csv"), read_texts(DATA / "test.csv")
    write_corpus(Corpus.from_texts(dev, {}, name="priv"), out / "private.csv")
    public = test[:2000]
    write_corpus(Corpus.from_texts(public, {}, name="public"), out / "public.csv")
    ref = test[2000:3000]
    emb = resolve_embedder(None, cache_dir=cache)
    ref_emb = emb.embed(ref)

    def metrics(texts: list[str], seed: int, key: str) -> dict[str, float]:
        f = fid(emb.embed(texts), ref_emb).fid
        nw = next_word_accuracy(texts, ref, rng=derive(seed, "nextword", key), steps=a.steps)
        return {"fid": float(f), "next_word_acc": float(nw.accuracy)}

    rows: list[dict[str, Any]] = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for eps in [float(e) for e in a.eps.split(",")] + [1e-6]:
            tag = "control" if eps == 1e-6 else f"{eps:g}"
            t0 = time.perf_counter()
            cfg = {"seed": seed, "method": "dpkps", "output": str(out / f"s{seed}" / f"dpkps-{tag}"),
                   "data": {"private": str(out / "private.csv"), "public": str(out / "public.csv")},
                   "generator": {"backend": "ngram", "prompt_family": "pubmed"},
                   "embedder": {"backend": "sentence-transformers", "cache_dir": str(cache)},
                   "privacy": {"epsilon": eps}, "evolution": {"num_samples": a.calls},
                   "dpkps": {"vocab_size": 400, "length": 8, "n_features": 256, "bandwidth": 0.3, "threshold": 2.0}}
            run = run_config(config_from_dict(cfg), force=True)
            syn = load_corpus(run / "synthetic.jsonl")
            kp = [json.loads(x)["keyphrases"] for x in (run / "keyphrases.jsonl").read_text().splitlines()]
            r = {"eps": tag, "seed": seed, "n": len(syn), **metrics(list(syn.texts), seed, tag),
                 "example_sequence": "; ".join(kp[0]), "seconds": round(time.perf_counter() - t0, 1)}
            rows.append(r)
            print(json.dumps(r), flush=True)
        rows.append({"eps": "public texts", "seed": seed, "n": a.calls,
                     **metrics(public[: a.calls], seed, "public")})
        print(json.dumps(rows[-1]), flush=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    print("| run | texts | FID ↓ | next-word acc ↑ |\n|---|---|---|---|")
    for tag in dict.fromkeys(r["eps"] for r in rows):
        rs = [r for r in rows if r["eps"] == tag]
        fm = statistics.fmean(r["fid"] for r in rs)
        nm = statistics.fmean(r["next_word_acc"] for r in rs)
        sd = (f" ± {statistics.stdev(r['fid'] for r in rs):.4f}", f" ± {100 * statistics.stdev(r['next_word_acc'] for r in rs):.2f}") \
            if len(rs) > 1 else ("", "")
        print(f"| {tag} | {rs[0]['n']} | {fm:.4f}{sd[0]} | {100 * nm:.2f}{sd[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
