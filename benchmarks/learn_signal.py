"""How much of the private preference survives into the pairs that ``learn: dpo`` trains on (issue 38's "why").

The learning step ranks the candidates of a group (variations of one parent, or ten completions of one prompt) by
their *released* vote counts and pairs rank 1 with rank R (privtext.learn.pairs). That is post-processing: the run
never sees the exact counts. This benchmark, which reads the private corpus as the evaluation does, recomputes the
exact nearest-neighbour votes for each iteration of a finished run that a learning step followed (the run's
candidates and their embeddings, the same vote rule: one vote per private record for its nearest candidate of its
label group, L2 after centring on the candidates' mean) and asks, for the pairs that step trained on (its kept
``learn/pairs.jsonl``, formed from the released histogram):

* ``agree``: the share of pairs whose exact counts order the two texts the same way (chosen > rejected); 0.5 is a
  coin, 1 a noise-free ranking. Ties in the exact counts count half;
* ``tie``: the share of pairs whose exact counts are equal (the private data prefers neither);
* ``exact margin``: the mean exact count of the chosen text minus the rejected one's, beside the noise σ·Δ on each;
* ``oracle margin``: the same for the pairs the exact counts would have formed (the most the votes could say);
* ``sd within``: the standard deviation of the exact counts within a group, averaged over groups, the signal the
  noise has to beat; ``sd between``: the same over the groups' means.

Only aggregates are printed, each over one round's 100 or more pairs. Run it on finished runs
(benchmarks/learn_votes.py makes them)::

    PYTHONPATH=src python benchmarks/learn_signal.py artifacts/learn_yelp/runs/augpe-dpo-s{0,1,2} \\
        artifacts/learn_yelp/runs/augpe-dpo-t4-combined-s{0,1,2,3,4}
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from privtext.config import load_config  # noqa: E402
from privtext.data.population import Population  # noqa: E402
from privtext.embed import build_embedder  # noqa: E402
from privtext.learn.options import PairOptions  # noqa: E402
from privtext.learn.pairs import candidate_groups, reject_position  # noqa: E402
from privtext.mechanisms.voting import nearest_votes  # noqa: E402

_EMB: dict[str, tuple[np.ndarray, list[tuple[str, ...]]]] = {}


def private_side(cfg) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """The private records' embeddings (the run's embedder and cache) and their label tuples."""
    import pandas as pd

    key = str(cfg.data.private)
    if key not in _EMB:
        df = pd.read_csv(cfg.data.private)
        emb = build_embedder(cfg.embedder, cache_dir=cfg.embedder.cache_dir)
        vec = np.asarray(emb.embed(df[cfg.data.text_column].astype(str).tolist()), dtype=np.float32)
        labels = [tuple(str(x) for x in row) for row in df[list(cfg.data.label_columns)].itertuples(index=False)]
        _EMB[key] = (vec, labels)
    return _EMB[key]


def _find(pop: Population, idx: np.ndarray, noisy: np.ndarray, text: str, value: float) -> int:
    """The candidate of group ``idx`` that a kept pair names: its text, and its released count."""
    hits = [int(i) for i in idx if pop.texts[i] == text and abs(noisy[i] - value) < 1e-6]
    if not hits:
        raise SystemExit(f"a kept pair's text is not a candidate of its group ({len(idx)} candidates)")
    return hits[0]


def one_run(run: Path) -> list[dict]:
    import pandas as pd

    cfg = load_config(run / "private" / "config.yaml")
    priv = json.loads((run / "privacy.json").read_text())["parameters"]
    o = PairOptions(**{k: v for k, v in (priv.get("learn", {}).get("pairs") or {}).items()})
    sigma = float(priv["noise_multiplier"])
    pvec, plabels = private_side(cfg)
    out = []
    for it in sorted((run / "private" / "checkpoints").glob("iter_*")):
        kept = it / "learn" / "pairs.jsonl"
        if not kept.exists():  # no learning step after this iteration (the last one)
            continue
        df = pd.read_parquet(it / "candidates.parquet")
        cvec = np.load(it / "embeddings.npy").astype(np.float32)
        noisy = np.load(it / "histogram.npy")
        cols = list(cfg.data.label_columns)
        gid = {tuple(str(x) for x in r[cols]): int(r["group"]) for _, r in df.iterrows()}
        pg = np.array([gid.get(lab, -1) for lab in plabels])
        exact, _ = nearest_votes(pvec, cvec, private_groups=pg, candidate_groups=df["group"].to_numpy(),
                                 metric="l2", center=cvec.mean(axis=0))
        pop = Population.from_frame(df, cvec)
        groups = dict(candidate_groups(pop, o.group_size))
        agree, tie, margin, oracle, sd_in, means = [], [], [], [], [], []
        for line in kept.read_text(encoding="utf-8").splitlines():  # the pairs the step trained on
            p = json.loads(line)
            idx = groups[p["source"]]
            a, b = (_find(pop, idx, noisy, p[side], p[f"{side}_votes"]) for side in ("chosen", "rejected"))
            d = float(exact[a] - exact[b])
            agree.append(1.0 if d > 0 else 0.5 if d == 0 else 0.0)
            tie.append(d == 0)
            margin.append(d)
        rng = np.random.default_rng(0)
        for _name, idx in groups.items():  # the pairs the exact counts would have formed, by the same rule
            if len(idx) < 2:
                continue
            sd_in.append(float(np.std(exact[idx])))
            means.append(float(np.mean(exact[idx])))
            order = idx[np.lexsort((rng.random(len(idx)), -exact[idx]))]
            R = reject_position(o, len(idx))
            for i in range(o.pairs_per_group):
                c, r = i, R - 1 + i
                if r >= len(order) or r <= c:
                    break
                if exact[order[c]] - exact[order[r]] > o.min_margin:
                    oracle.append(float(exact[order[c]] - exact[order[r]]))
        out.append({"run": run.name, "iter": it.name, "pairs": len(agree), "agree": float(np.mean(agree)),
                    "tie": float(np.mean(tie)), "margin": float(np.mean(margin)), "oracle": float(np.mean(oracle)),
                    "sd_in": float(np.mean(sd_in)), "sd_between": float(np.std(means)), "sigma": sigma,
                    "votes_per_candidate": float(exact.sum() / len(exact))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    args = ap.parse_args()
    rows = [r for run in args.runs for r in one_run(run)]
    print("| run | iteration | pairs | agree | exact tie | exact margin | oracle margin | sd within | sd between "
          "| σ·Δ | votes per candidate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['iter']} | {r['pairs']} | {r['agree']:.2f} | {r['tie']:.2f} | {r['margin']:.2f} "
              f"| {r['oracle']:.2f} | {r['sd_in']:.2f} | {r['sd_between']:.2f} | {r['sigma']:.2f} "
              f"| {r['votes_per_candidate']:.2f} |")
    w = np.array([r["pairs"] for r in rows], dtype=float)
    print(f"\nall pairs ({int(w.sum())}): agree {np.average([r['agree'] for r in rows], weights=w):.3f}, "
          f"exact tie {np.average([r['tie'] for r in rows], weights=w):.3f}, exact margin "
          f"{np.average([r['margin'] for r in rows], weights=w):.2f}, oracle margin "
          f"{np.average([r['oracle'] for r in rows], weights=w):.2f}")


if __name__ == "__main__":
    main()
