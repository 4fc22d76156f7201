"""Embedding throughput of the packaged MiniLM: fp32 (the default) vs bf16 weights, and the value of length
sorting.

    HF_HUB_OFFLINE=1 python benchmarks/embed_speed.py [--n 600] [--reps 2] [--batch-size 64]

Texts: Yelp reviews from ``$PRIVTEXT_SHARED_DATA/yelp/dev.csv`` (default ../shared/data) — the first ``--n``
as "private", the next ``--n`` as "candidates". Variants, timed alternately in one process (best of ``--reps``):

* ``fp32``: SentenceTransformerEmbedder() — sentence-transformers sorts each call's texts by length;
* ``fp32-unsorted``: the same model fed one batch per ``encode`` call in input order (what no sorting costs);
* ``bf16``: SentenceTransformerEmbedder(precision="bf16").

Prints throughput (texts/s) and its ratio to fp32, mean and minimum cosine to the fp32 vectors, and vote agreement:
the fraction of private texts whose nearest candidate (exact search, privtext.mechanisms.nn) is the same with the
variant's vectors as with fp32's. Goal for a fast path: ≥ 2× at mean cosine ≥ 0.999 and agreement ≥ 99 %.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data")) / "yelp"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    a = ap.parse_args()
    import pandas as pd

    from privtext.embed.st import SentenceTransformerEmbedder
    from privtext.mechanisms.nn import nearest

    texts = pd.read_csv(DATA / "dev.csv")["text"].astype(str).tolist()[: 2 * a.n]
    fp32 = SentenceTransformerEmbedder(batch_size=a.batch_size)
    bf16 = SentenceTransformerEmbedder(batch_size=a.batch_size, precision="bf16")

    def unsorted(t: list[str]) -> np.ndarray:
        return np.concatenate([fp32.embed(t[i:i + a.batch_size]) for i in range(0, len(t), a.batch_size)])

    variants = {"fp32": fp32.embed, "fp32-unsorted": unsorted, "bf16": bf16.embed}
    for f in variants.values():
        f(texts[:32])
    best = dict.fromkeys(variants, np.inf)
    vecs: dict[str, np.ndarray] = {}
    for _ in range(a.reps):
        for k, f in variants.items():
            t0 = time.perf_counter()
            vecs[k] = f(texts)
            best[k] = min(best[k], time.perf_counter() - t0)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"{len(texts)} Yelp reviews (mean {np.mean([len(t) for t in texts]):.0f} chars), batch {a.batch_size}, "
          f"load {load}")
    ref = vecs["fp32"]
    votes_ref = nearest(ref[: a.n], ref[a.n:], backend="numpy")
    print(f"{'variant':14} {'texts/s':>8} {'× fp32':>7} {'mean cos':>9} {'min cos':>9} {'vote agree':>10}")
    for k, v in vecs.items():
        cos = (v * ref).sum(1)
        agree = (nearest(v[: a.n], v[a.n:], backend="numpy") == votes_ref).mean()
        print(f"{k:14} {len(texts) / best[k]:8.1f} {best['fp32'] / best[k]:7.2f} {cos.mean():9.6f} {cos.min():9.6f} "
              f"{agree:10.4f}")


if __name__ == "__main__":
    main()
