"""Embedding throughput of the packaged MiniLM by batch size: long texts (Yelp reviews) and short ones
(Banking77 queries), torch fp32 and OpenVINO fp32, timed alternately in one process (best of ``--reps``).

    HF_HUB_OFFLINE=1 python benchmarks/embed_batch.py [--n-long 500] [--n-short 1500] [--sizes 8,16,32,64,256]
        [--runtimes torch,openvino] [--device cpu|cuda] [--reps 3]

Prints texts/s and the ratio to torch fp32 at batch 64 (the default before this benchmark) for each runtime and
batch size, and the smallest cosine of any vector to that reference's (the batch only changes padding, which the
attention mask and mean pooling ignore). What it decides: ``privtext.embed.st.default_batch_size``. On a lent
GPU run it with ``--device cuda --runtimes torch --sizes 64,128,256,512,1024``.
"""

from __future__ import annotations

import argparse
import os
import time

from harness import SHARED, read_texts

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-long", type=int, default=500)
    ap.add_argument("--n-short", type=int, default=1500)
    ap.add_argument("--sizes", default="8,16,32,64,256")
    ap.add_argument("--runtimes", default="torch,openvino")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    from privtext.embed.st import SentenceTransformerEmbedder

    sets = {"long (Yelp)": read_texts(SHARED / "yelp" / "dev.csv", n=a.n_long),
            "short (Banking77)": read_texts(SHARED / "banking77" / "test.csv", n=a.n_short)}
    sizes = [int(s) for s in a.sizes.split(",")]
    embs = {rt: SentenceTransformerEmbedder(batch_size=64, runtime=rt, device=a.device if rt == "torch" else "cpu")
            for rt in a.runtimes.split(",")}
    ref_key = ("torch", 64) if "torch" in embs else (next(iter(embs)), 64)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"embedding by batch size: {os.cpu_count()} CPUs, device {a.device}, load {load}")
    for label, texts in sets.items():
        for e in embs.values():
            e.embed(texts[:32])  # warm-up
        best: dict[tuple[str, int], float] = {}
        vecs = {}
        for _ in range(a.reps):
            for rt, e in embs.items():
                for bs in sizes + ([64] if 64 not in sizes else []):
                    e.batch_size = bs
                    t0 = time.perf_counter()
                    v = e.embed(texts)
                    dt = time.perf_counter() - t0
                    best[(rt, bs)] = min(best.get((rt, bs), float("inf")), dt)
                    vecs[(rt, bs)] = v
        ref = vecs[ref_key]
        print(f"\n{label}: {len(texts)} texts; ratio to {ref_key[0]} fp32 at batch 64")
        print(f"{'runtime':10} {'batch':>5} {'texts/s':>8} {'ratio':>6} {'min cos':>10}")
        for (rt, bs), dt in sorted(best.items()):
            cos = float((vecs[(rt, bs)] * ref).sum(1).min())
            print(f"{rt:10} {bs:5d} {len(texts) / dt:8.1f} {best[ref_key] / dt:6.2f} {cos:10.7f}")


if __name__ == "__main__":
    main()
