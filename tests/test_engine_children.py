"""The engine's candidate building: each variation keeps its own embedding and parent, whatever the order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from privtext.config import EvolutionConfig
from privtext.data.labels import LabelSpace
from privtext.data.population import Population
from privtext.embed import build_embedder
from privtext.engine.loop import Engine
from privtext.generate import GeneratorContext, build_generator
from privtext.rundir import RunDir, StageMetrics


def _engine(tmp_path: Path, variations: int = 3) -> tuple[Engine, object]:
    space = LabelSpace(("y",), (("a",), ("b",), ("c",)))
    gen = build_generator({"backend": "scripted"}, GeneratorContext(label_columns=("y",)))
    emb = build_embedder({"backend": "hashing", "dim": 32, "cache": False})
    eng = Engine(run=RunDir(tmp_path), evolution=EvolutionConfig(variations=variations, iterations=2),
                 generator=gen, embedder=emb, scorer=None, labels=space,  # type: ignore[arg-type]
                 counts=np.array([2, 2, 2]), metrics=StageMetrics(), seed=0)
    return eng, emb


def test_children_of_an_interleaved_selection(tmp_path: Path) -> None:
    eng, emb = _engine(tmp_path)
    texts = [f"parent text number {i} about topic {i % 3}" for i in range(6)]
    prev = Population(ids=[f"p{i}" for i in range(6)], texts=texts, group=np.array([2, 0, 1, 2, 0, 1]),
                      origin=["random"] * 6, parent=[None] * 6, generator=["scripted"] * 6,
                      emb=emb.embed(texts))
    selected = np.array([0, 1, 2, 3, 4, 5])  # groups 2, 0, 1, 2, 0, 1: not sorted by group
    pop = eng._children(1, prev, selected, reuse={})
    assert len(pop) == 6 * 3  # 6 survivors + 2 variations each
    np.testing.assert_allclose(pop.emb, emb.embed(pop.texts), atol=1e-6)
    for i in range(len(pop)):
        if pop.origin[i] == "variation":
            parent = int(pop.parent[i][1:])
            assert pop.group[i] == prev.group[parent]
    kids = [p for p, o in zip(pop.parent, pop.origin, strict=True) if o == "variation"]
    assert sorted(kids) == sorted([f"p{i}" for i in range(6)] * 2)


def test_children_reuse_lookahead_variations(tmp_path: Path) -> None:
    eng, emb = _engine(tmp_path, variations=4)
    texts = ["alpha beta gamma", "delta epsilon zeta"]
    prev = Population(ids=["p0", "p1"], texts=texts, group=np.array([1, 0]), origin=["random"] * 2,
                      parent=[None] * 2, generator=["scripted"] * 2, emb=emb.embed(texts))
    looked = ["alpha beta variant one", "alpha beta variant two"]
    reuse = {"p0": (looked, emb.embed(looked))}
    pop = eng._children(1, prev, np.array([0, 1, 0]), reuse=reuse)
    # p0 selected twice: its first occurrence reuses both lookahead texts and makes one more; the second
    # occurrence gets three fresh variations
    kids_p0 = [t for t, p, o in zip(pop.texts, pop.parent, pop.origin, strict=True) if p == "p0" and o == "variation"]
    assert kids_p0[:2] == looked and len(kids_p0) == 6
    np.testing.assert_allclose(pop.emb, emb.embed(pop.texts), atol=1e-6)
