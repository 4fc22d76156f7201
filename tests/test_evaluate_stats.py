"""Length distributions, vote distributions, runtime split and secret exposure."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privtext.errors import DataError
from privtext.evaluate.lengths import length_distribution, text_lengths
from privtext.evaluate.runstats import (
    gini,
    load_secrets,
    runtime_split,
    secret_exposure,
    stage_group,
    vote_distribution,
)


def _texts(lengths: np.ndarray) -> list[str]:
    return [" ".join(["w"] * int(k)) for k in lengths]


def test_identical_length_distributions_have_zero_distance(rng: np.random.Generator) -> None:
    t = _texts(rng.integers(1, 80, size=200))
    r = length_distribution(t, t)
    assert r.wasserstein == 0.0 and r.ks_statistic == 0.0
    assert r.synthetic_hist == r.real_hist
    assert sum(r.synthetic_hist) == pytest.approx(1.0) and len(r.bin_edges) == 31


def test_length_shift_is_the_wasserstein_distance(rng: np.random.Generator) -> None:
    base = rng.integers(5, 60, size=300)
    for k in (1, 4, 10):
        r = length_distribution(_texts(base + k), _texts(base))
        assert r.wasserstein == pytest.approx(k)
        assert r.synthetic_mean - r.real_mean == pytest.approx(k)
    far = length_distribution(_texts(base + 100), _texts(base))
    assert far.ks_statistic == 1.0 and far.ks_pvalue < 1e-10


def test_length_units_and_errors() -> None:
    assert text_lengths(["ab cd", "x"], unit="chars").tolist() == [5, 1]
    assert text_lengths(["ab cd", "x"]).tolist() == [2, 1]
    with pytest.raises(DataError, match="unit"):
        text_lengths(["a"], unit="tokens")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="non-empty"):
        length_distribution([], ["a"])


def test_gini() -> None:
    assert gini(np.ones(10)) == pytest.approx(0.0)
    assert gini(np.array([0.0] * 9 + [5.0])) == pytest.approx(0.9)
    assert gini(np.zeros(4)) == 0.0


def test_vote_distribution_per_label() -> None:
    df = pd.DataFrame({
        "text": [f"t{i}" for i in range(8)],
        "cat": ["a"] * 5 + ["b"] * 3,
        "stars": ["1"] * 8,
        "votes": [3.0, 0.0, 1.0, -0.5, 6.0, 2.0, 2.0, 0.0],
        "selected": [True, False, False, False, True, True, False, False],
    })
    d = vote_distribution(df, label_columns=["cat", "stars"])
    assert set(d) == {"a | 1", "b | 1"}
    a = d["a | 1"]
    assert a["sorted_votes"] == [6.0, 3.0, 1.0, 0.0, -0.5]
    assert a["n_candidates"] == 5 and a["n_selected"] == 2 and a["total_votes"] == 10.0
    assert a["top10_share"] == pytest.approx(0.6) and a["zero_share"] == pytest.approx(0.4)
    assert d["b | 1"]["max_votes"] == 2.0
    with pytest.raises(DataError, match="votes"):
        vote_distribution(df.drop(columns=["votes"]), label_columns=["cat"])


def test_vote_distribution_downsamples_long_tails() -> None:
    df = pd.DataFrame({"text": ["x"] * 1000, "votes": np.arange(1000.0), "selected": [False] * 1000})
    d = vote_distribution(df, label_columns=[], max_points=100)["(all)"]
    assert len(d["sorted_votes"]) == 100 and d["sorted_votes_step"] == 10 and d["sorted_votes"][0] == 999.0


def test_runtime_split_groups_stages_and_reads_both_counter_styles() -> None:
    metrics = {
        "stages": {"generation": {"seconds": 10.0}, "embedding": {"seconds": 4.0},
                   "embedding_private": {"seconds": 1.0}, "voting": {"seconds": 2.0},
                   "selection": {"seconds": 0.5}, "loading": {"seconds": 0.25}, "setup_generator": {"seconds": 1.0}},
        "per_iteration": {"1": {"generation": {"seconds": 6.0}, "voting": {"seconds": 1.0}},
                          "0": {"generation": {"seconds": 4.0}, "clustering": {"seconds": 1.5}}},
        "counters": {"llm_calls": 7, "llm_prompt_tokens": 100, "llm_completion_tokens": 300},
        "wall_seconds": 20.0,
    }
    r = runtime_split(metrics)
    assert r["groups"] == {"generation": 11.0, "embedding": 5.0, "histogram": 2.5, "other": 0.25}
    assert sum(r["fractions"].values()) == pytest.approx(1.0)
    assert list(r["per_iteration"]) == ["0", "1"] and r["per_iteration"]["0"]["histogram"] == 1.5
    assert (r["llm_calls"], r["prompt_tokens"], r["completion_tokens"]) == (7, 100, 300)
    assert r["wall_seconds"] == 20.0
    r2 = runtime_split({"counters": {"prompt_tokens": 5, "completion_tokens": 6}})
    assert (r2["prompt_tokens"], r2["completion_tokens"], r2["wall_seconds"]) == (5, 6, 0.0)
    assert stage_group("kmeans") == "histogram" and stage_group("write_checkpoint") == "other"


def test_secret_exposure_counts_whole_words_case_insensitively() -> None:
    secrets = ["Ann Lee", "MRN-0042", "ann", "never"]
    syn = ["Patient ann lee came back.", "annual visit, ANN was fine", "id mrn-0042 on file", "nothing here"]
    base = ["generic ann text", "nothing"]
    r = secret_exposure(syn, secrets, baseline=base)
    # 'ann' inside 'annual' does not count; 'Ann Lee' and 'ann' both count in the first text
    assert r.n_secrets == 4 and r.exposed == 3 and r.exposed_rate == 0.75
    assert r.records_with_secret == 3 and r.record_rate == 0.75
    assert r.baseline_exposed == 1 and r.baseline_rate == 0.25 and r.baseline_records_with_secret == 1
    assert r.examples == []
    assert secret_exposure(syn, secrets, show=10).examples == ["ann", "ann lee", "mrn-0042"]
    strict = secret_exposure(syn, secrets, case_sensitive=True)
    assert strict.exposed == 1  # only 'ann' occurs in its declared case
    # a secret inside a longer secret that matched at the same place is counted too
    nested = secret_exposure(["met ann lee today"], ["ann", "ann lee", "lee"])
    assert nested.exposed == 3 and nested.records_with_secret == 1
    with pytest.raises(DataError, match="at least one"):
        secret_exposure(syn, ["", "  "])


def test_load_secrets_formats(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("Ann Lee\n\nMRN-1\n", encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps(["x", "y"]), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps({"name": ["Ann"], "mrn": ["1", "2"]}), encoding="utf-8")
    (tmp_path / "d.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    assert load_secrets(str(tmp_path / "a.txt")) == ["Ann Lee", "MRN-1"]
    assert load_secrets(str(tmp_path / "b.json")) == ["x", "y"]
    assert load_secrets(str(tmp_path / "c.json")) == ["Ann", "1", "2"]
    with pytest.raises(DataError, match="must be strings"):
        load_secrets(str(tmp_path / "d.json"))
    with pytest.raises(DataError, match="no such secrets file"):
        load_secrets(str(tmp_path / "missing.txt"))
