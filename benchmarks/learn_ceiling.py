"""How much of the pairs' preference can any learner take in from so few pairs? (issue 38's "why", part 3)

benchmarks/learn_generalise.py shows that a DPO-trained adapter of the Yelp runs' 4.26 M-parameter lm orders
0.60-0.65 of held-out pairs the way the released votes did, mostly by length. This script asks whether that is the
lm's limit or the pairs'. It fits two simple learners on the same kept pairs (``pairs.jsonl``: generated texts and
released counts; post-processing) of the ``--train`` runs and scores the pairs of the ``--held`` runs (other seeds):

* ``length``: "the shorter text is chosen" (and the reverse rule, whichever is better on the training pairs);
* ``probe``: logistic regression on the difference of the two texts' sentence embeddings (the runs' own embedder,
  the space the votes were cast in), trained on both orders of every pair (no intercept: the rule is symmetric),
  C chosen by 5-fold cross-validation on the training pairs; with and without the two word counts as features.

Each prints its held-out accuracy (0.5 is a coin), split into the pairs whose chosen text is shorter and the
others. A probe far above the lm's per-token 0.64 says the preference is learnable from these pairs and the lm is
what cannot take it in; a probe near it says the pairs themselves carry little that generalises.

    PYTHONPATH=src python benchmarks/learn_ceiling.py \\
        --train artifacts/learn_yelp/runs/augpe-dpo-t4-combined-s{0,1,2,3} \\
        --held artifacts/learn_yelp/runs/augpe-dpo-t4-combined-s4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from learn_generalise import read_pairs  # noqa: E402
from privtext.config import load_config  # noqa: E402
from privtext.embed import build_embedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="+", type=Path, required=True)
    ap.add_argument("--held", nargs="+", type=Path, required=True)
    args = ap.parse_args()
    from sklearn.linear_model import LogisticRegressionCV

    cfg = load_config(args.train[0] / "private" / "config.yaml")
    emb = build_embedder(cfg.embedder, cache_dir=cfg.embedder.cache_dir)
    data = {}
    for name, runs in (("train", args.train), ("held", args.held)):
        pairs = [p for p, _ in read_pairs(runs)]
        c = np.asarray(emb.embed([p["chosen"] for p in pairs]), dtype=np.float64)
        r = np.asarray(emb.embed([p["rejected"] for p in pairs]), dtype=np.float64)
        lc = np.array([len(p["chosen"].split()) for p in pairs], dtype=np.float64)
        lr = np.array([len(p["rejected"].split()) for p in pairs], dtype=np.float64)
        prompt = np.array([p["source"].split("/")[-1].startswith("prompt") for p in pairs])
        data[name] = (c, r, lc, lr, prompt)
    print(f"{len(data['train'][0])} training pairs ({', '.join(r.name for r in args.train)}), "
          f"{len(data['held'][0])} held out ({', '.join(r.name for r in args.held)})")
    c, r, lc, lr, prompt = data["held"]
    shorter = lc < lr
    n = len(c)

    def report(name: str, right: np.ndarray) -> None:
        parts = [f"{np.mean(right[m]):.3f}" if m.any() else "—" for m in (shorter, ~shorter, prompt, ~prompt)]
        print(f"| {name} | {np.mean(right):.3f} | {parts[0]} / {parts[1]} | {parts[2]} / {parts[3]} |")

    print("| learner | held-out acc | chosen shorter / not | prompt / variation groups |")
    print("|---|---|---|---|")
    tc, tr, tlc, tlr, _ = data["train"]
    sign = 1.0 if np.mean(tlc < tlr) >= 0.5 else -1.0  # the better length rule on the training pairs
    report("length (" + ("shorter" if sign > 0 else "longer") + " is chosen)",
           np.where(lc == lr, 0.5, (sign * (lr - lc) > 0).astype(float)))

    def features(a, b, la, lb, with_length):
        x = a - b
        if with_length:
            x = np.hstack([x, np.log1p(la)[:, None] - np.log1p(lb)[:, None]])
        return x

    for with_length in (False, True):
        xt = features(tc, tr, tlc, tlr, with_length)
        x = np.vstack([xt, -xt])
        y = np.r_[np.ones(len(xt)), np.zeros(len(xt))]
        probe = LogisticRegressionCV(Cs=np.logspace(-2, 3, 11), cv=5, fit_intercept=False, max_iter=5000).fit(x, y)
        right = probe.decision_function(features(c, r, lc, lr, with_length)) > 0
        report(f"probe on embedding differences{' + lengths' if with_length else ''} (C {probe.C_[0]:.3g})",
               right.astype(float))
    print(f"\na coin on {n} held-out pairs: 0.5 ± {0.5 / np.sqrt(n):.3f} (one s.e.)")


if __name__ == "__main__":
    main()
