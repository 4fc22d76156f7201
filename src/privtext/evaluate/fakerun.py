"""A fabricated run directory that follows the run-directory contract exactly (for tests and demos).

``write_fake_run`` plays a miniature Private Evolution without a generator: candidates are drawn from a ``pool``
corpus (iteration 0: ``origin="random"``; later iterations: the survivors plus pool texts nearest to each
survivor, ``origin="variation"``), every private record votes for its nearest candidate of the same label
(embedding with the fast hashing embedder), Gaussian noise is added, and the top N per label are selected. It
writes every file of the contract (config, ledger, privacy, checkpoints with COMPLETE markers, prompts, synthetic,
metrics, log) so evaluation, comparison and reports can be tested before the real methods exist. It is not a
private mechanism and claims nothing: its privacy.json says so.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..data.corpus import Corpus
from ..errors import DataError
from ..rundir import RunDir, append_jsonl, atomic_write_bytes, atomic_write_json, atomic_write_text
from .embedding import resolve_embedder


def _npy(path: Path, arr: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


def write_fake_run(
    root: str | os.PathLike[str],
    *,
    private: Corpus,
    pool: Corpus,
    rng: np.random.Generator,
    num_samples: int = 20,
    iterations: int = 3,
    variations: int = 3,
    noise_multiplier: float = 1.0,
    method: str = "augpe",
    name: str | None = None,
    private_path: str | None = None,
    guarantee: Mapping[str, Any] | None = None,
    seconds: Mapping[str, float] | None = None,
) -> Path:
    """Write a complete fabricated run under ``root`` and return its path.

    ``private`` and ``pool`` must share label columns; ``num_samples`` is split evenly over the label
    combinations of ``private``. ``seconds`` sets per-iteration stage times written to metrics.json
    (default generation 2.0, embedding 0.5, voting 0.1).
    """
    cols = private.label_columns
    if set(pool.label_columns) != set(cols):
        raise DataError(f"pool labels {pool.label_columns} differ from private labels {cols}")
    emb = resolve_embedder("hashing")
    run = RunDir(root).create()
    keys_priv = private.label_tuples(cols)
    keys_pool = pool.label_tuples(cols)
    label_keys = sorted(set(keys_priv))
    per_label = max(1, num_samples // max(1, len(label_keys)))
    pool_emb = emb.embed(list(pool.texts))
    priv_emb = emb.embed(list(private.texts))
    secs = {"generation": 2.0, "embedding": 0.5, "voting": 0.1, **dict(seconds or {})}
    g = dict(guarantee or {"kind": "noise", "noise_multiplier": noise_multiplier})

    config = {
        "method": method, "seed": 0, "name": name or Path(root).name,
        "data": {"private": private_path or "private.csv", "public": None, "text_column": "text",
                 "label_columns": cols},
        "generator": {"backend": "fake"}, "embedder": {"backend": "hashing", "cache": False},
        "privacy": {"noise_multiplier": noise_multiplier},
        "evolution": {"num_samples": num_samples, "iterations": iterations, "variations": variations},
        "output": str(root),
    }
    import yaml

    atomic_write_text(run.config, yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    stages: dict[str, dict[str, float]] = {}
    per_iteration: dict[str, dict[str, dict[str, float]]] = {}
    llm_calls = 0
    survivors: list[int] = []  # pool indices
    uid = 0
    for t in range(iterations):
        rows: list[dict[str, Any]] = []
        for key in label_keys:
            idx_pool = [i for i, k in enumerate(keys_pool) if k == key]
            if not idx_pool:
                raise DataError(f"pool has no record with label {key}")
            if t == 0:
                take = rng.choice(idx_pool, size=min(len(idx_pool), per_label * variations), replace=False)
                cand: list[tuple[int, str, str | None]] = [(int(i), "random", None) for i in take]
            else:
                mine = [s for s in survivors if keys_pool[s] == key]
                cand = [(s, "survivor", f"c{s}") for s in mine]
                others = np.array(idx_pool)
                for s in mine:
                    d = ((pool_emb[others] - pool_emb[s]) ** 2).sum(1)
                    near = others[np.argsort(d)[1:variations]]
                    cand += [(int(j), "variation", f"c{s}") for j in near]
                seen: set[int] = set()
                cand = [c for c in cand if not (c[0] in seen or seen.add(c[0]))]  # type: ignore[func-returns-value]
            llm_calls += sum(1 for c in cand if c[1] != "survivor")
            for i, origin, parent in cand:
                rows.append({"pool": i, "key": key, "origin": origin, "parent": parent})
        cemb = pool_emb[[r["pool"] for r in rows]]
        votes = np.zeros(len(rows))
        for key in label_keys:
            cm = np.array([r["key"] == key for r in rows])
            pm = np.array([k == key for k in keys_priv])
            if not pm.any():
                continue
            ci = np.flatnonzero(cm)
            d = ((priv_emb[pm][:, None, :] - cemb[ci][None, :, :]) ** 2).sum(-1)
            np.add.at(votes, ci[d.argmin(1)], 1.0)
        votes = votes + rng.normal(0.0, noise_multiplier, size=votes.shape)
        selected = np.zeros(len(rows), dtype=bool)
        for key in label_keys:
            ci = np.flatnonzero([r["key"] == key for r in rows])
            selected[ci[np.argsort(-votes[ci], kind="stable")[:per_label]]] = True
        survivors = [rows[i]["pool"] for i in np.flatnonzero(selected)]
        import pandas as pd

        df = pd.DataFrame({
            "id": [f"c{r['pool']}" if r["origin"] != "variation" else f"c{r['pool']}.{t}.{uid + i}"
                   for i, r in enumerate(rows)],
            "text": [pool.texts[r["pool"]] for r in rows],
            **{c: [r["key"][j] for r in rows] for j, c in enumerate(cols)},
            "origin": [r["origin"] for r in rows],
            "parent": [r["parent"] for r in rows],
            "votes": votes.astype(np.float64),
            "selected": selected,
        })
        uid += len(rows)
        ck = run.checkpoint(t)
        ck.mkdir(parents=True, exist_ok=True)
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), ck / "candidates.parquet")
        _npy(ck / "embeddings.npy", cemb.astype(np.float32))
        _npy(ck / "histogram.npy", votes.astype(np.float64))
        atomic_write_json(ck / "state.json", {"iteration": t, "sigma": noise_multiplier, "n_candidates": len(rows),
                                              "n_selected": int(selected.sum())})
        atomic_write_text(ck / "COMPLETE", "")
        append_jsonl(run.ledger, {"event": "gaussian", "noise_multiplier": noise_multiplier, "iteration": t})
        for r in rows[:3]:
            append_jsonl(run.prompts, {"t": float(t), "backend": "fake", "operation": r["origin"],
                                       "prompt": f"write a review ({' | '.join(r['key'])})", "meta": {}})
        for st, sec in secs.items():
            agg = stages.setdefault(st, {"seconds": 0.0, "calls": 0.0})
            agg["seconds"] += sec
            agg["calls"] += 1
            per_iteration.setdefault(str(t), {})[st] = {"seconds": sec}
        run.log(f"iteration {t}: {len(rows)} candidates, {int(selected.sum())} selected")
    final = [r for r, s in zip(rows, selected, strict=True) if s]
    lines = []
    import json

    for r in final:
        rec = {"id": f"s{r['pool']}", "text": pool.texts[r["pool"]]}
        rec.update({c: r["key"][j] for j, c in enumerate(cols)})
        lines.append(json.dumps(rec, ensure_ascii=False))
    atomic_write_text(run.synthetic, "".join(line + "\n" for line in lines))
    wall = sum(v["seconds"] for v in stages.values()) + 0.25
    atomic_write_json(run.metrics, {
        "stages": stages, "per_iteration": per_iteration,
        "counters": {"llm_calls": llm_calls, "prompt_tokens": 40 * llm_calls, "completion_tokens": 60 * llm_calls},
        "wall_seconds": wall,
    })
    atomic_write_json(run.privacy, {
        "method": method, "guarantee": g,
        "statement": ("Fabricated test run: no privacy guarantee. Votes carry Gaussian noise of standard deviation "
                      f"{noise_multiplier} but nothing was accounted."),
        "noise_multiplier": noise_multiplier, "iterations": iterations,
        "prompt_audit": {"prompts_checked": 3 * iterations, "clean": True},
    })
    return run.root


def toy_corpora(*, rng: np.random.Generator, n_private: int = 40, n_pool: int = 200,
                topics: Sequence[str] = ("food", "hotel")) -> tuple[Corpus, Corpus, Corpus]:
    """Short labelled texts for tests: (private, pool, real test). Private/real texts are on-topic; the pool
    mixes on-topic texts with generic filler, so selection by votes has something to find."""
    words = {
        "food": ["pizza", "pasta", "waiter", "dessert", "menu", "delicious", "chef", "sauce", "tasty", "dinner"],
        "hotel": ["room", "bed", "lobby", "checkin", "suite", "pool", "towels", "staff", "quiet", "breakfast"],
        "shop": ["store", "price", "cashier", "shelf", "bargain", "aisle", "brand", "receipt", "sale", "mall"],
    }
    filler = ["thing", "place", "stuff", "went", "there", "okay", "maybe", "again", "really", "time", "day", "way"]
    moods = {"good": ["great", "lovely", "excellent", "friendly"], "bad": ["awful", "rude", "dirty", "terrible"]}

    def make(n: int, on_topic: float, name: str) -> Corpus:
        texts, cat, mood = [], [], []
        for _ in range(n):
            tp = str(rng.choice(list(topics)))
            md = str(rng.choice(list(moods)))
            k = int(rng.integers(6, 14))
            pool_words = words[tp] if rng.random() < on_topic else filler
            ws = list(rng.choice(pool_words, size=k)) + list(rng.choice(moods[md], size=2))
            rng.shuffle(ws)
            texts.append(" ".join(ws).capitalize() + ".")
            cat.append(tp)
            mood.append(md)
        ids = [f"{name}{i}" for i in range(n)]
        return Corpus.from_texts(texts, {"category": cat, "mood": mood}, ids=ids, name=name)

    return make(n_private, 1.0, "priv"), make(n_pool, 0.5, "pool"), make(n_private, 1.0, "real")


__all__ = ["toy_corpora", "write_fake_run"]
