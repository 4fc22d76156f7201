"""The offline check run before ``kind: rerank`` was (issue 38): does a probe fitted to released-vote pairs pick
the better of two sibling candidates?

A logistic probe on MiniLM embedding differences (privtext.learn.rerank.fit_preference, the learner ``kind:
rerank`` uses) is fitted to the kept pairs (``pairs.jsonl``: generated texts, released counts) of the ``--train``
runs. For each iteration of each ``--score`` run (runs without learning, other seeds), the candidates of every
parent (iteration 0: every label group) are split into random pairs, 10 times over; from each pair the probe's
choice, the other one, and a coin's choice form three halves of the pool, scored by FID against the real set.
A probe that has learned the votes' preference gives its half a lower FID than a coin's. Generated text only.

    PYTHONPATH=src python benchmarks/learn_rerank_gate.py \\
        --train artifacts/learn_yelp/runs/augpe-dpo-t4-combined-s{0,1,2,3} \\
        --score artifacts/learn_yelp/runs/augpe-none-t4-s{5,6,7} --real artifacts/compare/data/yelp-real.csv
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def sibling_pairs(parents: np.ndarray, rng: np.random.Generator) -> Iterator[tuple[int, int]]:
    """Random pairs of siblings: for each parent (in sorted order) its candidates' indices shuffled and paired off
    (an odd one out is left). A generator: the caller's own draws between pairs keep their place in ``rng``'s
    stream."""
    for p in np.unique(parents):
        idx = rng.permutation(np.flatnonzero(parents == p))
        yield from zip(idx[0::2], idx[1::2], strict=False)


def parents_of(table: dict[str, list[Any]]) -> np.ndarray:
    """Each candidate's parent id, or its label group's for iteration 0's random samples (no parent)."""
    return np.asarray([str(p) if p else f"g{g}" for p, g in zip(table["parent"], table["group"], strict=True)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="+", type=Path, required=True)
    ap.add_argument("--score", nargs="+", type=Path, required=True)
    ap.add_argument("--real", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=None, help="only the first R learning rounds of each --train run")
    args = ap.parse_args()
    from harness import offline, read_rows, use_src

    use_src()
    offline()
    import pyarrow.parquet as pq

    from privtext.evaluate.embedding import resolve_embedder
    from privtext.evaluate.fid import fid
    from privtext.learn.rerank import fit_preference

    emb = resolve_embedder(None)
    pairs = []
    for run in args.train:
        steps = sorted((run / "private" / "checkpoints").glob("iter_*/learn/pairs.jsonl"))
        for f in steps[:args.rounds]:
            pairs += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
    e = np.asarray(emb.embed([p["chosen"] for p in pairs] + [p["rejected"] for p in pairs]), dtype=np.float64)
    w, info = fit_preference(e[:len(pairs)] - e[len(pairs):])
    print(f"probe on {len(pairs)} pairs, C {info['C']:.3g}")
    real = np.asarray(emb.embed([r["text"] for r in read_rows(args.real)]), dtype=np.float64)
    rng = np.random.default_rng(0)
    print("| run | iteration | candidates | FID: probe's half | other half | a coin's half |")
    print("|---|---|---|---|---|---|")
    for run in args.score:
        for it in sorted((run / "private" / "checkpoints").glob("iter_*")):
            t = pq.read_table(it / "candidates.parquet").to_pydict()
            c = np.load(it / "embeddings.npy").astype(np.float64)
            s = c @ w
            parents = parents_of(t)
            res: dict[str, list[float]] = {"probe": [], "other": [], "coin": []}
            for _ in range(10):
                pick: dict[str, list[int]] = {k: [] for k in res}
                for a, b in sibling_pairs(parents, rng):
                    good, bad = (a, b) if s[a] >= s[b] else (b, a)
                    pick["probe"].append(good)
                    pick["other"].append(bad)
                    pick["coin"].append(a if rng.random() < 0.5 else b)
                for k in res:
                    res[k].append(fid(c[pick[k]], real).fid)
            cells = " | ".join(f"{np.mean(v):.4f} ± {np.std(v):.4f}" for v in res.values())
            print(f"| {run.name} | {it.name} | {len(c)} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
