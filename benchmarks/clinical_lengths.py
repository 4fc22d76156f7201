"""Offline clinical text with off-domain public text: lengths and kNN precision with and without length control.

    python benchmarks/clinical_lengths.py [--methods augpe,wasp,dpkps] [--variants before,family,dp]
                                          [--num-samples 80] [--iterations 3] [--seed 0]

Set-up (issue 23, item 8): private = the 240 clinic visit notes ``privtext demo`` makes (about 33 words each,
planted identifiers included), evaluated against 200 held-out notes of the same clinic; public text for the
offline n-gram generator = PubMed abstracts (``../shared/data/pubmed/dev.csv``, 1435 abstracts, ~124 words on
average): a hospital analyst with no public clinical notes. Unlabelled runs, MiniLM, (ε, δ) = (4, 1e-5) (pure
ε = 6 for DP-KPS). Variants:

* ``before`` — the defaults (prompt family ``auto``, lengths from the public abstracts);
* ``family`` — ``generator.prompt_family: clinical_note``: its public length prior (15–45 words, cap 60) and
  short-note prompts;
* ``dp``     — ``clinical_note`` plus a DP length histogram of the private notes (Laplace, ε_len = 0.5, 16
  geometric bins up to 256 words; ``privtext.mechanisms.lengths``) as the generators' target. The run's ledger
  does not hold this release yet (the runner does not wire it): its cost is added to the run's budget here by
  basic composition (ε = 4 + 0.5), and the benchmark injects the target into ``GeneratorContext.length``.

Printed per method and variant: mean / median words of the synthetic notes (private: 33.5 / 33), the length
Wasserstein distance to the held-out notes, kNN precision and recall (k = 3) and FID against them, and the run's
wall time. Nothing here is timed by a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import ROOT, SHARED


def config(method: str, variant: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    gen: dict[str, Any] = {"backend": "ngram", "order": 4}
    if variant in ("family", "dp"):
        gen["prompt_family"] = "clinical_note"
    raw: dict[str, Any] = {
        "method": method, "seed": args.seed, "name": f"{method}-{variant}",
        "data": {"private": str(folder / "private.csv"), "public": str(SHARED / "pubmed" / "dev.csv"),
                 "text_column": "text"},
        "generator": gen,
        "embedder": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "max_seq_length": 128,
                     "cache_dir": str(folder / "embed-cache")},
        "privacy": {"epsilon": 6.0} if method == "dpkps" else {"epsilon": 4.0, "delta": 1e-5},
        "evolution": {"num_samples": args.num_samples, "iterations": args.iterations, "variations": 4},
        "output": str(folder / f"run-{method}-{variant}"),
    }
    if method == "wasp":
        raw.pop("generator")
        raw["generators"] = [{**gen, "name": "ngram-4"}, {**gen, "order": 2, "name": "ngram-2"}]
        raw["evolution"] = {"num_samples": args.num_samples, "iterations": args.iterations + 1}
        raw["wasp"] = {"q": 4, "in_context": 4}
    if method == "dpkps":
        raw["evolution"] = {"num_samples": args.num_samples}
        raw["dpkps"] = {"vocab_size": 150, "length": 6, "doc_type": "clinic visit note"}
    return raw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="augpe")
    ap.add_argument("--variants", default="before,family,dp")
    ap.add_argument("--num-samples", type=int, default=80)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--epsilon-length", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="folder for the corpora and runs (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "clinical_lengths.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not (SHARED / "pubmed" / "dev.csv").exists():
        print(f"PubMed not found under {SHARED}; nothing to do", file=sys.stderr)
        return 0

    import numpy as np

    import privtext.generate as gen_mod
    from privtext.config import config_from_dict
    from privtext.data import write_corpus
    from privtext.demo import make_demo_corpora, make_heldout
    from privtext.evaluate import evaluate_run
    from privtext.generate.length import length_target
    from privtext.mechanisms.lengths import dp_length_histogram, length_bin_edges, word_counts
    from privtext.rng import secure_rng
    from privtext.runner import run_config

    folder = args.work or Path(tempfile.mkdtemp(prefix="clinical-lengths-"))
    folder.mkdir(parents=True, exist_ok=True)
    private, _, _ = make_demo_corpora()
    heldout = make_heldout(n=200)
    private = type(private).from_texts(list(private.texts), {}, name="private")
    write_corpus(private, folder / "private.csv", include_ids=False)
    write_corpus(heldout, folder / "heldout.csv", include_ids=False)
    plen = word_counts(list(private.texts))
    print(f"private notes: {len(private)}, mean {plen.mean():.1f} / median {np.median(plen):.0f} words; public: "
          f"PubMed dev ({SHARED / 'pubmed' / 'dev.csv'})", flush=True)

    released = None
    if "dp" in args.variants:
        edges = length_bin_edges(256, bins=16)
        noisy, event = dp_length_histogram(list(private.texts), edges=edges, rng=secure_rng(),
                                           epsilon=args.epsilon_length)
        released = length_target(np.array([float(f"{x:.4g}") for x in noisy]), edges)
        print(f"DP length histogram ({event}): target mean {released.mean():.1f} words, cap {released.max_words}",
              flush=True)

    real_build = gen_mod.build_generator
    results: list[dict[str, Any]] = []
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
            raw = config(method, variant, folder, args)

            def build(cfg: Any, ctx: Any = None, _v: str = variant) -> Any:
                if _v == "dp" and ctx is not None:
                    ctx.length = released  # the released target (see the module docstring)
                return real_build(cfg, ctx)

            gen_mod.build_generator = build
            t0 = time.perf_counter()
            try:
                root = run_config(config_from_dict(raw))
            finally:
                gen_mod.build_generator = real_build
            wall = time.perf_counter() - t0
            ev = evaluate_run(root, real=folder / "heldout.csv", quiet=True, baselines=False, per_iteration=False,
                              next_word=False, classifiers=())
            syn = [json.loads(line)["text"] for line in (root / "synthetic.jsonl").read_text().splitlines()
                   if line.strip()]
            sl = word_counts(syn)
            row = {"method": method, "variant": variant, "n": len(syn), "mean_words": float(sl.mean()),
                   "median_words": float(np.median(sl)), "max_words": int(sl.max()),
                   "length_wasserstein": ev["lengths"]["wasserstein"],
                   "precision": ev["precision_recall"]["precision"], "recall": ev["precision_recall"]["recall"],
                   "fid": ev["fid"]["fid"], "wall_s": round(wall, 1), "example": syn[0][:240]}
            results.append(row)
            print(f"{method:6} {variant:7} mean {row['mean_words']:6.1f} median {row['median_words']:5.0f} "
                  f"max {row['max_words']:4d} words | length W1 {row['length_wasserstein']:6.2f} | kNN precision "
                  f"{100 * row['precision']:5.1f} % recall {100 * row['recall']:5.1f} % | FID {row['fid']:.3f} | "
                  f"run {wall:.0f} s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"private_mean_words": float(plen.mean()), "results": results}, indent=2))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
