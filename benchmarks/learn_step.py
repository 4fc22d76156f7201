"""Issue 38's learning step on this CPU: its time per iteration for the lm generator, and a signal check.

    PYTHONPATH=src python benchmarks/learn_step.py [--corpus tickets] [--parents 64] [--variations 6]
        [--pairs-per-group 1 2] [--sigma 4] [--lr 5e-4] [--toy card,account] [--threads N]

1. The lm generator with its default options, trained on the corpus's public split (``artifacts/corpora/<corpus>/
   public.csv``, written by benchmarks/corpora.py; cached in ``artifacts/lm-cache``, the folder
   benchmarks/lm_generator.py uses).
2. One Aug-PE-shaped iteration: ``--parents`` texts from ``random``, each with ``variations − 1`` blank variations
   (mask ½) and itself (its survivor): groups of L = ``--variations`` candidates with one parent.
3. A real release: the packaged MiniLM embeds the private split and the candidates, and ``dp_vote_histogram`` at
   noise multiplier ``--sigma`` goes through a ReleaseKeeper (ledger and kept value under ``artifacts/learn/bench``).
   The pairs are built from that kept value only (:class:`privtext.learn.ReleasedVotes`).
4. Per ``--pairs-per-group`` m: the pairs (rejected: rank ⌈L/2⌉), then one DPO round with the default
   :class:`~privtext.learn.options.DPOOptions` (β 0.01, one epoch, batch 8, ``--lr``) on a fresh adapter. Printed:
   pairs, pairs per prompt, optimiser steps, seconds for the pairs, the reference pass and the whole round, seconds
   per step, and the pairs' mean margin log π(chosen) − log π(rejected) before and after.
5. Signal check on a toy preference set: public texts holding word A (``--toy A,B``); chosen = the text, rejected =
   the same text with A replaced by B. DPO on half of them (a few epochs); the mean margin on the trained half and
   on the held-out half, before and after.

Prints the load average before and after (a shared 2-core machine: other work slows every figure) and writes
``artifacts/learn/learn_step.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "artifacts" / "learn"


def _texts(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return [r[0] for r in rows[1:] if r and r[0].strip()]


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _population(gen: Any, parents: int, variations: int, rng: np.random.Generator) -> Any:
    from privtext.data.population import Population
    from privtext.generate import VariationSpec

    seeds = gen.random(None, parents, rng=rng)
    kids = gen.variation([t for t in seeds for _ in range(variations - 1)], None, VariationSpec("blank", 0.5), rng=rng)
    texts, parent = [], []
    for i, s in enumerate(seeds):
        texts.append(s)
        parent.append(f"t0-{i}")
        texts.extend(kids[i * (variations - 1):(i + 1) * (variations - 1)])
        parent.extend([f"t0-{i}"] * (variations - 1))
    n = len(texts)
    return Population([f"t1-{i}" for i in range(n)], texts, np.zeros(n, dtype=np.int64),
                      ["variation"] * n, parent, ["lm"] * n)


def _release(pop: Any, private: list[str], sigma: float, folder: Path) -> Any:
    """The iteration's vote histogram, released through a ReleaseKeeper; returns ReleasedVotes from its kept value."""
    from privtext.embed import build_embedder
    from privtext.learn import ReleasedVotes
    from privtext.mechanisms.voting import dp_vote_histogram
    from privtext.privacy import Budget, Ledger
    from privtext.privacy.relation import ONE_VOTE_L2, NeighbouringRelation
    from privtext.privacy.release import ReleaseKeeper, gaussian_release
    from privtext.rng import noise_rng

    shutil.rmtree(folder, ignore_errors=True)
    keeper = ReleaseKeeper(Ledger(folder / "ledger.jsonl", Budget.noise(noise_multiplier=sigma)),
                           lambda r: folder / "values" / f"{r.key.replace('/', '_')}.npz")
    emb = build_embedder({"backend": "sentence-transformers"})
    priv = np.asarray(emb.embed(private), dtype=np.float32)
    cand = np.asarray(emb.embed(pop.texts), dtype=np.float32)
    key = "votes/iter_001"
    r = gaussian_release(key, mechanism="dp_nn_vote_histogram", noise_multiplier=sigma, contribution=ONE_VOTE_L2,
                         relation=NeighbouringRelation.add_remove(), iteration=1)

    def compute() -> Any:
        rel, event = dp_vote_histogram(priv, cand, noise_multiplier=sigma, sensitivity=r.sensitivity,
                                       rng=noise_rng(None, key))
        return {"noisy": rel.noisy, "raw_noisy": rel.raw_noisy}, event

    keeper.release(r, compute)
    return ReleasedVotes.kept(keeper, key, "noisy")


def _toy(public: list[str], a: str, b: str, n: int) -> tuple[list[Any], list[Any]]:
    from privtext.learn import PreferencePair

    word = re.compile(rf"\b{re.escape(a)}\b", re.IGNORECASE)
    hold = [t for t in dict.fromkeys(public) if word.search(t) and len(t.split()) <= 40][: 2 * n]
    pairs = [PreferencePair(0, t, word.sub(b, t), 1.0, 0.0, "lm", "toy") for t in hold]
    return pairs[: len(pairs) // 2], pairs[len(pairs) // 2:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="tickets", help="a folder of artifacts/corpora (public.csv, private.csv)")
    ap.add_argument("--parents", type=int, default=64)
    ap.add_argument("--variations", type=int, default=6)
    ap.add_argument("--pairs-per-group", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--sigma", type=float, default=4.0, help="noise multiplier of the vote release")
    ap.add_argument("--lr", type=float, default=None, help="DPO learning rate (default: DPOOptions')")
    ap.add_argument("--toy", default="card,account", help="A,B: the toy set prefers A over B")
    ap.add_argument("--toy-pairs", type=int, default=64)
    ap.add_argument("--toy-epochs", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--cache-dir", type=Path, default=ROOT / "artifacts" / "lm-cache")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from privtext.generate.lm.backend import LMGenerator, LMOptions
    from privtext.learn import PairOptions, preference_pairs
    from privtext.learn.dpo import attach_lora, pair_logps, preference_margins, train_dpo
    from privtext.learn.encode import LMPairEncoder
    from privtext.learn.options import DPOOptions

    if args.threads:
        torch.set_num_threads(args.threads)
    folder = ROOT / "artifacts" / "corpora" / args.corpus
    if not (folder / "public.csv").exists():
        print(f"{folder}/public.csv not found: run benchmarks/corpora.py first", file=sys.stderr)
        return 2
    public, private = _texts(folder / "public.csv"), _texts(folder / "private.csv")
    report: dict[str, Any] = {"corpus": args.corpus, "public": len(public), "private": len(private),
                              "threads": torch.get_num_threads(), "load_before": os.getloadavg()}
    print(f"{_load()}; torch threads {torch.get_num_threads()}; corpus {args.corpus}: {len(public)} public, "
          f"{len(private)} private texts")

    t0 = time.perf_counter()
    gen = LMGenerator(public=public, options=LMOptions(cache_dir=str(args.cache_dir)))
    print(f"lm generator: {gen.lm.info.get('parameters')} parameters, cache {gen.lm.info.get('cache')}, "
          f"{time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    pop = _population(gen, args.parents, args.variations, rng)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    votes = _release(pop, private, args.sigma, OUT / "bench")
    vote_s = time.perf_counter() - t0
    print(f"iteration: {len(pop)} candidates ({args.parents} parents × {args.variations}) written in {gen_s:.1f} s; "
          f"embedded and voted (σ = {args.sigma:g}, {len(private)} private) in {vote_s:.1f} s")

    opts = DPOOptions() if args.lr is None else DPOOptions(lr=args.lr)
    model = attach_lora(gen.lm.model, opts, rng=np.random.default_rng(args.seed))
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    fresh = {k: v.clone() for k, v in get_peft_model_state_dict(model).items()}
    enc = LMPairEncoder(gen.lm.encoder, label_info=lambda g: None, max_length=gen.lm.n_positions)
    rows = []
    print(f"\nDPO round (β {opts.beta:g}, lr {opts.lr:g}, batch {opts.batch_size}, {opts.epochs:g} epoch, LoRA r "
          f"{opts.lora_r}), lm generator, {torch.get_num_threads()} thread(s):")
    print(f"{'pairs/prompt':>12} {'pairs':>6} {'steps':>6} {'pairs s':>8} {'ref s':>7} {'round s':>8} {'s/step':>7} "
          f"{'margin before':>14} {'after':>8}")
    for m in args.pairs_per_group:
        set_peft_model_state_dict(model, fresh)
        t0 = time.perf_counter()
        pairs = preference_pairs(pop, votes, PairOptions(pairs_per_group=m), rng=np.random.default_rng(1))
        tokens = enc.encode_all(pairs)
        pairs_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pair_logps(model, tokens, pad_id=enc.pad_id, batch_size=16, reference=True)
        ref_s = time.perf_counter() - t0
        before = preference_margins(model, tokens, pad_id=enc.pad_id)
        res = train_dpo(model, tokens, opts, pad_id=enc.pad_id, rng=np.random.default_rng(2))
        after = preference_margins(model, tokens, pad_id=enc.pad_id)
        row = {"pairs_per_group": m, "pairs": len(pairs), "groups": args.parents, "steps": res.steps,
               "pairs_seconds": round(pairs_s, 3), "reference_seconds": round(ref_s, 2),
               "round_seconds": round(res.seconds, 2), "seconds_per_step": round(res.seconds / max(res.steps, 1), 3),
               "margin_before": float(np.mean(before)) if len(before) else None,
               "margin_after": float(np.mean(after)) if len(after) else None,
               "loss_first": res.loss_first, "loss_last": res.loss_last}
        rows.append(row)
        print(f"{len(pairs) / args.parents:>12.2f} {len(pairs):>6} {res.steps:>6} {pairs_s:>8.2f} {ref_s:>7.2f} "
              f"{res.seconds:>8.1f} {row['seconds_per_step']:>7.2f} {row['margin_before'] or math.nan:>14.3f} "
              f"{row['margin_after'] or math.nan:>8.3f}")
    report["iteration"] = {"candidates": len(pop), "generation_seconds": round(gen_s, 1),
                           "vote_seconds": round(vote_s, 1), "rounds": rows}

    a, b = args.toy.split(",")
    train, held = _toy(public, a, b, args.toy_pairs)
    if train and held:
        set_peft_model_state_dict(model, fresh)
        tt, th = enc.encode_all(train), enc.encode_all(held)
        mt0, mh0 = preference_margins(model, tt, pad_id=enc.pad_id), preference_margins(model, th, pad_id=enc.pad_id)
        toy_opts = opts.model_copy(update={"epochs": args.toy_epochs})
        res = train_dpo(model, tt, toy_opts, pad_id=enc.pad_id, rng=np.random.default_rng(3))
        mt1, mh1 = preference_margins(model, tt, pad_id=enc.pad_id), preference_margins(model, th, pad_id=enc.pad_id)
        print(f"\nsignal check: toy pairs prefer {a!r} over {b!r} in the same public text; trained on {len(train)} "
              f"({toy_opts.epochs:g} epochs, {res.steps} steps, {res.seconds:.1f} s), {len(held)} held out")
        for name, x0, x1 in (("trained", mt0, mt1), ("held-out", mh0, mh1)):
            up = float(np.mean(x1 > x0))
            print(f"  {name:>8}: margin log π(chosen) − log π(rejected) {np.mean(x0):+.3f} → {np.mean(x1):+.3f} "
                  f"(mean change {np.mean(x1 - x0):+.3f} ± {np.std(x1 - x0) / math.sqrt(len(x0)):.3f} s.e.; "
                  f"{up:.0%} of pairs up)")
        report["signal"] = {"a": a, "b": b, "train": len(train), "held_out": len(held), "epochs": toy_opts.epochs,
                            "steps": res.steps, "seconds": round(res.seconds, 2),
                            "trained": [float(np.mean(mt0)), float(np.mean(mt1))],
                            "held": [float(np.mean(mh0)), float(np.mean(mh1))],
                            "held_up_share": float(np.mean(mh1 > mh0))}
    else:
        print(f"\nsignal check skipped: no public text holds {a!r}")
    report["load_after"] = os.getloadavg()
    print(f"\n{_load()}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "learn_step.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT / 'learn_step.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
