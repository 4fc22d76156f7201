"""Trial of ``lm.codes_input_only`` (label codes condition the public LM but are never predicted): does it make the
small LM use its category codes? Runs at the commit that adds the option (it was reverted after this measurement).

    PYTHONPATH=src python benchmarks/lm_codes_input_only.py 0 2500000    # without the option, the default budget
    PYTHONPATH=src python benchmarks/lm_codes_input_only.py 1 2500000    # with it

Trains the small LM on the Yelp public split (``benchmarks/compare_methods.py``'s data) into /tmp/lmexp, then prints
its loss on 150 held-out real reviews with their own codes, the extra loss when one column's codes are shuffled,
and the mean cosine between the category codes' embeddings.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "artifacts" / "compare" / "data"


def main() -> None:
    import torch

    from privtext.generate.lm.build import LMSettings, build_public_lm

    torch.set_num_threads(1)
    flag, tokens = sys.argv[1] == "1", int(sys.argv[2])
    with open(DATA / "yelp-public.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    with open(DATA / "yelp-real.csv", newline="", encoding="utf-8") as f:
        real = list(csv.DictReader(f))[:150]
    t0 = time.time()
    lm = build_public_lm([r["text"] for r in rows], {c: [r[c] for r in rows] for c in ("label1", "label2")},
                         settings=LMSettings(train_tokens=tokens, codes_input_only=flag), cache_dir="/tmp/lmexp",
                         device="cpu")
    texts = [r["text"] for r in real]
    rng = np.random.default_rng(0)
    own = [{c: r[c] for c in ("label1", "label2")} for r in real]
    base = lm.loss(texts, own)
    gaps = {}
    for col in ("label1", "label2"):
        perm = rng.permutation(len(real))
        gaps[col] = lm.loss(texts, [{**o, col: real[int(perm[i])][col]} for i, o in enumerate(own)]) - base
    emb = lm.model.transformer.wte.weight.detach()
    ids = [lm.encoder.label_id[("label1", v)] for v in lm.codebook.values[0]]
    x = torch.nn.functional.normalize(emb[ids], dim=1)
    cos = float((x @ x.T)[~torch.eye(len(ids), dtype=torch.bool)].mean())
    print(f"codes_input_only={flag} tokens={tokens} train {time.time() - t0:.0f}s "
          f"val {lm.info['validation_loss_after']:.4f} own {base:.4f} label1-shuffled {gaps['label1']:+.4f} "
          f"label2-shuffled {gaps['label2']:+.4f} category-code cos {cos:.3f}")


if __name__ == "__main__":
    main()
