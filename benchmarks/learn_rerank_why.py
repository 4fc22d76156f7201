"""Why does ``kind: rerank`` not carry into the released set? (issue 38, docs/compare.md "A learner that can take
it in")

For each run folder given, at its last iteration (``private/checkpoints/iter_NNN``: the candidates' embeddings and
the selected index, all generated text), against the real held-out set:

* FID of the whole candidate pool, of 150 candidates drawn at random (mean of 20 draws), and of the selected set
  (the vote's choice: the released synthetic set);
* precision and recall of the selected set and of one random draw (Kynkäänniemi et al. 2019, k = 3 nearest
  neighbours on the unit sphere of the run's MiniLM embeddings): precision, the share of the synthetic texts
  inside some real text's k-NN ball (are they typical?); recall, the share of real texts inside some synthetic
  text's ball (is the real set covered?); privtext.evaluate.fid.precision_recall.

Rows are mean ± sd over the runs of one configuration (the name before ``-s<seed>``). Public and generated text
only; no private record is read.

    PYTHONPATH=src python benchmarks/learn_rerank_why.py artifacts/learn_yelp/runs/augpe-{none,rerank}-t4-s{5,6,7} \\
        artifacts/learn_yelp/runs/secpe-{none,rerank}-t4-s{0,1,2} --real artifacts/compare/data/yelp-real.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--real", type=Path, required=True)
    args = ap.parse_args()
    from harness import offline, read_rows, use_src

    use_src()
    offline()
    from privtext.evaluate.embedding import resolve_embedder
    from privtext.evaluate.fid import fid, precision_recall

    emb = resolve_embedder(None)
    real = np.asarray(emb.embed([r["text"] for r in read_rows(args.real)]), dtype=np.float64)

    def pr(synthetic: np.ndarray) -> tuple[float, float]:
        r = precision_recall(real, synthetic, k=3)
        return r.precision, r.recall

    by: dict[str, list[list[float]]] = {}
    for run in args.runs:
        last = sorted((run / "private" / "checkpoints").glob("iter_*"))[-1]
        c = np.load(last / "embeddings.npy").astype(np.float64)
        sel = np.load(last / "selected_index.npy")
        rng = np.random.default_rng(0)
        draws = [rng.choice(len(c), size=len(sel), replace=False) for _ in range(20)]
        row = [fid(c, real).fid, float(np.mean([fid(c[d], real).fid for d in draws])), fid(c[sel], real).fid,
               *pr(c[sel]), *pr(c[draws[0]])]
        by.setdefault(run.name.rsplit("-s", 1)[0], []).append(row)
    print("| config | runs | FID: pool | FID: random 150 | FID: selected | selected: precision / recall "
          "| random 150: precision / recall |")
    print("|---|---|---|---|---|---|---|")
    for name, rows in by.items():
        a = np.asarray(rows)
        m, s = a.mean(axis=0), (a.std(axis=0, ddof=1) if len(a) > 1 else np.zeros(a.shape[1]))
        f = [f"{m[i]:.4f} ± {s[i]:.4f}" for i in range(3)]
        p = [f"{m[i]:.3f} ± {s[i]:.3f}" for i in range(3, 7)]
        print(f"| {name} | {len(a)} | {f[0]} | {f[1]} | {f[2]} | {p[0]} / {p[1]} | {p[2]} / {p[3]} |")


if __name__ == "__main__":
    main()
