"""data.label_values: a public label schema for labelled private data and unlabelled public text, for every
method (Aug-PE, SecPE, DP-KPS)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privtext.config import config_from_dict
from privtext.data import Corpus, load_corpus
from privtext.errors import ConfigError, DataError
from privtext.testing.tinyrun import tiny_run, toy_corpora

SCHEMA = {"category": ["food", "hotel"], "mood": ["good", "bad"]}


def _unlabelled(c: Corpus) -> Corpus:
    return Corpus(c.ids, c.texts, {}, name=c.name)


def _run(tmp: Path, method: str, *, private: Corpus | None = None, label_values: Any = SCHEMA,
         **kw: Any) -> Path:
    rng = np.random.default_rng(3)
    priv, pool, _ = toy_corpora(rng=rng, n_private=40, n_pool=150)
    if method == "secpe":  # secrets in some records (the rest become public)
        texts = [t + (f" mail user{i % 3}@example.org" if i % 2 == 0 else "") for i, t in enumerate(priv.texts)]
        priv = Corpus(priv.ids, tuple(texts), priv.labels, name="priv")
    extra: dict[str, Any] = {"dpkps": {"vocab_size": 20, "length": 4, "n_features": 32}} if method == "dpkps" else {}
    privacy = {"epsilon": 6.0} if method == "dpkps" else None
    sections = {"evolution": {"label_distribution": {"kind": "uniform"}}, **extra, **kw}
    return tiny_run(tmp / method, private=private or priv, public=_unlabelled(pool), method=method,
                    privacy=privacy, num_samples=12, iterations=2, data={"label_values": label_values},
                    **sections)


@pytest.mark.parametrize("method", ["augpe", "secpe", "dpkps"])
def test_labelled_private_unlabelled_public_runs_end_to_end(tmp_path: Path, method: str) -> None:
    run = _run(tmp_path, method)
    syn = load_corpus(run / "synthetic.jsonl", label_columns=["category", "mood"])
    assert len(syn) >= 4
    combos = set(syn.label_tuples(["category", "mood"]))
    assert combos <= {(c, m) for c in SCHEMA["category"] for m in SCHEMA["mood"]}
    assert len(combos) == 4  # uniform shares: every declared combination gets samples
    st = json.loads((run / "privacy.json").read_text())
    assert st["prompt_audit"]["passed"]


def test_undeclared_private_label_is_a_data_error_that_does_not_print_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"a private record has a label not in data\.label_values") as e:
        _run(tmp_path, "augpe", label_values={"category": ["food"], "mood": ["good", "bad"]})
    assert "hotel" not in str(e.value)


def test_public_label_distribution_needs_labelled_public_text(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"label_distribution\.kind=public needs labelled public text"):
        _run(tmp_path, "augpe", evolution={"label_distribution": {"kind": "public"}})
    assert not (tmp_path / "augpe").exists()  # refused before the run directory exists (issue 35, item 4)


def test_label_values_config_checks() -> None:
    base = {"data": {"private": "p.csv"}, "privacy": {"mu": 1.0}}
    cfg = config_from_dict({**base, "data": {"private": "p.csv", "label_columns": ["stars"],
                                             "label_values": {"stars": [1.0, 2.0]}}})
    assert cfg.data.label_columns == ["stars"] and cfg.data.label_values == {"stars": ["1.0", "2.0"]}
    # a label declared in one place and absent from the other is an error naming the column and the fix
    with pytest.raises(ConfigError, match=r"declares the column\(s\) \['intent'\] but data\.label_columns is not "
                                          r"set: add data\.label_columns: \[intent\]"):
        config_from_dict({**base, "data": {"private": "p.csv", "label_values": {"intent": ["a", "b"]}}})
    with pytest.raises(ConfigError, match=r"\['b'\] that data\.label_columns \['a'\] does not list"):
        config_from_dict({**base, "data": {"private": "p.csv", "label_columns": ["a"], "label_values": {"b": ["x"]}}})
    with pytest.raises(ConfigError, match=r"lists \['channel'\] but data\.label_values gives no values for it: add "
                                          r"data\.label_values\.channel"):
        config_from_dict({**base, "data": {"private": "p.csv", "label_columns": ["intent", "channel"],
                                           "label_values": {"intent": ["a"]}}})
    with pytest.raises(ConfigError, match="more than once"):
        config_from_dict({**base, "data": {"private": "p.csv", "label_columns": ["a"],
                                           "label_values": {"a": ["x", "x"]}}})
    with pytest.raises(ConfigError, match="is empty"):
        config_from_dict({**base, "data": {"private": "p.csv", "label_columns": ["a"], "label_values": {"a": []}}})


def test_shared_initial_pool_offers_every_candidate_to_every_label(tmp_path: Path) -> None:
    """evolution.initial_pool: shared — one unconditioned pool of Σ n_g·m texts (one generator call each, no label
    in the call), copied into every label group; each group selects its n_g among the whole pool."""
    from privtext.evaluate.runinfo import RunView

    run = _run(tmp_path, "augpe", evolution={"label_distribution": {"kind": "uniform"}, "initial_pool": "shared",
                                             "initial_multiplier": 3, "variations": 1, "iterations": 1})
    df = RunView(run).candidates(0)
    groups = df.groupby(["category", "mood"])["text"].apply(list)
    assert len(groups) == 4
    pool = groups.iloc[0]
    assert len(pool) == 12 * 3  # Σ n_g·m = N·m: every group holds the whole pool
    assert all(sorted(g) == sorted(pool) for g in groups)
    prompts = [json.loads(x) for x in (run / "prompts.jsonl").read_text().splitlines()]
    assert len([p for p in prompts if p["operation"] == "random"]) == 36  # generated once, not per group
    assert all("label" not in p.get("meta", {}) for p in prompts)
    syn = load_corpus(run / "synthetic.jsonl", label_columns=["category", "mood"])
    assert len(syn) == 12 and set(syn.texts) <= set(pool)


def test_auto_pool_is_shared_for_an_ngram_model_of_unlabelled_text(tmp_path: Path) -> None:
    """initial_pool: auto (default) — the n-gram model of unlabelled public text cannot condition on a label, so
    every label group votes over one shared pool; a label-conditioned generator (scripted) keeps per-label pools."""
    import yaml

    from privtext.evaluate.runinfo import RunView
    from privtext.runner import run_config

    evo = {"label_distribution": {"kind": "uniform"}, "initial_multiplier": 3, "variations": 1, "iterations": 1}
    sc = _run(tmp_path / "sc", "augpe", evolution=evo)
    groups = RunView(sc).candidates(0).groupby(["category", "mood"])["text"].apply(sorted)
    assert len(groups) == 4 and len(groups.iloc[0]) == 9 and groups.iloc[0] != groups.iloc[1]
    raw = yaml.safe_load((sc / "private" / "config.yaml").read_text())
    raw["generator"] = {"backend": "ngram", "order": 3}
    raw["output"] = str(tmp_path / "ng")
    ng = run_config(config_from_dict(raw))
    groups = RunView(ng).candidates(0).groupby(["category", "mood"])["text"].apply(sorted)
    assert len(groups) == 4 and all(g == groups.iloc[0] for g in groups)
    assert "shared pool of 36" in (ng / "private" / "log.txt").read_text()


def test_a_selection_that_keeps_every_candidate_is_flagged(tmp_path: Path) -> None:
    """One iteration, initial_multiplier 1, rank selection: every candidate is selected, the votes change nothing
    (the first dpkps_compare measurement); the run log says so. With m = 3 it does not."""
    evo = {"label_distribution": {"kind": "uniform"}, "initial_multiplier": 1, "variations": 1, "iterations": 1}
    run = _run(tmp_path / "m1", "augpe", evolution=evo)
    assert "the votes do not change the output" in (run / "private" / "log.txt").read_text()
    run = _run(tmp_path / "m3", "augpe", evolution={**evo, "initial_multiplier": 3})
    assert "the votes do not change the output" not in (run / "private" / "log.txt").read_text()
