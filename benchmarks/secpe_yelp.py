"""SecPE against Aug-PE at the same (p, r) on Yelp, with a no-signal control (SecPE paper Tab 3-5, scaled to a
2-core CPU), and the histogram time of Tab 2.

    python benchmarks/secpe_yelp.py [--num-samples 200] [--iterations 3] [--variations 4] [--seeds 0,1,2]
                                    [--ratios 2,10] [--methods ...] [--scale-only]

Set-up (shared/data/README.md): private = yelp/dev.csv (5000 reviews, labels category and stars), public =
yelp/test.csv minus a 1000-review held-out slice (the downstream test set); secrets = the paper's random words
(the vocabulary sorted by frequency, words around the 20% quantile; a review holding one is a secret holder); the
offline n-gram generator (order 4, trained on public text) and MiniLM. For each r/p (p = 1e-4) and seed:

* ``secpe-hybrid``  — SecPE, default: secret-free reviews vote exactly, holders through noisy clusters;
* ``secpe-alg3``    — SecPE with Alg 3's cluster votes only (``secpe.voting: clusters``);
* ``augpe-record``  — Aug-PE at μ = Φ⁻¹(1−p) − Φ⁻¹(1−r) (Eq 4), record sensitivity (a secret held by one
                      record gets (p, r));
* ``augpe-group``   — the same with secret-group sensitivity k (what (p, r) needs for repeated secrets);
* ``control``       — Aug-PE with noise so large (σ = 10⁶) that the votes carry nothing: the generator alone
                      plus random selection (one per seed, shared by both ratios).

Printed: mean ± sd over seeds of FID to the private reviews (MiniLM, final synthetic set vs all 5000) and of
downstream accuracy (logistic regression on MiniLM embeddings trained on the synthetic set, tested on the
held-out slice) for category and stars; then the histogram time at scale (Aug-PE vote vs SecPE's clustering
and centre votes). Embeddings are cached in ``--cache`` (salted): reruns and repeated texts are not re-embedded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness import ROOT, SHARED

DATA = SHARED / "yelp"
DETECTOR = {"name": "random_words", "quantile": 0.2, "from_private": True}  # the paper's set-up
METHODS = ("secpe-hybrid", "secpe-alg3", "augpe-record", "augpe-group", "control")


def base_config(args: argparse.Namespace, out: Path, seed: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "data": {"private": str(DATA / "dev.csv"), "public": str(DATA / "test.csv"), "public_holdout": 1000,
                 "label_columns": ["label1", "label2"]},
        "generator": {"backend": "ngram", "order": 4},
        "embedder": {"backend": "sentence-transformers", "cache_dir": str(args.cache),
                     "max_seq_length": args.max_seq_length},
        "evolution": {"num_samples": args.num_samples, "iterations": args.iterations,
                      "variations": args.variations, "selection": "rank",
                      "variation": {"kind": "blank", "mask_prob": 0.5}},
        "output": str(out),
    }


def config(args: argparse.Namespace, method: str, ratio: float, seed: int) -> dict[str, Any]:
    p = args.p
    secret = {"secret": {"p": p, "r": p * ratio}}
    out = args.out / f"{method}-rp{ratio:g}-s{seed}"
    raw = base_config(args, out, seed)
    if method == "secpe-hybrid":
        raw.update(method="secpe", privacy=secret, secpe={"detector": DETECTOR, "voting": "hybrid"})
    elif method == "secpe-alg3":
        raw.update(method="secpe", privacy=secret, secpe={"detector": DETECTOR, "voting": "clusters"})
    elif method == "augpe-record":
        raw.update(method="augpe", privacy=secret, augpe={"sensitivity": "record"})
    elif method == "augpe-group":
        raw.update(method="augpe", privacy=secret, augpe={"sensitivity": "secret_group", "detector": DETECTOR})
    elif method == "control":
        raw["output"] = str(args.out / f"control-s{seed}")
        raw.update(method="augpe", privacy={"noise_multiplier": 1e6})
    else:
        raise SystemExit(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    return raw


def measure(run: Path, private_emb: np.ndarray, emb: Any, args: argparse.Namespace) -> dict[str, Any]:
    from privtext.evaluate.fid import fid
    from privtext.evaluate.suite import evaluate_run
    from privtext.rundir import RunDir

    rd = RunDir(run)
    metrics = json.loads(rd.metrics.read_text())
    privacy = json.loads(rd.privacy.read_text())
    ev = evaluate_run(run, real=rd.heldout, classifiers=["embedding-logreg"], baselines=False, per_iteration=False,
                      cache_dir=args.cache, quiet=True, write=False)
    syn = [json.loads(x)["text"] for x in rd.synthetic.read_text().splitlines() if x.strip()]
    syn_emb = emb.embed(syn)
    acc = {c: r["accuracy"] for c, r in ev["downstream"]["results"]["embedding-logreg"]["synthetic"].items()}
    sigma = privacy["parameters"].get("noise_multiplier")
    if sigma is None:
        sigma = next((a["value"] for a in privacy.get("assumed_public", []) if a["name"] == "noise_std"), None)
    return {"fid_private": fid(syn_emb, private_emb).fid, "accuracy": acc, "sigma": sigma,
            "wall_s": metrics.get("wall_seconds"),
            "histogram_s": sum(v.get("voting", {}).get("seconds", 0.0) for v in metrics["per_iteration"].values())}


def histogram_at_scale(n_private: int, n_candidates: int, k: int, d: int = 384, seed: int = 0) -> dict:
    """Tab 2's histogram column at a larger scale, on embedding-like synthetic vectors: the Aug-PE vote (every
    private record against every candidate) vs SecPE's clustering release (every private record against K public
    centres) plus centre votes (K centres against the candidates)."""
    from privtext.mechanisms.clustering import PublicClusters, centre_votes, secret_clustering
    from privtext.mechanisms.voting import nearest_votes

    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(200, d))

    def draw(n: int) -> np.ndarray:
        x = topics[rng.integers(0, 200, size=n)] + 0.6 * rng.normal(size=(n, d))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    priv, cand = draw(n_private), draw(n_candidates)
    cl = PublicClusters(centres=draw(k), sizes=np.full(k, 100), group=np.zeros(k, dtype=np.int64))
    t0 = time.perf_counter()
    nearest_votes(priv, cand)
    t_aug = time.perf_counter() - t0
    t0 = time.perf_counter()
    rel, _ = secret_clustering(priv, np.zeros(n_private, dtype=np.int64), cl, rho=np.ones(n_private), sigma=1.0,
                               rng=rng)
    centre_votes(rel.centres, rel.counts, cl.group, cand, np.zeros(n_candidates, dtype=np.int64))
    t_sec = time.perf_counter() - t0
    return {"n_private": n_private, "n_candidates": n_candidates, "clusters": k, "augpe_s": t_aug,
            "secpe_s": t_sec, "speedup": t_aug / t_sec}


def _ms(xs: list[float]) -> str:
    if not xs:
        return "—"
    m = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{m:.4f} ± {sd:.4f}" if m < 2 else f"{m:.1f} ± {sd:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="100000x30000x400",
                    help="private x candidates x clusters for the histogram-time comparison ('' to skip)")
    ap.add_argument("--num-samples", type=int, default=200)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--variations", type=int, default=4)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--p", type=float, default=1e-4)
    ap.add_argument("--ratios", default="2,10")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "secpe_yelp")
    ap.add_argument("--cache", type=Path, default=ROOT / "artifacts" / "emb-cache")
    ap.add_argument("--scale-only", action="store_true", help="only the histogram-time comparison at --scale")
    args = ap.parse_args()
    if args.scale_only:
        n_p, n_c, k = (int(x) for x in args.scale.split("x"))
        print(json.dumps(histogram_at_scale(n_p, n_c, k)))
        return
    if not DATA.is_dir():
        raise SystemExit(f"Yelp data not found at {DATA}")
    os.environ.setdefault("PRIVTEXT_QUIET", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import shutil

    from privtext.config import config_from_dict
    from privtext.data import load_corpus
    from privtext.embed import build_embedder
    from privtext.runner import run_config

    args.out.mkdir(parents=True, exist_ok=True)
    emb = build_embedder({"backend": "sentence-transformers", "max_seq_length": args.max_seq_length},
                         cache_dir=args.cache)
    private = load_corpus(DATA / "dev.csv", label_columns=["label1", "label2"])
    private_emb = emb.embed(list(private.texts))
    results_path = args.out / "results.jsonl"
    done = {}
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            r = json.loads(line)
            done[(r["method"], r["r_over_p"], r["seed"])] = r
    methods = args.methods.split(",")
    ratios = [float(r) for r in args.ratios.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    for seed in seeds:
        for method in methods:
            for ratio in (ratios if method != "control" else [math.inf]):
                if (method, ratio, seed) in done:
                    continue
                raw = config(args, method, ratio if math.isfinite(ratio) else 10.0, seed)
                out = Path(raw["output"])
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                run = run_config(config_from_dict(raw, source=method))
                row = {"method": method, "r_over_p": ratio, "seed": seed, **measure(run, private_emb, emb, args),
                       "run_s": time.perf_counter() - t0}
                done[(method, ratio, seed)] = row
                with results_path.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    print()
    print(f"Yelp: {len(private)} private reviews, N_syn={args.num_samples}, T={args.iterations}, L={args.variations}, "
          f"p={args.p:g}, seeds {seeds}; mean ± sd over seeds")
    print(f"{'r/p':>5} {'method':14} {'FID to private':>18} {'category acc':>18} {'stars acc':>18}")
    for ratio in [*ratios, math.inf]:
        for method in methods:
            rows = [r for (m, rp, _), r in done.items() if m == method and rp == ratio]
            if not rows:
                continue
            print(f"{ratio:>5g} {method:14} {_ms([r['fid_private'] for r in rows]):>18} "
                  f"{_ms([100 * r['accuracy'].get('label1', float('nan')) for r in rows]):>18} "
                  f"{_ms([100 * r['accuracy'].get('label2', float('nan')) for r in rows]):>18}")
    if args.scale:
        n_p, n_c, k = (int(x) for x in args.scale.split("x"))
        scale = histogram_at_scale(n_p, n_c, k)
        print(f"\nhistogram time at {scale['n_private']:,} private × {scale['n_candidates']:,} candidates, "
              f"K={scale['clusters']}: Aug-PE vote {scale['augpe_s']:.2f} s, SecPE clustering + centre votes "
              f"{scale['secpe_s']:.3f} s ({scale['speedup']:.0f}× faster)")


if __name__ == "__main__":
    main()
