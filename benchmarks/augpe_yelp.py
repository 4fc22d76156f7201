"""Aug-PE at ε = 4 on Yelp: how far it lands from real data, and which levers close how much of the distance
(issue 12's set-up, scaled to a 2-core CPU).

    python benchmarks/augpe_yelp.py [--num-samples 500] [--iterations 3] [--variations 4] [--seed 0]
                                    [--levers defaults,control,...]

Set-up (benchmarks/secpe_yelp.py): private = yelp/dev.csv (5000 reviews; category and stars), public =
yelp/test.csv minus the 1000-review held-out slice (the downstream test set), offline n-gram generator (order 4)
and MiniLM; Aug-PE with (ε, δ) = (4, 1e-5), record sensitivity. Each lever changes one setting from the defaults:

* ``defaults``     — rank selection, centred votes (hubness), blank-filling variations, mask ½;
* ``control``      — σ = 10⁶: the votes carry nothing (the generator plus random selection);
* ``no-centre``    — votes without centring (``voting.center: none``);
* ``sample``       — selection by sampling ∝ the noisy votes instead of ranking;
* ``schedule``     — a decreasing mask schedule (0.5, 0.35, 0.25, …) as Aug-PE's variation-strength schedule;
* ``iterations6``  — twice the iterations (T = 6; σ grows as √T);
* ``variations8``  — twice the candidates per selected sample (L = 8);
* ``lookahead``    — lookahead 2 (a candidate's embedding averaged with two of its variations);
* ``real``         — the classifier trained on the 5000 private reviews themselves (the upper bound).

Printed: FID to the private reviews and downstream accuracy (logistic regression on MiniLM; category / stars) per
lever, with the share of the distance from the control to real data each closes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from harness import ROOT

_spec = importlib.util.spec_from_file_location("secpe_yelp", ROOT / "benchmarks" / "secpe_yelp.py")
assert _spec and _spec.loader
sy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sy)

LEVERS = ("defaults", "control", "no-centre", "sample", "schedule", "iterations6", "variations8", "lookahead")


def lever_config(args: argparse.Namespace, lever: str) -> dict[str, Any]:
    raw = sy.base_config(args, args.out / f"{lever}-s{args.seed}", args.seed)
    raw.update(method="augpe", privacy={"epsilon": 4.0, "delta": 1e-5})
    ev = raw["evolution"]
    if lever == "control":
        raw["privacy"] = {"noise_multiplier": 1e6}
    elif lever == "no-centre":
        raw["voting"] = {"center": "none"}
    elif lever == "sample":
        ev["selection"] = "sample"
    elif lever == "schedule":
        ev["variation"] = {"kind": "blank", "mask_prob": 0.5,
                           "mask_prob_schedule": [0.5, 0.35, 0.25, 0.2, 0.15, 0.1][: ev["iterations"]]}
    elif lever == "iterations6":
        ev["iterations"] = 2 * ev["iterations"]
    elif lever == "variations8":
        ev["variations"] = 2 * ev["variations"]
    elif lever == "lookahead":
        ev["lookahead"] = 2
    elif lever != "defaults":
        raise SystemExit(f"unknown lever {lever!r}; known: {', '.join(LEVERS)}, real")
    return raw


def real_accuracy(args: argparse.Namespace, emb: Any) -> dict[str, float]:
    from privtext.data import load_corpus
    from privtext.evaluate import downstream_accuracy

    priv = load_corpus(sy.DATA / "dev.csv", label_columns=["label1", "label2"])
    test = load_corpus(next(args.out.glob("defaults-s*/heldout.jsonl")), label_columns=["label1", "label2"])
    import numpy as np

    res = downstream_accuracy(priv, test, rng=np.random.default_rng(args.seed), label_columns=["label1", "label2"],
                              classifier="embedding-logreg", embedder=emb)
    return {c: r.accuracy for c, r in res.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-samples", type=int, default=500)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--variations", type=int, default=4)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--levers", default=",".join(LEVERS) + ",real")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "augpe_yelp")
    ap.add_argument("--cache", type=Path, default=ROOT / "artifacts" / "emb-cache")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("PRIVTEXT_QUIET", "1")
    if not (sy.DATA / "dev.csv").exists():
        print(f"Yelp data not found under {sy.DATA}; nothing to do", file=sys.stderr)
        return
    from privtext.config import config_from_dict
    from privtext.data import load_corpus
    from privtext.embed import build_embedder
    from privtext.runner import run_config

    args.out.mkdir(parents=True, exist_ok=True)
    emb = build_embedder({"backend": "sentence-transformers", "max_seq_length": args.max_seq_length},
                         cache_dir=args.cache)
    private_emb = emb.embed(list(load_corpus(sy.DATA / "dev.csv").texts))
    results: dict[str, dict[str, Any]] = {}
    levers = [x for x in args.levers.split(",") if x]
    for lever in [x for x in levers if x != "real"]:
        raw = lever_config(args, lever)
        out = Path(raw["output"])
        t0 = time.perf_counter()
        if not (out / "synthetic.jsonl").exists():
            run_config(config_from_dict(raw), force=True)
        results[lever] = {**sy.measure(out, private_emb, emb, args), "seconds": time.perf_counter() - t0}
        r = results[lever]
        print(f"{lever:12} FID {r['fid_private']:.4f}  category {100 * r['accuracy']['label1']:.1f}  "
              f"stars {100 * r['accuracy']['label2']:.1f}  σ {r['sigma']}  ({r['seconds']:.0f} s)", flush=True)
    if "real" in levers:
        results["real"] = {"accuracy": real_accuracy(args, emb)}
        a = results["real"]["accuracy"]
        print(f"{'real':12} category {100 * a['label1']:.1f}  stars {100 * a['label2']:.1f}", flush=True)
    if {"control", "real"} <= set(results):
        lo, hi = results["control"]["accuracy"], results["real"]["accuracy"]
        print("\nshare of the control → real distance closed (category / stars):")
        for k, r in results.items():
            if k in ("real", "control"):
                continue
            share = [(r["accuracy"][c] - lo[c]) / (hi[c] - lo[c]) if hi[c] != lo[c] else float("nan")
                     for c in ("label1", "label2")]
            print(f"  {k:12} {100 * share[0]:6.1f}%  {100 * share[1]:6.1f}%")
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=float))
    print(f"\nwrote {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
