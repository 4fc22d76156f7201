"""Train the Yelp learning runs' public lm with another token budget, for benchmarks/learn_generalise.py's
question "does a better-trained lm take in more of the pairs' preference?" (issue 38's "why").

The lm of benchmarks/learn_votes.py (the ``lm`` generator's options there, 4.26 M parameters) is trained on the
public split with ``--train-tokens`` (the runs used 1 200 000), optionally with another shape (``--n-layer``,
``--n-embd``, ``--n-head``), into ``--cache-dir``; the entry's folder, its size and its validation loss are
printed. Public text only.

    PYTHONPATH=src python benchmarks/learn_lm_build.py --train-tokens 300000 --cache-dir artifacts/learn_yelp/lm-ladder
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-tokens", type=int, required=True)
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--n-layer", type=int, default=None, help="a larger (or smaller) model than the runs' 4 × 256")
    ap.add_argument("--n-embd", type=int, default=None)
    ap.add_argument("--n-head", type=int, default=None)
    args = ap.parse_args()
    import pandas as pd

    from learn_votes import DATA, DATASETS, LM_OPTIONS
    from privtext.generate.lm import build_public_lm
    from privtext.generate.lm.backend import LMOptions

    public = pd.read_csv(DATA / "yelp-public.csv")
    opts = LMOptions(**{**LM_OPTIONS, "train_tokens": args.train_tokens}, torch_threads=args.threads,
                     n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head)
    labels = {c: public[c].astype(str).tolist() for c in DATASETS["yelp"]["labels"]}
    lm = build_public_lm(public["text"].astype(str).tolist(), labels, settings=opts.settings(),
                         cache_dir=args.cache_dir, device="cpu")
    info = lm.info
    print(f"{info['cache_dir']}: {info['parameters']} parameters, {info['train']['tokens']} tokens, "
          f"{info['epochs']:.2f} epochs, validation loss {info['validation_loss_after']:.3f} nats/token "
          f"({info['cache']}, {info['total_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
