"""The lm generator on the Yelp public split: training time and tokens/s, sampling tokens/s, and a few samples.

    PYTHONPATH=src python benchmarks/lm_generator.py [--threads 2] [--set train_tokens=300000 ...]
                                                     [--samples 256] [--cache-dir DIR] [--retrain]

The public split is the one the Yelp runs use (examples/yelp-augpe.yaml, seed 0): yelp/test.csv minus the
1000-review held-out slice (``split_corpus(test, [4000, 1000], seed=0)``), labels ``label1`` (category) and
``label2`` (stars) as control codes. Training uses the generator's defaults (``--set key=value`` overrides an
option); ``--retrain`` trains even when the cache holds the model (the default cache folder is
``artifacts/lm-cache``, so the user's cache is left alone).

Printed: the load average before and after (the machine may be shared: compare CPU-seconds, not wall time, across
loads), the model and corpus sizes, training wall and CPU seconds, trained tokens per wall and per CPU second, the
validation loss before and after, then sampling: ``--samples`` texts from ``random`` (label codes, free format)
and as many blank-filling variations (mask ½), generated tokens per second for each. Writes
``artifacts/lm_generator.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness import ROOT, SHARED, key_values, missing

DATA = SHARED / "yelp"


def yelp_public_split(seed: int = 0) -> tuple[Any, Any]:
    """(public, held-out) as a run with ``public_holdout: 1000`` and this seed splits yelp/test.csv."""
    from privtext.data import load_corpus
    from privtext.data.split import split_corpus

    test = load_corpus(DATA / "test.csv", label_columns=["label1", "label2"], name="public")
    public, held = split_corpus(test, [len(test) - 1000, 1000], seed=seed)
    return public, held


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an lm generator option")
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--cache-dir", type=Path, default=ROOT / "artifacts" / "lm-cache")
    ap.add_argument("--retrain", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "lm_generator.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if missing(DATA / "test.csv", "Yelp data"):
        return 0
    import torch

    from privtext.generate import GeneratorContext, LabelInfo, VariationSpec, build_generator

    if args.threads:
        torch.set_num_threads(args.threads)
    public, _ = yelp_public_split()
    opts: dict[str, Any] = {"backend": "lm", "cache_dir": str(args.cache_dir), **key_values(args.set)}
    if args.retrain:
        opts["cache"] = False
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    gen = build_generator(opts, GeneratorContext(public=public, label_columns=("label1", "label2"), family="yelp"))
    build_s = time.perf_counter() - t0
    load1 = os.getloadavg()
    info = gen.info
    tr = info.get("train", {})
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after {load1[0]:.2f} {load1[1]:.2f} "
          f"{load1[2]:.2f} (2 cores; torch threads {torch.get_num_threads()})")
    print(f"model: {info['parameters'] / 1e6:.2f} M parameters {info['shape']}, precision {info['precision']}")
    print(f"public: {info['public_texts']} texts ({info['train_texts']} train, {info['validation_texts']} validation), "
          f"cache {info['cache']} ({info.get('cache_dir')})")
    print(f"training: {tr.get('steps')} steps, {tr.get('tokens', 0):,} tokens ({info['epochs']} epochs) in "
          f"{tr.get('seconds', 0):.0f} s wall / {tr.get('cpu_seconds', 0):.0f} CPU-s: "
          f"{tr.get('tokens_per_second', 0):,.0f} tokens/s wall, "
          f"{tr.get('tokens', 0) / max(tr.get('cpu_seconds', 1e-9), 1e-9):,.0f} tokens per CPU-s; "
          f"build {build_s:.0f} s in this process")
    print(f"validation loss (nats/token): {info['validation_loss_before']:.3f} untrained → "
          f"{info['validation_loss_after']:.3f} trained")
    rng = np.random.default_rng(0)
    res: dict[str, Any] = {"load_before": load0, "load_after": load1, "build_seconds": build_s, "info": info,
                           "threads": torch.get_num_threads(), "options": opts}
    cats = sorted(set(public.labels["label1"]))
    labels = [LabelInfo(("label1", "label2"), (cats[i % len(cats)], "Review Stars: 5.0")) for i in range(8)]
    out: list[str] = []
    for name, fn in (
            ("random", lambda lab, k: gen.random(lab, k, rng=rng)),
            ("blank", lambda lab, k: gen.variation(list(public.texts[:k]), lab,
                                                   VariationSpec(kind="blank", mask_prob=0.5), rng=rng))):
        before = gen.stats.completion_tokens
        c0, t0 = time.process_time(), time.perf_counter()
        texts = []
        for lab in labels:
            texts += fn(lab, max(1, args.samples // len(labels)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        toks = gen.stats.completion_tokens - before
        res[f"sample_{name}"] = {"texts": len(texts), "tokens": toks, "seconds": wall, "cpu_seconds": cpu,
                                 "tokens_per_second": toks / wall, "texts_per_second": len(texts) / wall}
        print(f"sampling {name}: {len(texts)} texts, {toks:,} tokens in {wall:.1f} s ({cpu:.1f} CPU-s): "
              f"{toks / wall:,.0f} tokens/s, {len(texts) / wall:.1f} texts/s")
        out += [f"[{name}] {t}" for t in texts[:3]]
    print("\nsamples:")
    for t in out:
        print(" ", t[:400])
    res["samples"] = out
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, default=float))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
