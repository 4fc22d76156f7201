"""The lm generator against the 4-gram as Aug-PE's generator on Yelp, at the same budget (ε, N, T, L).

    PYTHONPATH=src python benchmarks/lm_compare_yelp.py [--seeds 0,1,2] [--generators ngram,lm]
        [--kinds dp,control] [--n-private 2000] [--num-samples 500] [--iterations 3] [--variations 4]
        [--lm '{"torch_threads": 1}']

Set-up (fixed files under ``--out``/data, so every seed and both generators share one public corpus and the lm
generator is trained once — it is cached in ``artifacts/lm-cache``, where ``benchmarks/lm_generator.py`` puts it):

* private: ``--n-private`` reviews of yelp/dev.csv (a seeded sample), labels category and stars;
* public: yelp/test.csv minus the 1000-review held-out slice of seed 0 (``split_corpus(test, [4000, 1000],
  seed=0)``, the split of examples/yelp-augpe.yaml and of benchmarks/lm_generator.py), with labels;
* test: that held-out slice (downstream accuracy);
* Aug-PE at (ε, δ) = (4, 1e-5), record sensitivity, rank selection, blank-filling variations with mask ½
  (``dp``), and the no-signal control σ = 10⁶ (``control``: the generator plus random selection).

Printed per (generator, kind): mean ± sd over seeds of FID to the private reviews (MiniLM), downstream accuracy
(logistic regression on MiniLM, trained on the synthetic reviews, tested on the held-out slice) for category and
stars, and the run's wall time. Rows are appended to ``<out>/results.jsonl`` (a rerun skips finished rows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from harness import ROOT, SHARED, missing

DATA = SHARED / "yelp"
COLS = ["label1", "label2"]


def write_data(out: Path, n_private: int) -> dict[str, Path]:
    from privtext.data import load_corpus, sample, write_corpus
    from privtext.data.split import split_corpus
    from privtext.rng import derive

    paths = {k: out / f"{k}.csv" for k in ("private", "public", "test")}
    if all(p.exists() for p in paths.values()):
        return paths
    out.mkdir(parents=True, exist_ok=True)
    dev = load_corpus(DATA / "dev.csv", label_columns=COLS, name="private")
    test = load_corpus(DATA / "test.csv", label_columns=COLS, name="public")
    public, held = split_corpus(test, [len(test) - 1000, 1000], seed=0)
    write_corpus(sample(dev, n_private, rng=derive(0, "lm-compare", "private")), paths["private"])
    write_corpus(public, paths["public"])
    write_corpus(held, paths["test"])
    return paths


def config(args: argparse.Namespace, paths: dict[str, Path], generator: str, kind: str, seed: int) -> dict[str, Any]:
    gens = {"ngram": {"backend": "ngram", "order": 4},
            "lm": {"backend": "lm", "cache_dir": str(args.lm_cache), **json.loads(args.lm)}}
    return {
        "method": "augpe", "seed": seed,
        "data": {"private": str(paths["private"]), "public": str(paths["public"]), "label_columns": COLS},
        "generator": {**gens[generator], "prompt_family": "yelp"},
        "embedder": {"backend": "sentence-transformers", "cache_dir": str(args.cache),
                     "max_seq_length": args.max_seq_length},
        "privacy": {"epsilon": 4.0, "delta": 1e-5} if kind == "dp" else {"noise_multiplier": 1e6},
        "evolution": {"num_samples": args.num_samples, "iterations": args.iterations, "variations": args.variations,
                      "selection": "rank", "variation": {"kind": "blank", "mask_prob": 0.5}},
        "output": str(args.out / f"{generator}-{kind}-s{seed}"),
    }


def measure(run: Path, test: Path, private_emb: Any, emb: Any, args: argparse.Namespace) -> dict[str, Any]:
    from privtext.evaluate.fid import fid
    from privtext.evaluate.suite import evaluate_run
    from privtext.rundir import RunDir

    rd = RunDir(run)
    metrics = json.loads(rd.metrics.read_text())
    ev = evaluate_run(run, real=test, classifiers=["embedding-logreg"], baselines=False, per_iteration=False,
                      cache_dir=args.cache, quiet=True, write=False)
    syn = [json.loads(x)["text"] for x in rd.synthetic.read_text().splitlines() if x.strip()]
    acc = {c: r["accuracy"] for c, r in ev["downstream"]["results"]["embedding-logreg"]["synthetic"].items()}
    words = [len(t.split()) for t in syn]
    return {"fid_private": fid(emb.embed(syn), private_emb).fid, "accuracy": acc,
            "wall_s": metrics.get("wall_seconds"), "mean_words": statistics.fmean(words)}


def _ms(xs: list[float], scale: float = 1.0) -> str:
    if not xs:
        return "—"
    m = statistics.fmean(xs) * scale
    sd = statistics.stdev(xs) * scale if len(xs) > 1 else 0.0
    return f"{m:.3f} ± {sd:.3f}" if scale == 1.0 else f"{m:.1f} ± {sd:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--generators", default="ngram,lm")
    ap.add_argument("--kinds", default="dp,control")
    ap.add_argument("--n-private", type=int, default=2000)
    ap.add_argument("--num-samples", type=int, default=500)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--variations", type=int, default=4)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--lm", default="{}", help="JSON overrides of the lm generator's options")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "lm_compare_yelp")
    ap.add_argument("--cache", type=Path, default=ROOT / "artifacts" / "emb-cache")
    ap.add_argument("--lm-cache", type=Path, default=ROOT / "artifacts" / "lm-cache")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("PRIVTEXT_QUIET", "1")
    if missing(DATA / "dev.csv", "Yelp data"):
        return 0
    import shutil

    from privtext.config import config_from_dict
    from privtext.data import load_corpus
    from privtext.embed import build_embedder
    from privtext.runner import run_config

    paths = write_data(args.out / "data", args.n_private)
    emb = build_embedder({"backend": "sentence-transformers", "max_seq_length": args.max_seq_length},
                         cache_dir=args.cache)
    private_emb = emb.embed(list(load_corpus(paths["private"]).texts))
    results = args.out / "results.jsonl"
    done: dict[tuple[str, str, int], dict[str, Any]] = {}
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done[(r["generator"], r["kind"], r["seed"])] = r
    for seed in [int(s) for s in args.seeds.split(",")]:
        for kind in args.kinds.split(","):
            for gen in args.generators.split(","):
                if (gen, kind, seed) in done:
                    continue
                raw = config(args, paths, gen, kind, seed)
                shutil.rmtree(raw["output"], ignore_errors=True)
                t0 = time.perf_counter()
                run = run_config(config_from_dict(raw, source=f"{gen}-{kind}"))
                row = {"generator": gen, "kind": kind, "seed": seed, **measure(run, paths["test"], private_emb, emb, args),
                       "run_s": time.perf_counter() - t0, "load": os.getloadavg()[0]}
                done[(gen, kind, seed)] = row
                with results.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    print(f"\nYelp, Aug-PE ε=4 (control: σ=1e6): {args.n_private} private, N={args.num_samples}, T={args.iterations}, "
          f"L={args.variations}; mean ± sd over seeds {args.seeds}")
    print(f"{'generator':10} {'kind':8} {'n':>2} {'FID→private':>16} {'category %':>12} {'stars %':>12} {'words':>6} "
          f"{'wall s':>8}")
    for gen in args.generators.split(","):
        for kind in args.kinds.split(","):
            rows = [r for (g, k, _), r in done.items() if g == gen and k == kind]
            if not rows:
                continue
            print(f"{gen:10} {kind:8} {len(rows):>2} {_ms([r['fid_private'] for r in rows]):>16} "
                  f"{_ms([r['accuracy']['label1'] for r in rows], 100):>12} "
                  f"{_ms([r['accuracy']['label2'] for r in rows], 100):>12} "
                  f"{statistics.fmean(r['mean_words'] for r in rows):6.0f} "
                  f"{statistics.fmean(r['run_s'] for r in rows):8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
