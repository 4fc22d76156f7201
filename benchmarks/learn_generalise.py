"""Does one DPO round teach the lm a preference that holds beyond its own pairs? (issue 38's "why", part 2)

benchmarks/learn_signal.py shows that the pairs of the Yelp learning runs carry the private preference (their
released order agrees with the exact votes' order). This script asks whether the learner can take it in. It reads
the pairs the runs kept (``private/checkpoints/iter_*/learn/pairs.jsonl``: generated texts and released counts;
post-processing) and the runs' public lm from its cache entry, then, for each option set, trains a fresh LoRA
adapter with :func:`privtext.learn.dpo.train_dpo` (the run's own trainer) on the pairs of the ``--train`` runs and
measures, on those pairs and on the held-out pairs of the ``--held`` runs (other seeds: other texts, the same
private data):

* ``acc``: the share of pairs whose implicit reward favours the chosen text after training,
  (log π − log π_ref)(chosen) > (log π − log π_ref)(rejected); 0.5 is a coin;
* ``Δmargin``: the mean change of log π(chosen) − log π(rejected), in nats;
* ``held-out acc, chosen shorter / not``: the held-out accuracy on the pairs whose chosen completion has fewer
  tokens than the rejected one, and on the others. The implicit reward is a sum over tokens, so an adapter that
  only moves every token's log-probability the same way (a drift, not a preference) scores high on one side and
  low on the other;
* ``per-token acc``: the held-out accuracy of the reward divided by each completion's token count, which such a
  drift leaves level: what the adapter learned about *which* text, not how long; split by the kind of group the
  pair was ranked in: completions of one prompt (iteration 0) / variations of one parent with its survivor (later
  iterations);
* ``held-out Δ per token, chosen / rejected``: the mean change of log π per completion token, (log π − log π_ref)
  / |y|, of the chosen and of the rejected texts: whether the adapter raised the chosen texts or only lowered
  both (DPO can lower both while widening the gap, moving the model away from every text it was shown).

    PYTHONPATH=src python benchmarks/learn_generalise.py \\
        --train artifacts/learn_yelp/runs/augpe-dpo-s{0,1} --held artifacts/learn_yelp/runs/augpe-dpo-s2 \\
        --lm artifacts/learn_yelp/lm-cache/0106c1eef56071f31c5d840e-v1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

GRID = [  # (lr, beta, epochs): the run's defaults first, then one change at a time, then the strongest
    (5e-4, 0.01, 1.0), (5e-4, 0.01, 4.0), (5e-4, 0.1, 1.0), (5e-3, 0.01, 1.0), (5e-3, 0.01, 4.0), (5e-3, 0.1, 4.0),
]


def read_pairs(runs: list[Path]) -> list[tuple[dict, dict]]:
    """(pair record, label dict of its group) for every kept pair of ``runs``."""
    import pandas as pd
    import yaml

    out = []
    for run in runs:
        cols = list(yaml.safe_load((run / "private" / "config.yaml").read_text())["data"]["label_columns"])
        for it in sorted((run / "private" / "checkpoints").glob("iter_*")):
            f = it / "learn" / "pairs.jsonl"
            if not f.exists():
                continue
            df = pd.read_parquet(it / "candidates.parquet")
            info = {int(r["group"]): {c: str(r[c]) for c in cols} for _, r in df.drop_duplicates("group").iterrows()}
            for line in f.read_text(encoding="utf-8").splitlines():
                p = json.loads(line)
                out.append((p, info[int(p["group"])]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="+", type=Path, required=True)
    ap.add_argument("--held", nargs="+", type=Path, required=True)
    ap.add_argument("--lm", type=Path, required=True, help="the runs' lm cache entry (a folder with lm.json)")
    ap.add_argument("--lora-r", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=160)
    ap.add_argument("--train-limit", type=int, nargs="+", default=[None],
                    help="train on a random subset of this many of the training pairs (several: a learning curve "
                    "on the same held-out pairs)")
    ap.add_argument("--loss", choices=["sigmoid", "sigmoid_norm"], default="sigmoid",
                    help="the DPO loss the adapters train with (dpo.loss; sigmoid_norm: per-token log-ratios)")
    ap.add_argument("--sft-weight", type=float, default=0.0,
                    help="dpo.sft_weight: RPO's α, the chosen completions' NLL per token added to the loss")
    ap.add_argument("--grid", nargs="+", default=None, metavar="LR,BETA,EPOCHS",
                    help="option sets to train (default: GRID, the run's defaults and one change at a time)")
    args = ap.parse_args()

    import torch
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    from privtext.generate.lm.backend import LMOptions
    from privtext.generate.lm.build import _load
    from privtext.learn.dpo import attach_lora, pair_logps, train_dpo
    from privtext.learn.encode import LMPairEncoder
    from privtext.learn.options import DPOOptions
    from privtext.learn.pairs import PreferencePair

    if not (args.lm / "lm.json").exists():
        raise SystemExit(f"{args.lm} is not an lm cache entry (no lm.json)")
    lm = _load(args.lm, LMOptions().settings(), torch.device("cpu"))
    sets = {}
    for name, runs in (("train", args.train), ("held", args.held)):
        sets[name] = [(PreferencePair(**p), info) for p, info in read_pairs(runs)]
    print(f"{os.getloadavg()[0]:.2f} load; torch threads {torch.get_num_threads()}; {len(sets['train'])} training "
          f"pairs ({', '.join(r.name for r in args.train)}), {len(sets['held'])} held out "
          f"({', '.join(r.name for r in args.held)})")
    base = DPOOptions(lora_r=args.lora_r, max_length=args.max_length, loss=args.loss, sft_weight=args.sft_weight)
    model = attach_lora(lm.model, base, rng=np.random.default_rng(0))
    fresh = {k: v.clone() for k, v in get_peft_model_state_dict(model).items()}

    def encode(pairs):
        out = []
        for p, info in pairs:
            enc = LMPairEncoder(lm.encoder, label_info=lambda g, info=info: info, max_length=args.max_length)
            out.append(enc.encode(p))
        return out

    tok = {k: encode(v) for k, v in sets.items()}
    from privtext.generate.lm.codes import PAD

    ref = {k: pair_logps(model, v, pad_id=PAD, reference=True) for k, v in tok.items()}
    ref_full = ref["train"]
    n_tok = {k: (np.array([len(t.chosen) for t in v]), np.array([len(t.rejected) for t in v])) for k, v in tok.items()}
    shorter = n_tok["held"][0] < n_tok["held"][1]
    prompt = np.array([p.source.split("/")[-1].startswith("prompt") for p, _ in sets["held"]])
    print(f"held-out pairs from prompt completions: {prompt.sum()}, from variation groups: {(~prompt).sum()}")
    print(f"held-out pairs whose chosen completion has fewer tokens: {shorter.mean():.2f}; loss {args.loss}, "
          f"sft_weight {args.sft_weight:g}")
    print("| training pairs | lr | β | epochs | steps | s | last loss | train acc | train Δmargin | held-out acc "
          "| held-out Δmargin | held-out acc, chosen shorter / not "
          "| held-out per-token acc (prompt / variation groups) | held-out Δ per token, chosen / rejected |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    grid = GRID if args.grid is None else [tuple(float(x) for x in g.split(",")) for g in args.grid]
    full = tok["train"]
    for limit, (lr, beta, epochs) in ((m, g) for m in args.train_limit for g in grid):
        take = np.sort(np.random.default_rng(2).permutation(len(full))[:limit]) if limit else np.arange(len(full))
        tok["train"] = [full[i] for i in take]
        ref["train"] = (ref_full[0][take], ref_full[1][take])
        set_peft_model_state_dict(model, fresh)
        o = base.model_copy(update={"lr": lr, "beta": beta, "epochs": epochs})
        t0 = time.perf_counter()
        res = train_dpo(model, tok["train"], o, pad_id=PAD, rng=np.random.default_rng(1))
        secs = time.perf_counter() - t0
        row = []
        for k in ("train", "held"):
            c, r = pair_logps(model, tok[k], pad_id=PAD)
            rc, rr = ref[k]
            reward = (c - rc) - (r - rr)
            row += [float(np.mean(reward > 0)), float(np.mean(reward))]
            if k == "held":
                split = (float(np.mean(reward[shorter] > 0)), float(np.mean(reward[~shorter] > 0)))
                lc, lr_ = n_tok[k]
                dc, dr = (c - rc) / lc, (r - rr) / lr_  # log π − log π_ref per token
                right = dc - dr > 0
                per_token = tuple(f"{np.mean(x):.3f}" if len(x) else "—" for x in (right, right[prompt], right[~prompt]))
                moved = (float(np.mean(dc)), float(np.mean(dr)))
        print(f"| {len(take)} | {lr:g} | {beta:g} | {epochs:g} | {res.steps} | {secs:.0f} | {res.loss_last:.4f} "
              f"| {row[0]:.3f} | {row[1]:+.3f} | {row[2]:.3f} | {row[3]:+.3f} | {split[0]:.3f} / {split[1]:.3f} "
              f"| {per_token[0]} ({per_token[1]} / {per_token[2]}) | {moved[0]:+.4f} / {moved[1]:+.4f} |", flush=True)
    n = len(tok["held"])
    print(f"\na coin on {n} held-out pairs: 0.5 ± {0.5 / np.sqrt(n):.3f} (one s.e.)")


if __name__ == "__main__":
    main()
