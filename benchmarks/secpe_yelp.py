"""SecPE on Yelp next to both GDP baselines (SecPE paper Tab 2 and Tab 5, scaled to a 2-core CPU).

    python benchmarks/secpe_yelp.py [--num-samples 300] [--iterations 2] [--ratios 2,10,inf] [--clusters 200]

Set-up (shared/data/README.md): private = yelp/dev.csv, public = yelp/test.csv minus a 1000-review held-out
slice (the downstream test set); secrets = the paper's random words (vocabulary by frequency, 50 words around the
20% quantile); the offline n-gram generator and MiniLM. For each r/p (p = 1e-4):

* ``secpe``            — (p, r)-secret protection, noisy cluster centres (Alg 1-3);
* ``augpe-record``     — Aug-PE, μ-GDP with μ = Φ⁻¹(1−p) − Φ⁻¹(1−r) (Eq 4), record sensitivity 1 (as the
                         paper's experiments appear to do);
* ``augpe-group``      — the same with secret-group sensitivity k = the number of records holding the
                         most-repeated secret, which is what (p, r) protection needs under record-level GDP;

r/p = ∞ is the non-private reference (σ = 0 for all three).

Printed per run: the Tab 2 split per iteration — generation (s), histogram (s) — and, on the same candidates,
the time an Aug-PE nearest-neighbour vote over every private record takes; FID to the private reviews (MiniLM
embeddings of the final synthetic set); downstream accuracy (logistic regression on MiniLM embeddings, trained
on the synthetic set, tested on the held-out slice) per label. Embeddings are cached in ``--cache``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data")) / "yelp"


def base_config(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    return {
        "seed": 0,
        "data": {"private": str(DATA / "dev.csv"), "public": str(DATA / "test.csv"), "public_holdout": 1000,
                 "label_columns": ["label1", "label2"], "max_private": args.max_private},
        "generator": {"backend": "ngram", "order": 4},
        "embedder": {"backend": "sentence-transformers", "cache_dir": str(args.cache), "max_seq_length": 256},
        "evolution": {"num_samples": args.num_samples, "iterations": args.iterations,
                      "variations": args.variations, "selection": "rank",
                      "variation": {"kind": "blank", "mask_prob": 0.5}},
        "output": str(out),
    }


def configs(args: argparse.Namespace, ratio: float, out: Path) -> dict[str, dict[str, Any]]:
    p = args.p
    detector = {"name": "random_words", "quantile": 0.2}
    private = math.isinf(ratio)
    secret = {"secret": {"p": p, "r": 1.0 if private else p * ratio}}
    gdp = {"noise_multiplier": 0.0} if private else secret
    tag = "inf" if private else f"{ratio:g}"
    runs: dict[str, dict[str, Any]] = {}
    runs["secpe"] = {**base_config(args, out / f"secpe-rp{tag}"), "method": "secpe", "privacy": secret,
                     "secpe": {"clusters": args.clusters, "detector": detector, "sampling": "auto"}}
    runs["augpe-record"] = {**base_config(args, out / f"augpe-record-rp{tag}"), "method": "augpe",
                            "privacy": gdp, "augpe": {"sensitivity": "record"}}
    runs["augpe-group"] = {**base_config(args, out / f"augpe-group-rp{tag}"), "method": "augpe",
                           "privacy": gdp, "augpe": {"sensitivity": "secret_group", "detector": detector}}
    # every method selects the top N_syn by its histogram (SecPE Alg 3 line 12). With K < N_syn centres only K
    # candidates get votes; sampling with replacement from them duplicated heavily (132 distinct of 300 at
    # K = 200, FID 0.32 even without noise), so rank is used for all three.
    for r in runs.values():
        r["evolution"]["selection"] = "rank"
    return runs


def augpe_vote_seconds(run: Path, private_emb: np.ndarray) -> list[float]:
    """Time an (unreleased, discarded) Aug-PE nearest-neighbour vote over every private record on each
    iteration's candidates — the cost SecPE's clustering replaces. Only the time is kept."""
    from privtext.mechanisms.voting import nearest_votes

    out = []
    for d in sorted((run / "checkpoints").glob("iter_*")):
        cand = np.load(d / "embeddings.npy")
        t0 = time.perf_counter()
        nearest_votes(private_emb, cand)
        out.append(time.perf_counter() - t0)
    return out


def summarise(name: str, run: Path, private_emb: np.ndarray, heldout: Path, args: argparse.Namespace) -> dict:
    from privtext.evaluate.fid import fid
    from privtext.evaluate.suite import evaluate_run

    metrics = json.loads((run / "metrics.json").read_text())
    privacy = json.loads((run / "privacy.json").read_text())
    per = metrics["per_iteration"]
    gen = [per[str(t)].get("generation", {}).get("seconds", 0.0) for t in range(args.iterations)]
    hist = [per[str(t)].get("voting", {}).get("seconds", 0.0) for t in range(args.iterations)]
    last = sorted((run / "checkpoints").glob("iter_*"))[-1]
    syn_emb = np.load(last / "embeddings.npy")[np.load(last / "selected_index.npy")]
    ev = evaluate_run(run, real=heldout, classifiers=["embedding-logreg"], baselines=False, per_iteration=False,
                      cache_dir=args.cache, quiet=True)
    acc = {c: r["accuracy"] for c, r in ev["downstream"]["results"]["embedding-logreg"]["synthetic"].items()}
    return {
        "method": name,
        "sigma": privacy.get("noise_multiplier"),
        "sensitivity": (privacy.get("gdp_baseline") or {}).get("group_size", 1),
        "generation_s": gen,
        "histogram_s": hist,
        "augpe_vote_s": augpe_vote_seconds(run, private_emb),
        "fid_private": fid(syn_emb, private_emb).fid,
        "accuracy": acc,
        "wall_s": metrics.get("wall_seconds"),
    }


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
    rel = secret_clustering(priv, np.zeros(n_private, dtype=np.int64), cl, rho=np.ones(n_private), sigma=1.0,
                            rng=rng)
    centre_votes(rel.centres, rel.counts, cl.group, cand, np.zeros(n_candidates, dtype=np.int64))
    t_sec = time.perf_counter() - t0
    return {"n_private": n_private, "n_candidates": n_candidates, "clusters": k, "augpe_s": t_aug,
            "secpe_s": t_sec, "speedup": t_aug / t_sec}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="100000x30000x400",
                    help="private x candidates x clusters for the histogram-time comparison ('' to skip)")
    ap.add_argument("--num-samples", type=int, default=300)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--variations", type=int, default=4)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--p", type=float, default=1e-4)
    ap.add_argument("--ratios", default="2,10,inf")
    ap.add_argument("--max-private", type=int, default=None)
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
    emb = build_embedder({"backend": "sentence-transformers"}, cache_dir=args.cache)
    private = load_corpus(DATA / "dev.csv", label_columns=["label1", "label2"])
    private_emb = emb.embed(list(private.texts))
    rows = []
    for ratio in [float(r) for r in args.ratios.split(",")]:
        for name, raw in configs(args, ratio, args.out).items():
            out = Path(raw["output"])
            if out.exists():
                shutil.rmtree(out)
            t0 = time.perf_counter()
            run = run_config(config_from_dict(raw, source=name))
            row = summarise(name, run, private_emb, run / "heldout.jsonl", args)
            row["r_over_p"] = ratio
            row["run_s"] = time.perf_counter() - t0
            rows.append(row)
            print(json.dumps(row), flush=True)
    scale = None
    if args.scale:
        n_p, n_c, k = (int(x) for x in args.scale.split("x"))
        scale = histogram_at_scale(n_p, n_c, k)
    (args.out / "results.json").write_text(json.dumps({"runs": rows, "histogram_at_scale": scale}, indent=2))
    print()
    print(f"Yelp: {len(private)} private reviews, N_syn={args.num_samples}, T={args.iterations}, "
          f"L={args.variations}, K={args.clusters}, p={args.p:g}")
    print(f"{'r/p':>5} {'method':13} {'σ':>8} {'Δ':>4} {'gen s/it':>9} {'hist s/it':>10} {'AugPE vote s/it':>16} "
          f"{'FID':>7} {'acc cat':>8} {'acc stars':>10}")
    for r in rows:
        print(f"{r['r_over_p']:>5g} {r['method']:13} {r['sigma'] or 0:8.3f} {r['sensitivity']:>4} "
              f"{np.mean(r['generation_s']):9.1f} {np.mean(r['histogram_s']):10.2f} "
              f"{np.mean(r['augpe_vote_s']):16.2f} {r['fid_private']:7.4f} "
              f"{r['accuracy'].get('label1', float('nan')):8.3f} {r['accuracy'].get('label2', float('nan')):10.3f}")
    if scale:
        print(f"\nhistogram time at {scale['n_private']:,} private × {scale['n_candidates']:,} candidates, "
              f"K={scale['clusters']}: Aug-PE vote {scale['augpe_s']:.2f} s, SecPE clustering + centre votes "
              f"{scale['secpe_s']:.3f} s ({scale['speedup']:.0f}× faster)")


if __name__ == "__main__":
    main()
