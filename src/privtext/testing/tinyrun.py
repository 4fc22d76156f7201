"""A real tiny run for tests and examples: the actual runner on toy corpora with the scripted generator and the
hashing embedder (both real implementations of their protocols), in a second or two.

Use it wherever a test needs a run directory (evaluation, comparison, reports): it has exactly the layout, ledger
and statement that ``privtext run`` writes, because it is ``privtext run``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..data.corpus import Corpus


def tiny_run(
    root: str | os.PathLike[str],
    *,
    private: Corpus,
    public: Corpus,
    method: str = "augpe",
    privacy: Mapping[str, Any] | None = None,
    num_samples: int = 20,
    iterations: int = 3,
    variations: int = 3,
    seed: int = 0,
    name: str | None = None,
    **sections: Any,
) -> Path:
    """Run ``method`` on ``private`` with ``public`` text into ``root`` and return the run directory.

    The corpora are written next to ``root`` (``<root>.private.csv``, ``<root>.public.csv``); the scripted
    generator draws from the public corpus's words. ``privacy`` defaults to ``{mu: 1}`` (``{secret: ...}`` for
    SecPE); ``sections`` override whole config sections (e.g. ``evolution={...}``, ``secpe={...}``); ``num_samples``
    and ``label_distribution`` given in ``evolution`` (their place before ``synthesis:``) go to ``synthesis``.
    """
    from ..config import config_from_dict
    from ..data import write_corpus
    from ..methods import describe
    from ..runner import run_config

    root = Path(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    priv_path, pub_path = Path(f"{root}.private.csv"), Path(f"{root}.public.csv")
    write_corpus(private, priv_path)
    write_corpus(public, pub_path)
    words = sorted({w.strip(".,").lower() for t in public.texts for w in t.split()} - {""})
    raw: dict[str, Any] = {
        "method": method, "seed": seed, "name": name or root.name,
        "data": {"private": str(priv_path), "public": str(pub_path), "label_columns": list(private.label_columns)},
        "generator": {"backend": "scripted", "vocabulary": words or ["text"]},
        "embedder": {"backend": "hashing", "dim": 64, "cache": False},
        "privacy": dict(privacy or ({"secret": {"p": 1e-3, "r": 2e-2}} if describe(method).guarantee == "secret"
                                    else {"mu": 1.0})),
        "synthesis": {"num_samples": num_samples},
        "evolution": {"iterations": iterations, "variations": variations},
        "output": str(root),
    }
    evolution = sections.get("evolution")
    if isinstance(evolution, Mapping) and {"num_samples", "label_distribution"} & set(evolution):
        # the keys' old place: moved to synthesis: here, as the config loader would (without its deprecation note,
        # and without a conflict with this helper's own synthesis.num_samples)
        evolution = dict(evolution)
        moved = {k: evolution.pop(k) for k in ("num_samples", "label_distribution") if k in evolution}
        sections = {**sections, "evolution": evolution, "synthesis": {**moved, **sections.get("synthesis", {})}}
    for k, v in sections.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, Mapping) and isinstance(raw.get(k), dict) else v
    return run_config(config_from_dict(raw))


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




def method_runs(root: str | os.PathLike[str], *, private: Corpus, public: Corpus,
                augpe_iterations: int = 2) -> dict[str, Path]:
    """One small run of each of the four prompting methods on the same corpora (``root/<method>``): Aug-PE at
    (4, 1e-5), SecPE, WASP with two scripted generators (Q = 3), DP-KPS at pure ε = 6 with DP labels on a
    declared schema — the release-shaped runs the release-scan and report tests inspect."""
    root = Path(root)
    gens = [{"backend": "scripted", "name": "a", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
            {"backend": "scripted", "name": "b", "vocabulary": ["thing", "stuff", "went", "okay"]}]
    return {
        "augpe": tiny_run(root / "augpe", private=private, public=public, iterations=augpe_iterations,
                          privacy={"epsilon": 4.0, "delta": 1e-5}),
        "secpe": tiny_run(root / "secpe", private=private, public=public, method="secpe", iterations=2),
        "wasp": tiny_run(root / "wasp", private=private, public=public, method="wasp", num_samples=60,
                         iterations=3, generators=gens, privacy={"epsilon": 4.0, "delta": 1e-5},
                         wasp={"q": 3, "in_context": 4}),
        "dpkps": tiny_run(root / "dpkps", private=private, public=Corpus(public.ids, public.texts, {}, name="pool"),
                          method="dpkps", num_samples=16, privacy={"epsilon": 6.0},
                          data={"label_values": {"category": ["food", "hotel"], "mood": ["good", "bad"]}},
                          evolution={"label_distribution": {"kind": "dp", "budget_fraction": 0.1}},
                          dpkps={"vocab_size": 20, "length": 4, "n_features": 32, "vocabulary_min_count": 3}),
    }


def run_private_side(run: str | os.PathLike[str]) -> tuple[Any, dict[str, Any], np.ndarray, np.ndarray]:
    """For tests that recompute a run's exact (noise-free) statistics: the run directory, its resolved config,
    the private embeddings (the run's embedder, float32) and the private label groups (the public label space)."""
    import yaml

    from ..data import load_corpus
    from ..data.labels import LabelSpace
    from ..embed import build_embedder
    from ..rundir import RunDir

    rd = RunDir(run)
    cfg = yaml.safe_load(rd.resolved_config().read_text())
    emb = build_embedder(cfg["embedder"])
    cols = cfg["data"]["label_columns"]
    space = LabelSpace(tuple(cols), tuple(sorted(set(load_corpus(cfg["data"]["public"], label_columns=cols)
                                                     .label_tuples(cols)))))
    private = load_corpus(cfg["data"]["private"], label_columns=cols)
    pe = np.asarray(emb.embed(list(private.texts)), dtype=np.float32)
    return rd, cfg, pe, space.groups_of(private.label_tuples(cols))


__all__ = ["run_private_side", "tiny_run", "toy_corpora"]
