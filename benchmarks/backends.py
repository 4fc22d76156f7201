"""Throughput of the offline backends on this machine: the n-gram generator and the MiniLM embedder.

    python benchmarks/backends.py [--data ../shared/data] [--quick] [--json OUT.json]

n-gram (one process, pure Python + numpy, no threads): trained on Yelp test.csv (5000 reviews, label-conditioned
on business category and stars), then

* sixty-word samples per second (exactly 60 words, punctuation not counted), unlabeled and label-conditioned;
* ``random()`` through the public API (lengths drawn from the public reviews), samples and words per second;
* fill-in-the-blanks ``variation()`` (mask 0.5) of real reviews, texts per second.

MiniLM (all-MiniLM-L6-v2 from the bundled package): sentences per second for short sentences (~10 words) and for
Yelp reviews (~100 words), with torch's default thread count and with one thread.

Without ../shared/data the n-gram part trains on a synthetic corpus (the figures are then not comparable).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness import ROOT, offline, use_src

use_src()
offline()

from privtext.data import Corpus, load_corpus  # noqa: E402
from privtext.generate import GeneratorContext, LabelInfo, VariationSpec, build_generator  # noqa: E402
from privtext.generate.ngram import _is_word, _Uniforms, tokenize  # noqa: E402


def _words(text: str) -> int:
    """Word tokens (what the generator's lengths count): punctuation is not a word."""
    return sum(1 for t in tokenize(text) if _is_word(t))


def yelp_or_synthetic(data: Path) -> tuple[Corpus, bool]:
    path = data / "yelp" / "test.csv"
    if path.exists():
        return load_corpus(path, label_columns=["label1", "label2"]), True
    rng = np.random.default_rng(0)
    words = "the food service was great bad slow friendly place staff price order time again really".split()
    texts = [" ".join(rng.choice(words, 80)) + "." for _ in range(5000)]
    labels = {"label1": [f"Business Category: {'AB'[i % 2]}" for i in range(5000)],
              "label2": [f"Review Stars: {1 + i % 5}.0" for i in range(5000)]}
    return Corpus.from_texts(texts, labels), False


def bench_ngram(data: Path, quick: bool) -> dict[str, Any]:
    corpus, real = yelp_or_synthetic(data)
    n = 200 if quick else 1000
    out: dict[str, Any] = {"corpus": "yelp/test.csv" if real else "synthetic", "train_texts": len(corpus)}
    t0 = time.perf_counter()
    gen = build_generator({"backend": "ngram"}, GeneratorContext(public=corpus, label_columns=["label1", "label2"]))
    out["train_seconds"] = round(time.perf_counter() - t0, 2)
    out["vocabulary"] = len(gen.lm.vocab)
    out["label_models"] = len(gen.lm.label_models)
    out["global_ngrams"] = gen.lm.global_model.n_entries
    label = LabelInfo(("label1", "label2"), ("Business Category: Restaurants", "Review Stars: 5.0"))

    for name, lab in (("unlabeled", None), ("labeled", label)):
        u = _Uniforms(np.random.default_rng(1))
        mix = gen.lm.mixture(lab)
        t0 = time.perf_counter()
        texts = [gen.lm.sample(u, length=60, exact_length=True, mix=mix) for _ in range(n)]
        dt = time.perf_counter() - t0
        bad = [t for t in texts if _words(t) != 60]
        assert not bad, (len(bad), [(_words(t), t[-60:]) for t in bad[:3]])
        out[f"sixty_word_samples_per_s_{name}"] = round(n / dt, 1)
    out["example_sixty_words"] = texts[0]

    t0 = time.perf_counter()
    rs = gen.random(label, n, rng=np.random.default_rng(2))
    dt = time.perf_counter() - t0
    out["random_api_samples_per_s"] = round(n / dt, 1)
    out["random_api_words_per_s"] = round(sum(map(_words, rs)) / dt, 1)
    out["random_api_mean_words"] = round(float(np.mean([_words(t) for t in rs])), 1)

    src = list(corpus.texts[: (50 if quick else 200)])
    t0 = time.perf_counter()
    gen.variation(src, label, VariationSpec(kind="blank", mask_prob=0.5), rng=np.random.default_rng(3))
    dt = time.perf_counter() - t0
    out["blank_variations_per_s"] = round(len(src) / dt, 1)
    out["blank_mean_words"] = round(float(np.mean([_words(t) for t in src])), 1)
    return out


def bench_minilm(data: Path, quick: bool) -> dict[str, Any]:
    import torch

    from privtext.embed import build_embedder

    path = data / "yelp" / "test.csv"
    reviews = list(load_corpus(path).texts[:(40 if quick else 120)]) if path.exists() else [
        "This place was great and the staff were friendly. " * 10] * (40 if quick else 120)
    rng = np.random.default_rng(0)
    vocab = "the a food service staff was were very quite great slow friendly cold fresh we ordered again".split()
    short = [" ".join(rng.choice(vocab, 10)) + "." for _ in range(200 if quick else 600)]
    out: dict[str, Any] = {"torch_default_threads": torch.get_num_threads(),
                           "review_mean_words": round(float(np.mean([len(t.split()) for t in reviews])), 1)}
    t0 = time.perf_counter()
    emb = build_embedder({"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2"})
    out["load_seconds"] = round(time.perf_counter() - t0, 1)
    emb.embed(short[:16])  # warm-up
    for threads in (None, 1):
        emb.torch_threads = threads  # type: ignore[attr-defined]
        tag = "default_threads" if threads is None else "one_thread"
        for name, texts in (("short", short), ("yelp", reviews)):
            t0 = time.perf_counter()
            emb.embed(texts)
            out[f"{name}_per_s_{tag}"] = round(len(texts) / (time.perf_counter() - t0), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    ap.add_argument("--skip-minilm", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    res: dict[str, Any] = {"cpu_count": os.cpu_count()}
    try:
        res["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    res["ngram"] = bench_ngram(args.data, args.quick)
    for k, v in res["ngram"].items():
        print(f"ngram  {k:34s} {v}")
    if not args.skip_minilm:
        res["minilm"] = bench_minilm(args.data, args.quick)
        for k, v in res["minilm"].items():
            print(f"minilm {k:34s} {v}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
