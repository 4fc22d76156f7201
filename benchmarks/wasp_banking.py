"""WASP on Banking77 with three offline generators of unequal quality, against its baselines.

Set-up (wasp.txt §5 in miniature): the first ``--intents`` intents of Banking77; ``--private`` private queries
drawn from their training rows (the rest of those rows is the public corpus the n-gram generators train on);
the test rows of those intents are the real test set. Generators (all ``ngram``, offline, unequal by design):

* ``good``  — order 4, the whole public corpus, label-conditioned;
* ``mid``   — order 2, ``--mid-train`` public texts;
* ``bad``   — order 1 (a bag of words), ``--bad-train`` public texts, no label conditioning.

Runs (ε = 4, δ = 1e-5 unless changed; each one a real ``privtext run``):

* ``wasp``           — WASP, K = 3 generators, T rounds, N samples, Top-Q votes, contrastive prompts;
* ``wasp-paper``     — the same with the paper's calibration (Δ = 4, classic Gaussian formula, √(T−1));
* ``fusegen``        — the three generators zero-shot, equal weights, no private data (``wasp.feedback: none``);
* ``augpe-<gen>``    — Aug-PE with that one generator (N samples, ``--augpe-iterations`` iterations);
* ``only-private``   — the classifier trained on the private samples themselves (no privacy, a reference).

Not in the default list: ``wasp-nonoise``/``-fewshot``/``-equal`` (diagnostics), the quality levers
``wasp-boost02``/``-boost01``/``-boost0`` (n-gram ``contrastive_boost``), ``wasp-s4``, ``wasp-mix``
(``zero_shot_fraction: 0.5``), ``wasp-nearest``, ``wasp-mix-nearest``, ``wasp-boost0-nearest``, and several data
holders ``wasp-parties-plain``/``wasp-parties-secagg`` (``--parties`` L, Dirichlet α = 1; docs/wasp.md) with their
baseline, PrE-Text-style federated Aug-PE ``pretext-<gen>`` (SecAgg+) / ``pretext-<gen>-plain`` (the same split,
Aug-PE's nearest votes summed over the parties; ``augpe.parties``).

Downstream: logistic regression on MiniLM embeddings (``embedding-logreg``), trained on each synthetic set,
tested on the real test rows. Prints accuracy per run and WASP's generator weights per round; writes
``artifacts/wasp_banking.json``.

    PYTHONPATH=src python benchmarks/wasp_banking.py            # small: ~10 min on a busy 2-core box
    PYTHONPATH=src python benchmarks/wasp_banking.py --num-samples 1000 --seeds 0,1,2   # larger
    python benchmarks/wasp_banking.py --prepare    # only the split examples/wasp-banking77.yaml reads (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from harness import ROOT, SHARED, missing

DATA = SHARED / "banking77"


def generators(args: argparse.Namespace, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"backend": "ngram", "name": "good", "order": 4, **extra},
        {"backend": "ngram", "name": "mid", "order": 2, "train_texts": args.mid_train, **extra},
        {"backend": "ngram", "name": "bad", "order": 1, "train_texts": args.bad_train, "label_weight": 0.0, **extra},
    ]


def write_split(train: Any, args: argparse.Namespace, seed: int) -> Path:
    """``--private`` queries of the chosen intents' training rows (seeded) as ``WORK/seed<s>/private.csv``, the
    rest (minus copies of a private query) as ``public.csv``; returns the folder."""
    import numpy as np

    from privtext.data import write_corpus
    from privtext.guard import PrivateGuard

    perm = np.random.default_rng(seed).permutation(len(train))
    private = train.subset(np.sort(perm[: args.private]))
    guard = PrivateGuard(private.texts)  # Banking77 repeats some queries: such copies stay out of public
    public = train.subset([int(i) for i in np.sort(perm[args.private:])
                           if not guard.is_private_record(train.texts[int(i)])])
    pdir = args.work / f"seed{seed}"
    pdir.mkdir(parents=True, exist_ok=True)
    write_corpus(private, pdir / "private.csv")
    write_corpus(public, pdir / "public.csv")
    return pdir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--intents", type=int, default=10)
    ap.add_argument("--private", type=int, default=100)
    ap.add_argument("--num-samples", type=int, default=300, help="N synthetic samples per run")
    ap.add_argument("--rounds", type=int, default=5, help="WASP's T")
    ap.add_argument("--q", type=int, default=8)
    ap.add_argument("--in-context", type=int, default=8)
    ap.add_argument("--augpe-iterations", type=int, default=3)
    ap.add_argument("--augpe-variations", type=int, default=2)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--mid-train", type=int, default=150)
    ap.add_argument("--bad-train", type=int, default=40)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--parties", type=int, default=3, help="parties of the wasp-parties-* runs")
    ap.add_argument("--runs", default="wasp,wasp-paper,fusegen,augpe-good,augpe-mid,augpe-bad,only-private")
    ap.add_argument("--embedder", default="sentence-transformers")
    ap.add_argument("--work", type=Path, default=ROOT / "artifacts" / "wasp_banking")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "wasp_banking.json")
    ap.add_argument("--prepare", action="store_true", help="only write each seed's split (WORK/seed<s>/private.csv, "
                    "public.csv: what examples/wasp-banking77.yaml reads) and stop")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if missing(DATA / "train.csv", "Banking77"):
        return 0

    import numpy as np

    from privtext.config import config_from_dict
    from privtext.data import Corpus, load_corpus
    from privtext.embed import build_embedder
    from privtext.evaluate import downstream_accuracy
    from privtext.runner import run_config

    cats = json.loads((DATA / "categories.json").read_text())[: args.intents]
    train = load_corpus(DATA / "train.csv", label_columns=["category"], name="train")
    test = load_corpus(DATA / "test.csv", label_columns=["category"], name="test")
    keep = [i for i, c in enumerate(train.labels["category"]) if c in cats]
    train = train.subset(keep)
    test = test.subset([i for i, c in enumerate(test.labels["category"]) if c in cats])
    args.work.mkdir(parents=True, exist_ok=True)
    if args.prepare:
        for seed in [int(s) for s in args.seeds.split(",")]:
            pdir = write_split(train, args, seed)
            print(f"seed {seed}: {pdir / 'private.csv'}, {pdir / 'public.csv'}")
        return 0
    cache = args.work / "embed-cache"
    emb_cfg = {"backend": args.embedder, "cache": True, "cache_dir": str(cache)}
    evaluator = build_embedder(emb_cfg, cache_dir=cache)
    results: dict[str, Any] = {"setup": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                               "intents": cats, "test": len(test), "runs": {}}
    wanted = [r.strip() for r in args.runs.split(",") if r.strip()]
    for seed in [int(s) for s in args.seeds.split(",")]:
        pdir = write_split(train, args, seed)
        private = load_corpus(pdir / "private.csv", label_columns=["category"], name="private")
        base: dict[str, Any] = {
            "seed": seed,
            "data": {"private": str(pdir / "private.csv"), "public": str(pdir / "public.csv"),
                     "text_column": "text", "label_columns": ["category"]},
            "embedder": emb_cfg,
            "privacy": {"epsilon": args.epsilon, "delta": args.delta},
            "evolution": {"num_samples": args.num_samples, "iterations": args.rounds,
                          "label_distribution": {"kind": "uniform"}},
        }
        wasp = {"q": args.q, "in_context": args.in_context}
        configs: dict[str, dict[str, Any]] = {
            "wasp": {**base, "method": "wasp", "generators": generators(args), "wasp": wasp},
            "wasp-paper": {**base, "method": "wasp", "generators": generators(args), "wasp": wasp,
                           "privacy": {**base["privacy"], "calibration": "paper"}},
            "fusegen": {**base, "method": "wasp", "generators": generators(args), "wasp": {"feedback": "none"}},
            # diagnostics (not in the default list): no noise (NOT private), no worse examples, equal weights
            "wasp-nonoise": {**base, "method": "wasp", "generators": generators(args), "wasp": wasp,
                             "privacy": {"noise_multiplier": 0.0}},
            "wasp-fewshot": {**base, "method": "wasp", "generators": generators(args),
                             "wasp": {**wasp, "contrastive": False}},
            "wasp-equal": {**base, "method": "wasp", "generators": generators(args),
                           "wasp": {**wasp, "weighting": "equal"}},
            # quality levers (docs/wasp.md): the n-gram contrastive mixture weight, fewer examples per prompt,
            # half of each later round zero-shot, the final set chosen by the released H̃ⁿ
            "wasp-boost02": {**base, "method": "wasp", "generators": generators(args, contrastive_boost=0.2),
                             "wasp": wasp},
            "wasp-boost0": {**base, "method": "wasp", "generators": generators(args, contrastive_boost=0.0),
                            "wasp": wasp},
            "wasp-boost01": {**base, "method": "wasp", "generators": generators(args, contrastive_boost=0.1),
                             "wasp": wasp},
            "wasp-boost0-nearest": {**base, "method": "wasp", "generators": generators(args, contrastive_boost=0.0),
                                    "wasp": {**wasp, "output": "nearest", "oversample": 2.0}},
            # several data holders (§4.7): the private queries split over --parties parties (Dirichlet α = 1)
            "wasp-parties-plain": {**base, "method": "wasp", "generators": generators(args),
                                   "wasp": {**wasp, "parties": {"count": args.parties, "aggregation": "plain"}}},
            "wasp-parties-secagg": {**base, "method": "wasp", "generators": generators(args),
                                    "wasp": {**wasp, "parties": {"count": args.parties, "aggregation": "secagg"}}},
            "wasp-s4": {**base, "method": "wasp", "generators": generators(args), "wasp": {**wasp, "in_context": 4}},
            "wasp-mix": {**base, "method": "wasp", "generators": generators(args),
                         "wasp": {**wasp, "zero_shot_fraction": 0.5}},
            "wasp-nearest": {**base, "method": "wasp", "generators": generators(args),
                             "wasp": {**wasp, "output": "nearest", "oversample": 2.0}},
            "wasp-mix-nearest": {**base, "method": "wasp", "generators": generators(args),
                                 "wasp": {**wasp, "zero_shot_fraction": 0.5, "output": "nearest",
                                          "oversample": 2.0}},
        }
        for g in generators(args):
            configs[f"augpe-{g['name']}"] = {
                **base, "method": "augpe", "generator": g,
                "evolution": {**base["evolution"], "iterations": args.augpe_iterations,
                              "variations": args.augpe_variations}}
            # PrE-Text-style federated Aug-PE (WASP §5's federated baseline): the same Aug-PE, its nearest votes
            # summed over the --parties parties by SecAgg+ (or plain, NOT secure) with distributed noise
            for agg, suffix in (("secagg", ""), ("plain", "-plain")):
                configs[f"pretext-{g['name']}{suffix}"] = {
                    **configs[f"augpe-{g['name']}"],
                    "augpe": {"parties": {"count": args.parties, "aggregation": agg}}}
        for name in wanted:
            t0 = time.perf_counter()
            row: dict[str, Any] = {}
            if name == "only-private":
                syn: Corpus = private
            else:
                cfg = configs[name]
                out = pdir / name
                if not (out / "synthetic.jsonl").exists():
                    import shutil

                    shutil.rmtree(out, ignore_errors=True)
                    run_config(config_from_dict({**cfg, "output": str(out), "name": name}))
                syn = load_corpus(out / "synthetic.jsonl", label_columns=["category"], name=name)
                if cfg.get("augpe", {}).get("parties"):
                    m = json.loads((out / "private" / "metrics.json").read_text())
                    row["stage_seconds"] = {k: v for k, v in m.get("stages", {}).items() if "vot" in k}
                if cfg["method"] == "wasp":
                    priv = json.loads((out / "privacy.json").read_text())
                    row["wasp"] = priv["released"].get("wasp")
                    row["noise"] = [(r["key"], r["noise_std"], r["event"]["noise_multiplier"])
                                    for r in priv["releases"]]
                    if cfg["wasp"].get("parties"):
                        m = json.loads((out / "private" / "metrics.json").read_text())
                        row["aggregation_seconds"] = [r.get("aggregation_seconds") for r in m["wasp"]["rounds"]]
                    gens = [g for g in (row["wasp"] or {}).get("generators", [])]
                    row["share_per_generator"] = {
                        g: round(sum(1 for x in _read_generators(out) if x == g) / max(len(syn), 1), 4)
                        for g in gens}
            res = downstream_accuracy(syn, test, rng=np.random.default_rng(seed), classifier="embedding-logreg",
                                      embedder=evaluator)
            row["accuracy"] = res["category"].accuracy
            row["records"] = len(syn)
            row["seconds"] = round(time.perf_counter() - t0, 1)
            results["runs"].setdefault(name, []).append(row)
            print(f"seed {seed} {name:14s} acc={row['accuracy']:.4f} n={len(syn)} ({row['seconds']} s)", flush=True)
            if row.get("wasp"):
                for r in row["wasp"]["rounds"]:
                    print(f"    round {r['round']}: n/gen={r['n_per_generator']} w_used={r['weights_used']} "
                          f"w_next={r['weights_next']} mean Hn/gen={r['nearest_mean_per_generator']}", flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1))
    print("\nmean accuracy over seeds:")
    for name, rows in results["runs"].items():
        acc = [r["accuracy"] for r in rows]
        print(f"  {name:14s} {np.mean(acc):.4f} ± {np.std(acc):.4f} ({len(acc)} seeds)")
    return 0


def _read_generators(run: Path) -> list[str]:
    """The generator of every synthetic record (the last round's checkpoint holds the whole set D)."""
    import pandas as pd

    ck = sorted((run / "private" / "checkpoints").glob("iter_*"))
    df = pd.read_parquet(ck[-1] / "candidates.parquet")
    return [str(x) for x in df["generator"]]


if __name__ == "__main__":
    raise SystemExit(main())
