"""Do the lm generator's label codes steer what it writes? Two measurements, both on public or synthetic text only.

    PYTHONPATH=src python benchmarks/lm_label_codes.py                                    # the cached Yelp model
    PYTHONPATH=src python benchmarks/lm_label_codes.py --runs artifacts/compare/runs/yelp-n5000/dpft-control-s0 \
        artifacts/compare/runs/yelp-n5000/dpft-s0 artifacts/compare/runs/yelp-n5000/augpe-s0

1. **Loss with the right code against a shuffled one.** The public LM (trained on the labelled public split of
   ``benchmarks/compare_methods.py``'s data, loaded from the cache, or trained when absent) scores ``--n`` real
   held-out reviews (nats per token) with their own codes, with one column's codes permuted across the reviews,
   and with no codes. If a column's code steers the text, shuffling it costs loss.
2. **Agreement of synthetic texts with their codes** (``--runs``): a classifier trained on the labelled public
   reviews (MiniLM embeddings + logistic regression) reads each synthetic review; the share whose predicted label
   is the code it was sampled under, against the share expected if the text ignored its code
   (Σ_v P(pred = v)·P(code = v)).

Run after ``benchmarks/compare_methods.py --configs-only`` (which writes ``artifacts/compare/data``).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
from pathlib import Path

import numpy as np

from harness import ROOT

DATA = ROOT / "artifacts" / "compare" / "data"
COLUMNS = ("label1", "label2")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def code_losses(n: int, seed: int) -> None:
    import torch

    from privtext.generate.lm.build import build_public_lm

    torch.set_num_threads(1)
    pub = _rows(DATA / "yelp-public.csv")
    lm = build_public_lm([r["text"] for r in pub], {c: [r[c] for r in pub] for c in COLUMNS}, device="cpu")
    real = _rows(DATA / "yelp-real.csv")[:n]
    texts = [r["text"] for r in real]
    rng = np.random.default_rng(seed)
    variants = {"own codes": [{c: r[c] for c in COLUMNS} for r in real]}
    for col in COLUMNS:
        perm = rng.permutation(len(real))
        variants[f"{col} shuffled"] = [{**{c: r[c] for c in COLUMNS}, col: real[int(perm[i])][col]}
                                       for i, r in enumerate(real)]
    variants["no codes"] = [{} for _ in real]
    print(f"public LM {lm.info.get('parameters')} parameters (cache {lm.info.get('cache')}); {len(real)} real "
          "reviews, nats/token:")
    base = None
    for name, labels in variants.items():
        loss = lm.loss(texts, labels)
        base = loss if base is None else base
        print(f"  {name:18s} {loss:.4f}  ({loss - base:+.4f})")


def agreement(runs: list[str]) -> None:
    from sklearn.linear_model import LogisticRegression

    from privtext.config import EmbedderConfig
    from privtext.embed import build_embedder

    emb = build_embedder(EmbedderConfig())
    pub = _rows(DATA / "yelp-public.csv")
    x = emb.embed([r["text"] for r in pub])
    clfs = {c: LogisticRegression(max_iter=2000).fit(x, [r[c] for r in pub]) for c in COLUMNS}
    for run in runs:
        with open(Path(run) / "synthetic.jsonl", encoding="utf-8") as f:
            syn = [json.loads(line) for line in f if line.strip()]
        s = emb.embed([r["text"] for r in syn])
        for col in COLUMNS:
            pred = clfs[col].predict(s)
            codes = [r[col] for r in syn]
            n = len(codes)
            pp, pc = collections.Counter(pred), collections.Counter(codes)
            chance = sum(pp[v] / n * pc[v] / n for v in pc)
            agree = float(np.mean([p == c for p, c in zip(pred, codes, strict=True)]))
            print(f"  {Path(run).name:22s} {col}: agreement {agree:.3f}, {chance:.3f} if the text ignored its code "
                  f"(n = {n})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=150, help="real reviews scored")
    ap.add_argument("--seed", type=int, default=0, help="seed of the permutations")
    ap.add_argument("--runs", nargs="*", default=[], help="run folders whose synthetic.jsonl to read")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not (DATA / "yelp-public.csv").exists():
        raise SystemExit("run benchmarks/compare_methods.py --dataset yelp --configs-only first (writes the data)")
    code_losses(args.n, args.seed)
    if args.runs:
        agreement(args.runs)


if __name__ == "__main__":
    main()
